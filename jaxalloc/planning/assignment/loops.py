"""Loops: every carried position gets a multi-view (init operands read in place, then a ring of
slots, a toggle ring, or values read where they lie), and the body plans into the next round's views."""

from __future__ import annotations

from xdsl.ir import Block, BlockArgument, SSAValue

from jaxalloc.analysis.liveness import defined_in
from jaxalloc.dialects import jx
from jaxalloc.frontend.types import byte_size
from jaxalloc.planning.assignment.carries import carry_graph, rotation_chain, stable_values
from jaxalloc.planning.assignment.ir import defined_within, is_constant, runs_past_inits
from jaxalloc.planning.assignment.model import BlockContext, BlockPlan, Carry, padded
from jaxalloc.planning.assignment.pools import pool_sizes
from jaxalloc.planning.assignment.toggles import (
    dies_before,
    lenders_kept_from,
    next_view_buffers,
    one_slot_holds_both,
    one_slot_toggle,
    toggling_origins,
)


class LoopPlanning:
    """The block planner's loops (`BlockPlanner`)."""

    def loop(self, index: int, op: jx.WhileOp) -> None:
        body = op.body.block
        graph = carry_graph(op)
        args, yields, results = graph.args, graph.yields, graph.results
        init_roots = [self.buffers.find(v) for v in op.inits]
        # a lone origin whose init operand dies here: that memory is its ring's slot 0 (an enclosing
        # loop's carried value only where every round finds it there, not `unsettled`)
        eligible = set()
        for c in graph.longest:
            init, root = op.inits[c], init_roots[c]
            group = self.buffers.group(root)
            ring = [results[q] for q in (c, *graph.followers.get(c, ()))] + group
            if (self.init_may_be_slot_zero(c in graph.followers, ring) and not self.external(init) and self.dies_at(init, index)
                    and init_roots.count(root) == 1 and not self.read_inside(op, root)
                    and not any(m in self.no_fold for m in group)
                    and ((root in self.foldable and root not in self.unsettled)
                         or not any(m in self.dictated for m in group))):
                eligible.add(c)
        for p, (c, delay) in graph.origins.items():
            # init operands of this block that the rounds read in place, where the result lies in an
            # enclosing loop's next view: other free slots of that view, so the result is there too
            # after fewer rounds (an origin's in a case result's memory too; a follower's there
            # take slots past the ring, `values_beside_ring`)
            parent = self.dictated.get(results[p])
            if parent is None and p == c:  # an origin whose follower's ring is that memory: one ring
                parent = next((self.dictated[results[f]] for f in graph.followers.get(c, ()) if results[f] in self.dictated), None)
            if parent is None or not self.may_pool_into(parent) or (
                    c in eligible if p == c else isinstance(parent.owner, jx.CaseOp)):
                continue
            chain = (c,) if p == c else rotation_chain(p, delay, args, yields)
            if p != c and runs_past_inits(op, chain):
                continue  # the follower's rounds always end in its ring
            self.computed_apart(self.own_values([op.inits[q] for q in chain], results[p]), parent)
        dictated = dict(zip(args, results)) | {v: results[c] for v, c in graph.computed.items()}
        aliases = [[args[p] for p in group] for group in graph.readers.values() if len(group) > 1]
        # The next value may be computed in place into the oldest value of its ring (read for the last
        # time in this round); in round 0 that is an init operand, read in place, and the result goes
        # to the ring slot instead.
        foldable = {args[p]: yields[c] for c, (_, p) in graph.longest.items()}
        # the next views that may hold an inner ring of several slots, which toggle where one lies there:
        # of a lone position, or of one whose value other positions yield too; with `followed_rings`,
        # also of one whose values a rotation hands on, where the checker's paths can multiply round
        # after round (random program 10659), so `assign` tries it only where the plan without it copies
        holders = frozenset(results[c] for c, (delay, _) in graph.longest.items() if delay == 1 or self.options.followed_rings)
        followed = {a: results[c] for a, c in graph.origin_of.items()}
        # carried values that round 0 finds where an init operand is, outside their ring in the arena
        # (a ring that holds a value more than a round has several slots, in the arena where the
        # result is an output too)
        unsettled = frozenset(args[p] for c, (delay, p) in graph.longest.items()
                              if (c not in eligible or p != c) and not self.external(results[c], ring=delay))
        # carried values of lone positions that another position's next value may be (an inner loop
        # that runs no round hands back its init operand): kept in their slot a round longer
        lent = frozenset(args[c] for c in graph.longest if c not in graph.followers)
        # carried values that are never computed, only read where they lie (an init operand, a value
        # from outside the loop): another position's next value may be one of them, read there too
        stable = {args[k]: stable_values(k, args, yields, op.inits, graph.cycles, graph.handed) for k in range(len(args)) if k not in graph.origins}
        # carried values of origins that other positions follow and of those positions, which another
        # position's next value may be: that origin then toggles around it (`lenders_kept_from`)
        borrowable = frozenset(graph.origin_of) | {args[c] for c in graph.followers}
        pools = self.options.pools
        left_to_xla = self.left_to_xla(body, dictated)
        while True:
            # a fresh copy each try: planning the body dictates more values (`computed_into_parent`)
            body_plan = self.plan_block(body, BlockContext(
                self.options, left_to_xla, dict(dictated), set(foldable), aliases, holders, unsettled=unsettled, lent=lent,
                followed=followed, pools=pools, stable=frozenset(stable)))
            # an unsettled value whose next value is not then in its next view would be copied there
            # every round: its inner rings start in its slot instead, copying only where round 0 finds
            # the init operand elsewhere and an inner loop runs no round
            stray = {args[p] for c, (_, p) in graph.longest.items()
                     if args[p] in unsettled and body_plan.placed_in.get(yields[c]) is not results[c]}
            if stray:
                unsettled -= stray
                continue
            # the positions whose next value may be one of several values of the body, each in a free slot
            pooled = {results.index(r): n - 1 for r, n in pool_sizes(body_plan).items()}
            toggles, able = toggling_origins(body, body_plan, graph.longest, results, lent | borrowable, graph.followers, frozenset(stable),
                                     frozenset(pooled))
            if any(c not in toggles for c in pooled):
                pools = False  # such a position that cannot toggle: its values are copied there instead
                continue
            # a position may keep the values it lends longer, where it toggles not itself and the borrower
            # never hands its own value back (which would then stay in the lender's slot for good); else
            # the lender toggles too, its next value going where neither its nor the borrower's value is
            keepers, refused = lenders_kept_from(toggles, able if self.options.kept_loans else frozenset(), args,
                                                 lent | borrowable, graph.origin_of)
            if refused:
                lent, borrowable = lent - refused, borrowable - refused
                continue
            toggles |= {q: set() for q in keepers if q not in toggles}
            lenders = {args.index(a): [c for c, sources in toggles.items() if a in sources and a is not args[c]]
                       for a in lent}
            lenders = {q: borrowers for q, borrowers in lenders.items() if borrowers}
            wrong = {a for a, y in foldable.items() if not self.folds_only(body_plan, body, a, y)}
            wrong |= {args[q] for q in lenders}  # never computed in place of the value it lends
            wrong |= {args[graph.longest[c][1]] for c in toggles if c in graph.followers}  # nor into its oldest value
            # a toggle ring of one slot: the next value computed where the current one is, in place
            # or after its last read; else of two, the next value never computed into the current's
            one_slot = {c for c in toggles if c not in graph.followers and c not in keepers and c not in pooled
                        and one_slot_toggle(body_plan, args[c], yields[c], results[c])}
            wrong |= {args[c] for c in toggles if c not in one_slot}
            if not wrong & foldable.keys():
                break
            foldable = {a: y for a, y in foldable.items() if a not in wrong}
        cond_plan = self.plan_block(op.cond.block, BlockContext(self.options, set(), dict(zip(op.cond.block.args, results)), set()))
        # the other positions whose current values a toggle ring's slots may hold: its followers, the
        # borrowers that may keep its values and theirs
        holding = {c: tuple(sorted({*graph.followers.get(c, ()), *keepers.get(c, ()),
                                    *(f for k in keepers.get(c, ()) for f in graph.followers.get(k, ()))})) for c in toggles}
        repeat = {}
        for c, (delay, p) in graph.longest.items():
            if c in toggles:  # a slot for the next value beside the current value of every position holding one
                repeat[c] = 1 if c in one_slot else 2 + len(holding[c]) + pooled.get(c, 0)
            elif c in lenders:  # a lent value stays in its slot as long as the borrower's positions hold it,
                # the slot written again after their last read in the round they read it last, or a round later
                kept = max(graph.longest[k][0] for k in lenders[c])
                repeat[c] = kept + 1 if all(dies_before(body_plan, args[graph.longest[k][1]], r) for k in lenders[c]
                                            for r in next_view_buffers(body_plan, yields[c], results[c])) else kept + 2
            else:  # one slot where the next value is computed where the current one is, or an inner loop's
                # ring is, whose first round reads the current value there
                shared = one_slot_holds_both(body_plan, args[p], yields[c], results[c]) or (
                    delay == 1 and one_slot_toggle(body_plan, args[p], yields[c], results[c]))
                repeat[c] = delay if shared else delay + 1
            # each slot holds an inner loop's ring, whose slots may hold rings of loops nested deeper
            inner, size = body_plan.placed_rings.get(results[c], 1), byte_size(results[c].type)
            inner_slot = max(size, body_plan.ring_slots.get(results[c], size))
            slot = size if inner == 1 and inner_slot == size else inner * padded(inner_slot, self.options.alignment)
            self.rings[results[c]] = (slot, repeat[c])
        # where a toggle ring's values may lie besides its slots: values from outside the loop, the init
        # operands read in place (its own, its followers'), a lender's ring and its init operand
        elsewhere = {}
        for c, sources in toggles.items():
            found = [v for v in sources if v not in args] + [u for v in sources if v in stable for u in stable[v]]
            if any(v in args and v not in lent - {args[c]} and v not in stable for v in sources):
                found += [op.inits[j] for j in ((() if c in eligible else (c,)) + tuple(graph.followers.get(c, ())))]
            for q in (args.index(v) for v in sources & lent - {args[c]}):
                found += [results[q], *([] if q in eligible else [op.inits[q]])]
            for q in {graph.origin_of.get(v, args.index(v)) for v in sources & borrowable} - {c}:
                found += [results[q], *(op.inits[j] for j in (q, *graph.followers[q]))]
            elsewhere[c] = found
        carries = []
        for k in range(len(args)):
            if yields[k] is args[k] or yields[k] is op.inits[k]:  # every round reads the init operand
                carries.append(Carry(0, (k,)))
                self.buffers.join(results[k], op.inits[k])
            elif k in graph.cycles:  # a rotation of carries with nothing computed: each round reads an init in place
                carries.append(Carry(0, graph.cycles[k]))
                self.views_of(results[k], stable[args[k]])
            elif k in graph.origins and graph.origins[k][0] in toggles and k != graph.origins[k][0]:
                # a toggle ring's value that this position holds too (yielded here too, or passed on):
                # read where it is, in that ring, an init operand or a value from outside the loop
                c = graph.origins[k][0]
                carries.append(Carry(0, (k,), yielded=True))
                self.views_of(results[k], [results[c], *(op.inits[j] for j in (c, *graph.followers[c])), *elsewhere[c]])
            elif k in graph.origins:
                c, delay = graph.origins[k]
                initial = () if k in eligible else rotation_chain(k, delay, args, yields)
                carries.append(Carry(repeat[c], initial, yielded=k in toggles, holds=holding.get(k, ()),
                                     shift=int(k != c and c in eligible)))
                if k in toggles:  # the result may be a value a branch handed back, wherever that is
                    self.keep_alive.extend((v, results[k]) for v in elsewhere[k])
                    self.plan.toggled_from[results[k]] = elsewhere[k]
                    self.no_fold.add(results[k])
                if k in eligible:
                    self.buffers.join(results[k], op.inits[k])
                elif k != c:
                    self.buffers.join(results[k], results[c])
                if initial:
                    self.no_fold.add(results[k])
                if initial and not runs_past_inits(op, initial):
                    # after fewer rounds than `initial` lists, the result is an init operand
                    self.keep_alive.extend((op.inits[q], results[k]) for q in initial)
            else:  # handed a value the body does not compute: read where it is
                carries.append(Carry(0, (k,), yielded=True))
                self.views_of(results[k], stable[args[k]])
        for result in results:
            self.computed_into_parent(result)
        self.values_beside_ring(op, carries)
        self.plan.carries[op] = carries
        self.plan.regions[op] = (0, [cond_plan, body_plan])
        self.temporaries.append((op, max(cond_plan.size, body_plan.size), index))

    def init_may_be_slot_zero(self, followed: bool, ring: list[SSAValue]) -> bool:
        """Whether an origin's init operand may be its ring's slot 0 as far as the positions holding
        its values go (`ring`: the loop results in the ring and the init operand's buffer): a lone
        origin; one with followers where their rotated ring (`Carry.shift`) is slots of its own,
        not an enclosing loop's next view cut in order."""
        return not followed or all(isinstance(self.dictated[v].owner, jx.CaseOp) for v in ring if v in self.dictated)

    def views_of(self, result: SSAValue, values: list[SSAValue]) -> None:
        """`result` is always one of `values`, read in place: it needs no memory of its own, and
        they stay alive as long as it."""
        self.keep_alive.extend((v, result) for v in values)
        self.no_fold.add(result)
        self.views_only.add(result)
        self.plan.may_be[result] = values

    def holds_ring(self, value: SSAValue, group: list[SSAValue], repeat: int) -> bool:
        """Whether the parent value `value` is computed into may hold `group`'s ring of `repeat`
        slots: a case result (given as many), or a loop's next view (of a lone position, which
        toggles between two slots as large as the ring, for several), where the ring's loop result
        is in that memory however many rounds it runs (init operands read in place are computed
        there too): so the position's value is always in the slot last computed into, and which
        slot that is depends on the round alone. A toggle ring's result may also be a value it was
        handed back (`toggled_from`): the position then toggles, reading it where it is."""
        parent = self.dictated[value]
        if repeat > 1 and parent not in self.ring_holders:
            return False
        if isinstance(parent.owner, jx.CaseOp):
            return True
        for v in group:
            if v in self.rings:
                owner = v.owner
                if isinstance(owner, jx.CaseOp):
                    if repeat == 1:
                        continue  # a case result holding a branch's one-slot ring
                    # the rings of the branches' loops that the case result holds, none of a case deeper
                    held = [(r, branch) for branch in self.plan.regions[owner][1]
                            for r, into in branch.placed_in.items() if into is v and r.owner in branch.regions]
                    if not all(self.ring_starts_there(r, branch, parent, group, owner)
                               if isinstance(r.owner, jx.WhileOp)
                               else not any(r in b.placed_rings for b in branch.regions[r.owner][1])
                               for r, branch in held):
                        return False
                elif not isinstance(owner, jx.WhileOp) or not self.ring_starts_there(v, self.plan, parent, group):
                    return False
        return True

    def ring_starts_there(self, result: SSAValue, plan: BlockPlan, parent: SSAValue, group: list[SSAValue],
                          case: jx.CaseOp | None = None) -> bool:
        """Whether the ring of the loop result `result` (planned in `plan`: this block's, or a branch's
        of `case`) may lie in `parent`, a next view: what its first rounds read in place is computed
        there, is the position's own carried value, stays where it lies (a value from outside the loop
        whose body this is, a carried value no round computes), or is lent."""
        loop = result.owner
        carries = plan.carries[loop]
        if any(c.shift and c.repeat > 1 and (r in group or case) for r, c in zip(loop.results, carries)):
            return False  # a rotated ring (`init_may_be_slot_zero`) is not an enclosing loop's next view cut in order
        carry = carries[loop.results.index(result)]
        inits = [] if runs_past_inits(loop, carry.initial) else [loop.operands[q] for q in carry.initial]
        if case is not None and any(defined_within(i, branch.block) for i in inits for branch in case.branches):
            return False
        return not (carry.yielded and not carry.repeat) and all(
            self.computed_into(i, parent) or self.carried_into(i, parent) or self.handed_in(i) or i in self.lent
            or i in self.stable or self.followed.get(i) is parent or self.next_of_another(i, parent) for i in inits)

    def next_of_another(self, value: SSAValue, parent: SSAValue) -> bool:
        """Whether `value` is the next value of another position of the loop whose next view `parent`
        is, computed into that position's next view: the position of `parent` then borrows it (an
        inner loop that runs no round hands it back), which that position lends (`toggling_origins`)."""
        loop, into = parent.owner, self.dictated.get(value)
        return (into is not parent and into is not None and into.owner is loop and self.block.parent_op() is loop
                and self.block.last_op.operands[loop.results.index(into)] is value)

    def carried_into(self, value: SSAValue, parent: SSAValue) -> bool:
        """Whether `value` is the carried value of the position whose next view is `parent` (an
        inner loop that runs no round hands it back: the position toggles, so it is never
        written over while it is that position's value)."""
        return isinstance(value, BlockArgument) and value.block is self.block and self.dictated.get(value) is parent

    def handed_in(self, value: SSAValue) -> bool:
        """Whether `value` comes from outside the loop whose body this block is, or is a constant: an
        inner loop that runs no round hands it back, and the position whose next view holds the
        inner ring then toggles (`toggling_origins`), reading it where it is."""
        return is_constant(value) or not defined_in(value, self.block)

    def holds_toggle(self, value: SSAValue) -> bool:
        """Whether `value` is in a toggle ring: a loop result whose rounds read what the body yielded,
        or a case result holding a branch's."""
        owner = value.owner
        if isinstance(owner, jx.WhileOp) and owner in self.plan.carries:
            carry = self.plan.carries[owner][owner.results.index(value)]
            return carry.yielded and carry.repeat > 0
        if isinstance(owner, jx.CaseOp) and owner in self.plan.regions:
            return any(value in branch.toggle_holders for branch in self.plan.regions[owner][1])
        return False

    def computed_into(self, value: SSAValue, parent: SSAValue) -> bool:
        """Whether `value` is computed into `parent`'s memory (not a block argument living there)."""
        if self.external(value):
            return False
        root = self.buffers.find(value)
        group = self.buffers.group(root)
        return any(self.dictated.get(m) is parent for m in group) and not any(isinstance(m, BlockArgument) for m in group)

    @staticmethod
    def folds_only(plan: BlockPlan, body: Block, arg: BlockArgument, allowed: SSAValue) -> bool:
        """A result computed into a carried value's memory must be the one yield allowed there, and only it."""
        root = plan.roots.get(arg)
        merged = [v for v, r in plan.roots.items() if r is root and v is not arg]
        if not merged:
            return True
        others = [y for y in body.last_op.operands if y is not allowed]
        return allowed in merged and not any(plan.roots.get(v) is root for v in [*others, *body.args] if v is not arg)
