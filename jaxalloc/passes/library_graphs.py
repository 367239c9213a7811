"""Which ops XLA's CPU backend hands to its YNNPACK library as one graph (`jx-fuse{library=true}`).

On the CPU, XLA starts a library fusion at a window reduction or a reduction and grows it up through
the elementwise ops that feed it and through a convolution that feeds those: a CNN's
convolution, bias, ReLU and pooling run as one YNNPACK graph, and neither the convolution's result
nor the ReLU's is ever a buffer of XLA's. A plan that keeps them gives the arena megabytes XLA never
holds, and the compiled arena would write and read them back (the benchmark CNN ran at half
`jax.jit`'s speed so).

The rules are a conservative subset of XLA's (`xla/backends/cpu/ynn_support.cc`): float32 or
float64 values; elementwise ops YNNPACK computes, of at least `PREFERRED_ELEMENTS` elements; window
reductions over windows that do not overlap; 2-D convolutions in NHWC/HWIO layout of more than 16
features. An op outside them is fused as XLA fuses it without the library, or not at all.
"""

from __future__ import annotations

import math
import re

from xdsl.dialects.builtin import Float32Type, Float64Type
from xdsl.ir import Operation

from jaxalloc.dialects import jx
from jaxalloc.passes.printed_params import UNREADABLE, printed_param

ELEMENTWISE = frozenset({
    "abs", "add", "ceil", "convert_element_type", "cos", "div", "erf", "exp", "expm1", "floor", "log",
    "log1p", "logistic", "max", "min", "mul", "neg", "pow", "round", "rsqrt", "sign", "sin", "sqrt",
    "sub", "tan", "tanh",
})
"""Elementwise primitives YNNPACK computes inside a graph (its unary and binary operators)."""

WINDOW_REDUCTIONS = frozenset({"reduce_window_max", "reduce_window_min", "reduce_window_sum"})

REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min"})

PREFERRED_ELEMENTS = 4096
"""XLA hands an op other than a convolution or a product to the library only where the op or an
operand has at least this many elements: below it, the library's overhead costs more."""

_NHWC = re.compile(r"lhs_spec=\(0, 3, 1, 2\), rhs_spec=\(3, 2, 0, 1\), out_spec=\(0, 3, 1, 2\)")


def _floats(op: Operation) -> bool:
    return all(isinstance(v.type.element_type, Float32Type | Float64Type) for v in (*op.operands, *op.results))


def _preferred(op: Operation) -> bool:
    return any(math.prod(v.type.get_shape()) >= PREFERRED_ELEMENTS for v in (*op.operands, *op.results))


def _param(op: jx.PrimOp, name: str):
    """A bind parameter from its printed form, None where it is not printed or does not parse."""
    value = printed_param(op, name)
    return None if value is UNREADABLE else value


def _prim(op: Operation, names: frozenset[str]) -> bool:
    return isinstance(op, jx.PrimOp) and op.primitive.data in names and len(op.results) == 1 and _floats(op)


def member(op: Operation) -> bool:
    """An elementwise op (or a broadcast) that a library graph takes in."""
    if isinstance(op, jx.PrimOp) and op.primitive.data == "broadcast_in_dim":
        return _floats(op)
    return _prim(op, ELEMENTWISE) and _preferred(op)


def window_reduction(op: Operation) -> bool:
    """A window reduction that starts a library graph: windows that neither overlap nor skip
    elements, no padding, no dilation."""
    if not (_prim(op, WINDOW_REDUCTIONS) and len(op.operands) == 1 and _preferred(op)):
        return False
    sizes, strides = _param(op, "window_dimensions"), _param(op, "window_strides")
    padding = _param(op, "padding")
    dilations = (_param(op, "base_dilation"), _param(op, "window_dilation"))
    if None in (sizes, strides, padding) or any(d is None or set(d) - {1} for d in dilations):
        return False
    return all(n == s for n, s in zip(sizes, strides)) and not any(lo or hi for lo, hi in padding)


def root(op: Operation) -> bool:
    """A window reduction or reduction that starts a library graph, which the elementwise ops and
    convolutions feeding it join."""
    if window_reduction(op):
        return True
    return _prim(op, REDUCTIONS) and len(op.operands) == 1 and _preferred(op) and bool(_param(op, "axes"))


def producer(op: Operation) -> bool:
    """A convolution that XLA fuses into the library graph its readers start (YNNPACK's own
    convolution: 2-D, NHWC input and output, HWIO kernel, more than 16 features, undilated input)."""
    if not (_prim(op, frozenset({"conv_general_dilated"})) and len(op.operands) == 2):
        return False
    numbers = op.params.data.get("dimension_numbers")
    if numbers is None or not _NHWC.search(numbers.data):
        return False
    if _param(op, "batch_group_count") != 1 or set(_param(op, "lhs_dilation") or (0,)) != {1}:
        return False
    lhs, rhs, out = (v.type.get_shape() for v in (*op.operands, op.results[0]))
    if len(lhs) != 4 or max(lhs[3], out[3]) <= 16:
        return False
    return all(out[d] <= lhs[d] and rhs[d - 1] <= lhs[d] for d in (1, 2))
