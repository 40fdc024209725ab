"""The advisor: rules that read the kernel graph and the memory analysis for the user.

Each rule has an id, a name and a title; each finding its evidence (kernels and arrays,
with their source lines), a change to try in the user's code, and what acting on it
would save (`Saving`: peak memory, memory traffic, kernels, time on the device).  A
finding fires only where the saving is measurable: the findings of one rule on one
pattern are grouped (`FindingGroup`: one per pattern of a 64-layer model, not 64), and a
group is kept only when it saves at least 1% of the program's peak or estimated time
(`_advice_context.worth_it`), or where its pattern is the issue whatever its time (a host
round trip in every step of a loop: `_rules_program.by_structure`).  On a module XLA has
not optimized only the rules about what survives compilation run.  `advise` and
`advise_groups` are pure functions; `RULES` lists the rules (docs/advisor.md explains
each, with its saving and its fix).
"""

from __future__ import annotations

from dataclasses import replace

from .._hlo._module import Module
from ._advice_context import AdviceContext, Rule
from ._dataflow import Dataflow, analyze_dataflow
from ._devices import Device
from ._findings import Check, Evidence, Finding, FindingGroup, Saving, group_findings
from ._kernels import KernelGraph, kernel_graph
from ._liverange import LiveRanges, compute_live_ranges
from ._rules_algorithms import inverse_instead_of_solve, sort_for_top_k
from ._rules_attention import attention_scores
from ._rules_batching import vmapped_side_by_side
from ._rules_devices import exposed_collective, loop_collective, repeated_collective, tile_padding
from ._rules_kernels import large_constant, layout_copy, recompute, reduction_split
from ._rules_loops import (loop_state, reduction_in_blocks, reduction_in_pieces, rotated_carry,
                          selected_state, shifted_state)
from ._rules_program import (by_structure, constant_rebuilt, host_transfer, onehot_gather,
                             small_kernels, unrolled_loop)
from ._rules_sharded import accumulated_collective, gathered_weights
from ._rules_memory import (donation_missing, donation_unused, f64, precision_upcast, remat,
                            side_by_side, upcast_note)
from ._walk import paused_gc

__all__ = ["ADVICE_SCHEMA", "RECHECKED", "RULES", "Advice", "Evidence", "Finding",
           "FindingGroup", "Rule", "Saving", "advise", "advise_groups", "apply_saved_checks",
           "saved_checks", "unrolled_before_optimization", "with_room"]

ADVICE_SCHEMA = "hloscope.lint/3"
# Rules whose estimate can be far below what compiling the fix finds, and whose fix is one
# cheap compile: their groups under the threshold are checked too (`Advice.pending`).  A
# donation's estimate counts the arguments that come back in the same shape; compiled, a
# new user's ViT step saved 1.87 GiB (3.0%) where 331 MiB (0.5%) was estimated.
RECHECKED = ("HS110",)

