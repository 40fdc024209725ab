"""The advisor on the blind set: precision and recall per kind and overall.

    python benchmarks/advisor_blind.py [--set advisor_blind2] [--case NAME ...] [--no-check]
                                       [--verbose]

tests/advisor_blind.py (the first set) and tests/advisor_blind2.py (the second, written after
the rules were tuned on the first) hold programs written and labelled by a helper that never read the
advisor's rules, docs or tests; the labels were committed before the advisor ran on them.
Labels are kinds of issue (the vocabulary of docs/advisor.md), plus `other:NAME` for a real
issue no kind names: those count as missed, since recall is over every labelled issue, not
only those a rule covers.

Each program is compiled with `hloscope.inspect` (on its target, where it names one) and its
advice read as a user sees it (`report.advice`, with savings checked by compiling the fix
unless `--no-check`).  Scoring is per (program, kind): fired = a group of that kind was
shown; right = it was labelled; missed = labelled and not shown.  A group of kind
`loop-collective` (a collective in a loop moving the same data every iteration) counts as
`repeated-collective`, the vocabulary's name for it.  A label found wrong after looking at
the module is not edited: its correction is in the set's `REVISED`, and this prints both
scores, the blind one first.  Then the clean programs that stayed silent, and every
disagreement with what fired.
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

ALIASES = {"loop-collective": "repeated-collective", "donation": "donation-unused",
           "tile-padding": "tpu-padding"}
# Kinds added after the sets were labelled, for issues they label `other:`, under each
# writer's own name (the first is the one counted where a program labels none of them).
LATER = {"inverse-instead-of-solve": ("other:inverse-instead-of-solve",),
         "sort-for-top-k": ("other:sort-for-top-k",),
         "attention": ("other:unfused-attention", "other:materialized-attention")}


def group_kind(group: object, labels: object = ()) -> str:
    """A group's kind in the blind set's vocabulary (for a kind added later, the name the
    program's `labels` give it)."""
    import hloscope

    kind = getattr(group, "kind", None)
    if kind is None:
        kind = next(r.name for r in hloscope.RULES if r.id == group.rule)  # type: ignore[attr-defined]
    kind = ALIASES.get(kind, kind)
    names = LATER.get(kind)
    if names:
        return next((n for n in names if n in labels), names[0])  # type: ignore[operator]
    return kind


def score(results: list[tuple[str, set[str], set[str]]]) -> dict[str, list[int]]:
    """Per kind [fired, right, missed] over (program, fired kinds, labelled kinds)."""
    table: dict[str, list[int]] = {}
    for _, fired, expected in results:
        for k in fired | expected:
            row = table.setdefault(k, [0, 0, 0])
            row[0] += k in fired
            row[1] += k in fired and k in expected
            row[2] += k in expected and k not in fired
    return table


def print_table(title: str, table: dict[str, list[int]],
                results: list[tuple[str, set[str], set[str]]]) -> dict[str, float]:
    print(f"{title}\n{'kind':24}  {'fired':>5}  {'right':>5}  {'missed':>6}  {'precision':>9}  "
          f"{'recall':>6}")
    for k in sorted(table, key=lambda k: (k.startswith("other:"), k)):
        fired, right, missed = table[k]
        p = f"{right / fired:9.0%}" if fired else f"{'-':>9}"
        r = f"{right / (right + missed):6.0%}" if right + missed else f"{'-':>6}"
        print(f"{k:24}  {fired:5}  {right:5}  {missed:6}  {p}  {r}")
    tp = sum(t[1] for t in table.values())
    fp = sum(t[0] - t[1] for t in table.values())
    fn = sum(t[2] for t in table.values())
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    clean = [(n, f) for n, f, e in results if not e]
    silent = sum(not f for _, f in clean)
    quiet = silent / len(clean) if clean else 1.0
    print(f"overall: {tp} right, {fp} false positives, {fn} missed; precision {precision:.0%} "
          f"(target 85%), recall {recall:.0%} (target 75%); clean programs silent {silent} of "
          f"{len(clean)}: {quiet:.0%} (target 80%)\n")
    return {"precision": precision, "recall": recall, "clean_silent": quiet}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", default="advisor_blind",
                    help="the set's module in tests/: advisor_blind (default) or advisor_blind2")
    ap.add_argument("--case", nargs="*", default=None, help="only these programs")
    ap.add_argument("--no-check", action="store_true", help="advice without compiling fixes")
    ap.add_argument("--verbose", action="store_true", help="the groups of every program")
    opts = ap.parse_args()

    import hloscope

    blind = importlib.import_module(opts.set)
    revised_labels = getattr(blind, "REVISED", {})
    extras = {"gpu": any(importlib.util.find_spec(m) is not None
                         for m in ("jax_cuda12_plugin", "jax_cuda13_plugin")),
              "tpu": importlib.util.find_spec("libtpu") is not None}
    first: list[tuple[str, set[str], set[str]]] = []
    revised: list[tuple[str, set[str], set[str]]] = []
    shown: dict[str, object] = {}
    skipped: list[str] = []
    t0 = time.perf_counter()
    for case in blind.CASES:
        if opts.case and case.name not in opts.case:
            continue
        if case.target and not extras.get(case.target, False):
            skipped.append(case.name)
            continue
        p = case.build()
        kw = dict(getattr(p, "kwargs", {}) or {})
        if opts.no_check:
            kw["check"] = False
        try:
            report = hloscope.inspect(p.fn, *p.args, target=p.target, **kw)
        except TypeError:  # an hloscope without checked advice
            kw.pop("check", None)
            report = hloscope.inspect(p.fn, *p.args, target=p.target, **kw)
        advice = report.advice
        shown[case.name] = advice
        expect = revised_labels[case.name][0] if case.name in revised_labels else case.expect
        fired = {group_kind(g, (*case.expect, *expect)) for g in advice.groups}
        first.append((case.name, fired, set(case.expect)))
        revised.append((case.name, fired, set(expect)))
        print(f"  {case.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(f"advisor blind set {opts.set}: {len(first)} programs ({len(skipped)} skipped for a missing "
          f"target extra{': ' + ', '.join(skipped) if skipped else ''}), "
          f"{time.perf_counter() - t0:.0f} s; {len(revised_labels)} labels revised\n")
    print_table("blind labels (as committed before the advisor ran)", score(first), first)
    if revised_labels:
        print_table("revised labels (REVISED corrections applied)", score(revised), revised)

    for (name, fired, expected), (_, _, label) in zip(revised, first):
        if fired == expected and fired == label and not opts.verbose:
            continue
        advice = shown[name]
        tag = "agrees" if fired == expected else "DISAGREES"
        print(f"{name}: expected {sorted(expected) or '[]'}"
              f"{f' (blind {sorted(label) or []})' if label != expected else ''}, fired "
              f"{sorted(fired) or '[]'}: {tag}")
        if name in revised_labels:
            print(f"  label revised: {revised_labels[name][1]}")
        for g in advice.groups:  # type: ignore[attr-defined]
            kind = group_kind(g, expected)
            mark = "" if kind in expected else "  <- not expected"
            print(f"  {g.rule} {kind} x{g.count} {100 * g.share:.1f}% of the {g.basis}: "
                  f"saves {g.saving.describe(advice.device)}{mark}")  # type: ignore[attr-defined]
            print(f"    {g.first.message}")
        for k in sorted(expected - fired):
            print(f"  {k} expected, not shown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
