"""Recurrent layers (LSTM, GRU, Elman RNN) and their single-step cells."""

DECLARATIONS = r"""
aten::lstm.input(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout,
    bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)
aten::gru.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout,
    bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)
aten::rnn_tanh.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout,
    bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)
aten::rnn_relu.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout,
    bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)
aten::lstm_cell(Tensor input, Tensor[] hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None,
    Tensor? b_hh=None) -> (Tensor, Tensor)
aten::gru_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> Tensor
aten::rnn_tanh_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None,
    Tensor? b_hh=None) -> Tensor
aten::rnn_relu_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None,
    Tensor? b_hh=None) -> Tensor
"""
