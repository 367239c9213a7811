"""The `jaxalloc` command line: `ir` prints a function's jx module, `trace` plans a lifetime trace."""

from __future__ import annotations

import argparse
import sys

from jaxalloc.errors import JaxallocError


def _add_ir(commands) -> None:
    p = commands.add_parser("ir", help="print the jx module of a Python function")
    p.add_argument("target", help="MODULE:FUNCTION (module name or path to a .py file)")
    p.add_argument(
        "args",
        nargs="*",
        help="example arguments as shape specs, e.g. f32[64,512] i32[] bool[3]",
    )
    p.add_argument(
        "--args-from",
        metavar="FUNCTION",
        help="a function in the same module returning the example arguments (a tuple)",
    )
    p.set_defaults(run=_run_ir)


def _run_ir(ns) -> None:
    from jaxalloc.targets import load_function_and_args
    from jaxalloc.api import planned

    fn, args = load_function_and_args(ns.target, ns.args, ns.args_from)
    print(planned(fn).lower(*args))


def _add_trace(commands) -> None:
    p = commands.add_parser("trace", help="plan a MiniMalloc-format lifetime trace (id,lower,upper,size)")
    p.add_argument("file", help="CSV file with the columns id,lower,upper,size")
    p.add_argument("--allocator", default="nnc", help="allocator name (default: nnc)")
    p.add_argument("--alignment", type=int, default=1, help="offset alignment in bytes (default: 1)")
    p.add_argument("--out", metavar="PLAN.csv", help="write the rows with an offset column")
    p.add_argument("--plot", metavar="PNG", help="write a Gantt chart of the plan")
    p.set_defaults(run=_run_trace)


def _run_trace(ns) -> None:
    from jaxalloc.traces import run_trace_command

    run_trace_command(ns)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxalloc", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _add_ir(commands)
    _add_trace(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        ns.run(ns)
    except JaxallocError as e:
        print(f"jaxalloc {ns.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader (e.g. `| head`) left early: not an error of ours
        sys.stderr.close()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
