"""The HLO module model: a module holds computations, which hold instructions.

The model is read-only.  Instructions keep their attributes as raw text and
decode each typed view (metadata, sharding, called computations, ...) on first
use, so reading a 100,000-instruction module stays fast while every field
remains reachable.
"""

from __future__ import annotations

import re

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import HloModelError, HloParseError
from .._repr import brief_repr, clip
from ._attrs import (
    AttributeSyntaxError,
    OpMetadata,
    parse_backend_config,
    parse_bool,
    parse_buffer_donors,
    parse_frontend_attributes,
    parse_input_output_alias,
    parse_int_list,
    parse_metadata,
    parse_name_list,
    parse_program_shape,
    shared_attributes,
    split_attributes,
    unquote,
)
from ._shape import Shape
from ._sharding import Sharding, parse_sharding
from ._numbers import ascii_int

__all__ = [
    "Instruction",
    "Computation",
    "Module",
    "StackFrameIndex",
    "FileLocation",
    "SourceLocation",
    "CALLED_COMPUTATION_KEYS",
]

# Attributes whose values name computations that an instruction calls.
CALLED_COMPUTATION_KEYS = (
    "calls", "to_apply", "condition", "body", "branch_computations",
    "true_computation", "false_computation", "called_computations", "select",
    "scatter", "comparator",
)
_EMPTY_METADATA = OpMetadata()
_SLICE_RE = re.compile(r"\[(-?[0-9]+):(-?[0-9]+)(?::(-?[0-9]+))?\]")
# Attribute text -> the computations it names (`Instruction._called_names`), a bounded cache.
_NAMED_CALLS: dict[str, tuple[str, ...]] = {}
# Whether an attribute text may name a called computation (a match inside a quoted
# string only sends the instruction down the full decoding path).
_MAY_CALL_RE = re.compile(r"(?:^|[\s,])(?:" + "|".join(CALLED_COMPUTATION_KEYS) + r")=")


