"""torch2jax_ops.distributed against PyG: a PyG layer's port, run on a graph that
``distributed.shard_graph`` splits over 4 forced host devices (the shard_map path), gives
PyG's output and PyG's parameter gradients. Runs in a child process: the device count
must be set before JAX starts."""
import textwrap

from parity_tests.conftest import run_on_host_devices

SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np, torch, torch_geometric.nn as tnn
    from torch2jax_ops import distributed
    from torch2jax_ops.nn import from_torch, named_parameters
    assert len(jax.devices()) == 4
    mesh = jax.make_mesh((4,), ("e",), axis_types=(jax.sharding.AxisType.Explicit,))
    torch.manual_seed(0)
    n, e, f = 40, 230, 6
    x = torch.randn(n, f)
    edge_index = torch.randint(0, n, (2, e))
    cot = torch.randn(n, 5)
    layers = {"GCNConv": tnn.GCNConv(f, 5), "SAGEConv": tnn.SAGEConv(f, 5, aggr="mean"),
              "GATConv": tnn.GATConv(f, 5, heads=1), "GraphConv": tnn.GraphConv(f, 5, aggr="max")}
    for name, layer in layers.items():
        layer.zero_grad()
        theirs = layer(x, edge_index)
        (theirs * cot).sum().backward()
        port = from_torch(layer.eval())
        with jax.set_mesh(mesh):
            g = distributed.shard_graph(x.numpy(), edge_index.numpy(), mesh=mesh)
            placed = distributed.replicate(port, mesh=mesh)
            c = jnp.asarray(cot.numpy())

            def loss(m):
                out = m(g.x, g.edge_index)[:n]
                return jnp.sum(out * c), out

            (_, ours), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(placed)
        np.testing.assert_allclose(np.asarray(ours), theirs.detach().numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)
        ours_grads = dict(named_parameters(grads))
        for key, p in layer.named_parameters():
            np.testing.assert_allclose(np.asarray(ours_grads[key]), p.grad.numpy(), rtol=1e-4,
                                       atol=1e-5, err_msg=f"{name} grad {key}")
        # no device holds every edge
        sizes = {s.data.shape[-1] for s in g.edge_index.addressable_shards}
        assert max(sizes) < e, (name, sizes)
        print(name, "ok")
    print("distributed parity ok")
""")


def test_sharded_layers_match_pyg_on_four_host_devices():
    run_on_host_devices(SCRIPT, 4, "distributed parity ok", timeout=600)
