"""What a planned call really holds, against a `jax.jit` call of the same function.

Per program of `programs.py`, `library_models.py` and the real-library corpus
(`jaxalloc.testing.library`):
- `plan`: the arena of `Planned.plan(include_outputs=True)`, every value and the outputs planned in
  it (the figure to set beside XLA's `temp + output - alias`); a call's arena (`arena`, the plan
  `Planned.plan()` gives) leaves the outputs and the values of matrix products and convolutions to
  XLA's buffers, and so to the kernel's temp;
- the kernel the call runs (`planned(f)` chooses the plan's or the module on XLA's own buffers,
  whichever holds less);
- the planned call by its parts, from `memory_analysis()` of its kernel (matmul fusion off): the
  arena, the kernel's own temp (where XLA computes what it cannot compute in place in the arena),
  the outputs it returns beside the arena, and what the function holds between calls; and whether
  the call holds at most the plan's figure and the largest single op's operands and results;
- jit's call: `temp + output - alias` of `memory_analysis()` (matmul fusion off);
- by resident memory: how much the process's resident set peaked above its size before a warm call
  (the median of `CALLS`; Linux's exact peak mark, `VmHWM`, reset before each), planned and
  jitted, each in a process of its own (`--no-resident` skips it), with glibc's mmap threshold fixed,
  one heap for every thread and its free memory handed back before each call, so that every buffer a
  call takes shows and no thread's heap adds its own.

    python benchmarks/real_memory.py [--programs mlp,cnn] [--no-resident]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import time

import jax
from library_models import library_programs_list
from programs import FUSION_OFF, named, programs
from speed import largest_op_bytes

from jaxalloc import planned
from jaxalloc.reports.text import format_size
from jaxalloc.testing.library import PROGRAMS as REAL_LIBRARY
from jaxalloc.xla.memory import XlaComparison, xla_memory

CALLS = 15
"""Warm calls sampled for the resident memory of each run: their median growth is the figure."""

RESOLVED = 256 * 1024
"""The least jit call (`memory_analysis()`) whose resident growth is compared: the growth of a smaller
one is a few 4 KiB pages and the noise of XLA's runtime (hundreds of KiB from call to call)."""


def _all_programs() -> list:
    return programs() + library_programs_list() + [(p.name, p.fn, p.make_args()) for p in REAL_LIBRARY]


def planned_parts(fn, args) -> dict:
    """The parts of a planned call from `memory_analysis()` of its kernel, matmul fusion off
    (`Plan.measure_call`), and what the function holds between calls after one."""
    compiled = planned(fn)
    compiled(*args)
    call = compiled.plan(*args).measure_call(dict(FUSION_OFF))
    run = compiled.last_run
    runs = "XLA's buffers" if run.xla_buffers else ("plan's kernel" if run.arena_bytes else "no arena")
    # the plan's kernel is the call's own unless the call chose XLA's buffers
    always = planned(fn, arena="always").plan(*args).measure_call(dict(FUSION_OFF)).total if run.xla_buffers else call.total
    return {"arena": call.arena, "temp": call.kernel_temp, "outputs": call.outputs, "held": run.held_bytes,
            "total": call.total, "largest op": largest_op_bytes(compiled.lower(*args)), "runs": runs,
            "plan's kernel": always}


