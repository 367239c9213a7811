"""One planned module run as one jitted kernel over a donated arena (`CompiledRun`): the module
interpreted once per signature under tracing (`CompiledFunctions`), its offsets made arguments
(`offsets_as_arguments`), the result lowered as one call. Each call makes a new arena and donates
it to the kernel, which updates it in place and hands it back to be dropped; with `keep_arena` the
one handed back is kept for the next call. Donated arguments (`mem.args`) are written at their
slots as the kernel starts, and donated to it too."""

from __future__ import annotations

import contextlib
import functools
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
from jax._src import core as jax_core
from jax.extend.core.primitives import jit_p
from xdsl.dialects.builtin import ArrayAttr
from xdsl.ir import Operation

from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import SlotAttr, ViewsAttr
from jaxalloc.execution.arena import WORDS
from jaxalloc.execution.compiled.functions import CompiledFunctions
from jaxalloc.execution.compiled.kinds import Retrace
from jaxalloc.execution.compiled.rewrite import offsets_as_arguments
from jaxalloc.execution.compiled.stored import StoredKernel, call_stored, lowered_module
from jaxalloc.execution.interpreter import make_interpreter, with_weak_type


_ZERO = np.int32(0)
"""The kernel's argument `base`."""


def _jit_call(closed: jax.extend.core.ClosedJaxpr) -> dict:
    """The parameters of one `jit` call of `closed`: lowered as it is, where evaluating it under a
    new trace would bind each of its ops again (0.3 s of the first call of the transformer training
    step). Taken from a call of two arguments and three results, each tuple of one entry per
    argument or per result made as long as `closed`'s."""
    template = jax.make_jaxpr(jax.jit(lambda a, b: (a, b, a)))(0, 0).eqns[0].params
    counts = {2: len(closed.in_avals), 3: len(closed.out_avals)}
    call = {k: v[:1] * counts[len(v)] if isinstance(v, tuple) and len(v) in counts else v for k, v in template.items()}
    return dict(call, jaxpr=closed, name="kernel")




@functools.partial(jax.jit, static_argnums=(0, 1))
def _new_arena(words: int, word) -> jax.Array:
    return jnp.zeros(words, word)


