"""Which primitives may run in place, and which only view their operand's memory.

In-place (NNC's `ccv_nnc_cmd_allow_inplace`): the result may take the place of an operand
whose last use is this op, when both have the same byte size. Elementwise primitives read
each element before writing the same element, so any same-sized operand will do; updates
(`dynamic_update_slice`, `scatter*`, equinox's `maybe_set`) only into the array they update.

Views (NNC's aliases): the result is the operand's bytes read another way, so it takes no
memory of its own.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from jaxalloc.dialects import jx
from jaxalloc.frontend.types import byte_size

ELEMENTWISE = frozenset(
    {
        # unary
        "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "clz", "conj",
        "copy", "cos", "cosh", "digamma", "erf", "erf_inv", "erfc", "exp", "exp2",
        "expm1", "floor", "imag", "integer_pow", "is_finite", "lgamma", "log", "log1p", "logistic",
        "neg", "not", "population_count", "real", "reduce_precision", "round", "rsqrt", "sign",
        "sin", "sinh", "sqrt", "square", "tan", "tanh", "convert_element_type",
        # binary and n-ary
        "add", "add_any", "and", "atan2", "div", "eq", "ge", "gt", "igamma", "igammac", "le", "lt",
        "max", "min", "mul", "ne", "nextafter", "or", "pow", "rem", "select_n", "shift_left",
        "shift_right_arithmetic", "shift_right_logical", "sub", "xor", "clamp",
    }
)
"""Primitives whose result may overwrite any operand of its shape and byte size."""

UPDATES_OPERAND_0 = frozenset(
    {"dynamic_update_slice", "scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min", "scatter-max"}
)
"""Primitives that write a modified copy of operand 0: in place into operand 0 only."""

UPDATES_OPERAND_1 = frozenset({"maybe_set"})
"""Primitives that write a modified copy of operand 1: equinox's `maybe_set(pred, xs, x, *index)`, the
write of a value into the array that its loops save their outputs in (a diffrax solve's `SaveAt`)."""

PRODUCTS = frozenset({"dot_general", "conv_general_dilated"})
"""Primitives that XLA computes only on buffers of its own, its result a buffer it never computes
again inside a user: their values may lie outside the arena (`plan_function`'s `products_outside`),
and a result kept outside needs no pinning (`CompiledFunctions.kept_outside`)."""

VIEWS = frozenset({"reshape", "squeeze", "bitcast_convert_type"})
"""Primitives whose result reinterprets operand 0's bytes (when the byte size is unchanged)."""


def in_place_candidates(op: Operation) -> tuple[int, ...]:
    """Operand positions whose memory the op's single result may take, first choice first."""
    results, operands = op.results, op.operands  # a fused or primitive op's only operands and results
    windowed: set[int] = set()
    if isinstance(op, jx.FusedOp) and len(results) == 1 and all(_maps_elements(inner) or _windows(inner) for inner in op.body.block.ops):
        name = "add"  # an elementwise chain: the rule of one elementwise op, but for the operands it reads windows of
        args = op.body.block.args
        windowed = {args.index(inner.operands[0]) for inner in op.body.block.ops if _windows(inner) and inner.operands[0] in args}
    elif not isinstance(op, jx.PrimOp) or len(results) != 1:
        return ()
    else:
        name = op.primitive.data
    if name in UPDATES_OPERAND_0:
        positions = (0,)
    elif name in UPDATES_OPERAND_1:
        positions = (1,)
    elif name in ELEMENTWISE:
        positions = tuple(range(len(operands)))
    else:
        return ()
    result = results[0].type
    shape, size = result.get_shape(), byte_size(result)
    return tuple(
        i for i in positions
        if i not in windowed and operands[i].type.get_shape() == shape and byte_size(operands[i].type) == size
    )


def _maps_elements(op: Operation) -> bool:
    """Whether a fused op's inner op keeps element `i` of a result of the fused op's shape at `i`, or
    reads no value of that shape (a broadcast of a smaller one, an iota)."""
    return isinstance(op, jx.YieldOp) or (
        isinstance(op, jx.PrimOp) and op.primitive.data in ELEMENTWISE | {"broadcast_in_dim", "iota"}
    )


def _windows(op: Operation) -> bool:
    """A `dynamic_slice` inside a fused op (`jx-fuse` joins one of an argument to what reads it): it
    reads a window of its operand, wherever the window is, so the fused op cannot overwrite that one."""
    return isinstance(op, jx.PrimOp) and op.primitive.data == "dynamic_slice"


def is_view(op: Operation) -> bool:
    """Whether the op's single result is only its first operand's memory read another way."""
    if not isinstance(op, jx.PrimOp) or len(op.results) != 1 or not op.operands:
        return False
    primitive = op.primitive.data
    if primitive not in VIEWS:
        return False
    if primitive == "reshape" and op.params.data.get("dimensions") is not None:
        return False  # a reshape that transposes first moves data
    return byte_size(op.operands[0].type) == byte_size(op.results[0].type)


def viewed(value: SSAValue) -> SSAValue:
    """The value whose memory `value` is, through views (`is_view`): itself where it is no view."""
    while isinstance(value.owner, Operation) and is_view(value.owner):
        value = value.owner.operands[0]
    return value
