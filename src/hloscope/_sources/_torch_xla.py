"""torch_xla's saved graphs: ``XLA_SAVE_TENSORS_FILE`` with ``XLA_SAVE_TENSORS_FMT=hlo``.

torch_xla appends one block per graph it compiles or runs::

    [ScheduleSyncTensorsGraph]
    TensorsGraphInfo:
      train_step (train.py:42)
      <module> (train.py:80)

    Hashes: (6c94...)            (newer versions: "Root Hashes:")

    ## BEGIN_GRAPH
    HloModule IrToHlo.15, entry_computation_layout=...
    ...
    Graph Hash: 0d5c...           (torch_xla 2.9: inside the block)
    ## END_GRAPH

    Graph Hash: 0d5c...           (some earlier versions: after it)

The same graph is usually saved once per training step.  `graph_blocks`
finds the blocks with their name, Python frames and hashes; the reader parses
the module inside each and keeps these as the module's provenance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._repr import brief_repr

__all__ = ["GraphBlock", "graph_blocks", "user_frame", "TORCH_IR_HINT"]

_FRAME_RE = re.compile(r"\s+(\S.*?) \((.*):([0-9]+)\)\s*$")
_HASHES_RE = re.compile(r"\s*(?:Root )?Hashes: \((.*)\)\s*$")
_GRAPH_HASH_RE = re.compile(r"\s*Graph Hash: (\S+)")
_NAME_RE = re.compile(r"\s*\[(\w+)\]\s*$")
# Frames of installed packages, of the standard library and of a torch_xla source tree.
_LIBRARY_RE = re.compile(r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python[0-9][0-9.]*[/\\]"
                         r"|[/\\]torch_xla[/\\]|^<frozen ")

TORCH_IR_HINT = ("this is torch_xla's IR text (XLA_SAVE_TENSORS_FMT=text, the default), not "
                 "HLO: save HLO with XLA_SAVE_TENSORS_FMT=hlo XLA_SAVE_TENSORS_FILE=graphs.txt "
                 "(torch_xla writes graphs.txt.0), or print "
                 "torch_xla._XLAC._get_xla_tensors_hlo([tensor]) for one graph")


@dataclass(frozen=True, slots=True)
class GraphBlock:
    """One saved graph: the lines of its module (``start`` up to ``stop``), its name
    (``ScheduleSyncTensorsGraph``...), the Python frames that made it, innermost
    first, and its hashes."""

    __repr__ = brief_repr

    start: int
    stop: int
    name: str
    frames: tuple[tuple[str, str, int], ...]
    root_hashes: tuple[str, ...]
    graph_hash: str

    def provenance(self) -> dict[str, object]:
        key = self.graph_hash or ",".join(self.root_hashes)
        return {"torch_xla_graph": self.name, "frames": self.frames, "graph_hash": key}


def user_frame(frames: tuple[tuple[str, str, int], ...]) -> tuple[str, str, int] | None:
    """The innermost frame in the user's code (not torch_xla's ``sync``/``mark_step``, not
    an installed package's), else the innermost frame."""
    return next((f for f in frames if not _LIBRARY_RE.search(f[1])),
                frames[0] if frames else None)


def graph_blocks(lines: list[str]) -> list[GraphBlock]:
    """The ``## BEGIN_GRAPH`` ... ``## END_GRAPH`` blocks of a saved-tensors file."""
    out: list[GraphBlock] = []
    n = len(lines)
    i = 0
    while i < n:
        if lines[i].strip() != "## BEGIN_GRAPH":
            i += 1
            continue
        begin = i
        end = begin + 1
        while end < n and lines[end].strip() != "## END_GRAPH":
            end += 1
        name, frames, hashes = _header(lines, begin)
        graph_hash = ""
        stop = end
        # torch_xla 2.9 writes "Graph Hash:" inside the block, after the module; earlier
        # versions after "## END_GRAPH".
        for k in [*range(end - 1, max(begin, end - 4), -1), *range(end + 1, min(end + 4, n))]:
            m = _GRAPH_HASH_RE.match(lines[k])
            if m:
                graph_hash = m.group(1)
                stop = min(stop, k)
                break
        out.append(GraphBlock(begin + 1, stop, name, frames, hashes, graph_hash))
        i = end + 1
    return out


def _header(lines: list[str], begin: int) -> tuple[str, tuple[tuple[str, str, int], ...],
                                                   tuple[str, ...]]:
    """The name, frames and hashes written before the graph that starts after `begin`."""
    name = ""
    frames: list[tuple[str, str, int]] = []
    hashes: tuple[str, ...] = ()
    k = begin - 1
    while k >= 0 and begin - k < 400:
        line = lines[k]
        if line.strip() == "## END_GRAPH":
            break
        m = _HASHES_RE.match(line)
        if m and not hashes:
            hashes = tuple(h.strip() for h in m.group(1).split(",") if h.strip())
        m = _FRAME_RE.match(line)
        if m:
            frames.append((m.group(1), m.group(2), int(m.group(3))))
        m = _NAME_RE.match(line)
        if m:
            name = m.group(1)
            break
        k -= 1
    frames.reverse()
    return name, tuple(frames), hashes
