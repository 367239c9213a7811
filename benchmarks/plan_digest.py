"""A digest of every plan the corpus, the library corpus, the benchmark programs and random programs
get: one line per program and plan, so that a refactoring can show its plans are byte for byte
those of the commit before it.

Each line names the program and the plan (`plan` for `planned(f).plan(*args, include_outputs=True)`,
every value planned; the program names of `jaxalloc.plans(f, *args)` for the plans the calls run), its
arena bytes and a SHA-256 of the planned module as printed (offsets, rings and views included).

    python benchmarks/plan_digest.py > before.txt      # on the commit before
    python benchmarks/plan_digest.py > after.txt       # on the change
    diff before.txt after.txt                          # no output: the same plans
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import warnings
from collections.abc import Callable, Iterator

import programs as benchmark_programs

import jaxalloc
from jaxalloc.testing import corpus, library, random_programs


def every_program(random_count: int) -> Iterator[tuple[str, Callable, tuple]]:
    for program in corpus.PROGRAMS:
        yield f"corpus/{program.name}", program.fn, program.make_args()
    for program in library.PROGRAMS:
        yield f"library/{program.name}", program.fn, program.make_args()
    for name, fn, args in benchmark_programs.programs():
        yield f"benchmarks/{name}", fn, args
    for seed in range(random_count):
        fn, args = random_programs.random_program(seed)
        yield f"random/{seed}", fn, args


def _digest(plan: jaxalloc.Plan) -> str:
    return hashlib.sha256(str(plan.module).encode()).hexdigest()[:16]


def digests(name: str, fn: Callable, args: tuple, allocator: str) -> Iterator[str]:
    try:
        plan = jaxalloc.planned(fn, allocator=allocator).plan(*args, include_outputs=True)
        yield f"{name} plan {plan.arena_bytes} {_digest(plan)}"
        for program, kernel_plan in sorted(jaxalloc.plans(jaxalloc.planned(fn, allocator=allocator), *args).items()):
            yield f"{name} {program} {kernel_plan.arena_bytes} {_digest(kernel_plan)}"
    except jaxalloc.JaxallocError as error:
        yield f"{name} refused: {str(error).splitlines()[0]}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=40, help="random programs, seeds 0..N-1 (default 40)")
    parser.add_argument("--allocator", default="nnc")
    options = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    for name, fn, args in every_program(options.random):
        for line in digests(name, fn, args, options.allocator):
            print(line, flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
