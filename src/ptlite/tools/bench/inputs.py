"""Inputs to measure with (random ones, from the specs), and handing inputs and outputs to a measuring process."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ptlite.errors import InputError
from ptlite.ir.graph import ValueSpec

SEED = 0


def random_inputs(specs: Sequence[ValueSpec], shapes: Sequence[tuple[int, ...]] = (),
                  seed: int = SEED) -> list[Any]:
    """Inputs for a method from its specs: normal floats, small non-negative integers, False for booleans.

    `shapes` gives the shape of every tensor input, in order (needed where a spec has dynamic dimensions);
    inputs that are not tensors take their defaults.
    """
    tensors = [s for s in specs if s.type == "Tensor"]
    if shapes and len(shapes) != len(tensors):
        names = ", ".join(s.name for s in tensors)
        raise InputError(f"--input-shape was given {len(shapes)} time(s), but the model has {len(tensors)} tensor "
                         f"input(s) ({names}): give one per input, in order")
    rng = np.random.default_rng(seed)
    given = iter(shapes)
    values: list[Any] = []
    for spec in specs:
        if spec.type == "Tensor":
            shape = next(given) if shapes else _static_shape(spec)
            values.append(_random_tensor(rng, np.dtype(spec.dtype or "float32"), shape))
        elif spec.has_default:
            values.append(spec.default)
        else:
            raise InputError(f"input '{spec.name}' is {spec.type}, and random inputs are tensors only: give "
                             "every input with --inputs (numbers are written as they are)")
    return values


def _static_shape(spec: ValueSpec) -> tuple[int, ...]:
    if spec.shape is not None and all(d is not None for d in spec.shape):
        return tuple(int(d) for d in spec.shape)
    if spec.shape is None:
        dims, example = "of unknown rank", "1,3,224,224"
    else:
        dims = "(" + ", ".join("?" if d is None else str(d) for d in spec.shape) + ")"
        example = ",".join("1" if d is None else str(d) for d in spec.shape)
    raise InputError(f"input '{spec.name}' has a dynamic shape {dims}: give its shape with --input-shape "
                     f"(e.g. --input-shape {example}), once per input, in order")


def _random_tensor(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if dtype.kind in "fc":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return np.zeros(shape, dtype)  # masks that mask nothing: random ones could mask whole rows
    return rng.integers(0, 10, size=shape).astype(dtype)  # valid indices for any table of 10 or more rows


def describe_inputs(specs: Sequence[ValueSpec], values: Sequence[Any]) -> list[dict[str, Any]]:
    """Name, dtype and shape (or value, for numbers) of each input, for the report."""
    described = []
    for i, value in enumerate(values):
        name = specs[i].name if i < len(specs) else f"input{i}"
        if isinstance(value, np.ndarray):
            described.append({"name": name, "dtype": value.dtype.name, "shape": list(value.shape)})
        else:
            described.append({"name": name, "value": value})
    return described


def save_inputs(values: Sequence[Any], folder: str) -> dict[str, Any]:
    """Write inputs for a child process: arrays into an .npz file, other values into the returned description."""
    path = os.path.join(folder, "inputs.npz")
    arrays = {f"a{i}": v for i, v in enumerate(values) if isinstance(v, np.ndarray)}
    np.savez(path, **arrays)
    return {"path": path, "items": [{"array": f"a{i}"} if isinstance(v, np.ndarray) else {"value": v}
                                    for i, v in enumerate(values)]}


def load_inputs(saved: dict[str, Any]) -> list[Any]:
    """The inputs `save_inputs` wrote."""
    with np.load(saved["path"], allow_pickle=False) as data:
        return [data[item["array"]] if "array" in item else item["value"] for item in saved["items"]]


def save_outputs(result: Any, path: str) -> list[str]:
    """Write a call's outputs (flattened as ptlite.tools.compare names them; numbers and lists of numbers as arrays;
    None and strings, which ONNX Runtime does not return either, left out) to an .npz file; returns their names, in
    order."""
    from ptlite.tools.compare import flatten_outputs

    leaves = [(name, np.asarray(v)) for name, v in flatten_outputs(result)
              if v is not None and not isinstance(v, str)]  # numbers and lists of them become arrays
    np.savez(path, **{f"o{i}": v for i, (_, v) in enumerate(leaves)})
    return [name for name, _ in leaves]


def load_outputs(path: str, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The outputs `save_outputs` wrote, by name."""
    with np.load(path, allow_pickle=False) as data:
        return {name: data[f"o{i}"] for i, name in enumerate(names)}
