"""Buffer assignment on whole programs: every plan passes the independent checker, and the
multi-view cases get the repeat lengths and arena sizes NNC's scheme gives them."""

import functools

import jax.numpy as jnp
import pytest
from jax import lax
from xdsl.dialects.builtin import ModuleOp

import jaxalloc
from jaxalloc.allocators import ALLOCATORS
from jaxalloc.api import DEFAULT_PASSES
from jaxalloc.checks.plan_check import OverBudget, check_planned
from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import NextAttr
from jaxalloc.errors import UnsupportedProgramError
from jaxalloc.planning import replanning
from jaxalloc.planning.assignment import Carry, plan_function
from jaxalloc.planning.plan import make_plan
from jaxalloc.testing.corpus import PROGRAMS
from jaxalloc.testing.differential import AS_TRACED, check_program, check_random_program
from jaxalloc.testing.random_programs import random_program

MiB = 1 << 20


def planned_rows(fn, *args, allocator="nnc", alignment=64):
    """Plan `fn` and check it both ways (the static checker on the planned IR, the rows); the block
    plan, rows and bound."""
    return module_rows(jaxalloc.planned(fn, passes=AS_TRACED).lower(*args), allocator, alignment)


def module_rows(module, allocator="nnc", alignment=64):
    """`planned_rows` of a module as traced (which planning leaves as it is)."""
    func = next(iter(module.ops))
    plan = plan_function(func, allocator=allocator, alignment=alignment)
    checked = make_plan(module, allocator, alignment)
    assert checked.arena_bytes == plan.size
    checked.check()
    assert max((r.offset + r.size for r in checked.buffers), default=0) <= plan.size
    return func, plan, checked.buffers, checked.lower_bound


@functools.cache
def _traced(program) -> ModuleOp:
    """A program of the corpus, or a random program's seed, as traced: traced once for every allocator."""
    fn, args = random_program(program) if isinstance(program, int) else (program.fn, program.make_args())
    return jaxalloc.planned(fn, passes=AS_TRACED).lower(*args)


@pytest.mark.parametrize("allocator", list(ALLOCATORS))
def test_every_corpus_program_plans_validly(allocator):
    for program in PROGRAMS:
        module_rows(_traced(program), allocator)


@pytest.mark.parametrize("allocator", list(ALLOCATORS))
def test_random_programs_plan_validly(allocator):
    for seed in range(30):
        module_rows(_traced(seed), allocator)


@pytest.mark.parametrize("seed", [11774, 19426, 36255, 41307])
def test_random_programs_whose_plans_the_checker_refused_plan_validly(seed):
    """11774: a borrower that may keep a lent value hands it on to its followers, whose values the
    lender's toggle ring must avoid too. 19426: a position whose next value is an inner loop's
    result, its ring in the body's own memory, not in the next view, must not toggle (read where it
    lies, its bytes were written over in the next round). 36255: a case result whose memory holds a
    ring past its first slot (`rings_apart`) does not take the buffer of a value the loop reads in
    place in round 0 (the other ring wrote over it). 41307: a case result that a loop's ring of one
    slot lies in is as large as that slot, which holds an inner loop's ring of two. The checker
    refused these plans."""
    fn, args = random_program(seed)
    jaxalloc.planned(fn).plan(*args, include_outputs=True).check()


def test_a_chain_of_ten_elementwise_ops_on_4_mib_fits_in_8_mib():
    def chain(x):
        for _ in range(10):
            x = jnp.sin(x) * 1.5
        return x

    _, plan, _, _ = planned_rows(chain, jnp.ones(MiB))
    assert plan.size <= 8 * MiB
    # with the output in the arena too: sin(x) cannot overwrite the argument, everything after runs in place
    func = next(iter(jaxalloc.planned(chain).lower(jnp.ones(MiB)).ops))
    assert plan_function(func, include_outputs=True).size == 4 * MiB


def carries_of(plan):
    (carries,) = plan.carries.values()
    return carries


def test_x_equals_tanh_x_w_in_a_scan_needs_two_slots_whatever_the_length():
    def scan_tanh(n):
        return lambda x, w: lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=n)[0]

    x, w = jnp.ones((512, 512)), jnp.ones((512, 512)) / 512  # a 1 MiB carry
    arenas = []
    for n in (10, 1000):
        _, plan, _, _ = planned_rows(scan_tanh(n), x, w)
        counter, carry = carries_of(plan)
        assert carry.repeat == 2
        arenas.append(plan.size)
    assert arenas[0] == arenas[1] >= 2 * MiB


def test_scan_ys_buffer_is_updated_in_place_in_one_slot():
    _, plan, _, _ = planned_rows(lambda x: lax.scan(lambda c, _: (c + 1.0, c * 2.0), x, None, length=8)[1], jnp.ones(256))
    counter, carry, ys = carries_of(plan)
    assert ys.repeat == 1 and ys.initial == ()


def test_a_case_block_is_as_large_as_its_largest_branch():
    def big(x):
        a, b, c = x * 2.0, x * 3.0, x * 4.0  # three 1 MiB temporaries live at once
        return (a * b * c).sum(0)

    def small(x):
        return jnp.sin(x).sum(0)  # one

    def branches(p, x):
        return lax.cond(p, big, small, x)

    func, plan, rows, _ = planned_rows(branches, True, jnp.ones((512, 512)))
    (case,) = [op for op in func.walk() if isinstance(op, jx.CaseOp)]
    offset, (small_plan, big_plan) = plan.regions[case]
    assert big_plan.size == 3 * MiB and small_plan.size == MiB
    assert plan.size < 4 * MiB


def test_plan_object_of_a_planned_function(tmp_path):
    def mlp(x, w1, w2):
        return jnp.tanh(jnp.tanh(x @ w1) @ w2).sum()

    args = (jnp.ones((64, 128)), jnp.ones((128, 256)), jnp.ones((256, 32)))
    plan = make_plan(jaxalloc.planned(mlp).lower(*args))  # the outputs outside, the matrix products inside
    plan.check()
    assert isinstance(plan, jaxalloc.Plan) and plan.allocator == "nnc"
    # x @ w1 is 64 KiB and folds its tanh in place; @ w2 gives 8 KiB while the 64 KiB value is live
    assert plan.lower_bound == 64 * 1024 + 8 * 1024 == plan.arena_bytes
    assert {r.name for r in plan.buffers} >= {"d", "f"}
    plan.to_csv(tmp_path / "plan.csv")
    header, *lines = (tmp_path / "plan.csv").read_text().splitlines()
    assert header == "tensor_name,size,offset,start_time,end_time" and len(lines) == len(plan.buffers)
    plan.plot(tmp_path / "plan.png")
    assert (tmp_path / "plan.png").stat().st_size > 1000
    assert jaxalloc.planned(mlp).plan(*args, include_outputs=True).arena_bytes >= plan.arena_bytes
    assert f"mem.arena = #mem.arena<bytes = {plan.arena_bytes}>" in str(plan.module)
    assert "mem.slot" not in str(jaxalloc.planned(mlp).lower(*args))  # the traced module is left as it was


def test_a_rotation_of_four_carries_gets_four_slots_and_copies_nothing():
    def rotate(a, b, c, d):
        return lax.fori_loop(0, 6, lambda i, s: (s[1], s[2], s[3], s[0] * 2.0), (a, b, c, d))

    func, plan, rows, _ = planned_rows(rotate, *[jnp.ones(256)] * 4)
    *_, a, b, c, d = carries_of(plan)
    assert [x.repeat for x in (a, b, c, d)] == [4, 4, 4, 4]
    assert jaxalloc.planned(rotate).plan(*[jnp.ones(256)] * 4).check().copies == ()
    # a reads the init operands of a, b, c and d in rounds 0-3 (positions 1-4), then the ring
    assert a.initial == (1, 2, 3, 4) and d.initial == (4,)
    (loop,) = plan.carries
    assert len({r.offset for r in rows if r.repeat == 4}) == 4  # one ring of four 1 KiB slots


@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_an_inner_rotation_in_an_outer_loop_is_read_where_it_lies(count):
    """The inner loop's one ring holds every carried position's value, in the outer loop's next view
    of one position. The other positions read theirs in that ring too, toggling where that position
    does: nothing is moved over a value still to be read, and nothing is copied."""

    def rotations(x):
        def outer(_, carry):
            return lax.fori_loop(0, 5, lambda _, c: (*c[1:], c[0] * 0.5 + jnp.sin(c[1])), carry)

        return lax.fori_loop(0, 3, outer, tuple(x + k for k in range(count)))

    planned = check_program(rotations, jnp.arange(4.0), mode="checked")
    assert planned.last_run.copied_bytes == 0
    assert planned.plan(jnp.arange(4.0)).check().copies == ()


def _rotations_of(kind: str, count: int):
    """An outer loop carrying `count` values through an inner loop of five rounds that rotates them:
    a `while_loop` with a counter, a `fori_loop` computing two of them, or inside a `while_loop`."""

    def rotate(c):
        return (*c[1:], c[0] * 0.5 + jnp.sin(c[-1]))

    def inner(carry):
        if kind == "inner while":
            return lax.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, rotate(s[1])), (0, carry))[1]
        if kind == "two computed":
            return lax.fori_loop(0, 5, lambda _, c: (*c[2:], c[0] * 0.5 + jnp.sin(c[1]), c[1] - 0.1 * c[0]), carry)
        return lax.fori_loop(0, 5, lambda _, c: rotate(c), carry)

    def rotations(x):
        init = tuple(x + k for k in range(count))
        if kind == "outer while":
            return lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, inner(s[1])), (0, init))[1]
        return lax.fori_loop(0, 3, lambda _, c: inner(c), init)

    return rotations


@pytest.mark.parametrize("mode", ["checked", "compiled"])
@pytest.mark.parametrize("count", [2, 4])
@pytest.mark.parametrize("kind", ["inner while", "two computed", "outer while"])
def test_inner_rotations_of_every_kind_are_read_where_they_lie(kind, count, mode):
    rotations = _rotations_of(kind, count)
    planned = check_program(rotations, jnp.arange(4.0), mode=mode, name=f"{kind} of {count}")
    assert planned.last_run.copied_bytes == 0


