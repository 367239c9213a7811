"""jaxalloc against XLA on the benchmark programs, two ways.

1. End to end: XLA's `memory_analysis()` (argument, output, alias, temp and peak bytes; temp with
   default flags and with matmul fusion off) beside nnc's arena for the jaxpr and its max-live bound
   (`Plan.compare_xla()`). XLA's fusion removes intermediates, so this compares planner and fusion.
2. Allocator against allocator: XLA's own `preallocated-temp` buffers and live ranges (fusion off),
   rebuilt from XLA's dump and planned by every allocator (`jaxalloc.xla_buffers`); cells are bytes
   over XLA's temp, the size XLA's heap simulator reached for the same buffers. Every plan, XLA's
   own placement included, passed the independent checker.

    python benchmarks/xla_compare.py [--programs mlp,cnn] [--allocators nnc,best]
"""

from __future__ import annotations

import time

from programs import ALIGNMENT, chosen_programs

from jaxalloc import planned
from jaxalloc.text import format_size
from jaxalloc.xla_buffers import replan_xla_buffers

DEFAULT_ALLOCATORS = ("nnc", "nnc-2018", "greedy-size", "greedy-duration", "best-fit", "beam", "best")


def end_to_end(chosen) -> None:
    header = [
        "program", "argument", "output", "alias", "temp (default)", "temp (fusion off)", "peak",
        "nnc arena", "bound", "nnc / temp off",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    for name, fn, args in chosen:
        plan = planned(fn).plan(*args, allocator="nnc", alignment=ALIGNMENT)
        plan.check()
        comparison = plan.compare_xla()
        default, off = comparison.xla[0], comparison.baseline()
        ratio = comparison.ratio(off)
        cells = [
            name,
            format_size(off.argument_size_in_bytes),
            format_size(off.output_size_in_bytes),
            format_size(off.alias_size_in_bytes),
            format_size(default.temp_size_in_bytes),
            format_size(off.temp_size_in_bytes),
            format_size(off.peak_memory_in_bytes),
            format_size(plan.arena_bytes),
            format_size(plan.lower_bound),
            "n/a" if ratio is None else f"{ratio:.2f}",
        ]
        print("| " + " | ".join(cells) + " |")


def xla_buffers(chosen, allocators) -> list:
    header = ["program", "HLO values", "buffers", "XLA temp (B)", *allocators, "max-live", "nnc - XLA (B)", "best - XLA (B)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    replans = []
    for name, fn, args in chosen:
        replan = replan_xla_buffers(fn, args, allocators=allocators, alignment=ALIGNMENT)
        replans.append((name, replan))
        temp = replan.xla_temp

        def share(size: int) -> str:
            return f"{size / temp:.4f}" if temp else "n/a"

        def difference(allocator: str) -> str:
            return f"{replan.result(allocator).bytes - temp:+,}" if allocator in allocators else "n/a"

        cells = [
            name,
            f"{replan.values:,}",
            f"{replan.blocks:,}",
            f"{temp:,}",
            *(share(r.bytes) for r in replan.results),
            share(replan.bound),
            difference("nnc"),
            difference("best"),
        ]
        print("| " + " | ".join(cells) + " |")
    return replans


def main() -> None:
    chosen, allocators = chosen_programs(__doc__.splitlines()[0], DEFAULT_ALLOCATORS)
    began = time.perf_counter()
    print("End to end: XLA's memory_analysis() beside nnc's arena for the jaxpr\n")
    end_to_end(chosen)
    print(
        "\nargument/output/alias/peak: XLA with matmul fusion off (`peak` on CPU is arguments + outputs - "
        "alias + constants, without temp). `temp (default)`: default flags, where matmul/conv chains run "
        "inside `ynn_fusion` custom calls whose scratch XLA does not count; `temp (fusion off)`: "
        '`xla_cpu_experimental_ynn_fusion_type=""`, every intermediate XLA keeps counted. `nnc arena` and '
        f"`bound`: jaxalloc's plan of the jaxpr (outputs outside the arena, {ALIGNMENT} B alignment) and its "
        "max-live. XLA fuses elementwise chains, so this compares planner and fusion together."
    )
    print("\nAllocator against allocator: XLA's own temp buffers and live ranges (fusion off), re-planned\n")
    xla_buffers(chosen, allocators)
    print(
        "\nCells: bytes each allocator needs for XLA's `preallocated-temp` buffers (values XLA shares in place "
        "or aliases merged into one buffer; pieces of a loop-carried buffer must share an offset), over "
        f"`XLA temp`, the size XLA's heap simulator reached; offsets aligned to {ALIGNMENT} B, sizes counted "
        "to the end of the highest byte as XLA does. `max-live`: the bound no placement of these buffers can "
        "beat. Every plan, XLA's own placement included, passed the independent checker."
    )
    print(f"\n({len(chosen)} programs in {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
