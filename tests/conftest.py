"""Test session set-up.

- On a GPU each pytest-xdist worker takes device memory as it needs it, so that several workers
  share one device (JAX would otherwise claim most of it for the first).
- The workers of a session share JAX's persistent compilation cache, in a folder of the session's
  own that it removes at its end: the programs under test are made of the same few kernels, which
  each worker and test would otherwise compile again. A cache the environment names is used as is.
- The `slow` marker (docs/testing.md): `pytest -q -n auto -m "not slow"` is the fast tier, under a
  minute on two cores; `pytest -q -n auto` runs every test. Which tests are slow is said here, by
  the rule of `_slow`, not in the test modules.
"""

import os
import shutil
import tempfile

import pytest

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

_OWN_CACHE = "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _OWN_CACHE:  # set before JAX is imported, here and in the workers, which inherit the environment
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxalloc-tests-cache-")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"


def pytest_unconfigure(config):
    if _OWN_CACHE and not hasattr(config, "workerinput"):  # the session's first process, not a worker
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


SLOW_MODULES = frozenset({
    "test_transformations",  # the transformation matrix: some 360 cells, half the suite's time
    "test_library_corpus",  # flax, haiku, equinox, diffrax and optax programs: XLA compiles for seconds each
    "test_filecheck",  # the lit suite: one test of some 20 RUN lines, each an `xdsl-opt` process
    "test_shard_map",  # a process of its own with eight host devices
    "test_mutations",  # corrupted plans of corpus and random programs, each run every way
    "test_allocator_equivalence",  # every allocator against its golden offsets, some 1,200 plans
    "test_checker_properties",  # every allocator through the checker on thousands of random problems
    "test_readme",  # the README's set-up in a bare clone
    "test_canonicalize",  # traces the whole corpus as it is collected, to choose the programs the pass changes
    "test_fusion",  # the same, for the programs `jx-fuse` fuses
})
"""Modules every test of which is slow. The fast tier does not even collect them (`pytest_ignore_collect`):
the last two take some 15 s of each worker's time to collect."""

