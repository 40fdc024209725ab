"""The advisor's rule about ``jax.vmap`` holding every item's intermediates at once
(HS128): a vmapped function's large per-item arrays (a pairwise kernel, a distance
matrix per image, cloud or problem) are computed for all items together, so all of them
are alive at the peak, where ``lax.map`` over the items (``batch_size=k`` for k at a
time) keeps one item's (or k items') at a time for the same work run in sequence.  A
memory/speed trade like remat's: said only where the vmapped arrays are a large share of
the peak and each item's are large enough that running items one after another keeps the
device busy.
"""

from __future__ import annotations

from math import gcd

from .._units import format_bytes
from ._advice_context import AdviceContext
from ._findings import Evidence, Finding, place_key

__all__ = ["vmapped_side_by_side"]

# The vmapped temporaries must hold this share of the peak (as remat's saved values).
VMAP_PEAK_SHARE = 0.25
# One item's share of them must be this large for a sequential map to cost little: each
# item's kernels then move megabytes, not a launch's worth.
MIN_ITEM_BYTES = 4 << 20


def vmapped_side_by_side(ctx: AdviceContext) -> list[Finding]:
    """Temporaries at the peak made by vmapped code (op_name under ``vmap(``; not
    autodiff's, ``jvp(``/``transpose(``: values held for a backward pass are remat's,
    per-example gradients are the result asked for) whose leading dimension is the items'
    (B, the largest common divisor of their leading dimensions, 2 or more) hold a quarter
    of the peak or more, one item's share 4 MiB or more: ``lax.map`` keeps one item's."""
    if not ctx.module.is_scheduled or not ctx.peak:
        return []
    # Attention's scores are HS130's (jax.nn.dot_product_attention vmaps its own core
    # over the query groups: not the user's vmap, and a fused kernel is the fix).
    scores = {e.name for f in ctx.found.get("HS130", ()) for e in f.evidence}
    vmapped = []
    for v in ctx.lr.peak_values:
        meta = v.inst.metadata
        name = meta.op_name if meta is not None else ""
        if ("vmap(" not in name or "jvp(" in name or "transpose(" in name
                or v.label in scores
                or ctx.value_kind(v) != "temporary" or not v.shape.is_array
                or len(v.shape.dims) < 2 or v.shape.dims[0] < 2):
            continue
        vmapped.append(v)
    if not vmapped:
        return []
    items = 0
    for v in vmapped:
        items = gcd(items, v.shape.dims[0])
    if items < 2:
        return []
    held = sum(v.size for v in vmapped)
    per_item = held // items
    if held < VMAP_PEAK_SHARE * ctx.peak or per_item < MIN_ITEM_BYTES:
        return []
    saved = held - per_item
    vmapped.sort(key=lambda v: (-v.size, v.label))
    first = vmapped[0]
    shown = ", ".join(f"{v.label} {v.shape}" for v in vmapped[:3])
    more = f" and {len(vmapped) - 3} more" if len(vmapped) > 3 else ""
    return [Finding(
        "HS128", "jax.vmap holds every item's intermediates at once",
        f"at the memory peak ({format_bytes(ctx.peak)}), {len(vmapped)} array(s) that "
        f"vmapped code made hold {format_bytes(held)} ({100 * held / ctx.peak:.0f}% of "
        f"it) for {items} items together ({shown}{more}), {format_bytes(per_item)} per "
        "item: every item's intermediates are alive at once, though each item needs only "
        "its own",
        f"map over the items instead of vmapping them: jax.lax.map(f, xs) keeps one "
        f"item's {format_bytes(per_item)} at a time (batch_size=k keeps k items'), for "
        "the same work run in sequence: a memory/speed trade, worth it where the peak "
        "matters and each item's work keeps the device busy (it does here: "
        f"{format_bytes(per_item)} per item)",
        tuple(Evidence(v.label, "array", str(v.shape), v.size,
                       v.inst.metadata.op_name if v.inst.metadata else "",
                       str(v.inst.source) if v.inst.source is not None else None)
              for v in vmapped[:3]),
        ctx.saving(peak=saved),
        place_key(first.inst.metadata.op_name if first.inst.metadata else "",
                  str(first.inst.source) if first.inst.source is not None else None))]
