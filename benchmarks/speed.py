"""Speed of planned functions against `jax.jit`: the compiled arena kernel and the op-by-op arena.

Per program: warm calls (the best of `--repeats` timings after the first call, each of as many calls
as take `WARM_SECONDS`, taken in turns) of `jax.jit`, of the
compiled arena (`mode="compiled"`, after the default passes), of the compiled arena of the program's own ops
(`passes=("jx-dce",)`: no fusion) and of the op-by-op arena (`mode="arena"`), the first call of
each (tracing, passes, planning, compiling), and the ratios to jit, with their geometric means;
XLA's compile of the compiled kernel alone (JAX's caches cleared, after every program has run: the
part of the compiled first call that is XLA's, against the whole of jit's first call), and the
phase of the compiled first call that took longest (`RunStats.phases`);
then, for the compiled kernel, its arena, its own temp memory
(`memory_analysis()`, beside the arena), the largest single op's operands and results (what that
temp may be), and the copies of the arena XLA put in the kernel (0 when it updates the arena in
place). The programs are this script's (`benchmark_programs`), the library corpus
(`benchmarks/library_models.py`) and the real-library corpus of flax, equinox, diffrax, optax and
haiku programs (`jaxalloc.testing.library`), with the geometric means of each group and of all. Prints
Markdown tables; each program's measurements go to stderr as it finishes.

    python benchmarks/speed.py [--programs MLP,LSTM] [--repeats N] [--no-op-by-op]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxalloc import planned
from jaxalloc.dialects import jx
from jaxalloc.execution.arena import layout_of
from interpreter_overhead import best_time, best_times
from programs import programs


def adaptive_ode_solve(y0, omega):
    """diffrax: a forced, lightly damped oscillator over many periods, Tsit5 with an adaptive PID
    step controller at tight tolerances: thousands of loop rounds of small ops."""
    import diffrax

    def field(t, y, omega):
        x, v = y[0], y[1]
        return jnp.stack([v, -(omega**2) * x - 0.01 * v + jnp.sin(t)])

    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(field), diffrax.Tsit5(), t0=0.0, t1=200.0, dt0=0.01, y0=y0, args=omega,
        stepsize_controller=diffrax.PIDController(rtol=1e-7, atol=1e-9), max_steps=20_000,
    )
    return solution.ys[-1], solution.stats["num_steps"]


def benchmark_programs() -> list[tuple[str, Callable, tuple]]:
    return [
        *programs(),
        ("adaptive ODE solve (diffrax)", adaptive_ode_solve, (jnp.array([1.0, 0.0]), jnp.float32(3.0))),
    ]


WARM_SECONDS = 0.01
"""Each timing of a warm call covers as many calls as take this long (`best_times`)."""


def first_time(fn: Callable) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def largest_op_bytes(module) -> int:
    """The most bytes one op reads and writes: its operands and results."""
    return max(
        (sum(layout_of(v.type).nbytes for v in (*op.operands, *op.results)) for op in module.walk() if isinstance(op, jx.PrimOp)),
        default=0,
    )


def compiled_kernel(compiled):
    """What a compiled planned function traced for the one signature it was called with, and the
    kernel it compiled for it."""
    (traced,) = compiled._cache.values()
    (kernel,) = traced.kernels.values()
    return traced, kernel


def kernel_compile_time(kernel, leaves: list) -> float:
    """XLA's compile of `kernel` for `leaves`, with JAX's caches cleared, which would hand back the
    executable of the first call."""
    jax.clear_caches()
    lowered = kernel.traced(leaves).lower()
    start = time.perf_counter()
    lowered.compile()
    return time.perf_counter() - start


def measure(fn: Callable, args: tuple, repeats: int, op_by_op: bool) -> tuple[dict, Callable[[], float]]:
    """The program's row, and how to time its kernel's compile (`kernel_compile_time`), which clears
    JAX's caches: called once every program's calls are timed."""
    jitted = jax.jit(fn)
    own_ops = planned(fn, mode="compiled", passes=("jx-dce",))
    compiled = planned(fn, mode="compiled")
    row = {
        "jit first": first_time(lambda: jitted(*args)),
        "own ops first": first_time(lambda: own_ops(*args)),
        "compiled first": first_time(lambda: compiled(*args)),
    }
    row["phases"] = compiled.last_run.phases
    row["jit"], row["own ops"], row["compiled"] = best_times(
        [lambda: jitted(*args), lambda: own_ops(*args), lambda: compiled(*args)], repeats, WARM_SECONDS
    )
    row["copied"] = compiled.last_run.copied_bytes
    if op_by_op:
        arena = planned(fn, mode="arena")
        row["arena first"] = first_time(lambda: arena(*args))
        row["arena"] = best_time(lambda: arena(*args), max(1, min(repeats, 2)))
    traced, kernel = compiled_kernel(compiled)
    executable = kernel.executable(jax.tree_util.tree_leaves(args))
    row["arena bytes"] = kernel.arena_bytes
    row["temp"] = kernel.temp_beside_arena(executable)
    row["largest op"] = largest_op_bytes(traced.converted.module)
    row["arena copies"] = kernel.arena_copies(executable)
    return row, lambda: kernel_compile_time(kernel, jax.tree_util.tree_leaves(args))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def _geomean(values: list[float]) -> float:
    return math.prod(values) ** (1 / len(values))


def largest_phase(phases: dict[str, float]) -> str:
    """The phase of a first call that took longest, and its share of the phases' sum."""
    name = max(phases, key=phases.__getitem__)
    return f"{name} ({phases[name] / sum(phases.values()):.0%})"


