"""Toggle rings and lent values: which loop positions toggle, which lend their values, and how many
slots a ring needs where the next value may be computed where the current one lies."""

from __future__ import annotations

from xdsl.ir import Block, BlockArgument, SSAValue

from jaxalloc.analysis.inplace import in_place_candidates
from jaxalloc.analysis.liveness import op_of
from jaxalloc.dialects import jx
from jaxalloc.planning.assignment.model import BlockPlan
from jaxalloc.planning.assignment.views import view_sources


def toggling_origins(body: Block, plan: BlockPlan, longest: dict, results, lent: frozenset,
             followers: dict, stable: frozenset, pooled: frozenset) -> tuple[dict[int, set[SSAValue]], frozenset[int]]:
    """The origins whose next value may be a view (a case result a branch hands the carried
    value back at, or a value from outside the loop), or is somewhere in an inner loop's ring: they
    toggle between two slots, the next value going where the current one is not (or keep to one,
    `one_slot_toggle`). For each, the values from outside the loop it may be, and its own carried
    value where a round may hand that back.

    An inner ring holding the values of several positions lies in one position's next view: the
    others read their values in that ring too, so they toggle where that position does (never moved
    into a slot of their own, it is never moved over their values) and are otherwise moved out of it.
    A position that may be handed another position's carried value toggles where that one is `lent`,
    or where no round computes it (`stable`: it stays where it lies).
    An origin whose values other positions hold (`followers`: yielded there too, or passed on in a
    rotation) toggles too, where its next value may be one of those: among a slot for each of these
    positions and one more, the next value going where no position's value is (however their
    values may lie, one slot is free). A position whose next value may be one of several values of
    the body (`pooled`: each computed into a free slot of its own) toggles too. Also returns the
    origins that need not toggle but may, their next value always computed into their next view
    (or in place of the oldest value of their ring, a follower's, which toggling forbids)."""
    args, yields = body.args, body.last_op.operands
    found, able = {}, set()
    for c in longest:
        into = frozenset({plan.placed_in[yields[c]]} if yields[c] in plan.placed_in else ())
        sources = view_sources(yields[c], args[c], ((body, plan),), body, into)
        allowed = lent | stable | {args[p] for p in followers.get(c, ())}
        if sources is not None and any(v in args and v is not args[c] and v not in allowed for v in sources):
            sources = None
        holder = plan.placed_in.get(yields[c], results[c])
        if sources is not None and (sources or holder in plan.placed_rings or c in pooled):
            found[c] = sources, holder
        elif sources == set() and (holder is results[c] or holder in {results[p] for p in followers.get(c, ())}):
            able.add(c)
    toggled = {results[c] for c, (_, holder) in found.items() if holder is results[c]}
    toggles = {c: sources for c, (sources, holder) in found.items() if holder is results[c] or holder in toggled}
    return toggles, frozenset(able - toggles.keys())


def lenders_kept_from(toggles: dict[int, set[SSAValue]], able: frozenset[int], args, lent: frozenset,
                      origin_of: dict[SSAValue, int]) -> tuple[dict[int, set[int]], set[SSAValue]]:
    """The lenders whose values a borrower may keep for good, by lender: the borrower may hand its
    own value back, so a value it took stays where it is round after round, or the lender toggles
    (its slots follow no round count), or the value is one a rotation hands on (`origin_of`: the
    lender is the origin whose ring holds it). Such a lender toggles, holding the borrowers' values,
    where its next value is always computed into its next view (`able`); a position that toggles so
    may hold another's value in turn, as its own borrowers see. Also the lent values of lenders that
    cannot toggle: not lent, after all."""
    keepers: dict[int, set[int]] = {}
    refused = set()
    while more := {(q, a, c) for c, sources in toggles.items() for a in sources & lent - {args[c]} - refused
                   if (q := origin_of.get(a, args.index(a))) != c and c not in keepers.get(q, ())
                   and (a in origin_of or args[c] in sources or q in toggles or q in keepers)}:
        for q, a, c in more:
            if q in toggles or q in able:
                keepers.setdefault(q, set()).add(c)
            else:
                refused.add(a)
    return keepers, refused


def one_slot_toggle(plan: BlockPlan, arg: BlockArgument, value: SSAValue, result: SSAValue) -> bool:
    """Whether a toggle ring needs one slot alone: the next value is computed where the current
    one is (`one_slot_holds_both`). An inner loop's ring in the next view must be one slot whose first round
    reads the current value there and nothing else reads it (`ring_starts_in`): its rounds then
    compute in place from the current value, and its results, which may be the current value (no
    round run), lie in this same slot, where they keep nothing else alive."""
    if result in plan.toggle_holders:
        return False  # an inner toggle ring may hand back the current value after writing over it
    loops = {v.owner for v, r in plan.placed_in.items()
             if r is result and not isinstance(v, BlockArgument) and isinstance(v.owner, jx.WhileOp)}
    if not loops:
        return one_slot_holds_both(plan, arg, value, result)
    root = plan.roots.get(arg, arg)
    of_arg = {arg} | {v for v, r in plan.roots.items() if r is root}
    if result in plan.placed_rings or not all(ring_starts_in(loop, of_arg, plan, result) for loop in loops):
        return False
    results = frozenset(r for loop in loops for r in loop.results)
    rings = {plan.roots.get(r, r) for r in results if plan.placed_in.get(r) is result}
    return all(r is root or dies_before(plan, arg, r, results, read_there=r in rings)
               for r in next_view_buffers(plan, value, result))


