"""The static plan checker: is a planned jx function safe to run? Read from its IR alone.

It shares nothing with the planner. It reads the `mem` attributes the planner wrote
(`mem.arena`, `mem.slot(s)`, `#mem.next`, `mem.views`, `mem.phi`) and the meaning of each op,
and walks the function the way the arena executor runs it: every branch of every case, every
loop round by round (zero rounds included; only the exit after `rounds N` where a loop says how
many it runs) until every ring has gone round twice, or to the last round it can run (`at_most
N`). It keeps which value owns which bytes: a write takes its bytes from every value it
overlaps, and a read checks that each value it may be reading still owns its bytes (a view
written where its operand is not holds the operand's bytes: a second view of the same operand
written there is not an overwrite). No lifetime is computed: a value is checked where it is
read, so a lifetime the planner got wrong cannot hide.

Paths are walked once each but remembered: every write and every way of reaching a value
carries a guard, the branch of each case and the exit round of each loop it depends on. A
read fails only where some path both reaches the value through that instance and overwrote
the instance before (a loop result that is its init operand after zero rounds is not blamed
for a later round overwriting that operand). A value also knows the paths on which it is outside
the arena, so that a write into a toggle ring goes, path by path, to the first slot that neither
the carried value nor the values of the positions it holds are in on that path (`#mem.next<k, n>`:
the `n`-th such slot after it); each round, the
places of these values are a region of its own, whose paths are their places, so that a few sets
of paths stand for where the next value goes, however many branches and rounds led there. The
walk also lists the copies the executor would make (a value the plan does not put where it is
read next). A donated argument (`mem.args`) is written at its slot when
the walk starts, as a call writes it, and checked at every read like any other value.

Guards are kept few without losing a path: those that differ in one region's paths alone are
joined, and a guard names no region whose every path it allows.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue

from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import YIELDED, ArenaAttr, NextAttr, SlotAttr, ViewsAttr
from jaxalloc.errors import PlanViolation
from jaxalloc.frontend.labels import value_label, value_name
from jaxalloc.frontend.types import byte_size

WIDEN_AFTER = 128
"""Guards kept apart per instance at most; more are widened into one. A toggle ring's value is
bound to its place each round (`toggled`), a region more in its guards: at 64, the guards of an
init operand handed on through many rounds of an inner case were widened past the regions that kept
its copies apart from the ring's value (random program 11448, refused)."""

REFINED_GROUPS = (8, 32, 128)
"""Where a walk that widened guards refuses the plan, it is walked again keeping them apart in
groups (`_widened`): past this many per instance, widened into as many, one walk after another
while each widened and refused. Widened into one, the guards of a value an inner loop of unknown
rounds hands back lose its exit rounds, in an enclosing toggle ring's next view, and a plan that
runs right is refused; grouped, the exit rounds stay apart. A walk of 32 groups took up to ten
times as long as the first (`nested_loops_handing_on_a_slice` of `tests/test_trust.py`: 4.9 s
against 0.5), one of 8 groups 0.9 s, and 4 groups refused it; so only refused plans are walked
again, and in 8 groups first. 32 groups refused the plan of the diffrax gradient of the library
corpus with its scalars outside the arena (a toggle ring's value read after the loop lost the
branch of the round that wrote over it); 128 accept it (1.4 s more on that program)."""

MAX_ROUNDS = 64
"""Loop rounds walked at most (rings of coprime lengths could ask for more)."""

_REINTERPRETING = frozenset({"reshape", "squeeze", "bitcast_convert_type"})
"""Primitives the executor runs as a new reading of their operand's bytes (when sizes match)."""


Guard = tuple[tuple[int, frozenset[int]], ...]
"""A condition on the path taken: for some region walks (cases, loops), the paths allowed
(the branch taken, the round the loop exits in)."""


def _size(guard: Guard) -> int:
    """What meeting `guard` with another costs at most: its regions and their paths."""
    return len(guard) + sum(len(paths) for _, paths in guard)


def _both(a: Guard, b: Guard) -> Guard | None:
    """Both conditions at once; None where no path satisfies both. Guards are sorted by region, so
    the two are merged in one pass (the walk asks this for every instance a write overlaps)."""
    if not a or not b:
        return a or b
    merged, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        (region_a, paths_a), (region_b, paths_b) = a[i], b[j]
        if region_a == region_b:
            paths = paths_a & paths_b
            if not paths:
                return None
            merged.append((region_a, paths))
            i, j = i + 1, j + 1
        elif region_a < region_b:
            merged.append(a[i])
            i += 1
        else:
            merged.append(b[j])
            j += 1
    return (*merged, *a[i:], *b[j:])


def _meets(a: Guard, b: Guard) -> bool:
    """Whether some path satisfies both: `_both` without building the guard, for the write that
    overlaps every instance of its bytes. Inner regions, last in a guard, tell paths apart first."""
    i, j = len(a) - 1, len(b) - 1
    while i >= 0 and j >= 0:
        (region_a, paths_a), (region_b, paths_b) = a[i], b[j]
        if region_a == region_b:
            if paths_a is not paths_b and paths_a.isdisjoint(paths_b):
                return False
            i, j = i - 1, j - 1
        elif region_a > region_b:
            i -= 1
        else:
            j -= 1
    return True


def _implies(a: Guard, b: Guard) -> bool:
    """Every path satisfying `a` satisfies `b`, as the guards say: `a` constrains each region `b`
    does, within it (a region `b` names and `a` does not: no, though `b` may allow all its paths)."""
    i = len(a) - 1
    for region, paths in reversed(b):
        while i >= 0 and a[i][0] > region:
            i -= 1
        if i < 0 or a[i][0] != region or not a[i][1] <= paths:
            return False
        i -= 1
    return True


@dataclass(eq=False)
class _Instance:
    """One value as written into the arena once (in one loop round, on some paths): its bytes."""

    value: SSAValue
    rounds: tuple[tuple[Operation, int], ...]
    start: int
    end: int
    guard: Guard
    """The paths on which it is written."""
    serial: int
    """Instances are numbered as they are written: those of a region walk come after the older ones."""
    copied_from: _Instance | None = None
    content: object = None
    """For a view written where its operand is not: the operand and the paths, as one key. Two
    such copies of one operand, at the same bytes, write the same bytes: neither overwrites the other."""


