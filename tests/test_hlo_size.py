"""No compile time that grows with the data: every scatter/segment op compiles to the
same program at E = 10^4 and E = 10^6 (issue 22).

XLA's GPU compiler once took 40 s at E = 1M (minutes at 10M) to constant-fold an
E-sized computation built from an iota (``jnp.repeat`` of the positions in the
arg-reductions). Two checks per op, both without torch and without a GPU:

* the compiled HLO (``jax.jit(f).lower(...).compile().as_text()``) has the same
  size at both E once the digits of the shapes are set aside, and its largest
  literal constant does not grow with E;
* no E-sized value in the traced program is computed from constants alone
  (what any backend may fold at compile time; iota, broadcast, reshape and
  convert alone are left as they are by XLA and do not count).
"""
from __future__ import annotations

import math
import re
import time

import jax
import jax.numpy as jnp
import pytest

import torch2jax_ops as t2j
from torch2jax_ops.torch_scatter import _extreme

F = 64          # features
RATIO = 20      # E / N
#: at both sizes the CPU arg pass runs in blocks (the same program)
SMALL, LARGE = 2 * 10**4, 10**6
assert SMALL * F > _extreme.BLOCK_ELEMENTS


def _csr(e):
    return jax.ShapeDtypeStruct((e // RATIO + 1,), jnp.int32)


def _index(e):
    return jax.ShapeDtypeStruct((e,), jnp.int32)


def _scatter(reduce):
    return lambda s, i: t2j.scatter(s, i, 0, dim_size=i.shape[0] // RATIO, reduce=reduce)


def _with_arg(name):
    return lambda s, i: getattr(t2j, name)(s, i, 0, dim_size=i.shape[0] // RATIO)


def _grad(fn):
    def loss(s, i):
        out = fn(s, i)
        out = out[0] if isinstance(out, tuple) else out
        return jnp.sum(out.astype(jnp.float32) ** 2)
    return jax.value_and_grad(loss)


def _n(i):
    return i.shape[0] // RATIO


#: name -> (function of (src [E, F], second), second argument's spec from E)
OPS = {
    "scatter sum": (_scatter("sum"), _index),
    "scatter sum deterministic": (
        lambda s, i: t2j.scatter(s, i, 0, dim_size=_n(i), deterministic=True), _index),
    "scatter mean": (_scatter("mean"), _index),
    "scatter mul": (_scatter("mul"), _index),
    "scatter min": (_scatter("min"), _index),
    "scatter max": (_scatter("max"), _index),
    "scatter_max": (_with_arg("scatter_max"), _index),
    "scatter_min": (_with_arg("scatter_min"), _index),
    "scatter_max 2-D index": (
        lambda s, i: t2j.scatter_max(s, jnp.broadcast_to(i[:, None], s.shape), 0,
                                     dim_size=_n(i)), _index),
    "segment_csr sum": (lambda s, p: t2j.segment_csr(s, p), _csr),
    "segment_csr mean": (lambda s, p: t2j.segment_csr(s, p, reduce="mean"), _csr),
    "segment_csr max": (lambda s, p: t2j.segment_csr(s, p, reduce="max"), _csr),
    "segment_max_csr": (lambda s, p: t2j.segment_max_csr(s, p), _csr),
    "segment_min_csr": (lambda s, p: t2j.segment_min_csr(s, p), _csr),
    "segment_coo sum": (lambda s, i: t2j.segment_coo(s, i, dim_size=_n(i)), _index),
    "segment_coo mean": (lambda s, i: t2j.segment_coo(s, i, dim_size=_n(i), reduce="mean"),
                         _index),
    "segment_coo min": (lambda s, i: t2j.segment_coo(s, i, dim_size=_n(i), reduce="min"),
                        _index),
    "segment_max_coo": (lambda s, i: t2j.segment_max_coo(s, i, dim_size=_n(i)), _index),
    "scatter_softmax": (lambda s, i: t2j.scatter_softmax(s, i, 0, dim_size=_n(i)), _index),
    "scatter_log_softmax": (lambda s, i: t2j.scatter_log_softmax(s, i, 0, dim_size=_n(i)),
                            _index),
    "scatter_logsumexp": (lambda s, i: t2j.scatter_logsumexp(s, i, 0, dim_size=_n(i)), _index),
    "scatter_std": (lambda s, i: t2j.scatter_std(s, i, 0, dim_size=_n(i)), _index),
    "grad scatter max": (_grad(_scatter("max")), _index),
    "grad scatter_max": (_grad(_with_arg("scatter_max")), _index),
    "grad segment_csr max": (_grad(lambda s, p: t2j.segment_csr(s, p, reduce="max")), _csr),
    "grad scatter_softmax": (_grad(lambda s, i: t2j.scatter_softmax(s, i, 0, dim_size=_n(i))),
                             _index),
    "grad scatter sum deterministic": (
        _grad(lambda s, i: t2j.scatter(s, i, 0, dim_size=_n(i), deterministic=True)), _index),
}

# ------------------------------------------------------------------------- HLO parsing

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.+?)\s+([a-z][\w\-]*)\(")
_ARRAY_TYPE = re.compile(r"[a-z]+[0-9]*\[([0-9,]*)\]")


def _elements(type_text: str) -> int:
    """Elements of an HLO type (``f32[1000,64]{1,0}``; a tuple: its largest member)."""
    sizes = [math.prod(int(d) for d in m.group(1).split(",") if d)
             for m in _ARRAY_TYPE.finditer(re.sub(r"\{[\d,]*\}", "", type_text))]
    return max(sizes, default=0)


def largest_constant(hlo: str) -> int:
    """Element count of the largest ``constant`` instruction in HLO text."""
    largest = 0
    for line in hlo.splitlines():
        m = _INSTRUCTION.match(line)
        if m and m.group(2) == "constant":
            largest = max(largest, _elements(m.group(1)))
    return largest


def structure_size(hlo: str) -> int:
    """Length of the HLO text with every number written as one digit: what is left
    grows only if the program itself does (more instructions, literal arrays)."""
    return len(re.sub(r"\d+", "0", hlo))


def compiled(fn, e: int, second) -> str:
    return jax.jit(fn).lower(jax.ShapeDtypeStruct((e, F), jnp.float32), second(e)).compile() \
        .as_text()


# ---------------------------------------------------------------- constant expressions

#: primitives XLA leaves as they are on constants (no literal is materialised)
_CHEAP = {"iota", "broadcast_in_dim", "reshape", "convert_element_type", "squeeze",
          "expand_dims"}


def _sub_jaxprs(eqn):
    for value in eqn.params.values():
        for v in (value if isinstance(value, (tuple, list)) else (value,)):
            if isinstance(v, jax.extend.core.ClosedJaxpr):
                yield v.jaxpr
            elif isinstance(v, jax.extend.core.Jaxpr):
                yield v


def _scan_consts(params) -> int:
    """How many of a scan's operands are its constants: ``num_consts`` up to JAX 0.10; from
    0.11 on, the first group of its input structure ``ft_in`` (consts, carry, slices)."""
    if "num_consts" in params:
        return params["num_consts"]
    return len(list(params["ft_in"].elts[0].vals))


def _walk(jaxpr, constant_inputs, found):
    constant = {v for v, c in zip(jaxpr.invars, constant_inputs) if c} | set(jaxpr.constvars)

    def is_constant(atom):
        return isinstance(atom, jax.extend.core.Literal) or atom in constant

    for eqn in jaxpr.eqns:
        flags = [is_constant(a) for a in eqn.invars]
        for sub in _sub_jaxprs(eqn):
            n = len(sub.invars)
            if eqn.primitive.name == "while":  # cond/body: their consts, then the carry
                cond_n, body_n = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
                if sub is eqn.params["cond_jaxpr"].jaxpr:
                    sub_flags = flags[:cond_n] + [False] * (n - cond_n)
                else:
                    sub_flags = flags[cond_n:cond_n + body_n] + [False] * (n - body_n)
            elif eqn.primitive.name == "scan":  # consts, then carry and slices
                consts = _scan_consts(eqn.params)
                sub_flags = flags[:consts] + [False] * (n - consts)
            else:  # operands align with the sub-jaxpr's trailing inputs
                sub_flags = flags[-n:] if n <= len(flags) else [False] * n
            _walk(sub, sub_flags, found)
        if all(flags):  # no operand, or constants only
            for out in eqn.outvars:
                constant.add(out)
                if eqn.primitive.name not in _CHEAP and hasattr(out.aval, "shape"):
                    found.append((math.prod(out.aval.shape), eqn.primitive.name))


def largest_constant_expression(fn, *args) -> tuple[int, str]:
    """(elements, primitive) of the largest value computed from constants alone."""
    closed = jax.make_jaxpr(fn)(*args)
    found: list = []
    _walk(closed.jaxpr, [False] * len(closed.jaxpr.invars), found)
    return max(found, default=(0, "-"))


# ------------------------------------------------------------------------------ tests

def test_the_checks_catch_an_E_sized_constant():
    """The pattern issue 22 found (an E-sized scan over an iota, ``jnp.repeat``), and a
    folded literal as XLA prints it (elided: only its type tells its size)."""
    def bad(s, i):
        positions = jnp.repeat(jnp.arange(s.shape[0]), 1, total_repeat_length=s.shape[0])
        return s + positions[:, None]

    spec = jax.ShapeDtypeStruct((SMALL, F), jnp.float32)
    size, _ = largest_constant_expression(bad, spec, _index(SMALL))
    assert size >= SMALL
    folded = ("ENTRY %main (p: f32[10]) -> s32[1000000] {\n"
              "  %constant.7 = s32[1000000]{0} constant({...})\n"
              "  ROOT %c = (s32[1000000]{0}, f32[]) constant(({...}, 1))\n}")
    assert largest_constant(folded) == 1_000_000
    assert largest_constant("%constant.1 = f32[] constant(-inf)") == 1


#: the fast tier compiles these; every op (about 5 s each) runs in the slow tier
FAST = {"scatter max", "scatter_max", "segment_max_csr", "grad scatter_max", "scatter_softmax",
        "scatter sum deterministic"}


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in OPS])
def test_program_does_not_grow_with_E(name):
    fn, second = OPS[name]
    start = time.perf_counter()
    small, large = compiled(fn, SMALL, second), compiled(fn, LARGE, second)
    seconds = time.perf_counter() - start
    # XLA:CPU splits a large reduction into a log-depth tree of reduce-windows and adds
    # partitioning hints to large loops: O(log E) more text, never O(E)
    assert structure_size(large) <= 1.25 * structure_size(small), (
        f"{name}: the compiled program grows with E ({structure_size(small)} -> "
        f"{structure_size(large)} characters)")
    big = largest_constant(large)
    assert big <= max(largest_constant(small), 1024), (
        f"{name}: a constant of {big} elements at E={LARGE:,}")
    for e in (SMALL, LARGE):
        size, primitive = largest_constant_expression(
            fn, jax.ShapeDtypeStruct((e, F), jnp.float32), second(e))
        assert size <= 1024, (
            f"{name}: an E-sized value ({size} elements, {primitive}) computed from "
            f"constants alone at E={e:,}: a compiler may fold it")
    assert seconds < 60, f"{name}: {seconds:.1f} s to compile"
