"""Which runs a profile measured, kept beside its trace (``hloscope profile --keep DIR``),
so that `read_profile(DIR)` gives the figures the profile gave.

A trace holds every marked run, the runs the capture left out (they touched new
memory: `clean_runs`) among them, and nothing of the rounds the runs were taken in;
`KEPT_RUNS` (JSON, schema ``hloscope.kept-runs/1``) says both: ``rounds``, each marked
run's round in order, and ``measured``, the runs the profile measured.  `select_runs`
applies them to a trace, in the capture and when the folder is read again.  ``notes``:
the profile's notes (a busy machine, rounds that did not settle), which whoever reads
the folder again is shown (`read_kept`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any

from ._read import Trace

__all__ = ["KEPT_RUNS", "KEPT_RUNS_SCHEMA", "read_kept", "read_kept_runs", "select_runs",
           "write_kept_runs"]

KEPT_RUNS = "runs.json"
KEPT_RUNS_SCHEMA = "hloscope.kept-runs/1"


def select_runs(trace: Trace, rounds: list[int], measured: list[int],
                ) -> tuple[Trace, list[int] | None]:
    """`trace` with the windows of the `measured` runs alone, and their rounds (`rounds`:
    each marked run's); the trace unchanged and no rounds where its windows are not those
    runs (another count: a trace that is not the capture's, or was cut short)."""
    if len(trace.windows) != len(rounds):
        return trace, None
    if len(measured) < len(rounds):
        trace = dataclasses.replace(trace, windows=tuple(trace.windows[i] for i in measured))
    return trace, [rounds[i] for i in measured]


def write_kept_runs(folder: str, rounds: list[int], measured: list[int],
                    notes: Sequence[str] = ()) -> None:
    """Write `KEPT_RUNS` into `folder` (beside the trace and its module)."""
    with open(os.path.join(folder, KEPT_RUNS), "w", encoding="utf-8") as f:
        json.dump({"schema": KEPT_RUNS_SCHEMA, "rounds": rounds, "measured": measured,
                   "notes": list(notes)}, f)
        f.write("\n")


def read_kept_runs(folder: str) -> tuple[list[int], list[int]] | None:
    """The rounds and measured runs `write_kept_runs` wrote into `folder` (`read_kept`
    without the notes)."""
    kept = read_kept(folder)
    return None if kept is None else (kept[0], kept[1])


def read_kept(folder: str) -> tuple[list[int], list[int], tuple[str, ...]] | None:
    """The rounds, measured runs and notes `write_kept_runs` wrote into `folder`; None
    where there is no such file, or it is not one (hand-edited, another tool's), as for a
    profile taken elsewhere; no notes where it holds no list of texts (an older one)."""
    try:
        with open(os.path.join(folder, KEPT_RUNS), encoding="utf-8") as f:
            data: Any = json.load(f)
        rounds, measured = data["rounds"], data["measured"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if (data.get("schema") != KEPT_RUNS_SCHEMA or not isinstance(rounds, list)
            or not isinstance(measured, list)
            or not all(isinstance(x, int) and not isinstance(x, bool)
                       for x in rounds + measured)
            or any(not 0 <= i < len(rounds) for i in measured)):
        return None
    notes = data.get("notes")
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        notes = []
    return rounds, measured, tuple(notes)
