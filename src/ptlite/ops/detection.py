"""Object detection: torchvision's operators (non-maximum suppression, RoI Align), as torchvision declares them."""

DECLARATIONS = r"""
torchvision::nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor  @dtypes(float32,float64)
torchvision::roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width,
    int sampling_ratio, bool aligned) -> Tensor  @dtypes(float16,float32,float64) @ranks(4)
"""
