"""The CPU kernels of message passing (torch2jax_ops/geometric/_core/_cpu_kernel.py).

The sum of gathered rows (``gather_scatter_add``), and the pair of attention message
passing: ``weighted_gather_scatter_add`` (``out[dst[e], h] += w[e, h] * table[src[e], h]``)
and ``edge_dot`` (``out[e, h] = a[ia[e], h] . b[ib[e], h]``), each other's transposes, so
an attention layer's forward and gradient move no ``[E, H, C]`` buffer. The weighted sum
equals the XLA steps to the bit (each product rounded, then added in edge order).

``make`` builds it (``python -m torch2jax_ops build-kernels``); these tests fail, rather
than skip, when it is missing, so a set-up that stops building it is caught. Every value
is checked against the two XLA steps it replaces (gather, scatter-add: the same sums in
the same order, so equal to the bit) and against a plain numpy loop.

The kernel is an XLA:CPU FFI handler: every test here runs on the CPU device, whatever JAX's
default device is (the GPU on a CUDA machine), and the tests that the callers pick it need a
process with one device (``usable``; testkit/devices.py). The lowering for CUDA is checked
here too (no kernel in it); a run on a card checks the values (``gpu`` mark).
"""
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from testkit.devices import cpu, on_cpu, require_one_device
from testkit.scatter_refs import edges as _edges
from testkit.scatter_refs import one_pass as _two_steps
from testkit.scatter_refs import reference_sum as _loop
from torch2jax_ops import dtypes
from torch2jax_ops.geometric._core import _cpu_kernel
from torch2jax_ops.geometric._core._edges import (
    aggregate,
    gather_aggregate,
    gather_dot,
    gather_rows,
    gather_weighted_sum,
)
from torch2jax_ops.geometric.utils._softmax import softmax_aggregate

TARGET = "torch2jax_ops_gather_scatter_add"
WEIGHTED = "torch2jax_ops_weighted_gather_scatter_add"
DOT = "torch2jax_ops_edge_dot"
ROOT = Path(__file__).resolve().parent.parent


def _kernel_calls(f, *args, target=TARGET):
    return f.lower(*args).as_text().count(target)


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """Every test runs on the CPU device (a ``gpu`` test commits its arrays to the GPU)."""
    with on_cpu():
        yield


@pytest.fixture
def one_device():
    """The callers (``gather_aggregate``) pick the kernel in a process with one device."""
    require_one_device("the CPU kernel")


def test_kernel_is_built_and_loads(one_device):
    assert _cpu_kernel.load_error() is None, (
        f"{_cpu_kernel.load_error()} -- `make setup` builds it; this test guards that it does")
    assert _cpu_kernel.library_path().exists() and _cpu_kernel.usable(jnp.float32)
    assert _cpu_kernel.usable(jnp.float64) and not _cpu_kernel.usable(jnp.float16)


def test_switched_off_by_the_environment(monkeypatch, one_device):
    monkeypatch.setenv(_cpu_kernel.ENVIRONMENT, "0")
    assert _cpu_kernel.load_error() == f"{_cpu_kernel.ENVIRONMENT}=0" and not _cpu_kernel.usable(jnp.float32)
    x, ids = jnp.ones((9, 4)), jnp.zeros(50, jnp.int32)
    f = jax.jit(lambda x, s, d: gather_aggregate(x, s, d, 7))
    assert _kernel_calls(f, x, ids, ids) == 0
    monkeypatch.setenv(_cpu_kernel.ENVIRONMENT, "1")
    assert _kernel_calls(jax.jit(lambda x, s, d: gather_aggregate(x, s, d, 7)), x, ids, ids) == 1


