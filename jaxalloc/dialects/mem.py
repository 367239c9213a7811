"""
The `mem` dialect: a buffer plan written onto jx IR, as attributes only.

- `#mem.slot<offset = 128, size = 4096>`: a byte range of the function's arena.
- `#mem.views<initial = [0], slots = [#mem.slot<...>, #mem.slot<...>]>`: NNC's multi-view
  of a loop-carried value. Round `i` of the loop reads the loop's init operand `initial[i]`
  in place while `i < len(initial)` (NNC's Type II view: nothing is copied in), and
  `slots[(i - len(initial)) % len(slots)]` after that; the repeat length is `len(slots)`.
  With `initial = []`, round 0 reads the init operand where it lies: the plan computes it into
  the first slot, but an enclosing loop's first round may find it where that loop's init is.
  A position without slots reads its init operands in place in turn, round after round
  (`initial[i % len(initial)]`): one, for a position the body yields unchanged; a cycle of
  them, for carries that the body only rotates. A position with neither lives outside the
  arena (in the function's output buffer).
- `#mem.views<initial = [0], yielded>`: after its init operands, round `i` reads the value the
  body yielded in place, wherever it is: for a body that hands on a value it does not compute
  (one from outside the loop, a constant, an init operand), which keeps its bytes all along.
- `#mem.views<initial = [0], yielded, slots = [#mem.slot<...>, #mem.slot<...>]>`: a toggle ring,
  for a body that may hand back the carried value itself (a branch returning its operand): rounds
  read what the body yielded where it is, and the body computes the position's next value into
  the slot its current value is not in (a slot may hold an inner loop's ring, the value anywhere in it).
  With one slot, the next value is computed into that slot, where the current one may be: the body
  computes it in place or after the current value's last read.
- `#mem.views<initial = [1], yielded, slots = [#mem.slot<...>, ...], holds = [2]>`: a toggle ring
  whose slots may also hold the current values of other positions (2: one the body hands this
  position's value on to, or yields it at too, whose value this position's next one may be; or
  one whose next value may be this position's value, which it may then keep for any number of
  rounds): the next value goes into the first slot that none of these current values is in, one
  of a slot for each position and one more.
- `#mem.next<1, 1>` on an op of a loop body (or of a case in it): the value is computed into the
  second slot of position 1's toggle ring that no current value is in (`#mem.next<1>`, the first,
  holds another value that the next one may be, computed in the same round): one slot more for each.
- `#mem.views<initial = [0], slots = [#mem.next<1>, #mem.next<1>]>`: a loop inside a loop body whose
  ring is the enclosing loop's next view of its position 1, cut into as many equal slots, for an
  inner loop whose result the body yields there: the ring moves with the enclosing loop's rounds.
  `#mem.views<initial = [1], yielded, slots = [#mem.next<2>]>`: such a ring that toggles.
- `#mem.arena<bytes = 65536>`: the arena size of a planned function whose outputs lie outside it
  (as XLA's): a value it computes may lie outside the arena only where the function may return it.
  `#mem.arena<bytes = 65536, outputs>`: an arena that holds the outputs too, so that every value
  the function computes lies in it.

What a multi-view means, round by round, is written once (`MultiView`): the executors and the
checker evaluate that rule, on Python ints or on offsets traced into the compiled kernel.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


def _parse_keyword_int(parser: AttrParser, keyword: str) -> int:
    parser.parse_keyword(keyword)
    parser.parse_punctuation("=")
    return parser.parse_integer(allow_boolean=False, allow_negative=False)


@irdl_attr_definition
class SlotAttr(ParametrizedAttribute):
    """A byte range `[offset, offset + size)` of the arena."""

    name = "mem.slot"

    offset: IntAttr
    size: IntAttr

    def __init__(self, offset: int, size: int):
        super().__init__(IntAttr(offset), IntAttr(size))

    @property
    def end(self) -> int:
        return self.offset.data + self.size.data

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            offset = _parse_keyword_int(parser, "offset")
            parser.parse_punctuation(",")
            size = _parse_keyword_int(parser, "size")
        return (IntAttr(offset), IntAttr(size))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<offset = {self.offset.data}, size = {self.size.data}>")


@irdl_attr_definition
class NextAttr(ParametrizedAttribute):
    """The slot that carried position `position` of the enclosing loop reads in the next round; for a
    toggle ring, `#mem.next<k, n>` is its `n`-th free slot (`ViewsAttr.toggle`): a round that computes
    several values that may each be the next one computes them into slots apart."""

    name = "mem.next"

    position: IntAttr
    nth: IntAttr

    def __init__(self, position: int, nth: int = 0):
        super().__init__(IntAttr(position), IntAttr(nth))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            position = parser.parse_integer(allow_boolean=False, allow_negative=False)
            nth = 0
            if parser.parse_optional_punctuation(",") is not None:
                nth = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return (IntAttr(position), IntAttr(nth))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.position.data}, {self.nth.data}>" if self.nth.data else f"<{self.position.data}>")


Place = SlotAttr | NextAttr
"""Where a value lives: a fixed arena slot, or the next round's view of a loop-carried position."""