@pytest.mark.parametrize("mode", ["checked", "compiled"])
@pytest.mark.parametrize("init", ["argument", "value read after the loop"])
@pytest.mark.parametrize("counts", [[2, 0, 1, 0], [0, 3, 0, 1]])
def test_an_inner_loop_of_data_dependent_rounds_updates_the_outer_carry_where_it_lies(init, mode, counts):
    """The inner loop may run no rounds, so its result is wherever its init operand was: the outer
    loop's carried value, which dies at the inner loop, is read in place by the inner ring's first
    round, and the ring's one slot is the outer loop's next view, computed in place every round.
    In the outer loop's first round that value is the outer loop's init operand (the caller's
    argument, or an arena value read after the loop), read where it is. With the outer result an
    output outside the arena, the ring is outside too; inside it, if the inner loop runs no round
    in the outer loop's first, the outer position still holds the init operand where it is: the
    position toggles within one slot, and nothing moves between rounds on any path."""

    def nested(x, counts):
        def outer(carry, count):
            return lax.fori_loop(0, count, lambda _, c: jnp.log1p(jnp.abs(c)), carry), None

        if init == "argument":
            return lax.scan(outer, x, counts)[0]
        kept = jnp.floor(x) * 2.0
        result = lax.scan(outer, kept, counts)[0]
        return result, kept - result

    args = jnp.arange(4.0), jnp.array(counts)
    planned = check_program(nested, *args, mode=mode)
    assert planned.last_run.copied_bytes == 0
    inside = planned.plan(*args, include_outputs=True)
    assert inside.check().copies == ()
    outer_loop = next(op for op in inside.module.walk() if isinstance(op, jx.WhileOp))
    assert outer_loop.attributes["mem.views"].data[-1].repeat == 1  # a toggle within one slot
    _, plan, _, _ = planned_rows(nested, *args)
    ((outer, carries),) = plan.carries.items()
    body = plan.regions[outer][1][1]
    ((_, inner),) = body.carries.items()
    assert carries[-1].repeat == 1 and inner[-1] == Carry(1, ())


def _copy_free_plan(fn, args, mode):
    """Run `fn` planned in `mode` with no bytes copied, and return its plan with its outputs inside
    the arena, where the static check finds no copy either."""
    planned = check_program(fn, *args, mode=mode)
    assert planned.last_run.copied_bytes == 0
    inside = planned.plan(*args, include_outputs=True)
    assert inside.check().copies == ()
    return inside


def _copy_free_loop_views(fn, args, mode):
    """`_copy_free_plan`'s multi-views of the first loop."""
    loop = next(op for op in _copy_free_plan(fn, args, mode).module.walk() if isinstance(op, jx.WhileOp))
    return loop.attributes["mem.views"].data


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_body_yielding_a_reshaped_literal_hands_it_on_where_it_is(mode):
    """The body yields `jnp.full((1,), 0.5)`, which `jx-canonicalize` makes a reshape of a literal:
    a view of a constant, outside the arena. The rounds read it where it is, as they read a literal
    (it was given a ring slot and copied there every round before)."""

    def fn(x):
        return lax.fori_loop(0, 5, lambda i, c: jnp.full((1,), 0.5, jnp.float32), x)

    views = _copy_free_loop_views(fn, (jnp.ones(1),), mode)
    assert views[1].yielded.data and not views[1].slots.data


def _toggling_in_a_case_of_a_loop(rounds: str):
    """A loop whose branch runs an inner loop that may hand its carried value back (a toggle ring),
    its rounds `known` or an argument."""

    def fn(x, flags, n):
        def outer(i, c):
            def inner(j, d):
                return lax.cond(flags[j], lambda d: jnp.clip(d, -0.5, 0.75), lambda d: d, d)

            inner_rounds = 2 if rounds == "known" else n
            return lax.cond(flags[i + 1], lambda c: lax.fori_loop(0, inner_rounds, inner, c), lambda c: c * 2.0, c)

        return lax.fori_loop(0, 3, outer, x)

    return fn


_TOGGLING_ARGS = (jnp.arange(256.0), jnp.array([True, True, False, True]), jnp.int32(2))
"""Arguments of `_toggling_in_a_case_of_a_loop`'s program on which the inner loop runs."""


@pytest.mark.parametrize("mode", ["checked", "compiled"])
@pytest.mark.parametrize("rounds, flags", [
    ("known", (True, True, False, True)), ("known", (False, False, True, False)), ("an argument", (True, True, False, True)),
])
def test_an_inner_toggle_ring_in_a_case_lies_in_the_enclosing_loops_next_view(rounds, flags, mode):
    """A branch runs an inner loop whose rounds either clip the carried value in place or hand it
    back, so the loop's result may be `c` itself: the inner ring toggles. The case result, and the
    inner ring in it, lie in the outer loop's next view, which toggles too, the case result a view
    of `c` where nothing was computed (48 bytes a call were copied into the outer ring before).
    Where the inner loop's rounds are an argument, the checker's first walk widens the guards of
    its exit rounds into one and refuses the plan; a walk with them grouped (`REFINED_GROUPS`) accepts it."""

    fn = _toggling_in_a_case_of_a_loop(rounds)
    args = (jnp.arange(4.0), jnp.array(flags), jnp.int32(2))
    inside = _copy_free_plan(fn, args, mode)
    outer, inner = [op for op in inside.module.walk() if isinstance(op, jx.WhileOp)][:2]
    assert outer.attributes["mem.views"].data[-1].toggles
    ring = inner.attributes["mem.views"].data[-1]
    assert ring.toggles and isinstance(ring.slots.data[0], NextAttr)


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_case_result_holding_a_branchs_ring_of_two_slots_lies_in_a_toggling_next_view(mode):
    """A branch runs an inner loop of two rounds, whose ring of two slots is the case result's
    memory; the other branch hands the carried value on. The case result lies in the outer loop's
    next view, which toggles between two slots, each as large as the inner ring (the result was
    copied into the outer ring before, 64 bytes a round; random program 1442)."""

    def fn(x, flags):
        def outer(i, c):
            return lax.cond(flags[i], lambda c: lax.fori_loop(0, 2, lambda _, d: jnp.cumsum(d), c), lambda c: c, c)

        return lax.fori_loop(0, 4, outer, x)

    args = jnp.arange(4.0), jnp.array([True, False, True, True])
    views = _copy_free_loop_views(fn, args, mode)
    assert views[-1].toggles and views[-1].repeat == 2 and views[-1].slots.data[0].size.data == 128


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_an_inner_loops_init_operand_that_its_rounds_read_takes_a_free_slot_of_the_next_view(mode):
    """The inner loop, of data-dependent rounds, starts from `u = c.T`, which every round reads, so
    its ring cannot start in `u`'s memory, and after no round its result is `u`. `u` takes the second
    free slot of the outer loop's next view and the ring the first, the outer position toggling
    among three slots (64 bytes were copied into the outer ring in the rounds that ran the inner
    loop before; random program 6720)."""

    def fn(x, counts):
        def outer(c, n):
            u = c.T
            return lax.fori_loop(0, n, lambda _, d: jnp.maximum(d - u, 0.1) * 0.5, u), None

        return lax.scan(outer, x, counts)[0]

    args = jnp.arange(16.0).reshape(4, 4), jnp.array([2, 0, 1, 3])
    views = _copy_free_loop_views(fn, args, mode)
    assert views[-1].toggles and views[-1].repeat == 3


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_an_inner_ring_whose_round_reads_a_constant_in_place_lies_in_the_next_view(mode):
    """The inner loop of data-dependent rounds hands on its counter's previous value, so after one
    round its result is the counter's init operand, a constant, read where it is (outside the
    arena). Its ring lies in the outer loop's next view, which toggles between two slots as large
    as the ring (64 bytes were copied into the outer ring in the rounds that ran the inner loop
    before; random programs 10811, 10957, 16288)."""

    def fn(x, counts):
        def outer(c, k):
            _, previous = lax.while_loop(lambda s: s[0] < k, lambda s: (s[0] + 1.5, s[0]), (jnp.float32(0.5), c))
            return previous, None

        return lax.scan(outer, x, counts)[0]

    args = jnp.float32(3.0), jnp.array([2.0, 0.0, 1.0, 3.0], jnp.float32)
    views = _copy_free_loop_views(fn, args, mode)
    assert views[-1].toggles and views[-1].repeat == 2 and views[-1].slots.data[0].size.data == 128


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_ring_nested_two_loops_deep_fits_the_slots_cut_for_it(mode):
    """The innermost loop's ring of two slots lies in the middle loop's next view, whose ring of two
    lies in the outer loop's: each outer slot holds both middle slots, each of those both inner
    ones. The outer slots were sized for the middle ring alone, so an inner slot was 32 bytes for a
    36-byte value (random program 22453, which the checker refused)."""

    def fn(x, n):
        def outer(carry):
            i, m = carry

            def middle(m, _):
                return lax.scan(lambda k, _: (jnp.sort(k, axis=1), None), m, None, length=4)[0], None

            return i + 1, lax.scan(middle, m, None, length=3)[0]

        return lax.while_loop(lambda carry: carry[0] < n, outer, (0, x))[1]

    args = (jnp.arange(9, dtype=jnp.int32).reshape(3, 3)[::-1], jnp.int32(2))
    _copy_free_loop_views(fn, args, mode)


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_an_init_operand_a_rotated_ring_in_a_case_result_reads_takes_a_slot_past_the_ring(mode):
    """A branch's loop rotates `(a, b) -> (b, f(b))` from `(u, x)`, `u` computed in the branch and
    read by every round: its result is `u` after no round, `x` after one, and a slot of the ring of
    two in the case result's memory after more. `u` takes a third slot of that memory, and the
    result is a view of wherever its value lies (12 bytes were copied into the result before, but
    after two rounds; random program 9956)."""

    def fn(x, n, flag):
        def rotating(x):
            u = jnp.floor(x)
            def body(s):
                return s[0] + 1, s[2], jnp.clip(u, -2.0, 2.0) + s[2]

            return lax.while_loop(lambda s: s[0] < n, body, (0, u, x))[1]

        return lax.cond(flag, rotating, lambda x: x, x)

    for rounds in (0, 1, 3):
        args = jnp.array([1.5, -2.5, 3.5]), jnp.int32(rounds), jnp.bool_(True)
        inside = _copy_free_plan(fn, args, mode)
    case = next(op for op in inside.module.walk() if isinstance(op, jx.CaseOp))
    (result,) = case.attributes["mem.slots"].data
    floor = next(op for op in inside.module.walk() if isinstance(op, jx.PrimOp) and op.primitive.data == "floor")
    assert floor.attributes["mem.slot"].offset.data == result.offset.data + 2 * result.size.data
    assert list(case.attributes["mem.phi"].data[0].get_values()) == [0, 1]


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_value_a_toggle_ring_in_a_case_result_may_be_handed_back_takes_a_slot_past_the_ring(mode):
    """A branch computes `u` and runs a loop whose next value is `u` or computed from the current
    one: the loop toggles, and its result may be `u` where it lies. `u` takes a third slot of the
    case result's memory, past the toggle ring's two, and the result is a view of wherever its
    value lies (12 bytes were copied into the result before, after no round and after two;
    random program 49632)."""

    def fn(x, n, flags):
        def looping(x):
            u = jnp.floor(x)
            def body(j, d):
                return lax.cond(flags[j], lambda d: jnp.clip(d, -2.0, 2.0) + 1.0, lambda d: u, d)

            return lax.fori_loop(0, n, body, x)

        return lax.cond(flags[0], looping, lambda x: x, x)

    for rounds, flags in [(0, [1, 1, 0]), (1, [1, 0, 0]), (2, [1, 1, 0]), (3, [1, 0, 1])]:
        args = jnp.array([1.5, -2.5, 3.5]), jnp.int32(rounds), jnp.array(flags, bool)
        inside = _copy_free_plan(fn, args, mode)
    case = next(op for op in inside.module.walk() if isinstance(op, jx.CaseOp))
    (result,) = case.attributes["mem.slots"].data
    floor = next(op for op in inside.module.walk() if isinstance(op, jx.PrimOp) and op.primitive.data == "floor")
    assert floor.attributes["mem.slot"].offset.data == result.offset.data + 2 * result.size.data


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_an_origin_whose_value_a_borrower_may_keep_toggles_around_it_beside_its_follower(mode):
    """`b`'s next value `d` is yielded at `c` too, and `a`'s next value is an inner swap's result:
    `a` itself or `b`, which `a` may then keep for good. `b` toggles among a slot for its own value,
    one for `c`'s, one for `a`'s and one free, and `a` reads `b`'s value where it lies (`a`'s
    next value was copied into its ring every round before, 192 bytes a call; random program 7764)."""

    def fn(x, y, n):
        def body(s):
            i, a, b, c = s
            p, q = lax.fori_loop(0, n, lambda j, pq: (pq[1], pq[0]), (a, b))
            d = jnp.clip(p, -9, 9)
            return i + 1, q, d, d

        return lax.while_loop(lambda s: s[0] < 3, body, (0, x, y, x))[3]

    x = jnp.arange(16, dtype=jnp.int32).reshape(4, 4)
    for n in (0, 1, 2):
        views = _copy_free_loop_views(fn, (x, x * 3, jnp.int32(n)), mode)
    assert [(v.repeat, v.toggles) for v in views[1:]] == [(2, True), (4, True), (0, False)]


