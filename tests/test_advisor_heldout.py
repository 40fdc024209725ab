"""The held-out evaluation sets (tests/advisor_heldout.py, tests/advisor_heldout2.py) stay
consistent with themselves:
labels name real rules, every revision and every recorded mistake names a program of the
set, and the advisor disagrees with the (revised) labels exactly where `MISTAKES` says
it does, so a fix to the advisor shows up here as a mistake to strike off the list."""

from __future__ import annotations

import importlib.util
import os

import pytest

import advisor_heldout
import advisor_heldout2
from conftest import HAVE_CUDA_PLUGIN

import hloscope

SETS = {"set1": advisor_heldout, "set2": advisor_heldout2}

_HAVE = {"gpu": HAVE_CUDA_PLUGIN, "tpu": importlib.util.find_spec("libtpu") is not None}
_RULES = {r.id for r in hloscope.RULES}


@pytest.mark.parametrize("held", SETS.values(), ids=SETS.keys())
def test_the_set_is_well_formed(held):
    names = [c.name for c in held.CASES]
    assert len(names) == len(set(names)) >= 25
    for c in held.CASES:
        assert set(c.expect) <= _RULES, c.name
        assert c.why and c.target in (None, "gpu", "tpu"), c.name
    for name, (expect, why) in held.REVISED.items():
        assert name in names and set(expect) <= _RULES and why, name
        assert set(expect) != set(next(c for c in held.CASES if c.name == name).expect), name
    assert set(held.MISTAKES) <= set(names)


def _params():  # type: ignore[no-untyped-def]
    out = []
    for set_name, held in SETS.items():
        for c in held.CASES:
            missing = (c.target is not None and not os.environ.get("CI")
                       and not _HAVE[c.target])
            marks = ([pytest.mark.skip(reason=f"needs hloscope[{c.target}-target]")]
                     if missing else [])
            out.append(pytest.param(held, c, id=f"{set_name}-{c.name}", marks=marks))
    return out


@pytest.mark.parametrize("held, case", _params())
def test_the_advisor_errs_only_where_recorded(held, case):
    fired = {g.rule for g in hloscope.advise_groups(case.build()).groups}
    revised = held.REVISED
    expect = set(revised[case.name][0] if case.name in revised else case.expect)
    if case.name in held.MISTAKES:
        assert fired != expect, f"{case.name}: the advisor now agrees: strike it off MISTAKES"
    else:
        assert fired == expect, f"{case.name}: fired {sorted(fired)}, expected {sorted(expect)}"