RULES: tuple[Rule, ...] = (
    Rule("HS101", "reduction-split", "a reduction splits what could be one kernel",
         reduction_split),
    Rule("HS102", "large-constant", "a large constant is folded into the program",
         large_constant, before_optimization=True),
    Rule("HS103", "layout-copy", "a copy next to a library call changes the layout",
         layout_copy),
    Rule("HS104", "recompute", "a cheap intermediate is stored instead of recomputed",
         recompute),
    Rule("HS105", "loop-state", "a short loop keeps its state in memory between iterations",
         loop_state),
    Rule("HS106", "side-by-side", "independent large temporaries are alive together at the "
         "peak", side_by_side),
    Rule("HS107", "donation-unused", "a donated argument is not reused", donation_unused,
         before_optimization=True),
    Rule("HS108", "f64", "f64 arrays in an f32 program", f64, before_optimization=True),
    Rule("HS109", "loop-collective", "a collective in a loop moves the same data every "
         "iteration", loop_collective),
    Rule("HS110", "donate", "updated arguments are not donated", donation_missing,
         before_optimization=True),
    Rule("HS111", "remat", "values saved for the backward pass dominate the peak", remat),
    Rule("HS112", "upcast", "bf16/f16 values are upcast to f32 on the way to a matmul",
         precision_upcast, before_optimization=True),
    Rule("HS113", "exposed-collective", "a collective is not overlapped with any compute",
         exposed_collective),
    Rule("HS114", "repeated-collective", "the same collective runs twice on the same data",
         repeated_collective),
    Rule("HS115", "tpu-padding", "a TPU tiled layout pads a value far beyond its elements",
         tile_padding),
    Rule("HS116", "gathered-weights", "full weights of several layers are alive together",
         gathered_weights),
    Rule("HS117", "unrolled-loop", "a Python loop is unrolled into many copies of one body",
         unrolled_loop, before_optimization=True),
    Rule("HS118", "constant-rebuilt", "a large array is rebuilt from constants on every call",
         constant_rebuilt),
    Rule("HS119", "onehot-gather", "an embedding lookup is written as a one-hot matmul",
         onehot_gather),
    Rule("HS120", "host-transfer", "the program stops for the host inside a loop",
         host_transfer),
    Rule("HS121", "small-kernels", "work is split into many kernels too small to pay for "
         "their launch", small_kernels),
    Rule("HS122", "repeated-collective", "a collective reduces every iteration what is only "
         "summed", accumulated_collective),
    Rule("HS123", "inverse-instead-of-solve", "an explicit inverse is computed only to be "
         "multiplied by", inverse_instead_of_solve),
    Rule("HS124", "sort-for-top-k", "a full sort where only the top k are kept",
         sort_for_top_k),
    Rule("HS125", "loop-state", "a loop's state is rotated and copied every iteration",
         rotated_carry),
    Rule("HS126", "reduction-split", "a reduction is computed in blocks by a loop",
         reduction_in_blocks),
    Rule("HS127", "loop-state", "a loop shifts its state to add a piece of it",
         shifted_state),
    # (before HS128, which leaves attention's scores to it)
    Rule("HS130", "attention", "attention scores are written to memory", attention_scores),
    Rule("HS128", "side-by-side", "jax.vmap holds every item's intermediates at once",
         vmapped_side_by_side),
    Rule("HS129", "reduction-split", "one reduction is computed in pieces",
         reduction_in_pieces),
    Rule("HS131", "loop-state", "a loop writes one slice of its state by choosing over all "
         "of it", selected_state),
)


class Advice:
    """What `advise_groups` found: the groups worth a user's attention, ranked, and what
    the estimates are for (`device`: None on a CPU module, where no time is printed)."""

    __slots__ = ("checked_out", "device", "explained", "groups", "notes", "optimized",
                 "pending", "quiet")

    def __init__(self, groups: list[FindingGroup], device: str | None, optimized: bool,
                 quiet: int, notes: tuple[str, ...] = (),
                 checked_out: tuple[tuple[str, str], ...] = (),
                 pending: tuple[FindingGroup, ...] = (), explained: int = 0) -> None:
        self.groups = groups
        self.device = device
        self.optimized = optimized
        self.quiet = quiet  # findings left out as not worth it
        self.notes = notes  # what is worth knowing though it saves nothing here
        # (rule, place) of the groups whose fix, compiled, saved too little: left out
        self.checked_out = checked_out
        # Groups left out (counted in `quiet`) whose estimate may be low where compiling
        # their fix is cheap (`RECHECKED`): checking compiles them too, and keeps those it
        # finds worth it.
        self.pending = pending
        # Of `quiet`, those left out with a note saying why (a checked fix that saved too
        # little, remat on a roomy target): not under the threshold, so --min-share 0
        # does not list them.
        self.explained = explained

    def __repr__(self) -> str:
        n = sum(g.count for g in self.groups)
        return f"Advice({len(self.groups)} groups, {n} findings, {self.quiet} left out)"

    @property
    def findings(self) -> list[Finding]:
        return [f for g in self.groups for f in g.findings]

    def to_dict(self) -> dict[str, object]:
        return {"device": self.device, "optimized": self.optimized, "left_out": self.quiet,
                "notes": list(self.notes), "groups": [g.to_dict() for g in self.groups]}