def print_means(rows: list[tuple[str, dict]], op_by_op: bool, group: str) -> None:
    """The geometric means of the warm and first-call ratios to jit of `rows`."""
    print(f"\n{group} ({len(rows)} programs):")
    for label, key in [("compiled", "compiled"), ("own ops, compiled", "own ops")] + [("op by op", "arena")] * op_by_op:
        warm = [r[key] / r["jit"] for _, r in rows]
        first = [r[key + " first"] / r["jit first"] for _, r in rows]
        print(f"- {label} / jit, warm: geometric mean {_geomean(warm):.2f}, most {max(warm):.2f}; "
              f"first call: geometric mean {_geomean(first):.2f}, most {max(first):.2f}")
    alone = [r["kernel compile"] / r["jit first"] for _, r in rows]
    print(f"- XLA's compile of the compiled kernel alone / jit's first call: geometric mean {_geomean(alone):.2f}, "
          f"most {max(alone):.2f}")


def print_tables(rows: list[tuple[str, dict]], op_by_op: bool, groups: dict[str, str]) -> None:
    header = ["program", "jit ms", "compiled ms", "/ jit", "own ops ms", "/ jit"]
    if op_by_op:
        header += ["op-by-op ms", "/ jit"]
    header += ["jit first s", "compiled first s", "compiled first / jit first", "kernel compile s", "/ jit first",
               "own ops first s"] + ["op-by-op first s"] * op_by_op + ["compiled first: longest phase"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    for name, r in rows:
        cells = [name, _ms(r["jit"]), _ms(r["compiled"]), f"{r['compiled'] / r['jit']:.2f}", _ms(r["own ops"]),
                 f"{r['own ops'] / r['jit']:.2f}"]
        if op_by_op:
            cells += [_ms(r["arena"]), f"{r['arena'] / r['jit']:.1f}"]
        cells += [f"{r['jit first']:.2f}", f"{r['compiled first']:.2f}", f"{r['compiled first'] / r['jit first']:.2f}",
                  f"{r['kernel compile']:.2f}", f"{r['kernel compile'] / r['jit first']:.2f}", f"{r['own ops first']:.2f}"]
        if op_by_op:
            cells += [f"{r['arena first']:.2f}"]
        cells += [largest_phase(r["phases"])]
        print("| " + " | ".join(cells) + " |")
    for group in dict.fromkeys(groups.values()):
        chosen = [(name, r) for name, r in rows if groups[name] == group]
        print_means(chosen, op_by_op, group)
    if len(set(groups.values())) > 1:
        print_means(rows, op_by_op, "all")
    print()
    print("| program (compiled) | arena | kernel temp | largest op | arena copies in the kernel | copied bytes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in rows:
        print(f"| {name} | {r['arena bytes']:,} | {r['temp']:,} | {r['largest op']:,} | {r['arena copies']} | {r['copied']:,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", help="comma-separated parts of program names to run (default: all)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-op-by-op", dest="op_by_op", action="store_false", help="skip the op-by-op arena")
    options = parser.parse_args()
    wanted = options.programs.split(",") if options.programs else None
    rows, compiles, groups = [], [], {}
    from library_models import library_programs_list

    from jaxalloc.testing.library import PROGRAMS as REAL_LIBRARY

    for group, name, fn, args in [*(("benchmark programs", *p) for p in benchmark_programs()),
                                  *(("library corpus", *p) for p in library_programs_list()),
                                  *(("real-library corpus", p.name, p.fn, p.make_args()) for p in REAL_LIBRARY
                                    if not wanted or any(w.lower() in p.name.lower() for w in wanted))]:
        if wanted and not any(w.lower() in name.lower() for w in wanted):
            continue
        groups[name] = group
        row, compile_time = measure(fn, args, options.repeats, options.op_by_op)
        rows.append((name, row))
        compiles.append(compile_time)
        print(f"measured {name}: {json.dumps(row)}", file=sys.stderr, flush=True)
    for (_, row), compile_time in zip(rows, compiles):
        row["kernel compile"] = compile_time()
    print()
    print_tables(rows, options.op_by_op, groups)


if __name__ == "__main__":
    main()
