"""``JaxLoader``: any loader of PyG batches as padded, device-resident JAX batches, prefetched."""
from __future__ import annotations

import dataclasses
import functools
import queue
import sys
import threading
import time
import warnings
from typing import Any, Callable, Generator, Iterator, Optional

import jax

from ... import _dtypes
from ...dlpack import Placement, default_device
from ..data._hetero import HeteroLadder
from ..data._padding import BucketLadder, PaddedGraph
from ..data._rules import check_placement
from ._gather import fast_batches
from ._hetero import hetero_plan, hetero_source, prepare_hetero
from ._host import Kinds, other_counts, pad_host, read_item
from ._plan import Plan, plan_for, plan_from_batch, round_up
from ._progress import Progress, compilations, uncounted

__all__ = ["JaxLoader", "EpochStats", "LadderWarning"]

_OP = "JaxLoader"
_ITEM, _DONE, _ERROR = "item", "done", "error"


def _x64_mode(enabled: bool) -> Any:
    """JAX's thread-local 64-bit mode switch (``jax.enable_x64``; older JAX: experimental)."""
    switch: Optional[Callable[[bool], Any]] = getattr(jax, "enable_x64", None)
    if switch is None:
        # older JAX only: the installed stubs no longer have it
        from jax.experimental import enable_x64 as old_switch  # type: ignore[attr-defined]
        switch = old_switch
    return switch(enabled)


class LadderWarning(UserWarning):
    """A batch outgrew the padding sizes: one more level, hence one more compilation."""


@dataclasses.dataclass
class EpochStats:
    """What one epoch of a :class:`JaxLoader` cost (``loader.stats``, updated as it runs).

    ``wait_seconds`` is the time the training loop spent blocked on the next
    batch: the loader's work that prefetching did not hide.
    """
    batches: int = 0
    seconds: float = 0.0
    wait_seconds: float = 0.0
    compilations: int = 0
    levels: dict = dataclasses.field(default_factory=dict)

    @property
    def wait_share(self) -> float:
        """``wait_seconds / seconds``: the share of the epoch spent waiting for data."""
        return self.wait_seconds / self.seconds if self.seconds else 0.0


def _identity(tree: Any) -> Any:
    return tree


@functools.lru_cache(maxsize=16)
def _placer(device: jax.Device) -> Callable:
    return jax.jit(_identity, out_shardings=jax.sharding.SingleDeviceSharding(device))


def _place(padded: PaddedGraph, target: Any) -> PaddedGraph:
    """The NumPy batch on ``target`` (a device or a sharding), committed there.

    On a device: through a jitted identity, whose C++ dispatch moves NumPy arguments
    in about a third of ``jax.device_put``'s time (0.07 vs 0.2-0.35 ms for a batch
    of 8 arrays on XLA:CPU). That time is the loader thread's and, on a machine with
    few cores, taken from the jitted step. Its compilations (one per ladder level)
    are the loader's own: not counted in ``stats.compilations``.
    """
    if not isinstance(target, jax.Device):
        return jax.device_put(padded, target)
    with uncounted():
        return _placer(target)(padded)


