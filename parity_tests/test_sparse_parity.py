"""Sparse adjacency against real PyG: ``utils.spmm`` and ``utils.to_edge_index`` on the
``BCOO`` / ``BCSR`` that ``to_jax`` makes of torch's sparse COO / CSR / CSC tensors.

Values and gradients (to ``other`` and to the matrix's values) for every reduction,
layout and float dtype; the rules that could break silently each have a case that
changes the result: repeated COO entries (summed before mean / min / max), ties in
max / min (the whole gradient to the first entry of the row), NaN (propagates), an
empty row (0), JAX's padding slots (reach no row).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental import sparse as jsparse
from torch_geometric import utils as U

from torch2jax_ops import dtypes, to_jax
from torch2jax_ops.geometric import utils as G

REDUCES = ["sum", "mean", "max", "min"]
LAYOUTS = ["csr", "coo", "csc", "coo-repeated"]

#: 4 x 5; row 1 is empty; row 0 ties in feature 0 (2 * x[1, 0] == 1 * x[3, 0] == 12);
#: entry (3, 4) is stored twice in the repeated COO (values 0.5 + 1.5)
ROWS = [0, 0, 0, 2, 2, 3, 3, 3]
COLS = [1, 3, 4, 0, 2, 1, 4, 2]
VALUES = [2.0, 1.0, -1.0, 0.5, 3.0, -2.0, 0.5, 1.0]


def matrix(layout: str, dtype: str, values=None):
    """The torch sparse tensor (and its values leaf, for value gradients)."""
    tdt = dtypes.torch_dtype(dtype)
    vals = torch.tensor(VALUES if values is None else values, dtype=tdt)
    index = torch.tensor([ROWS, COLS])
    if layout == "coo-repeated":
        index = torch.cat([index, torch.tensor([[3], [4]])], dim=1)
        vals = torch.cat([vals, torch.tensor([1.5], dtype=tdt)])
        leaf = vals.clone().requires_grad_()
        return torch.sparse_coo_tensor(index, leaf, (4, 5)), leaf
    coo = torch.sparse_coo_tensor(index, vals, (4, 5)).coalesce()
    leaf = coo.values().clone().requires_grad_()
    coo = torch.sparse_coo_tensor(coo.indices(), leaf, (4, 5), is_coalesced=True)
    if layout == "coo":
        return coo, leaf
    # CSR / CSC rebuilt from their parts, so the values are a leaf of their own
    base = coo.detach().to_sparse_csr() if layout == "csr" else coo.detach().to_sparse_csc()
    if layout == "csr":
        leaf = base.values().clone().requires_grad_()
        return torch.sparse_csr_tensor(base.crow_indices(), base.col_indices(), leaf,
                                       (4, 5)), leaf
    # torch cannot differentiate a CSC matrix's values (sparse_addmm_sparse_backward
    # refuses the layout): compare() takes them from the CSR case, entry by entry
    return base, None


def features(dtype: str, nan: bool = False):
    x = torch.tensor([[3.0, -1.0], [6.0, 2.0], [-4.0, 0.5], [12.0, -0.5], [1.0, 7.0]],
                     dtype=dtypes.torch_dtype(dtype))
    if nan:
        x[2, 0] = float("nan")
    return x


def with_values(array, data):
    """The same sparse matrix with other values (what jax.grad differentiates)."""
    if isinstance(array, jsparse.BCSR):
        return jsparse.BCSR((data, array.indices, array.indptr), shape=array.shape)
    return jsparse.BCOO((data, array.indices), shape=array.shape,
                        indices_sorted=array.indices_sorted, unique_indices=array.unique_indices)


def compare(layout, dtype, reduce, nan=False, jit=False):
    adj, leaf = matrix(layout, dtype)
    x = features(dtype, nan).requires_grad_()
    out = U.spmm(adj, x, reduce)
    weight = torch.linspace(-1.0, 2.0, out.numel(), dtype=out.dtype).reshape(out.shape)
    (torch.nan_to_num(out) * weight).sum().backward()

    a, xj, w = to_jax(adj), to_jax(x.detach()), to_jax(weight)

    def loss(data, xx):
        return (jnp.nan_to_num(G.spmm(with_values(a, data), xx, reduce)) * w).sum()

    fn = jax.jit(G.spmm, static_argnums=2) if jit else G.spmm
    got = fn(a, xj, reduce)
    grad_fn = jax.jit(jax.grad(loss, argnums=(0, 1))) if jit else jax.grad(loss, argnums=(0, 1))
    g_values, g_x = grad_fn(a.data, xj)
    rtol, atol = dtypes.tolerance(dtype)
    g_rtol, g_atol = dtypes.tolerance(dtype, "grad")
    assert got.dtype == xj.dtype
    np.testing.assert_allclose(np.asarray(got), out.detach().numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(np.asarray(g_x), x.grad.numpy(), rtol=g_rtol, atol=g_atol)
    if leaf is not None:
        want = leaf.grad.numpy()
    else:  # CSC: torch's value gradients of the same matrix as CSR, in CSC's entry order
        csr, csr_leaf = matrix("csr", dtype)
        xc = features(dtype, nan).requires_grad_()
        (torch.nan_to_num(U.spmm(csr, xc, reduce)) * weight).sum().backward()
        pairs = U.to_edge_index(csr.detach())[0].T.tolist()
        by_entry = {(r, c): g for (r, c), g in zip(pairs, csr_leaf.grad.numpy())}
        order = U.to_edge_index(adj)[0].T.tolist()
        want = np.array([by_entry[(r, c)] for r, c in order])
    np.testing.assert_allclose(np.asarray(g_values), want, rtol=g_rtol, atol=g_atol)
    return np.asarray(got), np.asarray(g_x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_spmm_matches_pyg(layout, reduce, dtype):
    with dtypes.x64(dtype == "float64"):
        got, g_x = compare(layout, dtype, reduce)
    assert (got[1] == 0).all()  # the empty row
    if reduce == "max":
        # row 0, feature 0: 2 * x[1, 0] = 1 * x[3, 0] = 12, a tie: the gradient goes to
        # the first entry in CSR order (column 1) only; column 3 is read by row 0 alone
        assert got[0, 0] == 12 and g_x[3, 0] == 0 and g_x[1, 0] != 0


@pytest.mark.parametrize("reduce", REDUCES)
def test_spmm_under_jit_and_with_nan(reduce):
    compare("csr", "float32", reduce, jit=True)
    got, _ = compare("coo", "float32", reduce, nan=True)
    # x[2, 0] is NaN: rows 2 and 3 read column 2, so their feature 0 is NaN (propagated)
    assert np.isnan(got[2, 0]) and np.isnan(got[3, 0]) and not np.isnan(got[0, 0])


def test_spmm_tie_rule_changes_the_gradient():
    """The first-winner rule is torch.sparse.mm's: an even split would give 1 and 0.5."""
    adj = torch.sparse_csr_tensor(torch.tensor([0, 2]), torch.tensor([0, 1]),
                                  torch.tensor([1.0, 1.0]), (1, 2))
    x = torch.tensor([[5.0], [5.0]], requires_grad=True)
    U.spmm(adj, x, "max").sum().backward()
    g = jax.grad(lambda xx: G.spmm(to_jax(adj), xx, "max").sum())(to_jax(x.detach()))
    np.testing.assert_array_equal(np.asarray(g), x.grad.numpy())
    np.testing.assert_array_equal(np.asarray(g), [[1.0], [0.0]])


