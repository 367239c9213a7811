"""Questions about jx IR that assignment asks of values and loops, independent of any plan."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from jaxalloc.analysis.inplace import PRODUCTS, in_place_candidates, is_view, viewed
from jaxalloc.analysis.liveness import defined_in
from jaxalloc.dialects import jx
from jaxalloc.frontend.types import byte_size


def runs_past_inits(loop: jx.WhileOp, initial: Sequence[int]) -> bool:
    """Whether `loop` says it runs at least as many rounds as a position reads init operands in
    place (`initial`: their positions): its result at that position is then always in its ring."""
    return loop.rounds is not None and loop.rounds.data >= len(initial)


def computed_within(value: SSAValue, block: Block) -> bool:
    """Whether `value` is defined in `block` or a region nested in it, and not a constant (which
    stays outside the arena)."""
    return defined_within(value, block) and not is_constant(value)


def is_constant(value: SSAValue) -> bool:
    """Whether `value` is a constant or a view of one (a literal reshaped): outside the arena, never
    computed into a parent's memory."""
    return isinstance(viewed(value).owner, jx.ConstOp)


def defined_within(value: SSAValue, block: Block) -> bool:
    """Whether `value` is defined in `block` or in a region nested in it."""
    at = value.block if isinstance(value, BlockArgument) else value.owner.parent_block()
    while at is not None:
        if at is block:
            return True
        parent = at.parent_op()
        at = parent.parent_block() if parent is not None else None
    return False


def products_values(block: Block, shared: set[SSAValue]) -> set[SSAValue]:
    """The operands and results of the matrix products and convolutions of `block` (a fused op
    holding one counts as one), the values of `block` that such an op in a loop or a case reads (a
    weight a loop's body multiplies by, read where it lies every round), and the values computed in
    place of one of them that nothing else reads (`m @ w + b` where the product is read nowhere
    else: XLA computes the sum into its buffer), and the parts split or sliced from a value that
    lies unchanged while the block runs (`PARTS`); but constants and the values `shared`, which may
    share a buffer with a loop's or a branch's result (`loop_memory`): outside the arena, such a
    value would take the loop's ring or the case result's memory out with it, into a buffer of
    XLA's own. A loop's result itself may be outside: its ring is then a buffer of XLA's own, as
    `jax.jit`'s loop would hold."""
    def left(v: SSAValue) -> bool:
        return not isinstance(v, BlockArgument) and (v not in shared or isinstance(v.owner, jx.WhileOp)) \
            and not isinstance(viewed(v).owner, jx.ConstOp)

    found: set[SSAValue] = set()
    for op in block.ops:
        if _multiplies(op):
            found.update(v for v in (*op.operands, *op.results) if left(v))
        elif isinstance(op, jx.WhileOp | jx.CaseOp):
            found.update(v for inner in op.walk() if _multiplies(inner) for v in inner.operands
                         if v not in op.operands and defined_in(v, block) and left(v))
    for op in block.ops:
        if any(viewed(op.operands[p]) in found and _read_only_by(op.operands[p], op) for p in in_place_candidates(op)) \
                or (is_part(op) and unchanged_in(op.operands[0], block)):
            found.update(r for r in op.results if r not in shared)
    return found


PARTS = frozenset({"split", "slice"})
"""Ops that read static parts of their operand. Of a value that lies unchanged while the block runs
(defined around a loop's body or a branch, or carried through each round as it is), XLA reads the
parts where they lie, in the ops that read them (`benchmarks/real_memory.py`'s `lax.switch`
program: `w[0]`). Not a `dynamic_slice`: left to XLA, a scan's rows of its stacked weights took the
transformer (scan) training step's temp from 2.5 to 3 MiB. Not the parts of a value XLA holds:
left to XLA, an LSTM's gates split from the sum of its products saved 32 KiB a gate, and XLA
computed the gates' sigmoids in more than one kernel; the LSTM (scan)'s warm call went from 1.3 to
1.7 times jit's."""


def is_part(op: Operation) -> bool:
    return isinstance(op, jx.PrimOp) and op.primitive.data in PARTS


