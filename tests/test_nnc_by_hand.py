"""NNC on small problems whose plans are worked out by hand from the algorithm (docs: nnc-allocator.md).

Notation: intervals are half-open ``[start, end)``; ``b`` is *after* ``a`` when ``b.start >= a.end``;
the hop from ``a`` to ``b`` is ``b.start - a.end + 1``; ``R = max(end) - min(start)``. An edge
``(y, x) {cap, off}`` costs ``hop(y) + hop(x)``, with ``R`` in place of a hop for the source or the sink.
Every expected plan also goes through the independent checker.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxalloc.allocators import allocate
from jaxalloc.allocators.problem import Problem
from jaxalloc.checks.checker import check_allocation


def plan(problem: Problem, name: str = "nnc"):
    result = allocate(problem, name)
    check_allocation(problem, result)
    return result


def test_spec_worked_example():
    # A = 100 [0,2), B = 60 [2,4), C = 40 [4,6); R = 6.
    # Round 1: A is the largest and the first block: new group 0 (100), A at 0;
    #   edges (src, A) {100, 0}, (A, sink) {100, 0}.
    # Round 2: B (60). (src, A) needs A to start after B ends: 0 >= 4 fails.
    #   (A, sink): A ends 2 <= B starts 2, cost R + hop(A->B) = 6 + 1 = 7. B at offset 0;
    #   (A, sink) becomes {40, 60}; new (A, B) {60, 0} and (B, sink) {60, 0}.
    # Round 3: C (40). (A, sink) {40, 60}: cost 6 + (4 - 2 + 1) = 9. (B, sink) {60, 0}: cost
    #   6 + (4 - 4 + 1) = 7. (A, B): B starts 2 < C ends 6, no. C takes (B, sink) at offset 0.
    p = Problem.from_intervals([100, 60, 40], [0, 2, 4], [2, 4, 6])
    result = plan(p)
    assert result.offsets.tolist() == [0, 0, 0]
    assert result.peak == 100
    assert result.groups.tolist() == [0, 0, 0]
    assert result.group_sizes.tolist() == [100]


def test_libnnc_oracle_case_3_matmul_chain():
    # c = a @ b (f32[1,2] @ f32[2,1]); e = c @ d; a, d, e belong to the caller. Planned: b (8 B) and
    # c (4 B), padded to 64 B. Op 0 reads b and writes c (they interfere), op 1 reads c:
    # b lives [0, 1), c lives [0, 2).
    # Round 1: both 64 B, both interfere with one block: lower index b opens group 0.
    # Round 2: c. (src, b): b starts 0 >= c ends 2 fails; (b, sink): b ends 1 <= c starts 0 fails.
    #   New group 1 (64): c at 64. Arena 128 B, as libnnc's test expects.
    p = Problem.from_intervals([8, 4], [0, 0], [1, 2], alignment=64)
    result = plan(p)
    assert result.offsets.tolist() == [0, 64]
    assert result.peak == 128


def test_libnnc_oracle_case_3_as_explicit_pair():
    # The same interference given as a conflict pair (operands and results of one op), no schedule.
    # The stand-in order puts b on [0, 1) and c on [1, 2); c is after b in time, but an explicit
    # partner is never "after": (b, sink) is refused and c opens group 1.
    p = Problem.from_pairs([8, 4], [(0, 1)], alignment=64)
    assert plan(p).offsets.tolist() == [0, 64]


def test_temporally_tightest_edge_not_best_fit():
    # P = 100 [0,2), Q = 100 [0,5), X = 60 [6,8); R = 8. P and Q overlap.
    # Round 1: P and Q (100), one interference each: lower index P opens group 0.
    # Round 2: Q fits neither (src, P) (P starts 0 < 5) nor (P, sink) (P ends 2 > 0): group 1 at 100.
    # Round 3: X. (P, sink) costs R + (6 - 2 + 1) = 13, (Q, sink) costs R + (6 - 5 + 1) = 10:
    #   X reuses Q's memory (group 1, at 100 + 0), the one freed last before X starts.
    # First-fit in order of birth puts P at 0, Q at 100 and X at the lowest address, over P.
    p = Problem.from_intervals([100, 100, 60], [0, 0, 6], [2, 5, 8])
    assert plan(p).offsets.tolist() == [0, 100, 100]
    assert plan(p, "first-fit").offsets.tolist() == [0, 100, 0]


def test_most_interfering_candidate_first():
    # idx 0: B = 64 [2,6); idx 1: A = 64 [0,4); idx 2: C = 8 [0,1). R = 6.
    # Interference: A-B, A-C, so oc(A) = 2, oc(B) = 1, oc(C) = 1.
    # Round 1: candidates A, B (64): A first (more interference) although B has the lower index.
    # Round 2: B cannot follow A (A ends 4 > 2) nor precede it: group 1 at 64.
    # Round 3: C (8). Group 0: (src, A) needs A to start >= 1, no; (A, sink) needs A to end <= 0,
    #   no. Group 1: (src, B): B starts 2 >= 1, cost R + (2 - 1 + 1) = 8. C at 64 + 0.
    p = Problem.from_intervals([64, 64, 8], [2, 0, 0], [6, 4, 1])
    result = plan(p)
    assert result.offsets.tolist() == [64, 0, 64]
    assert result.group_sizes.tolist() == [64, 64]


def test_equal_cost_edges_go_to_the_lower_block_index():
    # idx 0: Ya = 90 [1,2); idx 1: Yb = 100 [0,2); idx 2: T = 50 [3,4). R = 4.
    # Round 1: Yb (largest) opens group 0. Round 2: Ya overlaps Yb: group 1 at 100.
    # Round 3: T. (Yb, sink) and (Ya, sink) both cost R + (3 - 2 + 1) = 6: same phase, same hop,
    #   so the lower block index wins: Ya, in group 1: T at 100 + 0.
    p = Problem.from_intervals([90, 100, 50], [1, 0, 3], [2, 2, 4])
    assert plan(p).offsets.tolist() == [100, 0, 100]


def test_companions_are_placed_as_one_string():
    # idx 0: X = 40 [0,2), idx 1: Y = 60 [4,6) are companions; idx 2: Z = 100 [1,5) overlaps both;
    # idx 3: W = 40 [2,4) lies between X and Y. R = 6.
    # Round 1: Z (100) opens group 0.
    # Round 2: the unit {X, Y} (60, the larger of the two). (src, Z): Z starts 1 < 6; (Z, sink):
    #   Z ends 5 > 0. New group 1 (60) at 100. The string X, Y gets the edges
    #   (src, X) {40, 0}, (src, Y) {20, 40}, (X, Y) {40, 0}, (Y, sink) {60, 0}.
    # Round 3: W (40). Only (X, Y) fits: X ends 2 <= 2 and Y starts 4 >= 4, cost 1 + 1 = 2.
    #   W at 100 + 0.
    p = Problem.from_intervals([40, 60, 100, 40], [0, 4, 1, 2], [2, 6, 5, 4], companions=[(0, 1)])
    result = plan(p)
    assert result.offsets.tolist() == [100, 100, 0, 100]
    assert result.peak == 160


def test_explicit_pair_is_not_transitive_through_time():
    # A = 100 [0,2), B = 50 [2,3), C = 50 [3,4), and the explicit pair (A, C). R = 4.
    # Round 1: A opens group 0. Round 2: B and C (50, no unplaced interference left): B first.
    #   (A, sink) costs R + 1 = 5: B at 0; (A, sink) {50, 50}, (A, B) {50, 0}, (B, sink) {50, 0}.
    # Round 3: C. (A, sink) is refused: A is C's partner. (B, sink) costs R + 1 = 5 but its bytes
    #   [0, 50) lie inside A's: refused. (A, B): B starts 2 < 4. C opens group 1 at 100.
    p = Problem(sizes=[100, 50, 50], starts=[0, 2, 3], ends=[2, 3, 4], pairs=[(0, 2)])
    result = plan(p)
    assert result.offsets.tolist() == [0, 0, 100]
    assert result.peak == 150


def test_pairs_only_problem_uses_block_order():
    # No schedule: block i stands on [i, i + 1). Pairs: (0, 1). R = 3.
    # Round 1: all 64 B; 0 and 1 interfere once, 2 not at all: 0 opens group 0.
    # Round 2: 1 and 2 have no unplaced interference left: 1 first. (0, sink) is refused (partner),
    #   (src, 0) needs 0 to start >= 2: 1 is marked "cannot insert". 2: (0, sink) costs
    #   R + (2 - 1 + 1) = 5, 2 at 0.
    # Round 3: only 1, marked: it opens group 1 at 64.
    p = Problem.from_pairs([64, 64, 64], [(0, 1)])
    assert plan(p).offsets.tolist() == [0, 64, 0]


def test_nnc_2018_pairs_the_most_interfering_block_with_a_larger_free_one():
    # idx 0: S = 30 [1,4), idx 1: L = 100 [5,7), idx 2: M = 50 [0,2), idx 3: N = 50 [3,6),
    # idx 4: Q = 20 [4,5). Interference: S-M, S-N, N-L, N-Q. oc: S 2, L 1, M 1, N 3, Q 1.
    # Round 1: N alone has the most (3); nothing larger is free of it: the single N. No edge
    #   between two blocks exists: new group 0 (50), N at 0. oc: S 1, L 0, Q 0, M 1.
    # Round 2: S and M (oc 1). Tuples: S; M; (S, L) and (M, L) (L is larger and free of both).
    #   Order by largest size: (S, L) and (M, L) at 100, equal total oc 1, S has the lower index:
    #   (S, L). No edge: new group 1 (100) at 50. The string S, L yields the edge (S, L) {30, 0}.
    # Round 3: M and Q (oc 0). Tuples: M (50), (Q, M) (50), Q (20); at 50 singles come before
    #   pairs of equal oc. M and (Q, M) need 50 bytes: (S, L) has 30. Q fits (S, L): S ends 4 <= 4,
    #   L starts 5 >= 5: Q at 50 + 0.
    # Round 4: M: no edge holds 50 bytes: new group 2 (50) at 150.
    p = Problem.from_intervals([30, 100, 50, 50, 20], [1, 5, 0, 3, 4], [4, 7, 2, 6, 5])
    result = plan(p, "nnc-2018")
    assert result.offsets.tolist() == [50, 50, 150, 0, 50]
    assert result.group_sizes.tolist() == [50, 100, 50]
    assert result.peak == 200


def test_nnc_on_the_2018_example():
    # The same blocks under today's rule. Sizes: L 100, M 50, N 50, S 30, Q 20. R = 7.
    # Round 1: L opens group 0. oc: N 2 (S, Q), M 1, S 2, Q 1.
    # Round 2: M and N (50): N has more interference (2 > 1). N [3,6): (src, L) needs L to start
    #   >= 6, no; (L, sink) needs L to end <= 3, no: N is marked. M [0,2): (src, L) costs
    #   R + (5 - 2 + 1) = 11: M at 0; (src, L) {50, 50}, (src, M) {50, 0}, (M, L) {50, 0}.
    # Round 3: N is marked and alone: new group 1 (50) at 100.
    # Round 4: S (30) [1,4): (src, L) {50, 50} costs R + (5 - 4 + 1) = 9; (M, L): M ends 2 > 1; the
    #   edges of N's group need N after S (3 < 4) or before it (6 > 1). S at 50.
    # Round 5: Q (20) [4,5): (src, L) {20, 80} costs R + 1 = 8; (src, M): M starts 0 < 5; (M, L):
    #   M ends 2 <= 4 and L starts 5 >= 5, cost (4 - 2 + 1) + 1 = 4; (src, S) {30, 50}: S starts 1.
    #   (S, L) {30, 50}: S ends 4 <= 4, L starts 5 >= 5: cost 1 + 1 = 2, the tightest. Q at 50.
    p = Problem.from_intervals([30, 100, 50, 50, 20], [1, 5, 0, 3, 4], [4, 7, 2, 6, 5])
    result = plan(p)
    assert result.offsets.tolist() == [50, 0, 0, 100, 50]
    assert result.peak == 150


def test_nnc_2018_open_ends_option_uses_source_and_sink_edges():
    # With open ends, the 2018 rule may also use (src, x) and (y, sink), as the 2018 source did.
    # A = 100 [0,2), B = 100 [2,4): no interference. Round 1: A (oc 0, index 0; no larger free
    # block) opens group 0. Round 2: B fits (A, sink): B at 0. Published rule: B opens group 1.
    p = Problem.from_intervals([100, 100], [0, 2], [2, 4])
    assert allocate(p, "nnc-2018", open_ends=True).offsets.tolist() == [0, 0]
    assert plan(p, "nnc-2018").offsets.tolist() == [0, 100]


def test_alignment_pads_sizes_and_offsets():
    # Sizes 10, 70, 5 with alignment 64 become 64, 128, 64. A = 10 [0,1), B = 70 [0,2),
    # C = 5 [1,2); R = 2. Round 1: B (128) opens group 0. Round 2: A and C (64), no unplaced
    # interference left: A first. Neither fits group 0 (both overlap B): A opens group 1 at 128 and
    # C, which starts when A ends, gets its mark cleared. Round 3: C: (A, sink) costs
    # R + (1 - 1 + 1) = 3: C at 128 + 0.
    p = Problem.from_intervals([10, 70, 5], [0, 0, 1], [1, 2, 2], alignment=64)
    result = plan(p)
    assert result.offsets.tolist() == [128, 0, 128]
    assert result.peak == 192
    assert np.all(result.offsets % 64 == 0)


@pytest.mark.parametrize("name", ["nnc", "nnc-2018"])
def test_zero_size_blocks_take_no_memory(name):
    p = Problem.from_intervals([0, 32, 0], [0, 0, 0], [3, 3, 3])
    result = plan(p, name)
    assert result.peak == 32
    assert result.groups[0] == -1 and result.groups[2] == -1


def test_a_new_group_clears_the_mark_of_a_block_in_the_gap_of_a_companion_string():
    """Companions X = 60 [0,2) and Y = 60 [4,6) form one string; Z = 100 [1,5); W = 60 [2,4).

    Round 1 (size 100): Z opens group 0 (size 100) at offset 0.
    Round 2 (size 60): candidates by oc: the string {X, Y} interferes with Z (oc 1), W with Z (oc 1);
    ties go to the lower unit index, so the string first. Its edge needs y ending before X starts
    (only the source) and x starting after Y ends (only the sink): no real edge and no (source, sink)
    edge exists, and (source, Z) / (Z, sink) fail the timing, so the string is marked; W: (source, Z)
    needs Z to start after W ends (1 >= 4 is false), (Z, sink) needs Z to end before W starts (5 <= 2
    is false): W is marked too. No candidate fits: the string opens group 1 (size 60) at offset 100,
    with edges (source, X), (X, Y) {60, 0}, (Y, sink). W interferes with neither X nor Y, so its mark
    is cleared, and in the next round W fits on (X, Y): X ends at 2 <= W's start 2 and Y starts at
    4 >= W's end 4. W goes to offset 100: the arena is 160, not 220.
    """
    problem = Problem.from_intervals(
        sizes=[60, 60, 100, 60], starts=[0, 4, 1, 2], ends=[2, 6, 5, 4], companions=[(0, 1)]
    )
    plan = allocate(problem, "nnc")
    check_allocation(problem, plan)
    assert plan.offsets.tolist() == [100, 100, 0, 100]
    assert plan.peak == 160
