"""torch2jax_ops on many devices (torch-free): sharded ops, sharded graphs, data parallelism, hosts.

JAX fixes its number of CPU devices when it creates its backend, which other
test files of this session may already have done with one device. So, in a
normal session, one test (``test_the_distributed_suite``) runs this file again
in a child process with ``XLA_FLAGS=--xla_force_host_platform_device_count=8``
and ``JAX_PLATFORMS=cpu`` and reports the child's summary; the other test
files keep their one device and their speed. The child (or any session
started with 8 or more forced CPU devices) runs the tests below the marker.
``python tests/test_distributed_jax.py worker I PORT`` is one process of the
two-process test.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import pathlib
import re
import socket
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEVICES = 8
_FLAG = "--xla_force_host_platform_device_count"


def _forced_devices() -> int:
    match = re.search(_FLAG + r"=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return int(match.group(1)) if match else 1


IN_CHILD = _forced_devices() >= DEVICES and os.environ.get("JAX_PLATFORMS", "") == "cpu"


def _child_env(devices: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(XLA_FLAGS=f"{_FLAG}={devices}", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("JAX_NUM_CPU_DEVICES", None)
    return env


# ====================================================================== the parent session

if not IN_CHILD:
    def test_the_distributed_suite():
        """This file's tests, in a child process with 8 CPU devices (see the module docstring)."""
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             str(pathlib.Path(__file__))],
            env=_child_env(DEVICES), cwd=ROOT, capture_output=True, text=True, timeout=1800)
        summary = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
        print(f"child with {DEVICES} CPU devices: {summary}")
        assert done.returncode == 0, f"{summary}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
        assert " passed" in summary and "failed" not in summary


def test_gpu_sharded_gcn_equals_one_device():
    """On the GPUs JAX sees: shard_graph + GCNConv over all of them equals one GPU."""
    import jax
    if IN_CHILD:
        pytest.skip("the child runs on forced CPU devices (JAX_PLATFORMS=cpu); the GPU test "
                    "runs in the parent session")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as exc:
        pytest.skip(f"no GPU visible to JAX ({str(exc).splitlines()[0][:120]}); the GPU run "
                    f"needs a CUDA build of jaxlib and a GPU")
    import jax.numpy as jnp
    from jax.sharding import Mesh

    from torch2jax_ops.distributed import replicate, shard_graph
    from torch2jax_ops.geometric.nn import GCNConv
    from torch2jax_ops.nn import Linear
    rng = np.random.default_rng(0)
    n, e, f = 1000, 20_000, 16
    x = rng.standard_normal((n, f)).astype(np.float32)
    ei = rng.integers(0, n, (2, e)).astype(np.int32)
    conv = GCNConv(Linear(jnp.asarray(rng.standard_normal((f, f)).astype(np.float32) / 4)),
                   jnp.zeros(f))
    ref = jax.jit(lambda m, x, ei: m(x, ei))(jax.device_put(conv, gpus[0]),
                                             jax.device_put(x, gpus[0]),
                                             jax.device_put(ei, gpus[0]))
    mesh = Mesh(np.array(gpus), ("e",))
    g = shard_graph(x, ei, mesh=mesh)
    out = jax.jit(lambda m, g: m(g.x, g.edge_index))(replicate(conv, mesh=mesh), g)
    np.testing.assert_allclose(np.asarray(out)[:n], np.asarray(ref), rtol=1e-4, atol=1e-5)


# ====================================================================== the child: 8 devices

