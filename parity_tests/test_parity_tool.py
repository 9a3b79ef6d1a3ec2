"""The parity tool itself: it must catch real porting mistakes, stay quiet about legitimate
float noise, and explain bad input. Also the report (Markdown, JSON, HTML, heat-map), the CLI
selection flags and the pytest fixture."""
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch_scatter
from torch_geometric.nn import GCNConv

import torch2jax_ops as t2j
from torch2jax_ops import dtypes
from torch2jax_ops import cli
from torch2jax_ops.nn import from_torch
from torch2jax_ops.parity import (ParityError, assert_modules_parity, assert_parity, compare,
                                  compare_modules)
from torch2jax_ops.parity import _report as report, _suite as suite
from torch2jax_ops.parity._suite import Case

RNG = np.random.default_rng(0)
SRC = torch.tensor(RNG.standard_normal((40, 3)), dtype=torch.float32)
INDEX = torch.tensor(RNG.integers(0, 6, 40))
EDGES = torch.tensor([[0, 1, 2, 3, 4, 5, 1], [1, 2, 3, 4, 5, 0, 3]])
X = torch.tensor(RNG.standard_normal((6, 4)), dtype=torch.float32)


def _failed_leaves(result):
    assert not result.passed, str(result)
    return {leaf.path for leaf in result.failures()}


# ---------------------------------------------------------------- mistakes it must catch

def test_flags_an_off_by_one_node_id():
    def theirs(x, edge_index):
        return torch_scatter.scatter_sum(x[edge_index[0]], edge_index[1], 0, dim_size=6)

    def ported(x, edge_index):  # source ids off by one (and -1 wraps to the last node in JAX)
        return t2j.scatter_sum(x[edge_index[0] - 1], edge_index[1], 0, dim_size=6)

    assert _failed_leaves(compare(theirs, ported, X, EDGES)) == {"output", "grad[0]"}


def test_flags_an_off_by_one_output_size_with_the_shapes():
    result = compare(lambda s, i: torch_scatter.scatter_sum(s, i, 0),
                     lambda s, i: t2j.scatter_sum(s, i, 0, dim_size=int(i.max()) + 2), SRC, INDEX)
    assert "shape differs: torch (6, 3), jax (7, 3)" in str(result)
    with pytest.raises(IndexError, match=r"contains 5, out of range .* size 5"):
        t2j.scatter_sum(jnp.asarray(SRC.numpy()), jnp.asarray(INDEX.numpy()), 0, dim_size=5)


def test_flags_a_wrong_reduction():
    result = compare(lambda s, i: torch_scatter.scatter(s, i, 0, reduce="mean"),
                     lambda s, i: t2j.scatter(s, i, 0, reduce="sum"), SRC, INDEX)
    assert _failed_leaves(result) == {"output", "grad[0]"}
    assert result["output"].tol_ratio > 1e3


def test_flags_a_missing_self_loop():
    torch.manual_seed(0)
    conv = GCNConv(4, 4).eval()
    no_loops = GCNConv(4, 4, add_self_loops=False)
    no_loops.load_state_dict(conv.state_dict())
    result = compare_modules(conv, from_torch(no_loops), X, EDGES)
    assert {"output", "grad lin.weight", "grad args[0]"} <= _failed_leaves(result)
    assert_modules_parity(conv, from_torch(conv), X, EDGES)  # the right port passes


class TransposedLinear(eqx.Module):
    """A port that keeps torch's [out, in] weight but multiplies as if it were [in, out]."""
    weight: jax.Array
    bias: jax.Array

    def __call__(self, x):
        return x @ self.weight + self.bias


def test_flags_a_swapped_weight_transpose():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    port = TransposedLinear(jnp.asarray(lin.weight.detach().numpy()),
                            jnp.asarray(lin.bias.detach().numpy()))
    result = compare_modules(lin, port, X)
    assert result.leaves[0].path in ("output", "grad weight", "grad args[0]")  # worst first
    assert {"output", "grad weight", "grad args[0]"} <= _failed_leaves(result)
    assert result["grad bias"].passed  # the bias is right, and reported as right