class CompiledRun:
    """One planned module as one jitted function over a donated arena: a new one each call, or one
    kept between calls (`keep_arena`)."""

    def __init__(self, module, func_name: str, arena_bytes: int, functions: CompiledFunctions,
                 donated: Sequence[int] = (), out_avals: Sequence[Any] = (), small_loops: bool = True,
                 keep_arena: bool = False, store: bool = False):
        self._set_up(arena_bytes, donated, out_avals, keep_arena)
        self.functions: CompiledFunctions | None = functions
        self.module, self.func_name = module, func_name
        granule = _granule(module, arena_bytes)
        self.word = functions.arena.word = WORDS[min(granule, 4)]
        functions.arena.paddable = granule >= 2 * self.word.itemsize
        functions.small_loops = small_loops and jax.default_backend() == "cpu"
        self.store = store
        """Whether the kernel is built to be stored (`self.stored`) and called as a later process that
        loads it calls it, so that both compile the same module: JAX's persistent compilation cache
        then has the executable the later one compiles."""

    def _set_up(self, arena_bytes: int, donated: Sequence[int], out_avals: Sequence[Any], keep_arena: bool) -> None:
        """What a call needs, however the kernel is made."""
        self.arena_bytes, self.donated = arena_bytes, tuple(donated)
        self.keep_arena = keep_arena
        """Whether the arena stays allocated between calls, donated to each and handed back (no
        allocation a call, for latency); else each call makes a new one, dropped as the call ends."""
        # the outputs' types: the kernel gives them their weak types, as `jax.jit` does, where a
        # conversion after each call would cost a dispatch of its own
        self.out_avals = tuple(out_avals)
        self._arena: jax.Array | None = None
        self._base: jax.Array | None = None
        self.kernel: Callable | None = None
        self.jaxpr: jax.extend.core.ClosedJaxpr | None = None
        """What the kernel computes (after a call): the arena, `base`, the arguments, then the offsets."""
        self._offsets: tuple = ()
        self._status: np.ndarray | None = None
        """The copied bytes and wrong rounds where no op of the kernel can change them (`interpret`)."""
        self._temp_bytes: int | None = None
        self.stored: StoredKernel | None = None
        """The kernel as a later process can load it (`store`), where it can (`StoredKernel.storable`)."""
        self.loaded = False
        """Whether the kernel is one an earlier process stored (`from_stored`)."""

    @classmethod
    def from_stored(cls, stored: StoredKernel, out_avals: Sequence[Any], keep_arena: bool = False) -> CompiledRun:
        """The kernel an earlier process stored, called as that process called it: no module to
        interpret, no kernel to trace."""
        run = cls.__new__(cls)
        run._set_up(stored.arena_bytes, stored.donated, out_avals, keep_arena)
        run.functions, run.module, run.func_name, run.store = None, None, "", False
        run.word = np.dtype(stored.word)
        run.stored, run.loaded = stored, True
        run.kernel = call_stored(stored, run.words, out_avals, run.donated)
        run._offsets = tuple(jax.device_put([np.int32(word) for word in stored.offsets]))
        run._status = None if stored.status is None else np.array(stored.status, np.int32)
        return run

    def interpret(self, arena, base, *args):
        """The module run by the interpreter over the traced arena: the kernel, offsets still constants."""
        functions = self.functions
        functions.arena.bytes, functions.arena.base = arena, base
        interpreter = make_interpreter(self.module, functions)
        outputs = interpreter.call_op(self.func_name, (arena, *args))
        if self.out_avals:
            outputs = tuple(map(with_weak_type, outputs, self.out_avals))
        status = (*functions.arena.copied, functions.wrong_rounds)
        if not any(isinstance(s, jax.core.Tracer) for s in status):
            # known as it is traced: a constant output would be a kernel XLA compiles of its own
            self._status = np.array(status, np.int32)
            return functions.arena.bytes, None, outputs
        return functions.arena.bytes, jnp.stack([jnp.asarray(s, jnp.int32) for s in status]), outputs

    def build(self, args: Sequence[Any]) -> None:
        """The kernel for `args`: the module interpreted once, then its offsets made arguments
        (`offsets_as_arguments`), the result lowered as one call (`_jit_call`). A new function each
        time: `jax.jit` caches what it traced by function."""
        while True:
            try:
                traced = jax.jit(self.interpret).trace(*self._abstract_arena(), *args)
                break
            except Retrace:
                pass  # traced again, the kinds learned
        closed, words = offsets_as_arguments(traced.jaxpr)
        call, self.jaxpr = _jit_call(closed), closed

        def kernel(arena, base, offsets, *args):
            return jax.tree.unflatten(traced.out_tree, jit_p.bind(arena, base, *args, *offsets, **call))

        self._offsets = tuple(jax.device_put(np.int32(word)) for word in words)
        self.kernel = jax.jit(kernel, donate_argnums=(0, *(3 + k for k in self.donated)))
        if self.store:
            self._store(kernel, traced, args)

    def _store(self, kernel: Callable, traced: jax.stages.Traced, args: Sequence[Any]) -> None:
        """The kernel lowered and kept (`stored`), and called through the stored module from now on."""
        _, status, outputs = traced.out_info
        stored = StoredKernel(
            lowered_module(kernel, (*self._abstract_arena(), self._offsets, *args)), self.arena_bytes,
            np.dtype(self.word).name, tuple(int(offset) for offset in self._offsets),
            None if status is not None else tuple(self._status.tolist()),
            0 if status is None else status.shape[0], self.donated,
        )
        self.stored = stored if stored.storable else None
        if self.stored is not None:
            self.kernel = call_stored(stored, self.words, jax.tree.leaves(outputs), self.donated)

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
        built = self.kernel, self.jaxpr, self._offsets, self._status, self.stored
        self.functions.small_loops = False
        self.build(args)
        if hlo is not None and self.arena_copies(self.executable(args)) >= self.arena_copies(hlo):
            self.functions.small_loops = True
            self.kernel, self.jaxpr, self._offsets, self._status, self.stored = built

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
