"""The sanitizer: an arena run with shadow memory (`planned(f, mode="checked")`).

Every write into the arena records, byte by byte, which value (in which loop round) owns those
bytes now; every read checks that all its bytes still belong to the value the run expects there
(or to another copy of the same bytes: two views of one value, each written where the plan put it),
and no read or write reaches past the arena's end.
So a plan that lets one value overwrite another before its last read raises `PlanViolation` at
that read, naming both values, their source lines and rounds, instead of computing a wrong
answer. It checks what the run does (the ops executed, the branches taken, the rounds run), not
what the planner believed about lifetimes; it costs a byte-sized owner array and a comparison
per read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.interpreter import register_impls
from xdsl.ir import Operation

from jaxalloc.checks.plan_check import reinterprets
from jaxalloc.errors import PlanViolation
from jaxalloc.execution.arena import COPY, Arena, Layout, Located
from jaxalloc.execution.interpreter import ArenaFunctions
from jaxalloc.frontend.labels import value_label, value_name


class Tagged(int):
    """An arena offset that remembers which write put the value there."""

    write: int

    def __new__(cls, offset: int, write: int) -> Tagged:
        tagged = super().__new__(cls, offset)
        tagged.write = write
        return tagged


class ShadowArena(Arena):
    """An arena that knows the owner of every byte and checks every read against it."""

    def __init__(self, nbytes: int):
        super().__init__(nbytes)
        self.owner = np.zeros(nbytes, np.int32)
        self.writes: list[str] = ["nothing (never written in this run)"]
        """What each write put into the arena, for messages; write 0 is the arena's initial zeros."""
        self.same_bytes: dict[int, object] = {}
        """For a write of bytes read from elsewhere (a copy, a view written where its operand is not): what
        it copied, one key per source, so that two such writes of one source may stand in for each other."""
        self._sources: list = []  # arrays keyed by id above, kept so that no id is reused

    def reading(self, inputs: Sequence[Located], layouts: Sequence[Layout]) -> None:
        for value, layout in zip(inputs, layouts):
            if not isinstance(value, int):
                continue
            if not isinstance(value, Tagged):
                raise PlanViolation(f"{self._doing()} reads arena offset {value}, which no write of this run placed")
            self._within(value, layout, "reads")
            owners = self.owner[value : value + layout.nbytes]
            wrong = np.flatnonzero(owners != value.write)
            key = self.same_bytes.get(value.write)
            if len(wrong) and key is not None and all(self.same_bytes.get(int(w)) == key for w in np.unique(owners[wrong])):
                continue  # rewritten with the same bytes from the same source, which was intact then
            if len(wrong):
                at = value + int(wrong[0])
                raise PlanViolation(
                    f"{self._doing()} reads {self.writes[value.write]} at bytes [{value}, {value + layout.nbytes}), "
                    f"but {self.writes[int(owners[wrong[0]])]} was written over byte {at} before this read"
                )

    _entering: Sequence = ()
    _bytes_of: Sequence = ()

    def run(self, op, inputs, in_layouts, places, out_layouts, kernels=None):
        self._copy_of = inputs if op is COPY else None
        self._bytes_of = inputs if op is COPY else inputs[:1] if reinterprets(self.current) else ()
        return super().run(op, inputs, in_layouts, places, out_layouts, kernels)

    def enter(self, values, layouts, places, arguments):
        self._entering = arguments
        try:
            return super().enter(values, layouts, places, arguments)
        finally:
            self._entering = ()

    def written(self, results: tuple[Located, ...], layouts: Sequence[Layout]) -> tuple[Located, ...]:
        tagged = []
        for k, (value, layout) in enumerate(zip(results, layouts)):
            if isinstance(value, int):
                self._within(value, layout, "writes")
                write = len(self.writes)
                self.writes.append(self._what(k))
                self.owner[value : value + layout.nbytes] = write
                if k < len(self._bytes_of):
                    self.same_bytes[write] = self._source_key(self._bytes_of[k])
                value = Tagged(value, write)
            tagged.append(value)
        return tuple(tagged)

    def _within(self, offset: int, layout: Layout, does: str) -> None:
        """Bytes past the arena's end would be clamped into it, onto whatever lies at its end."""
        if offset + layout.nbytes > len(self.owner):
            raise PlanViolation(f"{self._doing()} {does} bytes [{offset}, {offset + layout.nbytes}), past the "
                                f"arena's {len(self.owner)} bytes")

    def _source_key(self, source: Located) -> object:
        """What a copy of `source` holds: the bytes of the write it was read from, or an array outside."""
        if isinstance(source, Tagged):
            return self.same_bytes.get(source.write, source.write)
        self._sources.append(source)
        return ("array", id(source))

    def _what(self, k: int) -> str:
        """What write `k` of the op being run puts into the arena: its result, or a copy."""
        if self._entering:
            return f"{value_name(self._entering[k])} (a donated {value_label(self._entering[k])}, written as the call starts)"
        if self._copy_of is None:
            return f"{value_name(self.current.results[k])} ({value_label(self.current.results[k])}{self._round()})"
        source = self._copy_of[k]
        copied = self.writes[source.write] if isinstance(source, Tagged) else "a value from outside the arena"
        return f"a copy of {copied} made by {self._doing()}"

    def _round(self) -> str:
        return "".join(f", round {r} of {_op_label(loop)}" for loop, r in self.rounds)

    def _doing(self) -> str:
        return f"{_op_label(self.current)}{self._round()}"


@register_impls
@dataclass
class CheckedFunctions(ArenaFunctions):
    """The arena run with a `ShadowArena`: every read checked against the last write there."""

    def new_arena(self, nbytes: int) -> Arena:
        return ShadowArena(nbytes)


def _op_label(op: Operation | None) -> str:
    if op is None:
        return "the run"
    if op.results:
        return f"{value_name(op.results[0])} ({value_label(op.results[0])})"
    return op.name
