"""Plan a function, check the plan and plan again where the checker would work too long or the
executor would copy: the driver behind `jx-assign-buffers` and `make_plan`."""

from __future__ import annotations

from jaxalloc.checks.plan_check import OverBudget, PlanCheck, check_planned
from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import NextAttr
from jaxalloc.errors import PlanViolation, UnsupportedProgramError
from jaxalloc.planning.assignment import BlockPlan, plan_function
from jaxalloc.planning.lowering import ANNOTATIONS, annotate


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

def assign(func: jx.FuncOp, allocator: str = "nnc", alignment: int = 64, include_outputs: bool = False,
           donated: tuple[int, ...] = (), products_outside: bool = False,
           small_outside: bool = False) -> tuple[jx.FuncOp, BlockPlan, PlanCheck]:
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
               "products_outside": products_outside, "small_outside": small_outside}
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
