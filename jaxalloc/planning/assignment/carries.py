"""The carry graph of a loop: which positions compute their next value, which hand values on, in
which rotation and with which delay. Pure: it reads the loop's IR, no plan."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block, BlockArgument, SSAValue

from jaxalloc.analysis.liveness import defined_in
from jaxalloc.dialects import jx
from jaxalloc.planning.assignment.ir import defined_within, is_constant


@dataclass(frozen=True)
class CarryGraph:
    """How a loop's carried positions feed each other: which compute their next value (the origins of
    rings), which pass a value on unchanged (rotations), which only hand on values from outside."""

    args: list[SSAValue]
    """The body's carried values."""
    yields: list[SSAValue]
    """The values the body yields, by position."""
    results: list[SSAValue]
    """The loop's results."""
    computed: dict[SSAValue, int]
    """Values the body computes and yields, by the first position yielding each."""
    handed: dict[SSAValue, list[SSAValue]]
    """Case or loop results yielded that only hand on carried values and values from outside: the
    values each may be. No round computes them: the positions yielding them keep no ring."""
    origins: dict[int, tuple[int, int]]
    """For each position fed by a computed value, maybe through a rotation: the position whose ring
    holds it (the first to yield it) and the delay in rounds."""
    cycles: dict[int, tuple[int, ...]]
    """Positions that only pass values round a cycle (a swap, a rotation with nothing computed)."""
    longest: dict[int, tuple[int, int]]
    """For each origin: the delay and position of its farthest reader."""
    readers: dict[tuple[int, int], list[int]]
    """For each origin and delay: the positions reading one slot of its ring."""
    followers: dict[int, list[int]]
    """For each origin with any: the other positions holding its values (yielded there too, or
    passed on in a rotation)."""
    origin_of: dict[SSAValue, int]
    """For the carried value of each follower: its origin."""


def carry_graph(op: jx.WhileOp) -> CarryGraph:
    """The carry graph of `op`, from its body's IR alone."""
    body = op.body.block
    args, yields, results = list(body.args), list(body.last_op.operands), list(op.res)
    computed = {v: k for k, v in reversed(list(enumerate(yields)))
                if defined_in(v, body) and not isinstance(v, BlockArgument) and not is_constant(v)}
    handed = handed_yields(body, computed)
    computed = {v: k for v, k in computed.items() if v not in handed}
    origins = carry_origins(args, yields, computed)
    # each computed position c starts a ring; its values reach position p after `delay` rounds
    longest: dict[int, tuple[int, int]] = {}
    readers: dict[tuple[int, int], list[int]] = {}
    for p, (c, delay) in origins.items():
        readers.setdefault((c, delay), []).append(p)
        if delay > longest.get(c, (0, c))[0]:
            longest[c] = (delay, p)
    followers = {c: sorted(p for (o, _), group in readers.items() if o == c for p in group if p != c) for c in longest}
    followers = {c: group for c, group in followers.items() if group}
    origin_of = {args[p]: c for c, group in followers.items() for p in group}
    return CarryGraph(args, yields, results, computed, handed, origins, rotation_cycles(args, yields), longest,
                      readers, followers, origin_of)


def carry_origins(args, yields, computed) -> dict[int, tuple[int, int]]:
    """For each carried position fed by a value computed in the body, possibly through positions that
    pass it on unchanged (a rotation), the position whose ring holds it (the first to yield it) and
    the delay in rounds."""
    position = {a: k for k, a in enumerate(args)}
    origins = {}
    for k in range(len(args)):
        source, delay, seen = k, 1, {k}
        while yields[source] in position and yields[source] is not args[source]:
            source = position[yields[source]]
            delay += 1
            if source in seen:
                break
            seen.add(source)
        else:
            if yields[source] in computed and yields[k] is not args[k]:
                origins[k] = (computed[yields[source]], delay)
    return origins


