"""XLA's memory statistics for a function, beside jaxalloc's plan of its jaxpr.

`jax.jit(f).lower(*args).compile().memory_analysis()` gives the numbers JAX users know: argument,
output, alias and temp bytes, and the peak. On CPU two compilations are reported:

- default flags: XLA runs matmul/conv chains inside `ynn_fusion` custom calls, whose scratch
  memory `temp_size_in_bytes` does not count;
- matmul fusion off (`xla_cpu_experimental_ynn_fusion_type=""`): every intermediate XLA keeps is
  in temp or in an output allocation. This is the baseline for a buffer planner.

The fair pair is jaxalloc's arena with the outputs inside against XLA's `temp + output - alias`:
XLA's buffer assignment keeps intermediates in the output allocations before the outputs are
written, so temp alone leaves out memory XLA uses for intermediates, and aliased output bytes are
argument memory reused, not new memory. The arena with the outputs outside over temp alone stays
available (`XlaComparison.temp_ratio`). With donated arguments (`jax.jit(f, donate_argnums=...)`)
XLA may put outputs and temporaries in their memory, and the arena holds them: the pair is the
arena against `temp + output - alias + donated argument bytes`, what XLA holds beyond the other
arguments.

A plan is not yet what a call holds: a compiled call (`planned(f)`, the default mode) holds its arena,
the temp memory XLA needs beside it (where it computes matrix products and convolutions, small values
and what it cannot compute in place in the arena) and its outputs. `CallMemory` gives those parts
from `memory_analysis()` of the call's own kernel, compiled with the same flags as each of XLA's
compilations, and the comparison sets their sum against XLA's figure too.

XLA also fuses elementwise chains in both, so many jaxpr values never exist there; the ratio is
therefore an end-to-end comparison (planner and fusion), not allocator against allocator.
`jaxalloc.xla.buffers` gives that one.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import jax
import numpy as np

from jaxalloc.reports.text import format_size, text_table

FUSION_OFF = {"xla_cpu_experimental_ynn_fusion_type": ""}
"""XLA CPU compiler option: no `ynn_fusion` custom calls, whose scratch memory XLA's temp does not count."""

_YNN_FUSION = '"kind":"__ynn_fusion"'


@dataclass(frozen=True)
class XlaMemory:
    """`memory_analysis()` of one compilation, under XLA's field names."""

    flags: str
    """Which compilation: `default flags` or `matmul fusion off`."""
    argument_size_in_bytes: int
    output_size_in_bytes: int
    alias_size_in_bytes: int
    temp_size_in_bytes: int
    peak_memory_in_bytes: int
    """On CPU: arguments + outputs - aliased + constants; temp is not in it."""
    ynn_fusions: int
    """`ynn_fusion` custom calls in the compiled module (their scratch memory is not in temp)."""
    donated_size_in_bytes: int = 0
    """Bytes of the arguments donated to the compilation (not an XLA field: the leaves' sizes added up)."""


def xla_memory(
    fn: Callable, args: tuple, kwargs: Mapping | None = None, *, fusion: bool = True, donated: Sequence[int] = ()
) -> XlaMemory:
    """Compile `fn` for `args` (arrays or ShapeDtypeStructs) and read `memory_analysis()`.

    `fusion=False` compiles with `FUSION_OFF` (XLA CPU's matmul/conv fusion off). `donated`: the
    flat leaves of `(args, kwargs)` donated, as `jax.jit(f, donate_argnums=...)` donates them.
    """
    options = None if fusion else dict(FUSION_OFF)
    donated_bytes = 0
    if donated:
        leaves, tree = jax.tree_util.tree_flatten((tuple(args), dict(kwargs or {})))

        def flat(*leaves):  # one argument per leaf: donation by leaf, keyword arguments included
            args, kwargs = jax.tree_util.tree_unflatten(tree, leaves)
            return fn(*args, **kwargs)

        flat.__name__ = getattr(fn, "__name__", "main")
        lowered = jax.jit(flat, donate_argnums=tuple(donated)).lower(*leaves)
        donated_bytes = sum(_nbytes(leaves[i]) for i in donated)
        with warnings.catch_warnings():  # a donated argument no output can take: it is still counted
            warnings.filterwarnings("ignore", "Some donated buffers were not usable")
            compiled = lowered.compile(compiler_options=options)
    else:
        compiled = jax.jit(fn).lower(*args, **dict(kwargs or {})).compile(compiler_options=options)
    stats = compiled.memory_analysis()
    return XlaMemory(
        flags="default flags" if fusion else "matmul fusion off",
        argument_size_in_bytes=int(stats.argument_size_in_bytes),
        output_size_in_bytes=int(stats.output_size_in_bytes),
        alias_size_in_bytes=int(stats.alias_size_in_bytes),
        temp_size_in_bytes=int(stats.temp_size_in_bytes),
        peak_memory_in_bytes=int(stats.peak_memory_in_bytes),
        ynn_fusions=compiled.as_text().count(_YNN_FUSION),
        donated_size_in_bytes=donated_bytes,
    )


