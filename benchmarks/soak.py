"""Soak test: many seeded random programs through the differential check against `jax.jit`.

Each seed's program (`jaxalloc/testing/random_programs.py`) goes through the check of
`jaxalloc.testing.differential.check_random_program`: convert, print, parse back and verify,
run planned in `--mode` with its small values in the arena (`SMALL_VALUES_PLACED`) and compare
with `jax.jit`, no bytes copied in an arena run (`last_run.copied_bytes`), the same debug callback
calls as jit. Progress goes to stderr; at the end it prints a Markdown table of programs by
generator feature and one of failures by class with the first failing seeds of each (rebuild one
with `random_program(seed).describe()`), and how many of the programs ran with an arena.

Classes: `wrong answer` (matches neither `jax.jit` nor `jax.disable_jit()`), `wrong weak type` (the
same, by weak types alone), `wrong callback calls`, `plan violation` (`jaxalloc.PlanViolation`),
`copied bytes > 0`, `arena copied in the kernel` (compiled mode: XLA copies the whole arena),
`exception during <stage>: <type>` and `timeout during <stage>` (the stage of
jaxalloc that raised or ran: converting, tracing, planning, running), `generator error` (the program
is wrong, or `jax.jit` fails on it), `jit disagrees with disable_jit` (passed against
`jax.disable_jit()`; `differential.py` reports it) and `worker crashed`.

    python benchmarks/soak.py [--seeds 20000] [--start 0] [--mode checked] [--jobs 2] [--results soak.jsonl] [--transform grad]
    python benchmarks/soak.py --summarize soak.jsonl [more.jsonl ...]

It runs in chunks: `--start S --seeds N` checks seeds S to S+N-1, and the last line names the
next chunk. With `--results FILE` every seed's outcome is appended to FILE as a JSON line; seeds
already there are not run again (so an interrupted chunk resumes), and `--summarize` prints the
tables of all the chunks in the files. `--mode checked` is the sanitizer mode, which raises
`jaxalloc.PlanViolation`; where this jaxalloc has no such mode the soak says so and runs `arena`.
`--passes` are the jx passes run before planning (default: the pipeline a planned function runs,
`jx-dce,jx-canonicalize,jx-fuse,jx-schedule`; `--passes ''` plans each program as generated, dead
code and all). `--transform grad` (or any name of `jaxalloc/testing/transformations.py`) checks each program
under that JAX transformation against the same of `jax.jit` (`check_transformed`): every program
the transformation derives planned (its small values in the arena), checked and run; a program
counts as run with an arena where one it derives has one. Workers share JAX's persistent
compilation cache (`--compilation-cache`): the programs are made of the same few small kernels.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import re
import signal
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter, defaultdict
from pathlib import Path

from jaxalloc.api import DEFAULT_PASSES

FIRST_SEEDS = 8
"""Failing seeds listed per class."""

# Where the innermost jaxalloc frame of a traceback is, by file inside the package: the stage that raised.
_STAGES = {
    "frontend/convert.py": "converting",
    "frontend/types.py": "converting",
    "api.py": "tracing",
    "analysis/liveness.py": "planning",
    "analysis/inplace.py": "planning",
    "planning/plan.py": "planning",
    "planning/replanning.py": "planning",
    "planning/lowering.py": "planning",
    "passes/assign.py": "planning",
    "checks/checker.py": "planning",
    "execution/interpreter.py": "running",
    "execution/arena.py": "running",
}


# ---------------------------------------------------------------------------------------------
# in a worker


def _init_worker(cache: str | None = None) -> None:
    if cache:
        # random programs are made of the same few small kernels: compiled once for every worker
        import jax

        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    from jaxalloc.testing import differential, random_programs  # noqa: F401  (imports jax, jaxalloc, the generator)

    # counted as a class of their own (`planned.jit_disagreement`), not printed
    warnings.simplefilter("ignore", getattr(differential, "JitDisagreement", UserWarning))


def _stage(tb) -> str | None:
    """The stage of the innermost jaxalloc frame of a traceback, or None if it has none."""
    stage = None
    for frame in traceback.extract_tb(tb):
        path = Path(frame.filename)
        if "testing" in path.parts and "jaxalloc" in path.parts:
            if path.name == "differential.py" and frame.name == "check_roundtrip":
                stage = "IR round trip"
        elif ("allocators" in path.parts or "assignment" in path.parts) and "jaxalloc" in path.parts:
            stage = "planning"
        elif path.parent.name == "jaxalloc":
            stage = _STAGES.get(path.name, stage or "running")
        elif path.parent.parent.name == "jaxalloc":
            stage = _STAGES.get(f"{path.parent.name}/{path.name}", stage or "running")
    return stage


def _compared(tb) -> bool:
    """Whether the innermost frame is the differential module's comparison of results."""
    frames = traceback.extract_tb(tb)
    innermost = next((f for f in reversed(frames) if "numpy" not in Path(f.filename).parts), None)
    return innermost is not None and Path(innermost.filename).name == "differential.py" and innermost.name in (
        "check_program", "assert_same", "mismatches"
    )


