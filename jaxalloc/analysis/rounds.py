"""What a loop's own ops prove of its rounds.

A `jx.while` that says it runs `rounds` rounds, or `at_most`, is planned for them: a round more would
find its ring slots taken by other values. Where the loop counts them itself (a carried integer that
starts at a constant and goes up by one each round, while it is less than a constant), its ops prove
what it says, and a run need not count its rounds to check it (`CompiledFunctions.loop`). This reads
the IR alone, not the frontend that wrote `rounds`: a pass or a hand-written module may say anything.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.ir import BlockArgument, SSAValue

from jaxalloc.dialects import jx


def said_rounds_proven(loop: jx.WhileOp, constants: Any) -> bool:
    """Whether the loop's ops prove the `rounds` it says it runs (its whole condition is the count)
    or its `at_most` (the count is one of the `and`s of its condition); True where it says neither.
    `constants[key]` is the array of each `jx.const`."""
    rounds, at_most = loop.said_rounds
    if rounds is None and at_most is None:
        return True
    test = loop.cond.block.last_op.operands[0]
    if rounds is not None:
        return _counted(loop, test, constants) == rounds
    counts = [_counted(loop, term, constants) for term in _conjuncts(test)]
    return any(count is not None and count <= at_most for count in counts)


def _conjuncts(test: SSAValue) -> list[SSAValue]:
    """The boolean values whose `and` is `test`, itself where it is no `and`; a bool made a bool
    (`(i < 6) & ...` of a Python int counter makes its weak bool strong) is the bool."""
    terms, pending = [], [test]
    while pending:
        value = pending.pop()
        op = value.owner
        if isinstance(op, jx.PrimOp) and (op.primitive.data == "and" or op.primitive.data == "convert_element_type"
                                          and op.operands[0].type == value.type):
            pending.extend(op.operands)
        else:
            terms.append(value)
    return terms


def _counted(loop: jx.WhileOp, test: SSAValue, constants: Any) -> int | None:
    """How many rounds run while `test` holds, where it is `counter < n`: `counter` a carried
    integer that starts at constant `start`, the body adds a constant 1 to it, `n` a constant
    (`max(0, n - start)`); None where that is not what the ops say."""
    less = test.owner
    if not (isinstance(less, jx.PrimOp) and less.primitive.data == "lt"):
        return None
    counter, bound = less.operands
    if not (isinstance(counter, BlockArgument) and counter.owner is loop.cond.block):
        return None
    k = counter.index
    n, start = _integer(bound, constants), _integer(loop.inits[k], constants)
    body = loop.body.block
    step = body.last_op.operands[k].owner
    if n is None or start is None or not (isinstance(step, jx.PrimOp) and step.primitive.data == "add"):
        return None
    kept, (a, b) = body.args[k], step.operands
    if not (a is kept and _integer(b, constants) == 1 or b is kept and _integer(a, constants) == 1):
        return None
    return max(0, n - start)


def _integer(value: SSAValue, constants: Any) -> int | None:
    """The value of an integer scalar `jx.const`, else None."""
    op = value.owner
    if not isinstance(op, jx.ConstOp):
        return None
    array = np.asarray(constants[op.key.data])
    return int(array) if array.shape == () and np.issubdtype(array.dtype, np.integer) else None
