"""torch.autograd.functional and torch.func vs their JAX ports: values, derivatives of every
order, return structures, strict mode and errors, each against real torch."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch2jax_ops import dtypes, func, to_jax
from torch2jax_ops.autograd import functional
from torch2jax_ops.parity import _suite as suite, assert_parity
from torch2jax_ops.parity.cases.autograd import (FUNCTIONS, MIN_TORCH_VMAP_UNBATCHED, inputs,
                                         torch_nth_grad)
from parity_tests.conftest import require_torch

CASES = suite.cases("autograd")
FUNCTIONAL_OPS = set(functional.__all__)
FUNC_OPS = set(func.__all__)


def test_matrix_covers_every_function_and_dtype():
    ops = {c.op for c in CASES}
    assert {f"autograd.functional.{name}" for name in FUNCTIONAL_OPS} <= ops
    # linearize is jax.linearize under torch's name; tested below, not in the matrix
    assert {f"func.{name}" for name in FUNC_OPS - {"linearize"}} <= ops
    for op in ("autograd.functional.jacobian", "autograd.functional.vjp", "func.grad",
               "func.vjp", "func.vmap", "autograd.Function:StableLogSumExp"):
        assert {c.dtype for c in CASES if c.op == op} == set(dtypes.FLOAT_NAMES), op
    for op in ops:
        assert {"float32", "float64"} <= {c.dtype for c in CASES if c.op == op}, op
    orders = {c.label.split("order")[-1] for c in CASES if c.op == "func.nth_grad"}
    assert {"0", "1", "2", "3", "4"} <= orders


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_derivative_apis_match_torch(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"


# ------------------------------------------------------------------ return structures

def shape_of(tree):
    """A tensor/array -> its shape; tuples stay tuples; anything else is an error."""
    if isinstance(tree, tuple):
        return tuple(shape_of(t) for t in tree)
    if isinstance(tree, torch.Tensor) or isinstance(tree, jax.Array):
        return ("array", tuple(tree.shape))
    raise AssertionError(f"unexpected {type(tree)}")


def as_tuples(tree):
    return tuple(as_tuples(t) for t in tree) if isinstance(tree, (tuple, list)) else tree


ONE_ONE = lambda o, x: o.sin(x) * 2                      # noqa: E731
ONE_TWO = lambda o, x: (o.sin(x), x.sum())               # noqa: E731
TWO_ONE = lambda o, x, y: o.exp(x) * y.sum()             # noqa: E731
TWO_TWO = lambda o, x, y: (x * y.sum(), o.exp(y))        # noqa: E731


class Ops:
    def __init__(self, mod):
        self.mod = mod

    def __getattr__(self, name):
        return getattr(self.mod, name)


T, J = Ops(torch), Ops(jnp)


@pytest.mark.parametrize("fn,n_in,as_tuple", [
    (ONE_ONE, 1, False), (ONE_ONE, 1, True), (ONE_TWO, 1, False), (ONE_TWO, 1, True),
    (TWO_ONE, 2, True), (TWO_TWO, 2, True)])
def test_jacobian_vjp_jvp_return_torch_structures(fn, n_in, as_tuple):
    xs = inputs([(3,), (2,)][:n_in], "float64")
    with dtypes.x64():
        ts = tuple(xs) if as_tuple else xs[0]
        js = tuple(to_jax(x) for x in xs) if as_tuple else to_jax(xs[0])
        tf, jf = (lambda *a: fn(T, *a)), (lambda *a: fn(J, *a))
        for strategy in ("reverse-mode", "forward-mode"):
            theirs = torch.autograd.functional.jacobian(tf, ts, strategy=strategy,
                                                        vectorize=strategy == "forward-mode")
            ours = functional.jacobian(jf, js, strategy=strategy)
            # torch's forward mode returns lists where its docs (and reverse mode) say
            # tuples: deviation jacobian-forward-mode-lists; ours are tuples in both modes
            assert shape_of(ours) == shape_of(as_tuples(theirs))
            assert_parity(lambda *_: theirs, lambda *_: ours, grad=False)
        out = tf(*xs)
        v_t = tuple(torch.ones_like(o) for o in out) if isinstance(out, tuple) else torch.ones_like(out)
        v_j = jax.tree_util.tree_map(lambda t: jnp.ones(t.shape), tuple(v_t) if isinstance(v_t, tuple) else v_t)
        theirs = torch.autograd.functional.vjp(tf, ts, v_t)
        ours = functional.vjp(jf, js, v_j)
        assert shape_of(ours) == shape_of(theirs)
        theirs = torch.autograd.functional.jvp(tf, ts, ts)
        ours = functional.jvp(jf, js, js)
        assert shape_of(ours) == shape_of(theirs)


@pytest.mark.parametrize("as_tuple", [False, True])
@pytest.mark.parametrize("out_shape", [(), (1,), (1, 1)])
def test_hessian_hvp_vhp_structures_and_single_element_outputs(as_tuple, out_shape):
    xs = inputs([(3,), (2,)][:1 + as_tuple], "float64", 3)
    tf = lambda *a: sum((t ** 3).sum() for t in a).reshape(out_shape)   # noqa: E731
    jf = lambda *a: sum((t ** 3).sum() for t in a).reshape(out_shape)   # noqa: E731
    with dtypes.x64():
        ts = tuple(xs) if as_tuple else xs[0]
        js = tuple(to_jax(x) for x in xs) if as_tuple else to_jax(xs[0])
        theirs, ours = torch.autograd.functional.hessian(tf, ts), functional.hessian(jf, js)
        assert shape_of(ours) == shape_of(theirs)
        assert_parity(lambda *_: theirs, lambda *_: ours, grad=False)
        for op in ("hvp", "vhp"):
            theirs = getattr(torch.autograd.functional, op)(tf, ts, ts)
            ours = getattr(functional, op)(jf, js, js)
            assert shape_of(ours) == shape_of(theirs), op
            assert_parity(lambda *_: theirs, lambda *_: ours, grad=False)


def test_v_none_allowed_only_for_single_element():
    with dtypes.x64():
        x = torch.tensor([0.5], dtype=torch.float64)
        theirs = torch.autograd.functional.vjp(lambda t: t ** 2, x)
        ours = functional.vjp(lambda t: t ** 2, to_jax(x))
        assert_parity(lambda *_: theirs, lambda *_: ours, grad=False)
        theirs = torch.autograd.functional.jvp(lambda t: t ** 2, x)
        ours = functional.jvp(lambda t: t ** 2, to_jax(x))
        assert_parity(lambda *_: theirs, lambda *_: ours, grad=False)
        x3 = torch.ones(3, dtype=torch.float64)
        for op in ("vjp", "jvp", "hvp", "vhp"):
            f_t = (lambda t: t.sum()) if op in ("hvp", "vhp") else (lambda t: t * 2)
            f_j = (lambda t: t.sum()) if op in ("hvp", "vhp") else (lambda t: t * 2)
            with pytest.raises(RuntimeError, match="v can only be None"):
                getattr(torch.autograd.functional, op)(f_t, x3)
            with pytest.raises(RuntimeError, match="v can only be None"):
                getattr(functional, op)(f_j, to_jax(x3))


# --------------------------------------------------------------------------- strict

STRICT = {
    # name: (fn(ops, x, y), api, create_graph)
    "independent-input": (lambda o, x, y: x * 2, "jacobian", False),
    "pair-independent": (lambda o, x, y: (x * y.sum(), o.exp(x)), "jacobian", False),
    "connected": (lambda o, x, y: (x * y.sum(), o.exp(x) * y[0]), "jacobian", False),
    "integer-path": (lambda o, x, y: (x > 0).to(x.dtype) * y.sum() if o is T
                     else (x > 0).astype(x.dtype) * y.sum(), "jacobian", False),
    "detached": (lambda o, x, y: (x.detach() if o is T else jax.lax.stop_gradient(x)) * y.sum(),
                 "vjp", False),
    "vjp-connected": (lambda o, x, y: o.sin(x) * y.sum(), "vjp", False),
    "vjp-linear-create-graph": (lambda o, x, y: x * 2 + y.sum(), "vjp", True),
    "vjp-nonlinear-create-graph": (lambda o, x, y: x * y.sum(), "vjp", True),
    "jvp-independent": (lambda o, x, y: x * 3, "jvp", False),
    "hessian-linear": (lambda o, x, y: (x * 2).sum() + (y ** 2).sum(), "hessian", False),
    "hessian-separable": (lambda o, x, y: (x ** 3).sum() + (y ** 2).sum(), "hessian", False),
    "hessian-coupled": (lambda o, x, y: (x ** 2).sum() * (y ** 2).sum(), "hessian", False),
    "vhp-linear": (lambda o, x, y: (x * 2).sum() + (y ** 2).sum(), "vhp", False),
    "vhp-coupled": (lambda o, x, y: (x ** 2).sum() * (y ** 2).sum(), "vhp", False),
    "hvp-separable": (lambda o, x, y: (x ** 3).sum() + (y ** 2).sum(), "hvp", False),
    "jacobian-linear-create-graph": (lambda o, x, y: x * y.sum(), "jacobian", True),
    "jacobian-quadratic-create-graph": (lambda o, x, y: x * x * y.sum() * y[0], "jacobian", True),
}


@pytest.mark.parametrize("name", sorted(STRICT))
def test_strict_raises_exactly_where_torch_raises(name):
    fn, api, create_graph = STRICT[name]
    xs = inputs([(3,), (2,)], "float64", 5)
    with dtypes.x64():
        js = tuple(to_jax(x) for x in xs)
        args_t, args_j = (xs,), (js,)
        if api in ("hvp", "vhp"):
            args_t, args_j = (xs, xs), (js, js)
        if api == "vjp":
            out = fn(T, *xs)
            args_t, args_j = (xs, torch.ones_like(out)), (js, jnp.ones(out.shape))
        if api == "jvp":
            args_t, args_j = (xs, xs), (js, js)
        outcome = []
        for mod, ops, args in ((torch.autograd.functional, T, args_t), (functional, J, args_j)):
            try:
                getattr(mod, api)(lambda *a: fn(ops, *a), *args, create_graph=create_graph,
                                  strict=True)
                outcome.append(None)
            except RuntimeError as exc:
                outcome.append(str(exc).split(".")[0])
        assert (outcome[0] is None) == (outcome[1] is None), outcome
        # without strict nothing raises and independent parts are zeros
        getattr(functional, api)(lambda *a: fn(J, *a), *args_j)


# ---------------------------------------------------------------------- torch.func

def test_grad_and_value_order_and_aux():
    x = inputs([(4,)], "float32")[0]
    f_t = lambda t: ((t ** 2).sum(), {"n": t.mean()})      # noqa: E731
    f_j = lambda t: ((t ** 2).sum(), {"n": t.mean()})      # noqa: E731
    assert_parity(lambda t: torch.func.grad_and_value(f_t, has_aux=True)(t),
                  lambda t: func.grad_and_value(f_j, has_aux=True)(t), x)
    assert_parity(lambda t: torch.func.grad(f_t, has_aux=True)(t),
                  lambda t: func.grad(f_j, has_aux=True)(t), x)
    g, (value, aux) = func.grad_and_value(f_j, has_aux=True)(to_jax(x))
    assert g.shape == (4,) and value.shape == () and set(aux) == {"n"}


def test_grad_over_pytree_params_matches_torch():
    xs = inputs([(3, 4), (4, 2)], "float64", 2)
    with dtypes.x64():
        loss_t = lambda p, x: torch.tanh(x @ p["w"]).sum() + p["b"].pow(2).sum()   # noqa: E731
        loss_j = lambda p, x: jnp.tanh(x @ p["w"]).sum() + (p["b"] ** 2).sum()     # noqa: E731
        assert_parity(lambda x, w: torch.func.grad(loss_t)({"w": w, "b": w[0]}, x),
                      lambda x, w: func.grad(loss_j)({"w": w, "b": w[0]}, x), *xs)


def test_vmap_keyword_arguments_are_not_batched_like_torch():
    x = inputs([(5, 3)], "float32")[0]
    scale = torch.arange(3.0)
    theirs = torch.func.vmap(lambda a, scale: a * scale)(x, scale=scale)
    ours = func.vmap(lambda a, scale: a * scale)(to_jax(x), scale=to_jax(scale))
    assert_parity(lambda *_: theirs, lambda *_: ours, grad=False)
    with pytest.raises(ValueError):  # jax.vmap maps keyword arguments: 5 vs 3
        jax.vmap(lambda a, scale: a * scale)(to_jax(x), scale=to_jax(scale))


@pytest.mark.parametrize("in_dims,out_dims", [(0, 0), (1, 0), (-1, 1), ((0, None), (0, None)),
                                              ((None, 0), 1)])
@pytest.mark.parametrize("chunk_size", [None, 1, 2, 10])
def test_vmap_dims_and_chunks_match_torch(in_dims, out_dims, chunk_size):
    if None in (out_dims if isinstance(out_dims, tuple) else (out_dims,)):
        require_torch(MIN_TORCH_VMAP_UNBATCHED, "vmap handles out_dims=None outputs differently")
    x, y = inputs([(4, 4), (4, 4)], "float32", 7)

    def run(vmap, a, b):
        return vmap(lambda p, q: (p * q.sum(), q * 2), in_dims, out_dims,
                    chunk_size=chunk_size)(a, b)

    def torch_run(a, b):
        try:
            return run(torch.func.vmap, a, b)
        except TypeError:
            # torch's chunked vmap crashes on an out_dims=None output (deviation
            # vmap-chunks-unbatched-output); compare with its unchunked result
            assert chunk_size is not None and None in out_dims
            return torch.func.vmap(lambda p, q: (p * q.sum(), q * 2), in_dims, out_dims)(a, b)

    try:
        torch_run(x, y)
    except ValueError:  # e.g. out_dims=None for a batched output: both refuse
        with pytest.raises(ValueError):
            run(func.vmap, to_jax(x), to_jax(y))
        return
    assert_parity(torch_run, lambda a, b: run(func.vmap, a, b), x, y)


@pytest.mark.parametrize("call", [
    lambda vmap, x: vmap(lambda a: a, in_dims=2)(x),             # out of range
    lambda vmap, x: vmap(lambda a, b: a, in_dims=(0,))(x, x),    # structure
    lambda vmap, x: vmap(lambda a, b: a, in_dims=(0, 0))(x, x[:2]),   # sizes differ
    lambda vmap, x: vmap(lambda a, b: a, in_dims=(0, 0))(x, 3),  # non-array mapped
    lambda vmap, x: vmap(lambda a: a, in_dims=[0])(x),           # list, not tuple
    lambda vmap, x: vmap(lambda a: a, in_dims=(None,))(x),       # nothing mapped
    lambda vmap, x: vmap(lambda a: a, chunk_size=0)(x),
    lambda vmap, x: vmap(lambda a: a, randomness="sometimes")(x),
    lambda vmap, x: vmap(lambda a: (a, a), out_dims=(0, 0, 0))(x),
])
def test_vmap_errors_are_valueerrors_like_torch(call):
    x = torch.ones(3, 2)
    with pytest.raises((ValueError, RuntimeError)) as theirs:
        call(torch.func.vmap, x)
    with pytest.raises(type(theirs.value)):
        call(func.vmap, to_jax(x))


def test_jvp_requires_tuples_and_grad_requires_scalar_like_torch():
    x = torch.ones(3)
    for fn in (lambda m, a: m.jvp(torch.sin if m is torch.func else jnp.sin, a, a),):
        with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
            fn(torch.func, x)
        with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
            fn(func, to_jax(x))
    with pytest.raises(RuntimeError, match="scalar"):
        torch.func.grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="scalar"):
        func.grad(lambda a: a * 2)(to_jax(x))
    with pytest.raises(ValueError, match="argnums=3 is out of range"):
        func.grad(lambda a: a.sum(), argnums=3)(to_jax(x))
    with pytest.raises(TypeError, match="floating-point"):
        func.grad(lambda a: a.sum())(jnp.arange(3))
    with pytest.raises(TypeError, match="must be either an array or a tuple of arrays"):
        functional.jacobian(lambda a: a, [to_jax(x)])
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        torch.autograd.functional.jacobian(lambda a: a, [x])
    with pytest.raises(TypeError, match="outputs of the user-provided function"):
        functional.jacobian(lambda a: [a], to_jax(x))
    with pytest.raises(TypeError, match="to_jax"):
        functional.vjp(lambda a: a, x)


def test_linearize_matches_torch():
    x, t = inputs([(4,), (4,)], "float64", 11)
    with dtypes.x64():
        f_t, f_j = (lambda a: torch.sin(a) * a), (lambda a: jnp.sin(a) * a)
        out_t, jvp_t = torch.func.linearize(f_t, x)
        out_j, jvp_j = func.linearize(f_j, to_jax(x))
        assert_parity(lambda *_: (out_t, jvp_t(t)), lambda *_: (out_j, jvp_j(to_jax(t))),
                      grad=False)


def test_functional_call_strict_tied_and_tuple_of_dicts():
    from torch2jax_ops.parity.cases.autograd import Linear, TwoLayer
    w = jnp.ones((6, 4))
    model = TwoLayer(Linear(w, jnp.zeros(6)), Linear(jnp.ones((3, 6)), jnp.zeros(3)))
    x = jnp.ones((2, 4))
    with pytest.raises(RuntimeError, match="Missing key"):
        func.functional_call(model, {"lin1.weight": w}, x, strict=True)
    full = {"lin1.weight": w * 0, "lin1.bias": jnp.zeros(6)}
    rest = {"lin2.weight": jnp.ones((3, 6)), "lin2.bias": jnp.ones(3)}
    out = func.functional_call(model, (full, rest), (x,), strict=True)
    np.testing.assert_allclose(out, np.ones((2, 3)))
    with pytest.raises(ValueError, match="multiple dictionaries"):
        func.functional_call(model, (full, full), (x,))
    # tied weights, torch's rule (test below): one name replaces both
    layer = Linear(w, jnp.zeros(6))
    same = func.functional_call(_Tied(layer), {"a.weight": w * 2}, (x,))
    np.testing.assert_allclose(same, 2 * (x @ (w * 2).T))
    with pytest.raises(ValueError, match="tied"):
        func.functional_call(_Tied(layer), {"a.weight": w * 2, "b.weight": w * 3}, (x,))
    untied = func.functional_call(_Tied(layer), {"a.weight": w * 2}, (x,), tie_weights=False)
    np.testing.assert_allclose(untied, x @ (w * 2).T + x @ w.T)


class _Tied:
    """Two names for one Linear (``a`` and ``b``), like torch's tied weights."""

    def __init__(self, layer):
        self.a = self.b = layer

    def __call__(self, x):
        return self.a(x) + self.b(x)