def test_a_transposed_weight_of_another_shape_is_named():
    lin = torch.nn.Linear(4, 3)
    port = TransposedLinear(jnp.asarray(lin.weight.detach().numpy().T),
                            jnp.asarray(lin.bias.detach().numpy()))
    with pytest.raises(ParityError, match=r"'weight' has shape \(3, 4\) in torch but \(4, 3\) "
                                          r"in the JAX module \(transposed\?\)"):
        compare_modules(lin, port, X)


def test_flags_a_gradient_that_differs_only_through_a_custom_vjp():
    @jax.custom_vjp
    def logsumexp(x):
        return jax.nn.logsumexp(x, axis=-1)

    def fwd(x):
        return logsumexp(x), x

    def bwd(x, g):  # softmax over the wrong axis: the forward pass is still exact
        return (g[..., None] * jax.nn.softmax(x, axis=0),)

    logsumexp.defvjp(fwd, bwd)
    result = compare(lambda x: torch.logsumexp(x, -1), logsumexp, SRC)
    assert result["output"].passed
    assert _failed_leaves(result) == {"grad[0]"}


def test_jit_compares_the_port_as_jax_jit_runs_it():
    # a port whose traced path differs (an idiom jit changes): eager compare cannot see it
    def ours(src, index):
        out = t2j.scatter_sum(src, index, 0)  # groups read off the constant index under jit
        return out * 2.0 if isinstance(src, jax.core.Tracer) else out

    def theirs(src, index):
        return torch_scatter.scatter_sum(src, index, 0)

    assert compare(theirs, ours, SRC, INDEX, grad=False).passed
    assert _failed_leaves(compare(theirs, ours, SRC, INDEX, grad=False, jit=True)) == {"output"}
    # with gradients the outputs and the VJP come from one program: both differ
    assert _failed_leaves(compare(theirs, ours, SRC, INDEX, jit=True)) == {"output", "grad[0]"}
    # a faithful port passes jitted, its sizes read off the index as torch reads them
    assert compare(theirs, lambda s, i: t2j.scatter_sum(s, i, 0), SRC, INDEX, jit=True).passed


def test_flags_float16_accumulated_in_float16():
    x = torch.tensor(np.random.default_rng(1).uniform(0, 1, (8, 2048)), dtype=torch.float16)
    ids = jnp.zeros(2048, jnp.int32)
    # torch sums float16 in float32 and rounds once; segment_sum adds in float16 term by term
    wrong = compare(lambda x: x.sum(-1), lambda x: jax.ops.segment_sum(x.T, ids, 1)[0], x,
                    grad=False)
    assert _failed_leaves(wrong) == {"output"}
    assert wrong["output"].tol_ratio > 5
    right = lambda x: jax.ops.segment_sum(x.T.astype(jnp.float32), ids, 1)[0].astype(x.dtype)
    assert_parity(lambda x: x.sum(-1), right, x, grad=False)


# ------------------------------------------------------------- noise it must not flag

def test_accepts_reassociated_float_sums():
    order = torch.randperm(40, generator=torch.Generator().manual_seed(3))
    # the same sums, edges in another order (XLA's scatter and torch_scatter's loop differ too)
    assert_parity(lambda s, i: torch_scatter.scatter_sum(s[order], i[order], 0),
                  lambda s, i: t2j.scatter_sum(s, i, 0), SRC, INDEX)
    w = torch.tensor(RNG.standard_normal((3, 5)), dtype=torch.float32)
    assert_parity(lambda s, w: (s @ w).sum(0), lambda s, w: jnp.einsum("ij,jk->k", s, w), SRC, w)


def test_accepts_float16_summed_in_another_order_in_float32():
    x = torch.tensor(np.random.default_rng(2).uniform(-1, 1, (8, 512)), dtype=torch.float16)
    assert_parity(lambda x: x.sum(-1),
                  lambda x: jnp.sum(x[:, ::-1].astype(jnp.float32), -1).astype(x.dtype), x)


# -------------------------------------------------------- bad input to the tool explains

def test_mismatched_output_structures_are_explained():
    with pytest.raises(ParityError, match=r"output structures differ: torch returned 2 tensor"):
        compare(lambda s, i: torch_scatter.scatter_max(s, i, 0),
                lambda s, i: t2j.scatter_max(s, i, 0)[0], SRC, INDEX)


