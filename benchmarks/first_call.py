"""Where a first call's time goes: `jax.jit`'s against the compiled arena's, phase by phase; and,
with `--second-process`, a later process's first call with both persistent caches on.

Per program of `benchmarks/speed.py`: jit's first call and its XLA compile, then the compiled
arena's first call (`mode="compiled"`, the default passes) split as `RunStats.phases` reports it:
tracing the program, converting it, each pass, planning, tracing the kernel, lowering it and XLA's
compile. Then the ratio of XLA's compile of the kernel to jit's whole first call (what no work of
ours could remove), of the rest (our own work), and the fusions in each executable. Prints a
Markdown table; each program's phases go to stderr as it finishes.

`--second-process`: per program of `benchmarks/speed.py` and of the library corpus
(`benchmarks/library_models.py`), JAX's persistent compilation cache and jaxalloc's kernel cache on
(`JAX_COMPILATION_CACHE_DIR`, `JAXALLOC_CACHE_DIR`, folders of the run's own) and warmed by one
process that calls `jax.jit(f)` and one that calls `planned(f)`; then, `--rounds` times, a fresh
process times jit's first call and another the planned function's, in turns. Prints the best of
the rounds of each, their ratio, the phases of the planned first call (a cache hit: the trace, the
cache load, lowering the loaded kernel, XLA's compile, which finds it in JAX's cache, and the call),
and the geometric mean of the ratios.

`--choice`: what choosing the kernel costs a first call. Per program of `benchmarks/speed.py` and of the
library corpus, `--rounds` fresh processes each, in turns, of jit's first call, of
`planned(f, arena="always")`'s (the plan's kernel alone) and of `planned(f)`'s (`arena="smaller"`: the plan's
kernel and the module on XLA's own buffers, both compiled), no persistent cache; the best of each,
their ratios, the `XLA's buffers` phase and which kernel the call ran. Programs whose plan places
nothing in the arena compile one kernel either way.

`--deep`: the first call of a 40-layer transformer training step and of a 40-layer MLP training
step, each in fresh processes with no persistent cache, jit's and the planned function's in turns,
`--rounds` times; the best of each, their ratio and the planned call's longest phases.

    python benchmarks/first_call.py [--programs MLP,LSTM]
    python benchmarks/first_call.py --second-process [--programs MLP,LSTM] [--rounds 2]
    python benchmarks/first_call.py --choice [--programs MLP,LSTM] [--rounds 2]
    python benchmarks/first_call.py --deep [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


GROUPS = ("benchmark", "library", "deep")


def group_programs(group: str) -> list:
    """(name, function, example arguments) of one group: `speed.py`'s programs, the library corpus or
    the 40-layer training steps."""
    if group == "benchmark":
        return benchmark_programs()
    if group == "deep":
        return deep_programs()
    from library_models import library_programs_list

    return library_programs_list()


def deep_programs() -> list:
    """Training steps of 40 layers: XLA's compile and our passes grow with the layers."""
    import models

    params = models.mlp_params(widths=(784,) + (256,) * 39 + (10,))
    x = jax.random.normal(jax.random.key(2), (128, 784))
    labels = jax.random.randint(jax.random.key(3), (128,), 0, 10)
    return [
        ("transformer train step, 40 layers", models.train_step(models.transformer_loss), models.transformer_train_args(layers=40)),
        ("MLP train step, 40 layers", models.train_step(models.mlp_loss), (params, x, labels)),
    ]


def deep(rounds: int) -> None:
    """The `--deep` table (module docstring)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "JAXALLOC_CACHE_DIR")}
    print("| program | jit first s | planned first s | / jit | planned: longest phases |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, _, _ in deep_programs():
        jit, best = best_first_calls("deep", name, rounds, environment)
        longest = sorted(best["phases"].items(), key=lambda kv: -kv[1])[:3]
        phases = ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in longest)
        print(f"| {name} | {jit:.2f} | {best['seconds']:.2f} | {best['seconds'] / jit:.2f} | {phases} |", flush=True)


def first_call_in_this_process(group: str, name: str, how: str) -> dict:
    """One fresh process's first call of a program, jitted or planned (`--child`): its seconds and,
    planned, its phases."""
    (fn, args), = [(fn, args) for n, fn, args in group_programs(group) if n == name]
    jax.block_until_ready(args)
    function = jax.jit(fn) if how == "jit" else planned(fn, arena="always" if how == "always" else "smaller")
    start = time.perf_counter()
    jax.block_until_ready(function(*args))
    seconds = time.perf_counter() - start
    if how == "jit":
        return {"seconds": seconds, "phases": {}}
    run = function.last_run
    return {"seconds": seconds, "phases": run.phases, "arena": run.arena_bytes, "xla_buffers": run.xla_buffers}


def first_call_in_a_new_process(group: str, name: str, how: str, environment: dict) -> dict:
    child = [sys.executable, __file__, "--child", how, "--group", group, "--programs", name]
    done = subprocess.run(child, env=environment, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{how} {name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def best_first_calls(group: str, name: str, rounds: int, environment: dict, kinds=("jit", "planned")) -> tuple:
    """`rounds` fresh processes of each kind of first call (`jit`, `planned`, `always`), in turns: the
    best of jit's seconds, then the best call of each other kind (its seconds and phases)."""
    runs: dict[str, list[dict]] = {how: [] for how in kinds}
    for _ in range(rounds):
        for how in kinds:
            runs[how].append(first_call_in_a_new_process(group, name, how, environment))
    return (min(r["seconds"] for r in runs["jit"]), *(min(runs[how], key=lambda r: r["seconds"]) for how in kinds[1:]))


