"""XLA's memory statistics for a function, beside jaxalloc's plan of its jaxpr.

`jax.jit(f).lower(*args).compile().memory_analysis()` gives the numbers JAX users know: argument,
output, alias and temp bytes, and the peak. On CPU two compilations are reported:

- default flags: XLA runs matmul/conv chains inside `ynn_fusion` custom calls, whose scratch
  memory `temp_size_in_bytes` does not count;
- matmul fusion off (`xla_cpu_experimental_ynn_fusion_type=""`): every intermediate XLA keeps is
  in temp. This is the baseline for a buffer planner.

XLA also fuses elementwise chains in both, so many jaxpr values never exist there; the ratio
arena / temp is therefore an end-to-end comparison (planner and fusion), not allocator against
allocator. `jaxalloc.xla_buffers` gives that one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import jax

from jaxalloc.text import format_size, text_table

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


def xla_memory(fn: Callable, args: tuple, kwargs: Mapping | None = None, *, fusion: bool = True) -> XlaMemory:
    """Compile `fn` for `args` (arrays or ShapeDtypeStructs) and read `memory_analysis()`.

    `fusion=False` compiles with `FUSION_OFF` (XLA CPU's matmul/conv fusion off).
    """
    options = None if fusion else dict(FUSION_OFF)
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
    )


@dataclass(frozen=True)
class XlaComparison:
    """XLA's memory statistics for a function beside jaxalloc's plan of its jaxpr."""

    function: str
    backend: str
    xla: tuple[XlaMemory, ...]
    """Default flags first; on CPU also matmul fusion off."""
    allocator: str
    arena_bytes: int
    lower_bound: int
    include_outputs: bool
    """Whether the arena holds the outputs too (then XLA's outputs are added to its temp to compare)."""
    total_bytes: int | None = None
    """The planned buffers' sizes added up (ONNC's total tensor size: a plan that reuses nothing)."""

    def comparable(self, memory: XlaMemory) -> int:
        """XLA's bytes for what the arena holds: temp, plus outputs when the plan includes them."""
        return memory.temp_size_in_bytes + (memory.output_size_in_bytes if self.include_outputs else 0)

    def ratio(self, memory: XlaMemory) -> float | None:
        """Arena over XLA's comparable bytes (None when XLA needs none)."""
        xla = self.comparable(memory)
        return self.arena_bytes / xla if xla else None

    def baseline(self) -> XlaMemory:
        """The compilation to compare a buffer planner with: fusion off where there is one."""
        return self.xla[-1]

    def table(self) -> str:
        """A text table: XLA's rows, then the arena and the bound, with arena / temp per XLA row."""
        temp = "temp + output" if self.include_outputs else "temp"
        header = ["", "argument", "output", "alias", temp, "peak", "arena / " + temp]
        rows = []
        for m in self.xla:
            ratio = self.ratio(m)
            rows.append(
                [
                    f"XLA, {m.flags}",
                    format_size(m.argument_size_in_bytes),
                    format_size(m.output_size_in_bytes),
                    format_size(m.alias_size_in_bytes),
                    format_size(self.comparable(m)),
                    format_size(m.peak_memory_in_bytes),
                    "n/a" if ratio is None else f"{ratio:.2f}",
                ]
            )
        rows.append([f"jaxalloc arena ({self.allocator})", "", "", "", format_size(self.arena_bytes), "", ""])
        rows.append(["jaxalloc lower bound (max-live)", "", "", "", format_size(self.lower_bound), "", ""])
        if self.total_bytes is not None:
            footprint = f"footprint {self.arena_bytes / self.total_bytes:.1%}" if self.total_bytes else ""
            rows.append(["jaxalloc total buffer size (no reuse)", "", "", "", format_size(self.total_bytes), "", footprint])
        lines = [f"{self.function} on {self.backend}: XLA's memory_analysis() beside jaxalloc's plan of the jaxpr"]
        lines += text_table(header, rows)
        lines.append("")
        lines.append(self.explanation())
        return "\n".join(lines)

    def explanation(self) -> str:
        """Why the XLA rows differ from each other and from the arena, in words."""
        parts = []
        if len(self.xla) > 1:
            default, off = self.xla[0], self.xla[-1]
            why = (
                "with default flags XLA CPU runs matmul/conv chains inside `ynn_fusion` custom calls "
                f"({default.ynn_fusions} here) whose scratch memory temp does not count, and keeps other buffers "
                'between them; with matmul fusion off (xla_cpu_experimental_ynn_fusion_type="") every '
                "intermediate XLA keeps is a buffer counted in temp: that row is the baseline for a buffer planner."
            )
            if default.temp_size_in_bytes == off.temp_size_in_bytes:
                parts.append(f"The two XLA temps are equal here. They can differ: {why}")
            else:
                parts.append(f"The two XLA temps differ because {why}")
        parts.append(
            "Arena / temp compares planner and fusion together: XLA fuses elementwise chains, so many "
            "jaxpr values never exist as XLA buffers (allocator against allocator on XLA's own buffers: "
            "`jaxalloc compare` without --no-replan, or jaxalloc.xla_buffers)."
        )
        if self.backend == "cpu":
            parts.append("On CPU XLA's peak is arguments + outputs - alias + constants: it leaves temp out.")
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.table()


def compare_with_xla(
    fn: Callable,
    args: tuple,
    kwargs: Mapping | None = None,
    *,
    allocator: str,
    arena_bytes: int,
    lower_bound: int,
    include_outputs: bool = False,
    total_bytes: int | None = None,
) -> XlaComparison:
    """XLA's statistics for `fn(*args, **kwargs)` (default flags, and fusion off on CPU) beside a plan."""
    backend = jax.default_backend()
    xla = [xla_memory(fn, args, kwargs)]
    if backend == "cpu":
        xla.append(xla_memory(fn, args, kwargs, fusion=False))
    return XlaComparison(
        function=getattr(fn, "__name__", type(fn).__name__),
        backend=backend,
        xla=tuple(xla),
        allocator=allocator,
        arena_bytes=arena_bytes,
        lower_bound=lower_bound,
        include_outputs=include_outputs,
        total_bytes=total_bytes,
    )
