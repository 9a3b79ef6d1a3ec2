"""The parity suite: a registry of cases, each a torch original vs its JAX port.

One case list serves both ``parity_tests/`` (pytest parametrises over it) and
the ``torch2jax-ops parity`` report, so the two can never disagree. The cases
ship with the package (``torch2jax_ops/parity/cases``, imported only when the
suite is asked for them), so an installed wheel runs the report too.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import os
import pathlib
import sys
import time
import types
from typing import Any, Callable, Iterable, Optional

from .. import _dtypes
from ._arrays import ParityResult
from ._compare import compare
from ._modules import compare_modules

__all__ = ["Case", "register", "cases", "run_case", "SECTIONS", "representatives",
           "dtype_family", "cases_root", "CASES_PACKAGE", "ENVIRONMENT"]


@dataclasses.dataclass
class Case:
    """One comparison: ``build()`` returns (torch_fn, jax_fn, args, kwargs, options).

    ``torch_fn`` may be a ``torch.nn.Module`` and ``jax_fn`` its port: then the
    case runs :func:`compare_modules` (gradients by parameter name).
    """
    section: str
    op: str
    dtype: str
    label: str
    build: Callable[[], tuple]
    #: the oldest torch on which this comparison is verified; on an older torch (whose
    #: behaviour differs here) the case is skipped with that reason, not failed
    min_torch: Optional[str] = None
    #: the position in the full list of :func:`cases` (how a worker process finds it)
    index: int = dataclasses.field(default=-1, compare=False)

    def skip_reason(self) -> Optional[str]:
        """Why this case cannot run against the installed torch, or None."""
        if self.min_torch is None:
            return None
        import torch

        installed = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
        needed = tuple(int(p) for p in self.min_torch.split(".")[:2])
        if installed < needed:
            return (f"torch {torch.__version__} behaves differently here; the case is verified "
                    f"from torch {self.min_torch} on")
        return None

    @property
    def id(self) -> str:
        return f"{self.op}[{self.dtype}]-{self.label}"

    @property
    def x64(self) -> bool:
        """64-bit dtypes run with JAX's 64-bit mode on; the rest in JAX's default mode."""
        return _dtypes.needs_x64(self.dtype)

    def run(self) -> ParityResult:
        """:func:`compare` the pair, or :func:`compare_modules` when the torch side is a module.

        Both run the port under ``jax.jit`` (``jit=True``, index arrays as constants), as
        users run ports, unless the case's options say ``jit=False``: one compiled program
        per case instead of one per primitive, which is most of the report's first-run time.
        """
        import torch

        with _dtypes.x64(self.x64):
            torch_fn, jax_fn, args, kwargs, options = self.build()
            check = compare_modules if isinstance(torch_fn, torch.nn.Module) else compare
            options = {"jit": True, **options}
            return check(torch_fn, jax_fn, *args, name=self.id, **options, **kwargs)


#: section name -> functions that yield cases (filled by the case modules).
SECTIONS: dict[str, list[Callable[[], Iterable[Case]]]] = {}


def register(section: str) -> Callable:
    """Decorator: add a case generator to a section of the suite."""
    def add(generator: Callable[[], Iterable[Case]]) -> Callable:
        SECTIONS.setdefault(section, []).append(generator)
        return generator
    return add


#: the package of the shipped cases (one module per section, installed with the package)
CASES_PACKAGE = "torch2jax_ops.parity.cases"
#: a folder of case modules that replaces the shipped ones (a suite of one's own, a test's)
ENVIRONMENT = "TORCH2JAX_OPS_CASES"
_OWN_PACKAGE = "torch2jax_ops_own_cases"


def cases_root() -> pathlib.Path:
    """The folder whose case modules the suite loads.

    ``$TORCH2JAX_OPS_CASES`` (a folder of ``*.py`` case modules, which then
    replace the shipped ones) if set, else the shipped cases,
    ``torch2jax_ops/parity/cases``: part of the installed package, the way torch
    ships its OpInfo database in ``torch.testing``, so an installed wheel runs
    ``torch2jax-ops parity`` outside any checkout.
    """
    own = os.environ.get(ENVIRONMENT)
    if own:
        folder = pathlib.Path(own).expanduser().resolve()
        if not folder.is_dir():
            raise FileNotFoundError(f"{ENVIRONMENT}={own!r}: not a folder of case modules")
        return folder
    return pathlib.Path(__file__).resolve().parent / "cases"


def _load() -> None:
    """Import every case module of :func:`cases_root` (each registers its sections)."""
    root = cases_root()
    package = CASES_PACKAGE
    if os.environ.get(ENVIRONMENT):
        # a package over the folder, so its modules may import each other
        package = _OWN_PACKAGE
        module = sys.modules.get(package)
        if module is None or list(getattr(module, "__path__", [])) != [str(root)]:
            module = types.ModuleType(package)
            module.__path__ = [str(root)]
            sys.modules[package] = module
    for path in sorted(root.glob("[!_]*.py")):
        importlib.import_module(f"{package}.{path.stem}")


def cases(section: Optional[str] = None, only: Optional[str] = None,
          x64: Optional[bool] = None) -> list[Case]:
    """The registered cases, selected.

    Args:
      section: one section's cases (``None``: all).
      only: cases whose id contains this substring or matches it as a glob
        (``*`` and ``?``; brackets are literal: ``"scatter_max[float*]-1d*"``).
      x64: ``True``: only the cases run in JAX's 64-bit mode (float64, int64
        ...); ``False``: only the others; ``None``: both.
    """
    _load()
    if section is not None and section not in SECTIONS:
        raise ValueError(f"no parity section {section!r}; the sections are {list(SECTIONS)}")
    found, position = [], 0
    # every generator runs, in an order that does not depend on which case modules were
    # imported first (by module, then registration order): an index is the same in every
    # selection and every process (how a worker finds a case)
    generators = sorted(((name, gen) for name, gens in SECTIONS.items() for gen in gens),
                        key=lambda pair: pair[1].__module__)
    for name, gen in generators:
        for case in gen():
            case.index, position = position, position + 1
            if section in (None, name):
                found.append(case)
    if only:  # a substring of the case id, or a glob whose brackets are literal (ids hold [dtype])
        pattern = only.replace("[", "\0").replace("]", "[]]").replace("\0", "[[]")
        found = [c for c in found if only in c.id or fnmatch.fnmatchcase(c.id, pattern)]
    if x64 is not None:
        found = [c for c in found if c.x64 == x64]
    return found


def dtype_family(dtype: str) -> str:
    """The tier a dtype belongs to: "half", "float32", "x64" (64-bit mode) or "int"/"other"."""
    if dtype in ("float16", "bfloat16"):
        return "half"
    if dtype == "float32":
        return "float32"
    if _dtypes.needs_x64(dtype):
        return "x64"
    return "int" if dtype in _dtypes.INT_NAMES else "other"


def representatives(found: list, families: bool = True) -> list:
    """One case per (section, op[, dtype family]): the fast tier's and ``--quick``'s choice.

    With ``families=False`` one case per (section, op), float32 where there is one.
    """
    chosen: dict = {}
    for case in found:
        key = (case.section, case.op) + ((dtype_family(case.dtype),) if families else ())
        best = chosen.get(key)
        if best is None or (not families and best.dtype != "float32" and
                            case.dtype == "float32"):
            chosen[key] = case
    keep = {id(c) for c in chosen.values()}
    return [c for c in found if id(c) in keep]


def run_case(case: Case) -> dict[str, Any]:
    """Run one case; errors inside become a failed row, never a crash of the report."""
    start = time.perf_counter()
    if case.skip_reason():
        return {"case": case, "result": None, "error": None, "skipped": case.skip_reason(),
                "seconds": 0.0}
    try:
        result = case.run()
        error = None
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        result, error = None, f"{type(exc).__name__}: {exc}"
    return {"case": case, "result": result, "error": error,
            "seconds": time.perf_counter() - start}
