"""The planning passes of jaxalloc: they translate between jx IR and plans, the algorithms live elsewhere.

- `jx-liveness` writes each value's half-open lifetime on its block's schedule (`mem.live`), for
  reading and for tests of the liveness rules.
- `jx-assign-buffers{allocator=nnc alignment=64 include-outputs=false}` plans every function,
  checks the plan with the static plan checker (trying a second plan where the first leaves values
  to copy, `assign`) and writes it onto the IR: `mem.arena` on the function, `mem.slot` on every op whose result
  has a fixed place (`mem.slots` for several results) or, in a loop body, is computed into the
  next round's view of a carried position (`#mem.next<k>`; `#mem.next<k, n>`, the `n`-th free slot
  of its toggle ring after the first), `mem.views` on every loop, and
  `mem.phi` on a case whose result is, in some branches, a view of the value the branch yields.
  A function planned with donated arguments (`make_plan(..., donated=...)`) also gets `mem.args`,
  each argument's slot (size 0 for one outside the arena), where a call writes it.
- `jx-verify-plan` re-plans nothing: it runs the static plan checker on every planned function,
  naming the value read, the value written over it and the loop round when the plan is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, ModuleOp, StringAttr, i64
from xdsl.ir import Block, BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from jaxalloc.allocators import get_allocator
from jaxalloc.checks.plan_check import OverBudget, PlanCheck, check_planned
from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import ArenaAttr, NextAttr, SlotAttr, ViewsAttr
from jaxalloc.errors import JaxallocError, PlanViolation, UnsupportedProgramError, check_alignment
from jaxalloc.planning.assignment import BlockPlan, Carry, plan_function
from jaxalloc.planning.liveness import block_liveness

Place = SlotAttr | NextAttr
"""Where a value lives: a fixed arena slot, or the next round's view of a loop-carried position."""


def _functions(module: ModuleOp) -> list[jx.FuncOp]:
    return [op for op in module.ops if isinstance(op, jx.FuncOp)]


def _blocks(func: jx.FuncOp) -> list[Block]:
    """The function's block and every block nested in it."""
    return [func.body.block, *(r.block for o in func.walk() for r in o.regions if o is not func)]


@dataclass(frozen=True)
class LivenessPass(ModulePass):
    """Annotates every op with the lifetimes of its results: `mem.live = ["[def, end)", ...]`."""

    name = "jx-liveness"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in _functions(op):
            for block in _blocks(func):
                live = block_liveness(block)
                spans = dict(zip(live.values, zip(live.start.tolist(), live.end.tolist())))
                for inner in block.ops:
                    if inner.results:
                        inner.attributes["mem.live"] = ArrayAttr(
                            StringAttr(f"[{spans[r][0]}, {spans[r][1]})") for r in inner.results
                        )


