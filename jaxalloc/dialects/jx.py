"""
The `jx` dialect: a jaxpr as xDSL IR, with JAX's control flow as NNC sub-graphs.

Every JAX primitive is one `jx.prim`; its primitive object and bind parameters live in a
side table (`jaxalloc.frontend.convert.BindTable`) under the op's `key`, so the IR text stays short
and printable while the interpreter can still bind the real primitive. `jx.while` is NNC's
*while* sub-graph (a condition region run at the start of every round, a body region, the
loop-carried values as block arguments), `jx.case` is NNC's *case..of* (an int32 index
selects one of N branch regions). Regions may use values of enclosing blocks directly:
those are the read-only inputs of a sub-graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import (
    DictionaryAttr,
    FunctionType,
    IntAttr,
    IntegerType,
    StringAttr,
    SymbolNameConstraint,
    TensorType,
    UnitAttr,
)
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_region_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import CallableOpInterface, HasParent, IsolatedFromAbove, IsTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

_I1 = IntegerType(1)
_I32 = IntegerType(32)


@irdl_attr_definition
class KeyType(ParametrizedAttribute, TypeAttribute):
    """Element type of a JAX PRNG key array, e.g. `!jx.key<fry>`; the impl fixes its byte size."""

    name = "jx.key"

    impl: StringAttr

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (StringAttr(parser.parse_identifier()),)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.impl.data)


def _parse_key(parser: Parser) -> int:
    parser.parse_punctuation("[")
    key = parser.parse_integer(allow_boolean=False, allow_negative=False)
    parser.parse_punctuation("]")
    return key


def _print_extra_attributes(printer: Printer, op: IRDLOperation) -> None:
    if op.attributes:
        printer.print_op_attributes(op.attributes, print_keyword=True)


def _verify_yield(block: Block, types: Sequence[Attribute], what: str) -> None:
    last = block.last_op
    if not isinstance(last, YieldOp):
        raise VerifyException(f"{what} must end with jx.yield")
    yielded = tuple(v.type for v in last.args)
    if yielded != tuple(types):
        raise VerifyException(
            f"{what} yields ({', '.join(map(str, yielded))}) "
            f"but ({', '.join(map(str, types))}) is expected"
        )


class _FuncCallable(CallableOpInterface):
    @classmethod
    def get_callable_region(cls, op: Operation) -> Region:
        assert isinstance(op, FuncOp)
        return op.body

    @classmethod
    def get_argument_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, FuncOp)
        return op.function_type.inputs.data

    @classmethod
    def get_result_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, FuncOp)
        return op.function_type.outputs.data


@irdl_op_definition
class FuncOp(IRDLOperation):
    """A traced JAX function: one block, its arguments are the flattened jaxpr inputs."""

    name = "jx.func"

    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), _FuncCallable())

    def __init__(
        self,
        name: str,
        inputs: Sequence[Attribute],
        outputs: Sequence[Attribute],
        region: Region | None = None,
    ):
        if region is None:
            region = Region(Block(arg_types=inputs))
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(inputs, outputs),
            },
            regions=[region],
        )

    def verify_(self) -> None:
        if tuple(a.type for a in self.body.block.args) != self.function_type.inputs.data:
            raise VerifyException("jx.func block arguments differ from the function's input types")
        _verify_yield(self.body.block, self.function_type.outputs.data, "jx.func body")

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        name, inputs, outputs, region, extra, *_ = parse_func_op_like(
            parser, reserved_attr_names=("sym_name", "function_type")
        )
        op = FuncOp(name, inputs, outputs, region)
        if extra is not None:
            op.attributes |= extra.data
        return op

    def print(self, printer: Printer) -> None:
        print_func_op_like(
            printer,
            self.sym_name,
            self.function_type,
            self.body,
            self.attributes,
            reserved_attr_names=("sym_name", "function_type"),
        )


@irdl_op_definition
class PrimOp(IRDLOperation):
    """One JAX primitive application, bound whole: `jx.prim "add"[3](%a, %b) : ...`."""

    name = "jx.prim"

    args = var_operand_def()
    res = var_result_def()
    primitive = prop_def(StringAttr)
    key = prop_def(IntAttr)
    """Index of the primitive and its bind parameters in the side table."""
    params = prop_def(DictionaryAttr)
    """The primitive's parameters in readable form (for people and passes, not for binding)."""
    effect = opt_prop_def(UnitAttr)
    """Present where binding the primitive does more than compute its results (a callback, a
    print): the op runs, in order with the other such ops, whether or not its results are read."""

    def __init__(
        self,
        primitive: str,
        key: int,
        args: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        params: Mapping[str, str] | DictionaryAttr = DictionaryAttr({}),
        effect: bool = False,
    ):
        if not isinstance(params, DictionaryAttr):
            params = DictionaryAttr({k: StringAttr(v) for k, v in params.items()})
        properties: dict[str, Attribute] = {"primitive": StringAttr(primitive), "key": IntAttr(key), "params": params}
        if effect:
            properties["effect"] = UnitAttr()
        super().__init__(operands=[args], result_types=[result_types], properties=properties)

    @classmethod
    def parse(cls, parser: Parser) -> PrimOp:
        primitive = parser.parse_str_literal()
        key = _parse_key(parser)
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        effect = parser.parse_optional_keyword("effect") is not None
        params = parser.parse_optional_attribute()
        if params is None:
            params = DictionaryAttr({})
        elif not isinstance(params, DictionaryAttr):
            parser.raise_error("expected the primitive's parameters as a dictionary")
        extra = parser.parse_optional_attr_dict_with_keyword()
        parser.parse_punctuation(":")
        fn_type = parser.parse_function_type()
        args = parser.resolve_operands(operands, fn_type.inputs.data, parser.pos)
        op = PrimOp(primitive, key, args, fn_type.outputs.data, params, effect)
        if extra is not None:
            op.attributes |= extra.data
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.primitive.data)
        printer.print_string(f"[{self.key.data}]")
        with printer.in_parens():
            printer.print_list(self.args, printer.print_ssa_value)
        if self.effect is not None:
            printer.print_string(" effect")
        if self.params.data:
            printer.print_string(" ")
            printer.print_attribute(self.params)
        _print_extra_attributes(printer, self)
        printer.print_string(" : ")
        printer.print_operation_type(self)


