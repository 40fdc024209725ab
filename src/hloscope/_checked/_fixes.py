"""The fixes hloscope can apply without the user: one per kind of finding, each the same
program with one mechanical change.

- ``donate`` (HS110): the arguments the finding names, donated (`donate_argnums` /
  `donate_argnames`, found from the parameters' op_names: JAX names each parameter by
  its argument's path).
- ``exposed-collective`` (HS113): the XLA flags the finding recommends
  (``--xla_gpu_enable_pipelined_all_gather=true`` ...), as compile options.
- ``remat`` (HS111): every `jax.lax.scan` body the function traces wrapped in
  `jax.checkpoint` with the policy the finding names; only where the program has a loop
  and checkpoints nothing yet (wrapping the whole function is not the advice).
- ``upcast`` (HS112): see `_upcast`.

Every other finding keeps its estimate, with how it was made (`ESTIMATED`) and why no fix
was compiled.
"""

from __future__ import annotations

import inspect as _inspect
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .._analysis._findings import FindingGroup
from ._program import Fix, Program, rejit
from ._upcast import upcast_fix

__all__ = ["ESTIMATED", "plan"]

# How each rule estimates its saving (docs/advisor.md, "saving estimated").
ESTIMATED = {
    "HS101": "from the intermediate's bytes written and read back",
    "HS102": "from the constant's bytes",
    "HS103": "from the copy's bytes written and read",
    "HS104": "from the array's bytes at the peak and its traffic",
    "HS105": "from the loop state's reads and writes",
    "HS106": "from the temporaries' bytes at the peak",
    "HS107": "from the donated bytes",
    "HS108": "from the f64 arrays' bytes",
    "HS109": "from the collective's bytes at the link bandwidth",
    "HS110": "from the updated outputs' bytes",
    "HS111": "from the saved values' bytes at the peak",
    "HS112": "from the f32 copy's traffic and the matmul's flops at the f32 rate",
    "HS113": "from the exposed bytes at the link bandwidth (with XLA's flags, at most one "
             "loop iteration's compute; for a collective matmul, at most the matmul's time)",
    "HS114": "from the second collective's bytes at the link bandwidth",
    "HS115": "from the padding's bytes",
    "HS123": "from the triangular solves' flops for the identity's right-hand sides",
    "HS124": "from the sorted outputs' bytes written and read back",
    "HS125": "from the copies' bytes written and read, every iteration",
    "HS126": "from the loop's kernel launches beyond one",
    "HS127": "from the state's bytes rewritten (and copied) beyond the new piece, every "
             "iteration",
}
NOT_MECHANICAL = "the fix is a change to the program's code"


def plan(groups: list[FindingGroup], report: Any,
         program: Program) -> tuple[list[Fix], dict[str, str]]:
    """The fixes to compile for `groups` (at most one per kind) and, per rule, why its
    findings stay estimated."""
    fixes: list[Fix] = []
    why: dict[str, str] = {}
    rules = list(dict.fromkeys(g.rule for g in groups))
    for rule in rules:
        mine = [g for g in groups if g.rule == rule]
        builder = _BUILDERS.get(rule)
        try:
            got = builder(mine, report, program) if builder is not None else NOT_MECHANICAL
        except Exception as e:  # noqa: BLE001  (the advice stands without its check)
            got = f"hloscope could not build the fix ({type(e).__name__}: {e})"[:200]
        if isinstance(got, Fix):
            fixes.append(got)
        else:
            why[rule] = got
    return fixes, why


# -- donation (HS110) -------------------------------------------------------------------

_ARG = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:$|[\[.])")
_NUMBERS = re.compile(r"parameters? ((?:\d+(?:, )?)+)")
_ADVISED = re.compile(r"donate_argnames=\(([^)]*)\)")


