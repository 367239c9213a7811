"""Cases: a branch plans into the memory of the case results, a result that a branch hands a value on
at is a view of it (NNC's phi), and a case folds in place where a branch allows."""

from __future__ import annotations

from xdsl.ir import BlockArgument, SSAValue

from jaxalloc.analysis.liveness import defined_in
from jaxalloc.dialects import jx
from jaxalloc.frontend.types import byte_size
from jaxalloc.planning.assignment.ir import computed_within, defined_within, is_constant
from jaxalloc.planning.assignment.model import BlockContext, BlockPlan
from jaxalloc.planning.assignment.pools import pool_sizes
from jaxalloc.planning.assignment.toggles import written_after_reads
from jaxalloc.planning.assignment.views import possible_values


class CasePlanning:
    """The block planner's cases (`BlockPlanner`)."""

    def case(self, index: int, op: jx.CaseOp) -> None:
        plans: list[BlockPlan] = []
        # per result, the branches that make it a view, each with the outside values it may be there
        viewed: list[dict[int, set]] = [{} for _ in op.res]
        twins: dict[SSAValue, list[SSAValue]] = {}  # the other results of the case each may be a view of
        for b, branch in enumerate(op.branches):
            block = branch.block
            placed: dict[SSAValue, SSAValue] = {}
            # a value yielded twice is computed into the memory of a result placed in a parent's
            # (a next round's view) where there is one, and the other result views it
            for k in sorted(range(len(op.res)), key=lambda k: op.res[k] not in self.dictated):
                value, result = block.last_op.operands[k], op.res[k]
                if value in placed:  # yielded twice: a view of the result the branch computes it into
                    viewed[k][b] = {None}
                    self.keep_alive.append((placed[value], result))
                    self.no_fold.add(result)
                    twins.setdefault(result, []).append(placed[value])
                elif defined_in(value, block) and not is_constant(value):
                    placed[value] = result
                else:  # NNC's phi: the result is a view of what this branch yields, kept alive as long
                    viewed[k][b] = {value}
                    self.keep_alive.append((value, result))
                    self.no_fold.add(result)
            # a result that may be any of several values of the branch holds each in a slot of its own
            # (`spares`), where the branch puts no ring there; where the result lies in a parent's
            # memory (a next view's toggle ring, an enclosing case result's), each goes to a free slot
            # of it past the result's (`case_pools`)
            pools, yielded = all(self.may_pool_into(self.dictated[r]) for r in op.res if r in self.dictated), dict(placed)
            left_to_xla = self.left_to_xla(block, yielded)
            while True:
                placed = dict(yielded)  # the branch's planner adds the values it computes into results
                branch_plan = self.plan_block(block, BlockContext(self.options, left_to_xla, placed, set(),
                                                                  ring_holders=frozenset(op.res), pools=pools))
                pooled = pool_sizes(branch_plan)
                if not any(n < branch_plan.placed_rings.get(branch_plan.placed_in.get(v), 0) for v, n in branch_plan.spares.items()):
                    break  # the slots of a ring the branch puts in a result's memory come first
                pools = False
            plans.append(branch_plan)
            for value, result in placed.items():
                if result in self.dictated and result in pooled:  # further free slots of the parent's toggle ring
                    self.plan.case_pools[result] = max(self.plan.case_pools.get(result, 1), pooled.pop(result))
                # a loop's ring the branch yields is the result's memory, as many slots, each as
                # large as the ring's (a slot may hold an inner loop's ring)
                if result in branch_plan.placed_rings or result in pooled or result in branch_plan.ring_slots:
                    slot, before = self.rings.get(result, (byte_size(result.type), 1))
                    slot = max(slot, branch_plan.ring_slots.get(result, slot))
                    self.rings[result] = (slot, max(before, branch_plan.placed_rings.get(result, 1), pooled.get(result, 1)))
                # where the value is wherever it ends (a ring slot, or one of some values from
                # outside the branch or computed into the memory of the result or of another result
                # of the case: a ring holding both), the result is a view of it, not a copy
                sources = possible_values(value, branch_plan, block)
                home = branch_plan.placed_in.get(value, result)
                if sources is None and home is result:
                    continue
                sources = sources or []
                holders = [home, *(branch_plan.placed_in.get(v) for v in sources if computed_within(v, block))]
                if all(r in op.res for r in holders):
                    outside = {v for v in sources if not computed_within(v, block)}
                    others = [r for r in dict.fromkeys(holders) if r is not result]
                    for k in (k for k, r in enumerate(op.results) if r is result):
                        viewed[k][b] = outside | ({None} if others else set())
                    self.keep_alive.extend((v, result) for v in [*outside, *others])
                    self.no_fold.add(result)
                    twins.setdefault(result, []).extend(others)
        for k in range(len(op.res)):
            self.case_in_place(index, op, k, plans, viewed[k])
            self.case_views_only(op, k)
        self.plan.regions[op] = (0, plans)
        self.plan.phis[op] = [tuple(v) for v in viewed]
        for result, views in zip(op.res, viewed):
            if views:
                handed = [v for b in sorted(views) for v in views[b] if v is not None]
                self.plan.phi_values[result] = tuple(dict.fromkeys([*handed, *twins.get(result, ())]))
                # values of this block a branch hands on where the result is the loop's next value
                parent = self.dictated.get(result)
                if parent is not None and self.may_pool_into(parent):
                    own = [v for v in self.handed_through(handed) if defined_in(v, self.block)
                           and not isinstance(v, BlockArgument) and self.unplaced(v)
                           and byte_size(v.type) == byte_size(result.type)]
                    ringed = [v for v in own if isinstance(v.owner, jx.WhileOp) and self.ring_of(v) == 1]
                    if len(ringed) == 1 and result not in self.rings and result not in self.plan.spares:
                        # a loop's ring of one slot that a branch hands on lies in the parent's first
                        # free slot (a ring in a next view is cut from it), the result's own memory past it
                        self.dictated[ringed[0]] = parent
                        own = [result, *(v for v in own if v is not ringed[0])]
                    self.computed_apart(own, parent)
        self.temporaries.append((op, max(p.size for p in plans), index))

    def case_views_only(self, op: jx.CaseOp, k: int) -> None:
        """A result that every branch hands a value from outside the case (or a constant) is always
        one of them, read where it lies: it needs no memory of its own (unless it lies in a parent's
        memory, or took a value's buffer in place). A branch that yields a value of its own (a
        loop's, a case's) may compute into the result's memory."""
        result = op.res[k]
        yields = [branch.block.last_op.operands[k] for branch in op.branches]
        if (all(is_constant(v) or not defined_within(v, branch.block) for v, branch in zip(yields, op.branches))
                and result not in self.dictated and result not in self.rings
                and self.buffers.group(result) == [result]):
            self.views_only.add(result)

    def handed_through(self, handed: list[SSAValue]) -> list[SSAValue]:
        """`handed`, and the values each case result among them may in turn be handed (an earlier
        case of this block whose branches hand a value on): a chain of cases, each of whose results
        a parent's memory then holds in a slot of its own, so the last is a view of one of them."""
        found, k = list(dict.fromkeys(handed)), 0
        while k < len(found):
            found.extend(v for v in self.plan.phi_values.get(found[k], ()) if v not in found)
            k += 1
        return found

    def case_in_place(self, index: int, op: jx.CaseOp, k: int, plans: list[BlockPlan], viewed: dict[int, set]) -> None:
        """NNC's in-place folding through a case: where the branches that make result `k` a view
        (`viewed`: of the outside values it may be there) make it a view of one value `x` of this
        block that dies here, or of the result's own memory (a loop's ring in it), and every branch
        that computes the result computes it into its memory only once it has read `x` for the last
        time (or in place, in the op that reads it last), the result takes `x`'s buffer. It is then
        in its own memory in every branch, not a view of other memory, unless `x` may be a view of
        memory outside this block (`views_outside`): then so may the result."""
        result = op.res[k]
        yields = [branch.block.last_op.operands[k] for branch in op.branches]
        handed = set().union(*viewed.values())
        # beside one other value, the carried value of the position whose next view the result is:
        # where a branch hands that back, the position toggles (`toggling_origins`), its value staying put
        parent = self.dictated.get(result)
        carried = {v for v in handed if parent is not None and self.carried_into(v, parent)}
        if len(handed - carried) == 1:
            handed -= carried
        if len(handed) != 1 or None in handed:
            return
        (x,) = handed
        root = self.buffers.find(x)
        group = self.buffers.group(root)
        if (not self.may_take(x, index, besides=result) or byte_size(x.type) != byte_size(result.type)
                or len({self.dictated[m] for m in [*group, result] if m in self.dictated}) > 1
                or any(v is x for branch in op.branches for j, v in enumerate(branch.block.last_op.operands) if j != k)):
            return
        for value, branch, plan in zip(yields, op.branches, plans):
            if value is not x and not written_after_reads(branch.block, plan, x, result):
                return
        self.buffers.join(result, x)
        if x not in self.no_fold:
            self.no_fold.discard(result)