@dataclass(frozen=True)
class CallMemory:
    """What a compiled call of a planned function holds, by its parts, from `memory_analysis()` of its
    kernel (one compilation's flags)."""

    arena: int
    kernel_temp: int
    """XLA's temp memory of the kernel beside the arena (`CompiledRun.temp_beside_arena`)."""
    outputs: int
    """The outputs the caller receives (`RunStats.output_bytes`)."""
    aliased: int = 0
    """Output bytes XLA computes in donated arguments' memory: no new memory."""
    xla_buffers: bool = False
    """Whether the call runs the module on XLA's own buffers, where the plan's arena kernel would hold
    more (`planned(f, arena="smaller")`)."""

    @property
    def total(self) -> int:
        return self.arena + self.kernel_temp + self.outputs - self.aliased

    def describe(self) -> str:
        aliased = f" - aliased {format_size(self.aliased)}" if self.aliased else ""
        on = "on XLA's own buffers, which hold less than the plan's arena kernel: " if self.xla_buffers else ""
        return (f"{on}arena {format_size(self.arena)} + temp {format_size(self.kernel_temp)} + outputs "
                f"{format_size(self.outputs)}{aliased} = {format_size(self.total)}")


def _nbytes(leaf) -> int:
    aval = leaf if isinstance(leaf, jax.ShapeDtypeStruct) else jax.typeof(leaf)
    return math.prod(aval.shape) * np.dtype(aval.dtype).itemsize



