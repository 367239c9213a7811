"""The compiled arena executor (`planned(f, mode="compiled")`): a planned function as one jitted
kernel over a donated arena.

The xDSL interpreter runs the planned module once per signature under `jax.jit` tracing, so the
interpreter is the compiler: each op reads its operands out of the arena (a traced array of
words, `_granule`) at their planned offsets, binds its primitive and writes its results back at
theirs. `jx.while` becomes `lax.while_loop` with the arena in its carry; round `r` finds each
carried value at its multi-view's slot for `r`, an offset computed from the round (NNC's pointer
update), so no value moves between rounds. `jx.case` becomes conditionals over the arena
(`switch`). Each call makes a new arena and donates it to the kernel, which updates it in place
and hands it back to be dropped; with `keep_arena` the one handed back is kept for the next call.
Donated arguments (`mem.args`) are written at their slots as the kernel starts, and donated to it too.

Honest memory: XLA must update the arena in place and keep values where the plan put them.
- Every offset is counted from the kernel's argument `base`, which is always 0 but which XLA
  cannot see: it cannot prove two offsets equal or apart, so it neither forwards a value written
  at one offset to a later read of it nor moves a read across a write. In a loop's body it is
  `base & round` (still 0), so XLA does not hoist each offset out of the loop into a value the
  loop carries, hundreds of them in a long body. The constant part of each offset is an argument
  of the kernel (in a loop's body, a constant of the loop: `offsets_as_arguments`), which XLA
  cannot see either.
- XLA orders work by data alone (on the CPU `lax.optimization_barrier` is gone before fusion, so
  it orders nothing), and it copies the whole arena wherever bytes are read after a write has
  changed them in place. So every value computed out of the arena goes back into it (the plan
  keeps outputs inside the arena), and a move of values between slots reads each source just
  before it writes it, where no source can lie where an earlier move writes.
- XLA repeats a cheap op inside each op that uses it; a read of the arena repeated in a second
  write after the first has changed the arena would cost that copy. A read that two writes use
  (the operands of an op with several placed results) is read once into a buffer of its own
  (`_pinned`). A write is cheap in XLA's eyes where its value is one word or a
  broadcast: a value of one word is written as two (the second is its slot's padding, where every
  slot holds two words), a broadcast is pinned first (`_spreads`), and so is every small write
  outside a one-kernel loop, whose value XLA's simplifier may find to be a constant
  (`PINNED_WRITE_WORDS`).
- A read of the arena by an op that indexes into its operand (`dynamic_slice`, `gather`,
  `scatter`: `INDEXED`) is behind a barrier of its own (`arena.read_bytes`), so XLA cannot merge
  the arena slice with the op's own index (the merged slice would clamp its start to the arena,
  not to the value); other ops read the arena unfenced.
- XLA fuses no read of the arena at another offset into a kernel that writes the arena in place,
  nor, once the kernel has written the arena, a read at the same offset into a write that also
  broadcasts an operand of several elements (a bias: `x @ w + b` in place of `x @ w`). Such a
  read is a kernel of its own: the small operands of one op are read together, one pinned buffer
  of their words (`read_operands`), which XLA cannot merge with an index of the op's own either.
  Inside a loop compiled into one kernel (below) each is read alone: there the buffer is only
  more work.
- A `dynamic_slice` of a value in the arena, or a `dynamic_update_slice` of one in place, reads
  or writes only its window where that is one run of words (`window`), at the start the op
  clamps to, computed into the value: reading the whole value would copy all of it, in a scan
  each round for each stacked value.
- XLA orders the branches of one conditional as if each ran after the one before, so a case
  whose branches write the arena is a chain of conditionals, one per branch (`switch`), each of
  whose results is read, so that XLA does not rewrite the conditional (see `switch`).
- A read of the arena that no later write depends on makes XLA copy the arena: the operands of
  an op that writes nothing into the arena (a callback, whose effect hands nothing back; an op
  whose result stays outside) are read once and `base` is made of them (`_read_all`), so every
  later write waits for them.
- The arena has one spare word (`CompiledRun.words`): XLA would take a value that filled the whole
  arena for the arena itself.
`benchmarks/speed.py` counts the arena copies left in each compiled kernel, and reports its temp;
every compiled run of the tests fails where there is one (`jaxalloc/testing/differential.py`).

On the CPU a small loop (`SMALL_LOOP_BYTES`) is one call that XLA compiles into one kernel
(`one_kernel`): its runtime otherwise runs each of the body's ops as a kernel of its own, each
round, and in the arena an op is two or three of them. Where XLA cannot compile a loop so (an op it
hands to its runtime library), or copies the arena in a kernel with such calls, the whole kernel is
compiled again without (`CompiledRun.compile`).

A loop that says it runs several rounds (`jx.while ... rounds`) counts them in its condition, where
XLA sees its trip count (on the GPU, a condition it cannot count is read back to the host each
round); the program's own condition still runs, and a round where it disagrees with the count
fails the call as a loop that ran other rounds than planned does.

A loop's condition runs at the end of the body that precedes it (and once before the loop), so
that whatever the condition writes into the arena is written in the loop's own carry: XLA would
copy the arena for a `cond_fun` that writes.

In the kernel a value is `At(offset)` (in the arena; the offset a Python int or, where it depends
on the round, a traced one), a jax array (outside the arena), or, where a loop or a branch may
leave it either way, `Either`. Loops carry and branches return each value in one of these kinds,
guessed from the plan and widened (the loop or switch traced again) where the guess was wrong.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import core as jax_core
from jax.experimental.xla_metadata import set_xla_metadata
from jax.extend.core.primitives import jit_p
from xdsl.dialects.builtin import ArrayAttr
from xdsl.interpreter import Interpreter, PythonValues, impl, impl_callable, register_impls
from xdsl.ir import Operation

from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import NextAttr, SlotAttr, ViewsAttr
from jaxalloc.execution.arena import WORDS, Layout, from_bytes, from_words, layout_of, read_bytes, to_words
from jaxalloc.execution.interpreter import (
    ArenaFunctions, JxFunctions, donated_slots, make_interpreter, replace, twice, with_weak_type,
)
from jaxalloc.analysis.inplace import PRODUCTS


@dataclass(frozen=True)
class At:
    """A value in the arena at `offset` (a Python int, or a traced int32 where it depends on the round)."""

    offset: Any


@dataclass(frozen=True)
class Either:
    """A value in the arena at `offset` where `inside` holds, else the array `value`."""

    inside: Any
    offset: Any
    value: Any


jax.tree_util.register_dataclass(At, data_fields=["offset"], meta_fields=[])
jax.tree_util.register_dataclass(Either, data_fields=["inside", "offset", "value"], meta_fields=[])


def kind_of(value) -> str:
    return "at" if isinstance(value, At) else "either" if isinstance(value, Either) else "value"


class _Settled(Exception):
    """A loop's carried values that lie at the same constant offset in every round: trace it again
    with them there, or (None) not, after all (`CompiledFunctions.loop`)."""

    def __init__(self, owner: Operation, offsets: dict[int, int | None]):
        super().__init__(f"results {sorted(offsets)} of {owner.name} lie at constant offsets")
        self.owner, self.offsets = owner, offsets


class _Widen(Exception):
    """A loop or branch produced a value of a kind it does not carry: trace it again, wider."""

    def __init__(self, owner: Operation, position: int, kind: str):
        super().__init__(f"result {position} of {owner.name} needs the kind {kind}")
        self.owner, self.position, self.kind = owner, position, kind


class _Retrace(Exception):
    """A case widened a result after it had bound a conditional of its chain (`switch`): that
    conditional stays in the trace, its effects and its update of the arena with it, so the whole
    kernel is traced again, the case's kinds wide from the start (`CompiledFunctions.widened`)."""


def _join(a: str, b: str) -> str:
    return a if a == b else "either"


def _same(a, b) -> bool:
    """Whether two offsets are known, while tracing, to be equal."""
    return a is b or (isinstance(a, int) and isinstance(b, int) and a == b)


def _apart(sources, places, sizes) -> bool:
    """Whether no source of a move can lie where an earlier one writes (known while tracing)."""
    if len(sources) < 2:
        return True
    if not all(isinstance(p, int) for p in places):
        return False
    for k, source in enumerate(sources):
        if isinstance(source, Either) or isinstance(source, At) and not isinstance(source.offset, int):
            return False
        if isinstance(source, At) and any(
            p < source.offset + sizes[k] and source.offset < p + n for p, n in zip(places[:k], sizes[:k])
        ):
            return False
    return True


def _identity(value) -> Any:
    if isinstance(value, At):
        return ("at", value.offset if isinstance(value.offset, int) else id(value.offset))
    return id(value)


def _int32(offset) -> jax.Array:
    return jnp.asarray(offset, jnp.int32)


# Offsets and rounds are int32 scalars at least 0, traced by the ops below rather than jnp's
# operators: jnp makes a jitted call of each operator on a tracer (some 900 in the kernel of the
# transformer training step), and its `//`, `%` and indexing correct for negative numbers in five
# more ops each, which XLA compiles into every loop round that computes a slot's offset.

