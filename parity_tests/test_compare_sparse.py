"""compare / compare_modules with torch sparse inputs (a CSR / COO adjacency): the JAX side
gets the BCSR / BCOO, the input is differentiated only when it requires grad, and then by
its stored values (torch's gradient read at the input's entries)."""
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch_geometric.nn import GCNConv, GraphConv

from torch2jax_ops.geometric.utils import spmm
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import compare, compare_modules

warnings.filterwarnings("ignore", message=".*[Ss]parse.*")

RNG = np.random.default_rng(0)
X = torch.tensor(RNG.standard_normal((5, 4)), dtype=torch.float32)
EDGES = torch.tensor([[0, 1, 2, 3, 4, 0, 1], [1, 2, 3, 4, 0, 2, 1]])
WEIGHTS = torch.tensor(RNG.uniform(0.5, 2.0, 7), dtype=torch.float32)


def _adjacency(layout: str) -> torch.Tensor:
    """adj_t [N_dst, N_src] of EDGES with WEIGHTS, coalesced, in ``layout``."""
    adj = torch.sparse_coo_tensor(EDGES.flip(0), WEIGHTS, (5, 5)).coalesce()
    return adj.to_sparse_csr() if layout == "csr" else adj


@pytest.mark.parametrize("layout", ["csr", "coo"])
@pytest.mark.parametrize("jit", [True, False])
def test_a_sparse_input_is_converted_not_differentiated(layout, jit):
    # was KeyError: '[2]' (the sparse input was taken for a differentiable array)
    torch.manual_seed(0)
    conv = GCNConv(4, 3)
    result = compare_modules(conv, from_torch(conv), X, _adjacency(layout), jit=jit)
    assert result.passed, str(result)
    paths = {leaf.path for leaf in result.leaves}
    assert paths == {"output", "grad lin.weight", "grad bias", "grad args[0]"}
    assert result["output"].shape == (5, 3)


@pytest.mark.parametrize("layout", ["csr", "coo"])
@pytest.mark.parametrize("jit", [True, False])
def test_a_sparse_input_that_requires_grad_is_differentiated_by_its_values(layout, jit):
    torch.manual_seed(0)
    conv = GraphConv(4, 3)
    adj = _adjacency(layout).requires_grad_(True)
    result = compare_modules(conv, from_torch(conv), X, adj, jit=jit)
    assert result.passed, str(result)
    leaf = result["grad args[1]"]
    assert leaf.shape == (7,) and leaf.dtype == "float32"
    # the gradient w.r.t. one stored weight is not zero: the check compares real numbers
    assert result["grad args[0]"].passed


def test_a_port_that_ignores_the_values_fails_on_their_gradient():
    adj = _adjacency("csr").requires_grad_(True)

    def theirs(adj, x):
        return adj @ x

    def wrong(adj, x):  # the pattern's ones instead of the stored values
        ones = type(adj)((jnp.ones_like(adj.data), adj.indices, adj.indptr), shape=adj.shape)
        return spmm(ones, x)

    right = compare(theirs, lambda a, x: spmm(a, x), adj, X)
    assert right.passed, str(right)
    assert right["grad[0]"].shape == (7,)
    result = compare(theirs, wrong, adj, X)
    failed = {leaf.path for leaf in result.failures()}
    assert failed == {"output", "grad[0]", "grad[1]"}, str(result)
    # the values get no gradient in the wrong port: the whole torch gradient is the error
    assert result["grad[0]"].max_rel == pytest.approx(1.0)
    # judged against torch's float64 run too (the sparse input cast up), and still failing
    assert "float64 result" in result["grad[0]"].message


def test_gradient_of_the_values_matches_the_dense_formula():
    # d sum(cot * (A x)) / d A[i, j] = cot[i] . x[j] at each stored (i, j)
    adj = _adjacency("coo").requires_grad_(True)
    out = compare(lambda a, x: (a @ x).sum(0), lambda a, x: spmm(a, x).sum(0), adj, X)
    assert out.passed, str(out)
    cot = np.random.default_rng(0).standard_normal(4)
    rows, cols = _adjacency("coo").indices().numpy()
    expected = X.numpy()[cols] @ cot
    from torch2jax_ops.parity._trees import _entry_values
    leaf = adj.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad((leaf @ X).sum(0), [leaf], torch.as_tensor(cot, dtype=torch.float32))
    np.testing.assert_allclose(_entry_values(leaf, g).numpy(), expected, rtol=1e-5)
    assert len(rows) == 7