@irdl_op_definition
class ConstOp(IRDLOperation):
    """A literal or closed-over constant; the array lives in the side table, small ones are also shown."""

    name = "jx.const"

    res = result_def()
    key = prop_def(IntAttr)
    value = opt_prop_def(StringAttr)
    """A short rendering of small constants, for the reader; never parsed back into data to run
    (`jx-canonicalize` on IR text alone reads a scalar's, which prints exactly, to fold it)."""

    def __init__(self, key: int, result_type: Attribute, value: str | None = None):
        properties: dict[str, Attribute] = {"key": IntAttr(key)}
        if value is not None:
            properties["value"] = StringAttr(value)
        super().__init__(result_types=[result_type], properties=properties)

    @classmethod
    def parse(cls, parser: Parser) -> ConstOp:
        key = _parse_key(parser)
        value = parser.parse_optional_str_literal()
        extra = parser.parse_optional_attr_dict_with_keyword()
        parser.parse_punctuation(":")
        op = ConstOp(key, parser.parse_type(), value)
        if extra is not None:
            op.attributes |= extra.data
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f"[{self.key.data}]")
        if self.value is not None:
            printer.print_string(" ")
            printer.print_string_literal(self.value.data)
        _print_extra_attributes(printer, self)
        printer.print_string(" : ")
        printer.print_attribute(self.res.type)


def has_effect(ir: Operation | Region) -> bool:
    """Whether `ir` is, or holds, an op with an effect (a callback): it must run, and in its order."""
    return any(isinstance(inner, PrimOp) and inner.effect is not None for inner in ir.walk())


def _parse_operands_and_type(parser: Parser) -> tuple[list[UnresolvedOperand], FunctionType]:
    operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
    parser.parse_punctuation(":")
    return operands, parser.parse_function_type()


@irdl_op_definition
class WhileOp(IRDLOperation):
    """NNC's while sub-graph: `cond` decides at the start of every round whether `body` runs again."""

    name = "jx.while"

    inits = var_operand_def()
    res = var_result_def()
    cond = region_def("single_block")
    body = region_def("single_block")
    rounds = opt_prop_def(IntAttr)
    """How many rounds run, where that is known before the loop starts (a scan, a loop counting
    from a constant to a constant): then a result is never an init operand that later rounds would
    have replaced, and it is in one known slot of its ring."""
    at_most = opt_prop_def(IntAttr)
    """The most rounds that can run, where only that is known (a loop counting from a constant
    while it is less than a constant and something else holds): no walk of the loop need go further."""

    def __init__(self, inits: Sequence[SSAValue], cond: Region, body: Region, rounds: int | None = None,
                 at_most: int | None = None):
        properties = {name: IntAttr(n) for name, n in (("rounds", rounds), ("at_most", at_most)) if n is not None}
        super().__init__(operands=[inits], result_types=[[v.type for v in inits]], regions=[cond, body],
                         properties=properties)

    @property
    def said_rounds(self) -> tuple[int | None, int | None]:
        """`rounds` and `at_most` as numbers, None where the loop does not say."""
        rounds, at_most = (None if n is None else n.data for n in (self.rounds, self.at_most))
        return rounds, at_most

    def verify_(self) -> None:
        types = tuple(v.type for v in self.inits)
        if tuple(r.type for r in self.res) != types:
            raise VerifyException("jx.while results must have the types of its loop-carried operands")
        for region, what in ((self.cond, "condition"), (self.body, "body")):
            if tuple(a.type for a in region.block.args) != types:
                raise VerifyException(f"jx.while {what} arguments must have the types of the loop-carried operands")
        if self.rounds is not None and self.rounds.data < 0:
            raise VerifyException(f"jx.while cannot run {self.rounds.data} rounds")
        if self.at_most is not None and (self.at_most.data < 0 or self.rounds is not None):
            raise VerifyException("jx.while at_most must count rounds (0 or more), on a loop without `rounds`")
        _verify_yield(self.cond.block, (TensorType(_I1, []),), "jx.while condition")
        _verify_yield(self.body.block, types, "jx.while body")

    @classmethod
    def parse(cls, parser: Parser) -> WhileOp:
        operands, fn_type = _parse_operands_and_type(parser)
        inits = parser.resolve_operands(operands, fn_type.inputs.data, parser.pos)
        rounds = parser.parse_integer(allow_boolean=False) if parser.parse_optional_keyword("rounds") else None
        at_most = parser.parse_integer(allow_boolean=False) if parser.parse_optional_keyword("at_most") else None
        extra = parser.parse_optional_attr_dict_with_keyword()
        parser.parse_keyword("cond")
        cond = parser.parse_region()
        parser.parse_keyword("do")
        body = parser.parse_region()
        op = WhileOp(inits, cond, body, rounds, at_most)
        if extra is not None:
            op.attributes |= extra.data
        return op

    def print(self, printer: Printer) -> None:
        with printer.in_parens():
            printer.print_list(self.inits, printer.print_ssa_value)
        printer.print_string(" : ")
        printer.print_operation_type(self)
        if self.rounds is not None:
            printer.print_string(f" rounds {self.rounds.data}")
        if self.at_most is not None:
            printer.print_string(f" at_most {self.at_most.data}")
        _print_extra_attributes(printer, self)
        printer.print_string(" cond ")
        printer.print_region(self.cond, print_entry_block_args=True)
        printer.print_string(" do ")
        printer.print_region(self.body, print_entry_block_args=True)