def _plus(a, b):
    """`a + b`; an int32 constant added stays a literal of the `add` (`offsets_as_arguments`)."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return lax.add(*(np.int32(v) if isinstance(v, int) else v for v in (a, b)))


def _over(offset, width: int):
    """`offset // width`, of a width that is a power of 2: a shift."""
    return offset // width if isinstance(offset, int) else lax.shift_right_logical(offset, np.int32(width.bit_length() - 1))


def _modulo(round_, n: int):
    """`round_ % n`, as unsigned numbers: XLA's signed remainder corrects for signs too."""
    if isinstance(round_, int):
        return round_ % n
    return lax.convert_element_type(lax.rem(lax.convert_element_type(round_, np.uint32), np.uint32(n)), np.int32)


def _either_slot(busy, taken, free):
    """`free` where `busy` is False (None: known free), else `taken`: offsets, each an int or traced."""
    if busy is None or _same(taken, free):
        return free
    return lax.select(busy, np.int32(taken) if isinstance(taken, int) else taken, np.int32(free) if isinstance(free, int) else free)


def _entry(values: Sequence[Any], index):
    """`values[index]` at a traced index within them: selects, which XLA fuses into their readers."""
    if all(isinstance(v, int) for v in values) and len(set(values)) == 1:
        return values[0]
    return lax.select_n(index, *(np.asarray(v, np.bool_ if isinstance(v, bool) else np.int32) if isinstance(v, int) else v for v in values))


@dataclass(frozen=True)
class _Ring:
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
        return len(self.initial) <= 1 and len(self.slots) == 1 and not self.yielded and _same(self.slots[0], offset)

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
        # the remainder of a number at least 0 (`_modulo`), the same as round_ - len(initial)'s; the
        # constant subtracted, as an added one would be taken for an offset
        if lead := -len(self.initial) % len(self.slots):
            round_ = lax.sub(round_, np.int32(-lead))
        return _entry(self.slots, _modulo(round_, len(self.slots)))

    def kind(self, inits) -> str:
        """The kind of what a round after the first reads, as far as the plan tells."""
        kinds = {kind_of(inits[i]) for i in self.initial[1:] if self.slots or self.yielded} | (
            {kind_of(inits[i]) for i in self.initial} if not (self.slots or self.yielded) else set()
        )
        if self.slots and not self.yielded:
            kinds.add("at")
        elif self.outside:
            kinds.add("value")
        elif self.yielded and not kinds:
            kinds.add("at")  # a guess: widened where the body yields something else
        return kinds.pop() if len(kinds) == 1 else "either"

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
            picks = [_either_slot(busy, pick, slot if m == 0 else picks[m - 1]) for m, pick in enumerate(picks)]
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


