"""XLA's parser rules, for ``hloscope check``: what each opcode takes and allows.

The grammar (`hloscope._hlo._syntax`) calls a `Checker` at each step when it
reads in strict mode.  The checker reads every attribute with its type's
exact syntax (`hloscope._hlo._check_values`), allows for each opcode only
the attributes XLA's parser allows (``CreateInstruction`` in
``xla/hlo/parser/hlo_parser.cc``), requires the required ones, counts
operands, checks that each operand exists where it is used and has the shape
the text declares, and applies the opcode-specific rules XLA's parser
applies (async chains, conditionals, custom-call layout constraints, ...).
Messages are XLA's, located where XLA locates them.
"""

from __future__ import annotations

from ._check_values import (
    VALUE_READERS,
    read_literal,
    read_shape,
)
from ._lexer import Tok, Token
from ._module import Computation, Instruction
from ._names import sanitize
from ._opcodes import NO_ASYNC_SUGAR, OPCODE_ARITY
from ._shape import Shape
from ._syntax import Body, Grammar
from ._numbers import ascii_int

__all__ = ["Checker", "ATTRIBUTES", "check_module", "compatible"]

_SHARED = {
    "sharding": "sharding", "frontend_attributes": "frontend_attributes",
    "statistics": "statistics", "parameter_replication": "parameter_replication",
    "control-predecessors": "instruction_list", "origin": "original_value",
    "metadata": "metadata", "backend_config": "string_or_json",
}
_HEADER = {
    "is_scheduled": "bool", "replica_count": "int64", "num_partitions": "int64",
    "input_output_alias": "module_aliasing", "buffer_donor": "buffer_donor",
    "alias_passthrough_params": "bool", "entry_computation_layout": "computation_layout",
    "frontend_attributes": "frontend_attributes",
    "allow_spmd_sharding_propagation_to_parameters": "bool_list_or_bool",
    "allow_spmd_sharding_propagation_to_output": "bool_list_or_bool",
    "origin_recovery_table": "recovery_table", "debug_attributes": "debug_attributes",
}
_COLLECTIVE = {"replica_groups": "device_list", "channel_id": "int64"}
_DOT_DIMS = {"lhs_contracting_dims": "ints", "rhs_contracting_dims": "ints",
             "lhs_batch_dims": "ints", "rhs_batch_dims": "ints",
             "operand_precision": "precision_list"}