def saved_checks(advice: Advice) -> dict[str, object]:
    """What checking `advice` found (`hloscope._checked`), to save beside a report: each
    group's rule and place with its checked saving, share and `Check`, and the notes and
    count of what checking left out.  `apply_saved_checks` puts them back on the same
    module's advice, recomputed."""
    return {"groups": [{"rule": g.rule, "place": g.first.place,
                        "saving": g.saving.to_dict(), "share": g.share, "basis": g.basis,
                        "check": g.check.to_dict()}
                       for g in advice.groups if g.check is not None],
            "left_out_groups": [{"rule": r, "place": p} for r, p in advice.checked_out],
            "notes": list(advice.notes), "left_out": advice.quiet}


def apply_saved_checks(advice: Advice, saved: dict[str, object]) -> Advice:
    """`advice` (recomputed from a saved report's module) as it was checked when the report
    was saved (`saved_checks`): checked groups with their checks, the groups checking
    left out left out again, its notes; a group saved with neither (under the threshold
    then) as it is.  A malformed entry raises ValueError."""
    kept: dict[tuple[str, str], tuple[Saving, float, str, Check]] = {}
    groups = saved.get("groups")
    if not isinstance(groups, list):
        raise ValueError("advice_checks.groups is not a list")
    for e in groups:
        if not isinstance(e, dict) or not isinstance(e.get("rule"), str) or not isinstance(
                e.get("place"), str):
            raise ValueError("advice_checks.groups holds an entry without rule and place")
        share, basis = e.get("share"), e.get("basis")
        if not isinstance(share, (int, float)) or isinstance(share, bool) or not share >= 0:
            raise ValueError("advice_checks.groups[].share is not a number")
        if not isinstance(basis, str):
            raise ValueError("advice_checks.groups[].basis is not text")
        kept[(e["rule"], e["place"])] = (Saving.from_dict(e.get("saving")), float(share),
                                         basis, Check.from_dict(e.get("check")))
    out_groups = saved.get("left_out_groups", [])
    if not isinstance(out_groups, list) or not all(
            isinstance(e, dict) and isinstance(e.get("rule"), str)
            and isinstance(e.get("place"), str) for e in out_groups):
        raise ValueError("advice_checks.left_out_groups is not a list of rules and places")
    dropped = {(e["rule"], e["place"]) for e in out_groups}
    notes, left_out = saved.get("notes", []), saved.get("left_out", advice.quiet)
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ValueError("advice_checks.notes is not a list of text")
    if not isinstance(left_out, int) or isinstance(left_out, bool) or left_out < 0:
        raise ValueError("advice_checks.left_out is not a count")
    out: list[FindingGroup] = []
    raised = explained = 0  # findings of pending groups checking kept; of dropped groups
    for g in advice.groups:
        key = (g.rule, g.first.place)
        e = kept.get(key)
        if e is not None:
            out.append(replace(g, saving=e[0], share=e[1], basis=e[2], check=e[3]))
        elif key not in dropped:  # under the threshold when saved (lint --min-share 0)
            out.append(g)
        else:
            explained += g.count
    for g in advice.pending:  # under the threshold, kept by checking (`RECHECKED`)
        e = kept.get((g.rule, g.first.place))
        if e is not None:
            out.append(replace(g, saving=e[0], share=e[1], basis=e[2], check=e[3]))
            raised += g.count
    out.sort(key=lambda g: -g.share)
    return Advice(out, advice.device, advice.optimized, max(left_out, advice.quiet - raised),
                  tuple(dict.fromkeys((*advice.notes, *notes))),
                  tuple(sorted(dropped | set(advice.checked_out))),
                  explained=advice.explained + explained)


# Advice that frees memory at a cost in time (recomputation, items one at a time): not
# worth it where the program fits with most of the device's memory to spare.
_MEMORY_FOR_TIME = ("HS111", "HS128")
ROOMY = 0.5  # a program needing at most this share of the device's memory fits roomily


