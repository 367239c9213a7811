"""Where a first call's time goes: `jax.jit`'s against the compiled arena's, phase by phase.

Per program of `benchmarks/speed.py`: jit's first call and its XLA compile, then the compiled
arena's first call (`mode="compiled"`, the default passes) split as `RunStats.phases` reports it:
tracing the program, converting it, each pass, planning, tracing the kernel, lowering it and XLA's
compile. Then the ratio of XLA's compile of the kernel to jit's whole first call (what no work of
ours could remove), of the rest (our own work), and the fusions in each executable. Prints a
Markdown table; each program's phases go to stderr as it finishes.

    python benchmarks/first_call.py [--programs MLP,LSTM]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax

from jaxalloc import planned
from jaxalloc.api import DEFAULT_PASSES, Phases
from speed import _geomean, benchmark_programs, compiled_kernel

OURS = ("trace", "convert", *DEFAULT_PASSES, "plan", "kernel trace", "lower", "XLA compile")


def fusions(executable) -> int:
    """The fusions of an XLA executable: each a kernel XLA compiled (or found compiled, where alike)."""
    return executable.as_text().count(" fusion(")


def measure(fn, args) -> dict:
    jitted = jax.jit(fn)
    jit = Phases()
    start = time.perf_counter()
    with jit.kernel():
        jax.block_until_ready(jitted(*args))
    row = {"jit first": time.perf_counter() - start, "jit compile": jit.seconds["XLA compile"]}
    compiled = planned(fn, mode="compiled")
    start = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    row["compiled first"] = time.perf_counter() - start
    row.update(compiled.last_run.phases)
    _, kernel = compiled_kernel(compiled)
    row["fusions"] = fusions(kernel.executable(jax.tree_util.tree_leaves(args)))
    row["jit fusions"] = fusions(jitted.lower(*args).compile())
    return row


def print_table(rows: list[tuple[str, dict]]) -> None:
    header = ["program", "jit first s", "jit's XLA compile s", "compiled first s", "/ jit", *(f"{p} s" for p in OURS),
              "XLA compile / jit first", "the rest / jit first", "fusions, ours / jit's"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    for name, r in rows:
        rest = r["compiled first"] - r["XLA compile"]
        cells = [name, f"{r['jit first']:.2f}", f"{r['jit compile']:.2f}", f"{r['compiled first']:.2f}",
                 f"{r['compiled first'] / r['jit first']:.2f}", *(f"{r.get(p, 0.0):.2f}" for p in OURS),
                 f"{r['XLA compile'] / r['jit first']:.2f}", f"{rest / r['jit first']:.2f}",
                 f"{r['fusions']} / {r['jit fusions']}"]
        print("| " + " | ".join(cells) + " |")
    for label, part in (("compiled first call", lambda r: r["compiled first"]),
                        ("XLA's compile of the kernel", lambda r: r["XLA compile"]),
                        ("the rest (our own work)", lambda r: r["compiled first"] - r["XLA compile"])):
        ratios = [part(r) / r["jit first"] for _, r in rows]
        print(f"\n{label} / jit's first call: geometric mean {_geomean(ratios):.2f}, most {max(ratios):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", help="comma-separated parts of program names to run (default: all)")
    options = parser.parse_args()
    wanted = options.programs.split(",") if options.programs else None
    rows = []
    for name, fn, args in benchmark_programs():
        if wanted and not any(w.lower() in name.lower() for w in wanted):
            continue
        rows.append((name, measure(fn, args)))
        print(f"measured {name}: {json.dumps(rows[-1][1])}", file=sys.stderr, flush=True)
    print()
    print_table(rows)


if __name__ == "__main__":
    main()
