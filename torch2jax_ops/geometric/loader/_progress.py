"""The loader's progress bar (rich when installed, else a plain line) and the compile counter."""
from __future__ import annotations

import importlib.util
import sys
import threading
import time
from typing import Any, Optional

__all__ = ["compilations", "uncounted", "Progress"]

#: JAX reports every XLA compilation under this event (``jax._src.dispatch.BACKEND_COMPILE_EVENT``).
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_lock = threading.Lock()
_count = [0]
_installed = [False]


#: a thread inside :func:`uncounted` compiles programs of its own (the loader's placement)
_quiet = threading.local()


def _on_event(event: str, duration_secs: float, **kwargs: Any) -> None:
    # XLA compiles in the thread that asked for the program: the flag is that thread's
    if event == _COMPILE_EVENT and not getattr(_quiet, "active", False):
        with _lock:
            _count[0] += 1


class uncounted:
    """Compilations in this block (in this thread) are not counted: the loader's own."""

    def __enter__(self) -> None:
        self._before = getattr(_quiet, "active", False)
        _quiet.active = True

    def __exit__(self, *exc: Any) -> None:
        _quiet.active = self._before


def compilations() -> int:
    """XLA compilations in this process since the first call (a jax.monitoring listener)."""
    with _lock:
        if not _installed[0]:
            import jax.monitoring
            jax.monitoring.register_event_duration_secs_listener(_on_event)
            _installed[0] = True
        return _count[0]


class Progress:
    """``done/total batches, batches/s, compilations`` for one epoch, on stderr."""

    def __init__(self, total: Optional[int], *, label: str = "JaxLoader",
                 use_rich: Optional[bool] = None):
        self.total, self.label = total, label
        self.start = time.perf_counter()
        self.done = 0
        self._last = 0.0
        self._rich: Any = None
        if use_rich is None:
            use_rich = importlib.util.find_spec("rich") is not None
        if use_rich:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress
            self._rich = RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:.1f} batches/s"),
                TextColumn("{task.fields[compiles]} compilations"), TimeElapsedColumn(),
                console=Console(stderr=True), transient=False)
            self._task = self._rich.add_task(label, total=total, rate=0.0, compiles=0)
            self._rich.start()

    def update(self, done: int, compiles: int) -> None:
        self.done = done
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        rate = done / elapsed
        if self._rich is not None:
            self._rich.update(self._task, completed=done, rate=rate, compiles=compiles)
            return
        now = time.perf_counter()
        if now - self._last < 0.1 and done != self.total:
            return
        self._last = now
        of = f"/{self.total}" if self.total is not None else ""
        sys.stderr.write(f"\r{self.label}: {done}{of} batches, {rate:.1f} batches/s, "
                         f"{compiles} compilations")
        sys.stderr.flush()

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
        elif self.done:
            sys.stderr.write("\n")
            sys.stderr.flush()