def _positional(fn: Any) -> list[str]:
    try:
        sig = _inspect.signature(getattr(fn, "__wrapped__", fn))
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _donation(groups: list[FindingGroup], report: Any, program: Program) -> Fix | str:
    evidence = [(e.name, e.op_name) for g in groups for f in g.findings for e in f.evidence
                if e.what == "parameter"]
    # The evidence lists a few parameters; the message numbers more of them.
    params = report.module.entry.parameters
    by_number = {p.parameter_number: p for p in params}
    for g in groups:
        for f in g.findings:
            for listed in _NUMBERS.findall(f.message):
                for n in re.findall(r"\d+", listed):
                    p = by_number.get(int(n))
                    if p is not None:
                        evidence.append((p.name, p.metadata.op_name))
    positional = _positional(program.fn)
    nums: set[int] = set()
    names: set[str] = set()
    # The arguments the advice tells the user to donate, all of them (its message numbers
    # only the first parameters, its evidence a few): the fix compiled is the one advised.
    for g in groups:
        for f in g.findings:
            for listed in _ADVISED.findall(f.suggestion):
                for name in re.findall(r"'([^']+)'", listed):
                    if name in program.kwargs:
                        names.add(name)
                    elif name in positional and positional.index(name) < len(program.args):
                        nums.add(positional.index(name))
    unresolved = []
    for e in dict.fromkeys(evidence):
        m = _ARG.match(e[1] or "")
        name = m.group(1) if m else None
        if name is not None and name in program.kwargs:
            names.add(name)
        elif name is not None and name in positional and \
                positional.index(name) < len(program.args):
            nums.add(positional.index(name))
        else:
            unresolved.append(e)
    if unresolved:
        # No usable name: the parameter's number among the arguments' leaves, where
        # every leaf became a parameter (nothing static, nothing dropped).
        import jax

        leaves = [i for i, a in enumerate(program.args)
                  for _ in jax.tree_util.tree_leaves(a)]
        if program.kwargs or program.static_argnums or len(leaves) != len(params):
            return "the donated arguments could not be told from the parameters' names"
        by_name = {p.name: p.parameter_number for p in params}
        for e in unresolved:
            n = by_name.get(e[0])
            if n is None:
                return "the donated arguments could not be told from the parameters' names"
            nums.add(leaves[n])
    if not nums and not names:
        return "the finding names no argument to donate"
    change: dict[str, Any] = {}
    words = []
    if nums:
        change["donate_argnums"] = tuple(sorted(nums))
        words.append(f"donate_argnums={tuple(sorted(nums))}")
    if names:
        change["donate_argnames"] = tuple(sorted(names))
        words.append(f"donate_argnames={tuple(sorted(names))}")
    fn = rejit(program, **change)
    return Fix("donate", ("HS110",), "jax.jit(..., " + ", ".join(words) + ")",
               program.with_fn(fn), "footprint")


# -- XLA flags (HS113) ------------------------------------------------------------------

_FLAG = re.compile(r"--(xla_[a-z0-9_]+)=(true|false)\b")


def _xla_flags(groups: list[FindingGroup], report: Any, program: Program) -> Fix | str:
    flags: dict[str, bool] = {}
    for g in groups:
        for f in g.findings:
            for name, value in _FLAG.findall(f.suggestion):
                flags[name] = value == "true"
    if not flags:
        return ("the overlap it suggests (a scan over layers, a collective matmul) is a "
                "change to the program's code")
    words = " ".join(f"--{k}={'true' if v else 'false'}" for k, v in flags.items())
    return Fix("exposed-collective", ("HS113",), f"XLA_FLAGS='{words}'",
               program.with_options(flags), "exposed")


# -- rematerialization (HS111) ----------------------------------------------------------

_POLICY = re.compile(r"\b([a-z_]*saveable|checkpoint_dots[a-z_]*|save_anything_except_these_names"
                     r"|offload_dot_with_no_batch_dims)\b")


def _remat(groups: list[FindingGroup], report: Any, program: Program) -> Fix | str:
    text = report.hlo_after
    if "rematted_computation" in text or "checkpoint" in report.jaxpr:
        return ("the program uses jax.checkpoint already: a finer grain or segments are a "
                "change to its code")
    if " while(" not in text and "while" not in report.jaxpr:
        return ("there is no scan body to wrap: jax.checkpoint on the layer function is a "
                "change to the program's code")
    named = [p for g in groups for f in g.findings for p in _POLICY.findall(f.suggestion)]
    # nothing_saveable where the advice names it: its estimate is every saved value's
    # bytes, which that policy drops; else the first policy it names.
    policy = "nothing_saveable" if "nothing_saveable" in named or not named else named[0]
    reached: list[int] = []
    user = getattr(program.fn, "__wrapped__", None) if hasattr(program.fn, "_jit_info") \
        else program.fn

    def checkpointed(*args: Any, **kwargs: Any) -> Any:
        with _scan_bodies_checkpointed(policy, reached):
            return user(*args, **kwargs)

    return Fix("remat", ("HS111",),
               f"jax.checkpoint(body, policy=jax.checkpoint_policies.{policy}) on each "
               "lax.scan body", program.with_fn(rejit(program, checkpointed)), "footprint",
               lambda: bool(reached))


@contextmanager
def _scan_bodies_checkpointed(policy: str, reached: list[int]) -> Iterator[None]:
    """While the function is traced: `jax.lax.scan` wraps its body in `jax.checkpoint`
    (the user's code calls ``jax.lax.scan`` / ``lax.scan`` through the module)."""
    import jax

    scan = jax.lax.scan
    chosen = getattr(jax.checkpoint_policies, policy)

    def wrapped_scan(f: Any, *args: Any, **kwargs: Any) -> Any:
        reached.append(1)
        return scan(jax.checkpoint(f, policy=chosen, prevent_cse=False), *args, **kwargs)

    jax.lax.scan = wrapped_scan
    try:
        yield
    finally:
        jax.lax.scan = scan


_BUILDERS: dict[str, Callable[[list[FindingGroup], Any, Program], Fix | str]] = {
    "HS110": _donation, "HS111": _remat, "HS112": upcast_fix, "HS113": _xla_flags,
}