@dataclass(frozen=True, slots=True)
class FileLocation:
    """One row of the ``FileLocations`` table, names resolved."""

    file: str
    function: str
    line: int
    end_line: int = 0
    column: int = 0
    end_column: int = 0


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where in the user's code an instruction came from.

    `frames` is the Python stack, innermost first, when the module carries
    stack-frame tables; otherwise it holds the one frame the metadata names.
    """

    file: str
    line: int
    function: str = ""
    column: int = 0
    frames: tuple[FileLocation, ...] = ()

    def __repr__(self) -> str:
        where = f"{self.file}:{self.line}" + (f":{self.column}" if self.column else "")
        fn = f" in {self.function}" if self.function else ""
        return clip(f"SourceLocation({where}{fn}, {len(self.frames)} "
                    f"frame{'' if len(self.frames) == 1 else 's'})")

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class StackFrameIndex:
    """The ``FileNames`` / ``FunctionNames`` / ``FileLocations`` / ``StackFrames``
    tables newer XLA versions print after the module header.

    Ids are 1-based as printed.  `frames[i]` is ``(file_location_id,
    parent_frame_id)`` as printed, where a parent id of ``k`` means frame
    ``k - 1`` and 1 (that is, frame 0) means no parent.
    """

    __repr__ = brief_repr

    file_names: tuple[str, ...] = ()
    function_names: tuple[str, ...] = ()
    file_locations: tuple[tuple[int, int, int, int, int, int], ...] = ()
    frames: tuple[tuple[int, int], ...] = ()

    def location(self, location_id: int) -> FileLocation | None:
        if not 1 <= location_id <= len(self.file_locations):
            return None
        f, fn, line, end_line, col, end_col = self.file_locations[location_id - 1]
        file = self.file_names[f - 1] if 1 <= f <= len(self.file_names) else ""
        func = self.function_names[fn - 1] if 1 <= fn <= len(self.function_names) else ""
        return FileLocation(file, func, line, end_line, col, end_col)

    def stack(self, frame_id: int) -> tuple[FileLocation, ...]:
        """The stack of `frame_id`, innermost frame first."""
        out: list[FileLocation] = []
        seen: set[int] = set()
        while 1 <= frame_id <= len(self.frames) and frame_id not in seen:
            seen.add(frame_id)
            loc_id, parent = self.frames[frame_id - 1]
            loc = self.location(loc_id)
            if loc is not None:
                out.append(loc)
            frame_id = parent - 1
        return tuple(out)

    def __bool__(self) -> bool:
        return bool(self.file_names or self.frames)


class Instruction:
    """One HLO instruction: ``[ROOT] name = shape opcode(operands), attributes``.

    `operand_names` are names in the same computation; `operands` resolves
    them.  `attributes` maps each attribute to its raw text; the typed
    properties decode it.  For a ``constant`` the literal is in `literal`; for a
    ``parameter``, its number is `parameter_number`.  `line` is the 1-based
    line in the source file.

    The ``X-start``/``X-update``/``X-done`` shorthand is modelled as XLA
    models it: `opcode` is ``async-start``/``-update``/``-done``, `sugar`
    keeps the printed form (``custom-call-start``) and `implicit_calls`
    names the computation that wraps X, which the text does not name.
    """

    __slots__ = (
        "name", "shape", "opcode", "operand_names", "attr_text", "is_root", "line",
        "computation", "literal", "parameter_number", "_attrs", "sugar", "implicit_calls",
        "_calls",
    )

    def __init__(self, name: str, shape: Shape, opcode: str, operand_names: tuple[str, ...],
                 attr_text: str, is_root: bool, line: int, literal: str | None = None,
                 parameter_number: int = -1, computation: Computation | None = None) -> None:
        self.name = name
        self.shape = shape
        self.opcode = opcode
        self.operand_names = operand_names
        self.attr_text = attr_text
        self.is_root = is_root
        self.line = line
        self.literal = literal
        self.parameter_number = parameter_number
        self.computation: Computation = computation  # type: ignore[assignment]
        self._attrs: Mapping[str, str] | None = None
        self.sugar = ""
        self.implicit_calls: tuple[str, ...] = ()
        # `called_computation_names`, decoded on first use; whoever rewrites attr_text,
        # sugar or implicit_calls afterwards (the parser, while it builds the model)
        # sets it back to None.
        self._calls: tuple[str, ...] | None = None

    def __repr__(self) -> str:
        return clip(f"<Instruction {self.name} = {self.shape} {self.sugar or self.opcode}>")

    @property
    def async_wrapped_opcode(self) -> str:
        """For ``async-start``/``-update``/``-done``: the opcode of the op they wrap, else ``""``."""
        if not self.opcode.startswith("async-"):
            return ""
        names = self.called_computation_names
        if not names or self.computation is None:
            return ""
        comp = self.computation.module._by_name.get(names[0])
        return comp.root.opcode if comp is not None else ""

    # -- attributes -------------------------------------------------------------
    @property
    def attributes(self) -> Mapping[str, str]:
        """Every attribute as raw text, in printed order (decoded on first use; read-only)."""
        attrs = self._attrs
        if attrs is None:
            try:
                attrs = shared_attributes(self.attr_text)
            except AttributeSyntaxError as e:
                raise self._error(f"bad attributes: {e}", e.offset) from None
            self._attrs = attrs
        return attrs

    def attr(self, key: str, default: str | None = None) -> str | None:
        """One raw attribute value, or `default`."""
        if self._attrs is None and key + "=" not in self.attr_text:
            return default
        return self.attributes.get(key, default)

    def _error(self, message: str, offset: int) -> HloParseError:
        module = self.computation.module if self.computation is not None else None
        filename = module.filename if module is not None else "<string>"
        lines = module.source_lines if module is not None else None
        text = lines(self.line) if lines is not None else self.attr_text
        col = text.find(self.attr_text)
        col = (col + offset + 1) if col >= 0 else 1
        return HloParseError(message, filename=filename, line=self.line, column=col,
                             line_text=text,
                             hint="the module text is damaged here; re-export it from XLA")

    @property
    def metadata(self) -> OpMetadata:
        v = self.attr("metadata")
        return parse_metadata(v) if v else _EMPTY_METADATA

    @property
    def sharding(self) -> Sharding | None:
        v = self.attr("sharding")
        return parse_sharding(v) if v else None

    @property
    def frontend_attributes(self) -> dict[str, str]:
        v = self.attr("frontend_attributes")
        return parse_frontend_attributes(v) if v else {}

    @property
    def backend_config(self) -> dict[str, Any] | str | None:
        """The backend_config: a dict when it is JSON, else its text; None if absent."""
        v = self.attr("backend_config")
        return parse_backend_config(v) if v is not None else None

    @property
    def fusion_kind(self) -> str:
        """``kLoop``, ``kInput``, ``kOutput`` or ``kCustom`` for fusions; ``""`` otherwise."""
        return self.attr("kind", "") or ""

    @property
    def custom_call_target(self) -> str:
        v = self.attr("custom_call_target")
        return unquote(v) if v else ""

    @property
    def dimensions(self) -> tuple[int, ...]:
        v = self.attr("dimensions")
        if not v:
            return ()
        try:
            return parse_int_list(v)
        except ValueError:
            raise HloModelError(
                f"{self.name}: dimensions={clip(v, 60)} is not a list of integers",
                hint="the module text is damaged here; re-export it from XLA") from None

    @property
    def slice_bounds(self) -> tuple[tuple[int, int, int], ...]:
        """A slice's (start, limit, stride) per dimension, from ``slice={[0:4], ...}``
        (stride 1 where none is printed); empty where there is none."""
        return tuple((int(a), int(b), int(c) if c else 1)
                     for a, b, c in _SLICE_RE.findall(self.attr("slice") or ""))

    @property
    def called_computation_names(self) -> tuple[str, ...]:
        """Names of the computations this instruction calls, in attribute order."""
        calls = self._calls
        if calls is None:
            calls = self._calls = self._called_names()
        return calls

    def _called_names(self) -> tuple[str, ...]:
        if self.sugar or not _MAY_CALL_RE.search(self.attr_text):
            # Most instructions name no computation; the async shorthand calls only the
            # wrapper it stands for (the wrapped op carries the attributes).
            return self.implicit_calls
        named = _NAMED_CALLS.get(self.attr_text)
        if named is None:  # decoded once per attribute text (loops sharing a body: once)
            attrs = self.attributes
            out: list[str] = []
            for key in CALLED_COMPUTATION_KEYS:
                v = attrs.get(key)
                if v:
                    out.extend(parse_name_list(v))
            named = tuple(out)
            if len(_NAMED_CALLS) >= 4096:
                _NAMED_CALLS.clear()
            _NAMED_CALLS[self.attr_text] = named
        return named + self.implicit_calls if self.implicit_calls else named

    @property
    def called_computations(self) -> tuple[Computation, ...]:
        module = self.computation.module
        return tuple(module.computation(n) for n in self.called_computation_names)

    # -- graph -------------------------------------------------------------------
    @property
    def operands(self) -> tuple[Instruction, ...]:
        by_name = self.computation.by_name
        return tuple(by_name[n] for n in self.operand_names)

    @property
    def users(self) -> tuple[Instruction, ...]:
        return self.computation.users(self)

    @property
    def source(self) -> SourceLocation | None:
        """The user's source line for this instruction, from metadata or stack frames."""
        md = self.metadata
        module = self.computation.module if self.computation is not None else None
        if md.stack_frame_id and module is not None and module.stack_frames:
            loc = module.frame_source(md.stack_frame_id)
            if loc is not None:
                return loc
        if md.source_file:
            return SourceLocation(md.source_file, md.source_line, column=md.source_column)
        return None

    def to_text(self, *, sigil: bool = True) -> str:
        """The instruction as one line of HLO text (without indentation)."""
        p = "%" if sigil else ""
        if self.literal is not None:
            inner = self.literal
        elif self.parameter_number >= 0:
            inner = str(self.parameter_number)
        else:
            inner = ", ".join(p + n for n in self.operand_names)
        out = (f"{'ROOT ' if self.is_root else ''}{p}{self.name} = {self.shape} "
               f"{self.sugar or self.opcode}({inner})")
        if self.attr_text:
            out += ", " + self.attr_text
        return out

    def key(self) -> tuple[Any, ...]:
        """What makes two instructions equal (used by `Module.__eq__`)."""
        return (self.name, self.shape, self.opcode, self.operand_names, self.attr_text,
                self.is_root, self.literal, self.parameter_number, self.sugar)


