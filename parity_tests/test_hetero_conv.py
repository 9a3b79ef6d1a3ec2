"""HeteroConv's port: its matmul fusion, its routing rules, its errors, against PyG.

The parity cases ("hetero" section, ``HeteroConv-*``) compare every output and
gradient; these tests pin what those cannot see: that the relations into one
node type really run as one matmul (and only where that is exact), that a
traced forward can iterate the dict a leaf returns, and the error paths.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch_geometric")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402
import torch_geometric.nn as tnn  # noqa: E402

from torch2jax_ops.parity.cases.hetero import CITES, REV_HAS, WRITES, hetero_graph, inputs  # noqa: E402
from testkit.pyg_fused import pyg  # noqa: E402
from torch2jax_ops import to_jax  # noqa: E402
from torch2jax_ops.geometric.nn import HeteroConv  # noqa: E402
from torch2jax_ops.geometric.nn.conv._hetero_conv import group  # noqa: E402
from torch2jax_ops.nn import UnsupportedModuleError, from_torch  # noqa: E402


def _jax(args: tuple) -> tuple:
    return tuple({k: to_jax(v, allow_downcast=True) for k, v in d.items()} for d in args)


def _eqns(port, *args, **kwargs) -> list:
    """Every equation of ``port(*args, **kwargs)``'s jaxpr, nested ones included."""
    out: list = []

    def walk(jaxpr) -> None:
        for eqn in jaxpr.eqns:
            out.append(eqn)
            for param in eqn.params.values():
                # a call's jaxpr, or a cond's branches (platform_dependent: every platform's)
                for inner in param if isinstance(param, tuple) else (param,):
                    inner = getattr(inner, "jaxpr", None)
                    if inner is not None:
                        walk(getattr(inner, "jaxpr", inner))
    walk(jax.make_jaxpr(lambda *a: port(*a, **kwargs))(*args).jaxpr)
    return out


def _dots(port, *args, **kwargs) -> int:
    return sum(1 for eqn in _eqns(port, *args, **kwargs) if eqn.primitive.name == "dot_general")


def _into_paper(aggr, make=lambda: tnn.SAGEConv((-1, -1), 8)):
    """Three relations into ``paper`` only (author 6, paper 8, term 4 features -> 8)."""
    torch.manual_seed(0)
    data = hetero_graph()
    conv = tnn.HeteroConv({WRITES: make(), CITES: make(), REV_HAS: make()}, aggr=aggr)
    with torch.no_grad():
        conv(*inputs(data))
    return conv, inputs(data)


def _close(port_out: dict, torch_out: dict, tol: float = 1e-5) -> None:
    assert set(port_out) == set(torch_out)
    for k, v in torch_out.items():
        np.testing.assert_allclose(np.asarray(port_out[k]), v.detach().numpy(), rtol=tol,
                                   atol=tol, err_msg=k)


@pytest.mark.parametrize("aggr", ["sum", "mean"])
def test_relations_into_one_type_are_one_matmul(aggr):
    """SAGEConv x3 into paper: unfused, 2 matmuls per relation (lin_l, lin_r) = 6; fused, 1
    (root weights summed, aggregations concatenated). Same values as PyG."""
    conv, args = _into_paper(aggr)
    port = from_torch(conv)
    assert isinstance(port, HeteroConv)
    j = _jax(args)
    assert _dots(port, *j) == 1
    _close(port(*j), conv(*args))


def test_a_max_group_is_not_fused():
    """group aggr "max" is not a sum of the relations: each conv runs on its own (6 dots)."""
    conv, args = _into_paper("max")
    port = from_torch(conv)
    j = _jax(args)
    assert _dots(port, *j) == 6
    _close(port(*j), conv(*args))


def test_a_conv_that_is_not_linear_keeps_the_group_unfused():
    """A max-aggregating SAGEConv is no sum of matmuls: the group runs conv by conv."""
    conv, args = _into_paper("sum", lambda: tnn.SAGEConv((-1, -1), 8, aggr="max"))
    port = from_torch(conv)
    j = _jax(args)
    assert _dots(port, *j) == 6
    _close(port(*j), conv(*args))