def one_slot_holds_both(plan: BlockPlan, arg: BlockArgument, value: SSAValue, result: SSAValue) -> bool:
    """Whether each buffer computed into the next view of `result` (`next_view_buffers`) is the carried value
    `arg`'s own, computed in place, or is written after `arg`'s last read: then one slot holds the
    current and next value."""
    return all(r is plan.roots.get(arg) or dies_before(plan, arg, r) for r in next_view_buffers(plan, value, result))


def next_view_buffers(plan: BlockPlan, value: SSAValue, result: SSAValue) -> set[SSAValue]:
    """The buffers computed into the next view of `result`: the next value `value`'s, and any
    other placed there (a loop result's)."""
    return {plan.roots.get(value)} | {
        plan.roots[v] for v, r in plan.placed_in.items() if r is result and not isinstance(v, BlockArgument)
    }


def dies_before(plan: BlockPlan, x: BlockArgument, root_y: SSAValue, besides: frozenset = frozenset(),
                 read_there: bool = False) -> bool:
    """Whether carried value `x` is dead before the buffer of the next round's value is born (its
    views but `besides` included), or as the op that makes it reads `x` last, where `read_there`."""
    x_root = plan.roots.get(x, x)
    kept = plan.kept_until.get(x_root, 0)
    if besides & plan.viewers.get(x_root, set()):
        roots = {plan.roots.get(v, v) for v in plan.viewers[x_root] - besides}
        kept = max((end for m, (_, end) in plan.lifetimes.items() if plan.roots.get(m) in roots), default=0)
    x_end = max(kept, *(plan.lifetimes[v][1] for v, r in plan.roots.items() if r is x_root))
    y_start = min(plan.lifetimes[v][0] for v, r in plan.roots.items() if r is root_y)
    return x_end <= y_start + read_there


def written_after_reads(block: Block, plan: BlockPlan, x: SSAValue, result: SSAValue) -> bool:
    """Whether `block` (a branch, planned as `plan`) writes `result`'s memory only after its last read
    of `x` (from outside the branch) or of a view of it, or in place of `x` in the op that reads it
    last, where that op computes its one result elementwise from `x`. Never where `result`'s memory
    holds a ring of several slots, or one past its first slot (`spares`), which is not where `x` is."""
    if result in plan.placed_rings or any(isinstance(v.owner, jx.WhileOp) for v in plan.spares if plan.placed_in.get(v) is result):
        return False
    ops = list(block.ops)
    of_x = {x} | {v for v, root in plan.roots.items() if root is x}
    for op in ops:  # and the values of the branch that may be views of it: a case's phis
        if isinstance(op, jx.CaseOp) and op in plan.phis:
            of_x.update(r for k, r in enumerate(op.results)
                        if any(op.branches[b].block.last_op.operands[k] in of_x for b in plan.phis[op][k]))
        of_x.update(r for r in op.results if any(v in of_x for v in plan.may_be.get(r, ())))
    position = {op: i for i, op in enumerate(ops)}
    reads = [i for i in (position.get(op_of(use.operation, block)) for v in of_x for use in v.uses) if i is not None]
    written = [plan.lifetimes[v][0] for v, parent in plan.placed_in.items() if parent is result]
    if not reads or not written or max(reads) < min(written):
        return True
    last = ops[max(reads)]
    if max(reads) > min(written) or not any(r in plan.placed_in for r in last.results):
        return False
    if isinstance(last, jx.WhileOp):
        return ring_starts_in(last, of_x, plan, result)
    candidates = in_place_candidates(last)
    return not last.regions and bool(candidates) and all(p in candidates for p, v in enumerate(last.operands) if v in of_x)


def ring_starts_in(loop: jx.WhileOp, of_x: set, plan: BlockPlan, result: SSAValue) -> bool:
    """Whether `loop` reads `x` only as the init operand of positions whose one-slot rings are in
    `result`'s memory: with `x` there too, round 0 reads it in that slot, as every later round reads
    the value before it, and the body writes the next value where a round may."""
    inits = [c for c, v in enumerate(loop.inits) if v in of_x]
    return bool(inits) and all(plan.placed_in.get(loop.res[c]) is result for c in inits) and not any(
        v in of_x for region in loop.regions for inner in region.walk() for v in inner.operands)
