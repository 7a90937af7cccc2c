"""Object detectors through every capture method PyTorch can apply to them, saved, loaded and run without torch,
against eager PyTorch: detections compared as sets (each of torch's has one of ptlite's with the same label, a box
within 1e-3 of the box's size and a score within 1e-4, and no extra ones; a box scoring within 1e-4 of the score
threshold may be on either side of it). Models: ptlite.tools.detection_zoo (random weights re-drawn so that the
photograph gives a hundred, a few dozen or so well separated detections).

- torchvision's ssdlite320_mobilenet_v3_large and fasterrcnn_mobilenet_v3_large_320_fpn: script only (torch.export
  stops at their data-dependent shapes; torch.jit.trace cannot return their list of dicts). Scripted, they return
  (losses, detections) with a warning, as torch's scripted modules do, and keep what they cache on the first call
  (the anchors, the pooler's scales) as the loaded module's state.
- a user's YOLO-style head ending in torchvision.ops.batched_nms: script and export (trace: torch refuses the list
  of dicts it returns, and so does ptlite, with torch's reason).

Also here: what the detectors need from script capture, on small modules (module attributes set while running,
objects of TorchScript classes, isinstance), and `ptlite run` on a detector (--draw).
"""

from __future__ import annotations

import time
import warnings
from typing import Any, NamedTuple

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("sklearn")

import ptlite  # noqa: E402
from ptlite.tools import detection_zoo as zoo  # noqa: E402

BOX_RTOL = 1e-3  # of the box's largest coordinate (at least 1 pixel)
SCORE_TOL = 1e-4
TIMINGS: dict[str, float] = {}


# ------------------------------------------------------------------------------------------------------------
# Comparing detections
# ------------------------------------------------------------------------------------------------------------

def _describe(label: int, score: float, box: np.ndarray) -> str:
    return f"label {label} score {score:.6f} box ({', '.join(f'{v:.2f}' for v in box)})"


def match_detections(what: str, ours: dict[str, np.ndarray], theirs: dict[str, Any],
                     threshold: float | None = None) -> int:
    """Assert that ptlite's detections are torch's as sets (see the module's docstring); returns how many."""
    rb, rs, rl = (np.asarray(theirs[k].detach().numpy() if hasattr(theirs[k], "detach") else theirs[k])
                  for k in ("boxes", "scores", "labels"))
    ob, os_, ol = (np.asarray(ours[k]) for k in ("boxes", "scores", "labels"))
    assert ob.shape[1:] == (4,) and ob.dtype == rb.dtype and ol.dtype == rl.dtype, (
        f"{what}: boxes {ob.shape} {ob.dtype}, labels {ol.dtype}; torch gives {rb.shape} {rb.dtype}, {rl.dtype}")

    def at_threshold(score: float) -> bool:
        return threshold is not None and abs(score - threshold) <= SCORE_TOL

    free = list(range(len(os_)))
    problems = []
    for i in np.argsort(-rs, kind="stable"):
        scale = max(1.0, float(np.abs(rb[i]).max()))
        same = [j for j in free if ol[j] == rl[i]]
        distance = [float(np.abs(ob[j] - rb[i]).max()) / scale for j in same]
        if distance and min(distance) <= BOX_RTOL:
            j = same[int(np.argmin(distance))]
            free.remove(j)
            if abs(float(os_[j]) - float(rs[i])) > SCORE_TOL:
                problems.append(f"torch's {_describe(rl[i], rs[i], rb[i])}: ptlite scores it {os_[j]:.6f} "
                                f"(differs by {abs(float(os_[j]) - float(rs[i])):.2g} > {SCORE_TOL})")
        elif not at_threshold(float(rs[i])):
            nearest = (f"; the nearest of its label is {_describe(ol[same[k]], os_[same[k]], ob[same[k]])}, "
                       f"{min(distance):.2g} of the box's size away" if same and (k := int(np.argmin(distance))) >= 0
                       else "; none of its label")
            problems.append(f"torch's {_describe(rl[i], rs[i], rb[i])} is not among ptlite's{nearest}")
    problems += [f"ptlite's {_describe(ol[j], os_[j], ob[j])} is not among torch's" for j in free
                 if not at_threshold(float(os_[j]))]
    assert not problems, (f"{what}: ptlite's {len(os_)} detections are not torch's {len(rs)}:\n  "
                          + "\n  ".join(problems[:12]))
    return len(rs)