@dataclass(frozen=True)
class _Located:
    """A value during the walk: which program values it may be (tokens, for the loop-carried
    identities) and which arena instances may hold it, each on the paths given (none: it is
    outside the arena)."""

    tokens: frozenset
    instances: frozenset[tuple[_Instance, Guard]] = frozenset()
    away: frozenset[Guard] = frozenset()
    """The paths on which it is outside the arena (kept exact: where a toggle ring writes depends on them)."""

    def joined(self, other: _Located, groups: int | None, paths: dict[int, int] | None = None) -> tuple[_Located, bool]:
        """This value or `other`, its guards joined and widened as `_per_instance` does (`paths`: see
        `_exactly_joined`); and whether any were widened."""
        instances, widened = _per_instance(self.instances | other.instances, groups, paths)
        return _Located(self.tokens | other.tokens, instances, _exactly_joined(self.away | other.away, paths)), widened

    def on(self, guard: Guard) -> _Located:
        """This value as reached on the paths of `guard` only."""
        reached = ((i, _both(g, guard)) for i, g in self.instances)
        away = frozenset(g for g in (_both(a, guard) for a in self.away) if g is not None)
        return _Located(self.tokens, frozenset((i, g) for i, g in reached if g is not None), away)

    def at(self, offset: int, guard: Guard) -> set[tuple[_Instance, Guard]]:
        """Its instances at `offset` on some path of `guard`: what stays where it is wanted at
        `offset`. (Each place at `offset` that `places` gives meets exactly these: its paths are an
        instance's there, met with `guard`.)"""
        return {(i, g) for i, g in self.instances if i.start == offset and _meets(g, guard)}

    def places(self, guard: Guard) -> list[tuple[int | None, Guard]]:
        """Where it is on the paths of `guard`: an arena offset (None: outside), with the paths."""
        found = [(i.start, both) for i, g in self.instances if (both := _both(g, guard)) is not None]
        found += [(None, both) for a in self.away if (both := _both(a, guard)) is not None]
        return found or [(None, guard)]


def _either(a: Guard, b: Guard) -> Guard:
    """A condition that holds where `a` or `b` does (and maybe on more paths): per region both
    constrain, the paths either allows."""
    other = dict(b)
    return tuple((region, paths | other[region]) for region, paths in a if region in other)


def _per_instance(refs, groups: int | None = None, paths: dict[int, int] | None = None) -> tuple[frozenset, bool]:
    """The paths on which a value may be an instance: per instance, guards joined where that is exact
    (`_exactly_joined`), else kept apart, up to `WIDEN_AFTER` (or `groups`); past that widened into
    one (or into `groups`: `_widened`), which only makes the check stricter, but where a write's
    place depends on the path, as in a toggle ring, a wider guard would blame writes of other paths.
    Also whether any guards were widened."""
    by_instance: dict[_Instance, list[Guard]] = {}
    for instance, guard in refs:
        by_instance.setdefault(instance, []).append(guard)
    kept, widened = [], False
    for instance, guards in by_instance.items():
        guards = _exactly_joined(guards, paths)
        if len(guards) > (groups or WIDEN_AFTER):
            guards = [functools.reduce(_either, guards)] if groups is None else _widened(list(guards), groups)
            widened = True
        kept.extend((instance, g) for g in guards)
    return frozenset(kept), widened


def _exactly_joined(guards, paths: dict[int, int] | None = None) -> frozenset[Guard]:
    """The same paths in fewer guards: guards of the same regions that differ in one region's paths
    alone joined into one, region after region, until none do; a region whose every path a joined
    guard then allows (`paths`: per region, how many it has) is gone from it. A value reached (or
    outside the arena) on each combination of the branches and exit rounds of some regions is then
    one guard, where it was one per combination, multiplied round after round (random program
    40338: 22,000 guards of a value outside the arena, 12 million units of work)."""
    guards = frozenset(guards)
    if len(guards) < 2:
        return guards
    by_regions: dict[tuple, set[Guard]] = {}
    for guard in guards:
        by_regions.setdefault(tuple(region for region, _ in guard), set()).add(guard)
    joined, fewer_regions = [], False
    for alike in by_regions.values():
        while len(alike) > 1:
            # only regions whose paths differ among the guards can join them (guards name dozens):
            # each guard's paths in those, as one tuple, sliced for each region in turn
            columns = zip(*([allowed for _, allowed in guard] for guard in alike))
            varying = [k for k, column in enumerate(columns) if len(set(column)) > 1]
            projected = {guard: tuple(guard[k][1] for k in varying) for guard in alike}
            for i, k in enumerate(varying):
                rest: dict[tuple, tuple[Guard, set]] = {}
                for guard, those in projected.items():
                    rest.setdefault(those[:i] + those[i + 1:], (guard, set()))[1].update(those[i])
                if len(rest) < len(projected):
                    fewer_regions |= bool(paths) and any(len(p) == paths[guard[k][0]] for guard, p in rest.values())
                    projected = {guard[:k] + ((guard[k][0], frozenset(p)),) + guard[k + 1:]: key[:i] + (frozenset(p),) + key[i:]
                                 for key, (guard, p) in rest.items()}
            if len(projected) == len(alike):
                break
            alike = set(projected)
        joined.extend(alike)
    if fewer_regions:  # named no more, those regions leave guards of fewer regions, which may join others
        return _exactly_joined([tuple((r, p) for r, p in g if len(p) < paths[r]) for g in joined], paths)
    return frozenset(joined)


