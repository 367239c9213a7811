"""What `jx-canonicalize` removes: values, the max-live bound and the nnc arena, alone and before `jx-fuse`.

Per program (the realistic programs of `programs.py`, and with `--corpus` the test corpus): the
values the jx module defines (op results outside fused bodies, constants left out), the rows
planned (after views and in-place folding), the bound (max-live of those rows) and the nnc arena,
each without and with `jx-canonicalize`; then the bound and arena after `jx-fuse` alone and after
`jx-canonicalize,jx-fuse`. Every plan passes the static plan checker. Prints Markdown tables.

    python benchmarks/canonicalize.py [--programs MLP,LSTM] [--corpus]
"""

from __future__ import annotations

import argparse
import time

from programs import ALIGNMENT, named, programs

from jaxalloc import planned
from jaxalloc.dialects import jx
from jaxalloc.planning.plan import make_plan

DCE, CANON, FUSE = ("jx-dce",), ("jx-canonicalize",), ("jx-fuse",)


def values(module) -> int:
    """Op results outside `jx.fused` bodies, constants left out: the values a plan must place or view."""
    count = 0
    for op in module.walk():
        inside_fused = any(isinstance(p, jx.FusedOp) for p in _ancestors(op))
        if not inside_fused and not isinstance(op, jx.ConstOp):
            count += len(op.results)
    return count


def _ancestors(op):
    parent = op.parent_op()
    while parent is not None:
        yield parent
        parent = parent.parent_op()


def measure(fn, args, passes) -> dict:
    module = planned(fn, passes=passes).lower(*args)
    plan = make_plan(module, allocator="nnc", alignment=ALIGNMENT)
    plan.check()
    return {"values": values(module), "rows": len(plan.buffers), "bound": plan.lower_bound, "arena": plan.arena_bytes}


def measure_all(fn, args) -> dict[tuple, dict]:
    """Keyed by the passes run after `jx-dce` (the default pipeline runs both, and `jx-schedule`)."""
    return {passes: measure(fn, args, DCE + passes) for passes in ((), CANON, FUSE, CANON + FUSE)}


def _pair(before: int, after: int, size: bool) -> str:
    show = (lambda n: f"{n / 1024:,.2f}") if size else (lambda n: f"{n:,}")
    return show(before) if before == after else f"{show(before)} → {show(after)}"


def print_table(results: list[tuple[str, dict]]) -> None:
    header = ["program", "values", "rows", "bound (KiB)", "arena (KiB)", "bound, fused (KiB)", "arena, fused (KiB)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
    for name, r in results:
        plain, canon, fused, both = r[()], r[CANON], r[FUSE], r[CANON + FUSE]
        cells = [
            name,
            _pair(plain["values"], canon["values"], False),
            _pair(plain["rows"], canon["rows"], False),
            _pair(plain["bound"], canon["bound"], True),
            _pair(plain["arena"], canon["arena"], True),
            _pair(fused["bound"], both["bound"], True),
            _pair(fused["arena"], both["arena"], True),
        ]
        print("| " + " | ".join(cells) + " |")


def print_totals(results: list[tuple[str, dict]]) -> None:
    changed = [r for _, r in results if r[()] != r[CANON]]
    total = {key: {k: sum(r[key][k] for _, r in results) for k in ("values", "rows", "bound", "arena")} for key in results[0][1]}
    print(
        f"\n{len(results)} programs, {len(changed)} changed; in all (bytes in KiB): values {_pair(total[()]['values'], total[CANON]['values'], False)}, "
        f"rows {_pair(total[()]['rows'], total[CANON]['rows'], False)}, bound {_pair(total[()]['bound'], total[CANON]['bound'], True)}, "
        f"arena {_pair(total[()]['arena'], total[CANON]['arena'], True)}; after jx-fuse: bound "
        f"{_pair(total[FUSE]['bound'], total[CANON + FUSE]['bound'], True)}, arena {_pair(total[FUSE]['arena'], total[CANON + FUSE]['arena'], True)}"
    )


LEGEND = (
    "Each cell: without → with `jx-canonicalize` (one figure where equal), both after the default `jx-dce`. `values`: op results of the jx "
    "module outside fused bodies, constants left out; `rows`: buffers planned (views and in-place "
    "results share their operand's); `bound`: max-live of those rows; `arena`: nnc's plan, offsets "
    f"aligned to {ALIGNMENT} B. `fused` columns: after `jx-fuse` → after `jx-canonicalize,jx-fuse`."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", help="comma-separated substrings of program names (default: all)")
    parser.add_argument("--corpus", action="store_true", help="the test corpus (jaxalloc/testing/corpus.py) instead")
    options = parser.parse_args()
    if options.corpus:
        from jaxalloc.testing.corpus import PROGRAMS

        chosen = [(p.name, p.fn, p.make_args()) for p in PROGRAMS]
    else:
        chosen = programs()
    chosen = [p for p in chosen if named(p[0], options.programs)]
    began = time.perf_counter()
    results = [(name, measure_all(fn, args)) for name, fn, args in chosen]
    if options.corpus:  # only the programs the pass changes, then the totals
        print_table([(n, r) for n, r in results if r[()] != r[CANON] or r[FUSE] != r[CANON + FUSE]])
    else:
        print_table(results)
    print_totals(results)
    print()
    print(LEGEND)
    print(f"\n({len(results)} programs in {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
