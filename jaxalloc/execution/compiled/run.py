"""One planned module run as one jitted kernel over an arena (`CompiledRun`): the module
interpreted once per signature under tracing (`CompiledFunctions`), its offsets made arguments
(`offsets_as_arguments`), the result lowered as one call. The kernel makes its arena itself, a
buffer of XLA's temp memory that it updates in place and drops as it ends; with `keep_arena` one
arena is kept between calls instead, donated to each and handed back. Donated arguments
(`mem.args`) are written at their slots as the kernel starts, and donated to it too."""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
from jax import lax
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
from jaxalloc.execution.compiled.stored import StoredKernel, call_stored, donate_argnums, lowered_module
from jaxalloc.execution.interpreter import Schedules, TracedJxFunctions, make_interpreter, with_weak_type


_ZERO = np.int32(0)
"""The kernel's argument `base`."""


def _jit_call(closed: jax.extend.core.ClosedJaxpr) -> dict:
    """The parameters of one `jit` call of `closed`: lowered as it is, where evaluating it under a
    new trace would bind each of its ops again (0.3 s of the first call of the transformer training
    step). Taken from a call of two arguments and three results, each tuple of one entry per
    argument or per result made as long as `closed`'s."""
    with jax.disable_jit(False):  # under `jax.disable_jit()` too: no `jit` equation is traced there
        template = jax.make_jaxpr(jax.jit(lambda a, b: (a, b, a)))(0, 0).eqns[0].params
    counts = {2: len(closed.in_avals), 3: len(closed.out_avals)}
    call = {k: v[:1] * counts[len(v)] if isinstance(v, tuple) and len(v) in counts else v for k, v in template.items()}
    return dict(call, jaxpr=closed, name="kernel")


def making_arena(kernel: Callable, words: int, word) -> Callable:
    """`kernel`, a function of `(arena, base, offsets, *args)`, as one of `(base, offsets, *args)` that
    makes its arena of `words` zero words itself and hands back no arena: `(None, status, outputs)`.

    The zeros are `base` (always 0, which XLA cannot see) broadcast, so that XLA cannot fold a read
    of the arena before its first write into a constant. The arena is then a buffer of the kernel's
    own temp memory, allocated with the rest of it: a new array made for every call and donated to
    it would be a dispatch of its own (a quarter of a small kernel's call) and, in a new process, an
    executable of its own to compile."""

    def with_arena(base, offsets, *args):
        arena = lax.broadcast(lax.convert_element_type(base, word), (words,))
        _, status, outputs = kernel(arena, base, offsets, *args)
        return None, status, outputs

    return with_arena


