"""The shapes of benchmarks/scale.py, small: what breaks only on a large module's pattern
(its figures are in the benchmark; these tests keep the commands working on each shape)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import hloscope
from hloscope._analysis._advisor import advise_groups

_SPEC = importlib.util.spec_from_file_location(
    "scale_bench", Path(__file__).resolve().parents[1] / "benchmarks" / "scale.py")
scale = importlib.util.module_from_spec(_SPEC)  # type: ignore[arg-type]
_SPEC.loader.exec_module(scale)  # type: ignore[union-attr]


def _rules(text: str) -> list[str]:
    return [g.rule for g in advise_groups(hloscope.read_text(text).module).groups]


def test_unrolled_copies_of_several_shapes_tie_without_a_crash():
    # Temporaries of 13 sizes made alike: HS117's copies tie on size and differ only in
    # their shapes, which have no order (was a TypeError under lint and report).
    assert "HS117" in _rules(scale.temps(3000))


@pytest.mark.parametrize("shape", ["chain", "wide", "whiles", "loops"])
def test_every_shape_is_advised(shape):
    _rules(scale.SHAPES[shape](3000))
