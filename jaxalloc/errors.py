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


def check_alignment(alignment) -> int:
    """`alignment` as an int, or a `JaxallocError`: the one check of every alignment option (the API,
    `make_plan`, the passes and the command line), so a bad value fails here, not deep in a planner."""
    try:
        value = operator.index(alignment) if not isinstance(alignment, bool) else 0
    except TypeError:
        value = 0
    if value < 1:
        raise JaxallocError(
            f"alignment must be a positive integer number of bytes (any, not only a power of two), got {alignment!r}"
        )
    return value