@register_impls
@dataclass
class CompiledFunctions(ArenaFunctions):
    """The jx ops traced into one kernel over the arena (see the module docstring)."""

    bytes: Any = None
    """The arena, as an array of `word`s."""
    word: np.dtype = np.dtype(np.uint8)
    paddable: bool = False
    """Whether every slot holds at least two words, so a value of one word may be written as two."""
    base: Any = 0
    """The kernel's argument `base`, always 0: every offset is counted from it (see the module docstring)."""
    copied: Any = None
    """Bytes copied so far, as (low 20 bits, the rest in MiB): uint32s that do not overflow."""
    wrong_rounds: Any = None
    """Whether a loop that says how many rounds it runs ran another number."""
    _rings: Sequence[_Ring] = ()
    small_loops: bool = False
    """Whether each small loop is compiled into one kernel (`one_kernel`): on the CPU."""
    _in_one_kernel: bool = False
    one_kernel_calls: int = 0
    """Loops traced into one kernel (`one_kernel`) in the kernel's last trace."""
    widened: dict[Operation, dict[int, str]] = field(default_factory=dict)
    """The kinds each loop or case was found to need, by position: kept from one trace of the
    kernel to the next (`_Retrace`)."""

    def learned(self, owner: Operation | None, guessed: list[str]) -> list[str]:
        """The kinds `owner` carries: those `guessed`, wider where a trace of it found them too narrow."""
        return [self.widened.get(owner, {}).get(position, kind) for position, kind in enumerate(guessed)]

    def learn(self, owner: Operation, found: _Widen, kinds: list[str]) -> None:
        """Widen `kinds`, those of `owner`, as `found` says, and keep that for later traces; or raise
        `found` on, where it is another op's."""
        if found.owner is not owner:
            raise found
        kinds[found.position] = self.widened.setdefault(owner, {})[found.position] = found.kind

    # -- the arena --------------------------------------------------------------------------------

    def read(self, value, layout: Layout, fenced: bool = True, pinned: bool = False) -> jax.Array:
        """`value` as an array; `fenced=False` lets XLA fuse the read of the arena into the op that
        reads it, for an op that cannot merge it with an index of its own; `pinned` reads it once
        into a buffer of its own (`_pinned`)."""
        if isinstance(value, At):
            return self.load(value.offset, layout, fenced, pinned)
        if isinstance(value, Either):  # both read, one chosen: a branch over the arena would need all of it
            return _chosen(value, self.load(value.offset, layout, fenced, pinned))
        return value

    def load(self, offset, layout: Layout, fenced: bool, pinned: bool) -> jax.Array:
        """The value of `layout` at byte `offset` of the arena."""
        if _bytes_free((layout,)):  # no bytes: nothing of the arena to read
            return jnp.zeros(layout.shape, layout.dtype)
        words = self.words(offset, layout.nbytes, fenced)
        return from_words(self.pin(words) if pinned else words, layout)

    def words(self, offset, nbytes: int, fenced: bool = False) -> jax.Array:
        """The words of the `nbytes` at byte `offset` of the arena (`fenced`: see `read`)."""
        width = self.word.itemsize
        return (read_bytes if fenced else _slice)(self.bytes, _plus(self.base, _over(offset, width)), -(-nbytes // width))

    def pin(self, words: jax.Array) -> jax.Array:
        """`_pinned`, with zeros made from `base`. One word is pinned with a zero beside it: XLA turns
        a reduction of one pair into an elementwise op, which it repeats in each user."""
        zero = lax.convert_element_type(self.base, words.dtype)
        if words.size == 1:
            return self.pin(jnp.concatenate([words, zero[None]]))[:1]
        return _pinned(words, jnp.broadcast_to(zero, words.shape))

    def pin_value(self, value: jax.Array, layout: Layout) -> jax.Array:
        """`value` computed once into a buffer of its own (`_pinned`), of its own type and shape where
        a reduction has an identity for its elements: a value of another type or shape would be
        converted back by a copy of its own."""
        if not layout.nbytes:
            return value
        if layout.key_impl is not None:
            return jax.random.wrap_key_data(_pinned_as_is(jax.random.key_data(value), self.base), impl=layout.key_impl)
        if _pinnable_as_is(jnp.result_type(value)):
            return _pinned_as_is(value, self.base)
        return from_words(self.pin(to_words(value, layout, WORDS[min(layout.stored_dtype.itemsize, 4)])), layout)

    def read_operands(self, values: Sequence[Any], layouts: Sequence[Layout], fenced: bool, pinned: bool) -> tuple:
        """The operands of one op. Small ones (`GROUPED_READ_BYTES`) in the arena at more than one
        place are read together, one buffer of their words (`_pinned`), in one kernel instead of
        one each (see the module docstring). The pinned buffer also keeps XLA from merging a read
        with the op's own index (`INDEXED`). In a loop compiled into one kernel each operand is
        read alone (the diffrax solve of `benchmarks/speed.py`: 10% faster a call)."""
        grouped = {(_identity(v), layout): v.offset for v, layout in zip(values, layouts)
                   if isinstance(v, At) and layout.nbytes <= GROUPED_READ_BYTES}
        if len(grouped) < 2 or self._in_one_kernel:
            return tuple(self.read(v, layout, fenced, pinned) for v, layout in zip(values, layouts))
        loaded = dict(zip(grouped, self.read_together(list(grouped.values()), [layout for _, layout in grouped])))
        return tuple(loaded[key] if (key := (_identity(v), layout)) in loaded else self.read(v, layout, fenced, pinned)
                     for v, layout in zip(values, layouts))

    def read_together(self, offsets: Sequence[Any], layouts: Sequence[Layout]) -> list:
        """The values of `layouts` at byte `offsets`, read into one buffer of their words (`_pinned`)."""
        parts = [self.words(offset, layout.nbytes) for offset, layout in zip(offsets, layouts)]
        words = self.pin(jnp.concatenate(parts))
        starts = np.cumsum([0, *(part.size for part in parts)])
        return [from_words(words[a:b], layout) for layout, a, b in zip(layouts, starts, starts[1:])]

    @property
    def threaded(self) -> tuple:
        """What every op may update, threaded through loops and branches."""
        return self.bytes, self.copied, self.wrong_rounds, self.base

    @threaded.setter
    def threaded(self, values: tuple) -> None:
        self.bytes, self.copied, self.wrong_rounds, self.base = values

    def write(self, value: jax.Array, layout: Layout, offset, spread: bool = False, moved: bool = False) -> At:
        """Write `value` at byte `offset`. Its words are what `dynamic_update_slice` writes; where XLA
        would take that write for a cheap one, it is made dearer: see the module docstring. `moved`:
        see `put`."""
        if _bytes_free((layout,)):  # an update of no bytes hands XLA the arena as it was, which it copies
            return At(offset)
        words = to_words(value, layout, self.word)
        if words.size == 1 and self.paddable:  # the other word is the slot's own padding
            words = jnp.concatenate([words, jnp.zeros(1, words.dtype)])
        spread = spread or words.size <= PINNED_WRITE_WORDS and not self._in_one_kernel
        self.put(words, _plus(self.base, _over(offset, self.word.itemsize)), spread, moved)
        return At(offset)

    def put(self, words: jax.Array, start, spread: bool, moved: bool = False) -> None:
        """Write `words` at word `start`, pinned first where they may be a broadcast; words `moved`
        as they are (read out of the arena) get an op for XLA to fuse into the write (`_fusible`)."""
        if spread and words.size > 1:  # the slot's words, masked with the zero XLA cannot see
            words = _pinned(words, _slice(self.bytes, start, words.size) & lax.convert_element_type(self.base, words.dtype))
        elif moved and not spread:
            words = _fusible(words, self.base)
        self.bytes = lax.dynamic_update_slice(self.bytes, words, (start,), allow_negative_indices=False)

    def touch(self) -> None:
        """Write the arena's spare last word (`CompiledRun.words`) with a zero XLA cannot see: a
        conditional whose branch hands the arena back untouched would hand back its operand, which
        XLA copies where the operand is read after the conditional."""
        spare = _plus(self.base, self.bytes.shape[0] - 1)
        self.bytes = lax.dynamic_update_slice(self.bytes, lax.convert_element_type(self.base, self.word)[None], (spare,))

    def count(self, nbytes) -> None:
        low, high = self.copied
        low = low + jnp.asarray(nbytes, jnp.uint32)
        self.copied = (low & 0xFFFFF, high + (low >> 20))

    def copy_out(self, value, layout: Layout) -> jax.Array:
        """`value` read out of the arena, to be kept outside it: read once into a buffer of its own,
        which every later write waits for (as for an op whose results stay outside, `apply`)."""
        if not isinstance(value, At | Either):
            return value
        self.count(layout.nbytes if isinstance(value, At) else jnp.where(value.inside, layout.nbytes, 0))
        copied = self.read(value, layout, pinned=True)
        self.base = _read_all([copied], self.base)
        return copied

    def move(self, values: Sequence[Any], layouts: Sequence[Layout], places: Sequence[Any]) -> tuple:
        """`Arena.move`: each value put at its place, as if every source were read before anything is
        written. Where no source can lie where an earlier move writes, each is read just before it
        is written: XLA orders work by data alone, and a read of the arena that no later write
        depends on makes it copy the whole arena to keep the bytes it reads."""
        first: dict[tuple, int] = {}
        for k, (v, p) in enumerate(zip(values, places)):
            if not (isinstance(v, At) and _same(v.offset, p)):
                first.setdefault((_identity(v), _identity(At(p))), k)
        moves = list(first.values())
        if _apart([values[k] for k in moves], [places[k] for k in moves], [layouts[k].nbytes for k in moves]):
            read = [None] * len(moves)
        else:
            # the source in the arena, if one, moves first; several are read into one buffer
            moves.sort(key=lambda k: not isinstance(values[k], At | Either))
            read = self.read_first([values[k] for k in moves], [layouts[k] for k in moves])
        for k, value in zip(moves, read):
            source, nbytes = values[k], layouts[k].nbytes
            if isinstance(source, At):
                nbytes = jnp.where(source.offset != places[k], nbytes, 0)
            elif isinstance(source, Either):
                nbytes = jnp.where(source.inside & (source.offset == places[k]), 0, nbytes)
            self.count(nbytes)
            self.write(self.read(source, layouts[k]) if value is None else value, layouts[k], places[k], moved=True)
        return tuple(v if isinstance(v, At) and _same(v.offset, p) else At(p) for v, p in zip(values, places))

    def read_first(self, values: Sequence[Any], layouts: Sequence[Layout]) -> list:
        """The values, those in the arena read before any is written over: into one buffer of their
        words (`_pinned`), which XLA neither repeats in each write that uses it nor fuses into one.
        A read of its own would be fused into its one write, after the writes before it have
        changed the arena, and XLA would copy the arena to keep the bytes it reads."""
        inside = [k for k, v in enumerate(values) if isinstance(v, At | Either)]
        if len(inside) < 2:
            return [self.read(v, layout) for v, layout in zip(values, layouts)]
        read = list(values)
        for k, loaded in zip(inside, self.read_together([values[k].offset for k in inside], [layouts[k] for k in inside])):
            read[k] = loaded if isinstance(values[k], At) else _chosen(values[k], loaded)
        return read

    def encode(self, value, kind: str, layout: Layout, owner: Operation, position: int, carried=None):
        """`value` as a loop or branch carries it (`kind`); raises `_Widen` where it cannot be. A value
        in the arena carried as `Either` hands on the array the `carried` one held (a loop's round
        passes it through unchanged, which XLA neither copies nor computes every round)."""
        have = kind_of(value)
        if have == kind == "at":
            return At(_int32(value.offset))
        if have == kind == "value":
            return value
        if kind != "either":
            raise _Widen(owner, position, "either")
        if isinstance(value, At):
            unused = carried.value if isinstance(carried, Either) else _zeros(layout)
            return Either(jnp.bool_(True), _int32(value.offset), unused)
        if isinstance(value, Either):
            return Either(jnp.asarray(value.inside, jnp.bool_), _int32(value.offset), value.value)
        return Either(jnp.bool_(False), jnp.int32(0), value)

    def switch(self, owner: Operation, index, branches: Sequence[Callable], layouts, kinds: list[str],
               last_writes: bool = False) -> tuple:
        """`lax.switch` semantics over branches that run in the arena and return located values, each
        result in the kind `kinds` gives (widened where a branch needs it).

        XLA orders the branches of one conditional as if each ran after the one before: where an
        early branch writes the arena in place and a later one reads it, it copies the whole arena.
        So unless the caller knows that only the last branch writes the arena (`last_writes`), branch
        `k` runs in a conditional of its own, `lax.cond(index == k, branch, nothing)`, which hands
        the arena and the results on to the next.

        `base` is then made of every result of each conditional (`_read_all`), and on the CPU,
        after the last, it is read into a value of its own (`pin`): XLA would compute its chain of
        selects again in each later read of the arena, every depth of the chain a distinct fusion
        to compile (the scanned transformer training step: 289 distinct fusions, 233 so); on a GPU
        that read would be a kernel launch of its own, in a loop every round. XLA drops the
        results nothing reads, and the operands a branch no longer needs, cloning each branch it
        changes; the branch that changes nothing ends up cloned more often than the one that
        writes. XLA's copy removal visits computations in the order it made them, and where it
        came to the writing branch first, it kept a copy of the arena at the end of each branch
        (random programs 823 and 2369, and 4857 in a `relocate`, where only the last branch writes).

        Where a result is widened once a conditional of the chain is in the trace, that conditional
        would stay there, its effects and its update of the arena with it: the kernel is traced
        again from the start (`_Retrace`)."""
        if len(branches) == 1:
            return branches[0]()
        index = jnp.clip(lax.convert_element_type(index, jnp.int32), 0, len(branches) - 1)
        start = self.threaded

        def traced(branch):
            def run(state):
                self.threaded = state[0]
                results = branch()
                if not last_writes:
                    self.touch()
                # `base` and the index go on out of each branch where XLA cannot see them. Every later
                # write waits for the branches (its offset counts from that `base`), which XLA would
                # take off the arena where none writes it: a read of the arena that no later write
                # depends on (here the index, read where it lies, in each conditional's test as XLA
                # repeats a cheap read in each user) makes XLA copy the arena to keep the bytes it reads
                unseen = self.base == _UNSEEN
                self.base = _hidden(self.base, unseen)
                return self.threaded, self.encode_all(owner, results, kinds, layouts), _hidden(state[2], unseen)

            return run

        if last_writes:
            conditionals = [lambda state: lax.switch(index, [traced(b) for b in branches], state)]
        else:
            conditionals = [lambda state, k=k: lax.cond(state[2] == k, traced(branches[k]), lambda state: state, state)
                            for k in range(len(branches))]
        kinds = self.learned(owner, kinds)
        while True:
            bound = 0  # conditionals of the chain in the trace
            try:
                state = (start, tuple(_placeholder(kind, layout) for kind, layout in zip(kinds, layouts)), index)
                for conditional in conditionals:
                    self.threaded, results, handed = conditional(state)
                    bound += 1
                    # every result read, so that XLA keeps the conditional as it is (see above)
                    self.base = _read_all([*jax.tree.leaves(results), handed], self.base)
                    state = (self.threaded, results, handed)
                self.threaded, results, _ = state
                if jax.default_backend() == "cpu":
                    self.base = self.pin(self.base[None])[0]
                return results
            except _Widen as found:
                self.learn(owner, found, kinds)
                if bound:
                    raise _Retrace() from found
                self.threaded = start

    def where(self, place):
        """As the interpreter's, with a toggle ring's further free slot (`#mem.next<k, n>`) chosen
        from where the carried values are, traced."""
        if isinstance(place, NextAttr) and place.nth.data:
            k = place.position.data
            ring = self._rings[k]
            return ring.toggle(self._state[k], *(self._state[j] for j in ring.held), nth=place.nth.data)
        return super().where(place)

    # -- ops ------------------------------------------------------------------------------------

    @impl_callable(jx.FuncOp)
    def call_func(self, interpreter: Interpreter, op: jx.FuncOp, args: PythonValues) -> PythonValues:
        self.bytes, args = args[0], args[1:]
        # host constants until an op counts a copy or checks a round: then traced (`CompiledRun.interpret`)
        self.copied, self.wrong_rounds = (np.uint32(0), np.uint32(0)), np.bool_(False)
        self.one_kernel_calls = 0
        self._next, self._rings = (), ()
        results = JxFunctions.call_func(self, interpreter, op, args)
        outputs = op.body.block.last_op.operands
        return tuple(self.read(v, layout_of(o.type)) for v, o in zip(results, outputs))

    def arguments(self, op: jx.FuncOp, args: PythonValues) -> PythonValues:
        """Donated arguments (`mem.args`) are written at their slots as the kernel starts; the kernel
        donates them to XLA, which may free them or give their memory to an output."""
        args = JxFunctions.arguments(self, op, args)
        donated = donated_slots(op)
        return replace(args, list(donated), [
            self.write(args[k], layout_of(op.body.block.args[k].type), offset) for k, offset in donated.items()
        ])

    def apply(self, op: jx.PrimOp | jx.FusedOp, args: PythonValues) -> PythonValues:
        layout = self.layouts.get(op) or self.layout(op)
        places = layout.offsets or tuple(self.where(p) for p in layout.places)
        binding = self.binding(op)
        effect = isinstance(op, jx.PrimOp) and op.effect is not None
        if layout.outputs and not effect and _bytes_free(layout.outputs):
            return tuple(jnp.zeros(out.shape, out.dtype) for out in layout.outputs)  # nothing to read or write
        if layout.view and (places[0] is None or isinstance(args[0], At) and _same(args[0].offset, places[0])):
            source = args[0]
            if isinstance(source, At):
                return (source,)  # the operand's bytes, read as the result's type
            if isinstance(source, Either):
                return (Either(source.inside, source.offset, binding.bind(source.value)[0]),)
        window = self.window(op, args, places, layout)
        if window is not None:
            return window
        fenced = isinstance(op, jx.PrimOp) and op.primitive.data in INDEXED
        # an op that reads the arena and writes nothing into it (a callback, values kept outside, such
        # as outputs) hands nothing back that a later write would wait for, and XLA copies the arena
        # where a read of it is not ordered before a later write: every later write waits instead
        # (its offset counts from a `base` made of them) for a callback's operands, or for the
        # results, each computed once into a buffer of its own (`kept_outside`)
        unwritten = all(p is None for p in places) and any(isinstance(v, At | Either) for v in args)
        operands = self.read_operands(args, layout.inputs, fenced, pinned=effect or sum(p is not None for p in places) > 1)
        if effect:
            self.base = _read_all(operands, self.base)
        results = binding.bind(*operands)
        if unwritten and not effect:
            results = self.kept_outside(op, results, layout.outputs)
        outside = not any(isinstance(v, At | Either) for v in args)
        return tuple(r if p is None else self.write(r, out, p, spread=outside or _spreads(op, k))
                     for k, (r, p, out) in enumerate(zip(results, places, layout.outputs)))

    def kept_outside(self, op: jx.PrimOp | jx.FusedOp, results: Sequence[Any], layouts: Sequence[Layout]) -> tuple:
        """Results computed from the arena and kept outside it, each in a buffer of its own that every
        later write waits for. XLA computes a matrix product or a convolution into a buffer of its
        own; any other result is pinned (`_pinned`), which XLA computes once, reading the arena as
        it goes, where it would compute a cheap result again inside each of its users, after later
        writes (pinning the operands instead holds a copy of each until the op runs)."""
        if not (isinstance(op, jx.PrimOp) and op.primitive.data in PRODUCTS):
            results = tuple(self.pin_value(r, out) for r, out in zip(results, layouts))
        self.base = _read_all(results, self.base)
        return tuple(results)

    def window(self, op: Operation, args: PythonValues, places: Sequence[Any], layout) -> tuple | None:
        """A `dynamic_slice` of a value in the arena, or a `dynamic_update_slice` of one in place,
        whose window is one run of whole words: only the window is read or written, at the start
        the op would clamp to (`_window_start`), where reading the whole value would copy it. In
        a scan, each round reads or writes one row of the stacked values. None for any other op."""
        if not (isinstance(op, jx.PrimOp) and op.primitive.data in WINDOWED and isinstance(args[0], At)):
            return None
        whole, source = layout.inputs[0], args[0].offset
        width, element = self.word.itemsize, whole.stored_dtype.itemsize
        if whole.key_impl is not None or whole.dtype.kind == "c" or element % width:
            return None
        reads = op.primitive.data == "dynamic_slice"
        window = layout.outputs[0] if reads else layout.inputs[1]
        sizes = self.binding(op).params["slice_sizes"] if reads else window.shape
        nbytes = math.prod(sizes) * element
        if len(sizes) != len(whole.shape) or not _contiguous(whole.shape, sizes) or nbytes < 2 * width:
            return None
        if not reads:
            if places[0] is None or isinstance(source, int) and isinstance(places[0], int) and source != places[0]:
                return None  # out of place in every round: the op reads the whole value
            if not _same(source, places[0]):  # a loop's first round reads its init operand elsewhere
                if jax.default_backend() != "cpu":
                    return None  # see `relocate`
                self.relocate(source, places[0], whole)
        operands = self.read_operands(args[1:], layout.inputs[1:], False, False)
        start = _plus(self.base, _over(source if reads else places[0], width))
        if (within := _window_start(whole.shape, sizes, operands[-len(sizes):])) is not None:
            start = lax.add(start, lax.mul(within, np.int32(element // width)))
        if reads:
            words = _slice(self.bytes, start, nbytes // width)
            if places[0] is None:  # kept outside: later writes wait for the read, as in `apply`
                words = self.pin(words)
                self.base = _read_all([words], self.base)
            value = from_words(words, window)
            return (value if places[0] is None else self.write(value, window, places[0], moved=True),)
        moved = isinstance(args[1], At | Either)
        self.put(to_words(operands[0], window, self.word), start, spread=not moved, moved=moved)
        return (At(places[0]),)

    def relocate(self, source, place, layout: Layout) -> None:
        """The value of `layout` at byte `source` copied to `place` in a round where they differ,
        as a loop's first round reads its init operand where a later round's value lies in the
        loop's own slot: a `switch` over all that ops thread (a `lax.cond` over the arena alone,
        with its offsets computed outside the branches, made XLA copy the arena). On the CPU only:
        XLA's GPU runtime reads a conditional's predicate back to the host to choose the branch, a
        round trip each round that costs more than the device's copy of the value."""
        width = self.word.itemsize

        def copy() -> tuple:
            self.put(self.words(source, layout.nbytes), _plus(self.base, _over(place, width)), spread=False, moved=True)
            return ()

        self.switch(None, lax.convert_element_type(source != place, jnp.int32), [lambda: (), copy], [], [], last_writes=True)

    @impl(jx.CaseOp)
    def run_case(self, interpreter: Interpreter, op: jx.CaseOp, args: PythonValues) -> PythonValues:
        layout = self.layout(op)
        index = lax.convert_element_type(self.read(args[0], layout.inputs[0]), jnp.int32)
        phis = op.attributes.get("mem.phi")
        views = [tuple(p.get_values()) for p in phis.data] if phis is not None else [()] * len(op.results)
        places = [self.where(p) for p in layout.places]

        def branch(k: int) -> Callable:
            def run() -> tuple:
                block = op.branches[k].block
                yielded = self.run_block(interpreter, block, ())
                moved = [j for j, place in enumerate(places) if place is not None and k not in views[j]]
                results = replace(yielded, moved, self.move(
                    [yielded[j] for j in moved], [layout.outputs[j] for j in moved], [places[j] for j in moved]
                ))
                results = replace(results, *twice(block, views, k, results))
                return tuple(
                    self.copy_out(v, out) if place is None and k not in phi else v
                    for v, place, phi, out in zip(results, places, views, layout.outputs)
                )

            return run

        kinds = ["at" if place is not None else "value" for place in places]
        return self.switch(op, index, [branch(k) for k in range(len(op.branches))], layout.outputs, kinds)

    @impl(jx.WhileOp)
    def run_while(self, interpreter: Interpreter, op: jx.WhileOp, args: PythonValues) -> PythonValues:
        if self.small_loops and not self._in_one_kernel and self.small(op):
            return self.one_kernel(lambda: self.loop(interpreter, op, args))
        return self.loop(interpreter, op, args)

    def one_kernel(self, run: Callable[[], tuple]) -> tuple:
        """What `run` returns, traced as one call that XLA's CPU backend compiles into one kernel
        (the call's `xla_cpu_small_call` attribute; `inlineable` keeps the call apart until then).

        That backend aborts the process on a parameter of such a call that nothing reads, as
        XLA's simplifications leave one wherever it sees the argument's value (a constant) or
        finds no use for it. So every argument but the arena reaches the call through a `select`
        on `base` (XLA cannot see its value), and the call reads every parameter (`_read_all`).
        Where that `select` would copy more than `HIDDEN_BYTES`, the loop runs as its ops' kernels."""
        def call(threaded):
            self.threaded, self._in_one_kernel = threaded, True
            try:
                return run(), self.threaded
            finally:
                self._in_one_kernel = False

        start, unseen = jax.tree.leaves(self.threaded), self.base == _UNSEEN  # False, where XLA cannot see it
        traced, shape = jax.make_jaxpr(call, return_shape=True)(self.threaded)
        # the program's float scalars are constants of the call, which XLA folds into its one kernel:
        # each taken through a `select` would be a fusion of its own outside the call, distinct by
        # its value. Integers and booleans stay arguments: one XLA sees may fix a loop's trip count
        # or a branch, and a loop or branch it removes hands the arena on, which it then copies
        # (random program 604, a `fori_loop` of `x * 0` rounds)
        known = [jnp.shape(c) == () and jnp.issubdtype(jnp.result_type(c), jnp.floating) and not isinstance(c, jax.core.Tracer)
                 for c in traced.consts]
        outside = [*start[1:], *(c for c, k in zip(traced.consts, known) if not k)]  # what the call takes besides the arena
        if all(map(_hideable, outside)):
            def kernel(*inputs):
                inputs, base = list(inputs), len(start) - 1  # `threaded` ends with `base`
                inputs[base] = _read_all(inputs, inputs[base])
                taken = iter(inputs[len(start):])
                consts = [with_weak_type(np.asarray(c), jax.typeof(c)) if k else next(taken) for c, k in zip(traced.consts, known)]
                return jax.core.eval_jaxpr(traced.jaxpr, consts, *inputs[:len(start)])

            outputs = jax.jit(kernel, inline=False)(start[0], *(_hidden(x, unseen) for x in outside))
            outputs = set_xla_metadata(outputs, **ONE_KERNEL_CALL)
            self.one_kernel_calls += 1
        else:
            outputs = jax.core.eval_jaxpr(traced.jaxpr, traced.consts, *start)
        results, self.threaded = jax.tree.unflatten(jax.tree.structure(shape), outputs)
        return results

    def small(self, op: jx.WhileOp) -> bool:
        """Whether a round of the loop reads and writes at most `SMALL_LOOP_BYTES`, in ops that XLA's
        CPU backend can compile into one kernel (`_in_one_kernel`)."""
        total = 0
        for inner in op.walk():
            if isinstance(inner, jx.PrimOp):
                if not _in_one_kernel(inner, self.binding(inner).params):
                    return False
                total += sum(layout_of(v.type).nbytes for v in (*inner.operands, *inner.results))
        return total <= SMALL_LOOP_BYTES

    def loop(self, interpreter: Interpreter, op: jx.WhileOp, args: PythonValues) -> PythonValues:
        layouts = self.layout(op).outputs
        rings = [self.ring(v) for v in op.attributes["mem.views"].data]
        # a ring whose first slot is the init operand's memory reads it where it lies in round 0
        # (`ArenaFunctions.run_while`)
        state = self.arrive(rings, 0, args, args, layouts)
        go = self.test(interpreter, op, state)
        kinds = self.learned(op, [_join(kind_of(v), g.kind(args)) for v, g in zip(state, rings)])
        # a loop that says it runs several rounds counts them, where XLA sees its trip count, and
        # carries whether the program's own condition agreed in every round; another carries that
        # condition (counting a loop of one round made XLA copy the arena in random programs 0, 5
        # and 10)
        count = op.rounds.data if op.rounds is not None and op.rounds.data > 1 else None

        def flag(go, round_, before=True):
            return go if count is None else before & (go == (round_ < count))

        # a value at the same constant offset in the first round and after every round is read there
        # (`_Settled`), where the loop's state would carry the offset: XLA folds it into a constant
        # in each read, where the kernel takes its other offsets as arguments (`offsets_as_arguments`),
        # so each such read is a fusion of its own, and a read and an in-place write at offsets XLA
        # cannot tell equal are not fused (the read is a copy of its own). The plan foretells most:
        # a ring of one slot that the init operand lies in starts settled, so that a guess the
        # body confirms costs no second trace of it (nor of the loops inside it)
        settled: dict[int, int] = {k: first.offset for k, (first, ring) in enumerate(zip(state, rings))
                                   if isinstance(first, At) and ring.holds(first.offset)}
        unsettled: set[int] = set()  # settled once, then found elsewhere after a round

        def at_settled(state: tuple) -> tuple:
            return tuple(At(settled[k]) if k in settled else v for k, v in enumerate(state))

        def body(carry):
            self.threaded, round_, before, state = carry
            state = at_settled(state)
            self.base = self.base & round_  # still 0, but no longer the same in every round
            following = self.step(interpreter, op, rings, args, layouts, round_, state)
            constant = {k: v.offset for k, (v, first) in enumerate(zip(following, start_state)) if k not in settled and k not in unsettled
                        and isinstance(v, At) and isinstance(first, At) and _same(first.offset, v.offset)}
            constant.update({k: None for k, offset in settled.items()
                             if not (isinstance(following[k], At) and _same(following[k].offset, offset))})
            if constant:
                raise _Settled(op, constant)
            go = self.test(interpreter, op, following)
            return self.threaded, round_ + 1, flag(go, round_ + 1, before), self.encode_all(op, following, kinds, layouts, state)

        start, start_state = self.threaded, state
        while True:
            try:
                carry = (start, jnp.int32(0), flag(go, 0), self.encode_all(op, start_state, kinds, layouts))
                cond = (lambda c: c[2]) if count is None else (lambda c: c[1] < count)
                self.threaded, rounds, agreed, state = lax.while_loop(cond, body, carry)
                break
            except _Settled as found:
                if found.owner is not op:
                    raise
                for k, offset in found.offsets.items():
                    if offset is None:
                        del settled[k]
                        unsettled.add(k)
                    else:
                        settled[k] = offset
                self.threaded = start
            except _Widen as found:
                self.learn(op, found, kinds)
                self.threaded = start
        state = at_settled(state)
        if count is not None:
            self.wrong_rounds = self.wrong_rounds | ~agreed
        elif op.rounds is not None:
            self.wrong_rounds = self.wrong_rounds | (rounds != op.rounds.data)
        if op.at_most is not None:
            self.wrong_rounds = self.wrong_rounds | (rounds > op.at_most.data)
        return state

    def encode_all(self, owner: Operation, values, kinds, layouts, carried=None) -> tuple:
        carried = carried or (None,) * len(values)
        return tuple(self.encode(v, kind, layout, owner, i, c)
                     for i, (v, kind, layout, c) in enumerate(zip(values, kinds, layouts, carried)))

    def ring(self, views: ViewsAttr) -> _Ring:
        """A multi-view in the round being run of the enclosing loop (`ViewsAttr.within`)."""
        initial = tuple(i.data for i in views.initial.data)
        slots = views.slots.data
        if not any(isinstance(s, NextAttr) for s in slots):
            size = slots[0].size.data if slots else 0
            return _Ring(initial, tuple(s.offset.data for s in slots), size, bool(views.yielded.data), views.held)
        position = slots[0].position.data
        base = self._next[position]
        if base is None:
            return _Ring(initial, (), 0, True)
        size = self._rings[position].size // len(slots)
        return _Ring(initial, tuple(base + i * size for i in range(len(slots))), size, bool(views.yielded.data), views.held)

    def arrive(self, rings, round_, inits, carried, layouts) -> tuple:
        """Where each carried value is in round `round_` (`ArenaFunctions._round` and `_outside`): an
        init operand, a ring slot, the value yielded, or that value read out of the arena. A traced
        round is at least 1."""
        state = []
        for ring, value, layout in zip(rings, carried, layouts):
            firsts = [inits[i] for i in ring.initial]
            if isinstance(round_, int):
                if ring.reads_init(round_) is not None:
                    value = inits[ring.reads_init(round_)]
            elif not ring.slots and not ring.yielded:
                if firsts:  # a rotation of init operands
                    value = self.pick(firsts, _modulo(round_, len(firsts)), layout)
            elif len(firsts) > 1:  # init operands first, for as many rounds as they are
                value = self.pick([*firsts, value], lax.min(round_, np.int32(len(firsts))), layout)
            if ring.outside and isinstance(value, At | Either):
                value = self.copy_out(value, layout)  # kept outside the arena
            state.append(value)
        return tuple(state)

    def pick(self, candidates: list, index, layout: Layout):
        """The candidate at a traced index."""
        kinds = {kind_of(c) for c in candidates}
        if kinds == {"at"}:
            return At(_entry([c.offset for c in candidates], index))
        if kinds == {"value"}:
            return lax.select_n(index, *candidates) if len(candidates) > 1 else candidates[0]
        wide = [self.encode(c, "either", layout, None, 0) for c in candidates]
        outside = [w.value for c, w in zip(candidates, wide) if not isinstance(c, At)]
        value = outside[0] if len(outside) == 1 else jax.tree.map(lambda *v: lax.select_n(index, *v), *[w.value for w in wide])
        return Either(_entry([w.inside for w in wide], index), _entry([w.offset for w in wide], index), value)

    def test(self, interpreter: Interpreter, op: jx.WhileOp, state: tuple) -> jax.Array:
        """The loop's condition on `state`, as a traced bool."""
        value = self.run_block(interpreter, op.cond.block, state)[0]
        return jnp.asarray(self.read(value, layout_of(op.cond.block.last_op.operands[0].type)), jnp.bool_)

    def step(self, interpreter: Interpreter, op: jx.WhileOp, rings, inits, layouts, round_, state) -> tuple:
        """Run the body in (traced) round `round_`; where each value is in the next round."""
        outer = self._next, self._rings, self._state
        self._rings, self._state = rings, state
        self._next = tuple(g.toggle(s, *(state[j] for j in g.held)) if g.toggles else g.slot(round_ + 1)
                           for g, s in zip(rings, state))
        try:
            yielded = self.run_block(interpreter, op.body.block, state)
            ring = [k for k, g in enumerate(rings) if g.slots and not g.yielded]
            due = {k: _due(rings[k], round_ + 1) for k in ring}
            now = [k for k in ring if due[k] is True]
            # values due in their slots move together, every source read before any is written over
            carried = replace(yielded, now, self.move(
                [yielded[k] for k in now], [layouts[k] for k in now], [self._next[k] for k in now]
            ))
            later = [k for k in ring if due[k] is not True]
            carried = replace(carried, later, [self.place(carried[k], layouts[k], self._next[k], due[k]) for k in later])
        finally:
            self._next, self._rings, self._state = outer
        return self.arrive(rings, round_ + 1, inits, carried, layouts)

    def place(self, value, layout: Layout, offset, due):
        """`value` moved to a ring slot where the next round reads that slot (`due`; traced where the
        next round may still read an init operand)."""
        if isinstance(value, At) and _same(value.offset, offset):
            return value
        if isinstance(due, bool):
            return self.move([value], [layout], [offset])[0]
        # rounds that still read init operands read no slot: the value is not moved then
        return self.switch(None, lax.convert_element_type(due, jnp.int32),
                           [lambda: (value,), lambda: self.move([value], [layout], [offset])], [layout], ["either"],
                           last_writes=True)[0]


def _fusible(words: jax.Array, base) -> jax.Array:
    """`words`, or'ed with `base` (0, which XLA cannot see). A write of words computed elsewhere (a
    value moved between slots, read out of the arena apart) is a `dynamic_update_slice` that XLA
    fuses with nothing, and compiles with its older emitter, apart from every other such write
    (some 14 ms each); with an op on the words, it is a fusion like the others, compiled once for
    every write of its size."""
    return words | lax.broadcast(lax.convert_element_type(base, words.dtype), words.shape)


def _chosen(either: Either, loaded):
    """An `Either`'s value, given what its offset in the arena holds."""
    return jax.tree.map(lambda a, b: lax.select(jnp.broadcast_to(either.inside, a.shape), a, b), loaded, either.value)


def _placeholder(kind: str, layout: Layout):
    """What a conditional whose branch does not run hands on for a result of `kind`."""
    if kind == "at":
        return At(jnp.int32(0))
    return _zeros(layout) if kind == "value" else Either(jnp.bool_(False), jnp.int32(0), _zeros(layout))


def _zeros(layout: Layout):
    """A value of `layout` that no one reads: where a kind holds an array, but not this time."""
    return from_bytes(jnp.zeros(layout.nbytes, jnp.uint8), layout)


INDEXED = frozenset(
    {"dynamic_slice", "dynamic_update_slice", "gather", "scatter", "scatter-add", "scatter-sub", "scatter-mul",
     "scatter-min", "scatter-max"}
)
"""Primitives that clamp or drop indices into an operand: XLA's simplifier would merge the slice of
the arena that reads the operand with them, and clamp to the arena instead (`arena.read_bytes`)."""


WINDOWED = frozenset({"dynamic_slice", "dynamic_update_slice"})
"""Primitives that read or write a window of a value in the arena (`CompiledFunctions.window`)."""


def _contiguous(shape: Sequence[int], sizes: Sequence[int]) -> bool:
    """Whether a window of `sizes` is one run of a row-major value of `shape`: ones, then any size,
    then whole dimensions."""
    k = next((j for j, n in enumerate(sizes) if n != 1), len(sizes))
    return all(n == m for n, m in zip(sizes[k + 1:], shape[k + 1:]))


def _window_start(shape: Sequence[int], sizes: Sequence[int], starts: Sequence[jax.Array]) -> jax.Array | None:
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


GROUPED_READ_BYTES = 1024
"""Operands of at most this size are read together (`read_operands`): for them a kernel costs more
than copying their bytes, where a larger operand is read where it lies (XLA hands a slice of the
arena to a matrix product without a copy)."""


PINNED_WRITE_WORDS = 8
"""Writes of at most this many words are pinned (`put`), but in a loop compiled into one kernel:
XLA's simplifier may find such a value to be a constant (`x ^ x` is 0), a write cheap enough to
repeat inside a later read, which then reads the arena before the write and makes XLA copy it.
Reading a few words costs little beside the write's own kernel; in one kernel it would slow every
op of the loop."""


SPREADING = frozenset({"broadcast_in_dim", "iota"})
"""Primitives whose result XLA may hold as a broadcast (see `_spreads`)."""


def _spreads(op: Operation, position: int) -> bool:
    """Whether XLA may see result `position` of `op` as a broadcast: writing a broadcast into the
    arena is an update cheap enough for XLA to repeat inside every later read of the arena, which
    then reads bytes the write already changed in place, and XLA copies the arena to keep them."""
    if isinstance(op, jx.FusedOp):
        op = op.body.block.last_op.operands[position].owner
    return not isinstance(op, jx.PrimOp) or op.primitive.data in SPREADING


def _pinned(words: jax.Array, zeros: jax.Array) -> jax.Array:
    """`words` read once into a buffer of their own. XLA copies a cheap read of the arena into every
    op that uses it; where two writes use one read, the second would read bytes the first has
    already overwritten in place, so XLA would copy the whole arena to keep them. A reduction is
    never copied into its users, and XLA cannot see that this one changes nothing: `zeros` are
    made from `base`. Each word is reduced with its zero along the minor axis of the pair: on the
    GPU, the same reduction along the major axis still left two copies of the arena in a kernel."""
    return lax.reduce(jnp.stack([words, zeros], axis=1), words.dtype.type(0), lax.bitwise_or, (1,))


INFINITE_FLOATS = frozenset(map(np.dtype, (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64)))
"""Float types with an infinity, the identity of `max` (most float8 types have none)."""


def _pinnable_as_is(dtype) -> bool:
    return dtype in INFINITE_FLOATS or jnp.issubdtype(dtype, jnp.bool_) or jnp.issubdtype(dtype, jnp.integer)


def _pinned_as_is(x: jax.Array, base: jax.Array) -> jax.Array:
    """`_pinned` for an array of bools, integers or floats, in its own type and shape: reduced with
    the identity of `bitwise_or` (0), or for floats of `max` (-inf), made from `base`. The reduction
    takes its operands the other way round and its initial value traced, so that it is no program's
    own `reduce_max` or `reduce_or`, which XLA would merge with it and then read the arena where
    the merged reduction runs."""
    dtype = jnp.result_type(x)
    floating = dtype in INFINITE_FLOATS
    identity = lax.convert_element_type(base, dtype)
    if floating:
        identity = lax.sub(identity, np.array(np.inf, dtype))
    if math.prod(jnp.shape(x)) == 1:  # with the identity beside it, as `CompiledFunctions.pin` does
        pair = _pinned_as_is(jnp.concatenate([jnp.ravel(x), identity[None]]), base)
        return pair[:1].reshape(jnp.shape(x))
    stacked = jnp.stack([x, jnp.broadcast_to(identity, jnp.shape(x))], axis=-1)
    combine = lax.max if floating else lax.bitwise_or
    return lax.reduce(stacked, identity, lambda a, b: combine(b, a), (jnp.ndim(x),))


def _slice(arena: jax.Array, start, count: int) -> jax.Array:
    return lax.dynamic_slice(arena, (start,), (count,), allow_negative_indices=False)


def _granule(module, arena_bytes: int) -> int:
    """The largest power of two, up to 64, that the arena and every slot's offset and size are a
    whole number of, a ring in an enclosing loop's next view (`#mem.next`) counted as the equal
    parts it cuts that view's slot into (`ViewsAttr.within`).

    The kernel keeps its arena in words of up to 4 bytes of this size, so that a value of 4-byte
    elements is read with a bitcast of each word, which XLA fuses into the op that reads it; out of
    bytes, XLA assembles each element from four with a reduction, a kernel of its own per read."""
    sizes = {arena_bytes}

    def visit(op: Operation, enclosing: list[ViewsAttr] | None) -> None:
        for attribute in op.attributes.values():
            for slot in attribute.data if isinstance(attribute, ArrayAttr) else (attribute,):
                if isinstance(slot, SlotAttr):
                    sizes.update((slot.offset.data, slot.size.data))
        if isinstance(op, jx.WhileOp):
            def next_view(position: int) -> SlotAttr | None:
                slots = enclosing[position].slots.data if enclosing else ()
                return slots[0] if slots else None

            enclosing = [views.within(next_view) for views in op.attributes["mem.views"].data]
            sizes.update(n for views in enclosing for slot in views.slots.data for n in (slot.offset.data, slot.size.data))
        for region in op.regions:
            for block in region.blocks:
                for inner in block.ops:
                    visit(inner, enclosing)

    visit(module, None)
    return next(g for g in (64, 32, 16, 8, 4, 2, 1) if all(n % g == 0 for n in sizes))


SMALL_LOOP_BYTES = 64 * 1024
"""A loop whose round reads and writes at most this many bytes is compiled into one kernel on the
CPU: XLA's CPU runtime runs each op of a loop's body as a kernel of its own, some 0.1 us each, and in
the arena every op is two or three kernels (its read, its compute, its write), which for small
values costs far more than their bytes. XLA does the same for `jax.jit`'s loops of at most 1 KiB,
which the arena's reads and writes of the same values exceed."""


ONE_KERNEL_CALL = {"xla_cpu_small_call": "true", "inlineable": "false"}
"""The attributes of a loop's call that XLA's CPU backend compiles into one kernel (`one_kernel`)."""

OUTSIDE_ONE_KERNEL = frozenset({
    "sort", "top_k", "approx_top_k", "fft", "conv_general_dilated", "cholesky", "lu", "qr", "geqrf",
    "householder_product", "eig", "eigh", "svd", "schur", "hessenberg", "tridiagonal",
    "tridiagonal_solve", "triangular_solve", "debug_callback", "pure_callback", "io_callback", "ffi_call",
    "custom_call",
})
"""Primitives that XLA's CPU backend runs through its runtime library (or, for a convolution, may),
which a loop compiled into one kernel cannot call."""


_UNSEEN = np.int32(-1)
"""A value `base` (always 0) never has."""


def _bytes_free(layouts: Sequence[Layout]) -> bool:
    """Whether every value of `layouts` has no bytes (and no key type, whose zeros jnp cannot make):
    such values are made, not read from or written to the arena."""
    return all(not layout.nbytes and layout.key_impl is None for layout in layouts)


def _read_all(inputs: Sequence[Any], base: jax.Array) -> jax.Array:
    """`base` made to depend on the first element of every input (of bool, int or float elements, or
    a PRNG key's data), in a branch that never runs but that XLA cannot drop, as it cannot see `base`."""
    numbers = (jax.random.key_data(x) if jax.dtypes.issubdtype(jnp.result_type(x), jax.dtypes.prng_key) else x
               for x in inputs)
    seen = sum(lax.convert_element_type(jnp.ravel(x)[0], jnp.int32) for x in numbers
               if math.prod(jnp.shape(x)) and _real_numbers(jnp.result_type(x)))
    return lax.select(base == _UNSEEN, base + seen, base)


HIDDEN_BYTES = 1024
"""The most bytes of a value a loop compiled into one kernel takes from outside the arena: each is
copied as it enters the call (`one_kernel`)."""


def _hideable(x) -> bool:
    size, dtype = math.prod(jnp.shape(x)), jnp.result_type(x)
    return 0 < size and _of_numbers(dtype) and size * dtype.itemsize <= HIDDEN_BYTES


def _of_numbers(dtype) -> bool:
    """Whether elements of `dtype` are bools, integers or floats (not complex numbers or PRNG keys)."""
    return not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and dtype.kind in "biuf"


def _real_numbers(dtype) -> bool:
    """Whether elements of `dtype` are bools, integers or real floats of any width (bfloat16 and
    the float8 types included)."""
    return any(jnp.issubdtype(dtype, kind) for kind in (jnp.bool_, jnp.integer, jnp.floating))


def _hidden(x, unseen: jax.Array) -> jax.Array:
    """`x`, through a `select` on `unseen` (False) with another value in every element: XLA can
    neither simplify the `select` nor see the value, whatever it knows of `x`."""
    x = jnp.asarray(x)
    if x.dtype == jnp.bool_:
        other = ~x
    else:
        other = lax.bitcast_convert_type(~lax.bitcast_convert_type(x, np.dtype(f"uint{8 * x.dtype.itemsize}")), x.dtype)
    return lax.select(jnp.broadcast_to(unseen, x.shape), other, x)


def _in_one_kernel(op: jx.PrimOp, params) -> bool:
    """Whether XLA's CPU backend can compile `op` into a loop's one kernel: not a primitive of its
    runtime library (`OUTSIDE_ONE_KERNEL`), a scatter of one window (XLA makes it a
    `dynamic_update_slice`), a product of matrices (XLA hands those to a library of its own)."""
    name = op.primitive.data
    if name in OUTSIDE_ONE_KERNEL:
        return False
    if name.startswith("scatter"):
        return math.prod(op.operands[1].type.get_shape()[:-1]) == 1
    if name == "dot_general":
        (contracting, batch) = params["dimension_numbers"]
        return any(math.prod(n for d, n in enumerate(v.type.get_shape()) if d not in (*c, *b)) == 1
                   for v, c, b in zip(op.operands, contracting, batch))
    return True


def _due(ring: _Ring, round_):
    """Whether round `round_` (at least 1) reads the ring rather than an init operand."""
    return True if len(ring.initial) <= 1 else round_ >= len(ring.initial)


_ZERO = np.int32(0)
"""The kernel's argument `base`."""


def offsets_as_arguments(closed: jax.extend.core.ClosedJaxpr) -> tuple[jax.extend.core.ClosedJaxpr, tuple[int, ...]]:
    """The kernel with each int32 constant that an addition takes (an offset counted from `base`)
    read from a new argument instead, one per value, after its own; and those values.

    XLA compiles each distinct fusion once, and a read or a write of the arena whose offset is a
    constant inside it is distinct from every other: with the offsets as arguments, the reads and
    writes of one shape are one fusion (the transformer training step: 676 distinct fusions of
    1,036 otherwise). A loop's body takes its offsets as constants of the loop, a conditional's
    branches as operands of the conditional. An offset counted from the kernel's own `base` (0) is
    the argument itself: an addition of two arguments that several fusions read would be a kernel
    of its own, independent of the others, and three such kernels slowed the CG solver's calls by
    about 15%."""
    words: dict[int, jax.extend.core.Var] = {}

    def argument(word: int) -> jax.extend.core.Var:
        return words.setdefault(word, _offset_var())

    jaxpr = _offsets_read(closed.jaxpr, argument, base=closed.jaxpr.invars[1])
    return jax.extend.core.ClosedJaxpr(_with_inputs(jaxpr, len(jaxpr.invars), list(words.values())), closed.consts), tuple(words)


def _offset_var() -> jax.extend.core.Var:
    return jax.extend.core.Var(jax.core.ShapedArray((), np.int32))


def _offsets_read(jaxpr, offset: Callable[[int], Any], base=None, counters=frozenset()):
    """`jaxpr` with the int32 constants of its additions read from `offset(value)` (in its loops'
    bodies and its conditionals' branches too); an addition to `base` is that value itself. The
    additions that make `counters` keep their constants."""
    renamed: dict[Any, Any] = {}

    def rename(v):
        return renamed.get(v, v) if isinstance(v, jax.extend.core.Var) else v

    eqns = []
    for eqn in jaxpr.eqns:
        eqn = eqn.replace(invars=[rename(v) for v in eqn.invars])
        if eqn.primitive is lax.add_p and any(map(_int32_constant, eqn.invars)) and eqn.outvars[0] not in counters:
            invars = [offset(int(v.val)) if _int32_constant(v) else v for v in eqn.invars]
            if base is not None and any(v is base for v in invars):
                renamed[eqn.outvars[0]] = next(v for v in invars if v is not base)
                continue
            eqn = eqn.replace(invars=invars)
        elif eqn.primitive is lax.while_p:
            eqn = _loop_offsets_read(eqn, offset)
        elif eqn.primitive is lax.cond_p:
            eqn = _branches_offsets_read(eqn, offset)
        eqns.append(eqn)
    return jaxpr.replace(eqns=eqns, outvars=[rename(v) for v in jaxpr.outvars])


def _int32_constant(v) -> bool:
    return isinstance(v, jax.extend.core.Literal) and v.aval.shape == () and v.aval.dtype == np.int32


def _loop_offsets_read(eqn, offset: Callable[[int], Any]):
    """A `while` whose body reads its offsets from constants of the loop, taken from `offset`."""
    inner: dict[int, jax.extend.core.Var] = {}
    body = eqn.params["body_jaxpr"]
    consts, nconsts = eqn.params["cond_nconsts"] + eqn.params["body_nconsts"], eqn.params["body_nconsts"]
    jaxpr = _offsets_read(body.jaxpr, lambda word: inner.setdefault(word, _offset_var()), counters=_counters(body.jaxpr, nconsts))
    if not inner:
        return eqn
    params = dict(eqn.params, body_nconsts=nconsts + len(inner),
                  body_jaxpr=jax.extend.core.ClosedJaxpr(_with_inputs(jaxpr, nconsts, list(inner.values())), body.consts))
    return eqn.replace(invars=[*eqn.invars[:consts], *map(offset, inner), *eqn.invars[consts:]], params=params)


def _branches_offsets_read(eqn, offset: Callable[[int], Any]):
    """A `cond` whose branches read their offsets from operands of the conditional, taken from
    `offset`: each branch takes them all, after its own."""
    found: list[dict[int, jax.extend.core.Var]] = [{} for _ in eqn.params["branches"]]
    jaxprs = [_offsets_read(b.jaxpr, lambda word, mine=mine: mine.setdefault(word, _offset_var()))
              for b, mine in zip(eqn.params["branches"], found)]
    words = list(dict.fromkeys(word for mine in found for word in mine))
    if not words:
        return eqn
    branches = tuple(
        jax.extend.core.ClosedJaxpr(_with_inputs(jaxpr, len(jaxpr.invars), [mine.get(w) or _offset_var() for w in words]), b.consts)
        for b, jaxpr, mine in zip(eqn.params["branches"], jaxprs, found)
    )
    return eqn.replace(invars=[*eqn.invars, *map(offset, words)], params=dict(eqn.params, branches=branches))


def _counters(body, nconsts: int) -> set:
    """The results of a loop's body that count a carried value up by a constant (its round): XLA
    reads the loop's trip count off that constant (`CompiledFunctions.loop`)."""
    carried = {o: i for o, i in zip(body.outvars, body.invars[nconsts:]) if isinstance(o, jax.extend.core.Var)}
    return {
        e.outvars[0] for e in body.eqns
        if e.primitive is lax.add_p and e.outvars[0] in carried and carried[e.outvars[0]] in e.invars and any(map(_int32_constant, e.invars))
    }


def _jit_call(closed: jax.extend.core.ClosedJaxpr) -> dict:
    """The parameters of one `jit` call of `closed`: lowered as it is, where evaluating it under a
    new trace would bind each of its ops again (0.3 s of the first call of the transformer training
    step). Taken from a call of two arguments and three results, each tuple of one entry per
    argument or per result made as long as `closed`'s."""
    template = jax.make_jaxpr(jax.jit(lambda a, b: (a, b, a)))(0, 0).eqns[0].params
    counts = {2: len(closed.in_avals), 3: len(closed.out_avals)}
    call = {k: v[:1] * counts[len(v)] if isinstance(v, tuple) and len(v) in counts else v for k, v in template.items()}
    return dict(call, jaxpr=closed, name="kernel")


def _with_inputs(jaxpr, position: int, new: list):
    """`jaxpr` taking `new` inputs at `position`."""
    names = jaxpr.debug_info.arg_names
    if names is not None:
        names = (*names[:position], *("offset",) * len(new), *names[position:])
    return jaxpr.replace(invars=[*jaxpr.invars[:position], *new, *jaxpr.invars[position:]],
                         debug_info=jaxpr.debug_info._replace(arg_names=names))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _new_arena(words: int, word) -> jax.Array:
    return jnp.zeros(words, word)


class CompiledRun:
    """One planned module as one jitted function over a donated arena: a new one each call, or one
    kept between calls (`keep_arena`)."""

    def __init__(self, module, func_name: str, arena_bytes: int, functions: CompiledFunctions,
                 donated: Sequence[int] = (), out_avals: Sequence[Any] = (), small_loops: bool = True,
                 keep_arena: bool = False):
        self.arena_bytes, self.donated, self.functions = arena_bytes, tuple(donated), functions
        self.keep_arena = keep_arena
        """Whether the arena stays allocated between calls, donated to each and handed back (no
        allocation a call, for latency); else each call makes a new one, dropped as the call ends."""
        # the outputs' types: the kernel gives them their weak types, as `jax.jit` does, where a
        # conversion after each call would cost a dispatch of its own
        self.out_avals = tuple(out_avals)
        self.module, self.func_name = module, func_name
        granule = _granule(module, arena_bytes)
        self.word = functions.word = WORDS[min(granule, 4)]
        functions.paddable = granule >= 2 * self.word.itemsize
        functions.small_loops = small_loops and jax.default_backend() == "cpu"
        self._arena: jax.Array | None = None
        self._base: jax.Array | None = None
        self.kernel: Callable | None = None
        self.jaxpr: jax.extend.core.ClosedJaxpr | None = None
        """What the kernel computes (after a call): the arena, `base`, the arguments, then the offsets."""
        self._offsets: tuple = ()
        self._status: np.ndarray | None = None
        """The copied bytes and wrong rounds where no op of the kernel can change them (`interpret`)."""
        self._temp_bytes: int | None = None

    def interpret(self, arena, base, *args):
        """The module run by the interpreter over the traced arena: the kernel, offsets still constants."""
        functions = self.functions
        functions.bytes, functions.base = arena, base
        interpreter = make_interpreter(self.module, functions)
        outputs = interpreter.call_op(self.func_name, (arena, *args))
        if self.out_avals:
            outputs = tuple(map(with_weak_type, outputs, self.out_avals))
        status = (*functions.copied, functions.wrong_rounds)
        if not any(isinstance(s, jax.core.Tracer) for s in status):
            # known as it is traced: a constant output would be a kernel XLA compiles of its own
            self._status = np.array(status, np.int32)
            return functions.bytes, None, outputs
        return functions.bytes, jnp.stack([jnp.asarray(s, jnp.int32) for s in status]), outputs

    def build(self, args: Sequence[Any]) -> None:
        """The kernel for `args`: the module interpreted once, then its offsets made arguments
        (`offsets_as_arguments`), the result lowered as one call (`_jit_call`). A new function each
        time: `jax.jit` caches what it traced by function."""
        while True:
            try:
                traced = jax.jit(self.interpret).trace(*self._abstract_arena(), *args)
                break
            except _Retrace:
                pass  # traced again, the kinds learned
        closed, words = offsets_as_arguments(traced.jaxpr)
        call, self.jaxpr = _jit_call(closed), closed

        def kernel(arena, base, offsets, *args):
            return jax.tree.unflatten(traced.out_tree, jit_p.bind(arena, base, *args, *offsets, **call))

        self._offsets = tuple(jax.device_put(np.int32(word)) for word in words)
        self.kernel = jax.jit(kernel, donate_argnums=(0, *(3 + k for k in self.donated)))

    def compile(self, args: Sequence[Any]) -> None:
        """The kernel built for `args`; one with loops traced into one kernel also compiled now
        (`jax.jit` then finds it compiled), and looked at. Where XLA cannot compile a loop into one
        kernel (an op its runtime library runs, which `_in_one_kernel` does not know), or copies the
        arena in a kernel with such loops (random program 469: a small loop in a case's branch), it
        is built again with every loop as its ops' kernels, and kept where XLA copies the arena
        fewer times in that one."""
        self.build(args)
        if not self.functions.one_kernel_calls:
            return  # nothing to look at: `jax.jit` compiles it at the first call
        try:
            hlo = self.executable(args).as_text()
        except jax.errors.JaxRuntimeError:
            hlo = None
        if hlo is not None and not self.arena_copies(hlo):
            return
        built = self.kernel, self.jaxpr, self._offsets, self._status
        self.functions.small_loops = False
        self.build(args)
        if hlo is not None and self.arena_copies(self.executable(args)) >= self.arena_copies(hlo):
            self.functions.small_loops = True
            self.kernel, self.jaxpr, self._offsets, self._status = built

    def __call__(self, args: Sequence[Any]) -> tuple[tuple, int, bool]:
        """The outputs, the bytes copied and whether a loop ran other rounds than it said."""
        if self._base is None:
            self._base = jax.device_put(_ZERO)  # on the device once: a host scalar is copied over at every call
        if self.kernel is None:
            self.compile(args)
        status, outputs = self.run(args)
        if status is None:
            status = self._status
        # one small transfer: reading each scalar apart costs a device-to-host round trip each
        low, high, wrong = np.asarray(status).tolist()
        return outputs, low + (high << 20), bool(wrong)

    def run(self, args: Sequence[Any]) -> tuple[jax.Array, tuple]:
        with warnings.catch_warnings() if self.donated else contextlib.nullcontext():
            if self.donated:  # a donated argument no output takes: its bytes are in the arena
                warnings.filterwarnings("ignore", "Some donated buffers were not usable")
            arena, status, outputs = self.kernel(self._arena_of_call(), self._base, self._offsets, *args)
            if self.keep_arena:
                self._arena = arena
            return status, outputs

    def _arena_of_call(self) -> jax.Array:
        """The arena of a call: the one the last call handed back where it is kept, else a new one
        (zeros made on the device by a kernel of their own, which XLA compiles once)."""
        if self.keep_arena and self._arena is not None:
            return self._arena
        return _new_arena(self.words, self.word)

    @property
    def words(self) -> int:
        """The arena's words, one more than its bytes take: no value is ever the whole arena, which XLA
        would take for the arena itself, and compute twice (once into it, once where it is read)."""
        return self.arena_bytes // self.word.itemsize + 1

    @property
    def arena(self) -> jax.Array | None:
        return self._arena

    def traced(self, args: Sequence[Any]) -> jax.stages.Traced:
        """The kernel traced for `args` (after a call)."""
        return self.kernel.trace(*self._abstract_arena(), self._offsets, *args)

    def _abstract_arena(self) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
        """The types of the arena and of `base`, for tracing before any arena exists."""
        return jax.ShapeDtypeStruct((self.words,), self.word), jax.ShapeDtypeStruct((), np.int32)

    def inline(self, args: Sequence[Any]) -> tuple:
        """The outputs of the kernel traced inside an enclosing computation: its arena is a buffer of
        that computation, no call of this `CompiledRun` holds it, and neither the copied bytes nor
        a wrong round count reach the caller."""
        if self.kernel is None:
            with jax_core.eval_context():  # built as at a call: its constants concrete, not the enclosing trace's
                self.compile([jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in map(jax.typeof, args)])
        _, _, outputs = self.kernel(jnp.zeros(self.words, self.word), _ZERO, self._offsets, *args)
        return outputs

    def executable(self, args: Sequence[Any]):
        """The XLA executable of the kernel (after a call), for its memory analysis and HLO."""
        return self.traced(args).lower().compile()

    def temp_bytes(self, args: Sequence[Any]) -> int:
        """XLA's temp memory of the kernel (compiled again to be read, once: a kernel is built for one
        signature)."""
        if self._temp_bytes is None:
            self._temp_bytes = int(self.executable(args).memory_analysis().temp_size_in_bytes)
        return self._temp_bytes

    def arena_copies(self, executable_or_hlo) -> int:
        """Copies of the whole arena XLA put in the kernel (its executable, or its HLO text): 0 where
        it updates the arena in place (and where the arena is empty)."""
        if not self.arena_bytes:
            return 0
        words = f"u{8 * self.word.itemsize}[{self.words}]"
        hlo = executable_or_hlo if isinstance(executable_or_hlo, str) else executable_or_hlo.as_text()
        return len(re.findall(re.escape(words) + r"\{0\} copy\(", hlo))
