"""The fx path of ``from_torch`` on models that once broke it (section "fx" of the suite,
torch2jax_ops/parity/cases/fx_models.py), and the errors it gives instead of crashing."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from torch2jax_ops.parity import _suite as suite

ROOT = Path(__file__).resolve().parent.parent
CASES = suite.cases("fx")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fx_model_matches_torch(case):
    result = case.run()
    assert result.passed, str(result)
    names = {leaf.path for leaf in result.leaves}
    assert any(n.startswith("grad ") for n in names), names


def _run_isolated(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``code`` as a script in a fresh interpreter: a regression to a segfault fails the
    test, not the test session."""
    script = tmp_path / "user_model.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_unmapped_torch_function_with_scalar_overload_raises_not_crashes(tmp_path):
    """torch's C functions taking a Scalar (torch.float_power(x, 2)) read a proxy as a tensor
    and crashed the process; now they are wrapped: a clear error naming the public path."""
    done = _run_isolated("""
        import jax.numpy as jnp, torch
        from torch2jax_ops.nn import UnsupportedModuleError, from_torch

        class Net(torch.nn.Module):
            def forward(self, x):
                return torch.float_power(x, 2)

        try:
            from_torch(Net())(jnp.ones(3))
        except UnsupportedModuleError as exc:
            print("ERROR:", exc)
    """, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ERROR: Net.forward: no JAX mapping for `torch.float_power`" in done.stdout
    assert "register_function('torch.float_power')" in done.stdout
    assert "user_model.py:7, in forward: return torch.float_power(x, 2)" in done.stdout


def test_label_propagation_under_jit_matches_torch():
    """LabelPropagation's `out[mask] = y[mask]` (a masked write-back) and its post_step
    callable: eagerly and under jit (the masked-rows form), torch's numbers."""
    import equinox as eqx

    import torch2jax_ops as t2j
    from torch2jax_ops.parity.cases import fx_models
    from torch2jax_ops.nn import from_torch

    model, args = fx_models.build_model("label-propagation-post-step", "float32")
    port = from_torch(model)
    y, edge_index, mask = (t2j.to_jax(a, allow_downcast=True) for a in args)
    torch_out = model(*args).numpy()
    assert abs(port(y, edge_index, mask) - torch_out).max() < 1e-5  # eagerly
    jitted = eqx.filter_jit(port)(y, edge_index, mask)
    assert abs(jitted - torch_out).max() < 1e-5  # under jit


def test_a_filled_sgconv_cache_is_replayed():
    """sgc.py: SGConv(cached=True) in a forward that reads a global `data`, run once in torch,
    holds the propagated features; PyG then returns lin(cache) whatever it is given. The
    port keeps the cache as a constant (not a parameter) and gives PyG's numbers."""
    import torch

    from torch2jax_ops.parity.cases import _fx_models, fx_models
    from torch2jax_ops.nn import from_torch, state_dict
    from torch2jax_ops.parity import compare_modules

    model, args = fx_models.build_model("sgc-global-data", "float32")
    model()  # fills conv1._cached_x
    port = from_torch(model)
    assert set(state_dict(port)) == set(model.state_dict()) == {"conv1.lin.weight",
                                                                 "conv1.lin.bias"}
    assert compare_modules(model, port).passed
    # the cache is what PyG reads from now on: another global graph changes nothing in
    # either (the rule guarded: the port must not recompute from the new graph)
    _fx_models.data.x = _fx_models.data.x * 2.0
    np.testing.assert_allclose(np.asarray(port()), model().detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    model.conv1._cached_x = None  # emptied: both propagate the new features
    fresh = from_torch(model)
    assert not np.allclose(np.asarray(fresh()), np.asarray(port()), atol=1e-3)
    assert compare_modules(model, fresh).passed and torch.is_tensor(model.conv1._cached_x)


def test_layer_refused_by_its_converter_keeps_its_names_and_says_why():
    """APPNP(cached=True) run once in torch holds the normalised edges of that graph, which
    its converter refuses; the port still holds the model's other arrays by name, and
    compare_modules reaches the reason (not 'no array named ...')."""
    import torch
    from torch_geometric.nn import APPNP

    from torch2jax_ops.nn import UnsupportedModuleError, from_torch, state_dict
    from torch2jax_ops.parity import compare_modules

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.prop = APPNP(2, 0.1, cached=True)

        def forward(self, x, edge_index):
            return self.prop(self.lin(x), edge_index)

    model = Net().eval()
    x, edge_index = torch.randn(5, 4), torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    model(x, edge_index)  # fills prop._cached_edge_index
    port = from_torch(model)
    assert set(state_dict(port)) == set(model.state_dict()) == {"lin.weight", "lin.bias"}
    with pytest.raises(UnsupportedModuleError, match=r"cached=True with a filled cache "
                                                     r"\(_cached_edge_index\).*"
                                                     r"`\._cached_edge_index = None`"):
        compare_modules(model, port, x, edge_index)
    model.prop._cached_edge_index = None  # the fix the message gives: weights kept
    weight = model.lin.weight.detach().clone()
    assert compare_modules(model, from_torch(model), x, edge_index).passed
    assert torch.equal(model.lin.weight, weight)


def test_callable_reading_a_parameter_from_outside_raises():
    """A function handed to a submodule that closes over a parameter: in the port it would be
    a constant without gradient, so it is refused, naming the function."""
    import torch
    from torch_geometric.nn import LabelPropagation

    import torch2jax_ops as t2j
    from torch2jax_ops.parity.cases import fx_models
    from torch2jax_ops.nn import UnsupportedModuleError, from_torch

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor(0.5))
            self.prop = LabelPropagation(num_layers=2, alpha=0.9)

        def forward(self, y, edge_index, mask):
            return self.prop(y, edge_index, mask, post_step=lambda out: out * self.scale)

    _, args = fx_models.build_model("label-propagation-post-step", "float32")
    port = from_torch(Scaled())
    with pytest.raises(UnsupportedModuleError,
                       match=r"reads a parameter of shape \(\) that is not its own"):
        port(*(t2j.to_jax(a, allow_downcast=True) for a in args))


def test_custom_autograd_function_is_refused_not_a_crash(tmp_path):
    """A model using a torch.autograd.Function of your own crashed the process under the
    tracer; now a clear error names the class and the user's line."""
    done = _run_isolated("""
        import jax.numpy as jnp, torch
        from torch2jax_ops.nn import UnsupportedModuleError, from_torch

        class Square(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * x * grad

        class Own(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)

            def forward(self, x):
                return Square.apply(self.lin(x))

        try:
            from_torch(Own())(jnp.ones((3, 4)))
        except UnsupportedModuleError as exc:
            print("ERROR:", exc)
    """, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    own = done.stdout.strip()
    assert own.startswith("ERROR: Square (__main__) is a custom torch.autograd.Function")
    assert own.endswith("user_model.py:22, in forward: return Square.apply(self.lin(x))")


def test_group_add_rev_differentiates_its_forward():
    """PyG's GroupAddRev (RevGNN) calls InvertibleFunction, whose backward rebuilds the
    inputs with the inverse and differentiates the forward: the forward's own gradient. The
    port traces the forward; values and every gradient match PyG's."""
    import torch
    from torch_geometric.nn import GraphConv, GroupAddRev

    from torch2jax_ops.nn import from_torch
    from torch2jax_ops.parity import compare_modules

    class Reversible(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = GroupAddRev(GraphConv(2, 2), num_groups=2)
            self.out = torch.nn.Linear(4, 1)

        def forward(self, x, edge_index):
            return self.out(self.block(x, edge_index))

    torch.manual_seed(0)
    model = Reversible()
    x, edge_index = torch.randn(5, 4), torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 0]])
    result = compare_modules(model, from_torch(model), x, edge_index)
    assert result.passed, result
    assert result["grad block.convs.1.lin_rel.weight"].max_abs < 1e-5