class Computation:
    """A named list of instructions; in a scheduled module, the list is the schedule.

    `origin` is ``""`` for a computation the text defines, ``"async"`` for
    the wrapper XLA makes around an op written with the async shorthand
    (``custom-call-start``); such a wrapper is implied by the text and not
    printed.
    """

    __slots__ = ("name", "instructions", "by_name", "is_entry", "signature", "attr_text",
                 "line", "module", "origin", "_users", "_callers")

    def __init__(self, name: str, instructions: list[Instruction], is_entry: bool,
                 signature: str, attr_text: str, line: int,
                 by_name: dict[str, Instruction] | None = None) -> None:
        self.name = name
        self.instructions = instructions
        self.by_name: dict[str, Instruction] = (
            by_name if by_name is not None else {i.name: i for i in instructions})
        for inst in instructions:
            if inst.computation is None:
                inst.computation = self
        self.is_entry = is_entry
        self.signature = signature
        self.attr_text = attr_text
        self.line = line
        self.module: Module = None  # type: ignore[assignment]
        self.origin = ""
        self._users: dict[str, tuple[Instruction, ...]] | None = None

    def __repr__(self) -> str:
        return clip(f"<Computation {self.name}: {len(self.instructions)} instructions>")

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    @property
    def root(self) -> Instruction:
        for inst in reversed(self.instructions):
            if inst.is_root:
                return inst
        return self.instructions[-1]

    @property
    def parameters(self) -> list[Instruction]:
        """Parameter instructions, by parameter number."""
        ps = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(ps, key=lambda i: i.parameter_number)

    @property
    def execution_thread(self) -> str:
        v = split_attributes(self.attr_text).get("execution_thread") if self.attr_text else None
        return unquote(v) if v else "main"

    def users(self, inst: Instruction) -> tuple[Instruction, ...]:
        if self._users is None:
            acc: dict[str, list[Instruction]] = {}
            for i in self.instructions:
                for n in dict.fromkeys(i.operand_names):
                    acc.setdefault(n, []).append(i)
            self._users = {k: tuple(v) for k, v in acc.items()}
        return self._users.get(inst.name, ())

    def to_text(self, *, sigil: bool = True) -> str:
        p = "%" if sigil else ""
        head = f"{'ENTRY ' if self.is_entry else ''}{p}{self.name}"
        if self.signature:
            head += " " + self.signature
        lines = [head + " {"]
        lines.extend("  " + i.to_text(sigil=sigil) for i in self.instructions)
        lines.append("}" + (", " + self.attr_text if self.attr_text else ""))
        return "\n".join(lines)


