"""The blind sets' shape (tests/advisor_blind.py and tests/advisor_blind2.py to
tests/advisor_blind9.py) and a few of their CPU programs compiling.

Only the sets are checked here: their figures against the advisor live in benchmarks/.
"""

import pytest

import advisor_blind
import advisor_blind2
import advisor_blind3
import advisor_blind4
import advisor_blind5
import advisor_blind6
import advisor_blind7
import advisor_blind8
import advisor_blind9

pytest.importorskip("jax")

SETS = {"advisor_blind": advisor_blind, "advisor_blind2": advisor_blind2,
        "advisor_blind3": advisor_blind3, "advisor_blind4": advisor_blind4,
        "advisor_blind5": advisor_blind5, "advisor_blind6": advisor_blind6,
        "advisor_blind7": advisor_blind7,
        "advisor_blind8": advisor_blind8, "advisor_blind9": advisor_blind9}


@pytest.mark.parametrize("name", sorted(SETS))
def test_shape(name: str) -> None:
    blind = SETS[name]
    names = [c.name for c in blind.CASES]
    assert len(blind.CASES) >= 44
    assert sum(1 for c in blind.CASES if not c.expect) >= 14
    assert len(set(names)) == len(names)
    for c in blind.CASES:
        assert c.why and c.target in (None, "gpu", "tpu"), c.name
        for kind in c.expect:
            assert kind in advisor_blind.KINDS or kind.startswith("other:"), (c.name, kind)
    assert set(blind.REVISED) <= set(names)
    assert set(getattr(blind, "TUNED", {})) <= set(names)


def test_the_sets_share_no_program() -> None:
    names = [{c.name for c in blind.CASES} for blind in SETS.values()]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not a & b


@pytest.mark.parametrize("name, case", [
    ("advisor_blind", "adam_step_not_donated"), ("advisor_blind", "rbf_kernel_rebuilt"),
    ("advisor_blind", "training_loop_returns_losses"),
    ("advisor_blind2", "fft_middle_axis_filter"), ("advisor_blind2", "burgers_spectral_fori"),
    ("advisor_blind2", "chebyshev_basis_rebuilt"),
    ("advisor_blind3", "gaussian_blur_matrix_rebuilt"),
    ("advisor_blind3", "replay_buffer_insert_not_donated"),
    ("advisor_blind4", "embedding_adagrad_not_donated")])
def test_builds_and_compiles(name: str, case: str) -> None:
    import hloscope

    p = next(c for c in SETS[name].CASES if c.name == case).build()
    assert p.target is None
    report = hloscope.inspect(p.fn, *p.args, target=p.target, **p.kwargs)
    assert report.hlo_after