def unchanged_in(value: SSAValue, block: Block) -> bool:
    """Whether `value` lies unchanged while `block` runs: a value of an enclosing block, or a loop
    body's argument that each round hands on as it is (a scan's stacked inputs)."""
    if not defined_in(value, block):
        return True
    loop = block.parent_op()
    return isinstance(value, BlockArgument) and isinstance(loop, jx.WhileOp) and block is loop.body.block \
        and block.last_op.operands[value.index] is value


SMALL_BYTES = 512
"""A value of at most this many bytes is small to the plan (`small_values`): a scalar, a vector of up
to 128 floats, a row statistic of an activation (a layer norm's mean, a softmax's maximum). XLA's
CPU runtime runs a sequence of kernels one after another where every buffer they touch is at most
512 bytes (docs/design/compiled.md); in the arena, each such value is a write of its own into a
larger buffer and a read in every kernel that takes it. At 128 bytes, the transformer of the
benchmarks kept 27 such vectors in a 64.5 KiB arena and its kernel compiled into 230 fusions (jit's:
118); at 512 bytes 164, and `eqx_error_if`'s 6x6 matrices leave its arena empty (docs/benchmarks.md)."""


def is_small(value: SSAValue) -> bool:
    return byte_size(value.type) <= SMALL_BYTES


def small_values(block: Block) -> set[SSAValue]:
    """The small values that the ops of `block` compute (`SMALL_BYTES`), constants aside: left to
    XLA's buffers, each is a few registers or words of XLA's own, fused into the ops that read it,
    where in the arena it takes a whole slot of the alignment and each read and write of it is a
    kernel of its own (half the kernels of a diffrax solver's round were its time, step size,
    counters and flags; the state of the library corpus's Euler solve is two vectors of three
    floats). A buffer's values are all of one size (views and in-place ops keep it), so a small
    value shares memory only with small values, all of them outside: a loop's small position is
    carried in XLA's loop state, a case's small result in a buffer of XLA's, as `jax.jit` holds
    them."""
    return {r for op in block.ops for r in op.results if is_small(r) and not is_constant(r)}


def leaves_nothing_to_place(module: Operation) -> bool:
    """Whether every value the ops of `module` compute is one that a plan with products and small
    values outside (the compiled kernel's) leaves to XLA on its own account: small, a constant, a
    matrix product's or convolution's, or an output of the function. Such a plan may place nothing
    in the arena (`make_plan` says whether it does)."""
    outputs = {v for op in module.walk() if isinstance(op, jx.FuncOp) for v in op.body.block.last_op.operands}
    return all(is_small(r) or is_constant(r) or r in outputs or _multiplies(op)
               for op in module.walk() for r in op.results)


def _multiplies(op: Operation) -> bool:
    """Whether `op` is a matrix product or a convolution, or a fused op holding one."""
    inner = op.body.block.ops if isinstance(op, jx.FusedOp) else (op,)
    return any(isinstance(o, jx.PrimOp) and o.primitive.data in PRODUCTS for o in inner)


def _read_only_by(value: SSAValue, op: Operation) -> bool:
    """Whether `op` is the only reader of `value`'s memory: of `value` and, through views, of what it
    views. (Where other ops read it before `op`, the value computed in its place outside the arena
    would hold XLA's buffer longer, past the peaks of XLA's own: the transformer (scan) training
    step of `benchmarks/real_memory.py` held 3% more.)"""
    while True:
        if any(use.operation is not op for use in value.uses):
            return False
        if not (isinstance(value.owner, Operation) and is_view(value.owner)):
            return True
        value, op = value.owner.operands[0], value.owner


def loop_memory(block: Block) -> set[SSAValue]:
    """The values of `block` that may be in the memory of a loop's or a case's result: those results,
    their views, and the values computed in place from any of these (`in_place_candidates`)."""
    found: set[SSAValue] = set()
    for op in block.ops:
        if isinstance(op, jx.WhileOp | jx.CaseOp):
            found.update(op.results)
        elif is_view(op) and op.operands[0] in found or any(op.operands[p] in found for p in in_place_candidates(op)):
            found.update(op.results)
    return found