def test_spmm_repeated_entries_are_summed_before_mean():
    """(3, 4) stored twice: torch coalesces, so row 3 averages 3 entries, not 4."""
    adj, _ = matrix("coo-repeated", "float32")
    x = features("float32")
    got = np.asarray(G.spmm(to_jax(adj), to_jax(x), "mean"))
    np.testing.assert_allclose(got, U.spmm(adj, x, "mean").detach().numpy(), rtol=1e-6)
    row3 = (-2.0 * x[1] + 2.0 * x[4] + 1.0 * x[2]) / 3
    np.testing.assert_allclose(got[3], row3.numpy(), rtol=1e-6)


def test_padding_slots_reach_no_row():
    dense = jnp.asarray(matrix("coo", "float32")[0].to_dense().detach().numpy())
    x = to_jax(features("float32"))
    for padded in (jsparse.BCOO.fromdense(dense, nse=12), jsparse.BCSR.fromdense(dense, nse=12)):
        assert padded.nse == 12  # four slots past the eight entries
        for reduce in REDUCES:
            np.testing.assert_allclose(
                np.asarray(G.spmm(padded, x, reduce)),
                np.asarray(G.spmm(jsparse.BCOO.fromdense(dense), x, reduce)), rtol=1e-6)
        edge_index, values = G.to_edge_index(padded)
        assert (np.asarray(edge_index)[0, 8:] == 4).all()  # out of range: row N
        np.testing.assert_array_equal(np.asarray(values)[8:], 0)