def test_non_tensor_outputs_are_explained():
    with pytest.raises(ParityError, match=r"torch output is a float, not a tensor"):
        compare(lambda s: s.sum().item(), jnp.sum, SRC)
    with pytest.raises(ParityError, match=r"jax output\[1\] is a str, not an array"):
        compare(lambda s: (s, s), lambda s: (s, "s"), SRC)


def test_arrays_instead_of_tensors_are_explained():
    with pytest.raises(ParityError, match=r"args\[1\] is a ndarray; .* pass torch.as_tensor"):
        compare(torch_scatter.scatter_sum, t2j.scatter_sum, SRC, INDEX.numpy())


def test_module_mistakes_are_explained():
    with pytest.raises(ParityError, match="takes a torch.nn.Module first"):
        compare_modules(torch.sin, jnp.sin, X)
    lin = torch.nn.Linear(4, 4)

    class Renamed(eqx.Module):
        w: jax.Array
        bias: jax.Array

        def __call__(self, x):
            return x @ self.w.T + self.bias

    port = Renamed(jnp.zeros((4, 4)), jnp.zeros(4))
    with pytest.raises(ParityError, match=r"no array named \['weight'\].*arrays are \['bias', 'w'\]"):
        compare_modules(lin, port, X)


def test_result_table_and_json():
    result = compare(lambda s, i: torch_scatter.scatter(s, i, 0, reduce="mean"),
                     lambda s, i: t2j.scatter(s, i, 0, reduce="sum"), SRC, INDEX)
    text = str(result)
    assert text.splitlines()[0].startswith("parity FAILED")
    assert "max abs err" in text and "err/tol" in text and "NO" in text
    loaded = json.loads(json.dumps(result.to_dict()))
    assert loaded["passed"] is False
    assert {leaf["path"] for leaf in loaded["leaves"]} == {"output", "grad[0]"}
    with pytest.raises(KeyError, match="the leaves are"):
        result["grad[1]"]


# ------------------------------------------------------------------ the pytest fixture

def test_the_parity_fixture_asserts_and_records(parity, request):
    result = parity(torch_scatter.scatter_sum, t2j.scatter_sum, SRC, INDEX, dim=0)
    lin = torch.nn.Linear(4, 2)
    by_name = parity.modules(lin, from_torch(lin), X)
    assert parity.results == [result, by_name]
    assert by_name["grad weight"].passed
    assert request.node.user_properties[0][0].startswith("parity ")
    with pytest.raises(AssertionError, match="parity FAILED"):
        parity(lambda s, i: torch_scatter.scatter(s, i, 0, reduce="mean"),
               lambda s, i: t2j.scatter(s, i, 0, reduce="sum"), SRC, INDEX)


def test_the_fixture_is_installed_for_users(pytester):
    pytester.makepyfile("""
        import jax.numpy as jnp, torch

        def test_port(parity):
            parity.modules(torch.nn.Tanh(), lambda x: jnp.tanh(x), torch.ones(3))

        def test_wrong_port(parity):
            parity(torch.sin, jnp.cos, torch.ones(3))
    """)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    outcome.assert_outcomes(passed=1, failed=1)
    outcome.stdout.fnmatch_lines(["*parity FAILED*", "*output*NO*"])


# ----------------------------------------------------------- the report and the CLI

def _broken_case() -> Case:
    def build():
        return (lambda s, i: torch_scatter.scatter(s, i, 0, reduce="mean"),
                lambda s, i: t2j.scatter(s, i, 0, reduce="sum"), (SRC, INDEX), {}, {})
    return Case("scatter", "scatter_mean", "float32", "deliberately-wrong", build)


