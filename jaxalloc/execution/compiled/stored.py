"""A compiled kernel kept as its lowered StableHLO (`StoredKernel`), and called again from it in
another process with no conversion, passes, plan or kernel trace (`jaxalloc.execution.compiled.cache`).

The stored module is called through a primitive of its own (`stored_kernel_p`) that inlines it into
the jitted call that binds it, as `jax.export` does: `jax.export`'s serialization needs a package
that jaxalloc does not depend on (`flatbuffers`), and its call sets up LAPACK on the CPU (SciPy's
import, longer than many first calls) whether the module calls LAPACK or not. A kernel that calls
LAPACK or a host callback is therefore not stored: the first needs that set-up, the second holds a
pointer into the process that traced it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.extend.core
import numpy as np
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import func as func_dialect
from jax.interpreters import mlir

NOT_STORABLE = (b"callback", b"lapack")
"""Names in a lowered module that keep it from being stored (module docstring)."""


@dataclasses.dataclass(frozen=True)
class StoredKernel:
    """A kernel's lowered module (StableHLO bytecode, every argument kept) and what a call needs
    beside it: the arena's size and word, the offsets it takes as arguments and the status it
    returns, or the one it was found to have as it was traced (`CompiledRun.interpret`)."""

    module: bytes
    arena_bytes: int
    word: str
    """The arena's word, a numpy dtype name."""
    offsets: tuple[int, ...]
    status: tuple[int, ...] | None
    """The copied bytes and wrong rounds where the kernel does not return them."""
    status_words: int
    """The words of the status the kernel returns (0 where `status` is known)."""
    donated: tuple[int, ...]
    """The flat arguments the kernel takes donated: those a call deletes (`CompiledRun.donated`)."""
    makes_arena: bool
    """Whether the module makes its arena itself (`CompiledRun.makes_arena`): a function of `(base,
    *offsets, *args)` that returns no arena, else of `(arena, base, *offsets, *args)` that returns it
    first (`keep_arena`)."""
    xla_buffers: bool = False
    """Whether the module holds every value in XLA's own buffers where the plan's arena kernel would
    hold more (`CompiledRun.smaller`)."""

    def __post_init__(self) -> None:
        if (self.status is None) == (self.status_words == 0):
            raise ValueError("a stored kernel returns its status or knows it, not both")

    @property
    def storable(self) -> bool:
        """Whether a later process can run this module as it is (module docstring)."""
        return not any(name in self.module for name in NOT_STORABLE)


stored_kernel_p = jax.extend.core.Primitive("jaxalloc_stored_kernel")
"""A stored kernel's module called on flat arguments: inlined where the call is lowered."""
stored_kernel_p.multiple_results = True


@stored_kernel_p.def_abstract_eval
def _stored_kernel_abstract_eval(*args, module: bytes, out_avals: tuple):
    return out_avals


def _stored_kernel_lowering(ctx, *args, module: bytes, out_avals: tuple):
    with ctx.module_context.context:
        parsed = ir.Module.parse(module)
    name = mlir.merge_mlir_modules(ctx.module_context.module, "jaxalloc_kernel", parsed,
                                   dst_symtab=ctx.module_context.symbol_table)
    results = [mlir.aval_to_ir_type(ctx.module_context, aval) for aval in ctx.avals_out]
    return func_dialect.CallOp(results, ir.FlatSymbolRefAttr.get(name), list(args)).results


mlir.register_lowering(stored_kernel_p, _stored_kernel_lowering)


def donate_argnums(makes_arena: bool, donated: Sequence[int]) -> tuple[int, ...]:
    """The donated arguments of a kernel of `([arena,] base, offsets, *args)`: the arena where it takes
    one, and the flat arguments `donated`."""
    return (*(2 + k for k in donated),) if makes_arena else (0, *(3 + k for k in donated))


def lowered_module(kernel, abstract_args: Sequence) -> bytes:
    """The StableHLO bytecode of a kernel (a function of `([arena,] base, offsets, *args)`) for these
    arguments, every one of them kept: a call passes them all, used or not."""
    lowered = jax.jit(kernel, keep_unused=True).trace(*abstract_args).lower()
    return mlir.module_to_bytecode(lowered.compiler_ir("stablehlo"))


def call_stored(stored: StoredKernel, words: int, out_avals: Sequence, donated: Sequence[int]):
    """A jitted function that calls the stored module as `CompiledRun.kernel` calls the kernel:
    `(base, offsets, *args) -> (None, status, outputs)` where it makes its arena (`makes_arena`), else
    `(arena, base, offsets, *args) -> (arena, status, outputs)`; it donates `donate_argnums(makes_arena,
    donated)`, the arena where it takes one and the arguments `donated` (flat positions among `args`)."""
    arena = (jax.core.ShapedArray((words,), np.dtype(stored.word)),) if not stored.makes_arena else ()
    status = (jax.core.ShapedArray((stored.status_words,), np.int32),) if stored.status_words else ()
    avals = (*arena, *status, *(jax.core.ShapedArray(a.shape, a.dtype, weak_type=a.weak_type) for a in out_avals))
    first, returns_status = len(arena), bool(stored.status_words)

    def kernel(*arguments):
        *arena, base, offsets = arguments[:first + 2]
        results = stored_kernel_p.bind(*arena, base, *offsets, *arguments[first + 2:], module=stored.module, out_avals=avals)
        return (results[0] if first else None, results[first] if returns_status else None,
                tuple(results[first + returns_status:]))

    return jax.jit(kernel, donate_argnums=donate_argnums(stored.makes_arena, donated))
