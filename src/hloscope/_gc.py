"""Pausing Python's cyclic garbage collector around work that only allocates.

Parsing a module and analysing it allocate millions of small objects and make no
garbage cycles worth collecting; the collector's passes over them are wasted work
(on a large module's analyses, more than the analysis itself; on a warm
36,000-instruction parse about 7%, within the noise of benchmarks/parse_speed.py).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (nests; restores the state)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
