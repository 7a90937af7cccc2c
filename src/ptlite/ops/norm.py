"""Normalization: batch, layer, group and instance norm (inference semantics)."""

DECLARATIONS = r"""
aten::batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var,
    bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor
aten::native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var,
    bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)
aten::_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean,
    Tensor(b!) running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)
aten::_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, float momentum,
    float eps) -> (Tensor, Tensor, Tensor)
aten::_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean,
    Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)
aten::layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None,
    float eps=1.0000000000000001e-05, bool cudnn_enable=True) -> Tensor
aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
    float eps) -> (Tensor, Tensor, Tensor)
aten::group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None,
    float eps=1.0000000000000001e-05, bool cudnn_enabled=True) -> Tensor
aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group,
    float eps) -> (Tensor, Tensor, Tensor)
aten::instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var,
    bool use_input_stats, float momentum, float eps, bool cudnn_enabled) -> Tensor
"""