@pytest.mark.parametrize("shape", [(9, 3), (9, 2, 3), (9,)])
@pytest.mark.parametrize("edges", [0, 1, 103, 70_000])  # 70k x 64 runs on two threads
def test_equals_the_two_steps_to_the_bit(shape, edges):
    rng = np.random.default_rng(edges)
    if edges == 70_000:
        shape = {(9, 3): (900, 64), (9, 2, 3): (900, 8, 8), (9,): (900,)}[shape]
    table = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    src, dst = _edges(rng, edges, shape[0], 6 * (shape[0] // 9))
    segments = 6 * (shape[0] // 9)
    run = jax.jit(lambda t, s, d: _cpu_kernel.gather_scatter_add(t, s, d, segments))
    assert _kernel_calls(run, table, src, dst) == 1
    got = np.asarray(run(table, src, dst))
    assert got.shape == (segments,) + shape[1:] and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.asarray(jax.jit(_two_steps, static_argnums=3)(
        table, src, dst, segments)))
    if edges <= 103:
        np.testing.assert_allclose(got, _loop(table, src, dst, segments), rtol=1e-5, atol=1e-6)
    else:  # many edges per row: a row sum that the split by rows could cut
        assert np.abs(got).sum(axis=-1).min() > 0


def test_float64_and_int64_ids_past_int32():
    with dtypes.x64(True):
        table = jnp.arange(1.0, 13.0, dtype=jnp.float64).reshape(4, 3)
        # 2**32 + 1 would be 1 after a plain cast to int32; -1 would be row 3 after a wrap
        src = jnp.asarray([0, 2**32 + 1, -1, 3, 1], jnp.int64)
        dst = jnp.asarray([0, 1, 1, 2**32, 1], jnp.int64)
        got = _cpu_kernel.gather_scatter_add(table, src, dst, 3)
        assert got.dtype == jnp.float64
        np.testing.assert_array_equal(np.asarray(got), [[1, 2, 3], [4, 5, 6], [0, 0, 0]])


def test_invalid_ids_add_nothing():
    table = jnp.arange(1, 13, dtype=jnp.float32).reshape(4, 3)
    src = jnp.asarray([0, -1, 3, 4, 1] * 4, jnp.int32)  # -1 must not read row 3
    dst = jnp.asarray([0, 1, -1, 1, 2] * 4, jnp.int32)  # -1 must not reach segment 2
    got = np.asarray(_cpu_kernel.gather_scatter_add(table, src, dst, 3))
    np.testing.assert_array_equal(got, [[4, 8, 12], [0, 0, 0], [16, 20, 24]])


def test_empty_sizes():
    table = jnp.ones((4, 3), jnp.float32)
    ids = jnp.asarray([0, 1], jnp.int32)
    assert np.asarray(_cpu_kernel.gather_scatter_add(table, ids[:0], ids[:0], 5)).tolist() == \
        [[0.0] * 3] * 5
    assert _cpu_kernel.gather_scatter_add(table, ids, ids, 0).shape == (0, 3)
    assert float(_cpu_kernel.gather_scatter_add(table[:0], ids, ids, 2).sum()) == 0.0
    assert _cpu_kernel.gather_scatter_add(jnp.ones((4, 0)), ids, ids, 2).shape == (2, 0)


def test_bad_arguments():
    ids = jnp.zeros(3, jnp.int32)
    with pytest.raises(TypeError, match="float32 or float64, got int32"):
        _cpu_kernel.gather_scatter_add(jnp.ones((4, 2), jnp.int32), ids, ids, 2)
    with pytest.raises(ValueError, match=r"expected table \[M, \*F\], src \[E\], dst \[E\]"):
        _cpu_kernel.gather_scatter_add(jnp.ones((4, 2)), ids, ids[:2], 2)


def test_gradient_jvp_and_hessian_equal_the_two_steps():
    rng = np.random.default_rng(1)
    table = jnp.asarray(rng.standard_normal((9, 2)), jnp.float32)
    src, dst = _edges(rng, 61, 9, 5)
    w = jnp.asarray(rng.standard_normal((5, 2)), jnp.float32)

    def loss(f):
        return lambda t: ((f(t, src, dst, 5) * w) ** 2).sum()

    grad = jax.jit(jax.grad(loss(_cpu_kernel.gather_scatter_add)))
    assert _kernel_calls(grad, table) == 2  # forward, and the transpose (src and dst swapped)
    np.testing.assert_array_equal(np.asarray(grad(table)),
                                  np.asarray(jax.jit(jax.grad(loss(_two_steps)))(table)))
    # d/dt sum((K t * w)^2) = K^T (2 w^2 K t): K^T sends each target's value back to sources
    out = _loop(table, src, dst, 5)
    back = 2 * np.asarray(w, np.float64) ** 2 * out
    expected = np.zeros((9, 2))
    for s, d in zip(np.asarray(src), np.asarray(dst)):
        if 0 <= s < 9 and 0 <= d < 5:
            expected[s] += back[d]
    np.testing.assert_allclose(np.asarray(grad(table)), expected, rtol=1e-5, atol=1e-6)
    tangent = jnp.asarray(rng.standard_normal((9, 2)), jnp.float32)
    _, jvp = jax.jvp(lambda t: _cpu_kernel.gather_scatter_add(t, src, dst, 5), (table,), (tangent,))
    np.testing.assert_allclose(np.asarray(jvp), _loop(tangent, src, dst, 5), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.hessian(loss(_cpu_kernel.gather_scatter_add))(table)),
                               np.asarray(jax.hessian(loss(_two_steps))(table)), rtol=1e-5,
                               atol=1e-6)


def test_vmap_of_tables_is_one_call_and_of_ids_too():
    rng = np.random.default_rng(3)
    tables = jnp.asarray(rng.standard_normal((4, 9, 3)), jnp.float32)
    src, dst = _edges(rng, 40, 9, 6)
    run = jax.jit(jax.vmap(lambda t: _cpu_kernel.gather_scatter_add(t, src, dst, 6)))
    assert _kernel_calls(run, tables) == 1  # the batch is a feature axis
    got = np.asarray(run(tables))
    for b in range(4):
        np.testing.assert_allclose(got[b], _loop(tables[b], src, dst, 6), rtol=1e-5, atol=1e-6)
    srcs = jnp.stack([_edges(np.random.default_rng(b), 40, 9, 6)[0] for b in range(4)])
    both = jax.jit(jax.vmap(lambda t, s: _cpu_kernel.gather_scatter_add(t, s, dst, 6)))
    assert _kernel_calls(both, tables, srcs) == 1  # graphs stacked, ids moved by b rows
    got = np.asarray(both(tables, srcs))
    for b in range(4):  # an invalid id of graph b must not reach graph b + 1
        np.testing.assert_allclose(got[b], _loop(tables[b], srcs[b], dst, 6), rtol=1e-5,
                                   atol=1e-6)
    grads = jax.vmap(jax.grad(lambda t, s: (_cpu_kernel.gather_scatter_add(t, s, dst, 6) ** 2)
                              .sum()))(tables, srcs)
    want = jax.vmap(jax.grad(lambda t, s: (_two_steps(t, s, dst, 6) ** 2).sum()))(tables, srcs)
    np.testing.assert_array_equal(np.asarray(grads), np.asarray(want))


def test_concurrent_calls_do_not_deadlock():
    """Two large sums in one program (XLA may run them at once on the pool's threads, each
    then asking the pool for help) and four Python threads calling it: all finish.

    The arrays are committed to the CPU device: ``jax.default_device`` is per thread, so
    uncommitted ones would run on the default device in the new threads (the GPU on a CUDA
    machine, which sums in its own order)."""
    rng = np.random.default_rng(4)
    a = jax.device_put(rng.standard_normal((5000, 64)).astype(np.float32), cpu())
    src, dst = (jax.device_put(rng.integers(0, 5000, 80_000).astype(np.int32), cpu())
                for _ in range(2))
    both = jax.jit(lambda a, s, d: (_cpu_kernel.gather_scatter_add(a, s, d, 5000),
                                    _cpu_kernel.gather_scatter_add(2 * a, d, s, 5000)))
    want = [np.asarray(v) for v in both(a, src, dst)]
    results, errors = [], []

    def call():
        try:
            for _ in range(5):
                out = both(a, src, dst)
                assert all(v.devices() == {cpu()} for v in out)
                results.append([np.asarray(v) for v in out])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads) and len(results) == 20
    for got in results:  # deterministic: every call gives the same bits
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gather_aggregate_uses_it_and_equals_gather_then_aggregate(reduce, dtype, one_device):
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.standard_normal((9, 4)), dtype)
    src = jnp.asarray(rng.integers(0, 9, 50), jnp.int32)
    dst = jnp.asarray(np.r_[rng.integers(0, 6, 45), [7] * 5], jnp.int32)  # 6 empty, 5 dropped
    run = jax.jit(lambda x, s, d: gather_aggregate(x, s, d, 7, reduce))
    assert _kernel_calls(run, x, src, dst) == 1
    got = np.asarray(run(x, src, dst))
    assert got.dtype == np.dtype(dtype)
    two_steps = jax.jit(lambda x, s, d: aggregate(gather_rows(x, s), d, 7, reduce))
    np.testing.assert_array_equal(got, np.asarray(two_steps(x, src, dst)))
    counts = np.bincount(np.asarray(dst), minlength=8)[:7]
    assert (counts == 0).any() and (got[counts == 0] == 0).all()  # empty targets: 0


