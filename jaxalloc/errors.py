"""Errors that name a problem with the user's input; the CLI prints them as one line."""

import operator


class JaxallocError(Exception):
    """Base of every error jaxalloc raises about its input (never about its own bugs)."""


class UnsupportedProgramError(JaxallocError):
    """The JAX program cannot be converted or planned (dynamic shapes, non-array arguments, ...)."""


class TraceFormatError(JaxallocError):
    """A lifetime trace file is malformed; the message names the file and line."""


class PlanViolation(AssertionError):
    """A plan lets a value be overwritten before it is read (a planner bug, never a user error).

    Raised by the static plan checker and by the sanitizer (`mode="checked"`); the message names
    the value read, the value written over it, both source lines and the loop rounds.
    """


def _positive(value) -> int:
    """`value` as an int if it is a positive integer (not a bool, a float or a string), else 0."""
    try:
        return max(operator.index(value), 0) if not isinstance(value, bool) else 0
    except TypeError:
        return 0


def check_alignment(alignment) -> int:
    """`alignment` as an int, or a `JaxallocError`: the one check of every alignment option (the API,
    `make_plan`, the passes and the command line), so a bad value fails here, not deep in a planner."""
    if not _positive(alignment):
        raise JaxallocError(
            f"alignment must be a positive integer number of bytes (any, not only a power of two), got {alignment!r}"
        )
    return _positive(alignment)


def check_top(top) -> int:
    """`top`, the rows of each report table, as an int, or a `JaxallocError`."""
    if not _positive(top):
        raise JaxallocError(f"top must be a positive number of rows per table, got {top!r}")
    return _positive(top)


def first_line(error: BaseException) -> str:
    """`TypeError: what went wrong`: an exception in one line, for messages that wrap it."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