jax.tree_util.register_pytree_with_keys(
    _Tied,
    lambda m: (((jax.tree_util.GetAttrKey("a"), m.a), (jax.tree_util.GetAttrKey("b"), m.b)), None),
    lambda _, children: _Tied.__new__(_Tied)._set(*children))


def _set(self, a, b):
    self.a, self.b = a, b
    return self


_Tied._set = _set


def test_torch_functional_call_ties_weights_too():
    """The rule above is torch's: one name of a tied pair replaces both."""
    lin = torch.nn.Linear(4, 6)
    module = torch.nn.Module()
    module.a = module.b = lin
    module.forward = lambda x: module.a(x) + module.b(x)
    x = torch.ones(2, 4)
    w = torch.ones(6, 4) * 2
    out = torch.func.functional_call(module, {"a.weight": w}, (x,))
    torch.testing.assert_close(out, 2 * (x @ w.T + lin.bias))


@pytest.mark.parametrize("order", [5, 6, 7, 8])
def test_nth_grad_high_orders_match_torch(order):
    with dtypes.x64():
        x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
        theirs = torch_nth_grad(lambda z: torch.sin(torch.exp(z)), order, x)
        ours = func.nth_grad(lambda z: jnp.sin(jnp.exp(z)), order, jnp.asarray(0.3))
        np.testing.assert_allclose(float(ours), theirs.item(), rtol=1e-10)


# ------------------------------------------------------------------ random cases

@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       chunk=st.one_of(st.none(), st.integers(1, 5)),
       seed=st.integers(0, 2 ** 16))
def test_random_jacrev_jacobian_against_torch(shape, chunk, seed):
    x = inputs([tuple(shape)], "float64", seed)[0]
    fn = FUNCTIONS["sinexp"]
    with dtypes.x64():
        assert_parity(lambda t: torch.func.jacrev(fn.torch, chunk_size=chunk)(t),
                      lambda t: func.jacrev(fn.jax, chunk_size=chunk)(t), x, grad=False)
        assert_parity(lambda t: torch.autograd.functional.jacobian(fn.torch, t),
                      lambda t: functional.jacobian(fn.jax, t, strategy="forward-mode"), x,
                      grad=False)