def choice(wanted: list[str] | None, rounds: int) -> None:
    """The `--choice` table (module docstring)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "JAXALLOC_CACHE_DIR")}
    print("| program | jit first s | plan's kernel first s | / jit | the smaller first s | / jit | / plan's kernel | "
          "XLA's buffers s | ran |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    ratios: dict[str, list[float]] = {"always": [], "smaller": [], "cost": []}
    for group in ("benchmark", "library"):
        for name, _, _ in group_programs(group):
            if wanted and not any(w.lower() in name.lower() for w in wanted):
                continue
            jit, always, smaller = best_first_calls(group, name, rounds, environment, ("jit", "always", "planned"))
            ran = "XLA's buffers" if smaller["xla_buffers"] else ("the plan's kernel" if smaller["arena"] else "no arena")
            label = name if group == "benchmark" else f"{name} (library)"
            aside = smaller["phases"].get("XLA's buffers", 0.0)
            ratios["always"].append(always["seconds"] / jit)
            ratios["smaller"].append(smaller["seconds"] / jit)
            ratios["cost"].append(smaller["seconds"] / always["seconds"])
            print(f"| {label} | {jit:.2f} | {always['seconds']:.2f} | {always['seconds'] / jit:.2f} | "
                  f"{smaller['seconds']:.2f} | {smaller['seconds'] / jit:.2f} | {ratios['cost'][-1]:.2f} | "
                  f"{aside:.2f} | {ran} |", flush=True)
    print(f"\nfirst call / jit's, geometric mean over {len(ratios['cost'])} programs (best of {rounds} fresh processes "
          f"each): the plan's kernel {_geomean(ratios['always']):.2f}, the smaller {_geomean(ratios['smaller']):.2f}; "
          f"the smaller / the plan's kernel {_geomean(ratios['cost']):.2f} (most {max(ratios['cost']):.2f})")


def second_process(wanted: list[str] | None, rounds: int) -> None:
    """The `--second-process` table (module docstring)."""
    folder = Path(tempfile.mkdtemp(prefix="jaxalloc-first-call-"))
    environment = dict(
        os.environ, JAX_COMPILATION_CACHE_DIR=str(folder / "jax"), JAXALLOC_CACHE_DIR=str(folder / "jaxalloc"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )
    rows = []
    for group in ("benchmark", "library"):
        for name, _, _ in group_programs(group):
            if wanted and not any(w.lower() in name.lower() for w in wanted):
                continue
            for how in ("jit", "planned"):  # the caches warmed
                first_call_in_a_new_process(group, name, how, environment)
            jit, best = best_first_calls(group, name, rounds, environment)
            rows.append((group, name, jit, best))
            print(f"measured {name}: jit {jit:.3f} s, planned {json.dumps(best)}", file=sys.stderr, flush=True)
    print()
    print("| program | jit first s | planned first s | / jit | planned: trace | cache load | lower | XLA compile | call |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for group, name, jit, best in rows:
        phases = best["phases"]
        cells = [f"{phases.get(p, 0.0):.3f}" for p in ("trace", "cache load", "lower", "XLA compile", "call")]
        label = name if group == "benchmark" else f"{name} (library)"
        if "plan" in phases:  # the kernel was not found in jaxalloc's cache: the row says so
            label += " (kernel cache missed)"
        print(f"| {label} | {jit:.3f} | {best['seconds']:.3f} | {best['seconds'] / jit:.2f} | " + " | ".join(cells) + " |")
    ratios = [best["seconds"] / jit for _, _, jit, best in rows]
    print(f"\nplanned first call / jit's, a second process with both caches warm: geometric mean "
          f"{_geomean(ratios):.2f}, least {min(ratios):.2f}, most {max(ratios):.2f} ({len(rows)} programs, "
          f"best of {rounds} fresh processes each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", help="comma-separated parts of program names to run (default: all)")
    parser.add_argument("--second-process", action="store_true",
                        help="a later process's first call, JAX's and jaxalloc's persistent caches warm")
    parser.add_argument("--deep", action="store_true", help="the first call of two 40-layer training steps")
    parser.add_argument("--choice", action="store_true", help="what choosing the kernel (arena=\"smaller\") costs a first call")
    parser.add_argument("--rounds", type=int, default=2, help="--second-process, --deep, --choice: fresh processes of each")
    parser.add_argument("--child", choices=("jit", "planned", "always"), help=argparse.SUPPRESS)
    parser.add_argument("--group", choices=GROUPS, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(first_call_in_this_process(options.group, options.programs, options.child)))
        return
    wanted = options.programs.split(",") if options.programs else None
    if options.second_process:
        second_process(wanted, options.rounds)
        return
    if options.deep:
        deep(options.rounds)
        return
    if options.choice:
        choice(wanted, options.rounds)
        return
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