def test_gather_aggregate_half_accumulates_in_float32(one_device):
    # 2048 + 1 + 1 + ... in float16 stays 2048 (1 is below half an ulp); float32 counts them
    x = jnp.asarray([[2048.0], [1.0]], jnp.float16)
    src = jnp.asarray([0] + [1] * 40, jnp.int32)
    run = jax.jit(lambda x, s: gather_aggregate(x, s, jnp.zeros(41, jnp.int32), 1))
    assert _kernel_calls(run, x, src) == 1
    got = run(x, src)
    assert got.dtype == jnp.float16 and float(got[0, 0]) == 2088.0


def _cuda_text(f, *args):
    """``f`` lowered for CUDA (no GPU needed)."""
    return jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def test_the_cuda_lowering_runs_the_two_steps_never_the_kernel():
    """The kernel is registered for XLA:CPU only: lowered for a GPU, the primitive (forward
    and gradient) is the gather and scatter-add, and ``gather_aggregate`` does not even pick
    it (``lax.platform_dependent``); lowered for both, only the CPU branch calls it."""
    rng = np.random.default_rng(5)
    table = jnp.asarray(rng.standard_normal((9, 3)), jnp.float32)
    src, dst = _edges(rng, 40, 9, 6)

    def direct(t, s, d):
        return _cpu_kernel.gather_scatter_add(t, s, d, 6)

    def grad(t, s, d):
        return jax.grad(lambda t: (direct(t, s, d) ** 2).sum())(t)

    for f in (direct, grad, lambda t, s, d: gather_aggregate(t, s, d, 6),
              lambda t, s, d: gather_aggregate(t, s, d, 6, "mean")):
        text = _cuda_text(f, table, src, dst)
        assert TARGET not in text and "stablehlo.scatter" in text
    assert _kernel_calls(jax.jit(direct), table, src, dst) == 1  # the CPU's lowering
    both = jax.jit(direct).trace(table, src, dst).lower(lowering_platforms=("cpu", "cuda"))
    assert both.as_text().count(TARGET) == 1


@pytest.mark.gpu
def test_arrays_on_the_gpu_never_reach_the_kernel():
    """Arrays committed to the GPU: the primitive and ``gather_aggregate`` run the two steps
    there (no custom call in the program), on the GPU, and agree with the CPU kernel's sums
    within float32's tolerance (a GPU adds in its own order)."""
    gpu = jax.devices("gpu")[0]
    rng = np.random.default_rng(6)
    host = (np.asarray(rng.standard_normal((900, 16)), np.float32),
            *map(np.asarray, _edges(rng, 20_000, 900, 600)))
    on_gpu = [jax.device_put(a, gpu) for a in host]
    on_host = [jax.device_put(a, cpu()) for a in host]
    rtol, atol = dtypes.tolerance(np.float32)
    for f in (lambda t, s, d: _cpu_kernel.gather_scatter_add(t, s, d, 600),
              lambda t, s, d: gather_aggregate(t, s, d, 600),
              lambda t, s, d: gather_aggregate(t, s, d, 600, "mean")):
        run = jax.jit(f)
        assert _kernel_calls(run, *on_gpu) == 0
        got = run(*on_gpu)
        assert got.devices() == {gpu}
        want = run(*on_host)
        assert want.devices() == {cpu()}
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)
    assert _kernel_calls(jax.jit(lambda t, s, d: _cpu_kernel.gather_scatter_add(t, s, d, 600)),
                         *on_host) == 1


