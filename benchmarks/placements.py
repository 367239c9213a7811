"""What a call of the plan's kernel holds with each choice of what its arena places, against jit's call.

The compiled kernel's plan leaves the values of matrix products and convolutions, and every small
value, to XLA's own buffers (`KERNEL_PLAN`). This prints, per program of `real_memory.py`, what a
call of the plan's kernel (`arena="always"`) holds by `memory_analysis()` (matmul fusion off) with
that plan, with its small values placed too, with its products placed too, and with both, each
against jit's `temp + output - alias`; and the plan of every value but the outputs beside them: the
figure a kernel that held only its plan would reach.

    python benchmarks/placements.py [--programs mlp,cnn]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import jax
from programs import FUSION_OFF, named
from real_memory import _all_programs, _geometric_mean

from jaxalloc import planned
from jaxalloc.api import KERNEL_PLAN, PlanOptions
from jaxalloc.testing.transformations import every_program_running
from jaxalloc.xla.memory import XlaComparison, xla_memory

PLACEMENTS = {
    "kernel's plan": KERNEL_PLAN,
    "small values placed": dataclasses.replace(KERNEL_PLAN, small_outside=False),
    "products placed": dataclasses.replace(KERNEL_PLAN, products_outside=False),
    "both placed": PlanOptions(),
}


def kernel_call(fn, args, placement: PlanOptions) -> int:
    """What a call of the plan's kernel holds with `placement`, by `memory_analysis()`."""
    with every_program_running(placement):
        compiled = planned(fn, arena="always")
        return compiled.plan(*args).measure_call(dict(FUSION_OFF)).total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", help="comma-separated substrings of program names (default: all)")
    options = parser.parse_args()
    chosen = [p for p in _all_programs() if named(p[0], options.programs)]
    header = ["program", *PLACEMENTS, "plan, outputs apart"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    ratios: dict[str, list[float]] = {name: [] for name in header[1:]}
    began = time.perf_counter()
    for name, fn, args in chosen:
        jit = XlaComparison.xla_bytes(xla_memory(fn, args, fusion=False))
        row = {placement: kernel_call(fn, args, plan) / jit for placement, plan in PLACEMENTS.items()}
        with every_program_running(PlanOptions()):
            compiled = planned(fn)
            plan = compiled.plan(*args)
        outputs = sum(math.prod(a.shape) * a.dtype.itemsize for a in jax.tree.leaves(jax.eval_shape(fn, *args)))
        row["plan, outputs apart"] = (plan.arena_bytes + outputs) / jit
        for column, ratio in row.items():
            ratios[column].append(ratio)
        print("| " + " | ".join([name, *(f"{ratio:.2f}" for ratio in row.values())]) + " |", flush=True)
    print("| " + " | ".join(["geometric mean", *(_geometric_mean(r) for r in ratios.values())]) + " |")
    print(
        "\nEach column: what a call holds against jit's `temp + output - alias` (`memory_analysis()`, matmul fusion "
        "off). `kernel's plan`: the plan's kernel as `arena=\"always\"` runs it (products and small values in XLA's "
        "buffers); `small values placed`, `products placed`, `both placed`: the same kernel with those values in its "
        "arena too; `plan, outputs apart`: the arena of the plan of every value and the outputs beside it, what a "
        "kernel that held only its plan would hold."
    )
    print(f"\n({len(chosen)} programs in {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
