"""What keeps XLA from undoing the plan: the ops and limits that stop it from copying the arena or
moving a value off its planned place (docs/design/compiled.md, "Keeping XLA honest", has the whole
table).

XLA orders work by data alone (on the CPU `lax.optimization_barrier` is gone before fusion, so it
orders nothing), copies the whole arena wherever bytes are read after a write changed them in
place, and repeats a cheap op inside each op that uses it. Every offset is counted from the
kernel's argument `base`, which is always 0 but which XLA cannot see; the guards below make reads
and writes wait for one another through it, or hide values from XLA's simplifier. Every compiled
run of the tests fails where XLA put a copy of the arena in its kernel
(`jaxalloc/testing/differential.py`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from xdsl.ir import Operation

from jaxalloc.dialects import jx
from jaxalloc.execution.arena import Layout
from jaxalloc.execution.compiled.offsets import plus


UNSEEN = np.int32(-1)
"""A value `base` (always 0) never has."""


def pinned_words(words: jax.Array, zeros: jax.Array) -> jax.Array:
    """`words` read once into a buffer of their own. XLA copies a cheap read of the arena into every
    op that uses it; where two writes use one read, the second would read bytes the first has
    already overwritten in place, so XLA would copy the whole arena to keep them. A reduction is
    never copied into its users, and XLA cannot see that this one changes nothing: `zeros` are
    made from `base`. Each word is reduced with its zero along the minor axis of the pair: on the
    GPU, the same reduction along the major axis still left two copies of the arena in a kernel.
    Tested by `test_no_write_makes_xla_copy_the_arena` ("several results")."""
    return lax.reduce(jnp.stack([words, zeros], axis=1), words.dtype.type(0), lax.bitwise_or, (1,))


def pinnable_as_is(dtype) -> bool:
    """Whether `pinned_as_is` has an identity for elements of `dtype`: bools, integers and floats of
    whole bytes."""
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.finfo(dtype).bits in (8, 16, 32, 64)
    return jnp.issubdtype(dtype, jnp.bool_) or jnp.issubdtype(dtype, jnp.integer)


def pinned_as_is(x: jax.Array, base: jax.Array) -> jax.Array:
    """`pinned_words` for an array of bools, integers or floats, in its own type and shape: reduced with
    0, the identity of `bitwise_or`, made from `base`, a float as the unsigned integers of its bits.
    XLA's CPU hands a reduction of floats to its YNNPACK library, where 40 such pins took 3.5 ms of
    the transformer (scan) training step's 17 a call; XLA reduces integers with its own code. The reduction
    takes its operands the other way round and its initial value traced, so that it is no program's
    own `reduce_or`, which XLA would merge with it and then read the arena where the merged
    reduction runs. Tested by `test_the_kernel_never_copies_the_arena` and by every differential run
    (a result computed from the arena and kept outside it)."""
    dtype = jnp.result_type(x)
    if jnp.issubdtype(dtype, jnp.floating):
        bits = np.dtype(f"uint{jnp.finfo(dtype).bits}")
        return lax.bitcast_convert_type(pinned_as_is(lax.bitcast_convert_type(x, bits), base), dtype)
    identity = lax.convert_element_type(base, dtype)
    if math.prod(jnp.shape(x)) == 1:  # with the identity beside it, as `TracedArena.pin` does
        pair = pinned_as_is(jnp.concatenate([jnp.ravel(x), identity[None]]), base)
        return pair[:1].reshape(jnp.shape(x))
    stacked = jnp.stack([x, jnp.broadcast_to(identity, jnp.shape(x))], axis=-1)
    return lax.reduce(stacked, identity, lambda a, b: lax.bitwise_or(b, a), (jnp.ndim(x),))


def read_all(inputs: Sequence[Any], base: jax.Array) -> jax.Array:
    """`base` made to depend on the first element of every input (of bool, int or float elements, or
    a PRNG key's data), in a branch that never runs but that XLA cannot drop, as it cannot see
    `base`: a read of the arena that no later write depends on makes XLA copy the arena, so every
    later write waits for these inputs. Tested by `test_the_kernel_never_copies_the_arena` and
    `test_a_conditional_that_hands_the_arena_on_untouched_costs_no_copy_of_it`."""
    numbers = (jax.random.key_data(x) if jax.dtypes.issubdtype(jnp.result_type(x), jax.dtypes.prng_key) else x
               for x in inputs)
    seen = sum(lax.convert_element_type(jnp.ravel(x)[0], jnp.int32) for x in numbers
               if math.prod(jnp.shape(x)) and _real_numbers(jnp.result_type(x)))
    return lax.select(base == UNSEEN, base + seen, base)


def hidden(x, unseen: jax.Array) -> jax.Array:
    """`x`, through a `select` on `unseen` (False) with another value in every element: XLA can
    neither simplify the `select` nor see the value, whatever it knows of `x`. Tested by
    `test_random_program_compiled` (seeds 5 and 814: one-kernel calls that take constants) and
    `test_a_conditional_that_hands_the_arena_on_untouched_costs_no_copy_of_it`."""
    x = jnp.asarray(x)
    if x.dtype == jnp.bool_:
        other = ~x
    else:
        other = lax.bitcast_convert_type(~lax.bitcast_convert_type(x, np.dtype(f"uint{8 * x.dtype.itemsize}")), x.dtype)
    return lax.select(jnp.broadcast_to(unseen, x.shape), other, x)


HIDDEN_BYTES = 1024
"""The most bytes of a value a loop compiled into one kernel takes from outside the arena: each is
copied as it enters the call (`CompiledFunctions.one_kernel`). Tested by
`test_a_small_loop_is_one_kernel`."""


def hideable(x) -> bool:
    """Whether a loop compiled into one kernel can take `x` through `hidden`: numbers, at most
    `HIDDEN_BYTES`."""
    size, dtype = math.prod(jnp.shape(x)), jnp.result_type(x)
    return 0 < size and _of_numbers(dtype) and size * dtype.itemsize <= HIDDEN_BYTES


def _of_numbers(dtype) -> bool:
    """Whether elements of `dtype` are bools, integers or floats (not complex numbers or PRNG keys)."""
    return not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and dtype.kind in "biuf"


def _real_numbers(dtype) -> bool:
    """Whether elements of `dtype` are bools, integers or real floats of any width (bfloat16 and
    the float8 types included)."""
    return any(jnp.issubdtype(dtype, kind) for kind in (jnp.bool_, jnp.integer, jnp.floating))


def fusible(words: jax.Array, base) -> jax.Array:
    """`words`, or'ed with `base` (0, which XLA cannot see). A write of words computed elsewhere (a
    value moved between slots, read out of the arena apart) is a `dynamic_update_slice` that XLA
    fuses with nothing, and compiles with its older emitter, apart from every other such write
    (some 14 ms each); with an op on the words, it is a fusion like the others, compiled once for
    every write of its size. It changes the first call's compile time, not what the kernel
    computes: no test proves it, `benchmarks/first_call.py` measures it."""
    return words | lax.broadcast(lax.convert_element_type(base, words.dtype), words.shape)


SPREADING = frozenset({"broadcast_in_dim", "iota"})
"""Primitives whose result XLA may hold as a broadcast (see `spreads`)."""


def spreads(op: Operation, position: int) -> bool:
    """Whether XLA may see result `position` of `op` as a broadcast: writing a broadcast into the
    arena is an update cheap enough for XLA to repeat inside every later read of the arena, which
    then reads bytes the write already changed in place, and XLA copies the arena to keep them; such
    a write is pinned first. Tested by `test_no_write_makes_xla_copy_the_arena` ("broadcasts and
    constants")."""
    if isinstance(op, jx.FusedOp):
        op = op.body.block.last_op.operands[position].owner
    return not isinstance(op, jx.PrimOp) or op.primitive.data in SPREADING


PINNED_WRITE_WORDS = 8
"""Writes of at most this many words are pinned (`TracedArena.put`), but in a loop compiled into one
kernel: XLA's simplifier may find such a value to be a constant (`x ^ x` is 0), a write cheap enough
to repeat inside a later read, which then reads the arena before the write and makes XLA copy it.
Reading a few words costs little beside the write's own kernel; in one kernel it would slow every
op of the loop. Tested by `test_no_write_makes_xla_copy_the_arena` ("broadcasts and constants")
and `test_random_program_compiled` (seeds 351 and 1158)."""


INDEXED = frozenset(
    {"dynamic_slice", "dynamic_update_slice", "gather", "scatter", "scatter-add", "scatter-sub", "scatter-mul",
     "scatter-min", "scatter-max"}
)
"""Primitives that clamp or drop indices into an operand: XLA's simplifier would merge the slice of
the arena that reads the operand with them, and clamp to the arena instead, so such operands are
read behind a barrier (`arena.read_bytes`). Tested by `test_no_write_makes_xla_copy_the_arena`
("small operands", "stacked rows")."""


def indexes(op: Operation) -> bool:
    """Whether `op` is, or is a fusion holding, a primitive of `INDEXED` (`jx-fuse` joins a window of
    an argument to what reads it, where a donated argument lies in the arena)."""
    if isinstance(op, jx.FusedOp):
        return any(indexes(inner) for inner in op.body.block.ops)
    return isinstance(op, jx.PrimOp) and op.primitive.data in INDEXED


GROUPED_READ_BYTES = 1024
"""Operands of at most this size are read together (`TracedArena.read_operands`), one pinned buffer
of their words that XLA cannot merge with an index of the op's own either: for them a kernel costs
more than copying their bytes, where a larger operand is read where it lies (XLA hands a slice of
the arena to a matrix product without a copy). Tested by `test_no_write_makes_xla_copy_the_arena`
("small operands")."""


def bytes_free(layouts: Sequence[Layout]) -> bool:
    """Whether every value of `layouts` has no bytes (and no key type, whose zeros jnp cannot make):
    such values are made, not read from or written to the arena, where XLA took an update of no
    bytes for a broadcast written before a read. Tested by
    `test_values_of_no_bytes_are_made_where_they_are_read_not_read_from_the_arena`."""
    return all(not layout.nbytes and layout.key_impl is None for layout in layouts)


SMALL_LOOP_BYTES = 3 * 1024
"""A loop whose round reads and writes at most this many bytes (its ops' operands and results) is
compiled into one kernel on the CPU: XLA's CPU runtime runs each op of a loop's body as a kernel of
its own, and in the arena an op is two or three kernels (its read, its compute, its write). XLA
does the same for `jax.jit`'s loops of at most 1 KiB by its own count, which the arena's reads and
writes of the same values exceed. Past a few KiB, with the small values outside the
arena (`small_values`), XLA runs a loop faster as its own kernels: a warm call of a diffrax solve
of the benchmarks (2,164 bytes a round) took 1.77 ms as one kernel and 2.81 ms as its ops' kernels,
the library corpus's neural ODE (3,301 bytes) 55 and 30 us, its equinox GRU scan (3,453 bytes) 31
and 26 us. A kernel without an arena makes none: its loops are the module's own, which XLA's CPU
backend makes one kernel by its own count, as it does `jax.jit`'s. Tested by
`test_a_small_loop_is_one_kernel`."""


ONE_KERNEL_CALL = {"xla_cpu_small_call": "true", "inlineable": "false"}
"""The attributes of a loop's call that XLA's CPU backend compiles into one kernel
(`CompiledFunctions.one_kernel`). Tested by `test_a_small_loop_is_one_kernel`."""

OUTSIDE_ONE_KERNEL = frozenset({
    "sort", "top_k", "approx_top_k", "fft", "conv_general_dilated", "cholesky", "lu", "qr", "geqrf",
    "householder_product", "eig", "eigh", "svd", "schur", "hessenberg", "tridiagonal",
    "tridiagonal_solve", "triangular_solve", "debug_callback", "pure_callback", "io_callback", "ffi_call",
    "custom_call",
})
"""Primitives that XLA's CPU backend runs through its runtime library (or, for a convolution, may),
which a loop compiled into one kernel cannot call. Tested by
`test_a_loop_xla_cannot_make_one_kernel_runs_as_its_ops_kernels` (emptied, the kernel is compiled
again without such loops)."""


def compiles_into_one_kernel(op: jx.PrimOp, params) -> bool:
    """Whether XLA's CPU backend can compile `op` into a loop's one kernel: not a primitive of its
    runtime library (`OUTSIDE_ONE_KERNEL`), a scatter of one window (XLA makes it a
    `dynamic_update_slice`), a product of matrices (XLA hands those to a library of its own).
    Tested by `test_a_small_loop_is_one_kernel`."""
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


def spare_written(arena: jax.Array, base, word) -> jax.Array:
    """`arena` with `base` (0, which XLA cannot see) written into its spare last word
    (`CompiledRun.words`): a write XLA must keep, of no value's bytes."""
    return lax.dynamic_update_slice(arena, lax.convert_element_type(base, word)[None], (plus(base, arena.shape[0] - 1),))


def read_everywhere(outputs: list, threaded: int, word, with_arena: bool = True) -> list:
    """The outputs of a loop's one-kernel call (`CompiledFunctions.one_kernel`), the last `threaded`
    the arena, ..., `base`, each made to depend on `base`, which the call made depend on every
    parameter (`read_all`): where XLA finds some of the call's outputs unused (a loop's dead carried
    value), the call still reads every parameter, where one it no longer read would abort the
    process (random program 4 with `passes=()`: a loop whose only write to the arena is a dead
    value). Each result through a `select` that XLA fuses into the call's one kernel, the arena
    with `base` written into its spare word (`spare_written`), or left out (`with_arena` False: a
    call that takes no arena hands none back)."""
    *results, arena = outputs[:len(outputs) - threaded + 1]
    *rest, base = outputs[len(outputs) - threaded + 1:]
    unseen = base == UNSEEN

    def guarded(x):
        return hidden(x, unseen) if math.prod(jnp.shape(x)) and _of_numbers(jnp.result_type(x)) else x

    arena = [spare_written(arena, base, word)] if with_arena else []
    return [*map(guarded, results), *arena, *map(guarded, rest), base]


def packed(values: Sequence[Any]) -> tuple[list[Any], Callable[[Sequence[jax.Array]], list[jax.Array]]]:
    """`values` as one flat array of each dtype (a concatenation, or a constant where all are), and
    how to take those arrays apart again into arrays of the values' shapes (slices that XLA fuses
    into the ops that read them)."""
    shapes = [jnp.shape(v) for v in values]
    groups: dict[Any, list[int]] = {}
    for i, v in enumerate(values):
        groups.setdefault(jnp.result_type(v), []).append(i)
    blobs = [(np if not any(isinstance(values[i], jax.core.Tracer) for i in members) else jnp).concatenate(
        [jnp.ravel(values[i]) if isinstance(values[i], jax.core.Tracer) else np.ravel(values[i]) for i in members])
        for members in groups.values()]

    def unpack(inside: Sequence[jax.Array]) -> list[jax.Array]:
        parts: list[Any] = [None] * len(values)
        for blob, members in zip(inside, groups.values(), strict=True):
            at = 0
            for i in members:
                size = math.prod(shapes[i])
                parts[i] = lax.slice(blob, (at,), (at + size,)).reshape(shapes[i])
                at += size
        return parts

    return blobs, unpack
