"""torch_sparse.SparseTensor inputs: the "sparse" section's cases (PyG layers and a user
model on a SparseTensor adj_t vs the real PyG), the SparseTensor's own rules (values,
transpose, set_value layouts), and the errors where a port does not take one."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_sparse
from torch_geometric import nn as gnn
from torch_sparse import SparseTensor as TorchSparseTensor

from testkit.pyg_fused import pyg
from torch2jax_ops import to_jax
from torch2jax_ops.geometric import SparseTensor
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import _suite as suite
from torch2jax_ops.parity import compare_modules

warnings.filterwarnings("ignore", message=".*[Ss]parse.*")

CASES = suite.cases("sparse")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sparse_tensor_layer_matches_pyg(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"


def test_the_section_covers_values_dtypes_and_the_user_model():
    ids = [c.id for c in CASES]
    assert len(CASES) == 9 * 2 * 2 * 2 + 2 * 2
    assert any("user_model" in i and "float64" in i for i in ids)
    assert any("GCNConv/dupes/values" in i for i in ids)


ROW = torch.tensor([0, 1, 1, 2, 2, 3])
COL = torch.tensor([1, 0, 0, 2, 3, 1])
VAL = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])


def _pair(value=VAL):
    theirs = TorchSparseTensor(row=ROW, col=COL, value=value, sparse_sizes=(4, 4))
    return theirs, to_jax(theirs)


def test_to_jax_keeps_the_storage():
    theirs, ours = _pair()
    assert isinstance(ours, SparseTensor) and ours.sparse_sizes == (4, 4)
    np.testing.assert_array_equal(ours.row, ROW.numpy())
    np.testing.assert_array_equal(ours.col, COL.numpy())
    np.testing.assert_array_equal(ours.value, VAL.numpy())
    assert not to_jax(theirs.set_value(None)).has_value()
    # repeated (1, 0) summed, as a torch COO tensor's to_dense
    dense = theirs.to_torch_sparse_coo_tensor().to_dense().numpy()
    np.testing.assert_array_equal(ours.to_dense(), dense)
    assert dense[1, 0] == 5.0


@pytest.mark.parametrize("layout", [None, "coo", "csr", "csc"])
def test_transpose_and_set_value_follow_torch_sparse(layout):
    theirs, ours = _pair()
    new = torch.arange(10.0, 16.0)
    t_theirs = theirs.t().set_value(new, layout=layout)
    t_ours = ours.t().set_value(jnp.asarray(new.numpy()), layout=layout)
    np.testing.assert_array_equal(t_ours.row, t_theirs.storage.row().numpy())
    np.testing.assert_array_equal(t_ours.col, t_theirs.storage.col().numpy())
    np.testing.assert_array_equal(t_ours.value, t_theirs.storage.value().numpy())
    np.testing.assert_array_equal(ours.fill_value(2.5).value, theirs.fill_value(2.5).storage.value())


def test_set_value_checks_its_length():
    _, ours = _pair()
    with pytest.raises(ValueError, match="6 rows"):
        ours.set_value(jnp.ones(5))
    with pytest.raises(ValueError, match="layout"):
        ours.set_value(jnp.ones(6), layout="dense")


def test_gcn_replaces_the_diagonal_where_the_torch_sparse_branch_adds_to_it():
    # PyG itself gives two answers: fill_diag on a SparseTensor, an added loop on a CSR
    torch.manual_seed(0)
    conv = gnn.GCNConv(3, 2).eval()
    theirs, ours = _pair()
    x = torch.randn(4, 3)
    on_st = conv(x, theirs)
    on_csr = conv(x, theirs.to_torch_sparse_csr_tensor())
    assert not torch.allclose(on_st, on_csr)
    port = from_torch(conv)
    np.testing.assert_allclose(port(to_jax(x), ours), on_st.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(port(to_jax(x), ours.to_bcsr()), on_csr.detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_gin_drops_the_values():
    torch.manual_seed(0)
    conv = gnn.GINConv(torch.nn.Linear(3, 2)).eval()
    theirs, ours = _pair()
    x = torch.randn(4, 3)
    expected = conv(x, theirs).detach().numpy()
    np.testing.assert_allclose(from_torch(conv)(to_jax(x), ours), expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(from_torch(conv)(to_jax(x), ours.to_bcsr()), expected)


def test_under_jit_and_as_a_pytree():
    torch.manual_seed(0)
    conv = gnn.GraphConv(3, 2).eval()
    theirs, ours = _pair()
    x = torch.randn(4, 3)
    port = from_torch(conv)
    out = jax.jit(lambda x, a: port(x, a))(to_jax(x), ours.t())
    np.testing.assert_allclose(out, conv(x, theirs.t()).detach().numpy(), rtol=1e-5, atol=1e-6)
    leaves, treedef = jax.tree_util.tree_flatten(ours)
    assert len(leaves) == 3 and jax.tree_util.tree_unflatten(treedef, leaves).sparse_sizes == (4, 4)


def test_a_port_without_sparse_tensor_rules_refuses_one():
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    _, ours = _pair()
    with pytest.raises(TypeError, match="SparseTensor.*GCNConv, GCN2Conv, GINConv, SAGEConv, GraphConv"):
        from_torch(gnn.GATConv(3, 2))(to_jax(x), ours)
    eg = gnn.EGConv(4, 4, num_heads=2, num_bases=2)
    with pytest.raises(Exception, match="SparseTensor"):
        from_torch(eg)(to_jax(torch.randn(4, 4)), ours)


def test_compare_modules_takes_a_sparse_tensor_input():
    torch.manual_seed(0)
    conv = gnn.SAGEConv(3, 2).eval()
    theirs, _ = _pair()
    x = torch.randn(4, 3)
    pyg(conv, x, theirs.t())  # PyG's propagate template must have its fused path (testkit)
    result = compare_modules(conv, from_torch(conv), x, theirs.t())
    assert result.passed, str(result)
    assert {leaf.path for leaf in result.leaves} >= {"output", "grad args[0]"}
    assert not any("args[1]" in leaf.path for leaf in result.leaves)
    assert torch_sparse.__version__


@pytest.mark.parametrize("normalize,loops", [(True, True), (True, False), (False, True),
                                             (False, False)])
def test_gcn2conv_on_a_sparse_tensor_matches_pyg(normalize, loops):
    """GCN2Conv (gcn2_cora.py feeds T.ToSparseTensor's adj_t): PyG's gcn_norm rules on a
    SparseTensor (stored diagonal replaced), with repeated and diagonal entries."""
    from torch_geometric.nn import GCN2Conv
    from torch_sparse import SparseTensor as TorchSparse

    from torch2jax_ops.nn import from_torch
    from torch2jax_ops.parity import assert_modules_parity

    torch.manual_seed(0)
    n = 8
    ei = torch.cat([torch.randint(0, n, (2, 24)), torch.tensor([[1, 2], [1, 2]])], 1)
    adj = TorchSparse(row=ei[1], col=ei[0], value=torch.rand(ei.shape[1]), sparse_sizes=(n, n))
    layer = GCN2Conv(4, alpha=0.1, theta=0.5, layer=2, normalize=normalize,
                     add_self_loops=loops).eval()
    assert_modules_parity(layer, from_torch(layer), torch.randn(n, 4), torch.randn(n, 4), adj)
