"""`jx-fuse`: chains of elementwise ops become one `jx.fused` op, whose inner values are never planned.

XLA never materialises the links of an elementwise chain (every step of a GELU or a softmax): it
fuses them into one kernel that keeps them in registers. The jaxpr keeps every link, and a plan of
the jaxpr gives each one memory. This pass groups an elementwise op (or a reduction, which ends a
group) with the elementwise ops, broadcasts and iotas that feed it (within one block), so that the
group computes its result from its inputs in one kernel:
the arena planner sees one op, its operands and its result, and the compiled executor hands XLA the
whole chain to fuse.

Every reader of a member is a member. A cheap member read by several fusible ops is a member of
each of their groups, computed again in each, as XLA duplicates a producer into its consumers. The
fused op takes the place of the group's last op; the others move down to it, which is safe for pure
ops but lengthens the lives of their operands by the ops they skip: where a move would make a step
hold more than the bound before fusion (in a loop body or a branch, where the longer life is a
value of one aligned slot: more than the block's own peak), the chain is cut at its last moved link,
which stays where it is as a fusion of the links before it, so fusion never raises the bound. A cut
may blame a move that raised nothing (it read a value that lives across a step another move
raised): once no step rises, each cut is undone where still no step rises (`_fusions`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from itertools import accumulate

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from jaxalloc.dialects import jx
from jaxalloc.frontend.types import byte_size
from jaxalloc.passes import library_graphs
from jaxalloc.passes.schedule import module_bound
from jaxalloc.analysis.inplace import ELEMENTWISE, viewed
from jaxalloc.analysis.liveness import defined_in, op_of
from jaxalloc.planning.assignment.ir import is_small


def fusible(op: Operation) -> bool:
    """Elementwise ops of operands of their own shape fuse: a kernel computes them element by element,
    in registers. A scalar operand, or one with size 1 where the result is larger (the op broadcasts
    it, as after `jx-canonicalize`), is read as it is, except by a division: of an operand with fewer
    elements XLA computes what it can once, before the loop over elements, in memory of its own
    that no plan would see (1 / x for a division by x)."""
    if not isinstance(op, jx.PrimOp) or op.primitive.data not in _FUSIBLE or len(op.results) != 1:
        return False
    shape = op.results[0].type.get_shape()
    smaller = op.primitive.data not in _HOISTED
    return all(v.type.get_shape() == shape or (smaller and _broadcasts_to(v.type.get_shape(), shape)) for v in op.operands)


_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor"})
"""Reductions end a fusion, as in XLA: the elementwise chain they read is computed as they read it."""


def _ends_fusion(op: Operation, library: bool = False) -> bool:
    """A reduction, or with `library` a window reduction the library computes (`library_graphs`)."""
    if library and library_graphs.window_reduction(op):
        return True
    return isinstance(op, jx.PrimOp) and op.primitive.data in _REDUCTIONS and len(op.operands) == 1 and len(op.results) == 1


def _joins_readers(op: Operation) -> bool:
    """A broadcast, an iota, random bits or a slice fuse into the elementwise ops that read them, as in
    XLA, where inside a fusion a broadcast is an index into its operand, an iota the index itself,
    random bits a hash of the key and the index (into one fusion only: `_EXPENSIVE`) and a slice an
    offset index into the value it slices (a split's parts, `SplitAsSlices`): never into a
    division or the like, whose smaller operand XLA computes on once, in memory of its own. None
    starts a fusion: what feeds a broadcast is smaller, and computing that again for every element it
    is read at is what XLA avoids."""
    if not isinstance(op, jx.PrimOp) or len(op.results) != 1:
        return False
    return (op.primitive.data, len(op.operands)) in {("broadcast_in_dim", 1), ("iota", 0), ("random_bits", 1), ("slice", 1)}


def _windows_an_argument(op: Operation) -> bool:
    """A `dynamic_slice` of an argument of the function (in a loop's body, through the carried
    positions the body hands on unchanged: the parameters `nnx.scan` runs a layer of each round). It
    joins the elementwise ops that read it, where they broadcast its window too, as XLA reads a
    dynamic slice inside the fusion that reads it: a row of a layer norm's scale or a bias is then no
    value of its own, and the argument it reads lives through the whole function anyway. A window of
    a value the function computes stays an op: the compiled kernel reads only the window of such a
    value, where inside a fusion it would read all of it."""
    if not isinstance(op, jx.PrimOp) or op.primitive.data != "dynamic_slice" or len(op.results) != 1:
        return False
    value = op.operands[0]
    while isinstance(value, BlockArgument):
        owner = value.block.parent_op()
        if isinstance(owner, jx.FuncOp):
            return True
        if not isinstance(owner, jx.WhileOp) or value.block is not owner.body.block \
                or owner.body.block.last_op.operands[value.index] is not value:
            return False
        value = owner.operands[value.index]
    return False


def _is_slice(op: Operation) -> bool:
    """A part of a value, read in place by the fusions it joins (`_joins_readers`)."""
    return isinstance(op, jx.PrimOp) and op.primitive.data == "slice"


def _broadcasts_to(operand: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """A scalar, or an operand of the result's rank with size 1 where the result's size differs."""
    return not operand or len(operand) == len(shape) and all(d in (1, s) for d, s in zip(operand, shape))


_REINTERPRETS = frozenset({"bitcast_convert_type"})
"""Between types of one width, elementwise: XLA fuses it with what it reads and what reads it (a
uniform sample's random bits made floats), where the plan reads it as a view of its operand."""

_FUSIBLE = ELEMENTWISE | _REINTERPRETS

_HOISTED = frozenset({"div", "rem", "pow", "atan2"})
"""Elementwise primitives whose smaller operand XLA turns into something computed once."""


def _readers(op: Operation, block: Block) -> list[Operation]:
    """The ops of `block` that read `op`'s result (a read inside a nested region counts as a read by
    the region op), once each."""
    return list(dict.fromkeys(op_of(use.operation, block) for use in op.results[0].uses))


_EXPENSIVE = frozenset(
    {
        "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cos", "cosh", "digamma",
        "div", "erf", "erf_inv", "erfc", "exp", "exp2", "expm1", "igamma", "igammac", "lgamma", "log",
        "log1p", "logistic", "pow", "rem", "rsqrt", "sin", "sinh", "sqrt", "tan", "tanh",
        "random_bits",
    }
)
"""Elementwise primitives XLA counts as expensive (divisions, powers, transcendentals): it never
computes one of them twice to save memory."""

OWN_PEAK = object()
"""A nested block's budget: its own peak before fusion, for longer lives of values of one aligned slot
(the scalars of a solver's step, whose chains XLA fuses whatever the memory). A longer life of a
larger value may cost a loop's ring a slot, or `jx-schedule` its best order: those leave every step
as full as before."""

MAX_DUPLICATED = 3
"""The longest chain of ops one fusion recomputes from a value other fusions also read."""


@dataclass(frozen=True)
class _Facts:
    """What `_choose` asks of an op of a block, found once: it asks the same of every op in each
    round of cuts, and nothing changes the block until the choice is made. With `library`, the
    library graphs' questions (`library_graphs`); without, all False."""

    fusible: bool
    broadcast: bool
    """A broadcast or an iota, which joins its readers (`_joins_readers`), or a window of an argument
    (`_windows_an_argument`)."""
    window: bool
    """A window of an argument (`_windows_an_argument`), which its readers may broadcast."""
    ends: bool
    """A reduction, or with `library` a window reduction (`_ends_fusion`)."""
    producer: bool
    root: bool
    member: bool
    window_reduction: bool
    readers: tuple[int, ...]
    """The positions of the ops of the block that read the op's one result."""
    shape: tuple[int, ...] | None
    hoisted: bool
    """A primitive whose smaller operand XLA computes on once (`_HOISTED`)."""
    expensive: bool
    """A primitive XLA never computes twice (`_EXPENSIVE`)."""

    @property
    def takes_part(self) -> bool:
        """Whether the op may be in a fusion at all."""
        return self.fusible or self.broadcast or self.producer or self.ends

    @staticmethod
    def of(op: Operation, block: Block, library: bool, position: dict[Operation, int]) -> _Facts:
        single = len(op.results) == 1 and hasattr(op.results[0].type, "get_shape")
        primitive = op.primitive.data if isinstance(op, jx.PrimOp) else None
        window = _windows_an_argument(op)
        return _Facts(
            fusible(op), _joins_readers(op) or window, window, _ends_fusion(op, library),
            library and library_graphs.producer(op), library and library_graphs.root(op),
            library and library_graphs.member(op), library and library_graphs.window_reduction(op),
            tuple(position[r] for r in _readers(op, block)) if len(op.results) == 1 else (),
            _shape(op) if single else None, primitive in _HOISTED, primitive in _EXPENSIVE,
        )

    def reads_elementwise(self, op: _Facts) -> bool:
        """Whether this op, a fusible op or a reduction, reads `op`'s result element by element as
        its fusion computes it: an op of its shape, or a reduction of it (not a convolution that
        joined a library graph, which reads neighbours)."""
        return not self.producer and (self.ends or self.shape == op.shape
                                      or op.window and self.fusible and _broadcasts_to(op.shape or (), self.shape or ()))


class _Lives:
    """Where each value of a block that takes arena memory is read, before fusion and after a choice
    of fusions, and which steps of the block would then hold more bytes than before.

    With `small_free` (the function's block), a small value (`is_small`) counts no bytes: the kernel
    leaves it to XLA, where a longer life costs a buffer of at most `SMALL_BYTES`, and where a step it
    raised cut a chain, the value the cut kept was a large one in the arena (the transformer's last
    layer norm: `x - mean`, 64 KiB, kept because `mean`, 512 bytes, lived a few steps longer). The
    bound of the whole plan still decides (`FusePass.apply`); a nested block's own peak counts every
    value (`OWN_PEAK`)."""

    def __init__(self, block: Block, library: bool = False, small_free: bool = False) -> None:
        self.block = block
        self.ops = list(block.ops)
        position = {op: i for i, op in enumerate(self.ops)}
        # the values read, numbered: `rises` runs in every round of cuts, on numbers alone
        self.values: list[SSAValue] = []
        number: dict[SSAValue, int] = {}
        self.reads: list[list[int]] = []
        for op in self.ops:
            read = dict.fromkeys(self.storage(v) for inner in op.walk() for v in inner.operands)
            read.pop(None, None)
            for v in read:
                if v not in number:
                    number[v] = len(self.values)
                    self.values.append(v)
            self.reads.append([number[v] for v in read])
        self.sizes = [0 if small_free and is_small(v) else _bytes(v) for v in self.values]
        self.end = [0] * len(self.values)
        for i, read in enumerate(self.reads):
            for v in read:
                self.end[v] = i
        self.owner = [-1 if isinstance(v, BlockArgument) else position[v.owner] for v in self.values]
        # each op's one result, as its fusion no longer plans it: its number, or its bytes and no reader
        self.result = [number.get(op.results[0]) if len(op.results) == 1 else None for op in self.ops]
        self.regions = [bool(op.regions) for op in self.ops]
        # values only slices read (a split's parts): the parts, no fewer bytes, are what they outlive
        self.split = [bool(v.uses) and all(_is_slice(use.operation) for use in v.uses) for v in self.values]
        live = [0] * (len(self.ops) + 1)
        for v, last in enumerate(self.end):
            start = max(self.owner[v], 0)
            live[start] += self.sizes[v]
            live[last + 1] -= self.sizes[v]
        self.live = list(accumulate(live))
        self.budget: int | None = None
        self.small_only = False
        self.library = library
        self.facts = [_Facts.of(op, block, library, position) for op in self.ops]

    def within(self, budget: int | object | None) -> _Lives:
        """These lives judged against `budget` (`rises`): the analysis is the same for every budget."""
        lives = copy.copy(self)
        lives.small_only = budget is OWN_PEAK
        lives.budget = max(self.live, default=0) if lives.small_only else budget  # type: ignore[assignment]
        return lives

    def storage(self, value: SSAValue) -> SSAValue | None:
        """The value of this block whose memory `value` is (through views), or None where it takes no
        arena memory here: a constant, an argument of the function, a value of an enclosing block."""
        value = viewed(value)
        if isinstance(value.owner, jx.ConstOp) or not defined_in(value, self.block):
            return None
        if isinstance(value, BlockArgument) and isinstance(self.block.parent_op(), jx.FuncOp):
            return None
        return value

    def rises(self, roots: dict[int, set[int]]) -> set[int]:
        """The moved ops (those `roots` places in fusions other than their own) that make a step that
        stays hold more bytes than it may: each reads a value whose life now reaches such a step. A step
        may hold as many bytes as before or, with a `budget`, up to it: the bound of the plan before
        fusion, which counts no more than every value live at a step (a step with regions, whose own
        peak is not counted here, may hold no more than before). Against its own peak (`OWN_PEAK`), a
        nested block's step holds no more bytes of larger values than before, the longer lives of
        one-slot values aside: those count against the budget alone (CG's `r - alpha * (a @ p)`,
        whose move lengthens the product's life and the scalar `alpha`'s by one step), and so do the
        longer lives of values only slices read, whose parts, no fewer bytes, then take no memory (a
        GRU's gates split from one product). Ops are positions in the block."""
        n = len(self.ops)
        reach = {i: max(into) for i, into in roots.items() if i not in into}  # where each moved op runs
        change = [0] * (n + 1)
        for i in reach:
            v = self.result[i]
            size = _bytes(self.ops[i].results[0]) if v is None else self.sizes[v]
            change[i] -= size
            change[(i if v is None else self.end[v]) + 1] += size
        end: dict[int, int] = {}  # the values whose lives grow: those moved ops read
        for i, last in reach.items():
            for v in self.reads[i]:
                if last > end.get(v, self.end[v]):
                    end[v] = last
        large = change.copy()  # without the longer lives of one-slot values, which `budget` bounds
        for v, last in end.items():
            if self.owner[v] not in reach:
                for counted in (change, large) if self.sizes[v] > SLOT and not self.split[v] else (change,):
                    counted[self.end[v] + 1] += self.sizes[v]
                    counted[last + 1] -= self.sizes[v]
        rising, above, total, total_large = [False] * n, [False] * n, 0, 0  # over the limit; over what it held before
        for i in range(n):
            total += change[i]
            total_large += large[i]
            limit = 0 if self.budget is None or self.regions[i] else self.budget - self.live[i]
            rising[i] = total > limit and i not in reach
            above[i] = total_large > 0 and i not in reach
        rising_before, above_before = list(accumulate(rising, initial=0)), list(accumulate(above, initial=0))
        culprits = set()
        for i, last in reach.items():
            for v in self.reads[i]:
                before = above_before if self.small_only and self.sizes[v] > SLOT and not self.split[v] else rising_before
                if before[last + 1] > before[self.end[v] + 1]:  # such a step in end[v] + 1 .. last
                    culprits.add(i)
                    break
        return culprits


def _shape(op: Operation) -> tuple[int, ...]:
    return op.results[0].type.get_shape()


SLOT = 64
"""The alignment the bound counts values in: the default of the plan."""


def _bytes(value: SSAValue, alignment: int = SLOT) -> int:
    return -(-byte_size(value.type) // alignment) * alignment


def _choose(lives: _Lives, kept: set[int]) -> dict[int, set[int]]:
    """For every fusible op of the block, the fusions it runs in (itself alone where it stays an op of
    its own). Ops are taken last to first, so that the fusions of each reader are known: an op joins
    those of its readers if every reader is a fusible op of its shape in this block or a reduction of
    it, and, where those are several fusions, if it is cheap and the chain recomputed is short. Ops in
    `kept` stay. With `lives.library`, a window reduction ends a fusion too, and a convolution joins the
    one fusion its readers are in where that is a library graph (`library_graphs`): one started by a
    window reduction or a reduction, every other member an op the library computes; the (window)
    reduction that such a convolution alone reads joins it too, with what feeds it."""
    facts = lives.facts
    roots: dict[int, set[int]] = {}
    duplicated: dict[int, int] = {}
    graphs: set[int] = set()  # roots of the library graphs whose members so far the library computes
    for i in range(len(facts) - 1, -1, -1):
        mine = facts[i]
        if not mine.takes_part:
            continue
        roots[i] = {i}
        readers = mine.readers
        if mine.ends:
            if mine.root:
                graphs.add(i)
                # the graph grows on up through the convolution it feeds, if that joined a graph
                if i not in kept and len(readers) == 1 and _joined_graph(readers[0], facts, roots, graphs):
                    roots[i], duplicated[i] = roots[readers[0]], 0
                    graphs.discard(i)
            continue
        # only into readers of its shape (or reductions of it): XLA computes an expression of smaller
        # operands once, before the loop over elements, in memory of its own that no plan would see
        if i in kept or not readers or not all(r in roots and facts[r].reads_elementwise(mine) for r in readers):
            continue
        if mine.broadcast and any(facts[r].hoisted or facts[r].broadcast for r in readers):
            continue
        into = set().union(*(roots[r] for r in readers))
        if mine.producer:
            if len(into) == 1 and into <= graphs:
                roots[i], duplicated[i] = into, 0
            continue
        if lives.library and not mine.member:
            # outside what the library computes: a window reduction reads it from a buffer of XLA's
            if any(facts[r].window_reduction for r in into):
                continue
            graphs -= into
        chain = 1 + max(duplicated.get(r, 0) for r in readers) if len(into) > 1 else 0
        if chain > MAX_DUPLICATED or chain and mine.expensive:
            continue
        roots[i], duplicated[i] = into, chain
    return roots


def _joined_graph(i: int, facts: list[_Facts], roots: dict[int, set[int]], graphs: set[int]) -> bool:
    """Whether op `i` is a convolution that joined a library graph, one of `graphs`."""
    return facts[i].producer and i not in roots.get(i, {i}) and roots[i] <= graphs


Fusions = dict[Operation, set[Operation]]
"""For every fusible op of a block, the roots of the fusions it runs in (itself alone where it stays
an op of its own)."""


def _fusions(lives: _Lives, retry: bool = True) -> Fusions:
    """The fusions of `lives.block` (not of nested blocks).

    A moved op's operands are read where its fusions run, later than before: where that makes a step
    that stays hold more bytes than before any fusion (the bytes of the moved ops' results, no longer
    planned, less those of the operands whose lives grow), the chain of moved ops from such a reader
    is cut at its last link, which stays where it is as a fusion of its own (so the chain moves no
    farther than that op), and the choice is made again. A cut blames every move whose operands live
    across a step that rises, not only those that raise it (a layer norm's `x - mean` moved into
    `(x - mean) * rsqrt(var)`, whose `mean` lives one step longer while the residual add before it,
    moved into four fusions, fills every step with its operands): with `retry`, once no step rises
    each cut is undone in turn, first cut first, and stays undone where still no step rises."""
    kept: set[int] = set()
    cuts: list[int] = []
    while culprits := lives.rises(roots := _choose(lives, kept)):
        new = {_last_moved(i, roots, lives.facts) for i in culprits} - kept
        kept |= new
        cuts.extend(sorted(new))
    for i in cuts if retry else ():
        if not lives.rises(trial := _choose(lives, kept - {i})):
            kept.discard(i)
            roots = trial
    ops = lives.ops
    return {ops[i]: {ops[r] for r in into} for i, into in roots.items()}


def _make_fusions(ops: list[Operation], roots: Fusions) -> None:
    """Each group of `roots` of more than one op (of the block whose ops are `ops`, in order) made a
    `jx.fused` op in place of its root, and the ops moved into fusions erased."""
    groups: dict[Operation, list[Operation]] = {}
    for op in ops:
        for root in roots.get(op, ()):
            groups.setdefault(root, []).append(op)
    for root, group in groups.items():
        if len(group) > 1:
            _fuse(root, group)
    for op in reversed(ops):
        if op in roots and op not in roots[op]:
            Rewriter.erase_op(op)


def _last_moved(i: int, roots: dict[int, set[int]], facts: list[_Facts]) -> int:
    """The moved op that op `i`'s result reaches its fusion through: following readers that move too,
    the last one, read by the fusion's root."""
    while moving := [r for r in facts[i].readers if r in roots and r not in roots[r]]:
        i = moving[0]
    return i


def _fuse(root: Operation, group: list[Operation]) -> None:
    inside = {r for op in group for r in op.results}
    operands: list[SSAValue] = []
    for op in group:
        operands.extend(v for v in op.operands if v not in inside and v not in operands)
    body = Block(arg_types=[v.type for v in operands])
    mapping: dict[SSAValue, SSAValue] = dict(zip(operands, body.args))
    for op in group:
        clone = op.clone(value_mapper=mapping)
        body.add_op(clone)
        mapping.update(zip(op.results, clone.results))
    body.add_op(jx.YieldOp(*(mapping[r] for r in root.results)))
    fused = jx.FusedOp(operands, [r.type for r in root.results], Region(body))
    for result in fused.results:
        result.name_hint = root.results[result.index].name_hint
    Rewriter.replace_op(root, fused)


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Groups elementwise chains into `jx.fused` ops in every block, loop bodies and branches included;
    `library=true` fuses as XLA's CPU backend does, which hands convolutions and window reductions
    with the elementwise ops around them to YNNPACK as one graph (`library_graphs`)."""

    name = "jx-fuse"

    library: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Of two choices of fusions (of a module with one function), the one whose plan has the lower
        bound, if it is no higher than the bound before: the fusions within that bound, or those that
        leave every step at most as full as before (fewer fusions may plan lower); else the same two
        choices with no cut undone (`_fusions`' `retry`: a block's steps bound its own peak, not
        what its loop's ring or schedule may cost); else none. Each choice is made on `op` and tried
        on a copy of it; the blocks are analysed once for all of them (`_Choices`)."""
        choices = _Choices(op, self.library)
        if sum(isinstance(inner, jx.FuncOp) for inner in op.ops) != 1:
            _make_all(choices.of(None, retry=True))
            return
        before = module_bound(op)
        for retry in (True, False):
            trials = {budget: choices.of(budget, retry) for budget in (before, None)}
            bounds = {before: module_bound(choices.tried(trials[before]))}
            same = trials[None] == trials[before]  # no cut either way: one plan
            bounds[None] = bounds[before] if same else module_bound(choices.tried(trials[None]))
            budget = min(bounds, key=lambda b: bounds[b])  # the first of equals: the bound before
            if bounds[budget] <= before:
                _make_all(trials[budget])
                return


class _Choices:
    """The fusions of every block of a module (loop bodies and branches included) for a budget of the
    function's own block; each nested block's own peak bounds the longer lives of its one-slot
    values (`OWN_PEAK`), whatever the budget, so its fusions are found once."""

    def __init__(self, module: ModuleOp, library: bool = False) -> None:
        self.module = module
        self.blocks = [
            (block, isinstance(inner, jx.FuncOp), _Lives(block, library, small_free=isinstance(inner, jx.FuncOp)))
            for inner in module.walk() if not isinstance(inner, jx.FusedOp)
            for region in inner.regions for block in region.blocks
        ]
        self.nested: dict[tuple[Block, bool], Fusions] = {}

    def of(self, budget: int | None, retry: bool) -> list[tuple[list[Operation], Fusions]]:
        """Every block's ops and fusions, the function's own block within `budget`."""
        chosen = []
        for block, in_function, lives in self.blocks:
            if in_function:
                fusions = _fusions(lives.within(budget), retry)
            elif (fusions := self.nested.get((block, retry))) is None:
                fusions = self.nested[block, retry] = _fusions(lives.within(OWN_PEAK), retry)
            chosen.append((lives.ops, fusions))
        return chosen

    def tried(self, chosen: list[tuple[list[Operation], Fusions]]) -> ModuleOp:
        """A copy of the module with the fusions `chosen` made."""
        copied = self.module.clone()
        same = dict(zip(self.module.walk(), copied.walk()))
        _make_all([([same[op] for op in ops], {same[op]: {same[r] for r in roots} for op, roots in fusions.items()})
                   for ops, fusions in chosen])
        return copied


def _make_all(chosen: list[tuple[list[Operation], Fusions]]) -> None:
    for ops, fusions in chosen:
        _make_fusions(ops, fusions)