def _widened(guards: list[Guard], groups: int) -> list[Guard]:
    """At most `groups` guards that allow every path of `guards`: grouped by their paths in the
    oldest regions (outer and earlier walks), as many regions as keep the groups within the bound,
    and each group widened into one (`_either`). A value reached after each exit round of an inner
    loop stays apart from that loop's later rounds, which write over it; the newer regions, of the
    rounds that hand it on alike, are the ones widened."""
    paths = [dict(guard) for guard in guards]
    keys: list[tuple] = [()] * len(guards)
    for region in sorted({region for guard in guards for region, _ in guard}):
        longer = [key + (p.get(region),) for key, p in zip(keys, paths)]
        if len(set(longer)) <= groups:
            keys = longer
    grouped: dict[tuple, list[Guard]] = {}
    for key, guard in zip(keys, guards):
        grouped.setdefault(key, []).append(guard)
    return [functools.reduce(_either, group) for group in grouped.values()]


def _joined(placings: list[tuple[Guard, dict]]) -> list[tuple[Guard, dict]]:
    """The same choices of slots on several sets of paths, walked once where their guards join
    exactly: a loop whose rounds are not known hands its enclosing toggle ring's next slot on per
    exit round, and walking each apart would multiply the walks round after round."""
    joined: list[tuple[Guard, dict]] = []
    for guard, chosen in placings:
        while True:
            k = next((k for k, (other, same) in enumerate(joined)
                      if same == chosen and _exact_union(other, guard) is not None), None)
            if k is None:
                joined.append((guard, chosen))
                break
            guard = _exact_union(joined.pop(k)[0], guard)
    return joined


def _apart(moving: list[tuple[SlotAttr, list[Guard]]], stay) -> list[tuple[SlotAttr, Guard]]:
    """The copies of a value moved to its places (`moving`: per place, the paths on which it is
    elsewhere), where it already is on some paths (`stay`). One copy per place where the widened
    paths (`_either`, within the place's own) meet none of those on which it is there: they are
    then exactly the paths it moves on. Otherwise one copy per path: a value moved on each of many
    paths (a loop's exit rounds, a case's branches, round after round) was copied once per path,
    and the copies multiplied with each enclosing round."""
    copies = []
    for slot, guards in moving:
        if not guards:
            continue
        widened = functools.reduce(_either, guards)
        if any(i.start == slot.offset.data and _meets(widened, g) for i, g in stay):
            copies.extend((slot, guard) for guard in guards)
        else:
            copies.append((slot, widened))
    return copies


def _exact_union(a: Guard, b: Guard) -> Guard | None:
    """The paths of `a` or `b` as one guard, where they differ in one region's paths alone."""
    if len(a) != len(b) or any(ra != rb for (ra, _), (rb, _) in zip(a, b)):
        return None
    differ = None
    for k, ((_, pa), (_, pb)) in enumerate(zip(a, b)):
        if pa != pb:
            if differ is not None:
                return None
            differ = k
    if differ is None:
        return a
    region, paths = a[differ]
    return (*a[:differ], (region, paths | b[differ][1]), *a[differ + 1:])


BUCKETS = 1024
"""About how many buckets the index from arena bytes to the instances that may own them has: a
bucket is at least 64 bytes (the default alignment: in a small arena each bucket holds the
instances of one slot, where 256 bytes held four slots' for every write to test), and a power of
two as large as the arena needs (a write goes over every bucket its bytes touch, so buckets small
against megabyte values made the walk slow)."""