@pytest.mark.parametrize("layout", ["csr", "coo", "csc"])
def test_to_edge_index_matches_pyg(layout):
    adj, _ = matrix(layout, "float32")
    edge_index, values = U.to_edge_index(adj)
    got_index, got_values = G.to_edge_index(to_jax(adj))
    assert got_index.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(got_index), edge_index.numpy())
    np.testing.assert_array_equal(np.asarray(got_values), values.detach().numpy())


@pytest.mark.parametrize("call, error, words", [
    (lambda a, x: G.spmm(a, x, "prod"), ValueError, "'prod' not supported"),
    (lambda a, x: G.spmm(a, x[:3], "sum"), ValueError, r"\[M, F\] with M = src.shape\[1\] = 5"),
    (lambda a, x: G.spmm(a.todense(), x), TypeError, "BCOO or BCSR"),
    (lambda a, x: G.to_edge_index(jsparse.BCOO.fromdense(jnp.ones((2, 3, 3)), n_batch=1)),
     ValueError, "2-D sparse matrix"),
])
def test_errors_name_the_argument(call, error, words):
    a = to_jax(matrix("csr", "float32")[0])
    with pytest.raises(error, match=words):
        call(a, to_jax(features("float32")))


class SparseNet(torch.nn.Module):
    """A user's model on a sparse adjacency, as PyG's docs write one."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 3)

    def forward(self, x, adj_t):
        h = U.spmm(adj_t, self.lin(x), reduce="mean")
        return U.spmm(adj_t, h.relu(), reduce="max")


def test_a_user_model_on_a_sparse_adjacency_ports():
    from torch2jax_ops.nn import from_torch

    torch.manual_seed(0)
    model = SparseNet()
    adj = torch.sparse_coo_tensor(torch.tensor([[0, 1, 2, 3, 4, 4], [1, 2, 3, 4, 0, 2]]),
                                  torch.tensor([1.0, 2.0, -1.0, 0.5, 1.0, 3.0]),
                                  (5, 5)).to_sparse_csr()
    x = features("float32")
    port = from_torch(model)
    got = jax.jit(lambda m, x, a: m(x, a))(port, to_jax(x), to_jax(adj))
    np.testing.assert_allclose(np.asarray(got), model(x, adj).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 3), st.integers(0, 2**31 - 1),
       st.sampled_from(REDUCES), st.sampled_from(["csr", "coo", "csc"]))
def test_spmm_random_matrices(rows, cols, per_row, seed, reduce, layout):
    rng = np.random.default_rng(seed)
    dense = np.zeros((rows, cols), np.float32)
    for r in range(rows):
        picked = rng.choice(cols, size=min(per_row, cols), replace=False)
        dense[r, picked] = rng.integers(-3, 4, size=picked.size)  # small ints: many ties
    t = torch.tensor(dense)
    adj = {"csr": t.to_sparse_csr(), "coo": t.to_sparse(), "csc": t.to_sparse_csc()}[layout]
    x = torch.tensor(rng.integers(-3, 4, size=(cols, 3)).astype(np.float32), requires_grad=True)
    out = U.spmm(adj, x, reduce)
    out.sum().backward()
    got, grad = G.spmm(to_jax(adj), to_jax(x.detach()), reduce), \
        jax.grad(lambda xx: G.spmm(to_jax(adj), xx, reduce).sum())(to_jax(x.detach()))
    np.testing.assert_allclose(np.asarray(got), out.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(grad), x.grad.numpy(), rtol=1e-6, atol=1e-6)
