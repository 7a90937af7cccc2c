"""Activations (the relu family, hard*, sigmoid, gelu, softmax, clamp, ...) and dropout."""

DECLARATIONS = r"""
aten::relu(Tensor self) -> Tensor  @out @rank(input)
aten::relu_(Tensor(a!) self) -> Tensor(a!)  @rank(input)
aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor  @out @rank(input)
aten::hardtanh_(Tensor(a!) self, Scalar min_val=-1, Scalar max_val=1) -> Tensor(a!)  @rank(input)
aten::relu6(Tensor self) -> Tensor  @out
aten::relu6_(Tensor(a!) self) -> Tensor(a!)
aten::hardswish(Tensor self) -> Tensor  @out
aten::hardswish_(Tensor(a!) self) -> Tensor(a!)
aten::hardsigmoid(Tensor self) -> Tensor  @out
aten::hardsigmoid_(Tensor(a!) self) -> Tensor(a!)
aten::sigmoid(Tensor self) -> Tensor  @out
aten::sigmoid_(Tensor(a!) self) -> Tensor(a!)
aten::silu(Tensor self) -> Tensor  @out
aten::silu_(Tensor(a!) self) -> Tensor(a!)
aten::tanh(Tensor self) -> Tensor  @out
aten::tanh_(Tensor(a!) self) -> Tensor(a!)
aten::mish(Tensor self) -> Tensor  @out
aten::mish_(Tensor(a!) self) -> Tensor(a!)
aten::gelu(Tensor self, *, str approximate="none") -> Tensor
aten::gelu_(Tensor(a!) self, *, str approximate="none") -> Tensor(a!)
aten::elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor
aten::elu_(Tensor(a!) self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor(a!)
aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor
aten::leaky_relu_(Tensor(a!) self, Scalar negative_slope=0.01) -> Tensor(a!)
aten::softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor
aten::prelu(Tensor self, Tensor weight) -> Tensor
aten::_prelu_kernel(Tensor self, Tensor weight) -> Tensor
aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor
aten::log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor
aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor
aten::_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor
aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor
aten::clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor
aten::clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)
aten::clamp_.Tensor(Tensor(a!) self, Tensor? min=None, Tensor? max=None) -> Tensor(a!)
aten::clamp_min(Tensor self, Scalar min) -> Tensor
aten::clamp_min.Tensor(Tensor self, Tensor min) -> Tensor
aten::clamp_max(Tensor self, Scalar max) -> Tensor
aten::clamp_max.Tensor(Tensor self, Tensor max) -> Tensor
aten::clamp_min_(Tensor(a!) self, Scalar min) -> Tensor(a!)
aten::clamp_min_.Tensor(Tensor(a!) self, Tensor min) -> Tensor(a!)
aten::clamp_max_(Tensor(a!) self, Scalar max) -> Tensor(a!)
aten::clamp_max_.Tensor(Tensor(a!) self, Tensor max) -> Tensor(a!)
aten::dropout(Tensor input, float p, bool train) -> Tensor  @random @aliases
aten::feature_dropout(Tensor input, float p, bool train) -> Tensor  @random @aliases
aten::alpha_dropout(Tensor input, float p, bool train) -> Tensor  @random @aliases
aten::feature_alpha_dropout(Tensor input, float p, bool train) -> Tensor  @random @aliases
aten::dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)  @random
aten::feature_dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)  @random
aten::alpha_dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)  @random
aten::feature_alpha_dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)  @random
aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)  @random
"""