def _granule(arena_bytes: int) -> int:
    return max(64, 1 << max(0, (arena_bytes // BUCKETS).bit_length()))


@dataclass
class _Memory:
    """Who may own the arena's bytes, and which writes went over which instances, on which paths."""

    granule: int = 256
    """Bytes per bucket (`_granule`)."""
    owners: dict[int, dict[_Instance, None]] = field(default_factory=dict)
    """For each granule of the arena, the instances that may still own some of its bytes."""
    overwritten: dict[_Instance, list[tuple[_Instance, Guard]]] = field(default_factory=dict)
    work: int = 0
    """The walk's work so far (`PlanCheck.work`)."""
    budget: float = math.inf
    """Work allowed (`check_planned`'s `budget`)."""

    def worked(self, n: int) -> None:
        self.work += n
        if self.work > self.budget:
            raise OverBudget(f"the plan checker worked past its budget of {self.budget:,}")

    def write(self, new: _Instance) -> None:
        granules = range(new.start // self.granule, (new.end - 1) // self.granule + 1)
        seen = {}
        for g in granules:
            seen.update(self.owners.get(g, {}))
        self.worked(len(seen))
        for old in seen:
            if not (old.start < new.end and new.start < old.end) or not _meets(old.guard, new.guard):
                continue
            if (old.value, old.rounds, old.start) == (new.value, new.rounds, new.start):
                continue  # the same value put in its place on other paths: alternatives, not an overwrite
            if new.content is not None and (old.content, old.start, old.end) == (new.content, new.start, new.end):
                continue  # a view of the same operand written again where another view of it is
            self.overwritten.setdefault(old, []).append((new, new.guard))
            if _implies(old.guard, new.guard):  # overwritten wherever it exists
                self.forget(old, keep_overwritten=True)
        for g in granules:
            self.owners.setdefault(g, {})[new] = None

    def forget(self, instance: _Instance, keep_overwritten: bool = False) -> None:
        for g in range(instance.start // self.granule, (instance.end - 1) // self.granule + 1):
            self.owners.get(g, {}).pop(instance, None)
        if not keep_overwritten:
            self.overwritten.pop(instance, None)

    def collect(self, first: int, kept: set[_Instance]) -> None:
        """Forget the instances numbered from `first` on that are not `kept`: after a region walk,
        only its results can still be read."""
        garbage = {i for owners in self.owners.values() for i in owners if i.serial >= first and i not in kept}
        garbage |= {i for i in self.overwritten if i.serial >= first and i not in kept}
        for instance in garbage:
            self.forget(instance)

    def writer(self, instance: _Instance, guard: Guard) -> _Instance | None:
        """A write over `instance` on some path of `guard`, if any."""
        writes = self.overwritten.get(instance, ())
        self.worked(len(writes))
        for new, on in writes:
            if _meets(on, guard):
                return new
        return None


@dataclass(frozen=True)
class PlanCheck:
    """What the walk found besides violations."""

    copies: tuple[str, ...]
    """The copies the executor would make on some path: the plan left a value elsewhere."""
    rounds: int
    """Loop rounds walked, over every loop and path."""
    instances: int
    """Values written into the arena by the walk, once per round and set of paths."""
    work: int
    """The walks' work, counted the same on every machine: a guard for each instance a write overlaps
    and each write over an instance read, and the regions and paths of each guard of a value met
    with paths or joined (`_size`)."""


class OverBudget(Exception):
    """The walks worked past the budget `check_planned` gave them: the plan is neither accepted nor
    refused."""


def check_planned(func: jx.FuncOp, budget: float = math.inf) -> PlanCheck:
    """Walk a planned function; raise `PlanViolation` at the first read of an overwritten value.
    A walk that widened guards and refused is walked again with more of them apart (`REFINED_GROUPS`):
    every walk is sound, and the later ones refuse fewer plans that run right. `OverBudget` where the
    walks together work past `budget` (`PlanCheck.work`)."""
    arena = func.attributes.get("mem.arena")
    if not isinstance(arena, ArenaAttr):
        raise PlanViolation(f"@{func.sym_name.data} has no plan: run jx-assign-buffers first")
    _check_unplaced(func, arena.outputs.data)
    spent = 0
    for groups in (None, *REFINED_GROUPS[:-1]):
        walk = _Walk(func, arena.bytes.data, groups, budget - spent)
        try:
            return replace(walk.run(), work=spent + walk.memory.work)
        except PlanViolation:
            if not walk.widened:
                raise
        spent += walk.memory.work
    found = _Walk(func, arena.bytes.data, REFINED_GROUPS[-1], budget - spent).run()
    return replace(found, work=spent + found.work)


def _planned_blocks(func: jx.FuncOp) -> list[Block]:
    """The function's block and the blocks of its loops and cases, nested ones included."""
    blocks, pending = [], [func.body.block]
    while pending:
        blocks.append(block := pending.pop())
        pending.extend(region.block for op in block.ops if isinstance(op, (jx.WhileOp, jx.CaseOp)) for region in op.regions)
    return blocks


def _block_of(value: SSAValue) -> Block | None:
    return value.block if isinstance(value, BlockArgument) else value.owner.parent_block()


def _check_unplaced(func: jx.FuncOp, outputs_inside: bool) -> None:
    """Every value an op computes has a place in the arena, but where the arena holds no outputs, those
    that lie in an output's memory (`_returnable`): the walk reads a value without a place as one
    outside the arena, so a plan that left a computed value out would run, and its arena would
    understate the memory the function takes."""
    computing = []
    for block in _planned_blocks(func):
        for op in block.ops:
            for name in ("mem.slots", "mem.views"):
                places = op.attributes.get(name)
                if isinstance(places, ArrayAttr) and len(places.data) != len(op.results):
                    raise PlanViolation(f"invalid plan of @{func.sym_name.data}: {_op(op)} has no {name} entry per result")
            if not isinstance(op, (jx.WhileOp, jx.CaseOp, jx.ConstOp, jx.YieldOp)) and not reinterprets(op):
                computing.append(op)
    returnable = (set() if outputs_inside else _returnable(func)) | _held_by_xla(func)
    for op in computing:
        for k, value in enumerate(op.results):
            if byte_size(value.type) and not _placed(op, k) and value not in returnable:
                raise PlanViolation(
                    f"invalid plan of @{func.sym_name.data}: {value_name(value)} ({value_label(value)}) has "
                    "no slot, so it is computed outside the arena, "
                    + ("which holds the function's outputs" if outputs_inside else
                       "and it is not an output or computed in place of one")
                )


def _place_of(op: Operation, k: int):
    """The place the plan wrote for result `k` of `op` (`mem.slot` or `mem.slots`), if any."""
    slots = op.attributes.get("mem.slots")
    if isinstance(slots, ArrayAttr):
        return slots.data[k]
    return op.attributes.get("mem.slot") if k == 0 and len(op.results) == 1 else None


def _placed(op: Operation, k: int) -> bool:
    """Whether result `k` of `op` has a place in the arena: a slot, a toggle ring's (`#mem.next`), or,
    for a loop, a ring."""
    if isinstance(op, jx.WhileOp):
        views = _views_at(op, k)
        return views is not None and bool(views.slots.data)
    place = _place_of(op, k)
    return isinstance(place, NextAttr) or (isinstance(place, SlotAttr) and place.size.data > 0)


def _computed_outside(value: SSAValue) -> bool:
    """Whether `value` is an op's result without a place in the arena (not a constant)."""
    return isinstance(value, OpResult) and not isinstance(value.owner, jx.ConstOp) and not _placed(value.owner, value.index)


XLA_PRODUCTS = frozenset({"dot_general", "conv_general_dilated"})
"""Primitives XLA computes only on buffers of its own: a plan may leave their values to XLA."""

XLA_SMALL_BYTES = 512
"""A value of at most this many bytes may lie in a buffer of XLA's own, anywhere: on the CPU, XLA
runs the kernels on buffers of at most 512 bytes one after another, as a plan of a few such values
would not."""

XLA_PARTS = frozenset({"split", "slice"})
"""Primitives that read parts of their operand: of a value in a buffer of XLA's, or of one defined
around the block that reads them (unchanged while it runs), XLA reads them where they lie."""


def _held_by_xla(func: jx.FuncOp) -> set[SSAValue]:
    """The values that may lie in buffers of XLA's own, outside the arena: the operands and results
    of matrix products and convolutions (those of a fused op holding one) and the small values
    (`XLA_SMALL_BYTES`) that ops compute, in the function's block, a loop body or a branch, and,
    through values without a place, values of their size computed in the place of one or in whose
    place one is computed in the same block, and what a loop's position without a ring may hold
    (`_held_at`), and the parts of such a value (`XLA_PARTS`). (Which of its operands an op took the
    place of is the planner's choice; any of them is allowed, as for the outputs.)"""
    pending: list[SSAValue] = []
    for block in _planned_blocks(func):
        for op in block.ops:
            inner = list(op.body.block.ops) if isinstance(op, jx.FusedOp) else [op]
            if any(isinstance(o, jx.PrimOp) and o.primitive.data in XLA_PRODUCTS for o in inner):
                pending.extend(v for v in (*op.operands, *op.results) if _computed_outside(v))
            pending.extend(v for v in op.results if byte_size(v.type) <= XLA_SMALL_BYTES and _computed_outside(v))
            if isinstance(op, jx.PrimOp) and op.primitive.data in XLA_PARTS and _unchanged(op.operands[0], block):
                pending.extend(v for v in op.results if _computed_outside(v))
    found: set[SSAValue] = set()

    def computing(op: Operation, value: SSAValue) -> bool:
        return op.parent_block() is _block_of(value) and not isinstance(op, (jx.WhileOp, jx.CaseOp, jx.YieldOp))

    while pending:
        value = pending.pop()
        if value in found:
            continue
        found.add(value)
        size = byte_size(value.type)
        if isinstance(value.owner, jx.WhileOp):  # a loop's position without a ring: what it may hold
            pending.extend(v for v in _held_at(value.owner, value.index) if _computed_outside(v))
        if computing(value.owner, value):
            pending.extend(v for v in value.owner.operands if byte_size(v.type) == size and _computed_outside(v))
        for use in value.uses:
            if computing(use.operation, value):
                part = isinstance(use.operation, jx.PrimOp) and use.operation.primitive.data in XLA_PARTS
                pending.extend(r for r in use.operation.results if (part or byte_size(r.type) == size) and _computed_outside(r))
    return found


def _unchanged(value: SSAValue, block: Block) -> bool:
    """Whether `value` stays as it is while `block` runs: defined around it, or an argument of a loop's
    body that the body yields back at its own position."""
    if _block_of(value) is not block:
        return True
    loop = block.parent_op()
    return isinstance(value, BlockArgument) and isinstance(loop, jx.WhileOp) and block is loop.body.block \
        and block.last_op.operands[value.index] is value


def _returnable(func: jx.FuncOp) -> set[SSAValue]:
    """The values that may lie in an output's memory outside the arena: the outputs, and through
    values without a place, the operands of their size they may be computed in place of, the values
    a case's branches yield at its result, a loop's init operands and yields at a position without
    a ring. (Any such operand: which one an op took the place of is the planner's choice, and
    where it lies in an output's memory, the walk does not follow it.)"""
    found: set[SSAValue] = set()
    pending = list(func.body.block.last_op.operands)
    while pending:
        value = pending.pop()
        if value in found or not _computed_outside(value):
            continue
        found.add(value)
        op, k = value.owner, value.index
        if isinstance(op, jx.CaseOp):
            pending.extend(branch.block.last_op.operands[k] for branch in op.branches)
        elif isinstance(op, jx.WhileOp):
            pending.extend(_held_at(op, k))
        elif reinterprets(op):
            pending.append(op.operands[0])
        else:
            pending.extend(v for v in op.operands if byte_size(v.type) == byte_size(value.type))
    return found


def _held_at(loop: jx.WhileOp, k: int) -> list[SSAValue]:
    """The values a loop's position without a ring may hold: its init operands (those its views read
    in place too) and what the body yields there, through the positions handing theirs on to it."""
    body, found, positions, seen = loop.body.block, [], [k], set()
    while positions:
        if (j := positions.pop()) in seen:
            continue
        seen.add(j)
        views = _views_at(loop, j)
        found += [loop.inits[j], *(loop.inits[i.data] for i in (views.initial.data if views else ()))]
        yielded = body.last_op.operands[j]
        if isinstance(yielded, BlockArgument) and yielded.block is body:
            positions.append(yielded.index)
        else:
            found.append(yielded)
    return found


def _views_at(loop: jx.WhileOp, k: int) -> ViewsAttr | None:
    """The multi-view the plan wrote for position `k` of `loop`, if any."""
    views = loop.attributes.get("mem.views")
    return views.data[k] if isinstance(views, ArrayAttr) and isinstance(views.data[k], ViewsAttr) else None


class _Walk:
    def __init__(self, func: jx.FuncOp, arena_bytes: int, groups: int | None = None, budget: float = math.inf):
        self.func, self.arena_bytes = func, arena_bytes
        self.groups = groups
        """Guards widened past this many, into as many (`_per_instance`); None: past `WIDEN_AFTER`, into one."""
        self.widened = False
        self.rounds: list[tuple[Operation, int]] = []
        self.next_views: list[list[SlotAttr | None]] = []
        self.further: list[dict] = []
        """Per loop being walked, per toggle ring: its `nth` free slot on each path."""
        self.copies: list[str] = []
        self.rounds_walked = 0
        self.serial = 0
        self.memory = _Memory(_granule(arena_bytes), budget=budget)
        self.guard: Guard = ()
        """The paths being walked."""
        self.paths: dict[int, int] = {}
        """Per region (numbered from 1), how many paths it has: a guard allowing them all need not name
        it (`named`, `_exactly_joined`)."""
        self._tokens = 0

    def run(self) -> PlanCheck:
        env = {a: self.argument(a, k) for k, a in enumerate(self.func.body.block.args)}
        self.block(self.func.body.block, env)
        return PlanCheck(tuple(self.copies), self.rounds_walked, self.serial, self.memory.work)

    def compare(self, located) -> None:
        """Count the work of meeting the guards of `located` with paths, or joining them."""
        self.memory.worked(sum(_size(g) for value in located for _, g in value.instances)
                             + sum(_size(g) for value in located for g in value.away))

    def union(self, located) -> _Located:
        """One value that may be any of `located`."""
        located = list(located)
        self.compare(located)
        result = located[0]
        for other in located[1:]:
            result, widened = result.joined(other, self.groups, self.paths)
            self.widened |= widened
        return result

    def named(self, region: int, paths) -> Guard:
        """The condition that the walk takes one of `paths` of `region`: none where they are all its paths."""
        paths = frozenset(paths)
        return () if len(paths) == self.paths[region] else ((region, paths),)

    def region(self, paths: int) -> int:
        """A new region of `paths` paths (branches, exit rounds, places)."""
        region = len(self.paths) + 1
        self.paths[region] = paths
        return region

    def outside(self) -> _Located:
        self._tokens += 1
        return _Located(frozenset((self._tokens,)), away=frozenset((self.guard,)))

    def argument(self, arg: SSAValue, k: int) -> _Located:
        """A function argument: outside the arena, or, donated, written at its slot of `mem.args`
        when the call starts."""
        slots = self.func.attributes.get("mem.args")
        if not isinstance(slots, ArrayAttr):
            return self.outside()
        if len(slots.data) != len(self.func.body.block.args):
            raise PlanViolation(f"invalid plan of @{self.func.sym_name.data}: mem.args has no slot per argument")
        where = self.check_slot(arg, slots.data[k])
        if where is None:
            return self.outside()
        instance = self.new(arg, where)
        self.memory.write(instance)
        return _Located(self.outside().tokens, frozenset(((instance, self.guard),)))

    def block(self, block: Block, env: dict) -> list[_Located]:
        """Walk `block` on the current paths; returns the yielded values."""
        for op in block.ops:
            self.read(op, op.operands, env)
            if isinstance(op, jx.YieldOp):
                return [env[v] for v in op.operands]
            if isinstance(op, jx.WhileOp):
                self.loop(op, env)
            elif isinstance(op, jx.CaseOp):
                self.case(op, env)
            elif isinstance(op, jx.ConstOp):
                env[op.results[0]] = self.outside()
            else:
                self.prim(op, env)
        raise PlanViolation(f"a block of @{self.func.sym_name.data} does not end in jx.yield")

    def read(self, op: Operation, values, env: dict) -> None:
        for value in values:
            for instance, guard in env[value].instances:
                reached = _both(guard, self.guard)
                writer = self.memory.writer(instance, reached) if reached is not None else None
                if writer is not None:
                    raise PlanViolation(
                        f"invalid plan of @{self.func.sym_name.data}: {_describe(instance)} is read by "
                        f"{_op(op)}{_in_rounds(tuple(self.rounds))}, but {_describe(writer)} was written over "
                        f"its bytes [{instance.start}, {instance.end}) before"
                    )

    def place(self, op: Operation, k: int) -> list[tuple[SlotAttr, Guard]] | None:
        """Where result `k` of `op` is written in this round, on which paths (None: outside the arena)."""
        place = _place_of(op, k)
        if isinstance(place, NextAttr):
            position, nth = place.position.data, place.nth.data
            place = self.next_views[-1][position]
            if nth:  # a toggle ring's further free slot
                if position not in self.further[-1]:
                    raise PlanViolation(f"invalid plan of @{self.func.sym_name.data}: {_op(op)} is computed into "
                                        f"#mem.next<{position}, {nth}>, but position {position} does not toggle")
                place = self.further[-1][position](nth)
            if isinstance(place, list):  # a toggle ring: the slot depends on the path
                return [(slot, both) for slot, guard in place if (both := _both(guard, self.guard)) is not None]
        place = self.check_slot(op.results[k], place)
        return None if place is None else [(place, self.guard)]

    def check_slot(self, value: SSAValue, place) -> SlotAttr | None:
        """`place` where it is a slot in the arena large enough for `value` (None: outside the arena)."""
        if not isinstance(place, SlotAttr) or place.size.data == 0:
            return None
        if place.size.data < byte_size(value.type) or place.end > self.arena_bytes:
            raise PlanViolation(
                f"invalid plan of @{self.func.sym_name.data}: {value_name(value)} ({value_label(value)}) needs "
                f"{byte_size(value.type)} bytes but its slot is [{place.offset.data}, {place.end}) "
                f"of a {self.arena_bytes}-byte arena"
            )
        return place

    def new(self, value: SSAValue, place: SlotAttr, copied_from: _Instance | None = None, guard: Guard | None = None,
            content: object = None) -> _Instance:
        start, guard = place.offset.data, self.guard if guard is None else guard
        self.serial += 1
        end = start + byte_size(value.type)
        return _Instance(value, tuple(self.rounds), start, end, guard, self.serial, copied_from, content)

    def prim(self, op: Operation, env: dict) -> None:
        written = []
        for k, result in enumerate(op.results):
            where = self.place(op, k)
            if k == 0 and reinterprets(op) and (env[op.operands[0]].instances or where is not None):
                env[result] = self.reinterpret(result, env[op.operands[0]], where, written)
            elif where is None:
                env[result] = self.outside()
            else:
                here = []
                for slot, guard in where:
                    written.append(self.new(result, slot, guard=guard))
                    here.append((written[-1], guard))
                env[result] = _Located(self.outside().tokens, frozenset(here))
        for instance in written:
            self.memory.write(instance)

    def reinterpret(self, result: SSAValue, operand: _Located, where, written: list) -> _Located:
        """A view reads its operand's bytes in place; where the plan put it elsewhere, it is computed there."""
        if where is None:
            return _Located(self.outside().tokens, operand.instances, operand.away)
        self.compare([operand] * len(where))
        kept = set()
        for slot, guard in where:
            kept |= operand.at(slot.offset.data, guard)
            for at, paths in operand.places(guard):
                if at != slot.offset.data:
                    written.append(self.new(result, slot, guard=paths, content=(operand.on(paths), paths)))
                    kept.add((written[-1], paths))
        return _Located(self.outside().tokens, frozenset(kept))

    def put(self, value: SSAValue, located: _Located, where, why: str) -> _Located:
        """`located` moved to its place (`where`, per path): instances already there stay, the others
        are copied. Without a place it leaves the arena (read out into an array of its own)."""
        if where is None:
            if located.instances:
                self.copies.append(f"{value_name(value)} ({value_label(value)}): read out of the arena{_in_rounds(tuple(self.rounds))}")
            return _Located(located.tokens, away=frozenset((self.guard,)))
        self.compare([located] * len(where))
        stay, moving = set(), []
        for slot, guard in where:
            stay |= located.at(slot.offset.data, guard)
            moving.append((slot, [paths for at, paths in located.places(guard) if at != slot.offset.data]))
        if not any(paths for _, paths in moving):
            return located
        self.copies.append(f"{value_name(value)} ({value_label(value)}): {why}{_in_rounds(tuple(self.rounds))}")
        # one copy on every path of a place unless the value is already there on some: then one
        # on the paths it is not there
        source = next(iter(located.instances), (None,))[0]
        copies = _apart(moving, stay) if stay else [(slot, guard) for slot, guard in where]
        for slot, guard in dict.fromkeys(copies):
            copy = self.new(value, slot, source, guard)
            self.memory.write(copy)
            stay.add((copy, guard))
        return _Located(located.tokens, frozenset(stay))

    def walking(self, region: int, paths) -> Guard:
        """Walk on from here only on `paths` of `region`; returns the guard to go back to."""
        before = self.guard
        self.guard = _both(before, self.named(region, paths))
        return before

    def case(self, op: jx.CaseOp, env: dict) -> None:
        phis = op.attributes.get("mem.phi")
        phi = [set(p.get_values()) for p in phis.data] if isinstance(phis, ArrayAttr) else [set()] * len(op.results)
        region, results, first = self.region(len(op.branches)), [], self.serial + 1
        for b, branch in enumerate(op.branches):
            outer = self.walking(region, (b,))
            yielded, seen = self.block(branch.block, env), {}
            row = []
            for k, (value, located, source) in enumerate(zip(op.results, yielded, branch.block.last_op.operands)):
                if b not in phi[k]:
                    located = self.put(value, located, self.place(op, k), f"branch {b} yields it elsewhere")
                elif source in seen:  # yielded twice: a view of the first result it is yielded at
                    located = row[seen[source]]
                seen.setdefault(source, k)
                row.append(located)
            self.compare(row)
            results.append([located.on(self.guard) for located in row])
            self.guard = outer
        for k, value in enumerate(op.results):
            env[value] = self.union(r[k] for r in results)
        self.memory.collect(first, {i for r in results for located in r for i, _ in located.instances})

    def loop(self, op: jx.WhileOp, env: dict) -> None:
        views = op.attributes.get("mem.views")
        if not isinstance(views, ArrayAttr):  # one per result: `_check_unplaced`
            raise PlanViolation(f"invalid plan of @{self.func.sym_name.data}: {_op(op)} has no mem.views per carried value")
        placings = self.within(op, [v for v in views.data if isinstance(v, ViewsAttr)])
        if len(placings) == 1:
            return self.walk_loop(op, env, placings[0][1])
        outer, found = self.guard, []
        for guard, placed in placings:  # the ring is where the enclosing toggle ring puts it, per path
            self.guard = guard
            self.walk_loop(op, env, placed)
            self.compare(env[r] for r in op.results)
            found.append([env[r].on(guard) for r in op.results])
        self.guard = outer
        for k, value in enumerate(op.results):
            env[value] = self.union(f[k] for f in found)

    def walk_loop(self, op: jx.WhileOp, env: dict, views: list[ViewsAttr]) -> None:
        """Walk the rounds of `op` on the current paths, its rings where `views` say."""
        inits = [env[v] for v in op.inits]
        rounds, exit_at = _rounds_to_walk(views, *op.said_rounds)
        region, outer, first = self.region(len(exit_at(0))), self.guard, self.serial + 1
        state = []
        for k, (view, init) in enumerate(zip(views, inits)):
            at = view.view(0)
            if isinstance(at, int):
                self.same_value(op, k, 0, inits[at], init)
                state.append(inits[at])
            else:  # round 0 reads the init operand where it lies, as the executors do: in the ring's
                state.append(init)  # first slot, or in an enclosing loop's first round, where that loop's is
        body, cond = op.body.block, op.cond.block
        exits = []
        self.rounds.append((op, 0))
        for round_ in range(rounds):
            self.rounds[-1] = (op, round_)
            self.rounds_walked += 1
            self.guard = _both(outer, self.named(region, exit_at(round_)))
            env.update(zip(cond.args, state))
            self.block(cond, env)
            if round_ in exit_at(round_):
                self.compare(state)
                exits.append([located.on(self.named(region, (round_,))) for located in state])
            if round_ == rounds - 1:
                break
            self.guard = _both(outer, self.named(region, exit_at(round_ + 1)))
            following = [view.view(round_ + 1) for view in views]
            next_views, further = [], {}
            for k, (view, at) in enumerate(zip(views, following)):
                if view.toggles:
                    held = (k, *view.held)
                    bound, further[k] = self.toggled(view, [state[j] for j in held])
                    for j, located in zip(held, bound):
                        state[j] = located
                    next_views.append(further[k](0))
                else:
                    next_views.append(at if isinstance(at, SlotAttr) else None)
            self.next_views.append(next_views)
            self.further.append(further)
            env.update(zip(body.args, state))
            yielded = self.block(body, env)
            self.next_views.pop()
            self.further.pop()
            state, moved = [], {}
            for k, (at, located, value) in enumerate(zip(following, yielded, body.last_op.operands)):
                if isinstance(at, int):
                    self.same_value(op, k, round_ + 1, inits[at], located)
                    state.append(inits[at])
                elif at is YIELDED:
                    state.append(located)
                else:  # a value yielded at positions sharing a slot is moved there once
                    if (value, at) not in moved:
                        moved[value, at] = self.put(op.results[k], located, self.at(at), "the body yields it elsewhere")
                    state.append(moved[value, at])
            # what the loop wrote can only be read again through the next round's state or an exit
            self.memory.collect(first, {i for located in [*state, *(x for exit_ in exits for x in exit_)]
                                        for i, _ in located.instances})
        self.rounds.pop()
        self.guard = outer
        for k, value in enumerate(op.results):
            env[value] = self.union(exit_[k] for exit_ in exits)
        self.memory.collect(first, {i for exit_ in exits for located in exit_ for i, _ in located.instances})

    def within(self, op: jx.WhileOp, views: list[ViewsAttr]) -> list[tuple[Guard, list[ViewsAttr]]]:
        """`views` in this round of the enclosing loop, where a ring is its next view of a position:
        per set of paths (a toggle ring's next slot depends on the path)."""
        positions = {s.position.data for v in views for s in v.slots.data if isinstance(s, NextAttr)}
        if positions and not self.next_views:
            raise PlanViolation(f"invalid plan of @{self.func.sym_name.data}: {_op(op)} has a #mem.next ring outside a loop")
        placings = [(self.guard, {})]
        for position in positions:
            at = self.next_views[-1][position]
            if isinstance(at, list):  # a toggle ring: its next slot may differ by path
                slots = {slot for slot, _ in at}
                at = at if len(slots) > 1 else slots.pop()
            choices = at if isinstance(at, list) else [(at, self.guard)]
            placings = [(both, {**chosen, position: slot}) for guard, chosen in placings
                        for slot, paths in choices if (both := _both(guard, paths)) is not None]
        return [(guard, [v.within(chosen.get) for v in views]) for guard, chosen in _joined(placings)]

    def at(self, slot: SlotAttr | None) -> list[tuple[SlotAttr, Guard]] | None:
        return None if slot is None else [(slot, self.guard)]

    def toggled(self, view: ViewsAttr, held: list[_Located]) -> tuple[list[_Located], Callable]:
        """Where a toggle ring's next value goes: the first slot that neither its current value nor
        the values of the positions it holds (`held`, the current value first) are in. Which slot
        that is depends on the paths (each round a branch computes the next value or hands the
        current one back), and told apart by the branches and exit rounds that lead there, the
        paths multiplied round after round. So the places of these values are a region of its
        own (its paths: the places, each an offset or None outside the arena, one per value), and
        the values are returned bound to it: each of their instances on the paths where the value
        is in its place. The next value goes to one slot on the paths of the places it toggles from
        there: the function returned gives those slots and paths, for the first free slot or the
        `nth` after it."""
        self.compare(held)
        # each value's places in a fixed order, and paths numbered in it: a set of them comes out in
        # the order its instances do (hashed by address), and so would the paths, walk after walk
        combos = list(itertools.product(*(sorted({at for at, _ in located.places(self.guard)}, key=_place_order)
                                          for located in held)))
        region = self.region(len(combos))

        def there(js, place) -> Guard:
            return self.named(region, [n for n, c in enumerate(combos) if any(c[j] == place for j in js)])

        # an instance that several of these values may be (a value yielded at two positions) is bound
        # alike in each, to its place in any of them: else its ways of being reached would double
        # round after round
        holders: dict[tuple[_Instance, Guard], set[int]] = {}
        for j, located in enumerate(held):
            for reached in located.instances:
                holders.setdefault(reached, set()).add(j)
        bound = [_Located(located.tokens,
                          frozenset((i, _both(g, there(holders[i, g], i.start))) for i, g in located.instances),
                          frozenset(_both(g, there((j,), None)) for g in located.away))
                 for j, located in enumerate(held)]
        guard = self.guard

        def slots(nth: int) -> list[tuple[SlotAttr, Guard]]:
            targets: dict[SlotAttr, set] = {}
            for n, combo in enumerate(combos):
                targets.setdefault(view.toggle(*combo, nth=nth), set()).add(n)
            return [(slot, _both(guard, self.named(region, at))) for slot, at in targets.items()]

        return bound, slots

    def same_value(self, op: jx.WhileOp, k: int, round_: int, read: _Located, carried: _Located) -> None:
        """A round that reads an init operand in place must be carrying that very value."""
        if read.tokens != carried.tokens:
            raise PlanViolation(
                f"invalid plan of @{self.func.sym_name.data}: round {round_} of {_op(op)} reads an init operand "
                f"in place for carried value {k}, but the program carries another value there"
            )


def _place_order(at: int | None) -> int:
    """Arena offsets in order, outside the arena (None) first."""
    return -1 if at is None else at


def _rounds_to_walk(views: list[ViewsAttr], known: int | None, at_most: int | None = None):
    """How many rounds to walk, and the exit rounds still ahead of a round (the paths it is on).

    Without a known round count, enough rounds for every loop exit: the init reads, then every ring
    around twice, then one, or every round the loop can run (`at_most`) where that is fewer; every
    round is an exit. With one, the loop exits after those rounds only, or, for a longer loop, after
    the last walked round where the rings are as they are then."""
    prefix = max((len(v.initial) for v in views), default=0)
    period = math.lcm(*(max(v.repeat, 1) for v in views)) if views else 1
    walked = min(prefix + 2 * period + 2, MAX_ROUNDS)
    if known is not None and known >= walked:
        known = walked - 1 - (walked - 1 - known) % period
        if known < prefix + period:  # too few rounds walked to see the rings repeat
            known = None
    if known is None:
        walked = walked if at_most is None else min(walked, at_most + 1)
        return walked, lambda round_: frozenset(range(round_, walked))
    return known + 1, lambda round_: frozenset((known,))


def reinterprets(op: Operation | None) -> bool:
    """Whether the executor runs `op` as a new reading of its first operand's bytes (written
    unchanged where the plan puts the result elsewhere): the sanitizer's rule too."""
    if not isinstance(op, jx.PrimOp) or len(op.results) != 1 or not op.operands:
        return False
    if op.primitive.data not in _REINTERPRETING:
        return False
    dimensions = op.params.data.get("dimensions")
    if op.primitive.data == "reshape" and dimensions is not None and dimensions != StringAttr("None"):
        return False
    return byte_size(op.operands[0].type) == byte_size(op.results[0].type)



def _op(op: Operation) -> str:
    if op.results:
        return f"{value_name(op.results[0])} ({value_label(op.results[0])})"
    if isinstance(op, jx.YieldOp):
        parent = op.parent_op()
        return "the function's outputs" if isinstance(parent, jx.FuncOp) else f"the yield of {_op(parent)}"
    return op.name


def _in_rounds(rounds) -> str:
    return "".join(f", round {r} of {_op(loop)}" for loop, r in rounds)


def _describe(instance: _Instance) -> str:
    what = f"{value_name(instance.value)} ({value_label(instance.value)}{_in_rounds(instance.rounds)})"
    return f"a copy of {what}" if instance.copied_from is not None else what
