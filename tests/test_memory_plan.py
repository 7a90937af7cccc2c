"""The memory plan end to end on mobilenet_v2 and resnet18 (exported, optimize_for_mobile): consecutive calls on
different photographs match eager PyTorch (a buffer clobbered too early would show), the arena is smaller than the
intermediates it holds, calls the plan was not made for (another layout, another batch size, a second thread)
run unplanned and still match, programs without fixed shapes get a plan at their first call, the input buffer
round trip copies nothing, the plan survives save and load, optimizing again without MEMORY_PLAN drops it, and a
file with a hostile plan is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_close

import ptlite
from ptlite.errors import FormatError
from ptlite.ir.memory_plan import METADATA_KEY, OUT_ATTR, planned_nodes
from ptlite.passes.base import copy_program
from ptlite.runtime.interpreter import CompiledGraph
from ptlite.tools import cli, zoo

RTOL = 1e-4
MODELS = ["mobilenet_v2", "resnet18"]


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    return zoo.sample_images(2, 224)


@pytest.fixture(scope="module", params=MODELS)
def case(request, images):
    """(name, model, optimized exported program, eager outputs of each image alone and of both as a batch)."""
    model = getattr(zoo, request.param)()
    with torch.inference_mode():
        expected = [model(images[i:i + 1]).numpy() for i in range(2)], model(images).numpy()
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (images[:1],), method="export"), backend="numpy")
    return request.param, model, program, expected


def arena_of(module: ptlite.Module):
    arena = module._method("forward")._compiled.arena
    assert arena is not None, "the optimized program has no memory plan"
    return arena


def test_consecutive_calls_match_pytorch(case, images):
    name, _, program, (singles, _) = case
    module = ptlite.Module(program)
    arena = arena_of(module)
    arena.buffer[...] = 0
    for call in range(4):  # image 0, 1, 0, 1: each call reuses the buffers the one before wrote
        i = call % 2
        assert_close(module(images[i:i + 1].numpy()), singles[i], what=f"{name} planned, call {call + 1}", rtol=RTOL)
    assert arena.buffer.any(), f"{name}: the calls did not run the planned steps (the arena was never written)"


def test_arenas_start_on_a_cache_line(case, images):
    """Planned values sit at multiples of 64 bytes in the arena, and the arena itself starts on a 64-byte boundary
    (NumPy's arrays start 16 bytes past one: every 64-byte vector load would straddle two cache lines)."""
    from ptlite.ir.memory_plan import ALIGN, aligned_empty

    for count, dtype in ((1, np.uint8), (1000, np.float32), (3, np.float64), (0, np.float32)):
        a = aligned_empty(count, dtype)
        assert a.ctypes.data % ALIGN == 0 and a.shape == (count,) and a.dtype == dtype and a.flags.writeable
    name, _, program, _ = case
    module = ptlite.Module(program)
    module(images[:1].numpy())
    assert arena_of(module).buffer.ctypes.data % ALIGN == 0, f"{name}: the NumPy backend's arena"
    native = ptlite.Module(ptlite.optimize_for_mobile(ptlite.capture(getattr(zoo, name)(), (images[:1],)),
                                                      backend="native"))
    native(images[:1].numpy())
    regions = [step.delegate for step in native._method("forward")._compiled.nodes if hasattr(step, "delegate")]
    for region in regions:
        owner = getattr(region.run, "__self__", None)
        if owner is not None and hasattr(owner, "arenas"):
            assert owner.arenas.get().ctypes.data % ALIGN == 0, f"{name}: a native region's arena"
            break
    else:
        pytest.skip("no native region here (the native backend is not built)")


def test_arena_is_smaller_than_the_intermediates(case):
    name, _, program, _ = case
    plan = ptlite.Module(program).memory_plan()
    assert plan is not None and plan.planned_values >= 20, f"{name}: {plan}"  # every convolution at least
    stored = program.metadata[METADATA_KEY]["forward"]
    assert (plan.arena_bytes, plan.intermediate_bytes) == (stored["arena_bytes"], stored["intermediate_bytes"])
    assert plan.arena_bytes < plan.intermediate_bytes, f"{name}: {plan.describe()}"
    assert plan.arena_bytes < plan.planned_bytes
    print(f"{name}: {plan.describe()}")


def test_input_buffer_round_trip(case, images):
    name, _, program, (singles, _) = case
    module = ptlite.Module(program)
    arena = arena_of(module)
    for call, i in enumerate([1, 0]):
        buffer = module.input_buffer(module.input_specs[0].name)
        assert buffer is module.input_buffer(0), f"{name}: a new input buffer for every request"
        assert np.shares_memory(buffer, arena.buffer) and buffer.flags.c_contiguous
        buffer[...] = images[i:i + 1].numpy()  # preprocessing would write here
        assert_close(module(buffer), singles[i], what=f"{name} called on its input buffer ({call + 1})", rtol=RTOL)


def test_calls_the_plan_is_not_for_run_unplanned(case, images):
    name, _, program, (singles, batch) = case
    module = ptlite.Module(program)
    arena = arena_of(module)
    arena.buffer[...] = 0
    x = images[:1].numpy()
    channels_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    assert_close(module(channels_last), singles[0], what=f"{name} on a channels-last input", rtol=RTOL)
    with arena.lock:  # another thread is running the planned steps
        assert_close(module(x), singles[0], what=f"{name} while the arena is in use", rtol=RTOL)
    compiled = CompiledGraph(program.forward, program)  # below Method's checks: a batch of 2 reaches the graph
    compiled.arena.buffer[...] = 0
    assert_close(compiled(images.numpy())[0], batch, what=f"{name} planned for batch 1, run on batch 2", rtol=RTOL)
    assert not arena.buffer.any() and not compiled.arena.buffer.any(), f"{name}: an unplanned call used the arena"


def test_dynamic_shapes_are_planned_at_the_first_call(images):
    """A program without fixed input shapes (here scripted) has no plan in the file; its first call plans one for
    that call's shapes (on a copy: the program is left as it was), later calls of those shapes run planned, other
    shapes unplanned, all matching PyTorch."""
    model = zoo.mobilenet_v2()
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (images[:1],), method="script"), backend="numpy")
    module = ptlite.Module(program)
    assert module.memory_plan() is None and METADATA_KEY not in program.metadata
    with torch.inference_mode():
        expected = {n: model(images[:n]).numpy() for n in (1, 2)}
    for call, n in enumerate((1, 2, 1, 1)):
        assert_close(module(images[:n].numpy()), expected[n], what=f"scripted, call {call + 1}, batch {n}", rtol=RTOL)
        if call == 0:
            plan = module.memory_plan()
            assert plan is not None and plan.arena_bytes < plan.intermediate_bytes, plan
            assert METADATA_KEY not in program.metadata, "planning at the first call changed the module's program"
            arena_of(module).buffer[...] = 0
        if call == 1:
            assert not arena_of(module).buffer.any(), "a call of another batch size used the arena"
    assert arena_of(module).buffer.any(), "calls of the planned shape did not use the arena"


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return torch.relu(x) * self.calls


