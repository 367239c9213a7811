"""XLA's buffer-assignment and live-range dumps, read into plain data.

With `xla_dump_to` set, XLA writes for every compiled module, among others:

- `*after_optimizations-buffer-assignment.txt`: one `allocation N: size S, <kinds>:` header per
  allocation (kinds: `parameter N, shape |...| at ShapeIndex {...}`, `output shape is |...|`,
  `constant`, `thread-local`, `maybe-live-out`, `preallocated-temp`, `color N`), each followed by
  the HLO values placed in it: ` value: <ID NAME[{INDEX}][ (phi)] @SPACE> (size=S,offset=O): SHAPE`.
- `*after_optimizations-live-range.txt`: the module's flattened instruction sequence
  (`    T:NAME`) and each value's live range (`    NAME{INDEX}:START-END`, both ends included: a
  value is freed only after the instructions defined at its last step are allocated), then a
  summary of the peak and a stack-trace breakdown, which are read but not kept.

Both parsers are strict: a line of a form they do not know raises `XlaDumpError` naming the file
and the line, so a change of XLA's format is reported rather than silently misread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jaxalloc.errors import JaxallocError


class XlaDumpError(JaxallocError):
    """An XLA dump file has a line this parser does not understand; the message names the file and line."""


@dataclass(frozen=True)
class XlaValue:
    """One HLO value as the buffer assignment places it."""

    id: int
    instruction: str
    index: str
    """Shape index, `{}` for an array-shaped instruction, `{1}` for a tuple element."""
    phi: bool
    """A phi of XLA's dataflow (a loop parameter or result merging several values)."""
    size: int
    offset: int
    """Byte offset in its allocation."""
    shape: str

    @property
    def key(self) -> str:
        """`name{index}`, as the live-range dump names the value."""
        return f"{self.instruction}{self.index}"


@dataclass(frozen=True)
class XlaAllocation:
    """One allocation of XLA's buffer assignment and the values it holds."""

    index: int
    size: int
    kinds: tuple[str, ...]
    """What the header says about it: `parameter 0, shape |f32[8]| at ShapeIndex {}`, `preallocated-temp`, ..."""
    values: tuple[XlaValue, ...]

    @property
    def is_temp(self) -> bool:
        """The allocation `temp_size_in_bytes` counts: every temporary of the module, heap-simulated."""
        return "preallocated-temp" in self.kinds


@dataclass(frozen=True)
class XlaLiveRanges:
    """The live-range dump: the flattened schedule and each value's inclusive live range."""

    sequence: tuple[str, ...]
    """The instruction at each step of the flattened schedule."""
    ranges: dict[str, tuple[int, int]]
    """`name{index}` -> `(first, last)` step, both included."""


_HEADER = re.compile(r"allocation (\d+): size (\d+)((?:, .*)?):")
_KINDS = re.compile(
    r", (color \d+"
    r"|parameter \d+, shape \|[^|]*\| at ShapeIndex \{[\d,]*\}"
    r"|output shape is \|[^|]*\|"
    r"|constant|thread-local|maybe-live-out|preallocated-temp|tuple)"
)
_VALUE = re.compile(
    r" value: <(\d+) ([^\s{}<>]+)(\{[\d,]*\})?( \(phi\))? @\d+> \(size=(\d+),offset=(\d+)\): (.+)"
)
_STEP = re.compile(r"    (\d+):(\S+)")
_RANGE = re.compile(r"    (\S+\{[\d,]*\}):(\d+)-(\d+)")
_PEAK_HEADER = re.compile(r"  Live ranges at \d+ \(peak\):")
_PEAK_LINE = re.compile(r"    \S+\{[\d,]*\}: \d+ bytes \(cumulative: \d+ bytes\)")
_BREAKDOWN = re.compile(r"  Stack trace breakdown for peak usage: .*")


def _fail(path: str, number: int, line: str, what: str) -> XlaDumpError:
    return XlaDumpError(f"{path}:{number}: {what}: {line.strip()!r}")


def _kinds(rest: str, path: str, number: int, line: str) -> tuple[str, ...]:
    kinds, position = [], 0
    while position < len(rest):
        match = _KINDS.match(rest, position)
        if match is None:
            raise _fail(path, number, line, f"unknown allocation attribute {rest[position:]!r}")
        kinds.append(match.group(1))
        position = match.end()
    return tuple(kinds)


def parse_buffer_assignment(text: str, path: str = "<buffer assignment>") -> list[XlaAllocation]:
    """The allocations of a `*-buffer-assignment.txt` dump, in file order."""
    lines = text.splitlines()
    if not lines or lines[0] != "BufferAssignment:":
        raise _fail(path, 1, lines[0] if lines else "", "expected 'BufferAssignment:'")
    allocations: list[XlaAllocation] = []
    header: tuple[int, int, tuple[str, ...]] | None = None
    values: list[XlaValue] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if (match := _HEADER.fullmatch(line)) is not None:
            if header is not None:
                allocations.append(XlaAllocation(*header, tuple(values)))
            header = (int(match.group(1)), int(match.group(2)), _kinds(match.group(3), path, number, line))
            values = []
            continue
        match = _VALUE.fullmatch(line)
        if match is None:
            raise _fail(path, number, line, "not an allocation header or a value line")
        if header is None:
            raise _fail(path, number, line, "value before any allocation header")
        values.append(
            XlaValue(
                id=int(match.group(1)),
                instruction=match.group(2),
                index=match.group(3) or "{}",
                phi=match.group(4) is not None,
                size=int(match.group(5)),
                offset=int(match.group(6)),
                shape=match.group(7),
            )
        )
    if header is not None:
        allocations.append(XlaAllocation(*header, tuple(values)))
    return allocations


def parse_live_ranges(text: str, path: str = "<live ranges>") -> XlaLiveRanges:
    """The schedule and live ranges of a `*-live-range.txt` dump."""
    lines = text.splitlines()
    if not lines or re.fullmatch(r"HloLiveRange \(max \d+\):", lines[0]) is None:
        raise _fail(path, 1, lines[0] if lines else "", "expected 'HloLiveRange (max N):'")
    sequence: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    section = None
    for number, line in enumerate(lines[1:], start=2):
        if line in ("  InstructionSequence:", "  BufferLiveRange:"):
            section = line.strip()
        elif _PEAK_HEADER.fullmatch(line):
            section = "peak"
        elif _BREAKDOWN.fullmatch(line):
            section = "breakdown"
        elif section == "InstructionSequence:" and (match := _STEP.fullmatch(line)):
            if int(match.group(1)) != len(sequence):
                raise _fail(path, number, line, f"expected step {len(sequence)}")
            sequence.append(match.group(2))
        elif section == "BufferLiveRange:" and (match := _RANGE.fullmatch(line)):
            first, last = int(match.group(2)), int(match.group(3))
            if last < first or match.group(1) in ranges:
                raise _fail(path, number, line, "empty or repeated live range")
            ranges[match.group(1)] = (first, last)
        elif section == "peak" and _PEAK_LINE.fullmatch(line):
            pass  # the peak summary: recomputed from the ranges where needed
        elif section == "breakdown" and line.startswith("    "):
            pass  # a tree of source frames for people, not data
        elif line.strip():
            raise _fail(path, number, line, f"unexpected line in section {section or 'header'}")
    return XlaLiveRanges(tuple(sequence), ranges)
