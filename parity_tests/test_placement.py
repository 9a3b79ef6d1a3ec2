"""The placement rule, on two forced host devices: whatever builds a model or a batch goes to
JAX's default device (or ``device=``); ``to_jax`` stays zero-copy on the tensor's own device
unless asked to move; ``copy=False`` refuses a transfer. Also the matmul precision of the
parity tools (no TF32 on either side by default)."""
import textwrap

import jax
import pytest
import torch

import torch2jax_ops as t2j
from parity_tests.conftest import run_on_host_devices
from torch2jax_ops.parity import ParityError, compare

SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, torch, torch_geometric.nn as tnn
    import torch2jax_ops as t2j
    from torch2jax_ops.geometric.nn import GCNConv
    from torch2jax_ops.nn import from_torch
    d0, d1 = jax.devices()
    assert len(jax.devices()) == 2
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    w = model[0].weight
    where = lambda a: next(iter(a.devices()))

    # to_jax: the tensor's own device (zero-copy, uncommitted) unless device= asks to move
    a = t2j.to_jax(w)
    assert where(a) == d0 and t2j.shares_memory(w, a) and not a.committed
    # a transposed tensor is shared in its own layout, which JAX reads right only from a
    # committed array: it stays committed (an uncommitted one indexed as row-major: wrong)
    wt = t2j.to_jax(w.T)
    assert wt.committed and t2j.shares_memory(w, wt)
    assert (jax.numpy.asarray(wt[:, jax.numpy.array([0, 2])]).tolist()
            == w.T.detach()[:, [0, 2]].tolist())
    kept = t2j.to_jax(w, device=d0, copy=False)
    assert where(kept) == d0 and kept.committed and t2j.shares_memory(w, kept)
    moved = t2j.to_jax(w, device=d1)
    assert where(moved) == d1 and not t2j.shares_memory(w, moved) and moved.committed
    try:
        t2j.to_jax(w, device=d1, copy=False)
        raise SystemExit("copy=False with a transfer did not raise")
    except ValueError as e:
        assert "transfer" in str(e) and "copy=False" in str(e), e

    with jax.default_device(d1):
        # from_torch, tree_to_jax, from_state_dict: the default device
        port = from_torch(model)
        assert {where(l) for l in jax.tree_util.tree_leaves(port)} == {d1}
        tree = t2j.tree_to_jax(model.state_dict())
        assert {where(l) for l in tree.values()} == {d1}
        conv = GCNConv.from_state_dict(tnn.GCNConv(3, 2).state_dict())
        assert where(conv.lin.weight) == d1
        traced = from_torch(torch.nn.Sequential(torch.nn.Linear(3, 3)).eval())
        # inputs made the usual way are uncommitted: the model runs where its weights are
        out = jax.jit(lambda m, x: m(x))(port, jnp.ones((2, 3)))
        assert where(out) == d1, where(out)
        # and so are to_jax's (the README's pattern; a GPU's weights vs a CPU tensor): they
        # follow the weights instead of failing with "incompatible devices"
        x = torch.randn(2, 3)
        out = jax.jit(lambda m, x: m(x))(port, t2j.to_jax(x))
        assert where(out) == d1, where(out)
        assert torch.allclose(t2j.to_torch(out), model(x).detach(), atol=1e-6)
        assert where(port(t2j.to_jax(x))) == d1  # eager too
    # device= wins over the default, a Sharding works too
    assert {where(l) for l in jax.tree_util.tree_leaves(from_torch(model, device=d0))} == {d0}
    mesh = jax.sharding.Mesh(jax.devices(), ("x",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    port = from_torch(model, device=replicated)
    assert port[0].weight.sharding == replicated
    try:
        from_torch(model, device=torch.device("cpu"))
        raise SystemExit("a torch device was accepted")
    except TypeError as e:
        assert "jax.Device" in str(e)
    print("placement ok")
""")


def test_placement_rule_on_two_host_devices():
    run_on_host_devices(SCRIPT, 2, "placement ok", timeout=300)


def test_as_torch_returns_tensors_on_the_inputs_device():
    bridged = t2j.as_torch(lambda x: x * 2)
    x = torch.ones(3)
    assert bridged(x).device == x.device


def test_parity_runs_at_the_highest_matmul_precision_by_default():
    """The tools force the highest precision on both sides whatever the caller's setting (TF32
    here), and ``precision="default"`` leaves the caller's setting alone. Holds with
    ``JAX_DEFAULT_MATMUL_PRECISION=highest`` exported too (migration_guide/gpu.md)."""
    seen = []

    def port(x):
        seen.append((jax.config.jax_default_matmul_precision,
                     torch.backends.cuda.matmul.allow_tf32))
        return x * 2

    outside = jax.config.jax_default_matmul_precision  # None, or the environment's
    compare(lambda x: x * 2, port, torch.ones(2), precision="default")
    assert seen[-1] == (outside, False)
    cuda = torch.backends.cuda.matmul
    saved = cuda.allow_tf32
    try:
        cuda.allow_tf32 = True
        with jax.default_matmul_precision("tensorfloat32"):
            result = compare(lambda x: x * 2, port, torch.ones(2))
            assert result.precision == "highest" and "matmul precision: highest" in str(result)
            assert seen[-1] == ("highest", False)
            compare(lambda x: x * 2, port, torch.ones(2), precision="default")
            assert seen[-1] == ("tensorfloat32", True)
            assert jax.config.jax_default_matmul_precision == "tensorfloat32"  # restored
        assert cuda.allow_tf32 is True  # restored
    finally:
        cuda.allow_tf32 = saved
    with pytest.raises(ParityError, match="precision must be one of"):
        compare(lambda x: x, lambda x: x, torch.ones(1), precision="tf32")


@pytest.mark.gpu
def test_ports_land_on_the_gpu_and_match_their_cpu_twins():
    """On a card: ``from_torch`` places a port on the GPU (JAX's default device there), CPU
    inputs from ``to_jax`` follow it under jit, the forward runs there and matches the same
    port on the CPU within float32's tolerance at the highest matmul precision; the GPU's
    program has no call to the CPU kernel, which the CPU's has (SAGEConv's sum of source
    rows)."""
    import numpy as np
    import torch_geometric.nn as tnn

    from testkit.devices import cpu
    from torch2jax_ops import dtypes
    from torch2jax_ops.nn import from_torch

    gpu = jax.devices("gpu")[0]
    assert t2j.dlpack.default_device() == gpu
    torch.manual_seed(0)
    x, ei = torch.randn(200, 16), torch.randint(0, 200, (2, 3000))
    inputs = (t2j.to_jax(x), t2j.to_jax(ei, allow_downcast=True))  # CPU, uncommitted
    forward = jax.jit(lambda m, x, e: m(x, e))
    rtol, atol = dtypes.tolerance("float32")
    for layer in (tnn.GCNConv(16, 8), tnn.SAGEConv(16, 8, aggr="sum")):
        port, twin = from_torch(layer), from_torch(layer, device=cpu())
        assert {d for leaf in jax.tree.leaves(port) if isinstance(leaf, jax.Array)
                for d in leaf.devices()} == {gpu}
        with jax.default_matmul_precision("highest"):
            out, ref = forward(port, *inputs), forward(twin, *inputs)
        assert out.devices() == {gpu} and ref.devices() == {cpu()}
        np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=rtol, atol=atol)
        np.testing.assert_allclose(np.asarray(out), layer(x, ei).detach().numpy(), rtol=rtol,
                                   atol=atol)
        assert "torch2jax_ops_gather_scatter_add" not in forward.lower(port, *inputs).as_text()
    assert "torch2jax_ops_gather_scatter_add" in forward.lower(twin, *inputs).as_text()
