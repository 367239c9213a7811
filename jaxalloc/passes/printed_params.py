"""Bind parameters read back from their printed form, for IR read from text (`xdsl-opt`), which
has no side table. Imports JAX only to name a matmul precision, so passes load without it."""

from __future__ import annotations

import ast
import re
from typing import Any

from jaxalloc.dialects import jx

UNREADABLE = object()
"""A parameter whose printed form does not parse back (IR read from text): no rewrite uses it."""

_NUMPY_SCALAR = re.compile(r"np\.\w+\(([^()]*)\)")
"""`np.int64(0)` as the IR prints a numpy scalar: read as `0`."""

_PRECISION = re.compile(r"Precision\.(\w+)")
"""`Precision.HIGHEST` as the IR prints a matmul precision: read back by name."""


def printed_param(op: jx.PrimOp, name: str) -> Any:
    """A bind parameter of `op` parsed from its printed form: None where it is not printed,
    `UNREADABLE` where the printed form does not parse."""
    text = op.params.data.get(name)
    if text is None:
        return None
    try:
        value = ast.literal_eval(_PRECISION.sub(r"'\1'", _NUMPY_SCALAR.sub(r"\1", text.data)))
        return _precisions(value) if name == "precision" else value
    except (ValueError, SyntaxError, KeyError):
        return UNREADABLE


def _precisions(value: Any) -> Any:
    """A `dot_general` precision read from text: names back to `lax.Precision`s."""
    from jax import lax

    if isinstance(value, tuple):
        return tuple(_precisions(v) for v in value)
    return lax.Precision[value] if isinstance(value, str) else value