def _copy_free_with_the_inner_ring_in_the_next_view(fn, mode):
    """Run `fn(x, y, n)` planned in `mode` for 0, 1 and 3 inner rounds with no bytes copied, check
    that the inner loop's ring is the outer loop's next view of its position 1, and return the
    outer loop's multi-views."""
    for n in (0, 1, 3):
        inside = _copy_free_plan(fn, (jnp.arange(4.0), jnp.arange(4.0) * 3, jnp.int32(n)), mode)
    outer, inner = [op for op in inside.module.walk() if isinstance(op, jx.WhileOp)][:2]
    views = outer.attributes["mem.views"].data
    inner_slots = [slot for ring in inner.attributes["mem.views"].data[1:] for slot in ring.slots.data]
    assert inner_slots and all(isinstance(slot, NextAttr) and slot.position.data == 1 for slot in inner_slots)
    return views


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_an_init_operand_an_inner_rotation_reads_in_place_takes_a_free_slot_of_the_next_view(mode):
    """The inner loop rotates `(r, s) -> (s, |s| - 1)` from `(u, b)`, `u = -a` computed in the outer
    body: after no round its result `r` is `u`, after one it is `b`. `u` takes a free slot of `a`'s
    next view and the inner ring the first, `a` toggling among four slots (`b` follows it), so `r`
    is in the view however many rounds run (64 bytes were copied into the outer ring every call
    before; random programs 15878, 16950)."""

    def fn(x, y, n):
        def outer(i, s):
            a, b = s
            u = -a
            def body(t):
                return t[0] + 1, t[2], jnp.abs(t[2]) - 1.0

            return lax.while_loop(lambda t: t[0] < n, body, (0, u, b))[1], a

        return lax.fori_loop(0, 4, outer, (x, y))

    views = _copy_free_with_the_inner_ring_in_the_next_view(fn, mode)
    assert views[1].toggles and views[1].repeat == 4


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_an_init_operand_of_an_inner_rotation_that_always_ends_in_its_ring_takes_no_slot(mode):
    """As above, but the inner loop runs three rounds, a known count past its first rounds: `r` is
    always in the inner ring, so `u` takes no free slot of `a`'s next view, which has one slot less
    (random programs 14249, 14305, 18532)."""

    def fn(x, y):
        def outer(i, s):
            a, b = s
            def body(j, t):
                return t[1], jnp.abs(t[1]) - 1.0

            return lax.fori_loop(0, 3, body, (-a, b))[0], a

        return lax.fori_loop(0, 4, outer, (x, y))

    views = _copy_free_loop_views(fn, (jnp.arange(4.0), jnp.arange(4.0) * 3), mode)
    assert views[1].toggles and views[1].repeat == 3


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_an_inner_ring_whose_first_rounds_read_values_no_round_computes_lies_in_the_next_view(mode):
    """`b` is handed `w` from outside every round and `c` is handed `b`: no round computes either,
    so they stay where they lie. The inner rotation starts from `(c, b)`, so `a`'s next value is `b`
    after no round, `c` after one and a ring slot after more. The inner ring lies in `a`'s next
    view, which toggles, reading `b` or `c` where it lies (48 bytes were copied into `a`'s ring
    every call before; random program 1115)."""

    def fn(x, y, n):
        w = jnp.sqrt(jnp.abs(y) + 1.0)

        def middle(j, s):
            a, b, c = s
            def body(t):
                return t[0] + 1, jnp.abs(t[1]) + 1.0, t[1]

            return lax.while_loop(lambda t: t[0] < n, body, (0, c, b))[2], w, b

        return lax.fori_loop(0, 3, middle, (x, y, y))[0]

    views = _copy_free_with_the_inner_ring_in_the_next_view(fn, mode)
    assert views[1].toggles and views[1].repeat == 2


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_chain_of_cases_handing_on_an_inner_result_that_may_be_the_carried_value_lies_in_the_next_view(mode):
    """`r` is the inner loop's result, `b` itself after no round; two conditionals may hand it on to
    the next round. Each conditional takes the memory of the value it hands on (`views_outside`:
    `r` may be only `b` besides its ring), so the inner ring and both results lie in `b`'s next
    view, which toggles around `b` (16 to 48 bytes were copied into `b`'s ring every call before;
    random program 14312)."""

    def fn(x, n, k):
        def outer(i, b):
            r = lax.while_loop(lambda t: t[0] < n, lambda t: (t[0] + 1, jnp.abs(t[1]) - 1.0), (0, b))[1]
            p = k > i
            c = lax.cond(p, lambda v: v * 0.5, lambda v: v, r)
            return lax.cond(p, lambda v: -v, lambda v: v, c)

        return lax.fori_loop(0, 3, outer, x)

    for n in (0, 1, 3):
        inside = _copy_free_plan(fn, (jnp.arange(4.0), jnp.int32(n), jnp.int32(1)), mode)
        outer = next(op for op in inside.module.walk() if isinstance(op, jx.WhileOp))
        assert outer.attributes["mem.views"].data[2].toggles
    inner, *cases = [op for op in inside.module.walk() if isinstance(op, (jx.WhileOp, jx.CaseOp))][1:]
    held = [*inner.attributes["mem.views"].data[1].slots.data, *(case.attributes["mem.slots"].data[0] for case in cases)]
    assert len(cases) == 2 and all(isinstance(slot, NextAttr) and slot.position.data == 2 for slot in held)


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_branch_handing_on_a_rotation_puts_the_ring_its_result_lies_in_in_the_case_result(mode):
    """The computing branch yields `c21`, which the rounds hand `c23`, a value of `c22`'s ring (it
    holds the rotation's values). The case result takes that ring, and the init operand read in
    place before it takes a slot past the ring, so the branch's value is already in the result's
    memory (4 bytes a call were copied into the case result before; random program 29330)."""

    def fn(a, p):
        def computing(x):
            y = x / (1.0 + x * x)

            def body(i, carry):
                c21, c22, c23 = carry

                def inner(c, _):
                    return (jnp.clip(c[1] - c22, -1.0, 1.0), c[0], jnp.cos(c[2])), None

                d = lax.scan(inner, (jnp.tanh(x), c22, c23), None, length=3)[0][0]
                return c23, d, d

            return lax.fori_loop(0, 3, body, (y * y, y, x))[0]

        r = lax.cond(p > 0, computing, lambda x: x, a)
        return a - r, r

    for p in (1, 0):
        args = jnp.float32(0.7), jnp.int32(p)
        planned = check_program(fn, *args, mode=mode)
        assert planned.last_run.copied_bytes == 0
        assert planned.plan(*args, include_outputs=True).check().copies == ()