def test_matching_names_the_detection_and_the_difference() -> None:
    torch_side = {"boxes": torch.tensor([[0.0, 0, 10, 10], [50, 50, 90, 90]]), "scores": torch.tensor([0.9, 0.5]),
                  "labels": torch.tensor([1, 2])}
    same = {k: v.numpy()[::-1].copy() for k, v in torch_side.items()}  # another order: the same set
    assert match_detections("model", same, torch_side) == 2
    moved = {k: v.numpy().copy() for k, v in torch_side.items()}
    moved["boxes"][1, 2] += 1.0
    with pytest.raises(AssertionError, match=r"model: ptlite's 2 detections are not torch's 2:\s+torch's label 2 "
                                             r"score 0.500000 .* is not among ptlite's; the nearest of its label .* "
                                             r"0.011 of the box's size away"):
        match_detections("model", moved, torch_side)
    rescored = {k: v.numpy().copy() for k, v in torch_side.items()}
    rescored["scores"][0] += 3e-4
    with pytest.raises(AssertionError, match=r"ptlite scores it 0.900300 \(differs by 0.0003"):
        match_detections("model", rescored, torch_side)
    extra = {k: np.concatenate([v.numpy(), v.numpy()[:1]]) for k, v in torch_side.items()}
    with pytest.raises(AssertionError, match="ptlite's label 1 .* is not among torch's"):
        match_detections("model", extra, torch_side)
    assert match_detections("model", extra, torch_side, threshold=0.89995) == 2  # at the threshold: either side


# ------------------------------------------------------------------------------------------------------------
# The models
# ------------------------------------------------------------------------------------------------------------

class Captured(NamedTuple):
    model: Any  # the torch model, eager
    module: ptlite.Module  # the captured program, saved and loaded
    program: ptlite.Program


def _capture(model: Any, image: Any, method: str, tmp_path_factory: Any, name: str) -> Captured:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = ptlite.capture(model, ([image],), method=method)
    path = tmp_path_factory.mktemp("detection") / f"{name}.{method}.ptlite"
    ptlite.save(program, path)
    TIMINGS[f"{name} {method} capture+save"] = time.perf_counter() - start
    return Captured(model, ptlite.load(path), program)


def _run(name: str, module: ptlite.Module, *args: Any) -> Any:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the scripted detectors' own warning: they return (losses, detections)
        out = module(*args)
    TIMINGS[f"{name} run"] = time.perf_counter() - start
    return out


def _eager(model: Any, images: list) -> list[dict]:
    with torch.inference_mode():
        return model(images)


@pytest.fixture(scope="module")
def photo() -> Any:
    return zoo.photo()


@pytest.fixture(scope="module")
def ssdlite(photo, tmp_path_factory) -> Captured:
    start = time.perf_counter()
    model = zoo.ssdlite320_mobilenet_v3_large()
    TIMINGS["ssdlite build"] = time.perf_counter() - start
    return _capture(model, photo, "script", tmp_path_factory, "ssdlite")


@pytest.fixture(scope="module")
def fasterrcnn(photo, tmp_path_factory) -> Captured:
    start = time.perf_counter()
    model = zoo.fasterrcnn_mobilenet_v3_large_320_fpn()
    TIMINGS["fasterrcnn build"] = time.perf_counter() - start
    # scripted before it ever runs: the pooler's scales and level mapper are set by the first call, in ptlite's
    # module state as in torch's scripted module
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scripted = torch.jit.script(model)
    captured = _capture(scripted, photo, "script", tmp_path_factory, "fasterrcnn")
    return Captured(model, captured.module, captured.program)


@pytest.fixture(scope="module")
def yolo() -> Any:
    return zoo.yolo_head()