class CompiledRun:
    """One planned module as one jitted function over an arena: one the kernel makes itself each
    call, or one kept between calls and donated to each (`keep_arena`)."""

    def __init__(self, module, func_name: str, arena_bytes: int, functions: CompiledFunctions,
                 donated: Sequence[int] = (), out_avals: Sequence[Any] = (), small_loops: bool = True,
                 keep_arena: bool = False, store: bool = False):
        self._set_up(arena_bytes, donated, out_avals, keep_arena)
        self.functions: CompiledFunctions | None = functions
        self.module, self.func_name = module, func_name
        granule = _granule(module, arena_bytes)
        self.word = functions.arena.word = WORDS[min(granule, 4)]
        functions.arena.paddable = granule >= 2 * self.word.itemsize
        functions.small_loops = small_loops and jax.default_backend() == "cpu" and arena_bytes > 0
        self.store = store
        """Whether the kernel is built to be stored (`self.stored`) and called as a later process that
        loads it calls it, so that both compile the same module: JAX's persistent compilation cache
        then has the executable the later one compiles."""

    def _set_up(self, arena_bytes: int, donated: Sequence[int], out_avals: Sequence[Any], keep_arena: bool) -> None:
        """What a call needs, however the kernel is made."""
        self.arena_bytes, self.donated = arena_bytes, tuple(donated)
        self.keep_arena = keep_arena
        """Whether the arena stays allocated between calls, donated to each and handed back; else the
        kernel makes it (`makes_arena`), a buffer of its temp memory, dropped as the call ends."""
        # the outputs' types: the kernel gives them their weak types, as `jax.jit` does, where a
        # conversion after each call would cost a dispatch of its own
        self.out_avals = tuple(out_avals)
        self._arena: jax.Array | None = None
        self._base: jax.Array | None = None
        self.kernel: Callable | None = None
        self.jaxpr: jax.extend.core.ClosedJaxpr | None = None
        """What the kernel computes (after a call): the arena, `base`, the arguments, then the offsets."""
        self._offsets: tuple = ()
        self._status: tuple[int, ...] | None = None
        """The kernel's status (`_status_of`) where no op of it can change it (`interpret`): what every
        call finds, with nothing read back."""
        self._memory: tuple[int, int] | None = None
        self._executable = None
        """The executable compiled to choose the kernel (`smaller`), kept for `memory`: reading its HLO
        costs a first call that never asks for it (0.09 s of the transformer (scan) training step's)."""
        self.stored: StoredKernel | None = None
        """The kernel as a later process can load it (`store`), where it can (`StoredKernel.storable`)."""
        self.loaded = False
        """Whether the kernel is one an earlier process stored (`from_stored`)."""
        self.xla_buffers = False
        """Whether the kernel holds every value in XLA's own buffers, chosen over the plan's arena
        kernel, which would hold more (`smaller`)."""

    @property
    def makes_arena(self) -> bool:
        """Whether the kernel makes its arena itself (`making_arena`), as it does but with `keep_arena`:
        it then takes no arena and hands none back, and its XLA temp memory holds the arena."""
        return not self.keep_arena

    @classmethod
    def from_stored(cls, stored: StoredKernel, out_avals: Sequence[Any], keep_arena: bool = False) -> CompiledRun:
        """The kernel an earlier process stored, called as that process called it: no module to
        interpret, no kernel to trace."""
        if stored.makes_arena == keep_arena:
            raise ValueError("a stored kernel that makes its arena runs without keep_arena, one that takes it with it")
        run = cls.__new__(cls)
        run._set_up(stored.arena_bytes, stored.donated, out_avals, keep_arena)
        run.functions, run.module, run.func_name, run.store = None, None, "", False
        run.word = np.dtype(stored.word)
        run.stored, run.loaded, run.xla_buffers = stored, True, stored.xla_buffers
        run.kernel = call_stored(stored, run.words, out_avals, run.donated)
        run._offsets = tuple(jax.device_put([np.int32(word) for word in stored.offsets]))
        run._status = stored.status
        return run

    def interpret(self, arena, base, *args):
        """The module run by the interpreter over the traced arena: the kernel, offsets still constants."""
        functions = self.functions
        if not self.arena_bytes:
            self._status = (0, 0, 0)  # nothing copied, no ring whose rounds matter
            return arena, None, self._typed(self.interpret_outside(args))
        functions.arena.bytes, functions.arena.base = arena, base
        interpreter = make_interpreter(self.module, functions)
        outputs = self._typed(interpreter.call_op(self.func_name, (arena, *args)))
        status = (*functions.arena.copied, functions.wrong_rounds)
        if not any(isinstance(s, jax.core.Tracer) for s in status):
            # known as it is traced: a constant output would be a kernel XLA compiles of its own
            self._status = tuple(np.array(status, np.int32).tolist())
            return functions.arena.bytes, None, outputs
        return functions.arena.bytes, jnp.stack([jnp.asarray(s, jnp.int32) for s in status]), outputs

    def interpret_outside(self, args) -> tuple:
        """The outputs of a plan that puts no value in the arena (every value XLA's: small, a
        product's, an output): the module's ops as they are, which XLA compiles as it does
        `jax.jit`'s, with none of the orderings a kernel that updates an arena in place needs."""
        functions = TracedJxFunctions(self.functions.table, self.functions.schedules)
        return make_interpreter(self.module, functions).call_op(self.func_name, args)

    def _typed(self, outputs: Sequence[Any]) -> Sequence[Any]:
        """The outputs with the weak types of `out_avals`, as `jax.jit` gives them."""
        return tuple(map(with_weak_type, outputs, self.out_avals)) if self.out_avals else outputs

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

        if self.makes_arena:
            kernel = making_arena(kernel, self.words, self.word)
        self._offsets = tuple(jax.device_put(np.int32(word)) for word in words)
        self.kernel = jax.jit(kernel, donate_argnums=self.donate_argnums)
        if self.store:
            self._store(kernel, traced, args)

    @property
    def donate_argnums(self) -> tuple[int, ...]:
        """The kernel's donated arguments: the arena where it takes one, and the arguments `donated`."""
        return donate_argnums(self.makes_arena, self.donated)

    def _store(self, kernel: Callable, traced: jax.stages.Traced, args: Sequence[Any]) -> None:
        """The kernel lowered and kept (`stored`), and called through the stored module from now on."""
        _, status, outputs = traced.out_info
        stored = StoredKernel(
            lowered_module(kernel, (*self._abstract_arguments(), self._offsets, *args)), self.arena_bytes,
            np.dtype(self.word).name, tuple(int(offset) for offset in self._offsets),
            None if status is not None else self._status,
            0 if status is None else status.shape[0], self.donated, self.makes_arena, self.xla_buffers,
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

    def on_xla_buffers(self) -> CompiledRun:
        """The same module with no arena: every value in XLA's own buffers, as `jax.jit` would hold the
        program after the passes (`interpret_outside`)."""
        functions = CompiledFunctions(self.functions.table, Schedules(), layouts={})
        run = CompiledRun(self.module, self.func_name, 0, functions, self.donated, self.out_avals, store=self.store)
        run.xla_buffers = True
        return run

    def smaller(self, args: Sequence[Any], aside: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
                ) -> CompiledRun:
        """This kernel compiled for `args`, or the module on XLA's own buffers (`on_xla_buffers`) where
        a call of that holds less (`held_bytes`): XLA computes matrix products, convolutions and small
        values in buffers beside the arena, a pool planned apart from it that peaks at its own
        moment, where XLA's buffer assignment of the whole program plans one. The other is compiled
        while this one is traced, on another thread (XLA's compiler lets go of Python's lock);
        `aside` times what it costs this thread beside its lowering (its trace, the wait for it)."""
        if not self.arena_bytes or not self.makes_arena:
            self.compile(args)
            return self
        xla = self.on_xla_buffers()
        with aside():
            xla.build(args)
        lowered = xla.traced(args).lower()  # here: JAX's settings of this thread (x64, say) are not the other's
        with ThreadPoolExecutor(1) as pool:
            compiling = pool.submit(lowered.compile)
            self.compile(args)
            mine = self.executable(args)
            with aside():
                theirs = compiling.result()
        self._executable, xla._executable = mine, theirs
        return xla if held_bytes(theirs) < held_bytes(mine) else self

    def __call__(self, args: Sequence[Any]) -> tuple[tuple, int, bool]:
        """The outputs, the bytes copied and whether a loop ran other rounds than it said."""
        if self._base is None:
            self._base = jax.device_put(_ZERO)  # on the device once: a host scalar is copied over at every call
        if self.kernel is None:
            self.compile(args)
        status, outputs = self.run(args)
        # known as the kernel was traced, else one small transfer: reading each scalar apart costs a
        # device-to-host round trip each
        return (outputs, *_status_of(self._status if status is None else np.asarray(status).tolist()))

    def warm_call(self) -> tuple[Callable[[Sequence[Any]], tuple], int] | None:
        """What a call need run, once the kernel is compiled, where its status is known as it was
        traced (no loop can run other rounds than it says), the kernel makes its own arena and takes
        no argument donated: the kernel alone, giving the outputs; and the bytes it copies. Else None."""
        if self.kernel is None or self._base is None or self._status is None or not self.makes_arena or self.donated:
            return None
        copied, wrong_rounds = _status_of(self._status)
        if wrong_rounds:
            return None
        kernel, base, offsets = self.kernel, self._base, self._offsets
        return (lambda args: kernel(base, offsets, *args)[2]), copied

    def run(self, args: Sequence[Any]) -> tuple[jax.Array, tuple]:
        if self.makes_arena and not self.donated:
            _, status, outputs = self.kernel(self._base, self._offsets, *args)
            return status, outputs
        with warnings.catch_warnings() if self.donated else contextlib.nullcontext():
            if self.donated:  # a donated argument no output takes: its bytes are in the arena
                warnings.filterwarnings("ignore", "Some donated buffers were not usable")
            arena, status, outputs = self.kernel(*self._arena_of_call(), self._base, self._offsets, *args)
            if self.keep_arena:
                self._arena = arena
            return status, outputs

    def _arena_of_call(self) -> tuple[jax.Array, ...]:
        """The arena argument of a call: none where the kernel makes its own (`makes_arena`), else the
        one the last call handed back, or zeros at the first call."""
        if self.makes_arena:
            return ()
        return (jnp.zeros(self.words, self.word) if self._arena is None else self._arena,)

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
        return self.kernel.trace(*self._abstract_arguments(), self._offsets, *args)

    def _abstract_arguments(self) -> tuple[jax.ShapeDtypeStruct, ...]:
        """The types of the kernel's arguments before its offsets: `base`, after the arena where the
        kernel takes one."""
        arena, base = self._abstract_arena()
        return (base,) if self.makes_arena else (arena, base)

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
        arena = () if self.makes_arena else (jnp.zeros(self.words, self.word),)
        _, _, outputs = self.kernel(*arena, _ZERO, self._offsets, *args)
        return outputs

    def executable(self, args: Sequence[Any]):
        """The XLA executable of the kernel (after a call), for its memory analysis and HLO."""
        return self.traced(args).lower().compile()

    def memory(self, args: Sequence[Any]) -> tuple[int, int]:
        """`memory_of` the kernel's executable for `args`: the one compiled to choose it, or compiled
        again to be read, once (a kernel is built for one signature)."""
        if self._memory is None:
            executable = self.executable(args) if self._executable is None else self._executable
            self._memory = self.memory_of(executable)
        return self._memory

    def memory_of(self, executable) -> tuple[int, int]:
        """XLA's temp memory of an executable of the kernel beside the arena (`temp_beside_arena`), and
        the output bytes it computes in donated arguments' memory, no new memory (an arena taken and
        handed back is the arena)."""
        kept = 0 if self.makes_arena else self.words * self.word.itemsize
        return self.temp_beside_arena(executable), max(0, int(executable.memory_analysis().alias_size_in_bytes) - kept)

    def temp_beside_arena(self, executable) -> int:
        """XLA's temp memory of an executable of the kernel but the arena's: a kernel that makes its
        arena (`makes_arena`) holds it in its temp memory, where `RunStats` counts it apart
        (`arena_bytes`). XLA may put other temporaries in the arena's bytes before the kernel makes
        it or after it last reads it, so this can be less than the temp of the same kernel taking
        its arena (never below 0)."""
        temp = int(executable.memory_analysis().temp_size_in_bytes)
        if not self.makes_arena or not self.arenas_made(executable.as_text()):
            return temp  # none made: the kernel takes it, or XLA dropped an arena nothing reads
        return max(0, temp - self.words * self.word.itemsize)

    def arena_copies(self, executable_or_hlo) -> int:
        """Copies of the whole arena XLA put in the kernel (its executable, or its HLO text): 0 where
        it updates the arena in place (and where the arena is empty). An arena made more than once
        counts as copies too (`arenas_made`): XLA may make a broadcast again where it would copy it."""
        if not self.arena_bytes:
            return 0
        hlo = executable_or_hlo if isinstance(executable_or_hlo, str) else executable_or_hlo.as_text()
        made = self.arenas_made(hlo) if self.makes_arena else 0
        return len(re.findall(re.escape(self._hlo_type) + r"\{0\} copy\(", hlo)) + max(0, made - 1)

    @property
    def _hlo_type(self) -> str:
        """The arena's type as XLA's HLO text writes it."""
        return f"u{8 * self.word.itemsize}[{self.words}]"

    def arenas_made(self, hlo: str) -> int:
        """The buffers of the arena's type that the kernel's HLO makes by a broadcast (`making_arena`):
        every such broadcast outside a fusion, and inside a fusion of that result type unless the
        fusion only slices it (XLA fuses the broadcast into a read of the arena before its first
        write, a read of zeros, which makes no arena)."""
        words, made = self._hlo_type, 0
        for computation in re.split(r"\n(?=\S)", hlo):
            header, _, body = computation.partition("\n")
            fused = header.startswith("%fused")
            if fused and not header.rstrip(" {").endswith(f"-> {words}"):
                continue  # a fusion of another result type: a read of zeros, never an arena
            for root, name in re.findall(r"(ROOT )?(%\S+) = " + re.escape(words) + r"\{0\} broadcast\(", body):
                uses = re.findall(re.escape(name) + r"(?![\w.])", body)[1:]
                slices = re.findall(r"(?:slice|dynamic-slice)\([^)]*" + re.escape(name) + r"(?![\w.])", body)
                made += not fused or bool(root) or len(slices) < len(uses)
        return made


def held_bytes(executable) -> int:
    """What a call of `executable` holds beside its arguments, by `memory_analysis()`: XLA's temp (an
    arena the kernel makes included) and the outputs but those computed in donated arguments' memory."""
    memory = executable.memory_analysis()
    return int(memory.temp_size_in_bytes + memory.output_size_in_bytes - memory.alias_size_in_bytes)


def _status_of(status: Sequence[int]) -> tuple[int, bool]:
    """The copied bytes and whether a loop ran other rounds than it said, from a kernel's status
    (the copied bytes in two words of 20 bits and the rest, and the wrong rounds)."""
    low, high, wrong = status
    return low + (high << 20), bool(wrong)


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