@pytest.mark.parametrize("seed", [21909])
def test_an_inner_toggle_ring_holding_another_positions_values_lies_in_the_enclosing_next_view(seed):
    """Three loops deep: the middle loop's toggle ring holds another position's values too (a
    rotation hands them on), and the innermost ring lies in the middle loop's next view. That ring
    now lies in the outer loop's next view as a ring of one position does, where it lay apart and
    the outer body copied the middle loop's result into its next view every round (random programs
    21909, and 19426 until its innermost loop, of one round, became its body). The checker's budget
    still guards the plans whose paths such rings multiply (random program 1628: planned again
    without them)."""
    fn, args = random_program(seed)
    plan = jaxalloc.planned(fn).plan(*args, include_outputs=True)
    assert plan.check().copies == ()
    views = [v for op in plan.module.walk() if isinstance(op, jx.WhileOp) for v in op.attributes["mem.views"].data]
    assert any(v.toggles and v.held and any(isinstance(slot, NextAttr) for slot in v.slots.data) for v in views)
    for mode in ("checked", "compiled"):
        assert check_program(fn, *args, mode=mode).last_run.copied_bytes == 0


def _case_of_a_chain_of_cases(x, i, j, k):
    """A case whose taken branch yields the last of a chain of cases: the first computes its result
    or hands `q` on, the second computes from the first's result (writing its own memory before
    its last read of it) or hands that on, the third negates the second's or hands it on."""
    q = x * 2

    def taken(q):
        a = lax.switch(i, [lambda q: q + 1, lambda q: q, lambda q: q - 1], q)
        b = lax.cond(j > 0, lambda a: a, lambda a: jnp.cumsum(a % 3, axis=1) + a, a)
        return lax.cond(k > 0, lambda b: -b, lambda b: b, b)

    return lax.cond(jnp.sum(q) > 0, taken, lambda q: q, q)