@dataclass(frozen=True)
class XlaComparison:
    """XLA's memory statistics for a function beside jaxalloc's plans of its jaxpr, outputs inside and outside."""

    function: str
    backend: str
    xla: tuple[XlaMemory, ...]
    """Default flags first; on CPU also matmul fusion off."""
    allocator: str
    arena_bytes: int
    """The arena with the outputs inside: the number to set against XLA's `temp + output - alias`."""
    lower_bound: int
    """Max-live of the buffers of that arena."""
    outside_arena_bytes: int
    """The arena with the outputs outside, which only temp alone compares with (`temp_ratio`)."""
    outside_lower_bound: int
    total_bytes: int | None = None
    """The buffers of the arena with the outputs inside added up (ONNC's total tensor size: a plan that reuses nothing)."""
    calls: tuple[CallMemory, ...] = ()
    """A compiled call's memory, one per compilation of `xla` with the same flags; none where the plan
    was not made from a planned function in compiled mode."""

    @staticmethod
    def xla_bytes(memory: XlaMemory) -> int:
        """XLA's memory for the program beyond its arguments: temp, plus the output allocations, which
        hold intermediates before the outputs are written, less the output bytes that alias arguments;
        plus the donated arguments, memory XLA may reuse as the arena reuses theirs."""
        return (memory.temp_size_in_bytes + memory.output_size_in_bytes - memory.alias_size_in_bytes
                + memory.donated_size_in_bytes)

    def ratio(self, memory: XlaMemory) -> float | None:
        """The fair ratio: arena with the outputs inside over `temp + output - alias` (None when XLA needs none)."""
        xla = self.xla_bytes(memory)
        return self.arena_bytes / xla if xla else None

    def temp_ratio(self, memory: XlaMemory) -> float | None:
        """The arena with the outputs outside over temp alone, which understates XLA's memory (None when
        temp is empty)."""
        temp = memory.temp_size_in_bytes
        return self.outside_arena_bytes / temp if temp else None

    def call_ratio(self, memory: XlaMemory) -> float | None:
        """What a compiled call with `memory`'s flags holds (with the donated bytes, as XLA's figure has
        them) over XLA's `temp + output - alias`; None without calls or where XLA needs none."""
        xla = self.xla_bytes(memory)
        return (self.calls[self.xla.index(memory)].total + self.donated) / xla if self.calls and xla else None

    @property
    def donated(self) -> int:
        """Bytes of donated arguments (0 without donation)."""
        return self.xla[0].donated_size_in_bytes

    def baseline(self) -> XlaMemory:
        """The compilation to compare a buffer planner with: fusion off where there is one."""
        return self.xla[-1]

    def table(self) -> str:
        """XLA's compilations and the arena in one table, with the line that says which figure to read
        (why that one: docs/design/assignment.md, "Beside XLA's memory")."""
        donated = " + donated" if self.donated else ""
        header = ["", "output", "alias", "temp", f"temp + output - alias{donated}", "arena / XLA"]
        header += ["call / XLA"] if self.calls else []
        rows = [
            [
                f"XLA, {m.flags}",
                format_size(m.output_size_in_bytes),
                format_size(m.alias_size_in_bytes),
                format_size(m.temp_size_in_bytes),
                format_size(self.xla_bytes(m)),
                _ratio(self.ratio(m)),
                *([_ratio(self.call_ratio(m))] if self.calls else []),
            ]
            for m in self.xla
        ]
        ours = [("jaxalloc arena", self.arena_bytes), ("jaxalloc lower bound", self.lower_bound)]
        if self.total_bytes is not None:
            ours.append(("jaxalloc, no reuse", self.total_bytes))
        rows += [[label, "", "", "", format_size(size), "", *([""] if self.calls else [])] for label, size in ours]
        baseline = self.baseline()
        calls = [f"call, {m.flags}: {call.describe()}" for m, call in zip(self.xla, self.calls)]
        read = [f"Read: arena vs XLA temp + output - alias{donated} ({baseline.flags}): {_ratio(self.ratio(baseline))}"]
        if self.calls:
            read.append(f"What a call holds{donated} vs the same: {_ratio(self.call_ratio(baseline))}")
        return "\n".join([
            f"{self.function} on {self.backend}: XLA's memory_analysis() beside jaxalloc's arena ({self.allocator}), "
            "outputs inside",
            *text_table(header, rows),
            *calls,
            *read,
        ])

    def __str__(self) -> str:
        return self.table()


def _ratio(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}"


def compare_with_xla(
    fn: Callable,
    args: tuple,
    kwargs: Mapping | None = None,
    *,
    allocator: str,
    arena_bytes: int,
    lower_bound: int,
    outside_arena_bytes: int,
    outside_lower_bound: int,
    total_bytes: int | None = None,
    donated: Sequence[int] = (),
    call_memory: Callable[[dict | None], CallMemory] | None = None,
) -> XlaComparison:
    """XLA's statistics for `fn(*args, **kwargs)` (default flags, and fusion off on CPU) beside the plans
    with the outputs inside the arena (`arena_bytes`, `lower_bound`, `total_bytes`) and outside it;
    `donated`: the flat leaves of `(args, kwargs)` donated to XLA, as to the plans. `call_memory`, given
    XLA's compiler options, measures a compiled call with them."""
    backend = jax.default_backend()
    xla = [xla_memory(fn, args, kwargs, donated=donated)]
    if backend == "cpu":
        xla.append(xla_memory(fn, args, kwargs, fusion=False, donated=donated))
    options = (None, dict(FUSION_OFF))[: len(xla)]
    calls = tuple(call_memory(o) for o in options) if call_memory is not None else ()
    return XlaComparison(
        function=getattr(fn, "__name__", type(fn).__name__),
        backend=backend,
        xla=tuple(xla),
        allocator=allocator,
        arena_bytes=arena_bytes,
        lower_bound=lower_bound,
        outside_arena_bytes=outside_arena_bytes,
        outside_lower_bound=outside_lower_bound,
        total_bytes=total_bytes,
        calls=calls,
    )
