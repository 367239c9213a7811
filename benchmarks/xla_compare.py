"""jaxalloc against XLA on the benchmark programs, three ways.

1. Fair, end to end: per program, the max-live bound after each pass pipeline of `PIPELINES` and
   nnc's arena after the last, all with the outputs inside the arena, against XLA's
   `temp + output - alias` (`Plan.compare_xla()`): XLA keeps intermediates in its output
   allocations before the outputs are written, so its memory for a program is temp plus outputs,
   less the output bytes that alias arguments. XLA's fusion removes intermediates, so this compares
   planner, passes and fusion together.
2. The old end-to-end table: XLA's `memory_analysis()` beside nnc's arena with the outputs outside,
   against temp alone, which leaves out what XLA keeps in its output allocations.
3. Allocator against allocator: XLA's own `preallocated-temp` buffers and live ranges (fusion off),
   rebuilt from XLA's dump and planned by every allocator (`jaxalloc.xla.buffers`); cells are bytes
   over XLA's temp, the size XLA's heap simulator reached for the same buffers. Every plan, XLA's
   own placement included, passed the independent checker.

4. Derived programs: `jax.grad` of each loss of `models.py` through its planned function (the
   forward program, which also returns the residuals, and the backward program, each planned) and
   one `jax.vmap`, against XLA's `temp + output - alias` for `jax.jit` of the same transformation.

The programs are those of `programs.py` and of `library_models.py` (optax, flax, equinox, `lax.switch`).

    python benchmarks/xla_compare.py [--programs mlp,cnn] [--allocators nnc,best]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import jax
import models
from library_models import library_programs_list
from programs import ALIGNMENT, chosen_programs

from jaxalloc import planned
from jaxalloc.planned_call import planned_call_p, runner
from jaxalloc.xla.memory import XlaComparison, xla_memory
from jaxalloc.reports.text import format_size
from jaxalloc.xla.buffers import replan_xla_buffers

DEFAULT_ALLOCATORS = ("nnc", "nnc-2018", "greedy-size", "greedy-duration", "best-fit", "beam", "best")

PIPELINES = [
    ("jx-dce", ("jx-dce",)),
    ("+ jx-canonicalize", ("jx-dce", "jx-canonicalize")),
    ("+ jx-fuse", ("jx-dce", "jx-canonicalize", "jx-fuse")),
    ("+ jx-schedule", ("jx-dce", "jx-canonicalize", "jx-fuse", "jx-schedule")),
]
"""(column name, passes) of the bounds of the fair table; the arena is planned after the last."""


def _ratio(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}"


def _geometric_mean(ratios: list[float]) -> str:
    return f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}" if ratios else "n/a"


def fair(chosen) -> dict:
    """The fair table; returns each program's XLA statistics (default flags first) for the old table."""
    last = PIPELINES[-1][0]
    header = [
        "program", *(f"bound ({name})" for name, _ in PIPELINES), f"nnc arena ({last})",
        "XLA (fusion off)", "XLA (default)", "arena - XLA off (B)", "arena / XLA off", "arena / XLA default",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    xla, ratios_off, ratios_default = {}, [], []
    for name, fn, args in chosen:
        bounds = []
        for _, passes in PIPELINES:
            plan = planned(fn, passes=passes).plan(*args, allocator="nnc", alignment=ALIGNMENT, include_outputs=True)
            plan.check()
            bounds.append(plan.lower_bound)
        comparison = plan.compare_xla()
        default, off = comparison.xla[0], comparison.baseline()
        xla[name] = comparison.xla
        ratio_off, ratio_default = comparison.ratio(off), comparison.ratio(default)
        ratios_off += [ratio_off] if ratio_off else []
        ratios_default += [ratio_default] if ratio_default else []
        cells = [
            name,
            *map(format_size, bounds),
            format_size(plan.arena_bytes),
            format_size(comparison.xla_bytes(off)),
            format_size(comparison.xla_bytes(default)),
            f"{plan.arena_bytes - comparison.xla_bytes(off):+,}",
            _ratio(ratio_off),
            _ratio(ratio_default),
        ]
        print("| " + " | ".join(cells) + " |", flush=True)
    blank = [""] * (len(header) - 3)
    print("| " + " | ".join(["geometric mean", *blank, _geometric_mean(ratios_off), _geometric_mean(ratios_default)]) + " |")
    return xla


def end_to_end(chosen, xla: dict) -> None:
    header = [
        "program", "argument", "output", "alias", "temp (default)", "temp (fusion off)", "peak",
        "nnc arena", "bound", "nnc / temp off",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    for name, fn, args in chosen:
        plan = planned(fn).plan(*args, allocator="nnc", alignment=ALIGNMENT)
        plan.check()
        default, off = xla[name][0], xla[name][-1]
        temp = off.temp_size_in_bytes
        cells = [
            name,
            format_size(off.argument_size_in_bytes),
            format_size(off.output_size_in_bytes),
            format_size(off.alias_size_in_bytes),
            format_size(default.temp_size_in_bytes),
            format_size(temp),
            format_size(off.peak_memory_in_bytes),
            format_size(plan.arena_bytes),
            format_size(plan.lower_bound),
            _ratio(plan.arena_bytes / temp if temp else None),
        ]
        print("| " + " | ".join(cells) + " |", flush=True)


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


def derived_programs() -> list[tuple[str, str, Callable, tuple]]:
    """(name, transformation, function, arguments) of the derived table."""
    losses = [
        ("MLP", models.mlp_loss, models.mlp_train_args()),
        ("CNN", models.cnn_loss, models.cnn_train_args()),
        ("transformer", models.transformer_loss, models.transformer_train_args()),
        ("transformer (scan)", models.scanned_transformer_loss, models.scanned_transformer_train_args()),
        ("LSTM", models.lstm_loss, models.lstm_train_args()),
    ]
    params, x = models.mlp_args()
    batched = jax.numpy.stack([x[:32]] * 4)
    return [
        *((f"{name} loss", "grad", loss, args) for name, loss, args in losses),
        ("MLP (4 batches of 32)", "vmap", models.mlp, (params, batched)),
    ]


def _transformed(transformation: str, fn):
    return jax.grad(fn) if transformation == "grad" else jax.vmap(fn, in_axes=(None, 0))


def derived() -> None:
    """The derived table: the plans of the programs a transformation of a planned function runs."""
    header = ["program", "transformation", "programs planned", "forward arena", "residuals", "backward arena",
              "planned peak", "XLA (fusion off)", "planned / XLA"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- ", " --- "] + [" ---: "] * (len(header) - 2)) + "|")
    ratios = []
    for name, transformation, fn, args in derived_programs():
        calls = [e for e in jax.make_jaxpr(_transformed(transformation, planned(fn)))(*args).eqns
                 if e.primitive is planned_call_p]
        plans = [runner(e.params["jaxpr"], e.params["options"]).plan_with_outputs for e in calls]
        for plan in plans:
            plan.check()
        if transformation == "grad":
            forward, backward = calls
            made = {id(v) for v in forward.outvars}
            residuals = sum(v.aval.size * v.aval.dtype.itemsize for v in backward.invars if id(v) in made)
            peak = max(plans[0].arena_bytes, residuals + plans[1].arena_bytes)
            cells = [format_size(plans[0].arena_bytes), format_size(residuals), format_size(plans[1].arena_bytes)]
        else:
            peak = plans[0].arena_bytes
            cells = [format_size(peak), "", ""]
        xla = XlaComparison.xla_bytes(xla_memory(_transformed(transformation, fn), args, fusion=False))
        ratios.append(peak / xla)
        print("| " + " | ".join([name, transformation, str(len(plans)), *cells, format_size(peak), format_size(xla),
                                 f"{peak / xla:.2f}"]) + " |", flush=True)
    print("| " + " | ".join(["geometric mean", *[""] * (len(header) - 2), _geometric_mean(ratios)]) + " |")


def main() -> None:
    chosen, allocators = chosen_programs(__doc__.splitlines()[0], DEFAULT_ALLOCATORS, library_programs_list)
    began = time.perf_counter()
    print("Fair, end to end: nnc's arena with the outputs inside against XLA's temp + output - alias\n")
    xla = fair(chosen)
    print(
        f"\n`bound (...)`: max-live of the buffers jaxalloc plans after each pass pipeline "
        f"({'; '.join(', '.join(passes) for _, passes in PIPELINES)}), outputs inside the arena; `nnc arena`: nnc's "
        f"plan after the last ({ALIGNMENT} B alignment); every plan passed the static plan checker. `XLA (fusion off)`, "
        "`XLA (default)`: `temp + output - alias` of `memory_analysis()` with matmul fusion off "
        '(`xla_cpu_experimental_ynn_fusion_type=""`) and with default flags (matmul/conv chains in `ynn_fusion` '
        "custom calls whose scratch XLA does not count): XLA keeps intermediates in its output allocations before "
        "the outputs are written, and aliased output bytes are argument memory reused. XLA fuses elementwise "
        "chains, so this compares planner, passes and fusion together; geometric means over the programs."
    )
    print("\nEnd to end, outputs outside, against temp alone (old): XLA's memory_analysis() beside nnc's arena\n")
    end_to_end(chosen, xla)
    print(
        "\nargument/output/alias/peak: XLA with matmul fusion off (`peak` on CPU is arguments + outputs - "
        "alias + constants, without temp). `temp (default)`: default flags, where matmul/conv chains run "
        "inside `ynn_fusion` custom calls whose scratch XLA does not count; `temp (fusion off)`: "
        '`xla_cpu_experimental_ynn_fusion_type=""`, every intermediate XLA keeps in temp counted. `nnc arena` and '
        f"`bound`: jaxalloc's plan of the jaxpr after jx-dce (outputs outside the arena, {ALIGNMENT} B alignment) "
        "and its max-live. Temp leaves out the intermediates XLA keeps in its output allocations, so this "
        "comparison is unfair to jaxalloc; the fair one is above."
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
    print("\nDerived programs: a transformation of a planned function, each program it derives planned\n")
    derived()
    print(
        "\n`forward arena`: the forward program's plan (outputs inside: the loss and the residuals); `residuals`: "
        "what the backward program reads of them; `backward arena`: its plan (outputs inside: the gradient); "
        "`planned peak`: the larger of the forward arena and the residuals beside the backward arena (for `vmap`, "
        "the batched program's arena). `XLA (fusion off)`: `temp + output - alias` of `jax.jit` of the same "
        "transformation of the function itself. Every plan passed the static plan checker."
    )
    print(f"\n({len(chosen)} programs in {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