def test_integer_labels_traced_name_the_argument_and_closing_over_them_works():
    """LabelPropagation's one_hot reads the class count off ``y`` (``int(y.max()) + 1``). A
    traced ``y`` (a jit argument) cannot give it: the error names the argument `y` and the
    fix; with ``y`` closed over (a constant) the port computes PyG's numbers under jit."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np
    from torch_geometric.nn import LabelPropagation

    from torch2jax_ops.nn import UnsupportedModuleError, from_torch
    from torch2jax_ops.parity.cases import fx_models

    y, edge_index, mask, weight = fx_models.inputs("int-labels", "float32")
    model = LabelPropagation(num_layers=3, alpha=0.9)
    port = from_torch(model)
    jy, je, jm, jw = (jnp.asarray(a.numpy()) for a in (y, edge_index, mask, weight))
    with pytest.raises(UnsupportedModuleError,
                       match=r"used as a Python int.*LabelPropagation\.forward's argument `y`, "
                             r"traced.*make it a constant \(close over it"):
        eqx.filter_jit(port)(jy, je, jm)
    out = jax.jit(lambda e, m, w: port(jy, e, m, edge_weight=w))(je, jm, jw)
    expected = model(y, edge_index, mask, edge_weight=weight).numpy()
    assert expected.shape == (y.shape[0], int(y.max()) + 1)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-6)


def test_sortedness_check_is_decided_on_a_known_batch_and_names_a_traced_one():
    """PyG's aggregations test ``torch.all(index[:-1] <= index[1:])`` in an ``if``: a known
    batch decides it as torch does (an unsorted one takes the raising branch); a traced one
    cannot, and the error names the forward's argument `batch`."""
    import equinox as eqx
    import jax.numpy as jnp
    import torch

    from torch2jax_ops.nn import UnsupportedModuleError, from_torch

    class Checked(torch.nn.Module):
        def forward(self, x, batch):
            if not torch.all(batch[:-1] <= batch[1:]):
                raise ValueError("batch is not sorted")
            return x * 2.0

    port = from_torch(Checked())
    x = jnp.arange(4.0)
    assert port(x, jnp.array([0, 0, 1, 2])).tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(ValueError, match="batch is not sorted"):
        port(x, jnp.array([0, 1, 0, 2]))
    with pytest.raises(UnsupportedModuleError,
                       match=r"control flow on a tensor's values.*Checked\.forward's argument "
                             r"`batch`, traced"):
        eqx.filter_jit(port)(x, jnp.array([0, 0, 1, 2]))