# opcode -> {attribute: type}; a '!' before the type marks a required attribute.
ATTRIBUTES: dict[str, dict[str, str]] = {
    "iota": {"iota_dimension": "!int64"},
    "topk": {"k": "!int64", "largest": "bool", "is_stable": "bool"},
    "all-gather": {**_COLLECTIVE, "dimensions": "!ints", "constrain_layout": "bool",
                   "use_global_device_ids": "bool"},
    "all-reduce": {**_COLLECTIVE, "to_apply": "!comp", "constrain_layout": "bool",
                   "use_global_device_ids": "bool", "mode": "mode"},
    "all-to-all": {**_COLLECTIVE, "dimensions": "ints", "constrain_layout": "bool"},
    "ragged-all-to-all": {**_COLLECTIVE, "dimensions": "ints"},
    "collective-broadcast": {**_COLLECTIVE, "has_dynamic_root": "bool"},
    "collective-permute": {"source_target_pairs": "!intss", "channel_id": "int64",
                           "slice_sizes": "intss"},
    "copy-start": {"cross_program_prefetch_index": "int32"},
    "reshape": {"inferred_dimension": "int64"},
    "sort": {"dimensions": "!ints", "is_stable": "bool", "to_apply": "!comp"},
    "while": {"condition": "!comp", "body": "!comp"},
    "recv": {"channel_id": "int64", "is_host_transfer": "bool"},
    "get-tuple-element": {"index": "!int64"},
    "call": {"to_apply": "!comp", "is_composite": "bool"},
    "reduce-window": {"window": "window", "to_apply": "!comp"},
    "convolution": {"window": "window", "dim_labels": "!dim_labels",
                    "feature_group_count": "int64", "batch_group_count": "int64",
                    "convolution_kind": "conv_kind", "operand_precision": "precision_list",
                    "algorithm": "precision_algorithm", "sparsity_config": "sparsity"},
    "fft": {"fft_type": "!fft_type", "fft_length": "!ints"},
    "triangular-solve": {"left_side": "bool", "lower": "bool", "unit_diagonal": "bool",
                         "transpose_a": "enum"},
    "compare": {"direction": "!comparison_direction", "type": "comparison_type"},
    "cholesky": {"lower": "bool"},
    "broadcast": {"dimensions": "ints"},
    "concatenate": {"dimensions": "!ints"},
    "map": {"to_apply": "!comp", "dimensions": "ints"},
    "scan": {"to_apply": "!comp", "dimensions": "!ints", "num_carries": "!int64",
             "is_reverse": "bool", "is_associative": "bool"},
    "reduce": {"to_apply": "!comp", "dimensions": "!ints"},
    "reverse": {"dimensions": "!ints"},
    "select-and-scatter": {"select": "!comp", "scatter": "!comp", "window": "window"},
    "slice": {"slice": "!slice_ranges"},
    "dynamic-slice": {"dynamic_slice_sizes": "!ints"},
    "transpose": {"dimensions": "!ints"},
    "batch-norm-training": {"epsilon": "!float", "feature_index": "!int64"},
    "pad": {"padding": "!padding_config"},
    "fusion": {"calls": "!comp", "kind": "!fusion_kind",
               "output_to_operand_aliasing": "instruction_aliasing"},
    "infeed": {"infeed_config": "string"},
    "outfeed": {"outfeed_config": "string", "outfeed_shape": "shape"},
    "rng": {"distribution": "!distribution"},
    "rng-get-and-update-state": {"delta": "!int64"},
    "rng-bit-generator": {"algorithm": "!random_algorithm"},
    "reduce-precision": {"exponent_bits": "!int64", "mantissa_bits": "!int64"},
    "custom-call": {"custom_call_target": "!string", "window": "window",
                    "dim_labels": "dim_labels", "feature_group_count": "int64",
                    "batch_group_count": "int64", "operand_layout_constraints": "shape_list",
                    "custom_call_has_side_effect": "bool", "to_apply": "comp",
                    "called_computations": "comps",
                    "output_to_operand_aliasing": "instruction_aliasing",
                    "padding_type": "padding_type", "literal": "literal",
                    "operand_precision": "precision_list",
                    "schedule": "custom_call_schedule", "api_version": "api_version"},
    "dot": {**_DOT_DIMS, "algorithm": "precision_algorithm"},
    "ragged-dot": {**_DOT_DIMS, "lhs_ragged_dims": "ints", "rhs_group_dims": "ints"},
    "scaled-dot": {**_DOT_DIMS, "algorithm": "precision_algorithm"},
    "gather": {"offset_dims": "!ints", "collapsed_slice_dims": "!ints",
               "start_index_map": "!ints", "index_vector_dim": "!int64",
               "slice_sizes": "!ints", "indices_are_sorted": "bool",
               "operand_batching_dims": "ints", "start_indices_batching_dims": "ints"},
    "scatter": {"update_window_dims": "!ints", "inserted_window_dims": "!ints",
                "scatter_dims_to_operand_dims": "!ints", "index_vector_dim": "!int64",
                "to_apply": "!comp", "indices_are_sorted": "bool", "unique_indices": "bool",
                "input_batching_dims": "ints", "scatter_indices_batching_dims": "ints"},
    "domain": {"domain": "!domain"},
    "get-dimension-size": {"dimensions": "!ints"},
    "set-dimension-size": {"dimensions": "!ints"},
}
for _op in ("acos", "acosh", "asin", "asinh", "atanh", "exponential-minus-one", "log",
            "log-plus-one", "logistic", "sqrt", "cbrt", "rsqrt", "tanh", "erf", "sine", "sinh",
            "cosine", "cosh", "tan", "exponential"):
    ATTRIBUTES[_op] = {"result_accuracy": "result_accuracy"}