@dataclass(frozen=True)
class AssignBuffersPass(ModulePass):
    """Gives every value of every jx function a place in one arena (NNC, with multi-view loops)."""

    name = "jx-assign-buffers"

    allocator: str = "nnc"
    """A registered allocator name (`jaxalloc.allocators.ALLOCATORS`)."""
    alignment: int = 64
    """Every offset is a multiple of it."""
    include_outputs: bool = False
    """Plan the function's outputs in the arena too (by default they are separate, as XLA's)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            get_allocator(self.allocator)
            check_alignment(self.alignment)
        except JaxallocError as e:
            raise DiagnosticException(str(e)) from None
        for func in _functions(op):
            try:
                assign(func, self.allocator, self.alignment, self.include_outputs)
            except (PlanViolation, JaxallocError) as e:
                raise DiagnosticException(str(e)) from None


CHECK_BUDGET = 5_000_000
"""Work the checker may do on a plan (`PlanCheck.work`, some 2-4 s here) before it is planned
again without inner toggle rings in enclosing loops' next views, nor toggle rings around values
other toggle rings may keep: with them, the checker's paths can multiply with the places of every
toggling value, round after round (random program 18921: no end in minutes, where the plan without
checks in 0.01 s; 9091: past `LAST_CHECK_BUDGET`, where the plan without checks in 2,555 units)."""

POOLED_CHECK_BUDGET = 20_000_000
"""Work the checker may do on the plan made again (or on the first, where it has no such toggles)
before it is planned once more without values handed on apart in free slots of toggle rings
(`pools`): the places of those slots multiply the paths too (random program 29636, once an inner
loop of at most one round became a case: past `LAST_CHECK_BUDGET`, where without them 21,964
units). The most an accepted plan of random programs 0-50,399 takes is 2.5 million (16971)."""

LAST_CHECK_BUDGET = 200_000_000
"""Work past which the checker gives up on the plan it checks to the end (some one or two minutes
here; random program 7648, the most of seeds 0-29,999 that finish, takes 94 million). The plan is
then not used: random program 23940 had not finished after 14 GB of memory."""

FOLLOWED_RINGS_BUDGET = 2_000_000
"""Work the checker may do on a plan with followed rings, beyond four times that on the plan without
(some 1-1.5 s here): with them, its paths can multiply round after round too (random program 10659:
16 million, against 7,590 without)."""

ANNOTATIONS = ("mem.arena", "mem.args", "mem.slot", "mem.slots", "mem.views", "mem.phi")
"""The attributes `annotate` writes."""


def assign(func: jx.FuncOp, allocator: str = "nnc", alignment: int = 64, include_outputs: bool = False,
           donated: tuple[int, ...] = (), loop_outputs_inside: bool = False,
           products_outside: bool = False) -> tuple[jx.FuncOp, BlockPlan, PlanCheck]:
    """Plan `func`, write the plan on it and check it (`PlanViolation` where the checker refuses it).

    Where the checker would work past `CHECK_BUDGET` and the plan has inner toggle rings in enclosing
    loops' next views, or toggle rings around values other toggle rings may keep, `func` is planned
    again without them (`nested_toggles`, `kept_loans`); past `POOLED_CHECK_BUDGET`, also without
    values apart in free slots of toggle rings (`pools`); that plan is checked to the end, or to
    `LAST_CHECK_BUDGET` (`UnsupportedProgramError` past it). Where the executor would copy values
    of the plan, a plan whose loops' next views hold inner rings of several slots for every carried
    position (`followed_rings`), not only for lone ones, is made on a copy of `func`; the copy takes
    `func`'s place where the checker accepts it, with fewer copies, within `FOLLOWED_RINGS_BUDGET`.
    Returns the function planned, its plan and what the checker found."""
    options = {"allocator": allocator, "alignment": alignment, "include_outputs": include_outputs, "donated": donated,
               "loop_outputs_inside": loop_outputs_inside, "products_outside": products_outside}
    plan = _annotated(func, **options)
    found = _within(func, CHECK_BUDGET)
    if found is None:
        if _multiplying_toggles(func):
            options.update(nested_toggles=False, kept_loans=False)
            plan = _annotated(func, **options)
        found = _within(func, POOLED_CHECK_BUDGET)
    if found is None:
        options.update(pools=False)
        plan = _annotated(func, **options)
        found = _within(func, LAST_CHECK_BUDGET)
    if found is None:
        raise UnsupportedProgramError(
            f"the static plan checker gave up on the plan of @{func.sym_name.data} after {LAST_CHECK_BUDGET:,} "
            "units of work, so it is not used: run the function with mode='eager', or report the program"
        )
    if not found.copies:
        return func, plan, found
    other = func.clone()
    other_plan = _annotated(other, followed_rings=True, **options)
    try:
        other_found = check_planned(other, FOLLOWED_RINGS_BUDGET + 4 * found.work)
    except (PlanViolation, OverBudget):
        return func, plan, found
    if len(other_found.copies) >= len(found.copies):
        return func, plan, found
    if (block := func.parent_block()) is not None:
        block.insert_op_before(other, func)
        func.detach()
        func.erase()
    return other, other_plan, other_found


def _within(func: jx.FuncOp, budget: int) -> PlanCheck | None:
    """What the checker finds on `func`'s plan; None where it works past `budget` first."""
    try:
        return check_planned(func, budget)
    except OverBudget:
        return None


def _multiplying_toggles(func: jx.FuncOp) -> bool:
    """Whether the plan on `func` has a toggle ring that lies in an enclosing loop's next view, or
    that holds the values of a position that toggles too (a borrower that may keep a lent value for
    good): the checker's paths multiply with the places of both."""
    for op in func.walk():
        if isinstance(op, jx.WhileOp):
            views = op.attributes["mem.views"].data
            if any(v.toggles and (any(isinstance(slot, NextAttr) for slot in v.slots.data)
                                  or any(views[k].toggles for k in v.held)) for v in views):
                return True
    return False