def test_fused_gradients_match_pyg():
    """Every weight's gradient through the fused matmul (the summed root weights split back
    into each relation's lin_r) and every feature matrix's, against torch's backward."""
    conv, args = _into_paper("sum")
    x = {k: v.clone().requires_grad_(True) for k, v in args[0].items()}
    sum((v ** 2).sum() for v in conv(x, args[1]).values()).backward()
    port = from_torch(conv)
    xj, eij = _jax(args)

    def loss(p, x):
        return sum(jnp.sum(v ** 2) for v in p(x, eij).values())

    from torch2jax_ops.nn import state_dict
    g_port, g_x = jax.grad(loss, argnums=(0, 1))(port, xj)
    grads = state_dict(g_port)
    for name, p in conv.named_parameters():
        np.testing.assert_allclose(np.asarray(grads[name]), p.grad.numpy(), rtol=1e-5,
                                   atol=1e-5, err_msg=name)
    for k, v in x.items():
        np.testing.assert_allclose(np.asarray(g_x[k]), v.grad.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=k)


def test_only_relations_with_an_edge_index_run():
    """No edge index for ``cites``: its conv is skipped (PyG's has_edge_level_arg rule), and a
    type no relation reaches is absent from the output, as in PyG."""
    conv, (x, ei) = _into_paper("sum")
    ei = {k: v for k, v in ei.items() if k != CITES}
    port = from_torch(conv)
    out = port(*_jax((x, ei)))
    _close(out, conv(x, ei))
    only_writes = {WRITES: ei[WRITES]}
    assert set(port(*_jax((x, only_writes)))) == {"paper"}
    assert port(*_jax((x, {}))) == {} == conv(x, {})


def test_keyword_dicts_reach_each_conv():
    """``edge_weight_dict=`` gives each GraphConv its own ``edge_weight`` (PyG strips
    ``_dict``); the weights change the result, so dropping them would fail."""
    conv, (x, ei) = _into_paper("sum", lambda: tnn.GraphConv((-1, -1), 8))
    torch.manual_seed(3)
    w = {k: torch.rand(v.shape[1]) for k, v in ei.items()}
    port = from_torch(conv)
    xj, eij = _jax((x, ei))
    wj = {k: to_jax(v) for k, v in w.items()}
    out = port(xj, eij, edge_weight_dict=wj)
    _close(out, conv(x, ei, edge_weight_dict=w))
    unweighted = port(xj, eij)
    assert not np.allclose(np.asarray(out["paper"]), np.asarray(unweighted["paper"]))
    assert _dots(port, xj, eij, edge_weight_dict=wj) == 1


def test_keyword_arguments_must_end_in_dict():
    conv, args = _into_paper("sum")
    port = from_torch(conv)
    with pytest.raises(ValueError, match="need to end with '_dict' \\(got 'edge_weight'\\)"):
        conv(*args, edge_weight={})
    with pytest.raises(ValueError, match="need to end with '_dict' \\(got 'edge_weight'\\)"):
        port(*_jax(args), edge_weight={})


def test_a_conv_without_a_port_fails_when_its_relation_runs():
    """A PixelShuffle has no port: the other relations still run; once its edge type has
    edges, the error names the module, the edge type and how to register a port."""
    h = tnn.HeteroConv({("a", "r", "b"): torch.nn.PixelShuffle(2),
                        ("b", "s", "b"): tnn.SAGEConv(3, 3)})
    port = from_torch(h)
    x = {"a": jnp.ones((2, 3)), "b": jnp.arange(6.0).reshape(2, 3)}
    ring = jnp.array([[0, 1], [1, 0]])
    assert set(port(x, {("b", "s", "b"): ring})) == {"b"}
    with pytest.raises(UnsupportedModuleError, match=r"PixelShuffle(.|\n)*\('a', 'r', 'b'\)"):
        port(x, {("b", "s", "b"): ring, ("a", "r", "b"): ring})