FAST_ONLY = {
    # heavy modules: the tests of each that the fast tier runs
    "test_compiled": {
        "test_corpus_program_compiled[switch]", "test_corpus_program_compiled[cond_bool]",
        "test_corpus_program_compiled[fori_loop_dynamic]", "test_corpus_program_compiled[mlp]",
        "test_random_program_compiled[3-small values placed]", "test_random_program_compiled[3-kernel plan]",
        "test_offsets_become_arguments", "test_the_kernel_never_copies_the_arena",
        "test_a_compiled_call_reports_its_arena_and_copies", "test_a_conditional_takes_its_branches_offsets_as_operands",
    },
    "test_arena": {
        "test_a_corrupted_plan_gives_a_wrong_answer_and_the_checker_names_it", "test_keys_survive_the_arena",
        "test_the_arena_is_updated_in_place_not_copied_per_op", "test_an_arena_too_large_for_32_bit_offsets_is_a_clear_error",
        "test_every_dtype_survives_the_arena_bit_for_bit[bfloat16]", "test_every_dtype_survives_the_arena_bit_for_bit[int4]",
        "test_a_two_slot_ring_ends_in_the_right_slot_for_every_round_count[0]",
        "test_a_run_takes_no_more_than_arena_outputs_and_one_op[switch]",
    },
    "test_assignment": {
        "test_scan_ys_buffer_is_updated_in_place_in_one_slot", "test_a_case_block_is_as_large_as_its_largest_branch",
        "test_a_chain_of_ten_elementwise_ops_on_4_mib_fits_in_8_mib",
        "test_a_rotation_of_four_carries_gets_four_slots_and_copies_nothing",
        "test_x_equals_tanh_x_w_in_a_scan_needs_two_slots_whatever_the_length",
        "test_a_plan_the_checker_gives_up_on_to_the_end_is_not_used",
    },
    "test_trust": {
        "test_regression_runs_right_in_every_mode[init_read_in_body1-arena]",
        "test_regression_runs_right_in_every_mode[init_read_in_body1-checked]",
        "test_regression_runs_right_in_every_mode[one_value_two_results4-eager]",
        "test_regression_runs_right_in_every_mode[phi_source_updated_in_place6-checked]",
        "test_regression_runs_right_in_every_mode[nested_ring_in_branch14-arena]",
        "test_the_static_checker_sees_a_branch_the_run_does_not_take",
        "test_the_static_checker_names_the_value_read_the_value_written_and_the_round",
        "test_the_sanitizer_names_the_round", "test_a_loop_running_other_than_the_rounds_it_says_is_refused",
        "test_the_static_checker_walks_a_loop_no_further_than_the_rounds_it_can_run",
        "test_the_static_checker_copies_a_value_moved_on_some_paths_exactly_there",
        "test_the_static_checkers_guards_mean_the_paths_they_allow",
        "test_a_plan_that_computes_a_value_outside_the_arena_is_refused_unless_the_function_may_return_it",
        "test_effects_plan_and_run_in_order",
    },
    "test_random_programs": {
        "test_random_program[0]", "test_random_program[8]", "test_same_seed_same_program",
        "test_random_programs_once_copying_on_a_path_plan_no_copy",
    },
    "test_schedule": {
        "test_three_chains_run_one_after_another", "test_the_bounds_of_every_candidate_are_reported_and_the_best_is_kept",
        "test_effects_keep_their_order", "test_a_value_read_only_inside_a_branch_is_computed_before_the_case",
        "test_corpus_program_scheduled[newton_sqrt]",
    },
    "test_passes": {
        "test_the_arena_attribute_matches_the_plan", "test_a_corrupted_plan_is_caught_and_the_two_values_are_named",
        "test_unknown_allocator_is_a_diagnostic",
    },
    # parametrized tests of light modules: the cases the fast tier runs
    "test_corpus::test_corpus_program": {
        "test_corpus_program[mlp]", "test_corpus_program[scan_rnn]", "test_corpus_program[cond_bool]",
        "test_corpus_program[nested_scan_while_switch]", "test_corpus_program[user_custom_vjp]",
    },
    "test_corpus::test_corpus_program_eager": set(),
    "test_donation::test_results_equal_jit_with_donation_and_the_params_are_deleted": {
        "test_results_equal_jit_with_donation_and_the_params_are_deleted[fused-compiled]",
        "test_results_equal_jit_with_donation_and_the_params_are_deleted[unfused-checked]",
    },
    "test_donation::test_a_donated_argument_read_late_is_kept_until_its_last_read": {
        "test_a_donated_argument_read_late_is_kept_until_its_last_read[fori-compiled]",
        "test_a_donated_argument_read_late_is_kept_until_its_last_read[reads_after_output-arena]",
    },
    "test_donation::test_a_donated_array_is_deleted_where_jit_deletes_it": {
        "test_a_donated_array_is_deleted_where_jit_deletes_it[never read-compiled]",
        "test_a_donated_array_is_deleted_where_jit_deletes_it[no output can take it-arena]",
    },
    "test_dead_code::test_a_loop_position_nobody_reads_is_gone_and_nothing_is_copied": {
        "test_a_loop_position_nobody_reads_is_gone_and_nothing_is_copied[0]",
    },
}
"""Where the fast tier runs only some tests: by module, or by module and parametrized test, the
tests (`name`: every case; `name[id]`: one case) that it runs."""

SLOW_TESTS = frozenset({
    "test_allocators::test_resnet50_quality_targets",
    "test_allocators::test_nnc_scales_to_20000_buffers",
    "test_allocators::test_minimalloc_challenging_best_never_worse_than_baselines",
    "test_search_allocator::test_matches_canonical_brute_force_on_small_random_problems",
    "test_search_allocator::test_matches_exhaustive_offsets_on_tiny_problems",
    "test_search_allocator::test_time_limit_on_a_large_interval_problem",
    "test_search_allocator::test_never_worse_than_best_on_medium_problems",
    "test_search_allocator::test_minimalloc_challenging_instances_reach_the_bound",
    "test_trace_cli::test_chart_is_written_for_few_and_many_buffers",
})
"""Slow tests (every case) of modules otherwise fast."""


def _slow(item) -> bool:
    """The rule: a test is slow if its module is in `SLOW_MODULES`, it is in `SLOW_TESTS`, or
    `FAST_ONLY` lists its module or its parametrized test and not the test or its case."""
    module, name = item.path.stem, getattr(item, "originalname", item.name)
    if module in SLOW_MODULES or f"{module}::{name}" in SLOW_TESTS:
        return True
    return any(key in FAST_ONLY and not {name, item.name} & FAST_ONLY[key] for key in (module, f"{module}::{name}"))


def _fast_tier(config) -> bool:
    return config.getoption("markexpr", "").replace(" ", "") == "notslow"


def pytest_ignore_collect(collection_path, config):
    if collection_path.suffix == ".py" and collection_path.stem in SLOW_MODULES and _fast_tier(config):
        return True
    return None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _slow(item):
            item.add_marker(pytest.mark.slow)