class JaxLoader:
    """Wrap a loader of PyG batches; iterate padded
    :class:`~torch2jax_ops.geometric.PaddedGraph`\\ s on the device, prepared by a background
    thread while your jitted step runs.

    Every batch is padded to a level of a :class:`~torch2jax_ops.geometric.BucketLadder`
    (jraph's convention: real rows first, then one padding graph), so a jitted
    step compiles at most once per level over an epoch, and never again in the
    next epochs. Per batch you get:

    * ``x [N, F]``, ``edge_index [2, E]`` (int32; padding edges join the first
      padding node to itself), ``edge_attr [E, D]``, ``batch [N]`` (padding
      nodes in the padding graph), ``node_mask``, ``edge_mask``, ``graph_mask``;
    * ``y``: node-level ``[N, ...]`` (real rows: ``node_mask``) or graph-level
      ``[G, ...]`` (``graph_mask``), decided once per loader; padding is 0;
    * ``seed_mask [N]`` for batches with a ``batch_size`` (``NeighborLoader``,
      ``LinkNeighborLoader``): the first ``batch_size`` nodes, where the loss goes;
    * ``extras``: every other attribute, padded by what it is: node-level
      (``train_mask``, ``n_id``) to ``N`` rows, edge-level (``e_id``,
      ``edge_weight``) to ``E``, graph-level to ``G``, ``ptr`` to ``G + 1``
      (padding graphs end at ``N``), and attributes with their own count
      (``edge_label``, ``edge_label_index``, ``input_id``) to a fixed number of
      slots with a mask named after them (``extras["edge_label_mask"]``
      covers ``edge_label`` and ``edge_label_index``). Node ids in ``*index*``
      attributes pad with the first padding node, graph ids (``*batch*``) with
      the padding graph, everything else with 0 / False. Python numbers and
      rectangular lists of numbers (``num_sampled_nodes``) become arrays;
      strings and ragged lists raise naming the attribute (``exclude=`` leaves
      them out).

    Dtypes follow :func:`~torch2jax_ops.geometric.data.from_pyg`: ids to int32
    (checked), float64 refused unless JAX's 64-bit mode is on or
    ``allow_downcast=True``.

    Args:
      loader: any re-iterable of ``Data``/``Batch`` (``DataLoader``,
        ``NeighborLoader``, ``LinkNeighborLoader``, ``ClusterLoader``, a
        list), or of dicts of NumPy arrays with ``x`` and ``edge_index``.
      ladder: the padded sizes. ``None`` builds one, once, from the loader's
        sizes (per-graph sizes for a ``DataLoader``, else one pass that reads
        sizes only; see :mod:`._plan`). A batch larger than the top level adds
        a level (a :class:`LadderWarning` saying how to size it) instead of
        failing mid-epoch.
      prefetch: batches prepared ahead by the background thread (converted,
        padded and placed on the device); ``0`` prepares each batch in the
        loop itself (no thread).
      progress: show a progress bar (with ``rich`` when installed, else a line
        on stderr): batches, batches/s and XLA compilations so far.
      device: where the batches go: JAX's default device when the epoch starts
        (``None``), or a ``jax.Device`` / ``jax.sharding.Sharding``.
      allow_downcast: cast float64 attributes to float32 when JAX's 64-bit mode
        is off (otherwise they raise naming the attribute).
      exclude: attribute names to leave out (strings, ragged lists ...).

    ``len(loader)`` is the wrapped loader's; ``loader.ladder`` the current
    ladder; ``loader.stats`` the current / last epoch's :class:`EpochStats`.
    Breaking out of the loop stops the thread; an exception in the thread is
    raised in the loop with its traceback.
    """

    def __init__(self, loader: Any, *, ladder: Optional[BucketLadder] = None, prefetch: int = 2,
                 progress: bool = False, device: Placement = None,
                 allow_downcast: bool = False, exclude: tuple = ()):
        if ladder is not None and not isinstance(ladder, (BucketLadder, HeteroLadder)):
            raise TypeError(f"{_OP}: `ladder` must be a BucketLadder (a HeteroLadder for "
                            f"HeteroData batches) or None (built from the loader's sizes), got "
                            f"{type(ladder).__name__}; e.g. BucketLadder.geometric(max_nodes=..., "
                            f"max_edges=..., max_graphs=...)")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"{_OP}: `prefetch` must be an int >= 0 (batches prepared ahead; 0: "
                             f"no background thread), got {prefetch!r}")
        check_placement(device, op=_OP)
        if isinstance(exclude, str):
            exclude = (exclude,)
        self.loader = loader
        self.prefetch = prefetch
        self.progress = bool(progress)
        self.device = device
        self.allow_downcast = bool(allow_downcast)
        self.exclude = tuple(exclude)
        self.stats = EpochStats()
        self._kinds = Kinds()
        self._lock = threading.Lock()
        self._plan: Optional[Plan] = None if ladder is None else Plan(ladder, {}, "given")

    # ------------------------------------------------------------------ sizes

    def __len__(self) -> int:
        try:
            return len(self.loader)
        except TypeError:
            raise TypeError(f"{_OP}: the wrapped {type(self.loader).__name__} has no len()") \
                from None

    @property
    def ladder(self) -> Optional[BucketLadder | HeteroLadder]:
        """The ladder batches are padded to (built on first use when none was given; None
        for a one-shot iterator before its first batch)."""
        self._ensure_plan()
        return None if self._plan is None else self._plan.ladder

    def _ensure_plan(self) -> None:
        with self._lock:
            if self._plan is None:
                self._plan = (hetero_plan(self.loader, op=_OP) if hetero_source(self.loader)
                              else plan_for(self.loader, self._kinds, op=_OP))

    def _prepare(self, item: Any, index: int, target: Any, x64: bool) -> tuple:
        """Convert, pad and place one batch: ``(PaddedGraph on the device, its padded sizes,
        warnings to issue)`` (a HeteroGraph for a HeteroData batch)."""
        if isinstance(getattr(self._plan, "ladder", None), HeteroLadder) or (
                self._plan is None and hetero_source([item])):
            with self._lock:
                graph, sizes, notes, self._plan = prepare_hetero(
                    item, self._plan, index, target, allow_downcast=self.allow_downcast,
                    exclude=self.exclude, op=_OP)
            return graph, sizes, notes
        host = read_item(item, x64=x64, allow_downcast=self.allow_downcast,
                         exclude=self.exclude, op=_OP, where=f"batch {index}: ")
        notes = []
        with self._lock:
            if self._plan is None:  # a one-shot iterator: sized by its first batch
                self._plan = plan_from_batch(host.nodes, host.edges, host.graphs)
            plan = self._plan
            ladder = plan.ladder
            if not ladder.fits(host.nodes, host.edges, host.graphs):
                grown = ladder.grown(host.nodes, host.edges, host.graphs)
                notes.append(
                    f"{_OP}: batch {index} has {host.nodes} nodes, {host.edges} edges and "
                    f"{host.graphs} graphs, more than the ladder's top level ({ladder.nodes[-1]} "
                    f"nodes, {ladder.edges[-1]} edges, {ladder.graphs[-1]} graphs, padding "
                    f"included): added a level of {grown.nodes[-1]} nodes, {grown.edges[-1]} "
                    f"edges, {grown.graphs[-1]} graphs (one more compilation). Size the ladder "
                    f"for your largest batch up front: JaxLoader(loader, ladder=BucketLadder."
                    f"geometric(max_nodes={grown.nodes[-1] - 1}, max_edges={grown.edges[-1]}, "
                    f"max_graphs={grown.graphs[-1] - 1}))")
                plan.ladder = ladder = grown
            for name, count in other_counts(host, self._kinds, op=_OP).items():
                slots = plan.other_sizes.get(name)
                if slots is None:
                    plan.other_sizes[name] = round_up(count * 1.25)
                elif count > slots:
                    plan.other_sizes[name] = round_up(count * 1.25)
                    notes.append(f"{_OP}: batch {index} needs {count} slots for `{name}`'s "
                                 f"attributes, more than the {slots} of earlier batches: padded "
                                 f"to {plan.other_sizes[name]} from now on (one more "
                                 f"compilation)")
            level = ladder.pick(host.nodes, host.edges, host.graphs)
            sizes = (ladder.nodes[level], ladder.edges[level], ladder.graphs[level])
            other_sizes = dict(plan.other_sizes)
        padded = pad_host(host, *sizes, self._kinds, other_sizes, op=_OP)
        return jax.block_until_ready(_place(padded, target)), sizes, notes

    # --------------------------------------------------------------- iteration

    def __iter__(self) -> Iterator[PaddedGraph]:
        self._ensure_plan()
        try:
            # a DataLoader over an InMemoryDataset: the same batches, gathered with NumPy
            hetero = isinstance(getattr(self._plan, "ladder", None), HeteroLadder)
            iterator = (None if hetero else fast_batches(self.loader)) or iter(self.loader)
        except TypeError:
            raise TypeError(f"{_OP}: `loader` must be iterable (a DataLoader, NeighborLoader, a "
                            f"list of batches ...), got {type(self.loader).__name__}") from None
        # JAX's default device and 64-bit mode can be thread-local (jax.default_device,
        # jax.enable_x64): read them here, in the loop's thread.
        target = default_device() if self.device is None else self.device
        x64 = bool(_dtypes.x64_enabled())
        return self._epoch(iterator, target, x64)

    def _epoch(self, iterator: Iterator, target: Any, x64: bool) -> Iterator[PaddedGraph]:
        stats = self.stats = EpochStats()
        compiles0 = compilations()
        start = time.perf_counter()
        try:
            total = len(self.loader)
        except TypeError:
            total = None
        bar = Progress(total) if self.progress else None
        if self.prefetch == 0:
            source = self._inline(iterator, target, x64)
        else:
            source = self._threaded(iterator, target, x64)
        try:
            while True:
                waited = time.perf_counter()
                try:
                    graph, sizes, notes = next(source)
                except StopIteration:
                    break
                stats.wait_seconds += time.perf_counter() - waited
                for note in notes:
                    warnings.warn(note, LadderWarning, stacklevel=2)
                stats.batches += 1
                stats.levels[sizes] = stats.levels.get(sizes, 0) + 1
                stats.compilations = compilations() - compiles0
                stats.seconds = time.perf_counter() - start
                if bar is not None:
                    bar.update(stats.batches, stats.compilations)
                yield graph
        finally:
            source.close()
            stats.compilations = compilations() - compiles0
            stats.seconds = time.perf_counter() - start
            if bar is not None:
                bar.update(stats.batches, stats.compilations)
                bar.close()

    def _inline(self, iterator: Iterator, target: Any, x64: bool) -> Generator[tuple, None, None]:
        for index, item in enumerate(iterator):
            yield self._prepare(item, index, target, x64)

    def _threaded(self, iterator: Iterator, target: Any,
                  x64: bool) -> Generator[tuple, None, None]:
        """Batches from a background thread that keeps ``prefetch`` of them ready."""
        ready: queue.Queue = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def put(message: tuple) -> bool:
            while not stop.is_set():
                try:
                    ready.put(message, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        def work() -> None:
            with _x64_mode(x64):  # a thread-local setting: carry the loop's over
                run()

        def run() -> None:
            done = 0
            try:
                for index, item in enumerate(iterator):
                    if stop.is_set():
                        return
                    if not put((_ITEM, self._prepare(item, index, target, x64))):
                        return
                    done += 1
                put((_DONE, None))
            except BaseException as exc:  # noqa: BLE001 -- re-raised in the consumer
                if sys.version_info >= (3, 11):  # add_note is 3.11+
                    exc.add_note(f"(raised in {_OP}'s prefetch thread while reading or "
                                 f"preparing batch {done}, counting from 0)")
                put((_ERROR, exc))
            finally:
                close = getattr(iterator, "close", None)
                if callable(close):
                    try:
                        close()
                    except Exception:  # noqa: BLE001 -- closing is best effort
                        pass

        thread = threading.Thread(target=work, name="JaxLoader-prefetch", daemon=True)
        thread.start()
        try:
            while True:
                kind, payload = ready.get()
                if kind == _DONE:
                    return
                if kind == _ERROR:
                    raise payload
                yield payload
        finally:
            stop.set()
            while True:  # unblock a worker waiting to put
                try:
                    ready.get_nowait()
                except queue.Empty:
                    break
            thread.join(timeout=60)
            if thread.is_alive():
                warnings.warn(f"{_OP}: the prefetch thread is still inside the wrapped loader "
                              f"after 60 s; it exits after its current batch", RuntimeWarning,
                              stacklevel=2)