def test_a_traced_forward_iterates_a_leaf_dict():
    """A user's forward over a HeteroConv leaf: ``.items()``, ``in``, ``len`` on the dict it
    returns (the fx path hands the forward a real dict of its values), under jit."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = tnn.HeteroConv({WRITES: tnn.SAGEConv((-1, -1), 8),
                                        CITES: tnn.SAGEConv(-1, 8)})
            self.lin = tnn.HeteroDictLinear(8, 3, types=["paper"])

        def forward(self, x_dict, edge_index_dict):
            h = {k: v.relu() for k, v in self.conv(x_dict, edge_index_dict).items()}
            out = self.lin(h)
            assert "paper" in out and len(out) == 1
            return out["paper"] * len(h)

    torch.manual_seed(0)
    net = Net()
    args = inputs(hetero_graph())
    with torch.no_grad():
        expected = net(*args)
    port = from_torch(net)
    got = jax.jit(lambda x, e: port(x, e))(*_jax(args))
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_group_matches_pyg_and_refuses_unknown_reductions():
    from torch_geometric.nn.conv.hetero_conv import group as pyg_group

    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3)]
    for aggr in ("sum", "mean", "max", "min", "cat", None):
        np.testing.assert_allclose(np.asarray(group([jnp.asarray(a) for a in xs], aggr)),
                                   pyg_group([torch.from_numpy(a) for a in xs], aggr).numpy(),
                                   rtol=1e-6, err_msg=str(aggr))
    one = jnp.asarray(xs[0])
    assert group([one], "max") is one  # PyG returns a single relation's output as it is
    assert group([one], None).shape == (4, 1, 3)
    with pytest.raises(ValueError, match="aggr='nonsense'.*'sum', 'mean'"):
        group([one, one], "nonsense")


def test_fused_on_sorted_edge_index():
    """Each relation given as PyG's EdgeIndex sorted by target: the ports take the sorted
    aggregation and still fuse (one matmul), with PyG's values."""
    from torch_geometric import EdgeIndex as PyGEdgeIndex

    from torch2jax_ops.geometric import EdgeIndex

    conv, (x, ei) = _into_paper("sum", lambda: tnn.GraphConv((-1, -1), 8, aggr="mean"))
    sorted_ei = {}
    for (src, rel, dst), e in ei.items():
        order = torch.argsort(e[1] * e.shape[1] + torch.arange(e.shape[1]))
        sorted_ei[(src, rel, dst)] = PyGEdgeIndex(
            e[:, order].contiguous(), sparse_size=(x[src].shape[0], x[dst].shape[0]),
            sort_order="col")
    port = from_torch(conv)
    xj = {k: to_jax(v) for k, v in x.items()}
    eij = {k: to_jax(v, allow_downcast=True) for k, v in sorted_ei.items()}
    assert all(isinstance(v, EdgeIndex) and v.sort_order == "col" for v in eij.values())
    assert _dots(port, xj, eij) == 1
    scatters = [e for e in _eqns(port, xj, eij) if e.primitive.name == "scatter-add"]
    assert scatters and all(e.params["indices_are_sorted"] for e in scatters)
    # (PyG compiles one propagate per class from its first instance: pyg() makes sure
    # GraphConv's has the fused EdgeIndex path, whatever ran before in this process)
    _close(port(xj, eij), pyg(conv, x, sorted_ei))


def test_fused_port_under_vmap():
    """A batch of feature dicts through the fused port: each row is the unbatched call."""
    conv, args = _into_paper("mean")
    port = from_torch(conv)
    xj, eij = _jax(args)
    scales = (1.0, 2.0, -0.5)
    batch = {k: jnp.stack([s * v for s in scales]) for k, v in xj.items()}
    out = jax.vmap(lambda x: port(x, eij))(batch)
    for i, s in enumerate(scales):
        one = port({k: s * v for k, v in xj.items()}, eij)
        np.testing.assert_allclose(np.asarray(out["paper"][i]), np.asarray(one["paper"]),
                                   rtol=1e-6, atol=1e-6)