class Module:
    """An HLO module: header attributes, stack-frame tables and computations.

    `computations` keeps the printed order (callees before callers, the entry
    last in XLA's printing).  `attributes` holds the header's raw attributes;
    the typed properties decode them.  `filename` and `first_line` say where
    the text came from; `format` how it was found (``hlo``, ``markdown``,
    ``glog``, ``notebook``).  `headerless` is True when the text had no
    ``HloModule`` line; the module is then named as XLA names it,
    ``module_`` and its entry computation's name.
    """

    def __init__(self, name: str, attr_text: str, computations: list[Computation],
                 stack_frames: StackFrameIndex, *, filename: str = "<string>",
                 first_line: int = 1, format: str = "hlo") -> None:
        self.name = name
        self.attr_text = attr_text
        self.computations = computations
        self.stack_frames = stack_frames
        self.filename = filename
        self.first_line = first_line
        self.format = format
        self.headerless = False
        # The entry parameters the front end donated (hloscope.inspect: JAX's
        # donate_argnums), those JAX dropped before XLA saw them included.
        self.donated: tuple[int, ...] = ()
        # Where the module came from, when the source says more than a file and a line:
        # a torch_xla graph's name, Python frames and hash; a dump's file and phase.
        self.provenance: dict[str, Any] = {}
        self.source_lines: Any = None  # callable line_no -> original text, set by the reader
        self._by_name = {c.name: c for c in computations}
        self._attrs: dict[str, str] | None = None
        self._callers: dict[str, list[Instruction]] | None = None
        self._frame_sources: dict[int, SourceLocation | None] = {}
        entries = [c for c in computations if c.is_entry]
        self.entry: Computation = entries[0] if entries else computations[-1]
        for c in computations:
            c.module = self

    def __repr__(self) -> str:
        return clip(f"<Module {self.name}: {len(self.computations)} computations, "
                    f"{self.instruction_count} instructions>")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Module):
            return NotImplemented
        return self.structure_key() == other.structure_key()

    __hash__ = None  # type: ignore[assignment]

    def structure_key(self) -> tuple[Any, ...]:
        return (
            self.name, self.attr_text, self.stack_frames,
            tuple((c.name, c.is_entry, c.signature, c.attr_text,
                   tuple(i.key() for i in c.instructions)) for c in self.computations),
        )

    # -- lookup --------------------------------------------------------------------
    def computation(self, name: str) -> Computation:
        try:
            return self._by_name[name]
        except KeyError:
            raise HloModelError(f"module {self.name} has no computation named {name!r}",
                                hint="names are printed without the leading '%'") from None

    def instructions(self) -> Iterator[Instruction]:
        """Every instruction of every computation, in printed order."""
        for c in self.computations:
            yield from c.instructions

    @property
    def instruction_count(self) -> int:
        return sum(len(c.instructions) for c in self.computations)

    def frame_source(self, frame_id: int) -> SourceLocation | None:
        """The source location of stack frame `frame_id` (innermost frame first)."""
        try:
            return self._frame_sources[frame_id]
        except KeyError:
            pass
        frames = self.stack_frames.stack(frame_id)
        loc = None
        if frames:
            f = frames[0]
            loc = SourceLocation(f.file, f.line, f.function, f.column, frames)
        self._frame_sources[frame_id] = loc
        return loc

    def callers(self, computation: Computation) -> list[Instruction]:
        """Instructions that call `computation`."""
        if self._callers is None:
            acc: dict[str, list[Instruction]] = {}
            for inst in self.instructions():
                for n in inst.called_computation_names:
                    acc.setdefault(n, []).append(inst)
            self._callers = acc
        return self._callers.get(computation.name, [])

    # -- header --------------------------------------------------------------------
    @property
    def attributes(self) -> dict[str, str]:
        if self._attrs is None:
            self._attrs = split_attributes(self.attr_text)
        return self._attrs

    @property
    def is_scheduled(self) -> bool:
        v = self.attributes.get("is_scheduled")
        return parse_bool(v) if v else False

    @property
    def num_partitions(self) -> int:
        v = self.attributes.get("num_partitions")
        return ascii_int(v) if v else 1

    @property
    def replica_count(self) -> int:
        v = self.attributes.get("replica_count")
        return ascii_int(v) if v else 1

    @property
    def entry_computation_layout(self) -> tuple[tuple[Shape, ...], Shape] | None:
        """(parameter shapes, result shape) from the header, or None when not printed."""
        v = self.attributes.get("entry_computation_layout")
        return parse_program_shape(v) if v else None

    @property
    def input_output_alias(self) -> tuple[tuple[tuple[int, ...], int, tuple[int, ...], str], ...]:
        """``(output_index, parameter_number, parameter_index, kind)`` per alias."""
        v = self.attributes.get("input_output_alias")
        return parse_input_output_alias(v) if v else ()

    @property
    def buffer_donors(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        v = self.attributes.get("buffer_donor")
        return parse_buffer_donors(v) if v else ()

    @property
    def frontend_attributes(self) -> dict[str, str]:
        v = self.attributes.get("frontend_attributes")
        return parse_frontend_attributes(v) if v else {}

    # -- printing --------------------------------------------------------------------
    def to_text(self, *, sigil: bool = True) -> str:
        """The module as HLO text; parsing it gives back an equal module."""
        head = f"HloModule {self.name}" + (", " + self.attr_text if self.attr_text else "")
        parts = [head]
        frames = self.stack_frames_text()
        if frames:
            parts.append(frames)
        parts.extend(c.to_text(sigil=sigil) for c in self.computations if not c.origin)
        return "\n\n".join(parts) + "\n"

    def stack_frames_text(self) -> str:
        """The module's stack frame tables as HLO text (empty without any)."""
        sf = self.stack_frames
        if sf:
            rows = ["FileNames"]
            rows += [f"{i} {_quote(n)}" for i, n in enumerate(sf.file_names, 1)]
            rows.append("\nFunctionNames")
            rows += [f"{i} {_quote(n)}" for i, n in enumerate(sf.function_names, 1)]
            rows.append("\nFileLocations")
            rows += [
                f"{i} {{file_name_id={a} function_name_id={b} line={c} end_line={d} "
                f"column={e} end_column={f}}}"
                for i, (a, b, c, d, e, f) in enumerate(sf.file_locations, 1)
            ]
            rows.append("\nStackFrames")
            rows += [f"{i} {{file_location_id={a} parent_frame_id={b}}}"
                     for i, (a, b) in enumerate(sf.frames, 1)]
            return "\n".join(rows)
        return ""

    def __str__(self) -> str:
        return self.to_text()


def _quote(s: str) -> str:
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{out}"'
