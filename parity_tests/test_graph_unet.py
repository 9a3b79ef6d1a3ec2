"""GraphUNet-style sparse ops in traced forwards (torch2jax_ops/nn/_functions_sparse.py and the
geometric table's index-keeping entries) vs torch / PyG.

1. the cases of section "graph_unet" (torch2jax_ops/parity/cases/graph_unet.py): PyG's augment_adj
   chain in user models (CSR and COO, read back three ways, empty graphs, zero sums) and
   PyG's GraphUNet itself (depth 1 under jit; depth 2 and 3 eagerly);
2. the "functions" cases of the torch sparse entries (also run by test_functions_parity);
3. the storage order of sparse @ sparse against torch on random matrices;
4. the error paths: traced indices (sparse @ sparse, GraphUNet depth 2 under jit), unsorted
   or out-of-range row ids, uncoalesced COO, mixed layouts.
"""
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax.experimental import sparse as jsparse
from torch_geometric.utils import to_edge_index, to_torch_csr_tensor

from torch2jax_ops import _dtypes, to_jax
from torch2jax_ops.nn import _functions_sparse as sp
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import _suite as suite
from torch2jax_ops.parity import compare_modules

warnings.filterwarnings("ignore", message=".*[Ss]parse.*")

CASES = suite.cases("graph_unet")
ENTRY_CASES = [c for c in suite.cases("functions") if c.label.startswith("sparse-")]


