"""The second blind set's shape (tests/advisor_blind2.py) and a few of its CPU programs compiling.

Only the set is checked here: its figures against the advisor live in benchmarks/.
"""

import pytest

from advisor_blind2 import CASES, KINDS, REVISED

pytest.importorskip("jax")


def test_shape() -> None:
    import advisor_blind

    names = [c.name for c in CASES]
    assert len(CASES) >= 44
    assert sum(1 for c in CASES if not c.expect) >= 14
    assert len(set(names)) == len(names)
    assert not set(names) & {c.name for c in advisor_blind.CASES}
    for c in CASES:
        assert c.why and c.target in (None, "gpu", "tpu"), c.name
        for kind in c.expect:
            assert kind in KINDS or kind.startswith("other:"), (c.name, kind)
    assert set(REVISED) <= set(names)


@pytest.mark.parametrize("name", ["fft_middle_axis_filter", "burgers_spectral_fori",
                                  "chebyshev_basis_rebuilt"])
def test_builds_and_compiles(name: str) -> None:
    import hloscope

    p = next(c for c in CASES if c.name == name).build()
    assert p.target is None
    report = hloscope.inspect(p.fn, *p.args, target=p.target, **p.kwargs)
    assert report.hlo_after