def test_ssdlite_script_matches_eager_torch(ssdlite, photo) -> None:
    losses, detections = _run("ssdlite", ssdlite.module, [photo.numpy()])
    assert losses == {} and isinstance(detections, list) and len(detections) == 1  # as torch's scripted SSD
    count = match_detections("ssdlite320_mobilenet_v3_large (script)", detections[0], _eager(ssdlite.model, [photo])[0],
                             ssdlite.model.score_thresh)
    assert count > 50


def test_ssdlite_optimized_and_a_batch_of_two_sizes(ssdlite, photo) -> None:
    module = ptlite.Module(ptlite.optimize_for_mobile(ssdlite.program))
    other = zoo.photo((240, 400), "flower.jpg")
    _, detections = _run("ssdlite optimized, 2 images", module, [photo.numpy(), other.numpy()])
    expected = _eager(ssdlite.model, [photo, other])
    for i, (ours, theirs) in enumerate(zip(detections, expected, strict=True)):
        match_detections(f"ssdlite320_mobilenet_v3_large (script, optimized) image {i}", ours, theirs,
                         ssdlite.model.score_thresh)


def test_fasterrcnn_script_matches_eager_torch_and_keeps_its_state(fasterrcnn, photo) -> None:
    module, model = fasterrcnn.module, fasterrcnn.model
    losses, detections = _run("fasterrcnn", module, [photo.numpy()])
    assert losses == {}
    count = match_detections("fasterrcnn_mobilenet_v3_large_320_fpn (script)", detections[0],
                             _eager(model, [photo])[0], model.roi_heads.score_thresh)
    assert count > 20
    assert set(module.state) >= {"rpn.anchor_generator.cell_anchors", "roi_heads.box_roi_pool.scales",
                                 "roi_heads.box_roi_pool.map_levels"}
    # a second call, another size: the scales the first call cached are used, as in torch
    other = zoo.photo((400, 300))
    _, detections = _run("fasterrcnn second call", module, [other.numpy()])
    match_detections("fasterrcnn_mobilenet_v3_large_320_fpn (script, second call, 400x300)", detections[0],
                     _eager(model, [other])[0], model.roi_heads.score_thresh)


def test_fasterrcnn_optimized(fasterrcnn, photo) -> None:
    module = ptlite.Module(ptlite.optimize_for_mobile(fasterrcnn.program))
    _, detections = _run("fasterrcnn optimized", module, [photo.numpy()])
    match_detections("fasterrcnn_mobilenet_v3_large_320_fpn (script, optimized)", detections[0],
                     _eager(fasterrcnn.model, [photo])[0], fasterrcnn.model.roi_heads.score_thresh)


@pytest.mark.parametrize("method", ["script", "export"])
def test_yolo_head_matches_eager_torch(yolo, photo, method, tmp_path_factory) -> None:
    captured = _capture(yolo, photo, method, tmp_path_factory, "yolo")
    # script keeps sizes dynamic; export keeps the example's, and takes the list's one tensor (its graph's input)
    other = zoo.photo((256, 352) if method == "script" else 320, "flower.jpg")
    for image in (photo, other):
        ours = _run(f"yolo {method}", captured.module, [image.numpy()] if method == "script" else image.numpy())
        count = match_detections(f"yolo head ({method}, {tuple(image.shape)})", ours[0], _eager(yolo, [image])[0],
                                 yolo.score_thresh)
        assert count > 20


def test_a_list_of_images_input_is_checked(yolo, photo) -> None:
    program = ptlite.capture(yolo, ([photo],), method="script")
    assert program.forward.input_specs[0].type == "List[Tensor]"
    module = ptlite.Module(program)
    ours = module((photo,))  # a tuple, and an array of another library, as a list of arrays
    match_detections("yolo head (script), a tuple holding a torch tensor", ours[0], _eager(yolo, [photo])[0])
    with pytest.raises(ptlite.InputError, match="input 'images' must be a list of arrays, got ndarray"):
        module(photo.numpy())
    with pytest.raises(ptlite.InputError, match="input 'images' must be a list of arrays; item 1 is a str"):
        module([photo.numpy(), "photo.png"])


