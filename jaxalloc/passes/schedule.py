"""`jx-schedule`: reorder the ops of every block to lower the max-live bound.

A jaxpr lists its equations in the order tracing met them: a backward pass may compute a gradient
long before it is read, a forward pass may start every branch of a sum before finishing one. XLA
reorders before it assigns buffers (a memory-aware list scheduler, DFS post-order from the
outputs, and keeps the better). So does this pass, with one more judge: each order is applied to
the whole module and planned, and the order whose rows have the lowest max-live bound wins; the
traced order is one of the candidates, so the bound never rises.

An order keeps every data dependence (an op with regions reads whatever its regions read from the
block around it) and the relative order of the ops with an effect (and of region ops that hold
one). Constants cost nothing: they live outside the arena.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from jaxalloc.allocators import Problem
from jaxalloc.allocators.bound import max_live
from jaxalloc.dialects import jx
from jaxalloc.frontend.types import byte_size
from jaxalloc.planning.assignment import plan_function, plan_rows
from jaxalloc.analysis.inplace import is_view


@dataclass(frozen=True)
class SchedulePass(ModulePass):
    """Reorders every block of every function as the order with the lowest max-live bound does."""

    name = "jx-schedule"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        schedule(op)


SEARCH_OPS = 4000
"""The ops the block-by-block search may plan in all: each of its trials plans the whole module, so
a module of more than `SEARCH_OPS / budget` ops gets fewer trials (a diffrax gradient of 2,000 ops,
two). Of the 102 programs of the corpus, the library corpus and the benchmarks, none had its bound lowered by a trial."""


def schedule(module: ModuleOp, alignment: int = 64, budget: int = 8) -> dict[str, int]:
    """Reorder `module` in place by the best order found; returns the bound (bytes) of each candidate
    order applied to every block, and of the best found (`best`), so that callers can report what
    the pass gained. The search starts from the best of those and then, block by block, keeps another
    order for one block where that lowers the bound, within `budget` more plans, and fewer for a
    large module (`SEARCH_OPS`)."""
    blocks = list(_blocks(module))
    budget = min(budget, SEARCH_OPS // max(1, sum(1 for _ in module.walk())))
    names = list(ORDERS)
    graphs = [_Dependences(block) for block in blocks]  # no order of a block changes its dependences
    orders: dict[tuple[int, str], tuple[Operation, ...]] = {}
    # the bound of each module order planned: two choices often order every block alike (a block's
    # orders agree where it is a chain), and a plan costs as much as the rest of the pass
    planned: dict[tuple[tuple[Operation, ...], ...], int] = {}

    def order(b: int, name: str) -> tuple[Operation, ...]:
        if (b, name) not in orders:
            orders[b, name] = tuple(ORDERS[name](graphs[b]))
        return orders[b, name]

    def reorder(choice: list[str]) -> None:
        """Each of `blocks` in place in the order `choice` names for it."""
        for b, (block, name) in enumerate(zip(blocks, choice)):
            terminator = block.last_op
            for op in order(b, name):
                op.detach()
                block.insert_op_before(op, terminator)

    def bound_of(choice: list[str]) -> int:
        key = tuple(order(b, name) for b, name in enumerate(choice))
        if key not in planned:
            reorder(choice)
            planned[key] = module_bound(module, alignment)
        return planned[key]

    bounds = {name: bound_of([name] * len(blocks)) for name in names}
    start = min(names, key=lambda name: (bounds[name], names.index(name)))
    choice, best = [start] * len(blocks), bounds[start]
    trials = iter(range(budget))
    for b in range(len(blocks)):
        for name in names:
            if name == choice[b] or next(trials, None) is None:
                continue
            tried = choice[:b] + [name] + choice[b + 1 :]
            bound = bound_of(tried)
            if bound < best:
                choice, best = tried, bound
    reorder(choice)
    return {**bounds, "best": best}


def module_bound(module: ModuleOp, alignment: int = 64, allocator: str | None = None) -> int:
    """Max-live of the rows the planner makes of `module`'s function, outputs inside the arena (an
    order that computes an output early holds its memory as long as any other value's). No address
    changes it: the buffers are left unplaced unless an `allocator` is named."""
    func = next(op for op in module.ops if isinstance(op, jx.FuncOp))
    plan = plan_function(func, allocator=allocator, alignment=alignment, include_outputs=True)
    rows = plan_rows(func, plan)
    return max_live(Problem.from_intervals([r.size for r in rows], [r.start for r in rows], [r.end for r in rows], alignment=alignment))


def _blocks(module: ModuleOp) -> Iterator[Block]:
    """Every block whose ops are scheduled: functions, loop conditions and bodies, case branches (a
    fused op's body runs as one kernel: its order is not memory)."""
    for op in module.walk():
        if isinstance(op, jx.FuncOp | jx.WhileOp | jx.CaseOp):
            for region in op.regions:
                yield from region.blocks


class _Dependences:
    """A block's ops as a dependence graph: what each op waits for, who reads each value."""

    def __init__(self, block: Block) -> None:
        self.ops = [op for op in block.ops if op is not block.last_op]
        self.index = {op: i for i, op in enumerate(self.ops)}
        self.live_out = dict.fromkeys(block.last_op.operands)
        self.reads: list[list[SSAValue]] = []
        self.readers: dict[SSAValue, list[Operation]] = {}
        self.after: list[set[int]] = []
        self.effects: list[int] = []
        """The ops with an effect (or holding one), in order: each waits for the one before."""
        for i, op in enumerate(self.ops):
            reads = list(dict.fromkeys(v for v in _reads(op) if v.owner in self.index))
            self.reads.append(reads)
            for v in reads:
                self.readers.setdefault(v, []).append(op)
            after = {self.index[v.owner] for v in reads}
            if jx.has_effect(op):
                if self.effects:
                    after.add(self.effects[-1])
                self.effects.append(i)
            self.after.append(after)

    def size(self, value: SSAValue) -> int:
        """Bytes the value takes of its own: none for a view or a constant."""
        if isinstance(value.owner, jx.ConstOp) or is_view(value.owner):
            return 0
        return byte_size(value.type)


def _reads(op: Operation) -> Iterator[SSAValue]:
    """The values `op` reads, those its regions read from outside it included."""
    yield from op.operands
    for inner in op.walk():
        if inner is not op:
            for v in inner.operands:
                if not op.is_ancestor(v.owner if isinstance(v.owner, Operation) else v.owner.parent_op()):
                    yield v


def traced(graph: _Dependences) -> list[Operation]:
    """The order the jaxpr gave."""
    return list(graph.ops)


def memory_aware(graph: _Dependences) -> list[Operation]:
    """List scheduling: of the ops whose operands are ready, the one that frees the most bytes
    less what it allocates goes next (ties: the traced order). An op frees the operands it is the
    last reader of; scores change only when a value is down to its last reader."""
    n = len(graph.ops)
    waiting = [len(after) for after in graph.after]
    successors: list[list[int]] = [[] for _ in range(n)]
    for i, after in enumerate(graph.after):
        for j in after:
            successors[j].append(i)
    remaining = {v: len(readers) for v, readers in graph.readers.items()}
    score = [-sum(graph.size(r) for r in op.results) for op in graph.ops]
    for v, readers in graph.readers.items():
        if len(readers) == 1 and v not in graph.live_out:
            score[graph.index[readers[0]]] += graph.size(v)
    heap = [(-score[i], i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(heap)
    done = [False] * n
    order = []
    while heap:
        negative, i = heapq.heappop(heap)
        if done[i] or -negative != score[i]:
            continue
        done[i] = True
        order.append(graph.ops[i])
        for v in graph.reads[i]:
            remaining[v] -= 1
            if remaining[v] == 1 and v not in graph.live_out:
                last = next(r for r in graph.readers[v] if not done[graph.index[r]])
                k = graph.index[last]
                score[k] += graph.size(v)
                if waiting[k] == 0:
                    heapq.heappush(heap, (-score[k], k))
        for k in successors[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(heap, (-score[k], k))
    return order


def depth_first(graph: _Dependences) -> list[Operation]:
    """DFS post-order from the block's results and its ops with effects (in their order): each op
    runs just before its first reader needs it, what it waits for first."""
    n = len(graph.ops)
    placed = [False] * n
    order = []
    roots = [graph.index[v.owner] for v in graph.live_out if v.owner in graph.index]
    roots += graph.effects
    roots += range(n)  # what nothing reads, last
    for root in roots:
        stack = [(root, iter(sorted(graph.after[root])))]
        if placed[root]:
            continue
        placed[root] = True
        while stack:
            i, pending = stack[-1]
            j = next((j for j in pending if not placed[j]), None)
            if j is None:
                stack.pop()
                order.append(graph.ops[i])
            else:
                placed[j] = True
                stack.append((j, iter(sorted(graph.after[j]))))
    return order


ORDERS: dict[str, Callable[[_Dependences], list[Operation]]] = {
    "traced": traced,
    "memory-aware": memory_aware,
    "depth-first": depth_first,
}
"""The candidate orders, by name."""
