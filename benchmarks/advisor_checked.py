"""How close the advisor's estimates are to XLA's own figures, where hloscope can compile
the fix, and what checking costs.

For each program of a labelled set, `hloscope.inspect` compiles it and reads its advice
twice: unchecked (``check=False``) and checked (every mechanical fix compiled: donation,
XLA flags, remat of scan bodies, upcast matmuls).  Per checked finding it prints the
advisor's estimate, the checked figure (XLA's difference between the two compiles),
their ratio and whether the estimate is within 2x; then the share within 2x, and
inspect's time with and without checking (the target: checking adds at most 3x).

    python benchmarks/advisor_checked.py     # tests/advisor_programs.py and EXTRA below
    python benchmarks/advisor_checked.py --cases tests/advisor_blind.py:CASES
    python benchmarks/advisor_checked.py --only sgd_step_not_donated,rnn_grad

A case's `build()` either returns a `Program` (an object with `fn`, `args` and optionally
`target`, `kwargs`, `mesh`, `shard`) or, as in tests/advisor_programs.py, compiles with
`hloscope.inspect` itself (the call is recorded and compiled again here); cases built
from HLO files have no function and are skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import hloscope  # noqa: E402
from hloscope._checked._compare import checked_groups  # noqa: E402
from hloscope._checked._program import Program  # noqa: E402
from hloscope._jax import _inspect as base  # noqa: E402


class _Case:
    """A program of this script's own (`EXTRA`): `build()` returns its `Program`."""

    def __init__(self, name: str, build: Any) -> None:
        self.name, self.build = name, build


def _fsdp_scan() -> Program:
    """The README's FSDP scan step (examples/train_step.py) for 8 H100s: HS111 and
    HS113 with XLA's pipelining flags."""
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(ROOT / "examples"))
    from train_step import train_step

    return Program(train_step, (jax.ShapeDtypeStruct((8, 2048, 2048), jnp.bfloat16),
                                jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16)),
                   target="h100x8", shard={0: "None,data,None", 1: "data"})


def _sgd_cpu() -> Program:
    """examples/sgd_step.py on the CPU: HS110."""
    sys.path.insert(0, str(ROOT / "examples"))
    from sgd_step import make_inputs, sgd_step

    return Program(sgd_step, tuple(make_inputs()))


EXTRA = [_Case("fsdp_scan_h100x8", _fsdp_scan), _Case("examples_sgd_step", _sgd_cpu)]


def _load(spec: str) -> list[Any]:
    if spec == "EXTRA":
        return list(EXTRA)
    path, _, attr = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path
                                                         if not os.path.isabs(path) else path)
    module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
    sys.modules[module_spec.name] = module  # type: ignore[union-attr]
    module_spec.loader.exec_module(module)  # type: ignore[union-attr]
    return list(getattr(module, attr or "CASES"))


def program_of(case: Any) -> Program | None:
    """The function, arguments and target a case compiles (None: an HLO file)."""
    seen: list[Program] = []
    real = hloscope.inspect

    def record(fn: Any, *args: Any, **kw: Any) -> Any:
        kw.pop("check", None)
        names = ("static_argnums", "static_argnames", "compiler_options", "target", "mesh",
                 "shard")
        opts = {k: kw.pop(k) for k in names if k in kw}
        seen.append(Program(fn, args, kw, **opts))
        return base.inspect(fn, *args, **opts, **kw)

    hloscope.inspect = record
    try:
        built = case.build()
    finally:
        hloscope.inspect = real
    if hasattr(built, "fn") and hasattr(built, "args"):
        kw = dict(getattr(built, "kwargs", None) or {})
        opts = {k: kw.pop(k, getattr(built, k, None)) for k in ("target", "mesh", "shard")}
        return Program(built.fn, tuple(built.args), kw, **opts)
    return seen[-1] if seen else None


def _timed(program: Program, check: bool) -> tuple[float, Any, list[tuple[Any, bool]]]:
    t0 = time.perf_counter()
    report = program.inspect()
    advice = report.advice
    rows = checked_groups(report, program, advice) if check else []
    return time.perf_counter() - t0, advice, rows


def _estimate(c: Any) -> float:
    if c.unit == "bytes":  # a donation's estimate is of the footprint, others' of the peak
        return float(max(c.estimate.peak_bytes, c.estimate.footprint_bytes))
    return float(c.estimate.seconds)


def _fmt(c: Any, v: float) -> str:
    return c.amount(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", action="append",
                    help="PATH.py:ATTRIBUTE, a list of cases with build(); repeat for "
                         "several (default: tests/advisor_programs.py:CASES and EXTRA, "
                         "this script's own programs)")
    ap.add_argument("--only", default="", help="comma-separated case names")
    opts = ap.parse_args()
    cases = [c for spec in (opts.cases or ["tests/advisor_programs.py:CASES", "EXTRA"])
             for c in _load(spec)]
    if opts.only:
        wanted = set(opts.only.split(","))
        cases = [c for c in cases if getattr(c, "name", "") in wanted]
    checked, within, t_plain, t_checked = 0, 0, 0.0, 0.0
    per_program: list[tuple[str, float, float]] = []
    print(f"{'program':34} {'rule':6} {'figure':24} {'estimate':>12} {'checked':>12} "
          f"{'est/chk':>8}  within 2x")
    for case in cases:
        name = getattr(case, "name", repr(case))
        try:
            program = program_of(case)
        except Exception as e:  # noqa: BLE001  (a missing extra, a case that cannot build)
            print(f"{name:34} skipped: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            continue
        if program is None:
            continue
        t0, _advice, _ = _timed(program, False)
        t1, _advice, rows = _timed(program, True)
        t_plain += t0
        t_checked += t1
        per_program.append((name, t0, t1))
        for g, kept in rows:
            c = g.check
            if c is None or c.status != "checked":
                print(f"{name:34} {g.rule:6} estimated: {c.how if c else ''}"[:200])
                continue
            est, got = _estimate(c), c.saved
            ratio = est / got if got > 0 else float("inf")
            ok = got > 0 and 0.5 <= ratio <= 2.0
            checked += 1
            within += ok
            print(f"{name:34} {g.rule:6} {c.figure:24} {_fmt(c, est):>12} {_fmt(c, got):>12} "
                  f"{ratio:8.2f}  {'yes' if ok else 'no'}"
                  + ("" if kept else "  (dropped: under the threshold)"))
    print()
    if checked:
        print(f"checked findings: {checked}; estimate within 2x of XLA's difference: "
              f"{within} ({100 * within / checked:.0f}%)")
    else:
        print("no finding had a mechanical fix")
    if per_program:
        worst = max(per_program, key=lambda r: r[2] / max(r[1], 1e-9))
        print(f"inspect + advice over {len(per_program)} programs: {t_plain:.1f} s unchecked, "
              f"{t_checked:.1f} s checked ({t_checked / max(t_plain, 1e-9):.2f}x); the "
              f"most: {worst[0]} {worst[1]:.2f} s -> {worst[2]:.2f} s "
              f"({worst[2] / max(worst[1], 1e-9):.2f}x)")


if __name__ == "__main__":
    main()
