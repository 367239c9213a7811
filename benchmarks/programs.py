"""Arena sizes of realistic programs: every allocator, the max-live bound, and XLA's temp memory.

Prints one Markdown table: one row per program (inference, SGD training steps, while-loop
solvers), the number of values planned, the arena each allocator plans, the max-live lower bound
of the same rows, and XLA's `temp_size_in_bytes` for the same function on this backend, compiled
with matmul/conv fusion off and with default flags.

    python benchmarks/programs.py [--programs mlp,cnn] [--allocators nnc,best]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import jax

import models
from jaxalloc import planned
from jaxalloc.allocators import ALLOCATORS
from jaxalloc.planning.plan import make_plan
from jaxalloc.reports.text import format_size

ALIGNMENT = 64
DEFAULT_ALLOCATORS = ("nnc", "nnc-2018", "greedy-size", "greedy-duration", "best-fit", "best")
FUSION_OFF = {"xla_cpu_experimental_ynn_fusion_type": ""}
"""XLA CPU option: no `ynn_fusion` custom calls, whose scratch memory XLA's temp does not count."""


def programs() -> list[tuple[str, Callable, tuple]]:
    """(name, function, example arguments) for every program of the table."""
    step = models.train_step
    return [
        ("MLP", models.mlp, models.mlp_args()),
        ("CNN", models.cnn, models.cnn_args()),
        ("transformer", models.transformer, models.transformer_args()),
        ("transformer (scan)", models.scanned_transformer, models.scanned_transformer_args()),
        ("LSTM (scan)", models.lstm, models.lstm_args()),
        ("MLP train step", step(models.mlp_loss), models.mlp_train_args()),
        ("CNN train step", step(models.cnn_loss), models.cnn_train_args()),
        ("transformer train step", step(models.transformer_loss), models.transformer_train_args()),
        ("transformer (scan) train step", step(models.scanned_transformer_loss), models.scanned_transformer_train_args()),
        ("LSTM train step", step(models.lstm_loss), models.lstm_train_args()),
        ("CG solver (while)", models.conjugate_gradient, models.conjugate_gradient_args()),
        ("Newton solver (while)", models.newton_softplus_root, models.newton_softplus_root_args()),
    ]


def xla_temp(fn, args, options: dict | None = None) -> int:
    compiled = jax.jit(fn).lower(*args).compile(compiler_options=options)
    return compiled.memory_analysis().temp_size_in_bytes


def measure(fn, args, allocators) -> dict:
    """Plans `fn` with every allocator (each plan checked), its bound, and XLA's temp bytes."""
    module = planned(fn).lower(*args)
    arena, plan = {}, None
    for name in allocators:
        plan = make_plan(module, allocator=name, alignment=ALIGNMENT)
        plan.check()
        arena[name] = plan.arena_bytes
    return {
        "values": len(plan.buffers),
        "arena": arena,
        "bound": plan.lower_bound,
        "xla_off": xla_temp(fn, args, FUSION_OFF),
        "xla_default": xla_temp(fn, args),
    }


def print_table(results: list[tuple[str, dict]], allocators) -> None:
    header = ["program", "values", *allocators, "bound", "XLA temp (fusion off)", "XLA temp (default)", "nnc / XLA off"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    for name, r in results:
        off = r["xla_off"]
        ratio = f"{r['arena']['nnc'] / off:.2f}" if "nnc" in r["arena"] and off else "n/a"
        cells = [
            name,
            f"{r['values']:,}",
            *(format_size(r["arena"][a]) for a in allocators),
            format_size(r["bound"]),
            format_size(off),
            format_size(r["xla_default"]),
            ratio,
        ]
        print("| " + " | ".join(cells) + " |")


LEGEND = (
    "Arena columns: bytes each allocator plans for every intermediate value of the jaxpr (function "
    "arguments, constants and outputs live outside the arena, like XLA's separate argument and output "
    f"allocations; offsets aligned to {ALIGNMENT} B). `values`: the rows planned (buffers after in-place "
    "folding and views, one per loop ring slot); `bound`: their max-live, a lower bound for any plan of "
    "these rows. `XLA temp (fusion off)`: `temp_size_in_bytes` of `jax.jit(f).lower(*args).compile("
    'compiler_options={"xla_cpu_experimental_ynn_fusion_type": ""})`, XLA CPU without its matmul/conv '
    "`ynn_fusion` custom calls, so every intermediate XLA keeps is counted: the comparable baseline. "
    "`XLA temp (default)`: the same with default flags, where fused matmul/conv chains run inside "
    "`ynn_fusion` calls whose scratch memory XLA does not report (it can read lower or higher than "
    "fusion off; on a conv net it reads almost nothing). XLA still fuses "
    "elementwise chains in both, so many jaxpr values never exist there. `nnc / XLA off`: nnc's arena "
    "over XLA's fusion-off temp."
)


def named(name: str, wanted: str | None) -> bool:
    """Whether `--programs` (comma-separated substrings of program names, None for all) names `name`."""
    return wanted is None or any(w in name.lower() for w in wanted.lower().split(","))


def chosen_programs(description: str, allocators=DEFAULT_ALLOCATORS, more: Callable[[], list] | None = None) -> tuple[list, list[str]]:
    """The programs and allocators named by `--programs` and `--allocators` on the command line; `more`
    builds programs to add after `programs()`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--programs", help="comma-separated substrings of program names (default: all)")
    parser.add_argument("--allocators", default=",".join(allocators))
    options = parser.parse_args()
    allocators = options.allocators.split(",")
    unknown = [a for a in allocators if a not in ALLOCATORS]
    if unknown:
        parser.error(f"unknown allocator {unknown[0]!r}; known: {', '.join(ALLOCATORS)}")
    chosen = [p for p in programs() + (more() if more is not None else []) if named(p[0], options.programs)]
    return chosen, allocators


def main() -> None:
    chosen, allocators = chosen_programs(__doc__.splitlines()[0])
    began = time.perf_counter()
    results = [(name, measure(fn, args, allocators)) for name, fn, args in chosen]
    print_table(results, allocators)
    print()
    print(LEGEND)
    print(f"\n({len(results)} programs in {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
