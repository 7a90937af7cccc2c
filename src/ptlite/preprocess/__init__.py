"""Turn what an app has (image files, camera frames) into the float32 tensors a model expects, without torch.

`image`: an image file or PIL image, resized, centre-cropped and normalized as torchvision's evaluation transforms.
`camera`: camera frames and bitmaps (RGBA/BGRA/RGB, YUV 4:2:0) rotated, cropped and normalized in NumPy alone.
`spec`: the preprocessing a model file records (`Preprocessing`), applied to images and frames alike.
"""

from __future__ import annotations

from .camera import rgba_to_tensor, yuv420_to_tensor
from .image import IMAGENET_MEAN, IMAGENET_STD, load_image, preprocess_image
from .spec import IMAGENET, Preprocessing

__all__ = ["IMAGENET", "IMAGENET_MEAN", "IMAGENET_STD", "Preprocessing", "load_image", "preprocess_image",
           "rgba_to_tensor", "yuv420_to_tensor"]