def test_fingerprint_and_build_errors(tmp_path, monkeypatch):
    first = _cpu_kernel.library_path()
    assert first.name.startswith("libtorch2jax_ops_cpu-") and first.suffix == ".so"
    copy = tmp_path / "gather_scatter_add.cc"
    copy.write_text(_cpu_kernel.SOURCE.read_text() + "\n// edited\n")
    monkeypatch.setattr(_cpu_kernel, "SOURCE", copy)
    monkeypatch.setenv(_cpu_kernel.DIR_ENVIRONMENT, str(tmp_path / "kernels"))
    assert _cpu_kernel.library_path() != first  # an edited source is never the old library
    assert _cpu_kernel.library_path().parent == tmp_path / "kernels"
    with pytest.raises(RuntimeError, match=r"compiling gather_scatter_add.cc failed \(false "
                                           r"exited 1\)"):
        _cpu_kernel.build(compiler="false", quiet=True)
    assert not list((tmp_path / "kernels").glob("*.so"))
    assert not list((tmp_path / "kernels").glob("tmp*"))
    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as patch:
        patch.setattr(_cpu_kernel.tempfile, "TemporaryDirectory", read_only)
        with pytest.raises(RuntimeError, match=f"{tmp_path / 'kernels'}, which is not "
                                               f"writable \\(Permission denied\\): name a "
                                               f"writable folder with "
                                               f"{_cpu_kernel.DIR_ENVIRONMENT}"):
            _cpu_kernel.build(compiler="false", quiet=True)
    monkeypatch.setenv("CXX", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="needs a C\\+\\+17 compiler \\(no c\\+\\+ or g\\+\\+ on "
                                           "PATH\\)"):
        _cpu_kernel.build(quiet=True)
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-c++"))
    with pytest.raises(RuntimeError, match="CXX='.*no-such-c\\+\\+' is not found"):
        _cpu_kernel.build(quiet=True)


def test_the_kernel_lives_in_the_per_user_cache(monkeypatch, tmp_path):
    """Not in the package folder (read-only in many installs): $XDG_CACHE_HOME, else ~/.cache,
    overridden by $TORCH2JAX_OPS_KERNEL_DIR."""
    monkeypatch.delenv(_cpu_kernel.DIR_ENVIRONMENT, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _cpu_kernel.kernel_dir() == tmp_path / "xdg" / "torch2jax_ops" / "kernels"
    assert _cpu_kernel.library_path().parent == _cpu_kernel.kernel_dir()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _cpu_kernel.kernel_dir() == tmp_path / "home" / ".cache" / "torch2jax_ops" / "kernels"
    monkeypatch.setenv(_cpu_kernel.DIR_ENVIRONMENT, str(tmp_path / "mine"))
    assert _cpu_kernel.library_path().parent == tmp_path / "mine"
    assert Path(_cpu_kernel.__file__).parent not in _cpu_kernel.library_path().parents


#: a process that sums gathered rows and reports whether the kernel ran, and why not
_SUM = """
import sys, warnings
import jax, jax.numpy as jnp, numpy as np
warnings.simplefilter("always")
jax.config.update("jax_default_device", jax.devices("cpu")[0])  # the GPU on a CUDA machine
from torch2jax_ops.geometric._core._edges import gather_aggregate
from torch2jax_ops.geometric._core import _cpu_kernel
x = jnp.asarray(np.arange(12.0, dtype=np.float32).reshape(6, 2))
src, dst = jnp.asarray([0, 5, 2, 2], jnp.int32), jnp.asarray([1, 1, 0, 3], jnp.int32)
f = jax.jit(lambda x: gather_aggregate(x, src, dst, 4))
calls = f.lower(x).as_text().count("torch2jax_ops_gather_scatter_add")
print("calls", calls)
print("sum", np.asarray(f(x)).ravel().tolist())
print("error", _cpu_kernel.load_error())
"""
_EXPECTED_SUM = [4.0, 5.0, 10.0, 12.0, 0.0, 0.0, 4.0, 5.0]  # rows 2+2, 0+5, -, 2


def _python(env, code, cwd):
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_first_use_builds_the_kernel_into_an_empty_cache(tmp_path, one_device):
    env = dict(os.environ, **{_cpu_kernel.DIR_ENVIRONMENT: str(tmp_path / "cache")})
    env.pop(_cpu_kernel.ENVIRONMENT, None)
    env.pop(_cpu_kernel.BUILD_ENVIRONMENT, None)
    done = _python(env, _SUM, ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "calls 1" in done.stdout and "error None" in done.stdout, done.stdout + done.stderr
    assert f"sum {_EXPECTED_SUM}" in done.stdout
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [_cpu_kernel.library_path().name]
    # switched off: the missing library is reported, nothing is built
    env[_cpu_kernel.DIR_ENVIRONMENT] = str(tmp_path / "other")
    env[_cpu_kernel.BUILD_ENVIRONMENT] = "0"
    done = _python(env, _SUM, ROOT)
    assert "calls 0" in done.stdout and f"{_cpu_kernel.BUILD_ENVIRONMENT}=0" in done.stdout
    assert f"sum {_EXPECTED_SUM}" in done.stdout and not (tmp_path / "other").exists()


def _no_compiler_env(tmp_path, cxx):
    """PATH without a C++ compiler (only a folder of our own), CXX unset or missing."""
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", _cpu_kernel.ENVIRONMENT,
                                                            _cpu_kernel.BUILD_ENVIRONMENT)}
    bare = tmp_path / "bin"
    bare.mkdir(exist_ok=True)
    env.update(PATH=str(bare), **{_cpu_kernel.DIR_ENVIRONMENT: str(tmp_path / "cache")})
    if cxx:
        env["CXX"] = str(tmp_path / "no-such-c++")
    return env


