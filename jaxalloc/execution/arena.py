"""The arena a planned function runs in: one `uint8` jax array, every planned value at its offset.

A value in the arena is known by its byte offset; its IR type says how to read it. An op that
runs often becomes one jitted kernel that reads its operands out of the arena, applies the
primitive and writes its results back at their offsets; until then it is bound eagerly between
reads and writes compiled once per layout (`FUSE_AFTER`). The arena is donated to every kernel
that writes, so XLA updates it in place instead of copying it per op. Offsets are kernel
arguments, not constants, so ops that differ only in where their values live share one kernel.

Every read and write of the arena goes through `Arena.run` (kernels, copies, moves), which calls
`reading` before and `written` after: the sanitizer (`mode="checked"`) checks and records there.

Bytes are stored as they are in memory (a bitcast per dtype); types XLA cannot bitcast to
bytes go through a same-sized stand-in: bool as uint8, complex as a pair of floats, 2- and
4-bit types widened to 8 bits (their planned size counts one byte per element).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax
from xdsl.ir import Attribute

from jaxalloc.dialects.jx import KeyType
from jaxalloc.errors import UnsupportedProgramError
from jaxalloc.frontend.bindings import Binding
from jaxalloc.frontend.types import byte_size, dtype_of, key_words

MAX_ARENA_BYTES = 2**31 - 1
"""Offsets are passed to kernels as int32."""

FUSE_AFTER = 8
"""Runs of an op before it gets a fused kernel of its own. Until then it runs unfused: an eager
bind between reads and writes that are compiled once per layout, so a program run once compiles
almost nothing of its own; ops that run often (long loops, repeated calls) fuse. A kernel of its
own takes XLA some 50-130 ms to compile on a CPU, where an unfused run dispatches kernels already
compiled: an op of a loop of a few rounds does not pay that compile back."""


@dataclass(frozen=True)
class Layout:
    """How a value of one IR type is laid out as bytes in the arena."""

    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int
    key_impl: str | None = None

    @property
    def stored_dtype(self) -> np.dtype:
        """The dtype whose bytes are written: the value's own, or its same-sized stand-in."""
        if self.dtype == np.bool_:
            return np.dtype(np.uint8)
        if self.dtype.kind == "c":
            return np.dtype(np.float32 if self.dtype.itemsize == 8 else np.float64)
        if jnp.issubdtype(self.dtype, jnp.floating) and ml_dtypes.finfo(self.dtype).bits < 8:
            return np.dtype(ml_dtypes.float8_e4m3fn)  # holds every 4- and 6-bit float exactly
        if jnp.issubdtype(self.dtype, jnp.integer) and ml_dtypes.iinfo(self.dtype).bits < 8:
            return np.dtype(np.uint8 if jnp.issubdtype(self.dtype, jnp.unsignedinteger) else np.int8)
        return self.dtype

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The shape of the stand-in: a key's words or a complex number's two parts add an axis."""
        if self.key_impl is not None:
            return (*self.shape, key_words(self.key_impl))
        return (*self.shape, 2) if self.dtype.kind == "c" else self.shape


@functools.cache
def layout_of(type_: Attribute) -> Layout:
    """The layout of values of an IR tensor type."""
    element = type_.element_type
    impl = element.impl.data if isinstance(element, KeyType) else None
    return Layout(tuple(type_.get_shape()), dtype_of(element), byte_size(type_), impl)


def to_bytes(value: jax.Array, layout: Layout) -> jax.Array:
    """`value` as a flat uint8 array of `layout.nbytes` bytes (traced inside a kernel)."""
    return to_words(value, layout, np.dtype(np.uint8))


def from_bytes(data: jax.Array, layout: Layout) -> jax.Array:
    """The value whose bytes are `data` (traced inside a kernel)."""
    return from_words(data, layout)


WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32)}
"""The unsigned type of each word width an arena may be kept in."""


def to_words(value: jax.Array, layout: Layout, word: np.dtype) -> jax.Array:
    """`value` as a flat array of `word`s (traced inside a kernel). A value whose last word it fills
    only in part is padded with zero bytes: its slot is a whole number of words, so they are its own."""
    if layout.key_impl is not None:
        value = jax.random.key_data(value)
    elif layout.dtype.kind == "c":
        value = jnp.stack([value.real, value.imag], axis=-1)
    stored = layout.stored_dtype
    if value.dtype != stored:
        value = value.astype(stored)
    if stored.itemsize < word.itemsize:  # elements gathered into words: XLA reduces them, a kernel of its own
        per_word = word.itemsize // stored.itemsize
        value = jnp.pad(value.reshape(-1), (0, -value.size % per_word)).reshape(-1, per_word)
    if stored != word:
        value = lax.bitcast_convert_type(value, word)
    return _shaped(value, (value.size,))


def from_words(data: jax.Array, layout: Layout) -> jax.Array:
    """The value whose words are `data` (traced inside a kernel): whole words, the value's bytes first."""
    stored, width = layout.stored_dtype, data.dtype.itemsize
    if stored.itemsize > width:  # words assembled into elements: XLA reduces them
        value = lax.bitcast_convert_type(data.reshape(-1, stored.itemsize // width), stored)
    elif stored != data.dtype:  # a bitcast of each word, or its split into elements: fused into the reader
        value = lax.bitcast_convert_type(data, stored)
    else:
        value = data
    count = layout.nbytes // stored.itemsize
    value = _shaped(value, (value.size,))
    value = _shaped(value if value.size == count else value[:count], layout.stored_shape)
    if layout.key_impl is not None:
        return jax.random.wrap_key_data(value, impl=layout.key_impl)
    if layout.dtype == np.bool_:
        return value != 0
    if layout.dtype.kind == "c":
        return lax.complex(value[..., 0], value[..., 1])
    return value if value.dtype == layout.dtype else value.astype(layout.dtype)


def _shaped(value: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """`value` reshaped, by `lax` itself: every read and write of a kernel's trace reshapes."""
    return value if value.shape == shape else lax.reshape(value, shape)


Located = int | jax.Array
"""A value during an arena run: its byte offset in the arena, or a jax array outside it."""


class _Copy:
    """The op that moves a value into or out of the arena unchanged."""

    key = "copy"

    @staticmethod
    def bind(*values):
        return values


COPY = _Copy()


class Arena:
    """The memory of one run of a planned function, and the bytes copied inside it."""

    def __init__(self, nbytes: int):
        if nbytes > MAX_ARENA_BYTES:
            raise UnsupportedProgramError(
                f"the arena needs {nbytes:,} bytes; arena mode addresses at most {MAX_ARENA_BYTES:,} "
                "(run with mode='eager')"
            )
        self.bytes = jnp.zeros((nbytes,), jnp.uint8)
        self.copied_bytes = 0
        self.current: Any = None
        """The op being run, for messages about what it reads and writes."""
        self.rounds: list[list] = []
        """`[loop op, round]` of every loop being run, outermost first."""

    def run(
        self,
        op: Binding,
        inputs: Sequence[Located],
        in_layouts: Sequence[Layout],
        places: Sequence[int | None],
        out_layouts: Sequence[Layout],
        kernels: dict | None = None,
    ) -> tuple[Located, ...]:
        """Apply `op` to `inputs`; results with a place are written there, the rest returned.

        `kernels` holds the op's own state by which inputs and results are in the arena: how often
        it ran, then its fused kernel. Without it the op always runs as one fused kernel.
        """
        self.reading(inputs, in_layouts)
        results = self._execute(op, inputs, in_layouts, places, out_layouts, kernels)
        return self.written(results, out_layouts)

    def reading(self, inputs: Sequence[Located], layouts: Sequence[Layout]) -> None:
        """Called before an op reads its inputs (the sanitizer checks them here)."""

    def written(self, results: tuple[Located, ...], layouts: Sequence[Layout]) -> tuple[Located, ...]:
        """Called after an op wrote its placed results; returns how the run knows them from now on."""
        return results

    def _execute(self, op, inputs, in_layouts, places, out_layouts, kernels=None) -> tuple[Located, ...]:
        in_arena = tuple(isinstance(x, int) for x in inputs)
        written = tuple(place is not None for place in places)
        if not any(in_arena) and not any(written):
            return op.bind(*inputs)
        kernel = _kernel(op, in_arena, in_layouts, written, out_layouts) if kernels is None else kernels.get((in_arena, written), 0)
        if isinstance(kernel, int):
            if kernel < FUSE_AFTER:
                kernels[in_arena, written] = kernel + 1
                return self._run_unfused(op, inputs, in_layouts, places, out_layouts)
            kernel = kernels[in_arena, written] = _kernel(op, in_arena, in_layouts, written, out_layouts)
        offsets = np.array([x for x in inputs if isinstance(x, int)] + [p for p in places if p is not None], np.int32)
        self.bytes, kept = kernel(self.bytes, offsets, tuple(x for x in inputs if not isinstance(x, int)))
        kept = iter(kept)
        return tuple(next(kept) if place is None else place for place in places)

    def _run_unfused(self, op, inputs, in_layouts, places, out_layouts) -> tuple[Located, ...]:
        """The op bound eagerly between a read of each arena operand and a write of each placed
        result: those kernels depend on layouts alone, so they are compiled once for many ops."""
        values = [x if not isinstance(x, int) else self._execute(COPY, (x,), (layout,), (None,), (layout,))[0]
                  for x, layout in zip(inputs, in_layouts)]
        results = op.bind(*values)
        for result, place, layout in zip(results, places, out_layouts):
            if place is not None:
                self._execute(COPY, (result,), (layout,), (place,), (layout,))
        return tuple(result if place is None else place for result, place in zip(results, places))

    def enter(self, values: Sequence[jax.Array], layouts: Sequence[Layout], places: Sequence[int],
              arguments: Sequence[Any]) -> tuple[Located, ...]:
        """Donated arguments (the IR's `arguments`) written at their places as the call starts: the
        plan's own rows, not copies it failed to avoid."""
        return self.run(COPY, values, layouts, places, layouts)

    def read(self, value: Located, layout: Layout) -> jax.Array:
        """The value as a jax array (out of the arena if it is there)."""
        if not isinstance(value, int):
            return value
        return self.run(COPY, (value,), (layout,), (None,), (layout,))[0]

    def copy_out(self, value: Located, layout: Layout) -> jax.Array:
        """A value read out of the arena into an array of its own, counted as copied."""
        self.copied_bytes += layout.nbytes
        return self.read(value, layout)

    def move(self, values: Sequence[Located], layouts: Sequence[Layout], places: Sequence[int]) -> tuple[Located, ...]:
        """Put each value at its place, copying those found elsewhere; every source is read
        before anything is written, so values may move between each other's places, and one value
        bound for one place twice moves once. Returns the values at their places."""
        first: dict[tuple, int] = {}
        for k, (v, p) in enumerate(zip(values, places)):
            if not isinstance(v, int) or v != p:
                first.setdefault((v if isinstance(v, int) else id(v), p), k)
        moves = list(first.values())
        if not moves:
            return tuple(values)
        moved = self.run(COPY, [values[k] for k in moves], [layouts[k] for k in moves], [places[k] for k in moves],
                         [layouts[k] for k in moves])
        self.copied_bytes += sum(layouts[k].nbytes for k in moves)
        at = dict(zip(first, moved))
        return tuple(v if isinstance(v, int) and v == p else at[v if isinstance(v, int) else id(v), p]
                     for v, p in zip(values, places))


_KERNELS: dict[tuple, Callable] = {}


def _kernel(op: Binding, in_arena: tuple[bool, ...], in_layouts, written: tuple[bool, ...], out_layouts):
    """One op as a jitted function `(arena, offsets, outside) -> (arena, results kept outside)`.

    Inputs marked `in_arena` are read from the arena (the others are passed in `outside`);
    results marked `written` are written into it. `offsets` lists the arena inputs' offsets,
    then the written results'. Ops with equal `key`s share one kernel (the cache holds the op,
    so an identity in a key is never reused).
    """
    read = tuple(layout if a else None for a, layout in zip(in_arena, in_layouts))
    write = tuple(layout if w else None for w, layout in zip(written, out_layouts))
    key = (op.key, read, write)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _compile(op.bind, read, write)
    return kernel


def read_bytes(arena: jax.Array, offset: jax.Array, nbytes: int) -> jax.Array:
    """`nbytes` elements (bytes, or a compiled kernel's words) of the arena from `offset`, behind a
    barrier: XLA would otherwise merge this slice with a `dynamic_slice` of the program that reads
    the value, and the merged slice clamps its start to the arena instead of to the value (a wrong
    answer for out-of-range starts)."""
    return lax.optimization_barrier(lax.dynamic_slice(arena, (offset,), (nbytes,), allow_negative_indices=False))


def _compile(bind, read: tuple[Layout | None, ...], write: tuple[Layout | None, ...]):
    def kernel(arena: jax.Array, offsets: jax.Array, outside: tuple[Any, ...]):
        slots, given = iter(range(len(offsets))), iter(outside)
        inputs = [
            next(given) if layout is None
            else from_bytes(read_bytes(arena, offsets[next(slots)], layout.nbytes), layout)
            for layout in read
        ]
        kept = []
        for result, layout in zip(bind(*inputs), write):
            if layout is None:
                kept.append(result)
            else:
                arena = lax.dynamic_update_slice(arena, to_bytes(result, layout), (offsets[next(slots)],))
        return arena, tuple(kept)

    return jax.jit(kernel, donate_argnums=0)