@pytest.mark.parametrize("i, j, k", [(0, 1, 0), (1, 0, 0)])
def test_a_case_result_that_may_be_any_value_of_a_chain_of_cases_holds_each_in_a_slot_of_its_own(i, j, k):
    """The outer result may be the third case's value, the second's or the first's (each handing the
    one before on): each of them is computed into a slot of the outer result's memory of its own,
    so the result is a view of whichever it is. Before, only the second case's result went there,
    and the taken branch copied the first's into the result (random program 34185)."""
    args = jnp.arange(6, dtype=jnp.int32).reshape(2, 3), i, j, k
    plan = jaxalloc.planned(_case_of_a_chain_of_cases).plan(*args, include_outputs=True)
    assert plan.check().copies == ()
    for mode in ("checked", "compiled"):
        assert check_program(_case_of_a_chain_of_cases, *args, mode=mode).last_run.copied_bytes == 0
    program = random_program(34185)
    assert jaxalloc.planned(program.fn).plan(*program.args, include_outputs=True).check().copies == ()


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_chain_of_cases_in_a_case_in_a_case_holds_each_value_in_a_slot_of_the_outer_result(mode):
    """The inner case's result may be the chain's last value, its second or its first (each case
    handing the one before on), and it lies in the memory of the two cases around it: each value
    takes a slot of that memory, so the inner result is a view of whichever it is. Before, only a
    result in no enclosing case result's memory held them, and the chain's values were copied
    into the result (12 bytes; random program 39496, in `ONCE_COPYING_ON_A_PATH`)."""

    def fn(x, k):
        def chain(x):
            a = lax.cond(k > 0, lambda v: v + 1, lambda v: v, x)
            b = lax.cond(k > 1, lambda v: v // 2, lambda v: v, a)
            return lax.switch(jnp.clip(k - 2, 0, 2), [lambda v: v, lambda v: v + 1, lambda v: v // 2], b)

        return lax.cond(k >= 0, lambda x: lax.cond(k < 5, chain, lambda v: v, x), lambda v: v, x)

    for k in range(-1, 6):
        _copy_free_plan(fn, (jnp.array([7, -5, 3], jnp.int32), jnp.int32(k)), mode)


def _loop_of_a_chain_of_cases(x, p):
    """A loop whose next value is an argument or the last of a chain of cases from its carried
    value: the first computes from it or hands it on, the second negates the first's or hands it
    on, the third computes from the second's (writing its own memory before its last read of it)."""

    def body(i, c):
        def chain(c):
            a = lax.cond(p > i, lambda v: v, lambda v: jnp.cumsum(v % 3, axis=1) + v, c)
            b = lax.cond(p > 2 * i, lambda v: v, lambda v: -v, a)
            return lax.cond(p > 3 * i, lambda v: v, lambda v: jnp.cumsum(v % 3, axis=1) + v, b)

        return lax.cond(jnp.sum(c) > p, chain, lambda c: x, c)

    return lax.fori_loop(0, 3, body, x * 2)


@pytest.mark.parametrize("p", [0, 5])
def test_a_next_value_that_may_be_any_value_of_a_chain_of_cases_holds_each_in_a_free_slot_of_the_toggle_ring(p):
    """The loop's next value may be the third case's value or the second's, computed before the
    third's last read of it: the second's goes to the toggle ring's second free slot
    (`#mem.next<k, 1>`), the third's to the first. Before, the second's had memory of its own in the
    branch, and the loop copied it into its ring every round it was the next value (random program
    47274, once its inner loop of at most one round became a case)."""
    args = jnp.arange(6, dtype=jnp.int32).reshape(2, 3), p
    plan = jaxalloc.planned(_loop_of_a_chain_of_cases).plan(*args, include_outputs=True)
    assert plan.check().copies == ()
    assert "#mem.next<2, 1>" in str(plan.module)
    for mode in ("checked", "compiled"):
        assert check_program(_loop_of_a_chain_of_cases, *args, mode=mode).last_run.copied_bytes == 0


def _handed_a_rotation_s_value(a):
    """Position 0's next value is position 1's carried value, its own negated, or its own; position
    1's next value is computed, and position 2 holds it a round longer (a rotation)."""

    def body(i, carry):
        c0, c1, c2 = carry
        k = jnp.clip(i, 0, 3)
        return lax.switch(k, [lambda: c1, lambda: c1, lambda: -c0, lambda: c0]), jnp.clip(c2, -2.0, 2.0), c1

    return lax.fori_loop(1, 4, body, (a * 2, a, a * a))[0]


def test_a_position_handed_a_rotation_s_value_that_it_may_keep_makes_the_rotation_toggle():
    """Position 0 may take position 1's value and keep it (its branches hand back its own), so
    position 1, the rotation's origin, toggles around it. Position 1's next value was computed in
    place of position 2's (the oldest of its ring), so it counted as not computed into its own next
    view, could not toggle, and position 0 copied the value it took every round (random program
    21996)."""
    args = (jnp.float32(0.5),)
    plan = jaxalloc.planned(_handed_a_rotation_s_value).plan(*args, include_outputs=True)
    assert plan.check().copies == ()
    (loop,) = [op for op in plan.module.walk() if isinstance(op, jx.WhileOp)]
    views = loop.attributes["mem.views"].data
    assert views[3].toggles and views[2].toggles and 2 in views[3].held  # (two counters, c0, c1, c2)
    for mode in ("checked", "compiled"):
        assert check_program(_handed_a_rotation_s_value, *args, mode=mode).last_run.copied_bytes == 0


def test_two_positions_that_take_each_other_s_values_both_toggle():
    """Two positions whose next values are results of one case, each of which may be the other's
    carried value, or one value a branch computes into the one's next view and yields at both:
    both toggle, each around the other's values (random program 19048, which copied 6 times)."""
    fn, args = random_program(19048)
    assert jaxalloc.planned(fn).plan(*args, include_outputs=True).check().copies == ()
    for mode in ("checked", "compiled"):
        assert check_program(fn, *args, mode=mode).last_run.copied_bytes == 0


def _handed_one_of_its_carried_values(x, y, n):
    """Each round picks one of the carried values, in one branch through an inner loop of at most
    two rounds that hands the other on; position 1 takes position 0's."""

    def body(i, carry):
        a, b = carry
        def inner():
            return lax.while_loop(lambda s: (s[0] < 2) & (jnp.sum(s[1]) > 0), lambda s: (s[0] + 1, a), (0, b))[1]

        return lax.switch(i % 3, [inner, lambda: a, lambda: b]), a

    a, b = lax.fori_loop(0, n, body, (x * 2, y + 1))
    return a * b


@pytest.mark.parametrize("n", [0, 1, 5])
def test_positions_handed_only_carried_values_through_cases_and_inner_loops_keep_no_ring(n):
    """No round computes either position's next value: the case and the inner loop only hand on
    carried values. Both positions read what the body yields where it lies (`yielded`, no slots),
    which is always one of the init operands. They were rings of computed values, a toggle ring of
    three slots that was never written, and the checker's paths through them multiplied past its
    budget (random program 31062, refused)."""
    args = jnp.arange(4, dtype=jnp.float32) - 1, jnp.arange(4, dtype=jnp.float32), n
    plan = jaxalloc.planned(_handed_one_of_its_carried_values).plan(*args, include_outputs=True)
    assert plan.check().copies == ()
    loop = next(op for op in plan.module.walk() if isinstance(op, jx.WhileOp))  # (counter, bound, a, b)
    assert [(v.yielded.data, v.slots.data) for v in loop.attributes["mem.views"].data[2:]] == [(1, ())] * 2
    for mode in ("checked", "compiled"):
        assert check_program(_handed_one_of_its_carried_values, *args, mode=mode).last_run.copied_bytes == 0


def _handed_a_value_in_another_position_s_free_slot(x):
    """Each round computes `u` from `q`; a branch hands `q`, `u` or a value it computes on to both
    positions, in different orders: `u` lies in a free slot of `q`'s toggle ring."""
    def body(i, carry):
        p, q = carry
        u = ~q
        return lax.switch(i % 4, [lambda: (q, u), lambda: (u, q), lambda: (u, ~q), lambda: (q, q)])

    return lax.fori_loop(0, 4, body, (x, x))


def test_a_position_handed_a_value_in_another_position_s_free_slot_borrows_it():
    """`p` reads its value where it lies, in `q`'s ring, which keeps clear of it, where it was
    copied into `p`'s own slot every round (random program 37651)."""
    x = jnp.array([True, False, True])
    plan = jaxalloc.planned(_handed_a_value_in_another_position_s_free_slot).plan(x, include_outputs=True)
    assert plan.check().copies == ()
    loop = next(op for op in plan.module.walk() if isinstance(op, jx.WhileOp))
    views = loop.attributes["mem.views"].data
    assert views[-2].toggles and len(views) - 2 in views[-1].held
    for mode in ("checked", "compiled"):
        assert check_program(_handed_a_value_in_another_position_s_free_slot, x, mode=mode).last_run.copied_bytes == 0


def _handing_on_an_inner_loop_s_result(v, w):
    """A position's next value is a case result: one branch hands on an inner loop's result (two
    rounds, a ring of one slot), the other computes from it."""
    e = jnp.sum(v) * 0.25

    def body(i, carry):
        c, log = carry
        _, r = lax.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, w[jnp.clip(s[0] + 2, 0, 3)]), (0, e))
        return lax.cond(jnp.max(v) > 0.5, lambda: r, lambda: r / (1.0 + jnp.abs(r))), log.at[i].set(c)

    return lax.fori_loop(0, 3, body, (e, jnp.zeros(3)))


@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_a_branch_handing_on_an_inner_loop_s_result_puts_its_ring_in_the_next_view(scale):
    """The inner loop's ring lies in the position's first free slot, the case result's own memory
    in the next one: the position toggles, reading its value where it is. Before, the ring lay in the
    body's own memory and the branch handing it on copied it into the next view every round (random
    program 35171)."""
    args = jnp.arange(3.0) * scale, jnp.arange(4.0)
    plan = jaxalloc.planned(_handing_on_an_inner_loop_s_result).plan(*args, include_outputs=True)
    assert plan.check().copies == ()
    case = next(op for op in plan.module.walk() if isinstance(op, jx.CaseOp))
    assert case.attributes["mem.slots"].data[0].nth.data == 1
    for mode in ("checked", "compiled"):
        assert check_program(_handing_on_an_inner_loop_s_result, *args, mode=mode).last_run.copied_bytes == 0


def _inner_ring_of_unknown_rounds(x, n):
    """Each round runs an inner loop of 0 or 2 rounds (`n`) that yields one value at two positions:
    the first starts from a value the round computes, the second from the outer carried value, and
    the outer loop's next value is the second's result."""

    def body(i, q):
        u = q / (1.0 + q * q)

        def step(s):
            y = jnp.exp(jnp.clip(s[1], -4.0, 1.0))
            return s[0] + 1, y, y

        return lax.while_loop(lambda s: (s[0] < 2) & (n > 0), step, (0, u, q))[2]

    return lax.fori_loop(0, 4, body, x)


@pytest.mark.parametrize("n", [1, 0])
def test_an_inner_ring_of_unknown_rounds_that_two_positions_hold_lies_in_the_next_view(n):
    """The inner ring holds both inner positions' values; it lies in the outer position's next view,
    and the first position's init operand, which its rounds read in place, in another free slot of
    it, so the outer position, which toggles, finds its value where the inner loop left it: in the
    ring, or its own carried value where the inner loop ran no round. Before, the ring lay in the
    body's memory and the round copied the result into the next view (random program 34436)."""
    args = jnp.ones((4, 4)) * 0.5, n
    plan = jaxalloc.planned(_inner_ring_of_unknown_rounds).plan(*args, include_outputs=True)
    assert plan.check().copies == ()
    for mode in ("checked", "compiled"):
        assert check_program(_inner_ring_of_unknown_rounds, *args, mode=mode).last_run.copied_bytes == 0


def _inner_loop_from_another_position_s_next_value(a, n):
    """Position `k`'s next value is an inner loop's result, of 0 or 2 rounds (`n`), whose init
    operand is `o`, position `m`'s next value."""

    def body(j, carry):
        k, m = carry
        o = k[:, ::-1]
        _, w = lax.while_loop(lambda s: (s[0] < 2) & (n > 0),
                              lambda s: (s[0] + 1, jnp.clip((s[1] @ s[1]) * 0.5, -2.0, 2.0)), (0, o))
        return w, o

    return lax.fori_loop(0, 3, body, (a, a))[1]


@pytest.mark.parametrize("n", [1, 0])
def test_an_inner_ring_whose_init_operand_is_another_position_s_next_value_lies_in_the_next_view(n):
    """Where the inner loop runs no round, `k`'s next value is `o`, in `m`'s next view: `k` borrows
    it there and toggles, `m` lends it, and the inner ring lies in `k`'s next view. Before, the ring
    lay in the body's memory and the round copied the result into the next view (random program
    33739)."""
    args = jnp.arange(16.0).reshape(4, 4) / 16, n
    plan = jaxalloc.planned(_inner_loop_from_another_position_s_next_value).plan(*args, include_outputs=True)
    assert plan.check().copies == ()
    for mode in ("checked", "compiled"):
        assert check_program(_inner_loop_from_another_position_s_next_value, *args, mode=mode).last_run.copied_bytes == 0


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_toggle_ring_that_may_be_handed_back_a_value_of_the_arena_stays_in_it_where_its_result_is_an_output(mode):
    """A branch may hand the carried value back, so the position toggles, and its first round reads
    its init operand where it lies: in the arena, where the body reads it too. The loop's result is
    an output, so its ring was XLA's loop buffer, and the round that handed the init operand back
    read it out of the arena into it; the ring stays in the arena instead, as a ring of several
    slots does, and the output is read out of it once the loop ends."""

    def toggling(a):
        x = jnp.tanh(a)
        return lax.fori_loop(0, 3, lambda i, c: lax.cond(c.sum() > 0, lambda v: v, lambda v: v * x, c), x)

    a = jnp.ones(256)
    planned = check_program(toggling, a, mode=mode)
    assert planned.last_run.copied_bytes == 0
    plan = planned.plan(a)
    assert plan.check().copies == ()
    loop = next(op for op in plan.module.walk() if isinstance(op, jx.WhileOp))
    views = loop.attributes["mem.views"].data[-1]
    assert views.toggles and len(views.slots.data) == 1


@pytest.mark.parametrize("mode", ["checked", "compiled"])
@pytest.mark.parametrize("seed", [1418, 1442, 1618])
def test_loops_whose_results_are_outputs_copy_nothing_with_the_small_values_placed(seed, mode):
    """Random programs whose loop results are outputs outside the arena, planned after the default
    passes with their small values in the arena. 1418 and 1442: a toggle ring in a branch, in the
    memory of a case result that is an output, may be handed back its init operand, which lies in
    the arena (a value of the function's block): the case result stays in the arena. 1618: an outer
    loop's rotation (`(k, l, m) -> (k + 1, m, inner(l))`) whose results are outputs has a ring of
    two slots, in the arena, but was planned as if it were XLA's loop buffer: the carried value
    `l` was not `unsettled`, so the inner loop's ring began in `l`'s slot, in the body's memory,
    and its result was copied into the outer ring every round."""
    program = random_program(seed)
    planned = check_random_program(program, mode=mode, passes=DEFAULT_PASSES)
    assert planned.plan(*program.args).check().copies == ()


@pytest.mark.parametrize("seed", [18524, 31144])
def test_a_case_result_holds_the_ring_of_each_position_its_loop_result_may_lie_in(seed):
    """A branch yields a loop's result into the case result's memory, and the result's position
    toggles, borrowing another position's values: its value may lie in that position's ring too.
    Both rings lie in the case result's memory, the borrowed one past the first, so the case result
    is where the value lies whichever ring holds it. Before, the borrowed ring lay in the branch's
    memory and the branch copied the value out (18524: 2 copies; 31144: the inner loop's counter is
    the position lent)."""
    fn, args = random_program(seed)
    assert jaxalloc.planned(fn).plan(*args, include_outputs=True).check().copies == ()
    for mode in ("checked", "compiled"):
        assert check_program(fn, *args, mode=mode).last_run.copied_bytes == 0


def _rotating_with_an_inner_ring(x):
    """An outer loop rotates (a, b, c) -> (b, d, a), so each `d` is read for three rounds, at three
    positions; `d` is an inner loop's result, from a ring of two slots (the inner loop rotates too)."""

    def outer(i, carry):
        a, b, c = carry
        d, _ = lax.fori_loop(0, 4, lambda j, pair: (pair[1], jnp.abs(pair[1]) - 1.0), (c, a))
        return b, d, a

    return lax.fori_loop(0, 3, outer, (x, x + 1.0, x + 2.0))


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_an_inner_ring_lies_in_the_next_view_of_a_position_other_positions_hand_on(mode):
    """`d`'s position is followed by two others, so the plan with inner rings only in lone positions'
    next views copied `d` into its slot every round (192 bytes a call); the plan with followed rings
    (`assign`) puts the inner ring in that next view, a slot more, and nothing moves."""
    args = (jnp.arange(16.0).reshape(4, 4),)
    outer_views = _copy_free_loop_views(_rotating_with_an_inner_ring, args, mode)
    assert outer_views[2].slots.data  # d's ring (position 0 counts the rounds)
    inside = check_program(_rotating_with_an_inner_ring, *args, mode=mode).plan(*args, include_outputs=True)
    inner = [op for op in inside.module.walk() if isinstance(op, jx.WhileOp)][1]
    inner_slots = [slot for ring in inner.attributes["mem.views"].data[1:] for slot in ring.slots.data]
    assert inner_slots and all(isinstance(slot, NextAttr) and slot.position.data == 2 for slot in inner_slots)


def test_a_plan_with_followed_rings_the_checker_gives_up_on_is_left_for_the_plan_without(monkeypatch):
    """Over its budget the checker neither accepts nor refuses a plan (`OverBudget`); `assign` then
    keeps the plan with inner rings in lone positions' next views alone, which copies and runs right."""
    monkeypatch.setattr(replanning, "FOLLOWED_RINGS_BUDGET", -(10**9))
    args = (jnp.arange(256.0).reshape(4, 64),)
    planned = check_program(_rotating_with_an_inner_ring, *args, mode="checked")
    assert planned.last_run.copied_bytes == 3 * 1024
    inside = planned.plan(*args, include_outputs=True)
    assert len(inside.check().copies) == 3
    func = next(iter(inside.module.ops))
    with pytest.raises(OverBudget, match="worked past its budget of 10"):
        check_planned(func, budget=10)


def test_a_plan_the_checker_gives_up_on_is_planned_again_without_inner_toggle_rings_in_next_views(monkeypatch):
    """Past `CHECK_BUDGET` the loop is planned again with the inner toggle ring in slots of its own,
    not in the enclosing loop's next view (random program 18921 never finished checking with it
    there): that plan is checked to the end, runs right and copies the inner loop's result."""
    fn, args = _toggling_in_a_case_of_a_loop("known"), _TOGGLING_ARGS
    monkeypatch.setattr(replanning, "CHECK_BUDGET", 0)
    planned = check_program(fn, *args, mode="checked")
    assert planned.last_run.copied_bytes > 0
    inside = planned.plan(*args, include_outputs=True)
    inner = [op for op in inside.module.walk() if isinstance(op, jx.WhileOp)][1]
    assert not any(isinstance(slot, NextAttr) for views in inner.attributes["mem.views"].data for slot in views.slots.data)
    assert inside.check().copies


def test_a_plan_the_checker_gives_up_on_again_is_planned_without_values_apart_in_a_toggle_ring(monkeypatch):
    """Past `POOLED_CHECK_BUDGET` as well, the loop is planned once more without the chain's values
    in further free slots of its toggle ring (`pools`; random program 29636's paths multiplied with
    their places past `LAST_CHECK_BUDGET`): that plan copies them into the ring where a round takes
    the chain's path, and runs right."""
    args = jnp.arange(6, dtype=jnp.int32).reshape(2, 3), 0
    monkeypatch.setattr(replanning, "CHECK_BUDGET", 0)
    monkeypatch.setattr(replanning, "POOLED_CHECK_BUDGET", 0)
    plan = jaxalloc.planned(_loop_of_a_chain_of_cases).plan(*args, include_outputs=True)
    assert "#mem.next<2, 1>" not in str(plan.module) and plan.check().copies
    for p in (0, 5):
        check_program(_loop_of_a_chain_of_cases, args[0], p, mode="compiled")


def test_a_plan_the_checker_gives_up_on_to_the_end_is_not_used(monkeypatch):
    """Past `LAST_CHECK_BUDGET` too, planning stops with a one-line error that says what to do
    (random program 23940's check had not ended after 14 GB of memory)."""
    fn, args = _toggling_in_a_case_of_a_loop("known"), _TOGGLING_ARGS
    monkeypatch.setattr(replanning, "CHECK_BUDGET", 0)
    monkeypatch.setattr(replanning, "POOLED_CHECK_BUDGET", 0)
    monkeypatch.setattr(replanning, "LAST_CHECK_BUDGET", 0)
    with pytest.raises(UnsupportedProgramError, match="gave up on the plan of @fn after 0 units of work.*mode='eager'"):
        jaxalloc.planned(fn).plan(*args)


@pytest.mark.parametrize("mode", ["checked", "compiled"])
@pytest.mark.parametrize("lender, slots", [("fresh", 2), ("reads the borrower", 3)])
@pytest.mark.parametrize("borrower", ["inner loop", "case"])
def test_a_position_handed_another_ones_carried_value_reads_it_in_that_ones_ring(borrower, lender, slots, mode):
    """`a`'s next value may be `b`'s carried value: an inner loop that runs no round hands back its
    init operand `b`, or a branch hands `b` on. `a` toggles, reading that value where it lies, and
    `b`'s ring keeps each value a round longer: two slots where `b`'s next value is born after `a`'s
    last read, three where it is computed from `a`. Nothing moves between rounds (48-80 bytes a
    call were copied into `a`'s slot before)."""

    def fn(x, steps):
        def outer(carry, step):
            a, b = carry
            if borrower == "inner loop":
                a_next = lax.fori_loop(0, step, lambda _, c: jnp.log1p(jnp.abs(c)), b)
            else:
                a_next = lax.cond(step > 1, lambda: b, lambda: jnp.sin(a))
            b_next = jnp.cos(b) * jnp.sum(a) if lender == "fresh" else jnp.tanh(a)
            return (a_next, b_next), None

        return lax.scan(outer, (x, x * 2.0), steps)[0]

    args = jnp.arange(4.0), jnp.array([2, 0, 1, 0, 3])
    _, a_views, b_views = _copy_free_loop_views(fn, args, mode)
    assert a_views.toggles and a_views.repeat == 2 and b_views.repeat == slots


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_position_handed_another_ones_next_value_reads_it_in_that_ones_ring(mode):
    """`b`'s next value may be `a`'s next value `u`, which a branch hands on: `u` is `a`'s carried
    value in the next round, lent to `b` as that would be. `b` toggles, reading `u` in `a`'s ring,
    which keeps each value as long as a lent carried value: three slots, one more than reading the
    next value needs (32 bytes a call were copied into `b`'s slot before; random program 7269)."""

    def fn(x, steps):
        def outer(carry, step):
            a, b = carry
            u = jnp.exp(jnp.clip(a, -4.0, 1.0))
            return (u, lax.cond(step > 1, lambda: u, lambda: u * 0.5 + jnp.sum(b))), None

        return lax.scan(outer, (x, x * 2.0), steps)[0]

    args = jnp.arange(4.0), jnp.array([2, 0, 1, 0, 3])
    _, a_views, b_views = _copy_free_loop_views(fn, args, mode)
    assert b_views.toggles and a_views.repeat == 3 and not a_views.toggles


def _keeping_a_lent_value(x, flags):
    """A branch hands `b` either its own value or `a`'s, so `b` may keep a value of `a`'s for any
    number of rounds."""

    def body(carry, flag):
        a, b = carry
        b_next = lax.cond(flag, lambda: a, lambda: b)
        return (jnp.sin(a) + b_next, b_next), None

    return lax.scan(body, (x, x * 2.0), flags)[0]


_KEEPING_ARGS = (jnp.arange(256.0), jnp.array([True, False, False, True, True, False]))


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_lent_value_the_borrower_may_keep_for_good_makes_the_lender_toggle_around_it(mode):
    """`b` may keep a value of `a`'s ring for any number of rounds, which no ring of `a`'s that
    follows the round count can keep. `a` toggles instead, among three slots, its next value going
    where neither `a`'s nor `b`'s value is (64 bytes a round were copied into `b`'s slot before;
    random program 9976)."""
    _, a_views, b_views = _copy_free_loop_views(_keeping_a_lent_value, _KEEPING_ARGS, mode)
    assert a_views.toggles and a_views.held == (2,) and a_views.repeat == 3 and b_views.toggles


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_value_a_rotation_hands_on_that_a_borrower_may_keep_makes_its_origin_toggle(mode):
    """`c` may take `b`, which holds `a`'s value of the round before, and keep it: `a`'s ring then
    toggles among four slots, around the values of `b` and `c`, which read theirs where they lie
    (96 bytes a call were copied before; random programs 10854 and 14905)."""

    def fn(x, flags):
        def body(carry, flag):
            a, b, c = carry
            c_next = lax.cond(flag, lambda: b, lambda: c)
            return (jnp.sin(a) + c_next, a, c_next), None

        return lax.scan(body, (x, x * 2.0, x * 3.0), flags)[0]

    _, a_views, b_views, c_views = _copy_free_loop_views(fn, _KEEPING_ARGS, mode)
    assert a_views.toggles and a_views.held == (2, 3) and a_views.repeat == 4
    assert b_views.yielded.data and not b_views.slots.data and c_views.toggles


def test_a_plan_the_checker_gives_up_on_is_planned_again_without_toggles_around_kept_values(monkeypatch):
    """Past `CHECK_BUDGET` the loop is planned again with `a` in a ring of its own round count and
    `b`'s next value copied (random program 9091's check ran past `LAST_CHECK_BUDGET` with it)."""
    monkeypatch.setattr(replanning, "CHECK_BUDGET", 0)
    planned = check_program(_keeping_a_lent_value, *_KEEPING_ARGS, mode="checked")
    assert planned.last_run.copied_bytes > 0
    inside = planned.plan(*_KEEPING_ARGS, include_outputs=True)
    loop = next(op for op in inside.module.walk() if isinstance(op, jx.WhileOp))
    assert not loop.attributes["mem.views"].data[1].toggles and inside.check().copies


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_lent_value_the_borrower_passes_on_stays_in_the_lenders_ring_as_long(mode):
    """`a` may be handed `b`'s carried value (an inner loop of no rounds) and passes it on to `a_old`
    for one more round: `b`'s ring keeps each value two rounds longer, and as `b`'s next value is
    computed from `a_old`, one slot more (four), where a ring of one round longer would be written
    over while `a_old` still held the value (112 bytes a call were copied before)."""

    def fn(x, steps):
        def outer(carry, step):
            a, a_old, b = carry
            a_next = lax.fori_loop(0, step, lambda _, c: jnp.tanh(c) * 0.9, b)
            return (a_next, a, jnp.tanh(b) * 0.5 + 0.25 * jnp.tanh(a_old)), None

        return lax.scan(outer, (x, x + 1.0, x * 2.0), steps)[0]

    args = jnp.arange(4.0), jnp.array([2, 0, 1, 0, 3, 0, 0])
    _, a_views, _, b_views = _copy_free_loop_views(fn, args, mode)
    assert a_views.toggles and a_views.held == (2,) and b_views.repeat == 4


@pytest.mark.parametrize("mode", ["checked", "compiled"])
@pytest.mark.parametrize("length", [2, 3])
@pytest.mark.parametrize("hands", ["the oldest value", "its own value"])
def test_a_rotation_whose_computed_value_may_be_one_it_holds_toggles_among_its_values(hands, length, mode):
    """`a`'s next value is computed, or handed back by a branch: the oldest value of the rotation
    (which `a` held `length - 1` rounds ago) or `a` itself, while the rotation passes `a` on. Each
    position then reads its value where it lies, and `a`'s next value goes into the first of
    `length + 1` slots that no position's current value is in (a ring rotating by the round
    copied it into its slot, 64 bytes a call)."""

    def fn(x, flags):
        def body(carry, flag):
            a, *older = carry
            if hands == "the oldest value":
                a_next = lax.cond(flag, lambda v: v, lambda v: -v, older[-1])
            else:
                a_next = lax.cond(flag, lambda: a, lambda: jnp.sin(older[-1]))
            return (a_next, a, *older[:-1]), None

        return lax.scan(body, tuple(x * k for k in range(1, length + 1)), flags)[0]

    args = jnp.arange(4.0), jnp.array([True, False, True, True, False, False, True])
    _, a_views, *passed = _copy_free_loop_views(fn, args, mode)
    assert a_views.toggles and a_views.repeat == length + 1 and a_views.held == tuple(range(2, length + 1))
    assert all(v.yielded.data and not v.slots.data for v in passed)


@pytest.mark.parametrize("mode", ["checked", "compiled"])
@pytest.mark.parametrize("hands", ["a", "b"])
def test_a_value_yielded_at_two_positions_that_may_be_either_ones_toggles_for_both(hands, mode):
    """Both positions carry the value of one case, which may hand back either's carried value (the
    same value but in the first round). The first position toggles among three slots, the next
    value going where neither position's value is; the second reads the value where it lies (64
    bytes copied a call before)."""

    def fn(x, flags):
        def body(carry, flag):
            a, b = carry
            v = lax.cond(flag, lambda: a if hands == "a" else b, lambda: jnp.sin(b) * a)
            return (v, v), None

        return lax.scan(body, (x, x * 2.0), flags)[0]

    args = jnp.arange(4.0), jnp.array([True, False, True, True, False, False, True])
    _, a_views, b_views = _copy_free_loop_views(fn, args, mode)
    assert a_views.toggles and a_views.repeat == 3 and a_views.held == (2,)
    assert b_views.yielded.data and not b_views.slots.data


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_case_that_hands_back_its_operand_or_computes_it_in_place_keeps_it_in_one_slot(mode):
    """Each conditional either hands the carried value back (a phi) or computes the next value from
    it elementwise. The case result takes the carry's memory, computed in place where a branch
    computes it, so the chain of cases ends in the carry's one slot whatever the branches do, and
    nothing is copied (32 bytes before, as the result lay in the carry's slot or the body's own)."""

    def fn(x, flags):
        def body(c, flag):
            c = lax.cond(flag, lambda v: -v, lambda v: v, c)
            c = lax.cond(flag, lambda v: v, lambda v: v * 0.5, c)
            return c, None

        return lax.scan(body, x * 1.5, flags)[0]

    args = jnp.arange(4.0), jnp.array([True, False, False, True])
    planned = check_program(fn, *args, mode=mode)
    assert planned.last_run.copied_bytes == 0
    _, plan, _, _ = planned_rows(fn, *args)
    ((_, carries),) = plan.carries.items()
    assert carries[-1].repeat == 1


@pytest.mark.parametrize("rounds", ["known", "data-dependent"])
@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_case_whose_other_branch_runs_a_loop_on_the_carry_keeps_it_in_one_slot(mode, rounds):
    """Some branches hand the carried value back; another runs a loop whose init it is (for some
    flags none of its rounds). That loop's ring lies in the case result's memory, so the result may
    take the carry's: round 0 reads the carry there, as each later round reads the round before.
    Nothing is copied, and the carry has one slot (48 bytes copied before, with two slots)."""

    def fn(x, flags):
        def body(c, flag):
            count = 3 if rounds == "known" else flag // 2  # flag 1: no round

            def halve(c):
                return lax.fori_loop(0, count, lambda _, v: v * 0.5 - 1.0, c)

            return lax.switch(flag % 3, [lambda v: v, halve, lambda v: v], c), None

        return lax.scan(body, x * 1.5, flags)[0]

    args = jnp.arange(4.0), jnp.array([0, 2, 1, 4, 3, 1])
    planned = check_program(fn, *args, mode=mode)
    assert planned.last_run.copied_bytes == 0
    _, plan, _, _ = planned_rows(fn, *args)
    ((_, carries),) = plan.carries.items()
    assert carries[-1].repeat == 1


def test_no_corpus_loop_copies_anything_between_rounds():
    loops = 0
    for program in PROGRAMS:
        _, plan, _, _ = planned_rows(program.fn, *program.make_args())
        assert jaxalloc.planned(program.fn).plan(*program.make_args()).check().copies == (), program.name
        loops += len(plan.carries)
    assert loops >= 15


def test_a_branch_handing_back_its_operand_makes_the_result_a_view_not_a_copy():
    def pick(p, x):
        y = jnp.sin(x)
        r = lax.cond(p, lambda y: y, lambda y: jnp.cos(y) @ y, y)  # branch 1 yields y unchanged
        return (r * 2.0) @ x  # r * 2 not in r's memory: r may be y, which would stay alive as long

    func, plan, rows, _ = planned_rows(pick, True, jnp.ones((64, 64)))
    (case,) = plan.phis
    assert plan.phis[case] == [(1,)]
    sin = next(op for op in func.walk() if isinstance(op, jx.PrimOp) and op.primitive.data == "sin")
    mul = next(op for op in func.walk() if isinstance(op, jx.PrimOp) and op.primitive.data == "mul")
    assert plan.roots[mul.res[0]] is not plan.roots[case.res[0]]
    assert plan.roots[mul.res[0]] is not plan.roots[sin.res[0]]
    sin_end = next(b.end for b in plan.buffers if sin.res[0] in b.values)
    ops = list(func.body.block.ops)
    assert sin_end > ops.index(mul)  # y stays alive as long as r may be it
    for mode in ("checked", "compiled"):
        for p in (True, False):
            check_program(pick, p, jnp.linspace(-1.0, 1.0, 64 * 64).reshape(64, 64), mode=mode)
    assert "mem.phi = [array<i64: 1>]" in str(jaxalloc.planned(pick).plan(True, jnp.ones((64, 64))).module)


def test_a_case_result_every_branch_hands_on_from_outside_takes_no_memory():
    """Each branch of the second case hands on a value from outside it, so its result is always
    one of them, read where it lies: it takes no memory (it took a slot of its own that nothing
    ever wrote, 64 of the 192 bytes here)."""
    def pick(p, a, b):
        c = lax.cond(p, lambda: a * 2, lambda: b + 1)
        return lax.cond(p, lambda: c, lambda: b) * 3

    args = True, jnp.arange(16, dtype=jnp.float32), jnp.ones(16)
    plan = jaxalloc.planned(pick).plan(*args, include_outputs=True)
    first, second = (op for op in plan.module.walk() if isinstance(op, jx.CaseOp))
    assert "mem.slots" in first.attributes and "mem.slots" not in second.attributes
    assert plan.arena_bytes == 128 and plan.check().copies == ()
    for mode in ("checked", "compiled"):
        for p in (True, False):
            assert check_program(pick, p, *args[1:], mode=mode).last_run.copied_bytes == 0


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_value_a_branch_yields_twice_is_computed_into_the_result_the_loop_yields(mode):
    """Each branch yields one value as both case results; the body reads the first and yields the
    second. The value is computed into the second's memory, the next round's view, and the first
    views it there: nothing moves into the ring (random program 4012 copied every round)."""

    def twice(x):
        def body(i, carry):
            c, total = carry
            a, b = lax.cond(i > 1, lambda v: (v * 0.5 + 0.25,) * 2, lambda v: (jnp.sin(v),) * 2, c)
            return b, total + a

        return lax.fori_loop(0, 5, body, (x, x))

    planned = check_program(twice, jnp.arange(4.0), mode=mode)
    assert planned.last_run.copied_bytes == 0
    assert planned.plan(jnp.arange(4.0), include_outputs=True).check().copies == ()


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_case_that_hands_back_the_carry_or_views_a_value_of_the_body_toggles(mode):
    """One branch hands the carried value back, the other a reshape (a view) of a value the body
    computes before the case: that value is computed into the case result's memory, the next
    round's view, and the position toggles, its value staying where it is when the first branch
    runs (two slots). The
    case result viewed the body's own memory, which the loop copied into its ring every round
    (random program 7338)."""

    def pick(v, xs):
        def body(c, x):
            part = v[::2] / (1.0 + jnp.abs(c))
            out = lax.cond(jnp.sum(x > 0.0) > 1, lambda: part.reshape(()), lambda: c)
            return out, out

        return lax.scan(body, jnp.float32(0.5), xs)

    args = jnp.array([1.0, -2.0]), jnp.array([[1.0, 2.0, -1.0], [-1.0, -2.0, 1.0], [3.0, 1.0, 1.0]])
    planned = check_program(pick, *args, mode=mode)
    assert planned.last_run.copied_bytes == 0
    assert planned.plan(*args, include_outputs=True).check().copies == ()


@pytest.mark.parametrize("rounds, mode", [(0, "checked"), (3, "compiled")])
def test_an_origin_yielded_twice_starts_its_ring_in_its_init_operand(rounds, mode):
    """The loop yields `nxt` at two positions, and the branch yields the first: a ring of two slots in
    the case result's memory. `start` dies at the loop, so it is the ring's first slot, and after no
    round the result is `start` there, not copied into the result (the second position reads the
    ring from its second slot)."""

    def fn(x, n):
        def looping(x):
            start = x * -0.5

            def body(state):
                i, a, b = state
                nxt = jnp.clip(b**3, -2.0, 2.0)
                return i + 1, nxt, nxt

            return lax.while_loop(lambda s: s[0] < n, body, (0, start, start * -0.5))[1]

        return lax.cond(jnp.max(x) > 0.5, looping, jnp.tanh, x)

    views = _copy_free_loop_views(fn, (jnp.arange(4.0), jnp.int32(rounds)), mode)
    first, second = views[1], views[2]
    assert first.initial.data == () and second.initial.data != ()
    assert [s.offset.data for s in second.slots.data] == [s.offset.data for s in first.slots.data[1:] + first.slots.data[:1]]


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_chain_of_cases_computes_a_rotations_next_value_in_place_of_its_oldest(mode):
    """`d` is `a`, `tanh(a)` or their negation, through two cases, and `a` is the oldest value of the
    rotation: the chain is one buffer, the oldest value's slot, so no round copies `d` into the
    ring (a round did where the first case kept its result in the body's own memory)."""

    def fn(x, y):
        def body(carry, _):
            a, b = carry
            flag = jnp.max(y) > 0.5
            c = lax.cond(~flag, jnp.tanh, lambda v: v, a)
            d = lax.cond(flag, lambda v: v, lambda v: -v, c)
            return (b, d), None

        return lax.scan(body, (jnp.sin(x), jnp.cos(y)), None, length=3)[0]

    _copy_free_loop_views(fn, (jnp.arange(4.0), jnp.arange(4.0) - 2.0), mode)


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_next_value_that_may_be_a_value_no_round_computes_toggles(mode):
    """`a` is handed `x` every round, and `b`'s next value may be `a` through two cases: `b` toggles,
    reading `a`'s value where it lies (`x`, or the init operand in the first round)."""

    def fn(x, xs):
        def body(carry, xi):
            a, b = carry
            flag = jnp.max(x) > 0.5
            c = lax.cond(flag, lambda v: -v, lambda v: v, a)
            return (x, lax.cond(flag, jnp.tanh, lambda v: v, c)), xi

        return lax.scan(body, (jnp.sin(x), x), xs)[0]

    views = _copy_free_loop_views(fn, (jnp.arange(4.0) - 1.0, jnp.arange(3.0)), mode)
    assert views[2].toggles


@pytest.mark.parametrize("branch, mode", [(1, "checked"), (0, "compiled")])
def test_a_branch_yielding_two_values_of_one_ring_makes_the_second_result_a_view_of_the_first(branch, mode):
    """A rotation's two results lie in one ring, which the first result of the case holds: in that
    branch the second result is a view of the first's memory, not a copy."""

    def fn(x, k):
        def rotating(x):
            def body(carry, _):
                a, b = carry
                return (b, a / (1.0 + jnp.abs(a))), None

            return lax.scan(body, (x, x), None, length=4, reverse=True)[0]

        return lax.switch(k, [lambda x: (x, x), rotating], x)

    _copy_free_loop_views(fn, (jnp.arange(4.0), jnp.int32(branch)), mode)


@pytest.mark.parametrize("k, mode", [(0, "checked"), (2, "compiled")])
def test_a_case_handing_on_a_value_through_nested_cases_is_a_view_of_it(k, mode):
    """The innermost case may hand `q` (a value of the function's block) through two enclosing
    cases: each result is a view of `q` where it does, not a copy."""

    def fn(x, k):
        q = x[1:]

        def inner(q):
            return lax.cond(k > 1, lambda: jnp.concatenate([q[:1], q[:1]]), lambda: q)

        def middle(q):
            return lax.cond(k > 0, inner, lambda q: q, q)

        return lax.cond(k >= 0, middle, lambda q: q, q), q

    planned = check_program(fn, jnp.arange(3), jnp.int32(k), mode=mode)
    assert planned.last_run.copied_bytes == 0
    assert planned.plan(jnp.arange(3), jnp.int32(k), include_outputs=True).check().copies == ()


def _spare_slots(fn, args) -> list[int]:
    """The `n` of every `#mem.next<k, n>` the plan of `fn` (outputs inside the arena) writes onto an op."""
    module = jaxalloc.planned(fn).plan(*args, include_outputs=True).module
    places = [op.attributes.get("mem.slot") for op in module.walk()]
    return [p.nth.data for p in places if isinstance(p, NextAttr) and p.nth.data]


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_next_value_that_may_be_either_of_two_values_of_the_body_computes_each_into_a_free_slot(mode):
    """An inner loop of `n` rounds swaps `u` and `w`, both computed in the body, so the next value is
    either: each is computed into a free slot of its own of the position's toggle ring (the second
    into `#mem.next<k, 1>`), three slots with the current value's; no round copies it there (one
    did, each round, where the plan kept `u` and `w` in the body's memory)."""

    def fn(x, ns):
        def body(carry, n):
            u, w = jnp.sin(carry), jnp.cos(x) * 2.0
            return lax.fori_loop(0, n, lambda _, c: (c[1], c[0]), (u, w))[0], None

        return lax.scan(body, x, ns)[0]

    args = (jnp.arange(4.0), jnp.array([0, 1, 2, 3, 1], jnp.int32))
    views = _copy_free_loop_views(fn, args, mode)
    assert views[1].toggles and len(views[1].slots) == 3
    assert _spare_slots(fn, args) == [1]


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_a_case_handing_on_a_value_another_branch_computes_from_puts_both_in_free_slots(mode):
    """One branch computes `j @ j.T` from `j`, one hands `j` on, one hands back the carried value:
    `j` is computed into the toggle ring's second free slot, so the branch computing from it writes
    the first, and whichever the case yields is the next value where it lies (a round copied `j`
    there before)."""

    def fn(x, ks):
        def body(carry, k):
            j = lax.cummax(x, axis=1)
            return lax.switch(k, [lambda: j @ j.T, lambda: j, lambda: carry]), None

        return lax.scan(body, x * 2, ks)[0]

    args = (jnp.arange(9).reshape(3, 3) % 4, jnp.array([0, 1, 2, 0, 2, 1], jnp.int32))
    views = _copy_free_loop_views(fn, args, mode)
    assert views[1].toggles
    assert _spare_slots(fn, args) == [1]


@pytest.mark.parametrize("n, mode", [(1, "checked"), (2, "compiled")])
def test_a_case_result_that_may_be_any_of_several_values_of_its_branch_holds_each_in_a_slot_of_its_own(n, mode):
    """A branch's loop of `n` rounds rotates `x`, `q` and `r`, so the case result is `x` (a view of
    it), `q` or `r`: the result's memory holds both, each in a slot of its own, and the result is a
    view of whichever the loop ends with (one was copied into the result's slot before)."""

    def fn(x, n, flag):
        def rotating(x):
            q = x + 1.0
            r = q * 2.0
            return lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[3], s[1], s[2]), (0, x, q, r))[1]

        return lax.cond(flag, rotating, lambda x: -x, x)

    args = (jnp.arange(4.0), jnp.int32(n), True)
    planned = check_program(fn, *args, mode=mode)
    assert planned.last_run.copied_bytes == 0
    plan = planned.plan(*args, include_outputs=True)
    assert plan.check().copies == ()
    case = next(op for op in plan.module.walk() if isinstance(op, jx.CaseOp))
    q, r = (op.attributes["mem.slot"] for region in case.regions for op in region.block.ops
            if isinstance(op, jx.PrimOp) and op.primitive.data in ("add", "mul"))
    assert case.attributes["mem.phi"] and {q.offset.data, r.offset.data} == {
        case.attributes["mem.slots"].data[0].offset.data + k * q.size.data for k in range(2)}