def with_room(advice: Advice, need: int, usable: int, device: str) -> Advice:
    """`advice` on a target where the program needs `need` of `usable` bytes: where that
    is at most `ROOMY` of it, the groups that trade time for memory (remat, items one at a
    time) are left out with a note saying why (a new user's MoE layer, with 57 GiB to
    spare on an H100, was told to checkpoint)."""
    if usable <= 0 or need > ROOMY * usable:
        return advice
    from .._units import format_bytes

    kept, notes, out = [], list(advice.notes), []
    for g in advice.groups:
        if g.rule not in _MEMORY_FOR_TIME:
            kept.append(g)
            continue
        out.append((g.rule, g.first.place))
        cost = ("a checkpoint would recompute the forward pass" if g.rule == "HS111" else
                "running the items one at a time would take longer")
        notes.append(f"{g.rule} {g.title}: left out: the program needs "
                     f"{format_bytes(need)} of the {format_bytes(usable)} it may use on "
                     f"{device}; {cost} to free memory it does not need (act on it to fit "
                     "a larger batch or model)")
    if not out:
        return advice
    return Advice(kept, advice.device, advice.optimized, advice.quiet + len(out),
                  tuple(notes), advice.checked_out + tuple(out), advice.pending,
                  advice.explained + len(out))


def _optimized(module: Module) -> bool:
    return module.is_scheduled or any(i.opcode == "fusion" for i in module.entry.instructions)


def advise_groups(module: Module, *, graph: KernelGraph | None = None,
                  df: Dataflow | None = None, lr: LiveRanges | None = None,
                  device: Device | None = None, device_label: str | None = None,
                  min_share: float | None = None) -> Advice:
    """The findings worth a user's attention, grouped by rule and pattern and ranked by
    what acting on them would save (see the module docstring).  `device`: what the time
    estimates are for (default: assumed from the module); `min_share`: the share of the
    program a group must save (default 1%; 0 keeps every finding)."""
    with paused_gc():
        df = df if df is not None else analyze_dataflow(module)
        lr = lr if lr is not None else compute_live_ranges(df)
        graph = graph if graph is not None else kernel_graph(module, df=df, lr=lr)
        ctx = AdviceContext(module, graph, df, lr, device, device_label)
        optimized = _optimized(module)
        found: list[Finding] = []
        for rule in RULES:
            if optimized or rule.before_optimization:
                ctx.found[rule.id] = fired = rule.check(ctx)
                found.extend(f if f.kind else replace(f, kind=rule.kind) for f in fired)
        groups = group_findings(found, ctx.share)
        if min_share is None:
            kept = [g for g in groups if ctx.worth_it(g.saving) or by_structure(g)]
        else:
            kept = [g for g in groups if g.share >= min_share]
        quiet = sum(g.count for g in groups) - sum(g.count for g in kept)
        notes = tuple(n for n in (upcast_note(ctx),) if n)
        pending = tuple(g for g in groups if g.rule in RECHECKED and g not in kept) \
            if min_share is None else ()
        return Advice(kept, ctx.device_label, optimized, quiet, notes, pending=pending)


class _Lowered:
    """What HS117 reads of the module JAX gave XLA: the module and its savings."""

    def __init__(self, module: Module) -> None:
        self.module = module

    def saving(self, *, instructions: int = 0, **_: object) -> Saving:
        return Saving(instructions=int(instructions))


def unrolled_before_optimization(advice: Advice, lowered: Module) -> Advice:
    """`advice` (of the optimized module) with HS117's group on the module JAX gave XLA
    where the optimized one hides the copies (XLA fused each step's elementwise work
    into the next one's, so no two copies compile alike) and none was found there: the
    copies XLA compiled are those of the lowered module."""
    if any(g.rule in ("HS116", "HS117") for g in advice.groups):
        # (HS116's gathered layers: their fix is the same scan, said once there.)
        return advice
    found = unrolled_loop(_Lowered(lowered))  # type: ignore[arg-type]
    n = lowered.instruction_count or 1
    groups = [g for g in group_findings(
        (replace(f, kind="unrolled-loop") for f in found),
        lambda s: (min(1.0, s.instructions / n), "instructions")) if g.share >= 0.01]
    if not groups:
        return advice
    kept = sorted(advice.groups + groups, key=lambda g: -g.share)
    return Advice(kept, advice.device, advice.optimized, advice.quiet, advice.notes,
                  advice.checked_out, advice.pending, advice.explained)


def advise(module: Module, *, graph: KernelGraph | None = None, df: Dataflow | None = None,
           lr: LiveRanges | None = None, device: Device | None = None) -> list[Finding]:
    """Every finding worth a user's attention, the most valuable group first (each group's
    findings together): `advise_groups(...).findings`."""
    return advise_groups(module, graph=graph, df=df, lr=lr, device=device).findings