def _status_bytes(field: str) -> int:
    """A size from `/proc/self/status` (`VmRSS`, the resident set now; `VmHWM`, its peak)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def resident_growth(kind: str, index: int) -> int:
    """The median over `CALLS` warm calls (in this process) of how much the resident set's peak
    during the call rose above its size before it: glibc's free memory handed back to the system
    and Linux's peak mark reset (`/proc/self/clear_refs`) before each, so that the peak is
    exact, not sampled."""
    name, fn, args = _all_programs()[index]
    run = jax.jit(fn) if kind == "jit" else planned(fn)
    jax.block_until_ready(run(*args))
    jax.block_until_ready(run(*args))
    libc = ctypes.CDLL("libc.so.6")
    growths = []
    for _ in range(CALLS):
        libc.malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # the peak resident set (VmHWM) set to the resident set now
        before = _status_bytes("VmRSS")
        out = run(*args)
        jax.block_until_ready(out)
        del out
        growths.append(max(0, _status_bytes("VmHWM") - before))
    return sorted(growths)[len(growths) // 2]


def _in_own_process(kind: str, index: int) -> int:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_ARENA_MAX="1")
    code = f"import real_memory, json; print(json.dumps(real_memory.resident_growth({kind!r}, {index})))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(__file__)), timeout=900)
    if done.returncode:
        raise RuntimeError(f"{kind} run of program {index} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def _geometric_mean(ratios: list[float]) -> str:
    return f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}" if ratios else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", help="comma-separated substrings of program names (default: all)")
    parser.add_argument("--no-resident", action="store_true", help="skip the resident memory columns")
    options = parser.parse_args()
    chosen = [(i, p) for i, p in enumerate(_all_programs()) if named(p[0], options.programs)]
    header = ["program", "plan", "runs", "arena", "kernel temp", "outputs", "held between calls", "planned call",
              "largest op", "within plan + largest op", "jit call", "planned / jit", "plan's kernel / jit"]
    if not options.no_resident:
        header += ["resident: planned", "resident: jit", "planned / jit (resident)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    ratios, kernel_ratios, resident_ratios = [], [], []
    began = time.perf_counter()
    for index, (name, fn, args) in chosen:
        plan = planned(fn).plan(*args, include_outputs=True)
        parts = planned_parts(fn, args)
        jit = XlaComparison.xla_bytes(xla_memory(fn, args, fusion=False))
        ratios.append(parts["total"] / jit)
        kernel = parts["plan's kernel"]
        kernel_ratios.append(kernel / jit)
        within = parts["total"] <= plan.arena_bytes + parts["largest op"]
        cells = [name, format_size(plan.arena_bytes), parts["runs"], *(format_size(parts[k]) for k in ("arena", "temp", "outputs", "held")),
                 format_size(parts["total"]), format_size(parts["largest op"]), "yes" if within else "**no**",
                 format_size(jit), f"{parts['total'] / jit:.2f}", f"{kernel / jit:.2f}"]
        if not options.no_resident:
            ours, theirs = _in_own_process("planned", index), _in_own_process("jit", index)
            resolved = jit >= RESOLVED and theirs > 0
            if resolved:
                resident_ratios.append(ours / theirs)
            cells += [format_size(ours), format_size(theirs), f"{ours / theirs:.2f}" if resolved else "n/a"]
        print("| " + " | ".join(cells) + " |", flush=True)
    means = ["geometric mean", *[""] * (header.index("planned / jit") - 1), _geometric_mean(ratios), _geometric_mean(kernel_ratios)]
    if not options.no_resident:
        means += ["", "", _geometric_mean(resident_ratios)]
    print("| " + " | ".join(means) + " |")
    print(
        "\n`plan`: the arena of `Planned.plan(include_outputs=True)`, every value and the outputs planned in it. `runs`: the "
        "kernel the call chose (`planned(f)`, `arena=\"smaller\"`): the plan's, the module on XLA's own buffers (where the plan's "
        "kernel would hold more), or, for a plan that places nothing, the module's ops (no arena). The planned call's parts: `arena` "
        "(made by the kernel each call, the values of matrix products and convolutions left to XLA's buffers), `kernel temp` (`memory_analysis()` of the kernel "
        "but the arena, matmul fusion off), `outputs` (the "
        "arrays returned beside the arena), `held between calls` (a kept arena); `planned call` is their sum, `within plan + "
        "largest op` whether it is at most `plan` and the largest single op's operands and results (`largest op`, of the "
        "ops as traced). `plan's kernel / jit`: what a call of the plan's kernel (`arena=\"always\"`) would hold. `jit "
        "call`: `temp + output - alias` of `jax.jit` (matmul fusion off). `resident`: how much the process's resident "
        f"set peaked above its size before a warm call (`VmHWM`), the median of {CALLS}, each kind in a process of its own; "
        f"compared where jit's call holds at least {format_size(RESOLVED)}."
    )
    print(f"\n({len(chosen)} programs in {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