def test_parameter_swapped_for_a_plain_tensor_keeps_its_gradient():
    """Under torch's reparametrization (torch.func.functional_call; compare_modules holds it
    while the port runs) a parameter is a plain tensor, not a Parameter: the port still reads
    it as the parameter (``self.lins[i].weight.t()`` is traced), so its gradient is torch's,
    not zero."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    from torch.nn.utils.stateless import _reparametrize_module

    from torch2jax_ops import func
    from torch2jax_ops.nn import from_torch
    from torch2jax_ops.parity.cases import fx_models

    model, (x, edge_index) = fx_models.build_model("pmlp-inference", "float32")
    port = from_torch(model)
    swapped = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
    jargs = (jnp.asarray(x.numpy()), jnp.asarray(edge_index.numpy()))
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in swapped.items()}
    with _reparametrize_module(model, swapped):
        assert not isinstance(model.lins[0].weight, torch.nn.Parameter)
        model(x, edge_index).square().sum().backward()
        grads = jax.grad(lambda p: jnp.sum(func.functional_call(port, p, jargs) ** 2))(params)
    for name, leaf in swapped.items():
        assert float(jnp.abs(grads[name]).max()) > 0, name
        np.testing.assert_allclose(np.asarray(grads[name]), leaf.grad.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)