def _chain(e: BaseException):
    while e is not None:
        yield e
        e = e.__cause__ or e.__context__


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(e).__name__}: {line}"[:300]


def _jit_fails(program) -> BaseException | None:
    import jax

    fn, args = program
    try:
        jax.block_until_ready(jax.jit(fn)(*args))
    except Exception as e:  # noqa: BLE001
        return e
    return None


def classify(program, e: BaseException) -> tuple[str, str]:
    """The failure class of `e`, raised by `check_random_program(program)`, and one line about it."""
    import jaxalloc
    from jaxalloc.testing import differential

    violation = getattr(jaxalloc, "PlanViolation", None)
    chain = list(_chain(e))
    if any("random program generator bug" in str(x) for x in chain):
        return "generator error", _first_line(e)
    if violation is not None and any(isinstance(x, violation) for x in chain):
        return "plan violation", _first_line(next(x for x in chain if isinstance(x, violation)))
    if isinstance(e, differential.CopiedBytes):
        return "copied bytes > 0", _first_line(e)
    if isinstance(e, differential.ArenaCopies):
        return "arena copied in the kernel", _first_line(e)
    if isinstance(e, differential.CallbackMismatch):
        return "wrong callback calls", _first_line(e)
    stage = _stage(e.__traceback__)
    if isinstance(e, AssertionError) and stage is None and _compared(e.__traceback__):
        differences = [line for line in str(e).splitlines() if re.match(r"output\S*: ", line)]
        if differences and all(": weak type " in line for line in differences):
            return "wrong weak type", _first_line(e)
        return "wrong answer", _first_line(e)
    broken = _jit_fails(program)
    if broken is not None:
        return "generator error", f"jax.jit fails: {_first_line(broken)}"
    return f"exception during {stage or 'the check'}: {type(e).__name__}", _first_line(e)


class _Timeout(BaseException):
    """Raised by the alarm; not an Exception, so that no library code swallows it."""


def _alarm(signum, frame):
    raise _Timeout()


def check_seed(seed: int, mode: str, timeout: int, passes: tuple[str, ...] = (), transform: str | None = None) -> dict:
    """One seed's outcome: its features, failure class (None if it passed) and a line about it. With
    `transform`, the program is checked under that JAX transformation (`jaxalloc/testing/transformations.py`)."""
    from jaxalloc.testing.differential import SMALL_VALUES_PLACED, check_random_program
    from jaxalloc.testing.random_programs import random_program
    from jaxalloc.testing.transformations import check_transformed

    start = time.perf_counter()
    outcome = {"seed": seed, "features": [], "class": None, "detail": ""}
    try:
        program = random_program(seed)
    except Exception as e:  # noqa: BLE001
        outcome.update({"class": "generator error", "detail": _first_line(e)})
        return outcome
    outcome["features"] = sorted(program.features)
    if timeout:
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(timeout)
    try:
        if transform:
            derived = check_transformed(program.fn, program.args, transform, mode, passes, plan=SMALL_VALUES_PLACED)
            planned, outcome["arena"] = None, max(derived, default=0)
        else:
            planned = check_random_program(program, mode, passes)
            outcome["arena"] = planned.last_run.arena_bytes
        disagreement = getattr(planned, "jit_disagreement", None)
        if disagreement is not None:  # passed against jax.disable_jit(), reported by differential.py
            outcome.update({"class": "jit disagrees with disable_jit", "detail": disagreement.message.splitlines()[0]})
    except _Timeout as e:
        stage = _stage(e.__traceback__) or "the check"
        outcome.update({"class": f"timeout during {stage}", "detail": f"over {timeout} s"})
    except Exception as e:  # noqa: BLE001
        if timeout:
            signal.alarm(0)
        outcome["class"], outcome["detail"] = classify(program, e)
        outcome["trace"] = "".join(traceback.format_exception(e))[-4000:]
    finally:
        if timeout:
            signal.alarm(0)
    outcome["seconds"] = round(time.perf_counter() - start, 3)
    return outcome