ATTRIBUTES["all-gather-start"] = ATTRIBUTES["all-gather"]
ATTRIBUTES["all-reduce-start"] = ATTRIBUTES["all-reduce"]
ATTRIBUTES["reduce-scatter"] = {**ATTRIBUTES["all-reduce"], "dimensions": "!ints"}
ATTRIBUTES["collective-permute-start"] = ATTRIBUTES["collective-permute"]
for _op in ("recv-done", "send", "send-done"):
    ATTRIBUTES[_op] = ATTRIBUTES["recv"]
ATTRIBUTES["batch-norm-inference"] = ATTRIBUTES["batch-norm-training"]
ATTRIBUTES["batch-norm-grad"] = ATTRIBUTES["batch-norm-training"]
_ASYNC = {"async_execution_thread": "string"}

# Operand counts XLA's parser itself checks (the verifier checks the rest).
_EXACT_OPERANDS = {
    op: n for op, n in OPCODE_ARITY.items()
    if n is not None and op not in ("gather", "dot", "scaled-dot", "ragged-dot",
                                    "ragged-all-to-all")
}


class Checker:
    """XLA's parser rules, applied while the grammar reads each statement."""

    def __init__(self) -> None:
        self._signatures: dict[str, tuple[Shape, Token]] = {}
        self._first_operand: Shape | None = None

    # -- shapes and names ------------------------------------------------------------------
    def read_shape(self, g: Grammar) -> None:
        read_shape(g)

    def signature_result(self, g: Grammar, result: Shape, name: str) -> None:
        self._signatures[name] = (result, g.lx.tok)

    def instruction_name(self, g: Grammar, name: str, tok: Token) -> None:
        clean = sanitize(name)
        if clean != name:
            g.fail(f"illegal instruction name: {name}; suggest renaming to: {clean}", tok)

    def opcode(self, g: Grammar, opcode: str, tok: Token, sugar: tuple[str, str] | None) -> None:
        if opcode in OPCODE_ARITY or sugar is not None:
            return
        for suffix in ("-start", "-update", "-done"):
            if opcode.endswith(suffix):
                wrapped = opcode[: -len(suffix)]
                if wrapped not in OPCODE_ARITY:
                    g.fail(f"expects async wrapped opcode but sees: {opcode}, error: Unknown "
                           f"opcode: {wrapped}", tok)
                if wrapped in NO_ASYNC_SUGAR:
                    break
        g.fail(f"expects opcode but sees: {opcode}, error: Unknown opcode: {opcode}", tok)

    # -- operands ------------------------------------------------------------------------------
    def operand(self, g: Grammar, body: Body, name: str, tok: Token,
                declared: Shape | None) -> None:
        inst = body.by_name.get(name)
        if inst is None:
            g.fail(f"instruction does not exist: {name}", tok)
        if declared is not None:
            self.compatible(g, declared, inst.shape, tok,
                            "The declared operand shape {0} is not compatible with the shape "
                            "of the operand instruction {1}.")

    def compatible(self, g: Grammar, declared: Shape, actual: Shape, tok: Token,
                   message: str) -> None:
        if not compatible(declared, actual):
            g.fail(message.format(declared.to_text(), actual.to_text()), tok)

    def after_operands(self, g: Grammar, body: Body, opcode: str, operands: list[str],
                       tok: Token) -> None:
        """Checks XLA makes right after an instruction's operands (reported at `tok`)."""
        first = body.by_name.get(operands[0]) if operands else None
        self._first_operand = first.shape if first is not None else None
        if opcode == "conditional":
            if not operands:
                g.fail("conditional requires at least one operand", tok)
            s = self._first_operand
            if s is not None and (not s.is_array or s.rank != 0):
                g.fail("The first operand must be a scalar", tok)
            if s is not None and s.element_type not in ("pred", "s32"):
                g.fail("The first operand must be a scalar of PRED or S32", tok)

    # -- literals ---------------------------------------------------------------------------------
    def literal(self, g: Grammar, shape: Shape | None, open_at: int) -> None:
        g.at(open_at)
        g.expect(Tok.LPAREN, "expects '(' before constant literal")
        if shape is None:
            g.fail("cannot infer shape for opcode: constant")
        if shape.is_tuple:
            read_literal(g, "tuple", (), shape.tuple_shapes, shape.to_text())
        elif shape.is_array:
            read_literal(g, shape.element_type, shape.dims, None, shape.without_layout())
        g.expect(Tok.RPAREN, "expects ')' after constant literal")

    # -- attributes ----------------------------------------------------------------------------
    def _allowed(self, opcode: str | None, header: bool, computation: bool) -> dict[str, str]:
        if header:
            return _HEADER
        if computation:
            return {"execution_thread": "string"}
        spec = dict(_SHARED)
        if opcode is None:
            return spec
        if opcode.startswith("async-"):
            spec.update(_ASYNC)
            if opcode == "async-start":
                spec["output_to_operand_aliasing"] = "instruction_aliasing"
            spec["calls"] = "!comp" if opcode == "async-start" else "comp"
            return spec
        for suffix in ("-start", "-update", "-done"):
            if opcode.endswith(suffix) and opcode not in OPCODE_ARITY:
                wrapped = opcode[: -len(suffix)]
                spec.update(_ASYNC)
                if suffix == "-start":
                    spec.update(ATTRIBUTES.get(wrapped, {}))
                    spec["output_to_operand_aliasing"] = "instruction_aliasing"
                return spec
        if opcode == "conditional":
            first = self._first_operand
            if first is not None and first.element_type == "pred":
                spec.update(true_computation="!comp", false_computation="!comp")
            else:
                spec["branch_computations"] = "!comps"
            return spec
        spec.update(ATTRIBUTES.get(opcode, {}))
        return spec

    def attribute(self, g: Grammar, opcode: str | None, key: str, key_tok: Token, *,
                  header: bool, computation: bool, body: Body | None) -> None:
        spec = self._allowed(opcode, header, computation)
        kind = spec.get(key)
        if kind is None:
            allowed = ", ".join(sorted(spec)) if spec else ""
            tail = f"Allowed attributes: {allowed}" if allowed else "No attributes are allowed here."
            g.fail(f'unexpected attribute "{key}". {tail}', key_tok)
        VALUE_READERS[kind.lstrip("!")](g)

    def end_attributes(self, g: Grammar, opcode: str | None, seen: set[str],
                       body: Body | None, start: Token | None = None) -> None:
        spec = self._allowed(opcode, False, False)
        for key, kind in sorted(spec.items()):
            if kind.startswith("!") and key not in seen:
                if opcode == "broadcast" and key == "dimensions":
                    continue
                g.fail(f"attribute {key} is expected but not seen", start)

    # -- instructions ---------------------------------------------------------------------------
    def instruction(self, g: Grammar, body: Body, inst: Instruction, op_tok: Token,
                    attrs: list[tuple[str, str]]) -> None:
        opcode = inst.opcode
        wrapped = inst.sugar or opcode
        n = len(inst.operand_names)
        shapes = [body.by_name[x].shape for x in inst.operand_names if x in body.by_name]
        amap = dict(attrs)
        after = g.lx.tok  # XLA reports most of these at the token after the instruction

        def fail(message: str, tok: Token | None = None, hint: str = "") -> None:
            g.fail(message, tok or after, hint)

        if opcode == "parameter":
            for other in body.instructions:
                if other.opcode == "parameter" and \
                        other.parameter_number == inst.parameter_number:
                    fail(f"Duplicate parameter number {inst.parameter_number}", op_tok)
            leaves = len(inst.shape.leaves())
            reps = amap.get("parameter_replication")
            if reps is not None:
                count = len([x for x in reps.strip("{}").split(",") if x.strip()])
                if count != leaves:
                    fail(f"parameter has {leaves} leaf buffers, but parameter_replication has "
                         f"{count} elements.")
            return
        exact = _EXACT_OPERANDS.get(wrapped)
        if exact is not None and not inst.sugar and n != exact and not opcode.startswith("async-"):
            fail(f"expects {exact} operands, but has {n} operands", op_tok)
        if opcode in ("all-gather", "all-gather-start", "reduce-scatter", "get-dimension-size",
                      "set-dimension-size", "concatenate", "sort"):
            dims = amap.get("dimensions", "")
            if len([x for x in dims.strip("{}").split(",") if x.strip()]) != 1:
                fail("dimensions= must name exactly one dimension")
        if opcode in ("all-to-all", "ragged-all-to-all") and "dimensions" in amap:
            if len([x for x in amap["dimensions"].strip("{}").split(",") if x.strip()]) != 1:
                fail("dimensions= must name exactly one dimension")
        if opcode in ("collective-permute", "collective-permute-start"):
            pairs = amap.get("source_target_pairs", "")
            for p in pairs.strip()[1:-1].replace(" ", "").split("},{"):
                if p.strip("{}") and len(p.strip("{}").split(",")) != 2:
                    fail("expects 'source_target_pairs=' to be a list of pairs")
            if "slice_sizes" in amap and n != 4:
                fail("CollectivePermute and CollectivePermuteStart must have exactly four "
                     "operands for dynamic-slice and in-place update.")
        if opcode == "dynamic-reshape" and n == 0:
            fail("DynamicReshape requires at least one operand.")
        if opcode in ("recv",) and not (inst.shape.is_tuple and inst.shape.tuple_shapes):
            fail("recv must have a non-empty tuple shape")
        if opcode == "infeed" and not inst.shape.is_tuple:
            fail("infeed must have a non-empty tuple shape")
        if opcode == "reduce-window":
            if n % 2:
                fail(f"expects an even number of operands, but has {n} operands")
            if n == 0:
                fail("reduce-window expects at least one input and init operand")
        if opcode == "reduce" and n % 2:
            fail(f"expects an even number of operands, but has {n} operands")
        if opcode == "scatter" and n % 2 == 0:
            fail(f"expects an odd number of operands, but has {n} operands")
        if opcode in ("ragged-dot", "scaled-dot"):
            want = 3 if opcode == "ragged-dot" else 4
            if n != want:
                fail(f"expects {want} operands, but has {n} operands", op_tok)
        if opcode == "dot" and n < 2:
            fail(f"expects 2 operands, but has {n} operands", op_tok)
        if opcode in ("dynamic-slice", "dynamic-update-slice"):
            self._dynamic_slice(opcode, shapes, n, fail)
        if opcode == "broadcast" and shapes and shapes[0].rank != 0 \
                and "dimensions" not in amap:
            fail("attribute dimensions is expected but not seen")
        if opcode == "conditional":
            self._conditional(shapes, amap, fail)
        if opcode == "scan":
            dims = [ascii_int(x) for x in amap.get("dimensions", "").strip("{}").split(",")
                    if x.strip()]
            if len(dims) != 1:
                fail("expects exactly one dimension")
            if shapes and not 0 <= dims[0] < shapes[0].rank:
                fail(f"scan dimension {dims[0]} is out of range for operand of rank "
                     f"{shapes[0].rank}")
        if opcode == "custom-call":
            self._custom_call(inst, shapes, amap, fail)
        if opcode.startswith("async-"):
            self._async(g, body, inst, amap, op_tok, fail)

    @staticmethod
    def _dynamic_slice(opcode: str, shapes: list[Shape], n: int, fail) -> None:  # type: ignore[no-untyped-def]
        if opcode == "dynamic-slice":
            if n == 0:
                fail("Expected at least one operand.")
            if shapes and not (n == 2 and len(shapes) > 1 and shapes[1].rank == 1) \
                    and n != 1 + shapes[0].rank:
                fail("Wrong number of operands.")
        else:
            if n < 2:
                fail("Expected at least two operands.")
            if shapes and not (n == 3 and len(shapes) > 2 and shapes[2].rank == 1) \
                    and n != 2 + shapes[0].rank:
                fail("Wrong number of operands.")

    @staticmethod
    def _conditional(shapes: list[Shape], amap: dict[str, str], fail) -> None:  # type: ignore[no-untyped-def]
        if not shapes:
            return
        if shapes[0].element_type == "pred":
            branches = 2
        else:
            branches = len([x for x in amap.get("branch_computations", "").strip("{}")
                            .split(",") if x.strip()])
        if branches == 0 or len(shapes) != branches + 1:
            fail(f"conditional with {branches} branches needs {branches + 1} operands, "
                 f"has {len(shapes)}")

    @staticmethod
    def _custom_call(inst: Instruction, shapes: list[Shape], amap: dict[str, str], fail) -> None:  # type: ignore[no-untyped-def]
        if "called_computations" in amap and "to_apply" in amap:
            fail("A single instruction can't have both to_apply and calls field")
        api = amap.get("api_version", "")
        if api.lower() == "api_version_unspecified":
            fail(f"Invalid API version: {api}", None,
                 f"XLA points past the custom-call {inst.name} (the line before): its "
                 "printer writes api_version=API_VERSION_UNSPECIFIED (torch_xla's saved "
                 "graphs have it), its parser refuses it; delete that attribute from "
                 f"{inst.name}")
        constraints = amap.get("operand_layout_constraints")
        if constraints is None:
            return
        from ._attrs import split_top_level
        from ._shape import parse_shape

        items = [p.strip() for p, _ in split_top_level(constraints.strip()[1:-1]) if p.strip()]
        # XLA's parser fills missing layouts with the default one (its option
        # fill_missing_layouts, on by default; jaxlib 0.10.2 accepts them): a shape
        # without a layout, the custom-call's or a constraint's, is no error (older XLA
        # refused it: "Layout must be set on layout-constrained custom call").
        if len(items) != len(shapes):
            fail(f"Expected {len(shapes)} operand layout constraints, {len(items)} given")
        for i, (text, actual) in enumerate(zip(items, shapes)):
            s = parse_shape(text)
            if not compatible(s, actual):
                fail(f"Operand layout constraint shape {s.to_text()} for operand {i} is not "
                     f"compatible with operand shape {actual.to_text()}")

    def _async(self, g: Grammar, body: Body, inst: Instruction, amap: dict[str, str],
               op_tok: Token, fail) -> None:  # type: ignore[no-untyped-def]
        """The attributes an async-update/-done repeats must match its chain's."""
        if inst.opcode == "async-start" or not inst.operand_names:
            return
        prev = body.by_name.get(inst.operand_names[0])
        if prev is None:
            return
        chain = prev.called_computation_names
        thread = _unquote(amap.get("async_execution_thread", ""))
        chain_thread = self._chain_thread(body, prev)
        if thread and thread != chain_thread:
            fail(f"Expect async_execution_thread to be {chain_thread}, but got {thread}")
        calls = amap.get("calls", "").lstrip("%")
        if calls and chain and calls != chain[0]:
            fail(f"Expect async_wrapped_computation to be {chain[0]}, but got {calls}")

    @staticmethod
    def _chain_thread(body: Body, inst: Instruction) -> str:
        seen = 0
        while inst.opcode in ("async-update", "async-done") and inst.operand_names and seen < 64:
            nxt = body.by_name.get(inst.operand_names[0])
            if nxt is None:
                break
            inst = nxt
            seen += 1
        return _unquote(inst.attr("async_execution_thread") or "") or "main"

    # -- computations ---------------------------------------------------------------------------
    def computation(self, g: Grammar, comp: Computation) -> None:
        sig = self._signatures.pop(comp.name, None)
        if sig is not None:
            result, tok = sig
            root = comp.root
            if not compatible(result, root.shape):
                g.fail(f"Shape of computation {comp.name}, {result.without_layout()}, is not "
                       f"compatible with that of its root instruction {root.name}, "
                       f"{root.shape.without_layout()}", tok)


def check_module(module) -> tuple[str, Instruction] | None:  # type: ignore[no-untyped-def]
    """Module-wide rules XLA's parser applies after reading: each computation an
    async-start wraps has that one caller.  Returns (message, instruction) or None."""
    callers: dict[str, Instruction] = {}
    for inst in module.instructions():
        if inst.opcode == "async-start":
            for name in inst.called_computation_names[:1]:
                if name in callers:
                    return (f"Computation {name} is called by more than one async op.", inst)
                callers[name] = inst
    return None


def compatible(a: Shape, b: Shape) -> bool:
    """XLA's ShapeUtil::Compatible: the same types and dimensions, layouts aside."""
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(compatible(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    return a.element_type == b.element_type and a.dims == b.dims


def _unquote(v: str) -> str:
    v = v.strip()
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v
