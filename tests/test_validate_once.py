"""A layer checks its graph once, at its boundary; what it calls inside trusts it.

Following a GCNConv's ``edge_index`` used to pass three id checks (the layer's
``graph_input``, then ``gcn_norm_static`` and ``add_remaining_self_loops_static``, public
utilities that validate again) and five ``edge_array`` calls. The layers now call the
utilities' trusting forms (``gcn_weights_static``, ``remaining_loops_static``,
``laplacian_static``, ``count_ids``); the public utilities still validate. Counted with
``sys.setprofile`` on the calls into ``geometric/_core/_edges.py``.
"""
import collections
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from torch2jax_ops import geometric as G
from torch2jax_ops.geometric.nn import APPNP, ChebConv, GCNConv, GraphSizeNorm, InstanceNorm
from torch2jax_ops.nn import Linear, ModuleList

CHECKS = ("edge_array", "check_ids")


def _checks(call) -> collections.Counter:
    seen: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_name in CHECKS and \
                code.co_filename.replace("\\", "/").endswith("geometric/_core/_edges.py"):
            seen[code.co_name] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


X = jnp.asarray(np.random.default_rng(0).standard_normal((5, 3)), jnp.float32)
EDGES = jnp.asarray([[0, 1, 2, 3, 3], [1, 2, 3, 4, 3]])
WEIGHT = jnp.asarray([0.5, 1.0, 2.0, 1.5, 3.0], jnp.float32)


def _w(*shape):
    return jnp.asarray(np.random.default_rng(len(shape)).standard_normal(shape), jnp.float32)


LAYERS = {
    "GCNConv": lambda: GCNConv(Linear(_w(4, 3)), _w(4))(X, EDGES, WEIGHT),
    "APPNP": lambda: APPNP(K=2)(X, EDGES, WEIGHT),
    "ChebConv": lambda: ChebConv(ModuleList([Linear(_w(4, 3)), Linear(_w(4, 3))]), _w(4))(
        X, EDGES, WEIGHT),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_layer_checks_its_edge_ids_once(name):
    """The id range check (a min/max of the ids, a host sync on concrete arrays) runs
    once. ``MessagePassing.propagate`` is the boundary of a user's own layers, so it
    checks the shape and dtype of what it is given (no ids): APPNP and ChebConv, which
    propagate K times, pass that static check per propagation."""
    seen = _checks(LAYERS[name])
    assert seen["check_ids"] == 1, seen
    if name == "GCNConv":  # no propagate: one check of everything
        assert seen == {"edge_array": 1, "check_ids": 1}


@pytest.mark.parametrize("layer", [GraphSizeNorm(), InstanceNorm(3)], ids=type)
def test_a_norm_checks_its_batch_once(layer):
    batch = jnp.asarray([0, 0, 1, 1, 1])
    assert _checks(lambda: layer(X, batch, batch_size=2)) == {"check_ids": 1}


def test_the_public_utilities_still_check():
    """The trusting forms are internal: each public function validates its own input."""
    assert _checks(lambda: G.gcn_norm_static(EDGES, WEIGHT, num_nodes=5))["check_ids"] >= 1
    with pytest.raises(IndexError, match=r"gcn_norm_static: `edge_index` contains the node id 7"):
        G.gcn_norm_static(jnp.asarray([[0, 7], [1, 2]]), num_nodes=5)
    with pytest.raises(ValueError, match="edge_weight"):
        G.gcn_norm_static(EDGES, WEIGHT[:, None], num_nodes=5)
    with pytest.raises(ValueError, match="normalization"):
        G.utils.get_laplacian_static(EDGES, normalization="bad", num_nodes=5)


def test_the_layer_keeps_the_checks_its_utilities_made():
    """What the utilities checked for the layer before, the layer checks itself: a
    per-edge weight matrix, out-of-range ids, and ChebConv's normalization (else read
    as 'rw' silently)."""
    conv = GCNConv(Linear(_w(4, 3)), _w(4))
    with pytest.raises(ValueError, match=r"GCNConv: `edge_weight` must be one weight per edge"):
        conv(X, EDGES, WEIGHT[:, None])
    with pytest.raises(IndexError, match="GCNConv: `edge_index` contains the node id 9"):
        conv(X, jnp.asarray([[0, 9], [1, 2]]))
    with pytest.raises(ValueError, match=r"ChebConv: `normalization` must be None, 'sym' or"):
        ChebConv(ModuleList([Linear(_w(4, 3))]), _w(4), normalization="bad")


def test_the_trusting_forms_give_the_public_results():
    """Same numbers through both doors (the parity suite checks them against PyG)."""
    from torch2jax_ops.geometric.utils._laplacian import laplacian_static
    from torch2jax_ops.geometric.utils._loops import remaining_loops_static
    from torch2jax_ops.geometric.utils._norm import count_ids, gcn_weights_static

    for got, want in [
        (gcn_weights_static(EDGES, WEIGHT, 5, improved=True),
         G.gcn_norm_static(EDGES, WEIGHT, num_nodes=5, improved=True)),
        (remaining_loops_static(EDGES, WEIGHT, 2.0, 5, op="t"),
         G.add_remaining_self_loops_static(EDGES, WEIGHT, 2.0, num_nodes=5)),
        (laplacian_static(EDGES, WEIGHT, "sym", 5),
         G.utils.get_laplacian_static(EDGES, WEIGHT, "sym", num_nodes=5)),
        ((count_ids(EDGES[1], 5),), (G.degree(EDGES[1], 5),)),
    ]:
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