@pytest.mark.parametrize("case", CASES + ENTRY_CASES, ids=[c.id for c in CASES + ENTRY_CASES])
def test_matches_torch(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"


SPARSE_KEYS = ["torch._convert_indices_from_coo_to_csr", "torch.sparse_csr_tensor",
               "torch.sparse_coo_tensor", "torch.sparse.mm", "Tensor.to_sparse_coo",
               "Tensor.to_dense", "Tensor.indices", "Tensor.values", "Tensor.crow_indices",
               "Tensor.col_indices", "Tensor.coalesce"]


def test_every_sparse_entry_has_a_case():
    from torch2jax_ops.nn._functions import function_keys, method_keys

    registered = set(function_keys()) | {f"Tensor.{k}" for k in method_keys()}
    assert [k for k in SPARSE_KEYS if k not in registered] == []
    covered = {c.op for c in ENTRY_CASES}
    assert [k for k in SPARSE_KEYS if k not in covered] == []
    assert {"operator.matmul"} <= covered


# ------------------------------------------------------------------ storage order

def _csr_square(n: int, e: int, seed: int, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    ei = torch.tensor(rng.integers(0, n, (2, e)))
    w = torch.tensor(rng.standard_normal(e)).to(dtype)
    return to_torch_csr_tensor(ei, w, size=(n, n))


@pytest.mark.parametrize("seed", range(40))
def test_sparse_square_pattern_and_order_match_torch(seed):
    """torch's CSR @ CSR stores each row's columns in first-reached order, not sorted."""
    rng = np.random.default_rng(100 + seed)
    n, e = int(rng.integers(1, 15)), int(rng.integers(0, 50))
    a = _csr_square(n, e, seed)
    b = _csr_square(n, int(rng.integers(0, 50)), seed + 1000)
    want = a @ b
    with _dtypes.x64(True):
        got = sp.sparse_matmul(to_jax(a), to_jax(b))
        assert isinstance(got, jsparse.BCSR)
        np.testing.assert_array_equal(np.asarray(got.indptr), want.crow_indices().numpy())
        np.testing.assert_array_equal(np.asarray(got.indices), want.col_indices().numpy())
        np.testing.assert_allclose(np.asarray(got.data), want.values().numpy(), rtol=1e-12,
                                   atol=1e-12)


def test_unsorted_rows_are_not_sorted_by_the_product():
    """The first row of this square reaches column 2 before 0 (torch keeps that order)."""
    ei = torch.tensor([[0, 0, 1, 2, 2, 3], [1, 2, 2, 0, 3, 1]])
    a = to_torch_csr_tensor(ei, torch.tensor([1., -1., 1., 1., 0., 2.]), size=(4, 4))
    got = sp.sparse_matmul(to_jax(a), to_jax(a))
    assert np.asarray(got.indices).tolist() == [2, 0, 3, 0, 3, 1, 2, 2]
    assert np.asarray(got.indices).tolist() == (a @ a).col_indices().tolist()
    # stored zeros: 0 * w and 1 - 1 stay entries, as in torch
    assert np.asarray(got.data).tolist() == (a @ a).values().tolist()


# ------------------------------------------------------------------ errors

class _Square(torch.nn.Module):
    def forward(self, x, edge_index):
        n = x.size(0)
        adj = to_torch_csr_tensor(edge_index, x[:, 0][edge_index[0]], size=(n, n),
                                  is_coalesced=True)
        adj2 = adj @ adj
        return to_edge_index(adj2)


def test_traced_indices_name_the_product_and_the_line():
    port = from_torch(_Square())
    x = jnp.ones((4, 2))
    ei = jnp.asarray([[0, 1, 2], [1, 2, 3]])
    out = port(x, ei)  # eager: fine
    assert np.asarray(out[0]).tolist() == [[0, 1], [2, 3]]
    closed = jax.jit(lambda x: port(x, ei))(x)  # a constant edge_index under jit: fine
    assert np.asarray(closed[0]).tolist() == [[0, 1], [2, 3]]
    with pytest.raises(TypeError, match="sparse @ sparse product depends on the index values"
                       ) as info:
        jax.jit(lambda x, e: port(x, e))(x, ei)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert re.search(r"test_graph_unet\.py:\d+.*adj2 = adj @ adj", notes), notes
    assert "compile-time constant" in str(info.value)


def test_graph_unet_depth2_under_jit_names_the_op_and_line():
    """The second augment_adj squares the adjacency of the pooled graph, whose edges depend on
    x's scores (traced): its size is not known while the program is built."""
    from torch_geometric.nn.models import GraphUNet

    torch.manual_seed(0)
    model = GraphUNet(4, 8, 3, depth=2).eval()
    port = from_torch(model)
    x = torch.randn(10, 4)
    ei = torch.tensor([[0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 0, 2, 1, 4, 3, 6, 5, 8, 9, 0]])
    xj, eij = jnp.asarray(x.numpy()), jnp.asarray(ei.numpy())
    eager = port(xj, eij)
    np.testing.assert_allclose(np.asarray(eager), model(x, ei).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(TypeError, match="remove_self_loops: the number of edges") as info:
        jax.jit(lambda x: port(x, eij))(xj)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "remove_self_loops" in notes and "graph_unet.py" in notes, notes
    with pytest.raises(TypeError, match="remove_self_loops"):
        compare_modules(model, port, x, ei)


def test_coo_to_csr_indices_checks_concrete_ids():
    with pytest.raises(ValueError, match="must be sorted"):
        sp.convert_indices_from_coo_to_csr(jnp.asarray([0, 2, 1]), 3)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, size=3\)"):
        sp.convert_indices_from_coo_to_csr(jnp.asarray([0, 3]), 3)
    with pytest.raises(ValueError, match="`size` must be >= 0"):
        sp.convert_indices_from_coo_to_csr(jnp.asarray([0]), -1)
    # traced ids: the same counts, as torch's kernel for sorted ids
    got = jax.jit(lambda i: sp.convert_indices_from_coo_to_csr(i, 5, out_int32=True))(
        jnp.asarray([0, 0, 2, 4]))
    want = torch._convert_indices_from_coo_to_csr(torch.tensor([0, 0, 2, 4]), 5, out_int32=True)
    assert got.dtype == jnp.int32 and np.asarray(got).tolist() == want.tolist()


def test_uncoalesced_coo_refuses_indices_like_torch():
    t = torch.sparse_coo_tensor(torch.tensor([[1, 0, 1], [0, 1, 0]]), torch.ones(3), (2, 2))
    with pytest.raises(RuntimeError, match="uncoalesced"):
        t.indices()
    adj = to_jax(t)
    with pytest.raises(RuntimeError, match="uncoalesced"):
        sp.indices(adj)
    with pytest.raises(RuntimeError, match="uncoalesced"):
        sp.values(adj)
    c = sp.coalesce(adj)
    assert np.asarray(sp.indices(c)).tolist() == t.coalesce().indices().tolist()
    assert np.asarray(sp.values(c)).tolist() == t.coalesce().values().tolist()
    with pytest.raises(TypeError, match="number of distinct entries depends"):
        jax.jit(lambda a: sp.coalesce(a))(adj)


def test_mixed_layouts_and_shapes_are_refused():
    csr = jsparse.BCSR.fromdense(jnp.eye(3))
    coo = jsparse.BCOO.fromdense(jnp.eye(3))
    with pytest.raises(TypeError, match="same layout"):
        sp.sparse_matmul(csr, coo)
    with pytest.raises(ValueError, match="cannot be multiplied"):
        sp.sparse_matmul(coo, jsparse.BCOO.fromdense(jnp.ones((2, 3))))
    with pytest.raises(TypeError, match="dense @ sparse is not mapped"):
        sp.sparse_matmul(jnp.eye(3), csr)
    with pytest.raises(ValueError, match=r"dense \[3\] or \[3, F\] operand"):
        sp.sparse_matmul(csr, jnp.ones((2, 2)))
    with pytest.raises(TypeError, match="same dtype"):
        sp.sparse_matmul(csr, jsparse.BCSR.fromdense(jnp.eye(3, dtype=jnp.int32)))