def _annotated(func: jx.FuncOp, **options) -> BlockPlan:
    """Plan `func` with `options` (`plan_function`'s) and write the plan on it in place of any earlier one."""
    for op in func.walk():
        for name in ANNOTATIONS:
            op.attributes.pop(name, None)
    plan = plan_function(func, **options)
    annotate(func, plan, options["include_outputs"])
    return plan


def annotate(func: jx.FuncOp, plan: BlockPlan, include_outputs: bool = False) -> None:
    """Write a function's plan onto its IR as `mem` attributes; where the plan holds donated
    arguments, `mem.args` gives each argument's slot (size 0: outside the arena), where the call
    writes it."""
    func.attributes["mem.arena"] = ArenaAttr(plan.size, include_outputs)
    _annotate(func.body.block, plan, 0, {}, {})
    args = {v: SlotAttr(b.offset, b.slot_size) for b in plan.buffers for v in b.values if isinstance(v, BlockArgument)}
    if args:
        func.attributes["mem.args"] = ArrayAttr(args.get(a, SlotAttr(0, 0)) for a in func.body.block.args)


def _annotate(
    block: Block, plan: BlockPlan, base: int, outer: dict[SSAValue, Place], marks: dict[SSAValue, NextAttr]
) -> None:
    """Write `mem.slot`s for the values `plan` placed, then recurse into regions.

    `outer` holds the places of the parent's values that this block's values may be placed in
    (a case result); `marks` the values of a loop body computed into the next round's view.
    """
    slots: dict[SSAValue, Place] = dict(marks)
    for buffer in plan.buffers:
        holders = [v.owner for v in buffer.values if isinstance(v.owner, jx.WhileOp | jx.CaseOp)]
        loops = [op for op in holders if isinstance(op, jx.WhileOp)]
        loop = max(loops, key=block.get_operation_index) if loops else holders[0] if holders else None
        for value in buffer.values:
            # a ring's values move every round; the last loop's result and the init operand that is
            # the ring's first slot (an earlier loop's result too) are named by that slot (a case
            # result holding a branch's ring too); views of the result read it in place, in whichever
            # slot it is
            if (buffer.repeat == 1 or value.owner is loop or isinstance(value, BlockArgument)
                    or value.owner.is_before_in_block(loop)):
                slots[value] = SlotAttr(base + buffer.offset, buffer.slot_size)
    for value, parent_value in plan.placed_in.items():
        if parent_value in outer:
            place, n = outer[parent_value], plan.spare_slot(value)  # a case result's further slots
            if isinstance(place, NextAttr):  # a case result in a next view: further free slots of the toggle ring
                slots[value] = NextAttr(place.position.data, place.nth.data + n)
            else:
                slots[value] = SlotAttr(place.offset.data + n * place.size.data, place.size.data) if n else place
    for op in block.ops:
        if isinstance(op, jx.WhileOp):
            _annotate_loop(op, plan, slots)
        elif op.results and not isinstance(op, jx.CaseOp | jx.ConstOp):
            placed = [slots.get(r) for r in op.results]
            if len(placed) == 1 and placed[0] is not None:
                op.attributes["mem.slot"] = placed[0]
            elif any(s is not None for s in placed):
                op.attributes["mem.slots"] = ArrayAttr(s or SlotAttr(0, 0) for s in placed)
        if isinstance(op, jx.CaseOp):
            placed = [slots.get(r) for r in op.results]
            if any(s is not None for s in placed):
                op.attributes["mem.slots"] = ArrayAttr(s or SlotAttr(0, 0) for s in placed)
            if any(plan.phis.get(op, ())):
                op.attributes["mem.phi"] = ArrayAttr(DenseArrayBase.from_list(i64, v) for v in plan.phis[op])
        if op in plan.regions:
            offset, plans = plan.regions[op]
            placed = {**outer, **slots} if isinstance(op, jx.CaseOp) else {}  # a loop's ring moves every round
            for region, child in zip(op.regions, plans):
                marks = _next_marks(op, plan.carries[op], child) if isinstance(op, jx.WhileOp) and region is op.body else {}
                _annotate(region.block, child, base + offset, placed, marks)


