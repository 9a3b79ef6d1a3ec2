"""A worker's memory, bounded: its memory maps and resident set, the limits, the release.

JAX keeps every program it compiles for the life of the process, and on the CPU every
program maps code sections of its own; past Linux's ``vm.max_map_count`` the process
aborts. A worker reads its maps and resident set after each case (:class:`_Guard`), drops
JAX's compiled programs past :class:`Limits`, and asks to be replaced when that is not
enough (:mod:`._runner` does the replacing).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Optional

__all__ = ["Limits", "maps_count", "rss_bytes", "MAPS_EVERY"]

#: a worker counts its memory maps every this many cases (reading /proc/self/maps costs
#: about 1 ms per 1,000 maps; the resident set is read after every case, for free)
MAPS_EVERY = 8
_GIB = 1 << 30



def maps_count(pid: Optional[int] = None) -> int:
    """The number of memory maps of a process (``/proc/<pid>/maps`` lines; 0 off Linux)."""
    try:
        with open(f"/proc/{pid or 'self'}/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


def rss_bytes(pid: Optional[int] = None) -> int:
    """The resident set of a process in bytes (``/proc/<pid>/statm``; 0 off Linux)."""
    try:
        with open(f"/proc/{pid or 'self'}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _max_map_count() -> int:
    try:
        return int(pathlib.Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return 65530


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * _GIB


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one worker may hold before it drops its compiled programs.

    ``maps``: memory maps (the kernel refuses new ones past ``vm.max_map_count``);
    ``rss``: resident bytes. A worker still above three quarters of either after
    dropping them is replaced.
    """
    maps: int
    rss: int

    @classmethod
    def default(cls, jobs: int) -> Limits:
        """A quarter of ``vm.max_map_count`` (16,382 of Linux's default 65,530), and the
        smaller of 3 GiB and half the machine's memory shared by the workers."""
        return cls(maps=max(_max_map_count() // 4, 4096),
                   rss=int(min(3 * _GIB, _total_memory() / 2 / max(jobs, 1))))

    def over(self, maps: int, rss: int, fraction: float = 1.0) -> bool:
        return maps > fraction * self.maps or rss > fraction * self.rss


def _release() -> None:
    """Drop JAX's compiled programs and give freed memory back to the system."""
    import gc

    import jax

    jax.clear_caches()
    gc.collect()
    try:  # glibc keeps freed pages; hand them back so the resident set can shrink
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


class _Guard:
    """After each case: release past the limits; ask for a fresh worker if that is not enough."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.releases = 0
        #: the largest (maps, rss) seen after a case, and the last after a release
        self.peak = (0, 0)
        self.after = (0, 0)
        self.maps = 0  # the last count
        self.cases = 0

    def check(self) -> bool:
        """True when this worker should be replaced."""
        self.cases += 1
        rss = rss_bytes()
        if self.cases % MAPS_EVERY == 0 or rss > self.limits.rss:
            self.maps = maps_count()
        maps = self.maps
        self.peak = (max(self.peak[0], maps), max(self.peak[1], rss))
        if not self.limits.over(maps, rss):
            return False
        _release()
        self.releases += 1
        self.after = (maps_count(), rss_bytes())
        self.maps = self.after[0]
        return self.limits.over(*self.after, 0.75)

    def report(self) -> dict:
        return {"releases": self.releases, "peak_maps": self.peak[0], "peak_rss": self.peak[1],
                "after_maps": self.after[0], "after_rss": self.after[1]}