def test_report_writes_markdown_json_html_and_heatmap(tmp_path):
    cases = suite.cases(only="scatter_max[float32]-1d") + [_broken_case()]
    rows = report.summarize(report.run_suite(cases))
    paths = report.write_report(rows, str(tmp_path))
    assert set(paths) == {"markdown", "json", "heatmap", "html"}
    md = (tmp_path / "report.md").read_text()
    assert "| scatter_max | float32 | 2 |" in md and "FAIL (1)" in md
    assert "### scatter_mean[float32]-deliberately-wrong" in md
    data = json.loads((tmp_path / "report.json").read_text())
    assert {(r["op"], r["failed"]) for r in data["rows"]} == {("scatter_max", 0),
                                                              ("scatter_mean", 1)}
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!doctype html>") and "data:image/png;base64," in page
    assert "src='http" not in page and "<link" not in page  # self-contained
    assert "<h2>scatter</h2>" in page and "deliberately-wrong" in page
    assert (tmp_path / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_selects_by_pattern_and_x64(tmp_path, capsys):
    assert cli.main(["parity", "--quiet", "--only", "scatter_sum[*]-1d",
                     "--report", str(tmp_path)]) == 0
    ran = {r["dtype"] for r in json.loads((tmp_path / "report.json").read_text())["rows"]}
    assert ran == {"float16", "bfloat16", "float32", "float64", "int32", "int64"}
    assert cli.main(["parity", "--quiet", "--only", "scatter_sum[*]-1d", "--x64",
                     "--report", str(tmp_path)]) == 0
    ran = {r["dtype"] for r in json.loads((tmp_path / "report.json").read_text())["rows"]}
    assert ran == {"float64", "int64"}
    assert cli.main(["parity", "--quiet", "--only", "scatter_sum[*]-1d", "--no-x64",
                     "--report", str(tmp_path)]) == 0
    ran = {r["dtype"] for r in json.loads((tmp_path / "report.json").read_text())["rows"]}
    assert ran == {"float16", "bfloat16", "float32", "int32"}
    assert "4 passed, 0 failed" in capsys.readouterr().out
    assert cli.main(["parity", "--quiet", "--only", "no-such-case"]) == 2
    assert cli.main(["parity", "--quiet", "--section", "no-such-section"]) == 2
    assert "the sections are" in capsys.readouterr().out


# ------------------------------------------------------- the port's own weights

def test_weights_own_catches_a_loading_mistake_that_torch_weights_cannot_see():
    import equinox as eqx

    from torch2jax_ops.parity import compare_weights

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).eval()
    port = from_torch(model, copy=True)
    x = torch.randn(5, 3)
    assert compare_modules(model, port, x, weights="own").passed
    assert compare_weights(model, port).passed
    # a checkpoint converted wrongly: one weight off
    wrong = eqx.tree_at(lambda p: p[0].weight, port, port[0].weight.at[1, 2].add(0.5))
    assert compare_modules(model, wrong, x).passed  # torch's weights: blind to it
    own = compare_modules(model, wrong, x, weights="own")
    assert not own.passed and not own["output"].passed
    weights = compare_weights(model, wrong)
    assert not weights.passed and weights.leaves[0].path == "weight 0.weight"
    assert weights.leaves[0].worst_index == (1, 2) and weights["weight 0.bias"].passed
    # gradients by name still come from the port's own arrays
    assert own["grad 0.bias"].shape == (4,)


def test_compare_weights_lists_missing_extra_and_reshaped_names():
    import equinox as eqx

    from torch2jax_ops.parity import compare_weights

    model = torch.nn.Linear(3, 2)
    port = from_torch(model, copy=True)
    transposed = eqx.tree_at(lambda p: p.weight, port, port.weight.T)
    result = compare_weights(model, transposed)
    assert "shape differs" in result["weight weight"].message
    no_bias = eqx.tree_at(lambda p: p.bias, port, None, is_leaf=lambda v: v is None)
    assert compare_weights(model, no_bias)["weight bias"].message == "missing in the JAX module"
    with pytest.raises(ParityError, match="weights must be 'torch'"):
        compare_modules(model, port, torch.ones(1, 3), weights="mine")


# ------------------------------------------------- the float64 reference for float32 leaves

def _tiny_terms() -> torch.Tensor:
    """1 followed by 2,000 terms of 5e-8: a plain float32 running sum never moves off 1.0
    (each term is below half an ulp of 1), while the exact sum is 1.0001."""
    return torch.cat([torch.ones(1), torch.full((2_000,), 5e-8)])


def _running_sum_torch(x):
    total = x[0]
    for term in x[1:]:  # float32 throughout (torch's own cumsum accumulates in double)
        total = total + term
    return total


