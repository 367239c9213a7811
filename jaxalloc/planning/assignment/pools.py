"""Pools: values a block computes apart into free slots of a parent's memory (a toggle ring's, a case
result's), alive together with the value computed there, so that the parent is a view of
whichever it holds and nothing is copied."""

from __future__ import annotations

from xdsl.ir import BlockArgument, SSAValue

from jaxalloc.analysis.liveness import defined_in
from jaxalloc.dialects import jx
from jaxalloc.frontend.types import byte_size
from jaxalloc.planning.assignment.ir import is_constant, runs_past_inits
from jaxalloc.planning.assignment.model import BlockPlan, Carry


def pool_sizes(plan: BlockPlan) -> dict[SSAValue, int]:
    """For each parent value that values of the block are computed into apart (`spares`): the number
    of slots they take, the first one's included (a ring there as many as its slots)."""
    sizes: dict[SSAValue, int] = {}
    for value, n in plan.spares.items():
        parent = plan.placed_in.get(value)
        if parent is not None:
            sizes[parent] = max(sizes.get(parent, 1), n + ring_length(plan, value))
    for result, k in plan.case_pools.items():
        parent = plan.placed_in.get(result)
        if parent is not None:
            sizes[parent] = max(sizes.get(parent, 1), plan.spare_slot(result) + k)
    return sizes


def ring_length(plan: BlockPlan, value: SSAValue) -> int:
    """The slots of the ring the loop result `value` is (1 for any other value)."""
    loop = value.owner
    if isinstance(loop, jx.WhileOp) and loop in plan.carries:
        return max(plan.carries[loop][loop.results.index(value)].repeat, 1)
    return 1


class PoolPlanning:
    """The block planner's pools (`BlockPlanner`): free slots of a parent's memory, given out in order."""

    def may_pool_into(self, parent: SSAValue) -> bool:
        """Whether values this block computes that `parent` may be can each go to a slot of their own:
        a free slot of a toggle ring (`parent`: the next view of the loop whose body this is), or a
        slot of the memory of a result of the case whose branch this is."""
        return self.pools and parent.owner is self.block.parent_op()

    def computed_apart(self, values: list[SSAValue], parent: SSAValue, past: int = 1) -> None:
        """`values` of this block that `parent` may be, alive together with the value computed into
        it: each into a slot of its own (`spares`), after those the others take: a free slot of a
        loop position's toggle ring, or a slot of a case result's memory, from slot `past` on (past
        the ring the result holds). Not a loop's ring: one in a next view is cut from its first free
        slot."""
        values = [v for v in values if not self.ring_of(v)]
        for n, value in enumerate(values, start=self.next_spare(parent, past)):
            self.dictated[value] = parent
            self.plan.spares[value] = n

    def next_spare(self, parent: SSAValue, past: int) -> int:
        """The first slot of `parent`'s memory, from slot `past` on, past those its spares take
        (a ring there as many as its slots)."""
        return max([past, *(n + max(self.ring_of(v), 1) for v, n in self.plan.spares.items() if self.dictated.get(v) is parent),
                    *(self.plan.spares.get(r, 0) + k for r, k in self.plan.case_pools.items() if self.dictated.get(r) is parent)])

    def ring_of(self, value: SSAValue) -> int:
        """The slots of the loop's ring `value`'s buffer is (0 where it is in none)."""
        return max((self.rings[m][1] for m in self.buffers.group(value) if m in self.rings), default=0)

    def unplaced(self, value: SSAValue) -> bool:
        """Whether `value`'s buffer is this block's, in no parent's memory, and no view of others."""
        return not self.external(value) and not any(
            m in self.dictated or m in self.views_only for m in self.buffers.group(value))

    def own_values(self, values: list[SSAValue], result: SSAValue) -> list[SSAValue]:
        """The values among `values` that this block computes, in no memory but their own, as large
        as the loop result `result`: they may be computed into the memory the result lies in."""
        return [v for v in dict.fromkeys(values) if defined_in(v, self.block) and not is_constant(v)
                and not isinstance(v, BlockArgument) and self.unplaced(v) and byte_size(v.type) == byte_size(result.type)]

    def values_beside_ring(self, op: jx.WhileOp, carries: list[Carry]) -> None:
        """The values this block computes that a loop result in a case result's ring may be instead
        of a slot of it: the init operands its first rounds read in place (where the loop may run
        fewer rounds), a value a branch of its body hands back to a toggle ring, and the values a
        chain of cases may hand on as either. Each goes into a slot of that memory past the ring's
        (`computed_apart`), so the result is a view of wherever its value lies, never copied."""
        for result, carry in zip(op.res, carries):
            parent = self.dictated.get(result)
            if parent is None or not isinstance(parent.owner, jx.CaseOp) or not self.may_pool_into(parent) or not carry.repeat:
                continue
            inits = [] if runs_past_inits(op, carry.initial) else [op.inits[q] for q in carry.initial]
            values = self.handed_through([*inits, *self.plan.toggled_from.get(result, ())])
            self.computed_apart(self.own_values(values, result), parent, past=carry.repeat)

    def computed_into_parent(self, result: SSAValue) -> None:
        """A loop result that is one of several values, yielded into a parent value's memory (a case
        result, a next round's view): the one of them this block computes is computed there, so the
        result is where its value is, in that memory or outside this block, and is never copied.
        Where this block computes several (an inner loop that swaps them), alive together, and the
        parent allows (`may_pool_into`): each into a slot of its own (`computed_apart`). Where one loop's
        ring holds several of them (a rotation) and the parent is a case result, the result holds
        that ring, and the others a slot each past it. A toggle ring's result that may lie in
        another position's ring of its loop (one it borrows from), yielded into a case result: that
        ring lies in the case result's memory too, past the first (`rings_apart`)."""
        parent = self.dictated.get(result)
        if parent is not None and result in self.plan.toggled_from:
            self.rings_apart(result, parent)
        if parent is None or result not in self.plan.may_be:
            return
        own = [v for v in self.plan.may_be[result] if self.unplaced(v)]
        ringed = [v for v in own if self.ring_of(v)]
        rings = {self.buffers.find(v) for v in ringed}
        if len(own) == 1:
            self.dictated[own[0]] = parent
        elif isinstance(parent.owner, jx.CaseOp) and len(rings) == 1 and self.may_pool_into(parent):
            (ring,) = rings
            self.dictated[ringed[0]] = parent
            if len({byte_size(v.type) for v in own}) == 1:
                self.computed_apart([v for v in own if self.buffers.find(v) is not ring], parent, past=self.ring_of(ring))
        elif self.may_pool_into(parent) and len({byte_size(v.type) for v in own}) == 1:
            self.dictated[own[0]] = parent
            self.computed_apart(own[1:], parent)

    def rings_apart(self, result: SSAValue, parent: SSAValue) -> None:
        """The rings of other positions of `result`'s loop that `result` may lie in, each into the
        memory of the case result `parent` past the ring there, where this block's branch allows
        (`may_pool_into`) and the ring is in no other memory: `parent` is then where its value is, whichever
        ring holds it."""
        loop = result.owner
        others = [v for v in self.plan.toggled_from[result] if v.owner is loop and v is not result
                  and self.ring_of(v) and self.unplaced(v) and byte_size(v.type) == byte_size(result.type)]
        if not others or not isinstance(parent.owner, jx.CaseOp) or not self.may_pool_into(parent):
            return
        first = self.next_spare(parent, self.ring_of(result))
        for value in others:
            self.dictated[value] = parent
            self.plan.spares[value] = first
            first += self.ring_of(value)
