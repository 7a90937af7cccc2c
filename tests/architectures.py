"""The torchvision architectures tests/test_architectures.py runs (no torch import: docs/models.md is checked
against this table by tests/test_docs.py)."""

# name -> (input size, what it brings); the transformers take only their training size
ARCHITECTURES = {
    "convnext_tiny": (128, "layer norm over the channels of an NHWC permute, GELU, layer scale"),
    "swin_t": (224, "shifted windows (roll, window partition), relative position bias"),
    "vit_b_16": (224, "patch embedding, class token, nn.MultiheadAttention"),
    "maxvit_t": (224, "MBConv with block and grid attention"),
    "regnet_y_400mf": (128, "grouped 3x3 convolutions, squeeze-excitation with ReLU"),
    "efficientnet_v2_s": (128, "fused MBConv (3x3 expansion), SiLU"),
    "inception_v3": (299, "1x7 / 7x1 convolutions, average pooling with padding, channel concatenation"),
    "resnext50_32x4d": (128, "32-group bottlenecks"),
    "mnasnet1_0": (128, "5x5 depthwise convolutions, blocks without activation after projection"),
}
