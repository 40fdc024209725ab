"""An out-of-memory report of XLA's, as `hloscope memory` shows it (`render_oom`)."""

from __future__ import annotations

from .._analysis._oom import OomSummary, operation
from ._term import fit, safe
from ._text import format_bytes, table

__all__ = ["render_oom"]

_WHAT = {"gpu": "XLA could not allocate the program's memory on the GPU (its buffer "
                "assignment's report)",
         "tpu": "XLA's TPU compiler ran out of memory",
         "tpu-early": "XLA's TPU compiler ran out of memory (it stopped early)"}


def _size(n: int | None) -> str:
    return "unknown" if n is None else format_bytes(n)


def render_oom(s: OomSummary, *, top: int = 10, width: int | None = None) -> str:
    """`s` in `width` columns (None: every line whole): how far over the program is, its
    totals, the listed buffers by the line of code that made them, the padding a TPU's
    tiles add, and the listed buffers themselves."""
    r = s.report
    out = [f"{_WHAT[r.kind]}: {safe(r.path)}:{r.line}"
           + (f" (printed {r.printed} times)" if r.printed > 1 else "")]
    space = r.memory_space.upper() if r.memory_space else "memory"
    if r.kind == "tpu-early":
        out.append(f"  its temporaries need {_size(s.need)} of the {_size(s.capacity)} of "
                   f"{space} available: {_size(s.over)} over (no list of buffers: XLA stopped "
                   "before assigning them)")
    elif r.kind == "tpu":
        out.append(f"  needs {_size(s.need)} of {space}, has {_size(s.capacity)}: "
                   f"{_size(s.over)} over")
        if s.parts:
            out.append("  " + ", ".join(f"{k} {_size(v)}" for k, v in s.parts))
        if r.requirement:
            out.append("  the program: " + ", ".join(f"{k} {_size(v)}" for k, v in
                                                     r.requirement))
    else:
        failed = (f"the allocation that failed: {_size(r.requested)}; "
                  if r.requested is not None else "")
        out.append(f"  {failed}the program needs {_size(s.need)}"
                   + (": " + ", ".join(f"{k} {_size(v)}" for k, v in s.parts) if s.parts
                      else ""))
        temp = next((v for k, v in s.parts if k == "temporaries"), None)
        if temp and r.requested is not None and abs(temp - r.requested) <= 0.01 * temp:
            out.append("  (the allocation that failed is the temporaries' one block: the "
                       "arguments and outputs were already on the device)")
    if not r.buffers:
        return fit("\n".join(out) + "\n", width)
    out.append("")
    listed = len(r.buffers)
    share = f" ({100 * s.listed / s.need:.0f}% of what it needs)" if s.need else ""
    out.append(f"The {listed} largest buffer{'s' if listed > 1 else ''} XLA lists, "
               f"{format_bytes(s.listed)}{share}, by the line of code that made them")
    rows = [[format_bytes(p.bytes), str(p.buffers), p.what, p.source or "-"]
            for p in s.places[:top]]
    out.append(table(["bytes", "buffers", "what", "source"], rows, right=(0, 1), width=width))
    if s.padding:
        out.append("")
        out.append(f"The TPU's tiles pad {len(s.padded)} of them: {format_bytes(s.padding)} "
                   "of padding")
        for b, dims in s.padded[:top]:
            what = operation(b.op_name) if b.op_name else b.label.split(" ", 1)[0].lstrip("%")
            out.append(f"  {format_bytes(b.padding)} in {safe(what)} "
                       f"{safe(b.shape.split('{', 1)[0])} ({b.expansion:g}x its elements"
                       + (f": {dims}" if dims else "") + ")")
        out.append("  a dimension that is not a multiple of the tile (8 x 128 for 32-bit "
                   "values) is padded up to it: reorder the array so its large "
                   "dimensions are the last two, or pack a short one into another")
    out.append("")
    out.append("Each buffer, as XLA lists it")
    rows = []
    for b in r.buffers[:top]:
        what = "argument" if b.parameter else operation(b.op_name) if b.op_name else "-"
        rows.append([str(b.rank), format_bytes(b.size), b.shape.split("{", 1)[0],
                     b.label.split(" ", 1)[0] if r.kind == "gpu" else b.allocation,
                     what, b.source or "-"])
    out.append(table(["#", "bytes", "shape", "XLA" if r.kind == "gpu" else "kind", "what",
                      "source"], rows, right=(0, 1), width=width, drop=("XLA", "kind")))
    if listed > top:
        out.append(f"  ... and {listed - top} more (--top)")
    out.append("")
    out.append("  the whole peak and what to change: hloscope inspect FILE.py:FUNCTION "
               "--target " + ("tpu-v5e (or the TPU you use)" if r.kind != "gpu" else
                              "h100 (or the GPU you use)")
               + ", which compiles for the device without it")
    return fit("\n".join(out) + "\n", width)
