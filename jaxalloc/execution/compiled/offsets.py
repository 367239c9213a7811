"""Offsets and rounds while the kernel is traced: Python ints where the plan fixes them, traced int32
scalars where they depend on the round, and the multi-view of a carried position in one run of its
loop (`Ring`).

Offsets and rounds are int32 scalars at least 0, traced by the ops below rather than jnp's
operators: jnp makes a jitted call of each operator on a tracer (some 900 in the kernel of the
transformer training step), and its `//`, `%` and indexing correct for negative numbers in five
more ops each, which XLA compiles into every loop round that computes a slot's offset."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxalloc.execution.compiled.kinds import At, Either, Kind, kind_of


def same(a, b) -> bool:
    """Whether two offsets are known, while tracing, to be equal."""
    return a is b or (isinstance(a, int) and isinstance(b, int) and a == b)


def int32(offset) -> jax.Array:
    return jnp.asarray(offset, jnp.int32)


def plus(a, b):
    """`a + b`; an int32 constant added stays a literal of the `add` (`offsets_as_arguments`)."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return lax.add(*(np.int32(v) if isinstance(v, int) else v for v in (a, b)))


def over(offset, width: int):
    """`offset // width`, of a width that is a power of 2: a shift."""
    return offset // width if isinstance(offset, int) else lax.shift_right_logical(offset, np.int32(width.bit_length() - 1))


def modulo(round_, n: int):
    """`round_ % n`, as unsigned numbers: XLA's signed remainder corrects for signs too."""
    if isinstance(round_, int):
        return round_ % n
    return lax.convert_element_type(lax.rem(lax.convert_element_type(round_, np.uint32), np.uint32(n)), np.int32)


def either_slot(busy, taken, free):
    """`free` where `busy` is False (None: known free), else `taken`: offsets, each an int or traced."""
    if busy is None or same(taken, free):
        return free
    return lax.select(busy, np.int32(taken) if isinstance(taken, int) else taken, np.int32(free) if isinstance(free, int) else free)


def entry(values: Sequence[Any], index):
    """`values[index]` at a traced index within them: selects, which XLA fuses into their readers."""
    if all(isinstance(v, int) for v in values) and len(set(values)) == 1:
        return values[0]
    return lax.select_n(index, *(np.asarray(v, np.bool_ if isinstance(v, bool) else np.int32) if isinstance(v, int) else v for v in values))


@dataclass(frozen=True)
class Ring:
    """One carried position's multi-view in one run of its loop: the init operands the first rounds
    read, then a ring of slots (offsets, each `size` bytes), or the value yielded where it is."""

    initial: tuple[int, ...]
    slots: tuple[Any, ...]
    size: int
    yielded: bool
    held: tuple[int, ...] = ()
    """A toggle ring's other positions whose values its slots may hold (`ViewsAttr.holds`)."""

    @property
    def toggles(self) -> bool:
        return self.yielded and bool(self.slots)

    def holds(self, offset) -> bool:
        """Whether every round after the first finds the value at `offset`: a ring of one slot there,
        after one init operand at most."""
        return len(self.initial) <= 1 and len(self.slots) == 1 and not self.yielded and same(self.slots[0], offset)

    def reads_init(self, round_: int) -> int | None:
        """The init operand round `round_` reads in place, if it reads one (`ViewsAttr.view`)."""
        if self.initial and (not (self.slots or self.yielded) or round_ < len(self.initial)):
            return self.initial[round_ % len(self.initial)]
        return None

    @property
    def outside(self) -> bool:
        """Whether the rounds read the value kept outside the arena."""
        return not (self.initial or self.slots or self.yielded)

    def slot(self, round_):
        """The slot of the ring that round `round_` reads once it reads no init operand (None: no ring)."""
        if not self.slots or self.yielded:
            return None
        if isinstance(round_, int):
            return self.slots[(round_ - len(self.initial)) % len(self.slots)]
        if len(self.slots) == 1:
            return self.slots[0]  # a constant, which the kernel takes as an argument (`offsets_as_arguments`)
        # the remainder of a number at least 0 (`modulo`), the same as round_ - len(initial)'s; the
        # constant subtracted, as an added one would be taken for an offset
        if lead := -len(self.initial) % len(self.slots):
            round_ = lax.sub(round_, np.int32(-lead))
        return entry(self.slots, modulo(round_, len(self.slots)))

    def kind(self, inits) -> Kind:
        """The kind of what a round after the first reads, as far as the plan tells."""
        kinds = {kind_of(inits[i]) for i in self.initial[1:] if self.slots or self.yielded} | (
            {kind_of(inits[i]) for i in self.initial} if not (self.slots or self.yielded) else set()
        )
        if self.slots and not self.yielded:
            kinds.add(Kind.AT)
        elif self.outside:
            kinds.add(Kind.VALUE)
        elif self.yielded and not kinds:
            kinds.add(Kind.AT)  # a guess: widened where the body yields something else
        return kinds.pop() if len(kinds) == 1 else Kind.EITHER

    def toggle(self, *values, nth: int = 0):
        """A toggle ring's next slot: the first (the `nth` after it) that none of `values` (the
        current value and those of the positions it holds) is in; where too few are free, the first."""
        # picks[m]: the m-th free slot among those after the one looked at, slots looked at last first
        picks = [self.slots[0]] * (nth + 1)
        for slot in reversed(self.slots):
            taken = [t for t in (self._in(value, slot) for value in values) if t is not False]
            if any(t is True for t in taken):
                continue
            busy = functools.reduce(lax.bitwise_or, taken) if taken else None
            picks = [either_slot(busy, pick, slot if m == 0 else picks[m - 1]) for m, pick in enumerate(picks)]
        return picks[nth]

    def _in(self, value, slot):
        """Whether `value` lies in `slot` (False, True or a traced bool)."""
        if not isinstance(value, At | Either):
            return False
        offset = value.offset
        if isinstance(offset, int) and isinstance(slot, int):
            inside = slot <= offset < slot + self.size
        else:  # a traced offset, or a slot of a ring in an enclosing loop's next view
            start, at = (np.int32(x) if isinstance(x, int) else x for x in (slot, offset))
            inside = lax.bitwise_and(lax.le(start, at), lax.lt(at, lax.add(start, np.int32(self.size))))
        if isinstance(value, Either):
            inside = inside & value.inside
        return bool(inside) if isinstance(inside, bool | np.bool_) else inside


def reads_ring(ring: Ring, round_):
    """Whether round `round_` (at least 1) reads the ring rather than an init operand."""
    return True if len(ring.initial) <= 1 else round_ >= len(ring.initial)


def contiguous(shape: Sequence[int], sizes: Sequence[int]) -> bool:
    """Whether a window of `sizes` is one run of a row-major value of `shape`: ones, then any size,
    then whole dimensions."""
    k = next((j for j, n in enumerate(sizes) if n != 1), len(sizes))
    return all(n == m for n, m in zip(sizes[k + 1:], shape[k + 1:]))


def window_start(shape: Sequence[int], sizes: Sequence[int], starts: Sequence[jax.Array]) -> jax.Array | None:
    """The window's first element, counted in the value's elements: each start clamped as
    `dynamic_slice` clamps it, into the value (not into the arena). None for a window of the whole
    value, which starts at its first element."""
    index = None
    for j, (n, size, start) in enumerate(zip(shape, sizes, starts)):
        if size < n:
            clamped = lax.clamp(np.int32(0), lax.convert_element_type(start, jnp.int32), np.int32(n - size))
            term = lax.mul(clamped, np.int32(math.prod(shape[j + 1:])))
            index = term if index is None else lax.add(index, term)
    return index
