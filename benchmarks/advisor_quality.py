"""The advisor's precision and recall per rule on its labelled evaluation set, and its
groups on the 64-layer transformer training step.

    python benchmarks/advisor_quality.py [--cache DIR]

The set is tests/advisor_programs.py: programs compiled here with JAX (on the CPU, and for
an H100 or a TPU v5e without the hardware where the target extras are installed) and
module files, each labelled with the rules an expert expects to fire; every other rule
firing is a false positive.  Per rule: precision = programs where it fired and was
expected / programs where it fired; recall = programs where it fired and was expected /
programs where it was expected.  Targets (issue 18): precision >= 90% per rule, recall >=
80% overall, at most 20 groups on the 64-layer module (made by benchmarks/parse_speed.py's
generator, cached in DIR, default .bench_cache/).
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
sys.path.insert(0, HERE)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default=os.path.join(HERE, "..", ".bench_cache"))
    opts = ap.parse_args()

    import hloscope
    from advisor_programs import CASES

    extras = {"gpu": any(importlib.util.find_spec(m) is not None
                         for m in ("jax_cuda12_plugin", "jax_cuda13_plugin")),
              "tpu": importlib.util.find_spec("libtpu") is not None}
    rules = [r.id for r in hloscope.RULES]
    tp = dict.fromkeys(rules, 0)
    fp = dict.fromkeys(rules, 0)
    fn = dict.fromkeys(rules, 0)
    skipped = []
    wrong = []
    for case in CASES:
        if case.target and not extras[case.target]:
            skipped.append(case.name)
            continue
        fired = {g.rule for g in hloscope.advise_groups(case.build()).groups}
        expected = set(case.expect)
        for r in rules:
            tp[r] += r in fired and r in expected
            fp[r] += r in fired and r not in expected
            fn[r] += r not in fired and r in expected
        if fired != expected:
            wrong.append(f"{case.name}: expected {sorted(expected)}, fired {sorted(fired)}")
    n = len(CASES) - len(skipped)
    print(f"advisor evaluation set: {n} programs ({len(skipped)} skipped for a missing "
          f"target extra{': ' + ', '.join(skipped) if skipped else ''})\n")
    print(f"{'rule':6}  {'name':20}  {'fired':>5}  {'right':>5}  {'missed':>6}  "
          f"{'precision':>9}  {'recall':>6}")
    names = {r.id: r.name for r in hloscope.RULES}
    worst_precision = 1.0
    for r in rules:
        fired_n = tp[r] + fp[r]
        prec = tp[r] / fired_n if fired_n else 1.0
        rec = tp[r] / (tp[r] + fn[r]) if tp[r] + fn[r] else 1.0
        worst_precision = min(worst_precision, prec)
        print(f"{r:6}  {names[r]:20}  {fired_n:5}  {tp[r]:5}  {fn[r]:6}  {prec:9.0%}  {rec:6.0%}")
    total_tp, total_fn = sum(tp.values()), sum(fn.values())
    recall = total_tp / (total_tp + total_fn) if total_tp + total_fn else 1.0
    print(f"\nprecision: lowest per rule {worst_precision:.0%} (target >= 90%); recall "
          f"overall {recall:.0%} (target >= 80%)")
    for w in wrong:
        print("  wrong:", w)

    from parse_speed import generate

    path = generate(64, opts.cache)
    t0 = time.perf_counter()
    m = hloscope.read(path).module
    t1 = time.perf_counter()
    advice = hloscope.advise_groups(m)
    t2 = time.perf_counter()
    every = hloscope.advise_groups(m, min_share=0)
    print(f"\n64-layer transformer step ({m.instruction_count:,} instructions): "
          f"{len(advice.groups)} groups (target <= 20) of {sum(g.count for g in advice.groups)} "
          f"findings; {advice.quiet} below 1% left out ({len(every.groups)} groups with no "
          f"threshold); read {t1 - t0:.2f} s, advised {t2 - t1:.2f} s")
    for i, g in enumerate(advice.groups[:5], 1):
        print(f"  {i}. {g.rule} x{g.count}: saves {g.saving.describe(advice.device)} "
              f"({100 * g.share:.1f}% of the {g.basis})")
    ok = worst_precision >= 0.9 and recall >= 0.8 and len(advice.groups) <= 20
    print("\ntargets met" if ok else "\ntargets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
