"""The plan attributes: what round i of a loop reads through a multi-view."""

import pytest
from xdsl.context import Context
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from jaxalloc.dialects.mem import MEM, YIELDED, NextAttr, SlotAttr, ViewsAttr


def test_type_ii_view_reads_the_init_operand_once_then_cycles_the_slots():
    a, b = SlotAttr(0, 64), SlotAttr(64, 64)
    views = ViewsAttr([0], [a, b])
    assert views.repeat == 2
    assert [views.view(i) for i in range(5)] == [0, a, b, a, b]


def test_a_rotation_reads_other_positions_init_operands_first():
    ring = [SlotAttr(64 * k, 64) for k in range(4)]
    views = ViewsAttr([0, 1, 2, 3], ring)
    assert [views.view(i) for i in range(6)] == [0, 1, 2, 3, ring[0], ring[1]]


def test_slots_of_one_multi_view_have_one_size():
    with pytest.raises(VerifyException, match="one size"):
        ViewsAttr([], [SlotAttr(0, 64), SlotAttr(64, 128)])


def test_a_position_outside_the_arena_has_no_views():
    assert ViewsAttr([], []).view(0) is None


def test_an_unchanged_carry_reads_its_init_operand_every_round():
    views = ViewsAttr([3], [])
    assert [views.view(i) for i in range(3)] == [3, 3, 3]


def test_slot_end():
    assert SlotAttr(128, 4096).end == 4224


def test_a_position_handed_on_reads_its_init_operand_then_what_the_body_yielded():
    views = ViewsAttr([1], [], yielded=True)
    assert [views.view(i) for i in range(3)] == [1, YIELDED, YIELDED]


def test_a_toggle_ring_computes_into_the_slot_the_current_value_is_not_in():
    assert ViewsAttr([0], [SlotAttr(0, 128), SlotAttr(128, 128)], yielded=True).toggle(64) == SlotAttr(128, 128)
    a, b = SlotAttr(0, 64), SlotAttr(64, 64)
    views = ViewsAttr([0], [a, b], yielded=True)
    assert views.toggles and [views.view(i) for i in range(3)] == [0, YIELDED, YIELDED]
    assert views.toggle(None) == a and views.toggle(512) == a and views.toggle(0) == b and views.toggle(64) == a
    one = ViewsAttr([0], [a], yielded=True)  # the next value computed where the current one is
    assert one.toggles and one.toggle(None) == a and one.toggle(0) == a and one.toggle(512) == a


def test_a_toggle_ring_computes_a_second_value_of_the_round_into_its_second_free_slot():
    a, b, c = SlotAttr(0, 64), SlotAttr(64, 64), SlotAttr(128, 64)
    pool = ViewsAttr([0], [a, b, c], yielded=True)
    assert [pool.toggle(None, nth=n) for n in range(3)] == [a, b, c]
    assert [pool.toggle(64, nth=n) for n in range(2)] == [a, c] and pool.toggle(0, nth=1) == c
    ctx = Context()
    ctx.load_dialect(MEM)
    for text, attr in (("#mem.next<1, 2>", NextAttr(1, 2)), ("#mem.next<1>", NextAttr(1))):
        assert str(attr) == text and Parser(ctx, text).parse_attribute() == attr
    with pytest.raises(VerifyException, match="first free slot"):
        ViewsAttr([1], [NextAttr(2, 1)])


def test_a_toggle_ring_that_holds_another_positions_value_computes_into_a_slot_neither_is_in():
    a, b, c = SlotAttr(0, 64), SlotAttr(64, 64), SlotAttr(128, 64)
    views = ViewsAttr([1], [a, b, c], yielded=True, holds=[2])
    assert views.held == (2,)
    assert views.toggle(None, None) == a and views.toggle(0, None) == b and views.toggle(None, 64) == a
    assert views.toggle(0, 64) == c and views.toggle(64, 0) == c and views.toggle(128, 0) == b
    assert views.toggle(0, 0) == b and views.toggle(512, 128) == a
    text = "#mem.views<initial = [1], yielded, slots = [#mem.slot<offset = 0, size = 64>, " \
           "#mem.slot<offset = 64, size = 64>, #mem.slot<offset = 128, size = 64>], holds = [2]>"
    ctx = Context()
    ctx.load_dialect(MEM)
    assert str(views) == text and Parser(ctx, text).parse_attribute() == views
    with pytest.raises(VerifyException, match="only a toggle ring holds"):
        ViewsAttr([0], [a], holds=[2])


def test_a_ring_in_the_enclosing_loops_next_view_is_that_views_slot_in_each_round():
    views = ViewsAttr([1], [NextAttr(2)])
    assert views.within(lambda p: SlotAttr(64 * p, 64)) == ViewsAttr([1], [SlotAttr(128, 64)])
    assert views.within(lambda p: None) == ViewsAttr([1], [], yielded=True)  # outside the arena
    assert ViewsAttr([0], [SlotAttr(0, 64)]).within(None) == ViewsAttr([0], [SlotAttr(0, 64)])
    ring = ViewsAttr([], [NextAttr(2), NextAttr(2)])  # a ring of two slots, cut out of the next view
    assert ring.within(lambda p: SlotAttr(256, 128)) == ViewsAttr([], [SlotAttr(256, 64), SlotAttr(320, 64)])
    for wrong in ([NextAttr(2), SlotAttr(0, 64)], [NextAttr(2), NextAttr(1)]):
        with pytest.raises(VerifyException, match="slots of one position only"):
            ViewsAttr([0], wrong)


def test_a_toggle_ring_in_the_enclosing_loops_next_view_toggles_within_that_views_slot():
    toggle = ViewsAttr([1], [NextAttr(2)], yielded=True)
    assert toggle.within(lambda p: SlotAttr(128, 64)) == ViewsAttr([1], [SlotAttr(128, 64)], yielded=True)
    assert toggle.within(lambda p: None) == ViewsAttr([1], [], yielded=True)
    text = "#mem.views<initial = [1], yielded, slots = [#mem.next<2>]>"
    ctx = Context()
    ctx.load_dialect(MEM)
    assert str(toggle) == text and Parser(ctx, text).parse_attribute() == toggle


def test_yielded_views_print_and_parse_back():
    ctx = Context()
    ctx.load_dialect(MEM)
    ring = [SlotAttr(0, 64), SlotAttr(64, 64)]
    every = (ViewsAttr([2], [], yielded=True), ViewsAttr([0], ring[:1]), ViewsAttr([], ring, yielded=True),
             ViewsAttr([1], [NextAttr(0)]))
    for views in every:
        text = str(views)
        assert Parser(ctx, text).parse_attribute() == views
    assert str(ViewsAttr([2], [], yielded=True)) == "#mem.views<initial = [2], yielded>"