class Yielded:
    """What a round of a `yielded` multi-view reads: the value the body yielded, where it is."""

    def __repr__(self) -> str:
        return "YIELDED"


YIELDED = Yielded()


class Arithmetic(Protocol):
    """The ops the multi-view rule (`MultiView`) is evaluated with, on rounds and offsets: Python ints
    and bools (`INTS`: the interpreter, the checker), or traced int32 scalars (the compiled kernel,
    `execution/compiled/offsets.py`), where a round or an offset is known only as the kernel runs."""

    def later(self, round_, n: int):
        """`round_ + n`."""

    def remainder(self, round_, n: int):
        """`round_ % n`, of a round at least 0."""

    def minimum(self, round_, n: int):
        """`min(round_, n)`."""

    def at_least(self, round_, n: int):
        """`round_ >= n`."""

    def entry(self, values: Sequence, index):
        """`values[index]`."""

    def lies_in(self, place, start, size: int):
        """Whether the value at `place` lies in the slot of `size` bytes at `start`: False, True, or
        a flag known as the kernel runs; a value outside the arena (None) lies in no slot."""

    def or_(self, a, b):
        """`a or b`, of two flags `lies_in` gave."""

    def unless(self, busy, taken, free):
        """`free` where `busy` is false (None: known false), else `taken`."""


class _Ints:
    """`Arithmetic` on Python ints and bools."""

    def later(self, round_: int, n: int) -> int:
        return round_ + n

    def remainder(self, round_: int, n: int) -> int:
        return round_ % n

    def minimum(self, round_: int, n: int) -> int:
        return min(round_, n)

    def at_least(self, round_: int, n: int) -> bool:
        return round_ >= n

    def entry(self, values: Sequence, index: int):
        return values[index]

    def lies_in(self, place: int | None, start: int, size: int) -> bool:
        return place is not None and start <= place < start + size

    def or_(self, a: bool, b: bool) -> bool:
        return a or b

    def unless(self, busy: bool | None, taken, free):
        return taken if busy else free


INTS: Arithmetic = _Ints()


@dataclass(frozen=True)
class MultiView:
    """The rule of a multi-view (`ViewsAttr`) in one round of its enclosing loop (`ViewsAttr.resolved`):
    which init operand or slot each round of the loop reads, and where a toggle ring puts the next
    value. Written once over an `Arithmetic`, so that every executor and the checker evaluate the
    same rule, on Python ints or on offsets known only as the compiled kernel runs."""

    initial: tuple[int, ...]
    slots: tuple[Any, ...]
    """The ring's slots: their offsets, or (for `ViewsAttr.view`, which only picks one) the slots."""
    size: int
    """The bytes of each slot."""
    yielded: bool
    """Whether the rounds after `initial` read what the body yielded where it is (with slots: a toggle ring)."""
    holds: tuple[int, ...] = ()
    """The other positions whose current values a toggle ring's slots may hold."""

    @property
    def toggles(self) -> bool:
        return self.yielded and bool(self.slots)

    @property
    def rotates(self) -> bool:
        """Whether the rounds read the init operands in place in turn, round after round."""
        return bool(self.initial) and not (self.slots or self.yielded)

    @property
    def outside(self) -> bool:
        """Whether the rounds read the value kept outside the arena."""
        return not (self.initial or self.slots or self.yielded)

    def first_read(self, round_, ops: Arithmetic):
        """The init operand round `round_` reads in place, by its index in `initial`; `len(initial)`
        where the round reads past them (the ring, or the value yielded)."""
        if self.rotates:
            return ops.remainder(round_, len(self.initial))
        return ops.minimum(round_, len(self.initial))

    def past_initial(self, round_, ops: Arithmetic):
        """Whether round `round_`, at least 1, reads past the init operands."""
        return True if len(self.initial) <= 1 else ops.at_least(round_, len(self.initial))

    def slot(self, round_, ops: Arithmetic):
        """The ring's slot that round `round_` reads once it reads past the init operands (None: no
        ring, or a toggle ring, whose next slot `toggle` finds)."""
        if not self.slots or self.yielded:
            return None
        if len(self.slots) == 1:
            return self.slots[0]
        # (round_ - len(initial)) % len(slots), of a number kept at least 0: round_ plus a lead
        if lead := -len(self.initial) % len(self.slots):
            round_ = ops.later(round_, lead)
        return ops.entry(self.slots, ops.remainder(round_, len(self.slots)))

    def toggle(self, places: Sequence, ops: Arithmetic, nth: int = 0):
        """A toggle ring's next slot: the first (the `nth` after it, counting from 0) that none of the
        values at `places` (the current value's, then those of the positions it `holds`) lies in;
        where too few are free, the first. A ring of one slot gives that slot: the next value may be
        computed where the current one is, in place."""
        # picks[m]: the m-th free slot among those looked at so far, the slots looked at last first
        picks = [self.slots[0]] * (nth + 1)
        for slot in reversed(self.slots):
            taken = [t for t in (ops.lies_in(place, slot, self.size) for place in places) if t is not False]
            if any(t is True for t in taken):
                continue
            busy = functools.reduce(ops.or_, taken) if taken else None
            picks = [ops.unless(busy, pick, slot if m == 0 else picks[m - 1]) for m, pick in enumerate(picks)]
        return picks[nth]