# ---------------------------------------------------------------------------------------------
# the driver


def markdown_table(header: list[str], rows: list[list[str]], left=(0,)) -> list[str]:
    cells = [header, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row):
        aligned = (c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        return "| " + " | ".join(aligned) + " |"

    rule = "| " + " | ".join(("-" * w if i in left else "-" * (w - 1) + ":") for i, w in enumerate(widths)) + " |"
    return [line(header), rule, *(line(row) for row in rows)]


def report(outcomes: list[dict]) -> list[str]:
    """The two tables: programs by feature, failures by class with their first seeds."""
    outcomes = sorted(outcomes, key=lambda o: o["seed"])
    programs, failing = Counter(), Counter()
    by_class: dict[str, list[dict]] = defaultdict(list)
    for o in outcomes:
        programs.update(o["features"])
        if o["class"]:
            failing.update(o["features"])
            by_class[o["class"]].append(o)
    failed = sum(len(v) for v in by_class.values())
    in_arena = sum(1 for o in outcomes if o.get("arena"))
    lines = [f"{len(outcomes):,} programs, {len(outcomes) - failed:,} passed, {failed:,} failed; "
             f"{in_arena:,} of those that passed ran with an arena", ""]
    rows = [["all programs", f"{len(outcomes):,}", f"{failed:,}"]]
    rows += [[f, f"{n:,}", f"{failing[f]:,}"] for f, n in sorted(programs.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines += markdown_table(["feature", "programs", "failing"], rows) + [""]
    if not by_class:
        return lines + ["no failures"]
    rows = []
    for cls, items in sorted(by_class.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        seeds = ", ".join(str(o["seed"]) for o in items[:FIRST_SEEDS]) + (", ..." if len(items) > FIRST_SEEDS else "")
        detail = items[0]["detail"].replace("|", "/")
        rows.append([cls, f"{len(items):,}", seeds, detail if len(detail) <= 160 else detail[:157] + "..."])
    lines += markdown_table(["failure class", "programs", "first seeds", "first failure"], rows, left=(0, 2, 3))
    return lines


def load(paths) -> dict[int, dict]:
    outcomes = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                o = json.loads(line)
                outcomes[o["seed"]] = o
    return outcomes


def resolve_mode(mode: str) -> str:
    from jaxalloc.api import MODES

    if mode in MODES:
        return mode
    fallback = "arena"
    print(
        f"soak: this jaxalloc has no mode {mode!r} (modes: {', '.join(MODES)}); running {fallback!r} instead, "
        "so plan violations show up only as wrong answers",
        file=sys.stderr,
    )
    return fallback


def run(seeds: list[int], mode: str, jobs: int, timeout: int, recycle: int, sink, cache: str | None = None,
        passes: tuple[str, ...] = (), transform: str | None = None) -> None:
    """Check `seeds` on `jobs` worker processes (in this one with 0), passing each outcome to `sink`."""
    if jobs <= 0:
        _init_worker(cache)
        for seed in seeds:
            sink(check_seed(seed, mode, timeout, passes, transform))
        return
    pending = list(reversed(seeds))
    while pending:
        options = {"max_tasks_per_child": recycle} if sys.version_info >= (3, 11) and recycle else {}
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(jobs, context, _init_worker, (cache,), **options) as pool:
            running: dict[concurrent.futures.Future, int] = {}
            try:
                while pending or running:
                    while pending and len(running) < 2 * jobs:
                        seed = pending.pop()
                        running[pool.submit(check_seed, seed, mode, timeout, passes, transform)] = seed
                    done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                    for future in done:
                        seed = running.pop(future)
                        sink(future.result())
            except KeyboardInterrupt:
                # stop now: drop the queued seeds and end the workers (they may be deep in one program)
                processes = list((getattr(pool, "_processes", None) or {}).values())
                pool.shutdown(wait=False, cancel_futures=True)
                for process in processes:
                    process.terminate()
                raise
            except concurrent.futures.process.BrokenProcessPool:
                # a worker died (a crash in native code, or out of memory): blame the seeds it held
                for future, seed in running.items():
                    if future.done() and future.exception() is None:
                        sink(future.result())
                    else:
                        sink({"seed": seed, "features": [], "class": "worker crashed", "detail": "the process died"})
                print(f"soak: a worker died; restarting the pool ({len(pending):,} seeds to go)", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20000, help="number of seeds to check (default 20000)")
    parser.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--mode", default="checked", help="mode of the planned runs (default checked)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2; 0 runs in this process)")
    parser.add_argument("--transform", help="check each program under this JAX transformation of jaxalloc/testing/transformations.py "
                        "(grad, value_and_grad, vjp, jvp, jit, jit_of_grad, vmap, vmap_of_grad, grad_of_vmap, scan)")
    parser.add_argument("--passes", default=",".join(DEFAULT_PASSES), help="jx passes run before planning, "
                        "comma-separated (default: the pipeline planned functions run; '' plans each program as generated)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds a program may take (default 120; 0: none)")
    parser.add_argument("--recycle", type=int, default=200, help="seeds a worker checks before it is replaced "
                        "(default 200: a worker's compiled kernels pile up, some GiB per few hundred programs)")
    parser.add_argument("--results", help="append every seed's outcome to this JSON-lines file; skip seeds in it")
    parser.add_argument("--compilation-cache", default=str(Path(tempfile.gettempdir()) / "jaxalloc-soak-xla-cache"),
                        metavar="DIR", help="JAX's persistent compilation cache, shared by the workers and by later "
                        "runs (default: jaxalloc-soak-xla-cache in the temp directory; '' for none); "
                        "about three times as many seeds a second once warm")
    parser.add_argument("--summarize", nargs="+", metavar="FILE", help="print the tables of earlier --results files")
    parser.add_argument("--progress", type=float, default=30.0, help="seconds between progress lines (default 30)")
    args = parser.parse_args()

    if args.summarize:
        print("\n".join(report(list(load(args.summarize).values()))))
        return 0

    mode = resolve_mode(args.mode)
    passes = tuple(name for name in args.passes.split(",") if name)
    seeds = range(args.start, args.start + args.seeds)
    earlier = {}
    if args.results and Path(args.results).exists():
        earlier = {s: o for s, o in load([args.results]).items() if s in seeds}
    todo = [s for s in seeds if s not in earlier]
    print(f"soak: seeds {seeds.start}..{seeds.stop - 1} in mode {mode!r} after passes {passes} on {args.jobs} workers"
          + (f" ({len(earlier):,} already in {args.results})" if earlier else ""), file=sys.stderr)

    outcomes = list(earlier.values())
    out = open(args.results, "a") if args.results else None
    start = last = time.perf_counter()
    done = failed = 0

    def sink(outcome: dict) -> None:
        nonlocal done, failed, last
        outcomes.append(outcome)
        done += 1
        failed += outcome["class"] is not None
        if out:
            out.write(json.dumps(outcome) + "\n")
            out.flush()
        now = time.perf_counter()
        if now - last >= args.progress or done == len(todo):
            last = now
            rate = done / (now - start)
            eta = (len(todo) - done) / rate if rate else 0
            print(f"soak: {done:,}/{len(todo):,} seeds, {failed:,} failed, {rate:.2f} seeds/s, "
                  f"{now - start:.0f} s, about {eta / 60:.0f} min to go", file=sys.stderr)

    def interrupt(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, interrupt)  # `kill PID`: stop and print the tables of what ran
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started in the background by a shell
        signal.signal(signal.SIGINT, interrupt)
    interrupted = False
    try:
        run(todo, mode, args.jobs, args.timeout, args.recycle, sink, args.compilation_cache or None, passes,
            args.transform)
    except KeyboardInterrupt:
        interrupted = True
        print(f"soak: interrupted after {done:,} seeds", file=sys.stderr)
    finally:
        if out:
            out.close()
    under = f", under {args.transform}" if args.transform else ""
    print(f"mode {mode!r}, passes {passes}{under}, seeds {seeds.start} to {seeds.stop - 1}\n")
    print("\n".join(report(outcomes)))
    if interrupted:
        resume = "run the same command again to go on" if args.results else "rerun the chunk (or add --results FILE)"
        print(f"\ninterrupted with {len(todo) - done:,} seeds of the chunk unchecked: {resume}")
    else:
        print(f"\nnext chunk: --start {seeds.stop}")
    return 1 if any(o["class"] for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