@irdl_op_definition
class CaseOp(IRDLOperation):
    """NNC's case..of sub-graph: the i32 scalar `index` (already clamped) picks the branch that runs."""

    name = "jx.case"

    index = operand_def(TensorType)
    res = var_result_def()
    branches = var_region_def("single_block")

    def __init__(self, index: SSAValue, result_types: Sequence[Attribute], branches: Sequence[Region]):
        super().__init__(operands=[index], result_types=[result_types], regions=[branches])

    def verify_(self) -> None:
        if self.index.type != TensorType(_I32, []):
            raise VerifyException("jx.case index must be one i32 scalar (tensor<i32>)")
        if not self.branches:
            raise VerifyException("jx.case needs at least one branch")
        types = tuple(r.type for r in self.res)
        for i, branch in enumerate(self.branches):
            if branch.block.args:
                raise VerifyException(f"jx.case branch {i} must take no block arguments")
            _verify_yield(branch.block, types, f"jx.case branch {i}")

    @classmethod
    def parse(cls, parser: Parser) -> CaseOp:
        pos = parser.pos
        operands, fn_type = _parse_operands_and_type(parser)
        if len(operands) != 1 or len(fn_type.inputs.data) != 1:
            parser.raise_error("jx.case takes exactly one index operand", pos, parser.pos)
        (index,) = parser.resolve_operands(operands, fn_type.inputs.data, parser.pos)
        extra = parser.parse_optional_attr_dict_with_keyword()
        branches = [parser.parse_region()]
        while parser.parse_optional_punctuation(",") is not None:
            branches.append(parser.parse_region())
        op = CaseOp(index, fn_type.outputs.data, branches)
        if extra is not None:
            op.attributes |= extra.data
        return op

    def print(self, printer: Printer) -> None:
        with printer.in_parens():
            printer.print_ssa_value(self.index)
        printer.print_string(" : ")
        printer.print_operation_type(self)
        _print_extra_attributes(printer, self)
        printer.print_string(" ")
        printer.print_list(self.branches, printer.print_region)


@irdl_op_definition
class FusedOp(IRDLOperation):
    """Ops run as one kernel (`jx-fuse`): the body's block arguments are the operands, its yield the
    results. Only the results are planned; the values inside live in the kernel's registers."""

    name = "jx.fused"

    args = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")

    def __init__(self, args: Sequence[SSAValue], result_types: Sequence[Attribute], body: Region):
        super().__init__(operands=[args], result_types=[result_types], regions=[body])

    def verify_(self) -> None:
        if tuple(a.type for a in self.body.block.args) != tuple(v.type for v in self.args):
            raise VerifyException("jx.fused block arguments must have the types of its operands")
        _verify_yield(self.body.block, tuple(r.type for r in self.res), "jx.fused body")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a function, a loop condition or body, or a case branch, handing values to its parent."""

    name = "jx.yield"

    args = var_operand_def()

    assembly_format = "attr-dict ($args^ `:` type($args))?"

    traits = traits_def(IsTerminator(), HasParent(FuncOp, WhileOp, CaseOp, FusedOp))

    def __init__(self, *args: SSAValue):
        super().__init__(operands=[args])


JX = Dialect("jx", [FuncOp, PrimOp, ConstOp, WhileOp, CaseOp, FusedOp, YieldOp], [KeyType])