@irdl_attr_definition
class ViewsAttr(ParametrizedAttribute):
    """The multi-view of a loop-carried value: init operands read in place first, then a ring of
    slots, or the yielded value where it is."""

    name = "mem.views"

    initial: ArrayAttr[IntAttr]
    slots: ArrayAttr[SlotAttr | NextAttr]
    """A ring of slots, or one slot that is the enclosing loop's next view of one of its positions."""
    yielded: IntAttr
    """1 where the rounds after `initial` read what the body yielded in place (with slots: a toggle ring)."""
    holds: ArrayAttr[IntAttr]
    """The other positions whose current values a toggle ring's slots may hold."""

    def __init__(self, initial: Sequence[int], slots: Sequence[SlotAttr | NextAttr], yielded: bool = False,
                 holds: Sequence[int] = ()):
        super().__init__(ArrayAttr(IntAttr(i) for i in initial), ArrayAttr(slots), IntAttr(int(yielded)),
                         ArrayAttr(IntAttr(i) for i in holds))

    @property
    def held(self) -> tuple[int, ...]:
        return tuple(i.data for i in self.holds.data)

    @property
    def repeat(self) -> int:
        return len(self.slots)

    def view(self, round_: int) -> int | SlotAttr | NextAttr | None | Yielded:
        """What round `round_` reads (`MultiView`): an init operand's index, a slot, the value yielded
        (`YIELDED`), or None (outside the arena)."""
        view = MultiView(tuple(i.data for i in self.initial.data), tuple(self.slots.data), 0, bool(self.yielded.data))
        if view.outside:
            return None
        first = view.first_read(round_, INTS)
        if first < len(view.initial):
            return view.initial[first]
        return YIELDED if view.yielded else view.slot(round_, INTS)

    @property
    def toggles(self) -> bool:
        return bool(self.yielded.data and self.slots.data)

    def toggle(self, current: int | None, *held: int | None, nth: int = 0) -> SlotAttr:
        """Where a toggle ring's next value goes (`MultiView.toggle`), its slots in the arena: the
        current value at arena offset `current` (None outside the arena), those of the positions it
        `holds` at `held`."""
        view = self.resolved()
        return SlotAttr(view.toggle((current, *held), INTS, nth), view.size)

    def resolved(self, next_view: Callable[[int], tuple[Any, int] | None] | None = None) -> MultiView:
        """These views' rule in one round of the enclosing loop, slots by their offsets: a ring in its
        next view of a position (`#mem.next` slots) is that view, `next_view(position)` (its offset
        and size), cut into as many equal slots; outside the arena (None) the rounds read the value
        yielded where it is."""
        initial = tuple(i.data for i in self.initial.data)
        slots = self.slots.data
        if not any(isinstance(s, NextAttr) for s in slots):
            size = slots[0].size.data if slots else 0
            return MultiView(initial, tuple(s.offset.data for s in slots), size, bool(self.yielded.data), self.held)
        found = next_view(slots[0].position.data)
        if found is None:
            return MultiView(initial, (), 0, True)
        start, size = found[0], found[1] // len(slots)
        return MultiView(initial, tuple(start + i * size for i in range(len(slots))), size, bool(self.yielded.data),
                         self.held)

    def within(self, next_views: Callable[[int], SlotAttr | None]) -> ViewsAttr:
        """These views in one round of the enclosing loop (`resolved`), the slots of its next views
        given by `next_views(position)`."""
        if not any(isinstance(s, NextAttr) for s in self.slots.data):
            return self
        view = self.resolved(lambda position: None if (slot := next_views(position)) is None else
                             (slot.offset.data, slot.size.data))
        return ViewsAttr(view.initial, [SlotAttr(offset, view.size) for offset in view.slots], view.yielded, view.holds)

    def verify(self) -> None:
        nexts = {s for s in self.slots.data if isinstance(s, NextAttr)}
        if nexts and (len(nexts) > 1 or not all(isinstance(s, NextAttr) for s in self.slots.data)):
            raise VerifyException("a ring in the enclosing loop's next view has #mem.next slots of one position only")
        if any(s.nth.data for s in nexts):
            raise VerifyException("a ring in the enclosing loop's next view lies in its first free slot (#mem.next<k>)")
        if len({s.size.data for s in self.slots.data if isinstance(s, SlotAttr)}) > 1:
            raise VerifyException("the slots of #mem.views must all have one size")
        if self.holds.data and not (self.yielded.data and self.slots.data):
            raise VerifyException("only a toggle ring holds other positions' values")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            parser.parse_keyword("initial")
            parser.parse_punctuation("=")
            initial = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False, allow_negative=False)
            )
            parser.parse_punctuation(",")
            slots, yielded = [], parser.parse_optional_keyword("yielded") is not None
            if not yielded or parser.parse_optional_punctuation(",") is not None:
                parser.parse_keyword("slots")
                parser.parse_punctuation("=")
                slots = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_attribute)
            holds = []
            if parser.parse_optional_punctuation(",") is not None:
                parser.parse_keyword("holds")
                parser.parse_punctuation("=")
                holds = parser.parse_comma_separated_list(
                    parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False, allow_negative=False)
                )
        if not all(isinstance(s, SlotAttr | NextAttr) for s in slots):
            parser.raise_error("the slots of #mem.views must be #mem.slot or #mem.next attributes")
        return (ArrayAttr(IntAttr(i) for i in initial), ArrayAttr(slots), IntAttr(int(yielded)),
                ArrayAttr(IntAttr(i) for i in holds))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<initial = [")
        printer.print_list(self.initial.data, lambda i: printer.print_int(i.data))
        if self.yielded.data and not self.slots.data:
            printer.print_string("], yielded>")
            return
        printer.print_string("], yielded, slots = [" if self.yielded.data else "], slots = [")
        printer.print_list(self.slots.data, printer.print_attribute)
        if self.holds.data:
            printer.print_string("], holds = [")
            printer.print_list(self.holds.data, lambda i: printer.print_int(i.data))
        printer.print_string("]>")


@irdl_attr_definition
class ArenaAttr(ParametrizedAttribute):
    """The size in bytes of a planned function's arena, and whether it holds the outputs."""

    name = "mem.arena"

    bytes: IntAttr
    outputs: IntAttr
    """1 where the outputs lie in the arena: then no computed value may lie outside it."""

    def __init__(self, size: int, outputs: bool = False):
        super().__init__(IntAttr(size), IntAttr(int(outputs)))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            size = _parse_keyword_int(parser, "bytes")
            outputs = parser.parse_optional_punctuation(",") is not None
            if outputs:
                parser.parse_keyword("outputs")
        return (IntAttr(size), IntAttr(int(outputs)))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<bytes = {self.bytes.data}{', outputs' if self.outputs.data else ''}>")


def places_of(op) -> list[Place | None]:
    """Where each result of `op` lives by its `mem.slot(s)` attribute; None: outside the arena or
    decided at run time (a view, a case result viewing what a branch yields, a loop's multi-view)."""
    if isinstance(op.attributes.get("mem.slot"), Place):
        return [op.attributes["mem.slot"]]
    slots = op.attributes.get("mem.slots")
    if not isinstance(slots, ArrayAttr):
        return [None] * len(op.results)
    return [s if isinstance(s, NextAttr) or s.size.data else None for s in slots.data]


MEM = Dialect("mem", [], [SlotAttr, ViewsAttr, NextAttr, ArenaAttr])
