"""Matrix-product kernels against PyTorch: linear, matmul for every rank pair, mm, addmm, ..., einsum."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_backend import kernel as op
from oracle import check, check_schemas, randn


@pytest.mark.parametrize("shape", [(7,), (3, 7), (2, 4, 7), (2, 1, 3, 7)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_matches_torch(shape, with_bias, rng):
    check("aten::linear", randn(rng, *shape), randn(rng, 5, 7), randn(rng, 5) if with_bias else None)


def test_linear_on_strided_input(rng):
    x = randn(rng, 4, 7, 3).transpose(0, 2, 1)
    check("aten::linear", x, randn(rng, 5, 7), randn(rng, 5))


RANK_PAIRS = [((4,), (4,)), ((4,), (4, 3)), ((3, 4), (4,)), ((3, 4), (4, 5)), ((2, 3, 4), (4,)),
              ((4,), (2, 4, 3)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)),
              ((2, 1, 3, 4), (5, 4, 2)), ((6, 2, 3, 4), (4, 5))]


@pytest.mark.parametrize("a,b", RANK_PAIRS, ids=[f"{a}@{b}" for a, b in RANK_PAIRS])
def test_matmul_matches_torch_for_every_rank_pair(a, b, rng):
    check("aten::matmul", randn(rng, *a), randn(rng, *b))


def test_matmul_vector_dot_is_0d_array(rng):
    out = op("aten::matmul")(randn(rng, 4), randn(rng, 4))
    assert isinstance(out, np.ndarray) and out.shape == (), f"matmul 1-D @ 1-D gave {type(out)}"


def test_mm_bmm_mv_dot(rng):
    check("aten::mm", randn(rng, 3, 4), randn(rng, 4, 5))
    check("aten::bmm", randn(rng, 2, 3, 4), randn(rng, 2, 4, 5))
    check("aten::mv", randn(rng, 3, 4), randn(rng, 4))
    check("aten::dot", randn(rng, 6), randn(rng, 6))


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addmm_family(beta, alpha, rng):
    check("aten::addmm", randn(rng, 5), randn(rng, 3, 4), randn(rng, 4, 5), beta, alpha)
    check("aten::addmm", randn(rng, 3, 5), randn(rng, 3, 4), randn(rng, 4, 5), beta, alpha)
    check("aten::baddbmm", randn(rng, 2, 3, 5), randn(rng, 2, 3, 4), randn(rng, 2, 4, 5), beta, alpha)
    check("aten::addmv", randn(rng, 3), randn(rng, 3, 4), randn(rng, 4), beta, alpha)


def test_addmm_with_beta_zero_ignores_nan_in_self(rng):
    bias = np.full((3, 5), np.nan, dtype=np.float32)
    check("aten::addmm", bias, randn(rng, 3, 4), randn(rng, 4, 5), 0, 1)


@pytest.mark.parametrize("shape", [(), (4,), (3, 4)])
def test_t_matches_torch(shape, rng):
    check("aten::t", randn(rng, *shape))


EINSUMS = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bhid, bhjd -> bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),
           ("ii->i", [(4, 4)]), ("...ij->...ji", [(2, 3, 4)]), ("i,j,k->ijk", [(2,), (3,), (4,)])]


@pytest.mark.parametrize("equation,shapes", EINSUMS)
def test_einsum_matches_torch(equation, shapes, rng):
    check("aten::einsum", equation, [randn(rng, *s) for s in shapes], None)


def test_schemas_are_torchs():
    check_schemas(["aten::linear", "aten::matmul", "aten::mm", "aten::bmm", "aten::mv", "aten::dot",
                   "aten::addmm", "aten::baddbmm", "aten::addmv", "aten::t", "aten::einsum"])