def test_yolo_head_trace_is_refused_with_torchs_reason(yolo, photo) -> None:
    with pytest.raises(ptlite.CaptureError, match="lists, tuples of tensors, or dictionary of tensors"):
        ptlite.capture(yolo, ([photo],), method="trace")


# ------------------------------------------------------------------------------------------------------------
# What the detectors need from script capture
# ------------------------------------------------------------------------------------------------------------

@torch.jit.script
class Boxes:  # a TorchScript class, as torchvision's ImageList and LevelMapper
    def __init__(self, tensors: torch.Tensor, scale: float) -> None:
        self.tensors = tensors
        self.scale = scale


class Cached(torch.nn.Module):
    """Sets attributes of itself and of a submodule on its first call (torchvision's anchors, pooler scales and
    warn-once flag), and creates an object of a TorchScript class each call."""

    __annotations__ = {"scale": float | None, "boxes": Boxes | None}  # types, not strings: for TorchScript

    def __init__(self) -> None:
        super().__init__()
        self.scale: float | None = None
        self.boxes: Boxes | None = None
        self.calls = 0
        self.inner = torch.nn.Linear(2, 2)
        self.inner.cells = [torch.ones(2)]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int, bool, bool]:
        if self.scale is None or self.boxes is None:
            self.scale = float(x.shape[0])
            self.boxes = Boxes(x * 2.0, 0.5)
        self.calls += 1
        self.inner.cells = [c + 1 for c in self.inner.cells]
        boxes, scale = self.boxes, self.scale
        assert boxes is not None and scale is not None
        made = Boxes(x, 3.0)
        result = boxes.tensors * scale + made.tensors * made.scale + self.inner.cells[0]
        return result, self.calls, isinstance(x, torch.Tensor), isinstance(self.inner.cells, tuple)


def test_script_keeps_attributes_set_while_running_as_state(tmp_path) -> None:
    program = ptlite.capture(torch.jit.script(Cached()), (torch.ones(2),), method="script")
    ptlite.save(program, tmp_path / "cached.ptlite")
    module = ptlite.load(tmp_path / "cached.ptlite")
    scripted = torch.jit.script(Cached())  # a fresh one: capture ran the other once, on the example
    for x in (torch.ones(2), torch.full((2,), 2.0), torch.arange(2.0)):
        expected = scripted(x)
        got = module(x.numpy())
        assert np.array_equal(got[0], expected[0].numpy()) and got[1:] == expected[1:]
    assert set(module.state) == {"scale", "boxes", "calls", "inner.cells"}


def test_state_one_method_sets_is_read_by_the_others() -> None:
    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.count = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.count

        @torch.jit.export
        def bump(self, by: int) -> int:
            self.count += by
            return self.count

    module = ptlite.Module(ptlite.capture(torch.jit.script(Counter()), (torch.ones(2),), method="script",
                                          preserved_methods=("bump",)))
    assert module(np.ones(2, np.float32)).tolist() == [0, 0]
    assert module.run_method("bump", 3) == 3
    assert module(np.ones(2, np.float32)).tolist() == [3, 3]


def test_script_captures_objects_made_before_capture(tmp_path) -> None:
    """A model that has run before it is scripted holds an object of a TorchScript class as an attribute: its
    value at capture becomes the state's initial value."""
    def ran_once() -> Any:
        model = Cached()
        model(torch.ones(2))  # eager: sets scale, boxes, calls and cells
        return torch.jit.script(model)

    module = ptlite.Module(ptlite.capture(ran_once(), (torch.ones(2),), method="script"))
    scripted = ran_once()
    for x in (torch.ones(2), torch.arange(2.0)):
        expected = scripted(x)
        got = module(x.numpy())
        assert np.array_equal(got[0], expected[0].numpy()) and got[1:] == expected[1:]


