"""ptlite.tools.compare's criterion: each output's largest difference relative to the reference's magnitude, exact for
integers, booleans and strings, with NaN, infinities, shapes, dtypes and structure handled. NumPy only."""

from __future__ import annotations

import numpy as np
import pytest

from ptlite.tools.compare import compare_outputs, difference, flatten_outputs, format_table, summary


def test_relative_difference_against_the_largest_reference_magnitude():
    ref = np.array([[4.0, -8.0], [1.0, 0.5]], np.float32)
    ours = ref + np.array([[0, 4e-4], [0, 0]], np.float32)
    d = difference("logits", ours, ref)
    assert d.shape == (2, 2) and d.dtype == "float32" and d.scale == 8.0
    assert d.max_abs == pytest.approx(4e-4, rel=1e-3) and d.relative == pytest.approx(5e-5, rel=1e-3) and d.ok
    assert not difference("logits", ours, ref, tolerance=1e-5).ok


def test_nan_and_infinities_count_as_equal_only_in_the_same_places():
    ref = np.array([np.nan, np.inf, -np.inf, 1.0])
    assert difference("x", ref.copy(), ref).max_abs == 0.0
    for bad in ([0.0, np.inf, -np.inf, 1.0], [np.nan, -np.inf, -np.inf, 1.0], [np.nan, np.inf, -np.inf, np.nan]):
        d = difference("x", np.array(bad), ref)
        assert d.max_abs == np.inf and not d.ok, bad
    assert difference("x", ref.copy(), ref).scale == 1.0  # the finite magnitude


def test_integer_and_boolean_outputs_must_be_equal():
    ref = np.array([3, 1000000], np.int64)
    assert difference("idx", ref.copy(), ref).ok
    d = difference("idx", ref + np.array([0, 1]), ref, tolerance=0.5)  # within any relative tolerance, still wrong
    assert d.exact and d.max_abs == 1 and not d.ok
    assert not difference("mask", np.array([True, False]), np.array([True, True])).ok


def test_shape_dtype_and_kind_mismatches_are_problems():
    ref = np.zeros((1, 10), np.float32)
    assert "shape [1, 9], reference [1, 10]" in difference("y", np.zeros((1, 9), np.float32), ref).problem
    assert "dtype float64, reference float32" in difference("y", np.zeros((1, 10)), ref).problem
    assert not difference("y", np.zeros((1, 10), np.int64), ref).ok


def test_numbers_strings_and_none():
    assert difference("n", 3, 3).ok and not difference("n", 3, 4).ok
    assert difference("f", 0.25, 0.25 + 1e-9).ok
    assert difference("s", "cat", "cat").ok and not difference("s", "cat", "dog").ok
    assert difference("o", None, None).ok and not difference("o", None, np.zeros(2)).ok


def test_structures_are_compared_output_by_output():
    ref = {"out": np.ones((1, 3)), "aux": (np.zeros(2), np.arange(3))}
    ours = {"out": np.ones((1, 3)), "aux": (np.zeros(2), np.arange(3))}
    names = [d.name for d in compare_outputs(ours, ref)]
    assert names == ["out", "aux.0", "aux.1"] and all(d.ok for d in compare_outputs(ours, ref))
    missing = compare_outputs({"out": np.ones((1, 3))}, ref)
    assert [d.name for d in missing if not d.ok] == ["aux.0", "aux.1"]
    assert "ptlite's result has no such output" in missing[1].problem
    extra = compare_outputs((np.ones(2), np.ones(2)), (np.ones(2),))
    assert [(d.name, d.ok) for d in extra] == [("0", True), ("1", False)]
    assert "the reference's result has no such output" in extra[1].problem


def test_flatten_outputs_names_leaves_by_path():
    assert flatten_outputs(np.zeros(2))[0][0] == "output"
    assert [n for n, _ in flatten_outputs((np.zeros(1), [1.0, 2.0], {"a": [np.zeros(1), np.zeros(1)]}))] == \
        ["0", "1", "2.a.0", "2.a.1"]


def test_summary_and_table_name_what_differs_and_by_how_much():
    ref = (np.array([1.0, 2.0]), np.array([5, 6]))
    diffs = compare_outputs((np.array([1.0, 2.5]), np.array([5, 6])), ref)
    text = summary(diffs)
    assert text == "1 of 2 output(s) differ: 0 (relative difference 2.50e-01 > 0.0001)"
    table = format_table(diffs, "PyTorch")
    assert "max |ptlite - PyTorch|" in table[0] and table[1].endswith("DIFFERS") and table[2].endswith("ok")
    assert summary(compare_outputs(ref, ref)) == "all 2 output(s) match"


def test_a_negative_or_nan_tolerance_is_refused():
    with pytest.raises(ValueError, match="non-negative"):
        compare_outputs(np.zeros(1), np.zeros(1), tolerance=-1.0)
    with pytest.raises(ValueError, match="non-negative"):
        compare_outputs(np.zeros(1), np.zeros(1), tolerance=float("nan"))


def test_numpy_numbers_in_a_list_are_one_leaf_and_compare_with_python_ones():
    assert flatten_outputs((np.int64(2), np.array(3)))[0][0] == "output"
    assert all(d.ok for d in compare_outputs((np.int64(2), np.array(3)), (2, 3)))


def test_large_integers_are_compared_exactly():
    big = np.array([2**53 + 1], np.int64)
    d = difference("ids", big, big - 1)
    assert not d.ok and d.max_abs == 1
    assert difference("ids", np.array([2**63 - 1], np.int64), np.array([2**63 - 1], np.int64)).ok


def test_numpy_strings_and_string_arrays():
    assert difference("s", np.str_("cat"), "cat").ok
    assert difference("s", np.array(["a", "b"]), np.array(["a", "b"])).ok
    assert not difference("s", np.array(["a", "b"]), np.array(["a", "c"])).ok


def test_no_outputs_says_so():
    assert summary(compare_outputs((), ())) == "no outputs to compare (neither side returned a value)"
