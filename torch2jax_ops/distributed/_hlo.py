"""Bytes moved by the collectives of a compiled XLA program, read from its HLO text.

``jax.jit(f).lower(*args).compile().as_text()`` is the per-device program after
SPMD partitioning; every all-reduce, all-gather, reduce-scatter, all-to-all
and collective-permute in it is a transfer between devices. XLA:CPU prints
operands without their types (``all-reduce(%fusion.3)``), so a table of every
instruction's result type is built first; asynchronous pairs
(``*-start`` / ``*-done``) count once. A collective inside a loop body is
counted once (a static count).
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Union

__all__ = ["collectives", "collective_bytes", "collective_summary"]

_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
                "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
                "f8e4m3fn": 1, "f8e5m2": 1, "s4": 0.5, "u4": 0.5, "token": 0}
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_ARRAY = re.compile(r"\b([a-z]+[0-9a-z]*)\[([0-9,]*)\]")
_DEF = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")


def _text(compiled: Any) -> str:
    if isinstance(compiled, str):
        return compiled
    if hasattr(compiled, "as_text"):
        return compiled.as_text()
    raise TypeError("collective_bytes: pass the compiled HLO text "
                    "(jax.jit(f).lower(*args).compile().as_text()) or the Compiled object")


def _type_bytes(type_text: str) -> int:
    total = 0.0
    for dtype, dims in _ARRAY.findall(type_text):
        if dtype not in _DTYPE_BYTES:
            continue
        count = 1
        for d in filter(None, dims.split(",")):
            count *= int(d)
        total += count * _DTYPE_BYTES[dtype]
    return int(total)


def _split(rest: str) -> tuple:
    """``'TYPE opcode(operands), attrs'`` -> (TYPE, opcode, operands, attrs)."""
    if rest.startswith("("):
        depth = 0
        for j, ch in enumerate(rest):  # noqa: B007  (j is read after the loop)
            depth += (ch == "(") - (ch == ")")
            if depth == 0:
                break
        type_text, rest = rest[:j + 1], rest[j + 1:].lstrip()
    else:
        type_text, _, rest = rest.partition(" ")
    match = re.match(r"([a-z][\w\-]*)\((.*)$", rest)
    if not match:
        return type_text, None, "", ""
    opcode, tail = match.group(1), match.group(2)
    depth, j = 1, 0
    for j, ch in enumerate(tail):  # noqa: B007  (j is read after the loop)
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            break
    return type_text, opcode, tail[:j], tail[j + 1:]


def _group_size(attrs: str, partitions: int) -> int:
    """Devices taking part in one group of the collective (``partitions`` if unsaid)."""
    match = re.search(r"replica_groups=\{\{([0-9,]*)\}", attrs)
    if match:
        return len(match.group(1).split(","))
    match = re.search(r"replica_groups=\[(\d+),(\d+)\]", attrs)  # iota form [groups,size]
    if match:
        return int(match.group(2))
    match = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", attrs)  # mesh form
    if match:
        sizes = {}
        for item in match.group(1).split(","):
            name, _, size = item.partition("=")
            sizes[name.strip("' ")] = int(size)
        count = 1
        for name in match.group(2).split(","):
            count *= sizes.get(name.strip("' "), 1)
        return count
    if "source_target_pairs" in attrs:
        return 2
    return partitions


def collectives(compiled: Union[str, Any]) -> list:
    """One dict per collective: ``name``, ``kind``, ``group`` (devices), ``operand_bytes``,
    ``result_bytes``, ``wire_bytes`` (per-device send volume of a ring), ``shape``."""
    text = _text(compiled)
    lines = text.splitlines()
    header = re.search(r"num_partitions=(\d+)", text)
    partitions = int(header.group(1)) if header else 1
    types = {}
    for line in lines:
        match = _DEF.match(line)
        if match:
            types[match.group(1)] = _split(match.group(2))[0]
    rows = []
    for line in lines:
        match = _DEF.match(line)
        if not match:
            continue
        type_text, opcode, operands, attrs = _split(match.group(2))
        if opcode is None or opcode.endswith("-done"):
            continue
        kind = opcode[:-6] if opcode.endswith("-start") else opcode
        if kind not in KINDS:
            continue
        op_bytes = 0
        for operand in filter(None, (o.strip() for o in operands.split(","))):
            if _ARRAY.search(operand):
                op_bytes += _type_bytes(operand)
            else:
                op_bytes += _type_bytes(types.get(operand.split(" ")[-1].lstrip("%"), ""))
        result = _type_bytes(type_text)
        if opcode.endswith("-start"):  # (operands, results) tuples
            result = result - op_bytes if kind == "all-gather" else op_bytes
        k = _group_size(attrs, partitions)
        wire = {"all-reduce": 2 * (k - 1) / k * op_bytes, "all-gather": (k - 1) * op_bytes,
                "reduce-scatter": (k - 1) / k * op_bytes, "all-to-all": (k - 1) / k * op_bytes,
                "collective-permute": op_bytes}[kind]
        rows.append(dict(name=match.group(1), kind=kind, group=k, operand_bytes=op_bytes,
                         result_bytes=result, wire_bytes=int(wire),
                         shape=type_text.split("{")[0]))
    return rows


def collective_bytes(compiled: Union[str, Any]) -> int:
    """Bytes one device hands to collectives (the sum of their operand sizes) in ``compiled``.

    ``compiled``: ``jax.jit(f).lower(*args).compile()`` or its ``.as_text()``.
    """
    return sum(r["operand_bytes"] for r in collectives(compiled))


def collective_summary(compiled: Union[str, Any]) -> dict:
    """``{"operand_bytes", "wire_bytes", "by_kind": {kind: [count, operand, wire bytes]}}``."""
    rows = collectives(compiled)
    by: dict = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        by[r["kind"]][0] += 1
        by[r["kind"]][1] += r["operand_bytes"]
        by[r["kind"]][2] += r["wire_bytes"]
    return dict(by_kind=dict(by), operand_bytes=sum(r["operand_bytes"] for r in rows),
                wire_bytes=sum(r["wire_bytes"] for r in rows))