def test_script_isinstance_of_an_optional_is_checked_at_run_time() -> None:
    class Either(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
            z = x if y is None else y
            return z + 1 if isinstance(y, torch.Tensor) else z - 1

    module = ptlite.Module(ptlite.capture(torch.jit.script(Either()), (torch.ones(2),), method="script"))
    assert module(np.ones(2, np.float32)).tolist() == [0, 0]
    assert module(np.ones(2, np.float32), np.full(2, 3, np.float32)).tolist() == [4, 4]


def test_script_refuses_isinstance_it_cannot_check() -> None:
    class Either(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: tuple[int, int] | None = None) -> torch.Tensor:
            return x + 1 if isinstance(y, tuple) else x

    with pytest.raises(ptlite.CaptureError, match=r"prim::isinstance: .*isinstance\(\) of a value of type "
                                                  r"Optional\[Tuple\[int, int\]\] against tuple"):
        ptlite.capture(torch.jit.script(Either()), (torch.ones(2),), method="script")


# ------------------------------------------------------------------------------------------------------------
# ptlite run on a detector
# ------------------------------------------------------------------------------------------------------------

def test_run_prints_the_best_boxes_and_draws_them(yolo, photo, tmp_path, capsys) -> None:
    from PIL import Image

    from ptlite.tools.cli import main

    program = ptlite.capture(yolo, ([photo],), method="script")
    names = ["background", "car", "person", "dog", "cat", "bicycle"]
    ptlite.save(ptlite.attach(program, labels=names), tmp_path / "yolo.ptlite")
    picture = tmp_path / "street.png"
    Image.fromarray(np.asarray(photo.numpy().transpose(1, 2, 0) * 255 + 0.5, np.uint8)).save(picture)
    code = main(["run", str(tmp_path / "yolo.ptlite"), str(picture), "--top-k", "3", "--draw",
                 str(tmp_path / "boxes.png")])
    out = capsys.readouterr().out
    assert code == 0, out
    expected = _eager(yolo, [torch.from_numpy(np.asarray(Image.open(picture), np.float32).transpose(2, 0, 1) /
                                              255)])[0]
    best = expected["scores"].argsort(descending=True)[:3]
    assert f"{len(expected['scores'])} detections, the 3 best:" in out
    for rank, i in enumerate(best.tolist(), 1):
        x1, y1, x2, y2 = expected["boxes"][i].tolist()
        assert (f"{rank}. {names[int(expected['labels'][i])]}  {float(expected['scores'][i]):.3f}  box ({x1:.1f}, "
                f"{y1:.1f}, {x2:.1f}, {y2:.1f})") in out
    assert f"drew 3 boxes on {tmp_path / 'boxes.png'}" in out
    drawn = np.asarray(Image.open(tmp_path / "boxes.png").convert("RGB"))
    original = np.asarray(Image.open(picture).convert("RGB"))
    assert drawn.shape == original.shape
    x1, y1, x2, y2 = (int(round(v)) for v in expected["boxes"][best[-1]].tolist())  # drawn first: not covered
    changed = np.any(drawn != original, axis=-1)
    assert changed[min(y2, drawn.shape[0] - 1) - 1, (x1 + x2) // 2], "the box's lower edge is not drawn"
    assert changed.mean() < 0.2


def test_run_draw_needs_a_detector(tmp_path, capsys) -> None:
    from ptlite.tools.cli import main

    ptlite.save(ptlite.capture(torch.nn.Linear(3, 2), (torch.ones(1, 3),), method="trace"), tmp_path / "l.ptlite")
    np.save(tmp_path / "x.npy", np.ones((1, 3), np.float32))
    code = main(["run", str(tmp_path / "l.ptlite"), str(tmp_path / "x.npy"), "--draw", str(tmp_path / "o.png")])
    assert code != 0 and "--draw draws on the images given to a detector that takes a list of them" in \
        capsys.readouterr().err


def test_report_timings() -> None:
    """Not a check: prints what the detectors cost here (pytest -s shows it)."""
    for what, seconds in sorted(TIMINGS.items()):
        print(f"{what}: {seconds:.2f} s")