def test_a_model_counting_its_calls_counts_right(tmp_path):
    """No run on zeros (a plan) may count as a call of a model that counts its calls: methods keeping state are
    not planned."""
    path = tmp_path / "counter.ptl"
    torch.jit.script(Counter())._save_for_lite_interpreter(str(path))
    module = ptlite.load(path)
    x = np.ones((2, 3), np.float32)
    assert module(x).tolist() == (x * 1).tolist() and module(x).tolist() == (x * 2).tolist()
    assert module.memory_plan() is None and module.state == {"calls": 2}, module.state


def test_plan_survives_save_and_load(case, images, tmp_path, capsys):
    name, _, program, (singles, _) = case
    path = tmp_path / f"{name}.ptlite"
    ptlite.save(program, path)
    module = ptlite.load(path)
    assert module.memory_plan() == ptlite.Module(program).memory_plan()
    for i in (0, 1):
        assert_close(module(images[i:i + 1].numpy()), singles[i], what=f"{name} loaded, image {i}", rtol=RTOL)
    assert cli.main(["inspect", str(path)]) == 0
    assert f"memory:     forward: {module.memory_plan().describe()}" in capsys.readouterr().out


def test_optimizing_again_replans_or_drops_the_plan(case):
    _, _, program, _ = case
    again = ptlite.optimize_for_mobile(program, backend="numpy")
    assert again.metadata[METADATA_KEY] == program.metadata[METADATA_KEY]
    unplanned = ptlite.optimize_for_mobile(program, optimization_blocklist={"MEMORY_PLAN"}, backend="numpy")
    assert METADATA_KEY not in unplanned.metadata
    assert not any(OUT_ATTR in node.attrs for node in unplanned.forward.walk())
    assert ptlite.Module(unplanned).memory_plan() is None