def _ring_slots(plan, shape: tuple[int, ...]) -> list[int]:
    """The slots of every loop position carrying a value of `shape`, loops nested deeper included."""
    func = next(iter(plan.module.ops))
    return [len(views.slots.data) for op in func.walk() if isinstance(op, jx.WhileOp)
            for result, views in zip(op.results, op.attributes["mem.views"].data)
            if tuple(result.type.get_shape()) == shape]


def test_a_diffrax_solve_saves_its_outputs_in_one_slot_each():
    """`SaveAt(ts=...)` writes each saved step with equinox's `maybe_set` into the array it updates,
    in place (`UPDATES_OPERAND_1`): the saved arrays' rings are one slot, in the inner loop that
    writes them and in the step loop around it, as XLA keeps one buffer for each."""
    from jaxalloc.testing.library import BY_NAME

    program = BY_NAME["diffrax_euler_saveat_ts"]
    plan = jaxalloc.planned(program.fn).plan(*program.make_args(), include_outputs=True)  # (5, 3) is small
    assert _ring_slots(plan, (5, 3)) and set(_ring_slots(plan, (5, 3))) == {1}


def test_nested_loops_update_their_carried_value_in_one_slot():
    """The inner body computes `tanh(x @ w) + x` in place of the carried `x`, not of the product (its
    first operand), so the inner ring is one slot, and so is the outer one that holds it: one
    buffer of the matrix, as XLA has."""

    def fn(x, w):
        def outer(i, state):
            x, acc = state
            x = lax.fori_loop(0, 4, lambda j, x: jnp.tanh(x @ w) + x, x)
            return x, acc + x

        return lax.fori_loop(0, 8, outer, (x, jnp.zeros_like(x)))

    args = (jnp.eye(16) * 0.5, jnp.full((16, 16), 0.01))
    planned = check_program(fn, *args, mode="compiled")
    assert planned.last_run.copied_bytes == 0
    plan = planned.plan(*args, include_outputs=True)  # the outer rings in the arena too
    assert set(_ring_slots(plan, (16, 16))) == {1}
    assert plan.arena_bytes <= 3 * 16 * 16 * 4 + 1024  # x, acc and the product, beside small scalars
