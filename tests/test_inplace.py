"""The in-place and view tables on converted programs."""

import jax.numpy as jnp
from jax import lax

import jaxalloc
from jaxalloc.dialects import jx
from jaxalloc.analysis.inplace import in_place_candidates, is_view
from jaxalloc.testing.differential import AS_TRACED


def prims(fn, *args) -> dict[str, jx.PrimOp]:
    module = jaxalloc.planned(fn, passes=AS_TRACED).lower(*args)
    return {op.primitive.data: op for op in module.walk() if isinstance(op, jx.PrimOp)}


def test_elementwise_ops_may_take_any_same_sized_operand():
    ops = prims(lambda x, y: (jnp.tanh(x) * y, x > y), jnp.ones(4), jnp.ones(4))
    assert in_place_candidates(ops["tanh"]) == (0,)
    assert in_place_candidates(ops["mul"]) == (0, 1)
    assert in_place_candidates(ops["gt"]) == ()  # bool result: one byte per element, not four


def test_operands_of_another_shape_are_not_candidates():
    ops = prims(lambda x: x * 2.0, jnp.ones((4, 4)))
    assert [op.type.get_shape() for op in ops["mul"].args] == [(4, 4), ()]
    assert in_place_candidates(ops["mul"]) == (0,)


def test_updates_go_into_operand_0_only():
    ops = prims(lambda x, u: lax.dynamic_update_slice(x, u, (1,)), jnp.ones(8), jnp.ones(8))
    assert in_place_candidates(ops["dynamic_update_slice"]) == (0,)


def test_matmul_and_reductions_never_run_in_place():
    ops = prims(lambda a, b: (a @ b).sum(0), jnp.ones((4, 4)), jnp.ones((4, 4)))
    assert in_place_candidates(ops["dot_general"]) == ()
    assert in_place_candidates(ops["reduce_sum"]) == ()


def test_views():
    ops = prims(
        lambda x: (x.reshape(2, 8), jnp.squeeze(x[None]), lax.bitcast_convert_type(x, jnp.int32), x.T.reshape(-1)),
        jnp.ones((4, 4)),
    )
    assert is_view(ops["reshape"]) and is_view(ops["squeeze"]) and is_view(ops["bitcast_convert_type"])
    assert not is_view(ops["transpose"])


def test_same_width_conversion_runs_in_place_and_narrowing_does_not():
    same = prims(lambda x: x.astype(jnp.int32), jnp.ones(4, jnp.float32))["convert_element_type"]
    narrower = prims(lambda x: x.astype(jnp.bfloat16), jnp.ones(4, jnp.float32))["convert_element_type"]
    assert in_place_candidates(same) == (0,)
    assert in_place_candidates(narrower) == ()


def test_a_fused_chain_runs_in_place_over_an_operand_of_its_shape_whatever_it_broadcasts():
    def f(x, mask, row):
        y = jnp.exp(x)
        return jnp.where(mask, y * 2.0, jnp.broadcast_to(row, x.shape)) + lax.broadcasted_iota(jnp.float32, x.shape, 1)

    module = jaxalloc.planned(f, passes=("jx-dce", "jx-canonicalize", "jx-fuse")).lower(
        jnp.ones((8, 16)), jnp.ones((8, 16), bool), jnp.ones(16)
    )
    (fused,) = [op for op in module.walk() if isinstance(op, jx.FusedOp)]
    inner = {op.primitive.data for op in fused.body.block.ops if isinstance(op, jx.PrimOp)}
    assert {"broadcast_in_dim", "iota", "select_n"} <= inner
    # of its operands only x has the result's shape and byte size: the mask is bool, the row smaller
    assert [fused.args[i].type for i in in_place_candidates(fused)] == [fused.res[0].type]


def test_every_table_entry_names_a_jax_primitive():
    from jax._src import core

    def primitives_of(module):
        return {v.name for v in vars(module).values() if isinstance(v, core.Primitive)}

    from jax._src import ad_util
    from jax._src.lax import control_flow, slicing, special
    from jax._src.lax import lax as lax_internal

    known = set().union(*(primitives_of(m) for m in (lax_internal, slicing, special, control_flow, ad_util)))
    from jaxalloc.analysis.inplace import ELEMENTWISE, UPDATES_OPERAND_0, VIEWS

    assert (ELEMENTWISE | UPDATES_OPERAND_0 | VIEWS) - known == set()
