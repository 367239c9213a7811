"""The `jaxalloc` command line: `ir` prints a function's jx module, `trace` plans a lifetime trace,
`plan` plans a function and reports it, `compare` puts the plan beside XLA's memory for the function."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from jaxalloc.errors import JaxallocError


def _add_target(p) -> None:
    """The function to work on and its example arguments, for `ir`, `plan` and `compare`."""
    p.add_argument("target", help="MODULE:FUNCTION (module name or path to a .py file)")
    p.add_argument("args", nargs="*", help="example arguments as shape specs, e.g. f32[64,512] i32[] bool[3]")
    p.add_argument(
        "--args-from",
        metavar="FUNCTION",
        help="a function in the same module returning the example arguments (a tuple)",
    )
    p.add_argument("--x64", action="store_true", help="turn on JAX's 64-bit types (as JAX_ENABLE_X64=1) for i64/u64/f64/c128")


def _add_ir(commands) -> None:
    p = commands.add_parser("ir", help="print the jx module of a Python function")
    _add_target(p)
    p.set_defaults(run=_run_ir)


def _run_ir(ns) -> None:
    from jaxalloc.targets import load_function_and_args
    from jaxalloc.api import Planned

    fn, args = load_function_and_args(ns.target, ns.args, ns.args_from)
    print(Planned(fn).lower(*args))


def _add_trace(commands) -> None:
    p = commands.add_parser("trace", help="plan a MiniMalloc-format lifetime trace (id,lower,upper,size)")
    p.add_argument("file", help="CSV file with the columns id,lower,upper,size")
    p.add_argument("--allocator", default="nnc", help="allocator name (default: nnc)")
    p.add_argument("--alignment", type=int, default=1, help="offset alignment in bytes (default: 1)")
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help="time limit of an allocator that searches (search: default 10)",
    )
    p.add_argument("--out", metavar="PLAN.csv", help="write the rows with an offset column")
    p.add_argument("--plot", metavar="PNG", help="write a Gantt chart of the plan")
    p.set_defaults(run=_run_trace)


def _run_trace(ns) -> None:
    from jaxalloc.traces import run_trace_command

    run_trace_command(ns)


def _add_function_target(p) -> None:
    _add_target(p)
    p.add_argument("--allocator", default="nnc", help="allocator name (default: nnc)")
    p.add_argument("--alignment", type=int, default=64, help="offset alignment in bytes (default: 64)")
    p.add_argument("--include-outputs", action="store_true", help="plan the outputs in the arena too")


def _plan_target(ns):
    from jaxalloc.api import planned
    from jaxalloc.targets import load_function_and_args

    planner = planned(allocator=ns.allocator, alignment=ns.alignment)  # a bad option fails before any import
    fn, args = load_function_and_args(ns.target, ns.args, ns.args_from)
    return fn, args, planner(fn).plan(*args, include_outputs=ns.include_outputs)


def _add_plan(commands) -> None:
    p = commands.add_parser("plan", help="plan a Python function and print a report of the plan")
    _add_function_target(p)
    p.add_argument("--top", type=int, default=10, help="buffers listed in each table of the report (default: 10)")
    p.add_argument("--out", metavar="PLAN.csv", help="write the plan: tensor_name,size,offset,start_time,end_time")
    p.add_argument("--plot", metavar="PNG", help="write a Gantt chart with the largest buffers labelled")
    p.add_argument("--perfetto", metavar="JSON", help="write a Chrome trace-event file for the Perfetto UI")
    p.set_defaults(run=_run_plan)


def _run_plan(ns) -> None:
    from jaxalloc.errors import check_top

    check_top(ns.top)
    _, _, plan = _plan_target(ns)
    plan.check()
    print(plan.report(top=ns.top))
    if ns.out:
        plan.to_csv(ns.out)
        print(f"wrote {ns.out}")
    if ns.plot:
        plan.plot(ns.plot)
        print(f"wrote {ns.plot}")
    if ns.perfetto:
        plan.to_perfetto(ns.perfetto)
        print(f"wrote {ns.perfetto} (open it in ui.perfetto.dev)")


def _add_compare(commands) -> None:
    p = commands.add_parser(
        "compare",
        help="compare a function's arena, outputs inside, with XLA's temp + output - alias from memory_analysis(), "
        "and re-plan XLA's own buffers",
    )
    _add_function_target(p)
    p.add_argument("--no-replan", action="store_true", help="skip re-planning XLA's own temp buffers")
    p.set_defaults(run=_run_compare)


def _run_compare(ns) -> None:
    from jaxalloc.xla.buffers import replan_xla_buffers

    fn, args, plan = _plan_target(ns)
    print(plan.compare_xla())
    if not ns.no_replan:
        print()
        print(replan_xla_buffers(fn, args, alignment=ns.alignment))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxalloc", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _add_ir(commands)
    _add_trace(commands)
    _add_plan(commands)
    _add_compare(commands)
    return parser


def _check_outputs(ns) -> None:
    """Refuse, before any work, an output file that cannot be written: a missing directory, a directory,
    a chart in a format matplotlib does not write."""
    for option in ("out", "plot", "perfetto"):
        path = getattr(ns, option, None)
        if path is None:
            continue
        where = Path(path)
        if where.is_dir():
            raise JaxallocError(f"--{option} {path} is a directory; give a file name")
        if not where.parent.is_dir():
            raise JaxallocError(f"--{option} {path}: no directory {where.parent}; create it first")
    if getattr(ns, "plot", None) is not None:
        from matplotlib.backend_bases import FigureCanvasBase

        formats = FigureCanvasBase.get_supported_filetypes()
        suffix = Path(ns.plot).suffix.lstrip(".").lower()
        if suffix not in formats:
            raise JaxallocError(
                f"--plot {ns.plot}: end the name with an image format matplotlib writes: {', '.join(sorted(formats))}"
            )


def _x64(ns):
    """JAX's 64-bit types for the command, where `--x64` asks for them."""
    if not getattr(ns, "x64", False):
        return contextlib.nullcontext()
    import jax

    return jax.enable_x64(True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        parser.print_help()
        return 0
    ns = parser.parse_args(argv)
    try:
        _check_outputs(ns)
        with _x64(ns):
            ns.run(ns)
    except JaxallocError as e:
        print(f"jaxalloc {ns.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader (e.g. `| head`) left early: not an error of ours
        sys.stderr.close()
        return 0
    except OSError as e:  # writing an output failed after the checks (permissions, a full disk)
        print(f"jaxalloc {ns.command}: error: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