def _arena_beyond_any_machine(node, plan) -> None:
    """One buffer of 2^50 bytes (a pebibyte, past x86-64's 47-bit user space), the arena just big enough for it:
    consistent, so only allocating the arena can tell."""
    entry = node.attrs[OUT_ATTR]
    entry.update(offset=0, shape=[1] * (len(entry["shape"]) - 1) + [(1 << 50) // np.dtype(entry["dtype"]).itemsize])
    plan.update(arena_bytes=1 << 50)


@pytest.mark.parametrize("tamper,problem", [
    (lambda node, plan: node.attrs[OUT_ATTR].update(offset=plan["arena_bytes"]), "planned buffer .* outside the"),
    (lambda node, plan: node.attrs[OUT_ATTR].update(offset=-64), "planned buffer has an invalid offset"),
    (lambda node, plan: node.attrs[OUT_ATTR].update(dtype="object"), "planned buffer has an unknown dtype"),
    (lambda node, plan: node.attrs[OUT_ATTR].update(shape=[1, -3]), "planned buffer has an invalid shape"),
    (lambda node, plan: plan.update(arena_bytes=-1), "invalid arena_bytes"),
    (lambda node, plan: plan.update(arena_bytes=plan["arena_bytes"] * 1000), "more than its buffers need"),
    (_arena_beyond_any_machine, "asks for a 1,125,899,906,842,624-byte arena, more than this machine can allocate"),
], ids=["offset-past-arena", "negative-offset", "dtype", "shape", "negative-arena", "huge-arena", "unallocatable"])
def test_hostile_plan_is_refused(case, tmp_path, monkeypatch, tamper, problem):
    name, _, program, _ = case
    hostile = copy_program(program)
    node = planned_nodes(hostile.forward)[3]
    tamper(node, hostile.metadata[METADATA_KEY]["forward"])
    unlimited = ptlite.Limits.none()  # (the default memory limit refuses a huge arena that adds up: below)
    with pytest.raises(FormatError, match=problem):
        ptlite.Module(hostile, limits=unlimited)
    monkeypatch.setattr("ptlite.format.writer.verify", lambda program: None)  # write it as a hostile tool would
    path = tmp_path / "hostile.ptlite"
    ptlite.save(hostile, path)
    with pytest.raises(FormatError, match=problem) as error:
        ptlite.load(path, limits=unlimited)
    if "more than this machine" in problem:  # a plan that adds up, past the default memory limit
        with pytest.raises(ptlite.LimitError, match=r"arena of 1\.0 PiB is past the memory limit of 4\.0 GiB"):
            ptlite.load(path)
    else:  # with the default limits too: a plan that does not add up is a FormatError first
        with pytest.raises(FormatError, match=problem):
            ptlite.load(path)
    if problem.startswith("planned buffer"):
        assert f"{node.op}" in str(error.value) and f"{node.output!r}" in str(error.value), \
            f"the error does not name the node: {error.value}"


def test_profile_counts_each_node_once(case, images):
    from ptlite.runtime.profile import profile

    name, _, program, _ = case
    module = ptlite.Module(program)
    assert module.memory_plan() is not None  # a method compiled with and without its plan
    prof = profile(module, (images[:1].numpy(),), runs=1, warmup=0)
    operators = [n for n in program.forward.walk() if n.op not in ("prim::Constant", "prim::If", "prim::Loop")]
    assert len(prof.nodes) == len(operators), f"{name}: {len(prof.nodes)} profiled nodes, {len(operators)} operators"


class HiddenState(torch.nn.Module):
    """Keeps a tuple of tensors across calls without returning it (an RNN-style hidden state)."""

    def __init__(self) -> None:
        super().__init__()
        self.h = (torch.zeros(2, 3), torch.zeros(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(x) + self.h[0] * self.h[1]
        self.h = (torch.tanh(x * 2.0), x + 1.0)
        return out


def test_methods_keeping_state_are_not_planned(tmp_path):
    """Arrays a method keeps in its Module's state outlive the call: planned into the arena, the next call would
    overwrite them. Such methods stay unplanned, at the first call as in MEMORY_PLAN."""
    from torch.jit.mobile import _load_for_lite_interpreter

    path = tmp_path / "hidden.ptl"
    torch.jit.script(HiddenState())._save_for_lite_interpreter(str(path))
    lite, module = _load_for_lite_interpreter(str(path)), ptlite.load(path)
    for call in range(3):
        x = torch.randn(2, 3, generator=torch.Generator().manual_seed(call))
        assert_close(module(x.numpy()), lite(x).numpy(), what=f"hidden state, call {call + 1}", rtol=1e-6)
    assert module.memory_plan() is None


def test_blocking_memory_plan_also_blocks_the_first_call_plan(images, tmp_path):
    model = zoo.mobilenet_v2()
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (images[:1],), method="script"),
                                         optimization_blocklist=["MEMORY_PLAN"])
    path = tmp_path / "unplanned.ptlite"
    ptlite.save(program, path)
    for module in (ptlite.Module(program), ptlite.load(path)):
        module(images[:1].numpy())
        assert module.memory_plan() is None


def test_first_call_specializes_shapes_winograd_included(tmp_path):
    """A .ptl file has no shapes at load, so optimizing it there cannot choose Winograd; the first call, knowing
    them, does (unless the blocklist said WINOGRAD), then plans memory; results stay the model's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU()).eval()
    path = tmp_path / "cnn.ptl"
    torch.jit.script(model)._save_for_lite_interpreter(str(path))
    x = torch.randn(1, 3, 24, 24)
    with torch.inference_mode():
        expected = model(x).numpy()
    module = ptlite.load(path, backends=("numpy",))  # the NumPy backend's lowering
    assert not {"ptlite::conv2d_winograd", "ptlite::conv2d_winograd_v2"} & set(module.program.operator_names())
    for call in range(2):
        assert_close(module(x.numpy()), expected, what=f"cnn.ptl call {call + 1}", rtol=2e-5)
    specialized = module._method("forward").program
    assert "ptlite::conv2d_winograd_v2" in specialized.operator_names() and module.memory_plan() is not None
    blocked = ptlite.Module(ptlite.optimize_for_mobile(ptlite.load_program(path), optimization_blocklist=["WINOGRAD"],
                                                       backend="numpy"))
    assert_close(blocked(x.numpy()), expected, what="cnn.ptl, WINOGRAD blocked", rtol=1e-5)
    assert not {"ptlite::conv2d_winograd", "ptlite::conv2d_winograd_v2"} \
        & set(blocked._method("forward").program.operator_names())
    assert blocked.memory_plan() is not None
