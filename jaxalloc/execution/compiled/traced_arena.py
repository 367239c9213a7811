"""The arena while the kernel is traced: an array of words that each op reads its operands from and
writes its results into, in place, at offsets counted from `base` (`guards`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxalloc.execution.arena import WORDS, Layout, from_words, read_bytes, to_words
from jaxalloc.execution.compiled.guards import (
    GROUPED_READ_BYTES, PINNED_WRITE_WORDS, bytes_free, fusible, pinnable_as_is, pinned_as_is, pinned_words, read_all,
    spare_written,
)
from jaxalloc.execution.compiled.kinds import At, Either, Kind, chosen
from jaxalloc.execution.compiled.offsets import over, plus, same


@dataclass
class TracedArena:
    """The traced arena and what every op updates with it: `base`, the bytes copied."""

    bytes: Any = None
    """The arena, as an array of `word`s."""
    word: np.dtype = np.dtype(np.uint8)
    paddable: bool = False
    """Whether every slot holds at least two words, so a value of one word may be written as two."""
    base: Any = 0
    """The kernel's argument `base`, always 0: every offset is counted from it (`guards`)."""
    copied: Any = None
    """Bytes copied so far, as (low 20 bits, the rest in MiB): uint32s that do not overflow."""
    in_one_kernel: bool = False
    """Whether the ops run in a loop compiled into one kernel (`CompiledFunctions.one_kernel`), where
    each operand is read alone and small writes are not pinned."""
    accesses: int = 0
    """Reads and writes of the arena traced so far."""

    def read(self, value, layout: Layout, fenced: bool = True, pinned: bool = False) -> jax.Array:
        """`value` as an array; `fenced=False` lets XLA fuse the read of the arena into the op that
        reads it, for an op that cannot merge it with an index of its own; `pinned` reads it once
        into a buffer of its own (`pinned_words`)."""
        if isinstance(value, At):
            return self.load(value.offset, layout, fenced, pinned)
        if isinstance(value, Either):  # both read, one chosen: a branch over the arena would need all of it
            return chosen(value, self.load(value.offset, layout, fenced, pinned))
        return value

    def load(self, offset, layout: Layout, fenced: bool, pinned: bool) -> jax.Array:
        """The value of `layout` at byte `offset` of the arena."""
        if bytes_free((layout,)):  # no bytes: nothing of the arena to read
            return jnp.zeros(layout.shape, layout.dtype)
        words = self.words(offset, layout.nbytes, fenced)
        return from_words(self.pin(words) if pinned else words, layout)

    def words(self, offset, nbytes: int, fenced: bool = False) -> jax.Array:
        """The words of the `nbytes` at byte `offset` of the arena (`fenced`: see `read`)."""
        width = self.word.itemsize
        self.accesses += 1
        return (read_bytes if fenced else slice_words)(self.bytes, plus(self.base, over(offset, width)), -(-nbytes // width))

    def pin(self, words: jax.Array) -> jax.Array:
        """`pinned_words`, with zeros made from `base`. One word is pinned with a zero beside it: XLA turns
        a reduction of one pair into an elementwise op, which it repeats in each user."""
        zero = lax.convert_element_type(self.base, words.dtype)
        if words.size == 1:
            return self.pin(jnp.concatenate([words, zero[None]]))[:1]
        return pinned_words(words, jnp.broadcast_to(zero, words.shape))

    def pin_value(self, value: jax.Array, layout: Layout) -> jax.Array:
        """`value` computed once into a buffer of its own (`pinned_words`), of its own type and shape where
        a reduction has an identity for its elements: a value of another type or shape would be
        converted back by a copy of its own."""
        if not layout.nbytes:
            return value
        if layout.key_impl is not None:
            return jax.random.wrap_key_data(pinned_as_is(jax.random.key_data(value), self.base), impl=layout.key_impl)
        if pinnable_as_is(jnp.result_type(value)):
            return pinned_as_is(value, self.base)
        return from_words(self.pin(to_words(value, layout, WORDS[min(layout.stored_dtype.itemsize, 4)])), layout)

    def read_operands(self, values: Sequence[Any], layouts: Sequence[Layout], fenced: bool, pinned: bool) -> tuple:
        """The operands of one op. Small ones (`GROUPED_READ_BYTES`) in the arena at more than one
        place are read together, one buffer of their words (`pinned_words`), in one kernel instead of
        one each: XLA fuses no read of the arena at another offset into a kernel that writes the
        arena in place, so each is a kernel of its own. The pinned buffer also keeps XLA from merging a read
        with the op's own index (`INDEXED`). In a loop compiled into one kernel each operand is
        read alone (the diffrax solve of `benchmarks/speed.py`: 10% faster a call)."""
        grouped = {(_identity(v), layout): v.offset for v, layout in zip(values, layouts)
                   if isinstance(v, At) and layout.nbytes <= GROUPED_READ_BYTES}
        if len(grouped) < 2 or self.in_one_kernel:
            return tuple(self.read(v, layout, fenced, pinned) for v, layout in zip(values, layouts))
        loaded = dict(zip(grouped, self.read_together(list(grouped.values()), [layout for _, layout in grouped])))
        return tuple(loaded[key] if (key := (_identity(v), layout)) in loaded else self.read(v, layout, fenced, pinned)
                     for v, layout in zip(values, layouts))

    def read_together(self, offsets: Sequence[Any], layouts: Sequence[Layout]) -> list:
        """The values of `layouts` at byte `offsets`, read into one buffer of their words (`pinned_words`)."""
        parts = [self.words(offset, layout.nbytes) for offset, layout in zip(offsets, layouts)]
        words = self.pin(jnp.concatenate(parts))
        starts = np.cumsum([0, *(part.size for part in parts)])
        return [from_words(words[a:b], layout) for layout, a, b in zip(layouts, starts, starts[1:])]

    def write(self, value: jax.Array, layout: Layout, offset, spread: bool = False, moved: bool = False) -> At:
        """Write `value` at byte `offset`. Its words are what `dynamic_update_slice` writes; where XLA
        would take that write for a cheap one, which it repeats inside later reads, it is made dearer:
        one word is written as two (the second is its slot's padding), and a broadcast (`spread`) or
        a small write (`PINNED_WRITE_WORDS`) is pinned first. `moved`: see `put`."""
        if bytes_free((layout,)):  # an update of no bytes hands XLA the arena as it was, which it copies
            return At(offset)
        words = to_words(value, layout, self.word)
        if words.size == 1 and self.paddable:  # the other word is the slot's own padding
            words = jnp.concatenate([words, jnp.zeros(1, words.dtype)])
        spread = spread or words.size <= PINNED_WRITE_WORDS and not self.in_one_kernel
        self.put(words, plus(self.base, over(offset, self.word.itemsize)), spread, moved)
        return At(offset)

    def put(self, words: jax.Array, start, spread: bool, moved: bool = False) -> None:
        """Write `words` at word `start`, pinned first where they may be a broadcast; words `moved`
        as they are (read out of the arena) get an op for XLA to fuse into the write (`fusible`)."""
        if spread and words.size > 1:  # the slot's words, masked with the zero XLA cannot see
            words = pinned_words(words, slice_words(self.bytes, start, words.size) & lax.convert_element_type(self.base, words.dtype))
        elif moved and not spread:
            words = fusible(words, self.base)
        self.accesses += 1
        self.bytes = lax.dynamic_update_slice(self.bytes, words, (start,), allow_negative_indices=False)

    def touch(self) -> None:
        """Write the arena's spare last word (`CompiledRun.words`) with a zero XLA cannot see: a
        conditional whose branch hands the arena back untouched would hand back its operand, which
        XLA copies where the operand is read after the conditional."""
        self.accesses += 1
        self.bytes = spare_written(self.bytes, self.base, self.word)

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
        self.base = read_all([copied], self.base)
        return copied

    def move(self, values: Sequence[Any], layouts: Sequence[Layout], places: Sequence[Any]) -> tuple:
        """`Arena.move`: each value put at its place, as if every source were read before anything is
        written. Where no source can lie where an earlier move writes, each is read just before it
        is written: XLA orders work by data alone, and a read of the arena that no later write
        depends on makes it copy the whole arena to keep the bytes it reads."""
        first: dict[tuple, int] = {}
        for k, (v, p) in enumerate(zip(values, places)):
            if not (isinstance(v, At) and same(v.offset, p)):
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
        return tuple(v if isinstance(v, At) and same(v.offset, p) else At(p) for v, p in zip(values, places))

    def read_first(self, values: Sequence[Any], layouts: Sequence[Layout]) -> list:
        """The values, those in the arena read before any is written over: into one buffer of their
        words (`pinned_words`), which XLA neither repeats in each write that uses it nor fuses into one.
        A read of its own would be fused into its one write, after the writes before it have
        changed the arena, and XLA would copy the arena to keep the bytes it reads."""
        inside = [k for k, v in enumerate(values) if isinstance(v, At | Either)]
        if len(inside) < 2:
            return [self.read(v, layout) for v, layout in zip(values, layouts)]
        read = list(values)
        for k, loaded in zip(inside, self.read_together([values[k].offset for k in inside], [layouts[k] for k in inside])):
            read[k] = loaded if isinstance(values[k], At) else chosen(values[k], loaded)
        return read


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
        return (Kind.AT, value.offset if isinstance(value.offset, int) else id(value.offset))
    return id(value)


def slice_words(arena: jax.Array, start, count: int) -> jax.Array:
    return lax.dynamic_slice(arena, (start,), (count,), allow_negative_indices=False)