if IN_CHILD:
    import jax
    import jax.numpy as jnp
    from jax.experimental import checkify
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

    import torch2jax_ops as T
    from torch2jax_ops import checked
    from torch2jax_ops import distributed as D
    from torch2jax_ops import geometric as G
    from torch2jax_ops._sharding import default_out_spec, sharding_aware, sharding_mode
    from torch2jax_ops.geometric.nn import (GATConv, GCNConv, GINConv, GINEConv, GraphConv,
                                            MessagePassing, SAGEConv)
    from torch2jax_ops.nn import Linear
    from torch2jax_ops.torch_scatter import _scatter as _private_scatter

    import equinox as eqx

    MODES = ("auto", "explicit")
    E, N, F = 64, 10, 8
    RNG = np.random.default_rng(0)
    SRC = RNG.standard_normal((E, F)).astype(np.float32)
    IDS = RNG.integers(0, N, E).astype(np.int32)
    SIDS = np.sort(IDS)
    PTR = np.searchsorted(SIDS, np.arange(N + 1)).astype(np.int32)
    X = RNG.standard_normal((N, F)).astype(np.float32)
    EI = np.stack([RNG.integers(0, N, E), IDS]).astype(np.int32)
    EI[0, :6] = EI[1, :6]  # a few self-loops
    W = RNG.random(E).astype(np.float32)
    BATCH = np.sort(RNG.integers(0, 3, N)).astype(np.int32)
    SPECS = {"e": P("e"), "-": P(), "E": P(None, "e")}

    def mesh_of(mode: str, shape=(DEVICES,), names=("e",)):
        kind = AxisType.Explicit if mode == "explicit" else AxisType.Auto
        return jax.make_mesh(shape, names, axis_types=(kind,) * len(names))

    def close(a, b, rtol=1e-5, atol=1e-5):
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)

    @contextlib.contextmanager
    def no_fallback():
        """The shard_map path must be taken: its GSPMD fallback warns, which fails the test."""
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*instead of the shard_map path.*")
            yield

    # ------------------------------------------------------------------ every op family

    OPS = {
        **{f"scatter[{r}]": (lambda s, i, r=r: T.scatter(s, i, 0, dim_size=N, reduce=r),
                             (SRC, IDS), "ee") for r in ("sum", "mean", "mul", "min", "max")},
        "scatter_max": (lambda s, i: T.scatter_max(s, i, 0, dim_size=N), (SRC, IDS), "ee"),
        "scatter_min": (lambda s, i: T.scatter_min(s, i, 0, dim_size=N), (SRC, IDS), "ee"),
        "scatter_std": (lambda s, i: T.scatter_std(s, i, 0, dim_size=N), (SRC, IDS), "ee"),
        "scatter_logsumexp": (lambda s, i: T.scatter_logsumexp(s, i, 0, dim_size=N),
                              (SRC, IDS), "ee"),
        "scatter_softmax": (lambda s, i: T.scatter_softmax(s, i, 0, dim_size=N), (SRC, IDS),
                            "ee"),
        "scatter_log_softmax": (lambda s, i: T.scatter_log_softmax(s, i, 0, dim_size=N),
                                (SRC, IDS), "ee"),
        "segment_coo[sum]": (lambda s, i: T.segment_coo(s, i, dim_size=N), (SRC, SIDS), "ee"),
        "segment_coo[mean]": (lambda s, i: T.segment_coo(s, i, dim_size=N, reduce="mean"),
                              (SRC, SIDS), "ee"),
        "segment_max_coo": (lambda s, i: T.segment_max_coo(s, i, dim_size=N), (SRC, SIDS), "ee"),
        "segment_csr[sum]": (lambda s, p: T.segment_csr(s, p), (SRC, PTR), "e-"),
        "segment_csr[max]": (lambda s, p: T.segment_csr(s, p, reduce="max"), (SRC, PTR), "e-"),
        "segment_min_csr": (lambda s, p: T.segment_min_csr(s, p), (SRC, PTR), "e-"),
        "gather_csr": (lambda x, p: T.gather_csr(x, p, dim_size=E), (X, PTR), "--"),
        "gather_coo": (lambda x, i: T.gather_coo(x, i), (X, SIDS), "-e"),
        "geometric.scatter[mean]": (lambda s, i: G.scatter(s, i, 0, N, "mean"), (SRC, IDS), "ee"),
        "geometric.scatter[max]": (lambda s, i: G.scatter(s, i, 0, N, "max"), (SRC, IDS), "ee"),
        "degree": (lambda i: G.degree(i, N), (IDS,), "e"),
        "softmax[index]": (lambda s, i: G.softmax(s, i, num_nodes=N), (SRC, IDS), "ee"),
        "softmax[ptr]": (lambda s, p: G.softmax(s, ptr=p), (SRC, PTR), "e-"),
        "gcn_norm_static": (lambda ei, w: G.gcn_norm_static(ei, w, num_nodes=N), (EI, W), "Ee"),
        "add_self_loops": (lambda ei, w: G.add_self_loops(ei, w, fill_value="mean",
                                                          num_nodes=N), (EI, W), "Ee"),
        "add_remaining_self_loops_static": (
            lambda ei, w: G.add_remaining_self_loops_static(ei, w, num_nodes=N), (EI, W), "Ee"),
        "remove_self_loops_static": (lambda ei: G.remove_self_loops_static(ei, num_nodes=N),
                                     (EI,), "E"),
        "to_dense_batch": (lambda x, b: G.to_dense_batch(x, b, batch_size=3, max_num_nodes=N),
                           (X, BATCH), "--"),
        "global_add_pool": (lambda s, i: G.global_add_pool(s, i, size=N), (SRC, IDS), "ee"),
        "global_mean_pool": (lambda s, i: G.global_mean_pool(s, i, size=N), (SRC, IDS), "ee"),
        "global_max_pool": (lambda s, i: G.global_max_pool(s, i, size=N), (SRC, IDS), "ee"),
    }

    @pytest.mark.parametrize("name", sorted(OPS))
    def test_every_op_on_sharded_arrays_equals_one_device(name):
        fn, args, specs = OPS[name]
        ref = jax.jit(fn)(*args)
        for mode in MODES:
            mesh = mesh_of(mode)
            with jax.set_mesh(mesh):
                placed = [jax.device_put(a, NamedSharding(mesh, SPECS[s]))
                          for a, s in zip(args, specs)]
                out = jax.jit(fn)(*placed)
            close(out, ref)
            for leaf in jax.tree.leaves(out):
                assert leaf.sharding.mesh.shape == mesh.shape, (mode, leaf.sharding)

    def test_explicit_mode_needs_the_boundary():
        """The rule the wrapper guards: the op's body (``__wrapped__``) raises in Explicit mode."""
        body = _private_scatter.scatter_sum.__wrapped__  # the module attribute is the wrapper
        assert _private_scatter.scatter_sum is T.scatter_sum
        mesh = mesh_of("explicit")
        with jax.set_mesh(mesh):
            s = jax.device_put(SRC, NamedSharding(mesh, P("e")))
            i = jax.device_put(IDS, NamedSharding(mesh, P("e")))
            with pytest.raises(Exception, match="out_sharding"):
                jax.jit(lambda s, i: body(s, i, 0, dim_size=N))(s, i)
            out = jax.jit(lambda s, i: T.scatter_sum(s, i, 0, dim_size=N))(s, i)
        close(out, body(SRC, IDS, 0, dim_size=N))

    @pytest.mark.parametrize("mode", MODES)
    def test_gradients_through_sharded_ops_equal_one_device(mode):
        def loss(s, i):
            return (jnp.sum(jnp.sin(T.scatter(s, i, 0, dim_size=N, reduce="max")))
                    + jnp.sum(T.scatter_softmax(s, i, 0, dim_size=N) ** 2)
                    + jnp.sum(T.scatter_std(s, i, 0, dim_size=N))
                    + jnp.sum(G.softmax(s, i, num_nodes=N) * s))
        ref = jax.jit(jax.grad(loss))(SRC, IDS)
        mesh = mesh_of(mode)
        with jax.set_mesh(mesh):
            s = jax.device_put(SRC, NamedSharding(mesh, P("e")))
            i = jax.device_put(IDS, NamedSharding(mesh, P("e")))
            grad = jax.jit(jax.grad(loss))(s, i)
        close(grad, ref)

    def test_default_out_sharding_and_out_sharding_argument():
        mesh = mesh_of("explicit")
        with jax.set_mesh(mesh):
            s = jax.device_put(SRC, NamedSharding(mesh, P("e")))
            i = jax.device_put(IDS, NamedSharding(mesh, P("e")))
            x = jax.device_put(X, NamedSharding(mesh, P()))
            # reduced axis replicated; per-edge outputs keep the edge sharding; gathered rows too
            assert jax.jit(lambda s, i: T.scatter(s, i, 0, dim_size=N))(s, i).sharding.spec \
                == P(None, None)
            assert jax.jit(lambda s, i: T.scatter_softmax(s, i, 0, dim_size=N))(s, i) \
                .sharding.spec == P("e", None)
            assert jax.jit(lambda x, i: T.gather_coo(x, i))(x, i).sharding.spec == P("e", None)
            out = jax.jit(lambda s, i: T.scatter(s, i, 0, dim_size=N, out_sharding=P(None, "e"))
                          )(s, i)
            assert out.sharding.spec == P(None, "e")
            both = jax.jit(lambda s, i: T.scatter_max(s, i, 0, dim_size=N,
                                                      out_sharding=(P(None, "e"), P())))(s, i)
            assert [b.sharding.spec for b in both] == [P(None, "e"), P(None, None)]
        close(out, T.scatter(SRC, IDS, 0, dim_size=N))
        # a 2-D mesh: the feature axis keeps its sharding, the reduced axis is replicated
        assert default_out_spec((N, F), [((E, F), ("e", "f")), ((E,), ("e",))],
                                jax.make_mesh((4, 2), ("e", "f"))) == P(None, "f")
        auto = mesh_of("auto")
        with jax.set_mesh(auto):
            s = jax.device_put(SRC, NamedSharding(auto, P("e")))
            out = jax.jit(lambda s: T.scatter(s, IDS, 0, dim_size=N,
                                              out_sharding=P(None, "e")))(s)
            assert out.sharding.spec == P(None, "e")
        with pytest.raises(ValueError, match="out_sharding.*needs a mesh"):
            T.scatter(SRC, IDS, 0, dim_size=N, out_sharding=P(None, "e"))

    def test_the_wrapper_keeps_name_doc_and_signature():
        import inspect
        sig = inspect.signature(T.scatter)
        assert list(sig.parameters)[:6] == ["src", "index", "dim", "out", "dim_size", "reduce"]
        assert sig.parameters["out_sharding"].kind is inspect.Parameter.KEYWORD_ONLY
        assert T.scatter.__name__ == "scatter" and "torch_scatter.scatter" in T.scatter.__doc__
        assert G.softmax is G.utils.softmax  # one wrapper per function
        call = inspect.signature(GCNConv.__call__)
        assert list(call.parameters) == ["self", "x", "edge_index", "edge_weight", "out_sharding"]
        mp = inspect.signature(MessagePassing.propagate)
        assert list(mp.parameters)[-2:] == ["out_sharding", "kwargs"]
        assert sharding_aware(T.scatter) is T.scatter
        assert sharding_mode() == "none"
        # the parameter is declared where the op is defined, not added by the wrapper
        body = inspect.signature(T.scatter.__wrapped__)
        assert body.parameters["out_sharding"].kind is inspect.Parameter.KEYWORD_ONLY
        assert body.parameters["out_sharding"].default is None

        def undeclared(x):
            return x

        def positional(x, out_sharding=None):
            return x

        for fn in (undeclared, positional):
            with pytest.raises(TypeError, match="must declare the keyword-only parameter "
                                                "`out_sharding"):
                sharding_aware(fn)

    def test_checks_still_raise_under_checked_in_explicit_vmap():
        """The debug-check helper: checkify's batching rule fails on an Explicit-sharded batch."""
        mesh = mesh_of("explicit")
        ids = np.tile(IDS, (DEVICES, 1))
        bad = ids.copy()
        bad[3, 5] = N + 4

        def per_graph(i):
            return T.scatter(jnp.ones((E,)), i, 0, dim_size=N)

        with jax.set_mesh(mesh):
            good_ids = jax.device_put(ids, NamedSharding(mesh, P("e")))
            bad_ids = jax.device_put(bad, NamedSharding(mesh, P("e")))
            f = checked(jax.jit(jax.vmap(per_graph)))
            close(f(good_ids), jax.vmap(per_graph)(ids))
            with pytest.raises(Exception, match="outside"):
                f(bad_ids)
            # the rule the helper guards: the raw checkify call cannot trace here
            with pytest.raises(Exception, match="sort|shard"):
                jax.jit(jax.vmap(lambda i: checkify.debug_check(jnp.all(i < N), "x")))(bad_ids)

    # ------------------------------------------------------------------ shard_graph + every conv

    NG, EG, FG, HG = 60, 600, 6, 5
    GX = RNG.standard_normal((NG, FG)).astype(np.float32)
    GEI = RNG.integers(0, NG, (2, EG)).astype(np.int32)
    GEI[1, :20] = GEI[0, :20]  # self-loops (GCN keeps their weight, GAT replaces them)
    GEA = RNG.standard_normal((EG, 3)).astype(np.float32)
    GEW = RNG.random(EG).astype(np.float32)

    def w(*shape):
        return jnp.asarray(RNG.standard_normal(shape).astype(np.float32) / 2)

    class EdgeMLP(MessagePassing):
        """A MessagePassing subclass of one's own: max of an MLP of (x_i, x_j - x_i)."""
        lin: Linear
        aggr = "max"

        def __call__(self, x, edge_index):
            return self.propagate(edge_index, x=x)

        def message(self, x_i, x_j):
            return self.lin(jnp.concatenate([x_i, x_j - x_i], -1))

    CONVS = {
        "GCNConv": (GCNConv(Linear(w(HG, FG)), w(HG)), None),
        "GCNConv[edge_weight]": (GCNConv(Linear(w(HG, FG)), w(HG), improved=True), "weight"),
        "GraphConv": (GraphConv(Linear(w(HG, FG), w(HG)), Linear(w(HG, FG)), aggr="mean"), None),
        "SAGEConv": (SAGEConv(Linear(w(HG, FG), w(HG)), Linear(w(HG, FG)), aggr="max",
                              normalize=True), None),
        "GINConv": (GINConv(Linear(w(HG, FG), w(HG)), jnp.array([0.1])), None),
        "GINEConv": (GINEConv(Linear(w(HG, FG), w(HG)), jnp.array([0.1]),
                              lin=Linear(w(FG, 3), w(FG))), "attr"),
        "GATConv": (GATConv(lin=Linear(w(2 * HG, FG)), lin_src=None, lin_dst=None,
                            att_src=w(1, 2, HG), att_dst=w(1, 2, HG), att_edge=w(1, 2, HG),
                            lin_edge=Linear(w(2 * HG, 3)), res=None, bias=w(2 * HG), heads=2,
                            out_channels=HG), "attr"),
        "MessagePassing": (EdgeMLP(Linear(w(HG, 2 * FG))), None),
    }

    def conv_call(extra):
        if extra is None:
            return lambda m, x, ei, a: m(x, ei)
        return lambda m, x, ei, a: m(x, ei, a)

    def graph_for(mode, extra, node_axis=None):
        mesh = mesh_of(mode)
        attr = GEW if extra == "weight" else GEA
        return mesh, D.shard_graph(GX, GEI, mesh=mesh, edge_attr=attr, node_axis=node_axis)

    def test_shard_graph_splits_the_edges():
        mesh = mesh_of("explicit")
        g = D.shard_graph(GX, GEI, mesh=mesh, edge_attr=GEA)
        shards = g.edge_index.addressable_shards
        assert len(shards) == DEVICES
        assert all(s.data.shape == (2, g.layout.e_block) for s in shards)
        assert g.layout.e_block < EG  # no device holds all edges
        ids = np.asarray(g.edge_id)
        kept = ids[ids >= 0]
        assert sorted(kept.tolist()) == list(range(EG))  # every edge exactly once
        index = np.asarray(g.edge_index)
        np.testing.assert_array_equal(index[:, ids >= 0], GEI[:, kept])
        assert np.all(index[:, ids < 0] == NG)  # padding: the dropped slot
        np.testing.assert_array_equal(np.asarray(g.edge_attr)[ids >= 0], GEA[kept])
        block = g.layout.block
        for s in shards:  # each device holds the edges into the node rows it owns
            d = s.index[1].start // g.layout.e_block
            targets = np.asarray(s.data)[1]
            real = targets[targets < NG]
            assert np.all(real // block == d)
        assert g.x.sharding.spec == P() and g.x.shape == (NG, FG)
        split = D.shard_graph(GX, GEI, mesh=mesh, node_axis="e")
        assert split.x.shape == (64, FG) and split.x.sharding.spec == P("e")
        assert {s.data.shape for s in split.x.addressable_shards} == {(8, FG)}

    def test_shard_graph_errors_name_the_argument():
        mesh = mesh_of("auto", (4, 2), ("a", "b"))
        with pytest.raises(ValueError, match="no axis 'z'"):
            D.shard_graph(GX, GEI, mesh=mesh, edge_axis="z")
        with pytest.raises(ValueError, match="node_axis.*first"):
            D.shard_graph(GX, GEI, mesh=mesh, edge_axis=("a", "b"), node_axis="b")
        with pytest.raises(IndexError, match="edge_index"):
            D.shard_graph(GX, GEI + NG, mesh=mesh)
        with pytest.raises(ValueError, match="edge_attr"):
            D.shard_graph(GX, GEI, mesh=mesh, edge_attr=GEA[:5])
        with pytest.raises(TypeError, match="outside jax.jit"):
            jax.jit(lambda x: D.shard_graph(x, GEI, mesh=mesh))(GX)
        with pytest.raises(TypeError, match="jax.sharding.Mesh"):
            D.shard_graph(GX, GEI, mesh="e")

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("name", sorted(CONVS))
    def test_every_conv_on_a_sharded_graph_equals_one_device(name, mode):
        conv, extra = CONVS[name]
        attr = GEW if extra == "weight" else GEA
        call = conv_call(extra)
        ref = jax.jit(call)(conv, GX, GEI, attr)
        mesh, g = graph_for(mode, extra, node_axis="e" if name.startswith("GCN") else None)
        with jax.set_mesh(mesh), no_fallback():
            out = jax.jit(lambda m, g: call(m, g.x, g.edge_index, g.edge_attr))(
                D.replicate(conv, mesh=mesh), g)
        close(np.asarray(out)[:NG], ref)
        assert out.shape[0] == g.layout.n

    @pytest.mark.parametrize("name", ["GCNConv[edge_weight]", "GATConv", "MessagePassing",
                                      "SAGEConv"])
    def test_conv_gradients_on_a_sharded_graph_equal_one_device(name):
        conv, extra = CONVS[name]
        attr = GEW if extra == "weight" else GEA
        call = conv_call(extra)
        r = RNG.standard_normal((NG, call(conv, GX, GEI, attr).shape[1])).astype(np.float32)

        def loss(m, x, ei, a):
            return jnp.sum(jnp.tanh(call(m, x, ei, a)[:NG]) * r)

        ref = jax.jit(jax.grad(loss, argnums=(0, 1)))(conv, GX, GEI, attr)
        mesh, g = graph_for("explicit", extra)
        with jax.set_mesh(mesh), no_fallback():
            grads = jax.jit(jax.grad(lambda m, x, g: loss(m, x, g.edge_index, g.edge_attr),
                                     argnums=(0, 1)))(D.replicate(conv, mesh=mesh), g.x, g)
        close(grads, ref, rtol=1e-5, atol=1e-5)

    def test_eager_calls_take_the_same_path():
        conv, _ = CONVS["GCNConv"]
        mesh, g = graph_for("auto", None)
        with jax.set_mesh(mesh), no_fallback():
            out = D.replicate(conv, mesh=mesh)(g.x, g.edge_index)
        close(out, jax.jit(conv_call(None))(conv, GX, GEI, None))

    def test_layers_the_rule_cannot_cover_fall_back_with_a_warning():
        class Reversed(EdgeMLP):
            flow = "target_to_source"

        class EdgeScores(eqx.Module):  # per-edge output
            lin: Linear

            @sharding_aware
            def __call__(self, x, edge_index, *, out_sharding=None):
                h = self.lin(x)
                return jnp.sum(h[edge_index[0]] * h[edge_index[1]], -1)

        class OutDegree(eqx.Module):  # aggregates at the SOURCES, flow says nothing
            lin: Linear

            @sharding_aware
            def __call__(self, x, edge_index, *, out_sharding=None):
                out_deg = jax.ops.segment_sum(jnp.ones(edge_index.shape[1]), edge_index[0],
                                              x.shape[0])
                return self.lin(x) * out_deg[:, None]

        mesh, g = graph_for("explicit", None)
        rev = Reversed(CONVS["MessagePassing"][0].lin)
        scores = EdgeScores(Linear(w(HG, FG)))
        sources = OutDegree(Linear(w(HG, FG)))
        with jax.set_mesh(mesh):  # never a wrong sum: the rule sees the keys are sources
            with pytest.warns(UserWarning, match="keyed by something other than the edge "
                                                 "targets"):
                by_source = jax.jit(lambda m, g: m(g.x, g.edge_index))(
                    D.replicate(sources, mesh=mesh), g)
        close(np.asarray(by_source)[:NG], sources(GX, GEI))
        with jax.set_mesh(mesh):
            with pytest.warns(UserWarning, match="target_to_source"):
                out = jax.jit(lambda m, g: m(g.x, g.edge_index))(D.replicate(rev, mesh=mesh), g)
            with pytest.warns(UserWarning, match="per-edge"):
                per_edge = jax.jit(lambda m, g: m(g.x, g.edge_index))(
                    D.replicate(scores, mesh=mesh), g)
        close(out, rev(GX, GEI))
        ids = np.asarray(g.edge_id)
        close(np.asarray(per_edge)[ids >= 0], np.asarray(scores(GX, GEI))[ids[ids >= 0]])

    #: ways to take the rows of an edge_index; JAX versions spell them differently (jax 0.12
    #: traces ``src, dst = edge_index`` as one ``unstack``, jax 0.10 as slices)
    ROWS = {
        "index": lambda ei: (ei[0], ei[1]),
        "unpack": lambda ei: tuple(ei),
        "take": lambda ei: (jnp.take(ei, 0, axis=0), jnp.take(ei, 1, axis=0)),
        "dynamic_index": lambda ei: tuple(jax.lax.dynamic_index_in_dim(ei, i, 0, False)
                                          for i in (0, 1)),
        "split": lambda ei: tuple(r.reshape(-1) for r in jnp.split(ei, 2)),
    }

    @pytest.mark.parametrize("spelling", sorted(ROWS))
    def test_the_target_row_is_found_however_it_is_spelled(spelling):
        """The shard_map route follows which row of the edge_index keys a sum by its values,
        not by how the program spells taking the row: every spelling takes the shard_map
        path (no warning) and equals one device; the same layer keyed by the sources falls
        back."""
        rows = ROWS[spelling]

        class SumAt(eqx.Module):
            lin: Linear
            at: int = eqx.field(static=True)

            @sharding_aware
            def __call__(self, x, edge_index, *, out_sharding=None):
                src, dst = rows(edge_index)
                keys, other = (dst, src) if self.at == 1 else (src, dst)
                return jax.ops.segment_sum(self.lin(x)[other], keys, x.shape[0])

        mesh, g = graph_for("explicit", None)
        at_targets, at_sources = SumAt(Linear(w(HG, FG)), 1), SumAt(Linear(w(HG, FG)), 0)
        with jax.set_mesh(mesh), no_fallback():
            out = jax.jit(lambda m, g: m(g.x, g.edge_index))(D.replicate(at_targets, mesh=mesh),
                                                             g)
        close(np.asarray(out)[:NG], at_targets(GX, GEI))
        with jax.set_mesh(mesh), pytest.warns(UserWarning, match="keyed by something other"):
            by_source = jax.jit(lambda m, g: m(g.x, g.edge_index))(
                D.replicate(at_sources, mesh=mesh), g)
        close(np.asarray(by_source)[:NG], at_sources(GX, GEI))

    def test_shard_map_bytes_do_not_grow_with_the_edges():
        """O(N*F) per layer: 4x the edges at a fixed N move the same bytes (fwd and bwd)."""
        n, f = 400, 16
        x = RNG.standard_normal((n, f)).astype(np.float32)
        mesh = mesh_of("auto")
        layers = {"GCNConv": GCNConv(Linear(w(f, f)), jnp.zeros(f)),
                  "GATConv": GATConv(lin=Linear(w(f, f)), lin_src=None, lin_dst=None,
                                     att_src=w(1, 2, f // 2), att_dst=w(1, 2, f // 2),
                                     att_edge=None, lin_edge=None, res=None, bias=None,
                                     heads=2, out_channels=f // 2),
                  # messages that are source rows (the CPU's streamed sum is one pass here)
                  "SAGEConv": SAGEConv(Linear(w(f, f), jnp.zeros(f)), Linear(w(f, f))),
                  "GINConv": GINConv(Linear(w(f, f), jnp.zeros(f)), jnp.zeros(1))}
        with jax.set_mesh(mesh):
            for name, layer in layers.items():
                layer = D.replicate(layer, mesh=mesh)
                measured = []
                for e in (4_000, 16_000):
                    g = D.shard_graph(x, RNG.integers(0, n, (2, e)), mesh=mesh)
                    fwd = jax.jit(lambda m, g: m(g.x, g.edge_index)).lower(layer, g).compile()
                    bwd = jax.jit(jax.grad(lambda m, x, g: jnp.sum(jnp.sin(m(x, g.edge_index))),
                                           argnums=(0, 1))).lower(layer, g.x, g).compile()
                    measured.append((D.collective_bytes(fwd), D.collective_bytes(bwd)))
                    kinds = {r["kind"] for r in D.collectives(fwd)}
                    assert kinds == {"all-gather"}, (name, kinds)
                assert measured[0] == measured[1], (name, measured)
                assert 0 < measured[0][0] <= 4 * n * f * 4, (name, measured)  # ~ N*F, not E*F

    def test_collective_bytes_reads_a_known_program():
        mesh = mesh_of("auto")
        a = jax.device_put(np.ones((DEVICES, 1000), np.float32), NamedSharding(mesh, P("e")))
        compiled = jax.jit(lambda a: jnp.sum(a, axis=0)).lower(a).compile()
        assert D.collective_bytes(compiled) == 1000 * 4  # one all-reduce of [1000] float32
        assert D.collective_bytes(compiled.as_text()) == 1000 * 4
        with pytest.raises(TypeError, match="compiled HLO"):
            D.collective_bytes(42)

    # ------------------------------------------------------------------ aggregations, any order

    @pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
    @pytest.mark.parametrize("node_axis, mode", [(None, "explicit"), ("e", "auto")])
    def test_segment_aggregate_equals_one_device(reduce, node_axis, mode):
        n = 16
        msg = RNG.standard_normal((E, F)).astype(np.float32)
        msg[7] = msg[3]  # a tie across devices
        ids = np.where(np.arange(E) % 11 == 0, n, RNG.integers(0, n, E)).astype(np.int32)
        ids[7] = ids[3]
        r = RNG.standard_normal((n, F)).astype(np.float32)

        def one(m, i):
            return G.scatter(m, i, 0, n + 1, reduce)[:n]  # id n: the dropped slot

        mesh = mesh_of(mode)
        with jax.set_mesh(mesh):
            m = jax.device_put(msg, NamedSharding(mesh, P("e")))
            i = jax.device_put(ids, NamedSharding(mesh, P("e")))
            fn = lambda m, i: D.segment_aggregate(m, i, n, reduce, mesh=mesh,  # noqa: E731
                                                  node_axis=node_axis)
            out = jax.jit(fn)(m, i)
            grad = jax.jit(jax.grad(lambda m, i: jnp.sum(fn(m, i) * r)))(m, i)
        close(out, one(msg, ids))
        close(grad, jax.grad(lambda m: jnp.sum(one(m, ids) * r))(msg))

    def test_segment_softmax_equals_one_device():
        scores = RNG.standard_normal((E, 2)).astype(np.float32)
        mesh = mesh_of("explicit")
        with jax.set_mesh(mesh):
            s = jax.device_put(scores, NamedSharding(mesh, P("e")))
            i = jax.device_put(IDS, NamedSharding(mesh, P("e")))
            out = jax.jit(lambda s, i: D.segment_softmax(s, i, N, mesh=mesh))(s, i)
            grad = jax.jit(jax.grad(lambda s, i: jnp.sum(
                D.segment_softmax(s, i, N, mesh=mesh) * s)))(s, i)
        close(out, G.softmax(scores, IDS, num_nodes=N))
        close(grad, jax.grad(lambda s: jnp.sum(G.softmax(s, IDS, num_nodes=N) * s))(scores))

    # ------------------------------------------------------------------ data parallelism

    def test_data_parallel_example_gradients_equal_one_device():
        """examples/data_parallel.py, small: loss and gradients equal one device (rtol 1e-5)."""
        spec = importlib.util.spec_from_file_location("data_parallel",
                                                      ROOT / "examples" / "data_parallel.py")
        example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(example)
        report = example.main(["--small", "--steps", "1"])  # asserts rtol 1e-5 in both modes
        assert report["devices"] == DEVICES and report["graphs"] == DEVICES
        for kind in ("Auto", "Explicit"):
            assert report[kind]["loss"] == pytest.approx(report["Auto"]["loss"], rel=1e-6)
            assert report[kind]["max_rel_grad_diff"] < 1e-3
        assert report["trained_loss"] < report["Explicit"]["loss"]

    def test_data_parallel_helpers_check_their_input():
        g1 = G.pad_graph(X, EI[:, :10], num_nodes=N + 2, num_edges=12)
        g2 = G.pad_graph(X, EI[:, :10], num_nodes=N + 4, num_edges=12)
        with pytest.raises(ValueError, match="same sizes"):
            D.stack_graphs([g1, g2])
        mesh = mesh_of("auto")
        with pytest.raises(ValueError, match="multiple of 8"):
            D.shard_batch(D.stack_graphs([g1] * 3), mesh=mesh)
        stacked = D.shard_batch(D.stack_graphs([g1] * DEVICES), mesh=mesh)
        assert stacked.edge_index.shape == (DEVICES, 2, 12)

    # ------------------------------------------------------------------ two processes

    def _free_port() -> int:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))  # loopback only; the OS picks a free port
            return s.getsockname()[1]

    def test_two_processes_run_the_sharded_gcn_like_one():
        """2 local processes x 4 CPU devices, jax.distributed on 127.0.0.1, gloo collectives."""
        port, timeout = _free_port(), 300
        env = _child_env(4)
        procs = [subprocess.Popen([sys.executable, str(pathlib.Path(__file__)), "worker", str(i),
                                   str(port)], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for i in range(2)]
        outputs, deadline = [], time.monotonic() + timeout
        try:
            for p in procs:
                out, _ = p.communicate(timeout=max(deadline - time.monotonic(), 1))
                outputs.append(out)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the two processes did not finish within {timeout}s")
        finally:
            for p in procs:  # only the processes this test started
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for i, (p, out) in enumerate(zip(procs, outputs)):
            assert p.returncode == 0, f"process {i} exited {p.returncode}:\n{out[-4000:]}"
            assert "OK" in out, out[-2000:]


def _worker(process_id: int, port: int) -> None:
    """One of the two processes: a global mesh of 8 devices over both; GCN fwd + bwd == one."""
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                               process_id=process_id, initialization_timeout=60,
                               heartbeat_timeout_seconds=30, shutdown_timeout_seconds=30,
                               coordinator_bind_address=f"127.0.0.1:{port}")
    import jax.numpy as jnp
    from jax.sharding import AxisType

    from torch2jax_ops import distributed as D
    from torch2jax_ops.geometric.nn import GCNConv
    from torch2jax_ops.nn import Linear
    assert jax.process_count() == 2 and len(jax.devices()) == 8
    rng = np.random.default_rng(0)  # the same data in both processes
    n, e, f = 300, 3000, 8
    x = rng.standard_normal((n, f)).astype(np.float32)
    ei = rng.integers(0, n, (2, e)).astype(np.int32)
    weight = (rng.standard_normal((f, f)) / 3).astype(np.float32)
    r = rng.standard_normal((n, f)).astype(np.float32)

    def loss(conv, x, ei):
        return jnp.sum(jnp.sin(conv(x, ei)[:n]) * r)

    local = jax.local_devices()[0]
    one = lambda a: jax.device_put(a, local)  # noqa: E731
    conv = GCNConv(Linear(one(weight)), one(np.zeros(f, np.float32)))
    ref_out = jax.jit(lambda m, x, ei: m(x, ei))(conv, one(x), one(ei))
    ref_grad = jax.jit(jax.grad(loss, argnums=(0, 1)))(conv, one(x), one(ei))
    for kind in (AxisType.Auto, AxisType.Explicit):
        mesh = jax.make_mesh((8,), ("e",), axis_types=(kind,))
        with jax.set_mesh(mesh):
            g = D.shard_graph(x, ei, mesh=mesh)
            assert len(g.edge_index.addressable_shards) == 4  # this process's devices only
            placed = D.replicate(GCNConv(Linear(weight), np.zeros(f, np.float32)), mesh=mesh)
            out = jax.jit(lambda m, g: m(g.x, g.edge_index))(placed, g)
            grad = jax.jit(jax.grad(lambda m, x, g: loss(m, x, g.edge_index), argnums=(0, 1)))(
                placed, g.x, g)
        got = [np.asarray(a.addressable_data(0)) for a in jax.tree.leaves((out, grad))]
        want = [np.asarray(a) for a in jax.tree.leaves((ref_out, ref_grad))]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        print(f"process {process_id} {kind.name}: OK (forward and gradients equal one device)")
    jax.distributed.shutdown()


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "worker":
    _worker(int(sys.argv[2]), int(sys.argv[3]))
