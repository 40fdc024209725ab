"""`paused_gc`: the collector is paused inside, restored after, what the block built is
moved to the oldest generation, and a program's own frozen objects stay frozen."""

from __future__ import annotations

import gc

from hloscope._gc import paused_gc


def test_paused_inside_restored_after_and_young_generation_emptied():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        built = [[i] for i in range(10_000)]
    assert gc.isenabled()
    assert gc.get_count()[0] < 100  # the new lists went to the oldest generation
    assert gc.get_freeze_count() == 0
    assert len(built) == 10_000


def test_a_programs_own_freeze_is_kept():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            _ = [[i] for i in range(1000)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_nested_and_disabled_states_are_restored():
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
