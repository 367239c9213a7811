"""Buffer assignment: every value of a jx function gets a place in one arena.

NNC's scheme, recursively over sub-graphs (nnc-allocator.md sections 6-9):
- In a block, values merge into buffers: a view joins its operand's buffer, and an op that
  may run in place joins the buffer of an operand whose last use it is (same byte size).
- Each region op gets one temporary block of memory, live only at the op, that its regions
  plan their own values into (a case's branches share it; a loop's condition and body too).
- A value a case branch computes and yields is placed where the parent keeps the case result; a
  branch that yields a value from outside makes the result a view of it (NNC's phi), kept alive
  as long as the result (a loop's carried value too: its slot is not written while it is alive);
  one whose value lies in another result's memory (yielded twice, a ring holding both) makes the
  result a view of that result. A branch value that may be any of several values the branch
  computes (a loop rotating them) makes the result's memory hold each in a slot of its own
  (`BlockPlan.spares`), the result a view of whichever it is (where the result lies in an
  enclosing case result's memory, in slots of that memory past its own); so does a value of the
  branch that a loop's ring in the result's memory may end on (an init operand its rounds read in
  place, a value handed back to a toggle ring, or one a chain of cases hands on as either), in a
  slot past the ring's, and the ring of another position whose values that loop's result may be
  (a toggle ring borrowing them), in slots past it.
  Where that value dies at the case and every other branch writes the result only after its last
  read of it (or in place, in the op that reads it last), the result takes its buffer: a case
  folds in place, as an elementwise op does. A case result that is a view in some branches of
  memory outside the block only (an argument, a value of an enclosing block, a loop body's
  carried value, or a value in its own buffer that is one of these) still has memory of
  its own, free then, which a later op (or case) may take where the result dies there: a chain of
  cases, each handing such a value on or computing from it, is one buffer, and a branch that
  yields the chain's last result into its parent's memory makes that result a view of what the
  chain may hand on. Where the chain's results are each in memory of their own instead (a branch
  computes one before its last read of the result before), the parent's memory holds each of them
  that the last may be, in a slot of its own (`spares`).
- Every loop-carried position gets a multi-view: the first rounds read init operands in place
  (Type II), later rounds a ring of R slots in the parent. A value computed in the body at
  position c reaches position p after `delay` rounds when positions pass it on unchanged (a
  rotation); its ring needs as many slots as rounds it stays in use: R = the longest delay
  where the next value can take the oldest one's place (computed in place into it, or born
  after it died), else one more. So R = 1 for scan's stacked `ys`, 2 for `x = f(x)`, k for a
  k-long rotation. Where the init operand of an origin dies at the loop it becomes the ring's
  first slot (the positions holding its values then read the ring from its second slot,
  `Carry.shift`): an enclosing loop's carried value too, where that loop lets the value it
  yields take the carry's memory, so the inner loop's result is in that memory however many
  rounds it runs, none included. A position yielded unchanged, or handed its own init operand, keeps that
  operand. Positions that only pass values round a cycle (a swap, a rotation with nothing
  computed) read the cycle's init operands in place, in turn. A value yielded at several
  positions is in one ring for all of them. A position handed a value the body does not compute
  (one from outside the loop, a constant, an init operand) reads it where it is (`Carry.yielded`):
  those values keep their bytes while the loop runs, and are kept alive as long as its result.
  A position whose next value may be a lone position's carried value (an inner loop that runs no
  round hands back its init operand, a branch hands it on), or that of a position no round
  computes, toggles, reading it where it lies: the
  lone position lends it, keeping each value in its ring as many rounds longer as the borrower's
  positions hold it (a slot more each, and one more where its next value is born before their
  last read). Where the borrower may keep the value for good (it may hand back its own), where the
  lender toggles, or where the value is one a rotation hands on or one that other positions hold
  too, the lender (the rotation's origin) toggles instead, its next value going where neither its
  values nor the borrower's are.
  An origin whose values other positions hold too (a rotation, a value yielded at
  several positions) and whose next value may be one of those values toggles among a slot for
  each of these positions and one more (`Carry.holds`), the others reading their values where
  they lie. A position whose next value may be any of several values of the body alive together
  (an inner loop that swaps them, a case that computes from one and hands it on in another
  branch) toggles among a slot for each and one more: the first free slot takes one of them, the
  second free slot the next (`BlockPlan.spares`, `#mem.next<k, n>`), none where the current value is;
  where such a value is a case result, the values its branches compute apart (a chain of cases in a
  branch, one computing from another's result before its last read of it) take the free slots after
  the result's (`BlockPlan.case_pools`).
  Where a case hands on an inner loop's result whose ring is one slot, that ring takes the first
  free slot (a ring in a next view is cut from it) and the case result's own memory the next.
  An inner loop's toggle ring of one position, of a loop that says how many rounds it runs, may lie
  in the next view too: the position then toggles, reading where it is a value the inner ring was
  handed back (`BlockPlan.toggled_from`). So may a case result holding a branch's ring, and an
  inner ring whose init operand its rounds read: that operand takes another free slot of the view.

Arguments stay outside the arena, except donated ones (`jax.jit`'s donation): a buffer of the
function's block from the start to the last use, which values may be computed into in place.

The result is a set of rows on the flattened schedule (one per buffer, one per ring slot)
with absolute offsets: any two rows overlapping in time must be disjoint in address, which
the independent checker verifies.
"""

from jaxalloc.planning.assignment.block import plan_function
from jaxalloc.planning.assignment.model import BlockPlan, Buffer, Carry
from jaxalloc.planning.assignment.rows import Row, plan_rows

__all__ = ["BlockPlan", "Buffer", "Carry", "Row", "plan_function", "plan_rows"]