def stable_values(k: int, args, yields, inits, cycles: dict, handed: dict) -> list[SSAValue]:
    """The values a position that no round computes may hold: its init operand where it keeps it,
    those of its rotation (`rotation_cycles`), or those it is handed (`handed_on`)."""
    if yields[k] is args[k] or yields[k] is inits[k]:
        return [inits[k]]
    if k in cycles:
        return [inits[q] for q in cycles[k]]
    return list(dict.fromkeys([inits[k], *handed_on(k, args, yields, inits, handed)]))


def handed_on(k: int, args, yields, inits, handed: dict) -> list[SSAValue]:
    """The values a position handed what the body does not compute may hold after a round: those
    yielded along the positions passing values on, directly or through the cases and inner loops
    of `handed` (`handed_yields`): init operands read in place, values from outside the loop,
    constants."""
    position = {a: j for j, a in enumerate(args)}
    values, seen, todo = [], {k}, [yields[k]]
    while todo:
        for value in handed.get(v := todo.pop(), [v]):
            if value not in position:
                values.append(value)
                continue
            j = position[value]
            values.append(inits[j])
            if j not in seen:
                seen.add(j)
                todo.append(yields[j])
    return values


def handed_yields(body: Block, computed: dict) -> dict[SSAValue, list[SSAValue]]:
    """The yields of a loop body among `computed` that no round computes, each with the values it
    may be: a case result or an inner loop result that only hands on the body's carried values and
    values from outside the loop (`hands_on`), where none of those carried values may be computed
    in an earlier round (a position that computes, or is handed what one computes)."""
    position = {a: j for j, a in enumerate(body.args)}
    yields = list(body.last_op.operands)
    handed = {v: found for v in computed if (found := hands_on(v, body)) is not None}
    computing: set[int] = set()
    while more := {k for k, y in enumerate(yields) if k not in computing and (
            (y in computed and y not in handed) or any(position.get(a) in computing for a in handed.get(y, [y])))}:
        computing |= more
    return {v: found for v, found in handed.items() if not any(position.get(a) in computing for a in found)}


def hands_on(value: SSAValue, body: Block) -> list[SSAValue] | None:
    """The values `value`, of loop body `body`, may be where every path hands one on unchanged:
    the body's carried values and values from outside the loop, through the branches of cases and
    the init operands and rounds of inner loops. None where some path computes it."""
    found, todo, seen = [], [value], set()
    while todo:
        if (v := todo.pop()) in seen:
            continue
        seen.add(v)
        loop = v.block.parent_op() if isinstance(v, BlockArgument) else v.owner
        if not defined_within(v, body) or isinstance(v, BlockArgument) and v.block is body:
            found.append(v)
        elif isinstance(loop, jx.WhileOp) and (not isinstance(v, BlockArgument) or v.block is loop.body.block):
            # an inner loop's carried value or result: its init operand, or what its body yields there
            todo += [loop.inits[v.index], loop.body.block.last_op.operands[v.index]]
        elif isinstance(v.owner, jx.CaseOp):
            todo += [branch.block.last_op.operands[v.index] for branch in v.owner.branches]
        else:
            return None
    return found


def rotation_cycles(args, yields) -> dict[int, tuple[int, ...]]:
    """For each carried position on a cycle of positions that pass their values on unchanged (a swap
    `(a, b) -> (b, a)`, a rotation), the init operands it reads in rounds 0, 1, ...: its own, then
    the next position's, around the cycle."""
    position = {a: j for j, a in enumerate(args)}
    cycles = {}
    for k in range(len(args)):
        chain = [k]
        while yields[chain[-1]] in position and position[yields[chain[-1]]] not in chain:
            chain.append(position[yields[chain[-1]]])
        if len(chain) > 1 and yields[chain[-1]] is args[k]:
            cycles[k] = tuple(chain)
    return cycles


def rotation_chain(k: int, delay: int, args, yields) -> tuple[int, ...]:
    """The init operands position `k` reads in rounds 0 .. delay-1: its own, then its sources'."""
    position = {a: j for j, a in enumerate(args)}
    chain = [k]
    while len(chain) < delay:
        chain.append(position[yields[chain[-1]]])
    return tuple(chain)