def _running_sum_jax(x):
    return jax.lax.fori_loop(0, x.shape[0], lambda i, acc: acc + x[i], jnp.zeros((), x.dtype))


def test_a_float32_leaf_outside_tolerance_passes_when_closer_to_float64_than_torch():
    """torch's running sum stays at 1.0; the port sums the small terms first (1.0001, the
    exact value): they differ by 1e-4, ten times the tolerance, and the port is right."""
    result = compare(_running_sum_torch, lambda x: x[0] + jnp.sum(x[1:]), _tiny_terms(),
                     grad=False)
    (leaf,) = result.leaves
    assert result.passed and leaf.max_abs > 5e-5
    assert leaf.tol_ratio <= 1.0 and "float64 result" in leaf.message


def test_a_float32_leaf_farther_from_float64_than_torch_still_fails():
    """The mirror image: torch is exact, the port's running sum is 1e-4 off. The float64
    check must not forgive it."""
    result = compare(lambda x: x[0] + x[1:].sum(), _running_sum_jax, _tiny_terms(),
                     grad=False)
    (leaf,) = result.leaves
    assert not result.passed and leaf.tol_ratio > 1.0
    assert "against torch's float64 result" in leaf.message


def test_the_float64_reference_does_not_forgive_float64_or_nan_differences():
    with dtypes.x64():
        result = compare(lambda t: t.sum() + 1e-3, lambda t: jnp.sum(t),
                         _tiny_terms().double(), grad=False)
    assert not result.passed and "float64" not in result.leaves[0].message
    nan = compare(lambda t: t.sum() * float("nan"), lambda t: jnp.sum(t), _tiny_terms(),
                  grad=False)
    assert not nan.passed and "float64" not in nan.leaves[0].message


def test_compare_modules_compares_python_number_outputs():
    """A model returning a Python number beside its tensors (PyG's pooling examples return
    the pool ratio): compared as NumPy makes it on both sides, and a different number fails
    (it was a ParityError 'output[1] is a float, not a tensor')."""

    class WithRatio(torch.nn.Module):
        def __init__(self, ratio):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)
            self.ratio = ratio

        def forward(self, x):
            return self.lin(x), self.ratio, 3

    torch.manual_seed(0)
    model, x = WithRatio(0.5), torch.randn(4, 3)
    result = compare_modules(model, from_torch(model), x)
    assert result.passed, str(result)
    leaves = {leaf.path: leaf for leaf in result.leaves}
    assert leaves["output[1]"].dtype == "float64" and leaves["output[2]"].dtype == "int64"
    other = WithRatio(0.25)
    other.load_state_dict(model.state_dict())
    wrong = compare_modules(model, from_torch(other), x)
    assert not wrong.passed and not {leaf.path: leaf for leaf in wrong.leaves}[
        "output[1]"].passed



def test_a_reentrant_checkpoint_is_compared_with_every_gradient():
    """PyG's DeepGCNLayer(ckpt_grad=True) runs its conv through torch.utils.checkpoint
    (use_reentrant=True): torch.autograd.grad refuses it, and its backward runs the conv
    again after the call returned, which must differentiate the compared parameters."""
    from torch_geometric.nn import DeepGCNLayer, GENConv

    torch.manual_seed(0)
    model = DeepGCNLayer(GENConv(4, 4), torch.nn.LayerNorm(4), torch.nn.ReLU(),
                         block="res+", dropout=0.0, ckpt_grad=True).eval()
    x = torch.randn(5, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2]])
    result = compare_modules(model, from_torch(model), x, edge_index)
    assert result.passed, result
    conv_grads = [leaf for leaf in result.leaves if leaf.path.startswith("grad conv.")]
    assert conv_grads and all(leaf.max_abs < 1e-5 for leaf in conv_grads)
    # the checkpointed conv's gradients are really compared: a port whose conv differs fails
    import copy

    altered = copy.deepcopy(model)
    with torch.no_grad():
        altered.conv.mlp[0].weight.mul_(1.5)
    bad = compare_modules(model, from_torch(altered), x, edge_index, weights="own")
    assert not bad.passed and not bad["output"].passed
    assert all(p.grad is None for p in model.parameters())   # the module's own are untouched