@pytest.mark.parametrize("cxx", [False, True], ids=["no-compiler-on-path", "CXX-missing"])
def test_setup_without_a_compiler_warns_and_falls_back(tmp_path, cxx):
    """`make kernels` (the set-up step of `make test` / `make parity`) succeeds with a warning;
    the package imports and sums with its XLA forms, warning once why."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on this machine")
    env = _no_compiler_env(tmp_path, cxx)
    venv = Path(sys.executable).parent.parent
    stamp = venv / ".installed-2.13.0"  # the Makefile's set-up stamp: not remade here (-o)
    done = subprocess.run([make, "-s", f"VENV={venv}", "TORCH=2.13.0", "-o", str(stamp),
                           "kernels"], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning:" in done.stderr and "C++17 compiler" in done.stderr, done.stderr
    assert "XLA forms" in done.stderr and not list((tmp_path / "cache").glob("*.so"))
    # without --optional the command still fails (the error, not a warning)
    done = subprocess.run([sys.executable, "-m", "torch2jax_ops", "build-kernels"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and "C++17 compiler" in done.stderr
    # the package imports and sums with the XLA forms, warning once why
    done = _python(env, _SUM, ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "calls 0" in done.stdout and f"sum {_EXPECTED_SUM}" in done.stdout, done.stdout
    assert "could not be built" in done.stdout and "C++17 compiler" in done.stdout
    assert done.stderr.count("RuntimeWarning: torch2jax_ops: the CPU kernel could not be "
                             "built") == 1, done.stderr[-3000:]


def test_build_kernels_command_is_a_no_op_when_built():
    done = subprocess.run([sys.executable, "-m", "torch2jax_ops", "build-kernels"],
                          capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"CPU kernel: {_cpu_kernel.library_path()}"  # no compiler line


def _rgcn_reference(x, src, dst, rel, weight, n_dst, aggr):
    """PyG's RGCNConv relational part in numpy float64: per relation, ``aggr`` of the
    source rows at each target, times that relation's weight. An edge whose source,
    target or relation is out of range reaches nothing."""
    r, f_in, f_out = weight.shape
    out = np.zeros((n_dst, f_out))
    for k in range(r):
        h, count = np.zeros((n_dst, f_in)), np.zeros(n_dst)
        for s, d, t in zip(src, dst, rel):
            if t == k and 0 <= s < len(x) and 0 <= d < n_dst:
                h[d] += x[s]
                count[d] += 1
        if aggr == "mean":
            h /= np.maximum(count, 1)[:, None]
        out += h @ weight[k]
    return out


@pytest.mark.parametrize("aggr", ["mean", "add"])
@pytest.mark.parametrize("blocks", [None, 2])
def test_rgcn_aggregates_with_the_kernel_then_multiplies(aggr, blocks, one_device,
                                                         monkeypatch):
    """RGCNConv's ``sum``/``mean`` on the CPU: the kernel aggregates per (target, relation)
    and one matmul applies the relation weights (no ``[E, F]`` buffer). Its value and
    gradient equal the projected form it replaces (``TORCH2JAX_OPS_NATIVE=0``: every node
    times every weight, then gathered per edge) and a numpy loop, with empty (target,
    relation) groups and edges dropped for an out-of-range source, target or relation."""
    from torch2jax_ops.geometric.nn.conv import RGCNConv

    rng = np.random.default_rng(7)
    n, r, f_in, f_out, e = 7, 3, 4, 6, 40
    x = jnp.asarray(rng.standard_normal((n, f_in)), jnp.float32)
    src = np.r_[rng.integers(0, n, e), [n, 0, 1]]  # the last three edges are dropped:
    dst = np.r_[rng.integers(0, n - 1, e), [0, n, 2]]  # source n, target n, relation r
    rel = np.r_[rng.integers(0, r, e), [0, 1, r]]
    edge_index = jnp.asarray(np.stack([src, dst]), jnp.int32)
    edge_type = jnp.asarray(rel, jnp.int32)
    if blocks is None:
        weight = rng.standard_normal((r, f_in, f_out))
        dense = weight
    else:
        weight = rng.standard_normal((r, blocks, f_in // blocks, f_out // blocks))
        dense = np.zeros((r, f_in, f_out))
        for k in range(r):
            for b in range(blocks):
                dense[k, b * 2:(b + 1) * 2, b * 3:(b + 1) * 3] = weight[k, b]
    conv = RGCNConv(jnp.asarray(weight, jnp.float32), num_relations=r, num_blocks=blocks,
                    in_channels_l=f_in, out_channels=f_out, aggr=aggr)

    def loss(conv, x):
        return jnp.sum(jnp.sin(conv(x, edge_index, edge_type)))

    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    assert _kernel_calls(jax.jit(lambda x: conv(x, edge_index, edge_type)), x) == 1
    (value, (g_conv, g_x)) = step(conv, x)
    out = np.asarray(jax.jit(lambda x: conv(x, edge_index, edge_type))(x))
    want = _rgcn_reference(np.asarray(x, np.float64), src, dst, rel, dense, n, aggr)
    assert (want[n - 1] == 0).all()  # node n - 1 receives no edge
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)

    monkeypatch.setenv(_cpu_kernel.ENVIRONMENT, "0")  # the projected form
    projected = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    assert _kernel_calls(jax.jit(lambda x: conv(x, edge_index, edge_type)), x) == 0
    (value_p, (g_conv_p, g_x_p)) = projected(conv, x)
    rtol, atol = dtypes.tolerance(np.float32)  # other orders of the float32 sums
    np.testing.assert_allclose(value, value_p, rtol=rtol, atol=atol)
    np.testing.assert_allclose(g_x, g_x_p, rtol=rtol, atol=atol)
    np.testing.assert_allclose(g_conv.weight, g_conv_p.weight, rtol=rtol, atol=atol)


def test_rgcn_cuda_lowering_keeps_the_projected_form():
    """On other platforms RGCNConv keeps the projected form (``lax.platform_dependent``):
    no kernel in the CUDA lowering, one in the CPU branch of a two-platform lowering."""
    from torch2jax_ops.geometric.nn.conv import RGCNConv

    rng = np.random.default_rng(8)
    conv = RGCNConv(jnp.asarray(rng.standard_normal((2, 3, 5)), jnp.float32),
                    num_relations=2, in_channels_l=3, out_channels=5)
    x = jnp.asarray(rng.standard_normal((6, 3)), jnp.float32)
    edge_index = jnp.asarray(rng.integers(0, 6, (2, 20)), jnp.int32)
    edge_type = jnp.asarray(rng.integers(0, 2, 20), jnp.int32)
    f = lambda x, ei, et: conv(x, ei, et)  # noqa: E731
    assert TARGET not in _cuda_text(f, x, edge_index, edge_type)
    if _cpu_kernel.usable(np.float32):
        both = jax.jit(f).trace(x, edge_index, edge_type).lower(
            lowering_platforms=("cpu", "cuda"))
        assert both.as_text().count(TARGET) == 1


# -- the attention pair ------------------------------------------------------------------

def _loop_weighted(table, weight, src, dst, segments):
    table, weight = np.asarray(table, np.float64), np.asarray(weight, np.float64)
    out = np.zeros((segments,) + table.shape[1:])
    for e, (s, d) in enumerate(zip(np.asarray(src), np.asarray(dst))):
        if 0 <= s < table.shape[0] and 0 <= d < segments:
            out[d] += weight[e][..., None] * table[s]
    return out


def _loop_dot(a, b, ia, ib):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out = np.zeros((len(ia),) + a.shape[1:-1])
    for e, (i, j) in enumerate(zip(np.asarray(ia), np.asarray(ib))):
        if 0 <= i < a.shape[0] and 0 <= j < b.shape[0]:
            out[e] = (a[i] * b[j]).sum(-1)
    return out


def _steps(table, weight, src, dst, segments):
    return _cpu_kernel._weighted_reference(table, weight, src, dst, num_segments=segments)


@pytest.mark.parametrize("heads", [(), (3,), (2, 2)])
@pytest.mark.parametrize("edges", [0, 1, 97, 40_000])  # 40k x 4 x 32 runs on two threads
def test_weighted_sum_equals_the_steps_to_the_bit_and_a_loop(heads, edges, one_device):
    rng = np.random.default_rng(edges + len(heads))
    rows, segments, channels = (300, 200, 32) if edges == 40_000 else (9, 6, 5)
    table = jnp.asarray(rng.standard_normal((rows, *heads, channels)), jnp.float32)
    weight = jnp.asarray(rng.standard_normal((edges, *heads)), jnp.float32)
    src, dst = _edges(rng, edges, rows, segments)
    run = jax.jit(lambda t, w, s, d: _cpu_kernel.weighted_gather_scatter_add(t, w, s, d,
                                                                             segments))
    assert _kernel_calls(run, table, weight, src, dst, target=WEIGHTED) == 1
    got = np.asarray(run(table, weight, src, dst))
    assert got.shape == (segments, *heads, channels) and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.asarray(jax.jit(_steps, static_argnums=4)(
        table, weight, src, dst, segments)))
    np.testing.assert_allclose(got, _loop_weighted(table, weight, src, dst, segments),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("heads", [(), (3,)])
@pytest.mark.parametrize("edges", [0, 97, 40_000])
def test_edge_dot_equals_a_loop(heads, edges, one_device):
    rng = np.random.default_rng(edges)
    a = jnp.asarray(rng.standard_normal((300, *heads, 32)), jnp.float32)
    b = jnp.asarray(rng.standard_normal((200, *heads, 32)), jnp.float32)
    ia, ib = _edges(rng, edges, 300, 200)
    run = jax.jit(_cpu_kernel.edge_dot)
    assert _kernel_calls(run, a, b, ia, ib, target=DOT) == 1
    got = np.asarray(run(a, b, ia, ib))
    assert got.shape == (edges, *heads) and got.dtype == np.float32
    want = _loop_dot(a, b, ia, ib)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    if edges:  # an id out of range: exactly 0, never a wrapped row's dot
        bad = ~((np.asarray(ia) >= 0) & (np.asarray(ia) < 300) & (np.asarray(ib) >= 0)
                & (np.asarray(ib) < 200))
        assert bad.any() and (got[bad] == 0).all()


def test_pair_float64_and_int64_ids_past_int32(one_device):
    with dtypes.x64(True):
        table = jnp.arange(1.0, 13.0, dtype=jnp.float64).reshape(4, 1, 3)
        weight = jnp.asarray([[2.0], [3.0], [5.0], [7.0], [11.0]], jnp.float64)
        # 2**32 + 1 would be 1 after a plain cast to int32; -1 would be row 3 after a wrap
        src = jnp.asarray([0, 2**32 + 1, -1, 3, 1], jnp.int64)
        dst = jnp.asarray([0, 1, 1, 2**32, 1], jnp.int64)
        got = _cpu_kernel.weighted_gather_scatter_add(table, weight, src, dst, 3)
        assert got.dtype == jnp.float64
        np.testing.assert_array_equal(np.asarray(got)[:, 0],
                                      [[2, 4, 6], [44, 55, 66], [0, 0, 0]])
        dots = _cpu_kernel.edge_dot(table, table, src, dst)
        np.testing.assert_array_equal(np.asarray(dots)[:, 0], [14, 0, 0, 0, 77])


def test_pair_empty_sizes_and_bad_arguments(one_device):
    table, ids = jnp.ones((4, 2, 3), jnp.float32), jnp.asarray([0, 1], jnp.int32)
    weight = jnp.ones((2, 2), jnp.float32)
    assert float(_cpu_kernel.weighted_gather_scatter_add(table, weight[:0], ids[:0], ids[:0],
                                                         5).sum()) == 0.0
    assert _cpu_kernel.weighted_gather_scatter_add(table, weight, ids, ids, 0).shape == (0, 2, 3)
    assert _cpu_kernel.edge_dot(table, table, ids[:0], ids[:0]).shape == (0, 2)
    with pytest.raises(TypeError, match="both float32 or both float64"):
        _cpu_kernel.weighted_gather_scatter_add(table, weight.astype(jnp.float16), ids, ids, 2)
    with pytest.raises(ValueError, match=r"expected table \[M, \*H, C\], weight \[E, \*H\]"):
        _cpu_kernel.weighted_gather_scatter_add(table, jnp.ones((2, 3)), ids, ids, 2)
    with pytest.raises(ValueError, match=r"expected a \[Ma, \*H, C\], b \[Mb, \*H, C\]"):
        _cpu_kernel.edge_dot(table, jnp.ones((4, 3, 3)), ids, ids)


def test_gradients_are_the_pair_and_equal_the_steps(one_device):
    """d/d table of the weighted sum is the weighted sum with the ids swapped, d/d weight is
    the edge dot (and the reverse for the edge dot): the gradient calls only the kernels."""
    rng = np.random.default_rng(1)
    table = jnp.asarray(rng.standard_normal((9, 3, 4)), jnp.float32)
    weight = jnp.asarray(rng.standard_normal((61, 3)), jnp.float32)
    src, dst = _edges(rng, 61, 9, 5)
    probe = jnp.asarray(rng.standard_normal((5, 3, 4)), jnp.float32)

    def loss(f):
        return lambda t, w: jnp.sum(jnp.sin(f(t, w, src, dst, 5)) * probe)

    kernel = lambda t, w, s, d, n: _cpu_kernel.weighted_gather_scatter_add(t, w, s, d, n)  # noqa: E731
    grad = jax.jit(jax.grad(loss(kernel), argnums=(0, 1)))
    text = grad.lower(table, weight).as_text()
    assert text.count(WEIGHTED) == 2 and text.count(DOT) == 1
    assert "stablehlo.scatter" not in text and "stablehlo.gather" not in text
    got = grad(table, weight)
    want = jax.jit(jax.grad(loss(_steps), argnums=(0, 1)))(table, weight)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    # independent: d/dw[e, h] sum(probe * K) = <table[src e, h], probe[dst e, h]> (no sin)
    linear = jax.grad(lambda w: jnp.sum(kernel(table, w, src, dst, 5) * probe))(weight)
    np.testing.assert_allclose(np.asarray(linear), _loop_dot(table, probe, src, dst),
                               rtol=1e-5, atol=1e-5)
    # the edge dot's gradient w.r.t. a is the weighted sum of b's rows at ia
    a, b = table, jnp.asarray(rng.standard_normal((5, 3, 4)), jnp.float32)
    g = jnp.asarray(rng.standard_normal((61, 3)), jnp.float32)
    ga = jax.grad(lambda a: jnp.sum(_cpu_kernel.edge_dot(a, b, src, dst) * g))(a)
    np.testing.assert_allclose(np.asarray(ga), _loop_weighted(b, g, dst, src, 9), rtol=1e-5,
                               atol=1e-5)
    # forward mode and second order
    tangents = (jnp.ones_like(table), jnp.ones_like(weight))
    _, jvp = jax.jvp(lambda t, w: kernel(t, w, src, dst, 5), (table, weight), tangents)
    _, jvp_steps = jax.jvp(lambda t, w: _steps(t, w, src, dst, 5), (table, weight), tangents)
    np.testing.assert_allclose(np.asarray(jvp), np.asarray(jvp_steps), rtol=1e-5, atol=1e-5)
    hess = jax.hessian(lambda w: loss(kernel)(table, w))(weight[:, :1].repeat(3, 1))
    hess_steps = jax.hessian(lambda w: loss(_steps)(table, w))(weight[:, :1].repeat(3, 1))
    np.testing.assert_allclose(np.asarray(hess), np.asarray(hess_steps), rtol=1e-4, atol=1e-4)


def test_vmap_runs_the_steps_with_the_same_values(one_device):
    rng = np.random.default_rng(3)
    tables = jnp.asarray(rng.standard_normal((4, 9, 2, 3)), jnp.float32)
    weights = jnp.asarray(rng.standard_normal((4, 40, 2)), jnp.float32)
    src, dst = _edges(rng, 40, 9, 6)
    got = jax.vmap(lambda t, w: _cpu_kernel.weighted_gather_scatter_add(t, w, src, dst, 6))(
        tables, weights)
    dots = jax.vmap(lambda t: _cpu_kernel.edge_dot(t, t, src, src))(tables)
    for k in range(4):
        np.testing.assert_allclose(np.asarray(got[k]),
                                   _loop_weighted(tables[k], weights[k], src, dst, 6),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(dots[k]), _loop_dot(tables[k], tables[k], src, src),
                                   rtol=1e-5, atol=1e-5)


def test_callers_pick_the_pair_on_the_cpu_only(one_device, monkeypatch):
    """``gather_weighted_sum`` and ``gather_dot`` call the kernels on the CPU, the XLA steps
    in a CUDA lowering and with ``TORCH2JAX_OPS_NATIVE=0``, with the same values;
    ``gather_dot`` of float16 rows accumulates in float32 and rounds once."""
    rng = np.random.default_rng(4)
    table = jnp.asarray(rng.standard_normal((9, 2, 3)), jnp.float32)
    weight = jnp.asarray(rng.standard_normal((40, 2)), jnp.float32)
    src, dst = _edges(rng, 40, 9, 6)
    ws = jax.jit(lambda t, w: gather_weighted_sum(t, w, src, dst, 6))
    dot = jax.jit(lambda t: gather_dot(t, t[:6], src, dst))
    assert _kernel_calls(ws, table, weight, target=WEIGHTED) == 1
    assert _kernel_calls(dot, table, target=DOT) == 1
    for f, args in ((ws, (table, weight)), (dot, (table,))):
        cuda = f.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
        assert WEIGHTED not in cuda and DOT not in cuda
    got_ws, got_dot = ws(table, weight), dot(table)
    np.testing.assert_allclose(np.asarray(got_dot),
                               _loop_dot(table, table[:6], src, dst), rtol=1e-5, atol=1e-5)
    monkeypatch.setenv(_cpu_kernel.ENVIRONMENT, "0")
    ws_off = jax.jit(lambda t, w: gather_weighted_sum(t, w, src, dst, 6))
    dot_off = jax.jit(lambda t: gather_dot(t, t[:6], src, dst))
    assert _kernel_calls(ws_off, table, weight, target=WEIGHTED) == 0
    np.testing.assert_array_equal(np.asarray(ws_off(table, weight)), np.asarray(got_ws))
    np.testing.assert_allclose(np.asarray(dot_off(table)), np.asarray(got_dot), rtol=1e-6,
                               atol=1e-6)
    monkeypatch.setenv(_cpu_kernel.ENVIRONMENT, "1")
    # float16 rows: 2048 + 1 + 1 is 2048 added in float16 (1 is half an ulp, ties to
    # even), 2050 in float32, which float16 holds
    wide = jnp.asarray([[[2048.0, 1.0, 1.0]]], jnp.float16)
    ids = jnp.asarray([0], jnp.int32)
    got = gather_dot(wide, jnp.ones_like(wide), ids, ids)
    assert got.dtype == jnp.float16 and float(got[0, 0]) == 2050.0


@pytest.mark.parametrize("heads", [(4,), (1,)])
def test_softmax_aggregate_from_source_rows_equals_gathered_messages(heads, one_device):
    """``softmax_aggregate(..., src=)`` (the kernel pair on the CPU) against the gathered
    messages, with dropped targets, out-of-range sources, node-wise loops and dropout
    weights; value and gradients."""
    rng = np.random.default_rng(5)
    n, e, c = 7, 50, 6
    table = jnp.asarray(rng.standard_normal((n, *heads, c)), jnp.float32)
    scores = jnp.asarray(rng.standard_normal((e, *heads)), jnp.float32)
    weights = jnp.asarray(rng.integers(0, 2, (e, *heads)) * 2.0, jnp.float32)
    src = jnp.asarray(np.r_[rng.integers(0, n, e - 2), [n, -1]], jnp.int32)
    dst = jnp.asarray(np.r_[rng.integers(0, n - 1, e - 4), [n, n, 2, 3]], jnp.int32)
    loops = jnp.asarray(rng.standard_normal((3, *heads)), jnp.float32)

    def rows(t, s, w):
        return softmax_aggregate(s, t, dst, n, loops, t[:3], w, src=src)

    def gathered(t, s, w):
        return softmax_aggregate(s, gather_rows(t, src), dst, n, loops, t[:3], w)

    run = jax.jit(jax.value_and_grad(lambda t, s: jnp.sum(jnp.cos(rows(t, s, weights))),
                                     argnums=(0, 1)))
    assert _kernel_calls(run, table, scores, target=WEIGHTED) == 2
    assert _kernel_calls(run, table, scores, target=DOT) == 1
    value, grads = run(table, scores)
    value_g, grads_g = jax.jit(jax.value_and_grad(
        lambda t, s: jnp.sum(jnp.cos(gathered(t, s, weights))), argnums=(0, 1)))(table, scores)
    np.testing.assert_allclose(float(value), float(value_g), rtol=1e-6)
    for g, w in zip(grads, grads_g):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    out = np.asarray(jax.jit(rows)(table, scores, weights))
    assert (out[n - 1] == 0).all()  # node n - 1 gets no edge and no loop
