"""NumPy state needs no torch: tree_to_jax and from_state_dict with torch unimportable."""
import subprocess
import sys
import textwrap


def _run_without_torch(code: str) -> str:
    """Run ``code`` in a fresh interpreter where ``import torch`` raises ImportError."""
    prelude = "import sys\nsys.modules['torch'] = None\n"
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_tree_to_jax_passes_a_numpy_tree_through_without_torch():
    out = _run_without_torch("""
        import collections
        import numpy as np
        from torch2jax_ops.dlpack import tree_to_jax
        w = np.arange(6.0, dtype=np.float32).reshape(2, 3)
        tree = collections.OrderedDict(w=w, meta=[1, "x", None])
        out = tree_to_jax(tree)
        assert type(out) is collections.OrderedDict
        assert out["w"] is w and out["meta"] == [1, "x", None]
        print("ok")
    """)
    assert out.strip() == "ok"


def test_gat_from_numpy_state_without_torch():
    out = _run_without_torch("""
        import numpy as np
        import jax.numpy as jnp
        from torch2jax_ops.geometric.nn import GATConv
        rng = np.random.default_rng(0)
        state = {"lin.weight": rng.normal(size=(8, 3)).astype(np.float32),
                 "att_src": rng.normal(size=(1, 2, 4)).astype(np.float32),
                 "att_dst": rng.normal(size=(1, 2, 4)).astype(np.float32),
                 "bias": np.zeros(8, np.float32)}
        conv = GATConv.from_state_dict(state, heads=2)
        x = jnp.ones((3, 3))
        edge_index = jnp.array([[0, 1, 2], [1, 2, 0]])
        print(conv(x, edge_index).shape)
    """)
    assert out.strip() == "(3, 8)"