def _next_marks(op: jx.WhileOp, carries: list[Carry], body: BlockPlan) -> dict[SSAValue, NextAttr]:
    """The body's values computed into the next round's view of a carried position: those sharing
    the buffer of the value the body computes and yields there (in-place updates of it included)."""
    block = op.body.block
    roots: dict[SSAValue, int] = {}
    for c, (views, carry, value) in enumerate(zip(op.attributes["mem.views"].data, carries, block.last_op.operands)):
        if views.slots.data and value in body.roots and not isinstance(value, BlockArgument):
            roots.setdefault(body.roots[value], c)
            for source in body.may_be.get(value, ()):  # a loop result's value the body computes there
                if body.placed_in.get(source) is op.results[c] and not isinstance(source, BlockArgument):
                    roots.setdefault(body.roots[source], c)
    # values in further free slots of a toggle ring, and inner loops' results placed in a next view
    for value, parent in body.placed_in.items():
        if parent in op.results and (value in body.spares or isinstance(value.owner, jx.WhileOp)):
            roots.setdefault(body.roots[value], op.results.index(parent))
    # an inner loop's ring of several slots: the values after the loop are in whichever slot, read in place
    rings = {body.roots[r]: r.owner for r in body.roots
             if isinstance(r.owner, jx.WhileOp) and body.carries[r.owner][r.owner.results.index(r)].repeat > 1}
    return {
        value: NextAttr(roots[root], body.spare_slot(value))  # n > 0: a toggle ring's further free slot
        for value, root in body.roots.items()
        if root in roots and value in body.placed_in and not isinstance(value, BlockArgument)
        and not (root in rings and rings[root].is_before_in_block(value.owner))
    }


def _annotate_loop(op: jx.WhileOp, plan: BlockPlan, slots: dict[SSAValue, Place]) -> None:
    views, body = [], plan.regions[op][1][1]
    for result, carry, value in zip(op.res, plan.carries[op], op.body.block.last_op.operands):
        first = slots.get(result)
        if isinstance(first, NextAttr) and carry.repeat:  # the ring is the enclosing loop's next view, cut in order
            assert carry.shift == 0 or carry.repeat == 1, "a rotated ring is never an enclosing loop's next view"
            views.append(ViewsAttr(carry.initial, [first] * carry.repeat, carry.passed, carry.holds))
            continue
        first = first if isinstance(first, SlotAttr) else None
        if first is None and carry.repeat:  # the ring is the function's output
            # each round's value is an array of its own where an op of the body computes it there (or
            # it passes on another position's); a case or loop result may be elsewhere: read out
            outside = isinstance(value, BlockArgument) or (value in body.placed_in and isinstance(value.owner, jx.PrimOp | jx.FusedOp))
            views.append(ViewsAttr(carry.initial, (), yielded=True) if outside else ViewsAttr((), ()))
            continue
        ring = [SlotAttr(first.offset.data + (i + carry.shift) % carry.repeat * first.size.data, first.size.data)
                for i in range(carry.repeat)]
        views.append(ViewsAttr(carry.initial, ring, carry.passed, carry.holds))
    op.attributes["mem.views"] = ArrayAttr(views)


@dataclass(frozen=True)
class VerifyPlanPass(ModulePass):
    """Checks the plan written on every function with the static plan checker (`plan_check`),
    which reads the `mem` attributes alone and walks every branch and loop round."""

    name = "jx-verify-plan"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in _functions(op):
            try:
                check_planned(func)
            except PlanViolation as e:
                raise DiagnosticException(str(e)) from None


def places_of(op) -> list[Place | None]:
    """Where each result of `op` lives by its `mem.slot(s)` attribute; None: outside the arena or
    decided at run time (a view, a case result viewing what a branch yields, a loop's multi-view)."""
    if isinstance(op.attributes.get("mem.slot"), Place):
        return [op.attributes["mem.slot"]]
    slots = op.attributes.get("mem.slots")
    if not isinstance(slots, ArrayAttr):
        return [None] * len(op.results)
    return [s if isinstance(s, NextAttr) or s.size.data else None for s in slots.data]
