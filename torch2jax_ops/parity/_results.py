"""Parity results kept between runs: a case whose inputs did not change is not run again.

A case's result is a function of the package's code (the ports and the case definitions
both live in ``torch2jax_ops/``; or the case modules of ``$TORCH2JAX_OPS_CASES``), the installed libraries (torch, torch_scatter,
torch_sparse, torch_geometric, jax, jaxlib, numpy, equinox, ml_dtypes), the Python
version, the machine (processor model) and the options that change the numbers
(``XLA_FLAGS``, the fast-compile settings, JAX's 64-bit and matmul-precision
variables). :func:`fingerprint` hashes all of them; the results of a run are stored
under that hash in ``~/.cache/torch2jax_ops/parity-results`` and reused by the next run
with the same hash (``--no-reuse`` runs everything). A changed file, library or flag
gives another hash, so every case runs again (the compilation cache keeps that fast).

A crashed worker's outcome is never stored: it may be the machine's, not the case's.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import pathlib
import pickle
import platform
from typing import Any, Optional

__all__ = ["fingerprint", "results_dir", "load", "store", "LIBRARIES", "KEEP"]

#: the libraries whose versions a result depends on
LIBRARIES = ("torch", "torch_scatter", "torch_sparse", "torch_geometric", "jax", "jaxlib",
             "numpy", "equinox", "ml_dtypes")
#: result files kept (the newest); older ones are deleted when a run stores its own
KEEP = 3
#: environment variables that change what a case computes
_ENVIRONMENT = ("XLA_FLAGS", "JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION",
                "JAX_PLATFORMS", "TORCH2JAX_OPS_KERNELS")
_SOURCES = (".py", ".cc", ".h")


def results_dir() -> pathlib.Path:
    """``$TORCH2JAX_OPS_RESULTS_DIR``, else ``~/.cache/torch2jax_ops/parity-results``."""
    explicit = os.environ.get("TORCH2JAX_OPS_RESULTS_DIR")
    if explicit:
        return pathlib.Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "torch2jax_ops" / "parity-results"


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"


def _processor() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def fingerprint(options: dict, own_flags: tuple = ()) -> str:
    """The hash of everything a case's result depends on (see the module's docstring);
    ``options``: the runner's settings that change the numbers (``fast_compile``);
    ``own_flags``: XLA flags the runner itself adds for an option (left out of
    ``XLA_FLAGS``: the option stands for them)."""
    from ._suite import cases_root

    digest = hashlib.sha256()
    package = pathlib.Path(__file__).resolve().parent.parent
    cases = cases_root()
    folders = [package] + ([] if cases.is_relative_to(package) else [cases])
    for folder in folders:  # the package, and $TORCH2JAX_OPS_CASES' case modules
        for path in sorted(p for p in folder.rglob("*") if p.suffix in _SOURCES
                           and "__pycache__" not in p.parts):
            digest.update(str(path.relative_to(folder)).encode())
            digest.update(path.read_bytes())
    facts = [platform.python_version(), platform.machine(), _processor()]
    facts += [f"{name}={_version(name)}" for name in LIBRARIES]
    environment = {name: os.environ.get(name, "") for name in _ENVIRONMENT}
    environment["XLA_FLAGS"] = " ".join(flag for flag in environment["XLA_FLAGS"].split()
                                        if flag not in own_flags)
    facts += [f"{name}={value}" for name, value in environment.items()]
    facts += [f"{key}={options[key]!r}" for key in sorted(options)]
    digest.update("\n".join(facts).encode())
    return digest.hexdigest()[:32]


def load(key: str, folder: Optional[pathlib.Path] = None) -> dict:
    """The stored outcomes of the runs with this fingerprint, by case id (``{}`` if none)."""
    path = (folder or results_dir()) / f"{key}.pkl"
    try:
        with path.open("rb") as f:
            found = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        return {}
    return found if isinstance(found, dict) else {}


def store(key: str, outcomes: dict, folder: Optional[pathlib.Path] = None) -> None:
    """Store ``outcomes`` (case id -> outcome) under ``key``, with what was stored before
    under it; crashed workers' outcomes are left out. Keeps the newest :data:`KEEP` files."""
    folder = folder or results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    kept = load(key, folder)
    kept.update({k: v for k, v in outcomes.items() if not _crashed(v)})
    path = folder / f"{key}.pkl"
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    with partial.open("wb") as f:
        pickle.dump(kept, f)
    partial.replace(path)
    files = sorted(folder.glob("*.pkl"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[KEEP:]:
        old.unlink(missing_ok=True)


def _crashed(outcome: Any) -> bool:
    error = outcome.get("error") if isinstance(outcome, dict) else None
    return error is not None and "WorkerCrash" in str(error)
