"""The advisor's precision and recall on programs its rules were not tuned on.

    python benchmarks/advisor_heldout.py [--set 1|2] [--case NAME ...] [--verbose]

Set 1 is tests/advisor_heldout.py: 30 programs a JAX user would write (training steps,
solvers, particle codes, sharded programs, H100 and TPU v5e compiles); set 2,
tests/advisor_heldout2.py, 30 more of other kinds (vision, RL, graphs, solvers, sharded,
GPU and TPU programs).  Each was labelled blind, before the advisor ran on it.  Labels found wrong after looking at the module are not
edited; they are corrected in that file's `REVISED`, so this prints two scores: the blind
one (the committed labels) and the revised one (labels with the corrections).  Per rule:
fired = programs where a group of it was shown; right = of those, programs where it was
expected; missed = programs where it was expected and did not fire; precision =
right / fired; recall = right / expected.  Then every program where the advisor and the
revised label disagree (or whose label was revised), with the groups that fired (share,
saving, message and places), why the label was revised, and what the advisor got wrong
(that file's `MISTAKES`, written after reading each module).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def _score(rules: list[str],
           results: list[tuple[str, set[str], set[str]]]) -> dict[str, list[int]]:
    """Per rule (fired, right, missed) over (name, fired, expected) triples."""
    table = {r: [0, 0, 0] for r in rules}
    for _, fired, expected in results:
        for r in rules:
            table[r][0] += r in fired
            table[r][1] += r in fired and r in expected
            table[r][2] += r not in fired and r in expected
    return table


def _print_table(title: str, rules: list[str], names: dict[str, str],
                 table: dict[str, list[int]]) -> tuple[float, float]:
    print(f"{title}\n{'rule':6}  {'name':20}  {'fired':>5}  {'right':>5}  {'missed':>6}  "
          f"{'precision':>9}  {'recall':>6}")
    worst = 1.0
    for r in rules:
        fired, right, missed = table[r]
        prec = right / fired if fired else None
        rec = right / (right + missed) if right + missed else None
        if prec is not None:
            worst = min(worst, prec)
        p = f"{prec:9.0%}" if prec is not None else f"{'-':>9}"
        c = f"{rec:6.0%}" if rec is not None else f"{'-':>6}"
        print(f"{r:6}  {names[r]:20}  {fired:5}  {right:5}  {missed:6}  {p}  {c}")
    tp = sum(t[1] for t in table.values())
    fp = sum(t[0] - t[1] for t in table.values())
    fn = sum(t[2] for t in table.values())
    recall = tp / (tp + fn) if tp + fn else 1.0
    precision = tp / (tp + fp) if tp + fp else 1.0
    print(f"overall: {tp} right, {fp} false positives, {fn} missed; precision {precision:.0%}, "
          f"recall {recall:.0%}; lowest precision of a rule that fired {worst:.0%}\n")
    return worst, recall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=("1", "2"), default="1", help="which held-out set")
    ap.add_argument("--case", nargs="*", default=None, help="only these programs")
    ap.add_argument("--verbose", action="store_true", help="the groups of every program")
    opts = ap.parse_args()

    import hloscope

    held = importlib.import_module("advisor_heldout" + ("2" if opts.set == "2" else ""))
    revised_labels, mistakes = held.REVISED, held.MISTAKES

    extras = {"gpu": any(importlib.util.find_spec(m) is not None
                         for m in ("jax_cuda12_plugin", "jax_cuda13_plugin")),
              "tpu": importlib.util.find_spec("libtpu") is not None}
    rules = [r.id for r in hloscope.RULES]
    names = {r.id: r.name for r in hloscope.RULES}
    blind: list[tuple[str, set[str], set[str]]] = []
    revised: list[tuple[str, set[str], set[str]]] = []
    shown: dict[str, object] = {}
    skipped = []
    t0 = time.perf_counter()
    for case in held.CASES:
        if opts.case and case.name not in opts.case:
            continue
        if case.target and not extras[case.target]:
            skipped.append(case.name)
            continue
        advice = hloscope.advise_groups(case.build())
        shown[case.name] = advice
        fired = {g.rule for g in advice.groups}
        blind.append((case.name, fired, set(case.expect)))
        expect = (revised_labels[case.name][0] if case.name in revised_labels
                  else case.expect)
        revised.append((case.name, fired, set(expect)))
    n = len(blind)
    print(f"advisor held-out set {opts.set}: {n} programs ({len(skipped)} skipped for a missing target "
          f"extra{': ' + ', '.join(skipped) if skipped else ''}), "
          f"{time.perf_counter() - t0:.0f} s; {len(revised_labels)} labels revised\n")
    _print_table("blind labels (as committed before the advisor ran)", rules, names,
                 _score(rules, blind))
    _print_table("revised labels (REVISED corrections applied)", rules, names,
                 _score(rules, revised))

    for (name, fired, expected), (_, _, first) in zip(revised, blind):
        if fired == expected and fired == first and not opts.verbose:
            continue
        advice = shown[name]
        tag = "agrees" if fired == expected else "DISAGREES"
        print(f"{name}: expected {sorted(expected) or '[]'}"
              f"{f' (blind {sorted(first) or []})' if first != expected else ''}, fired "
              f"{sorted(fired) or '[]'}: {tag}")
        if name in revised_labels:
            print(f"  label revised: {revised_labels[name][1]}")
        if name in mistakes:
            print(f"  advisor wrong: {mistakes[name]}")
        for g in advice.groups:  # type: ignore[attr-defined]
            mark = "" if g.rule in expected else "  <- not expected"
            print(f"  {g.rule} x{g.count} {100 * g.share:.1f}% of the {g.basis}: "
                  f"saves {g.saving.describe(advice.device)}{mark}")  # type: ignore[attr-defined]
            print(f"    {g.first.message}")
            for op, src, k in g.places[:3]:
                print(f"    at {op} {src or ''} x{k}")
        for r in sorted(expected - fired):
            print(f"  {r} expected, did not fire")
    return 0


if __name__ == "__main__":
    sys.exit(main())
