"""Does it fit?  hloscope's verdict against XLA's, just below and just above each limit.

    python benchmarks/fit_verdict.py            # the verdict table
    python benchmarks/fit_verdict.py --probe    # find each TPU generation's limit again

For every TPU generation hloscope lists, a program (``x * 2 + y``, ``x`` donated: its
output is written into ``x``) sized to need 0.5% less and 0.5% more than the HBM XLA's
TPU compiler has available per device is compiled for one chip without the hardware:
XLA's answer is whether it compiles; hloscope's verdict is `report.fit` where it
compiles and, where XLA refuses, hloscope's own estimate from the module before XLA's
passes (arguments + outputs - aliased + temp estimate, `hbm_fit` with no compile at hand)
against the same limit (`hloscope inspect` itself then says "does not fit" with XLA's
refusal).

For GPUs, XLA's compiler checks no memory: the answer comes at run time from JAX's
allocator, which takes total memory x memory fraction (openxla/xla
xla/pjrt/gpu/gpu_helpers.cc).  Without a GPU here, the reference is that product
applied to XLA's allocation (`memory_analysis()`), under XLA_PYTHON_CLIENT_MEM_FRACTION
unset (0.75) and .5; hloscope's verdict is `report.fit` under the same setting.

`--probe` finds, by bisection, the largest need (arguments + outputs + temp + code) XLA
compiles on each TPU generation: the figures in src/hloscope/_target/_limits.py.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

MARGIN = 0.005
GiB = 1 << 30
# The HBM per device hloscope compared with before it knew XLA's limits (the chip's HBM
# from Google's Cloud TPU pages, halved for two devices per chip): the "before" column.
BEFORE = {"tpu-v2": 8 * GiB, "tpu-v3": 16 * GiB, "tpu-v4": 16 * GiB, "tpu-v5e": 16 * GiB,
          "tpu-v5p": 95 * 10**9, "tpu-v6e": 32 * GiB, "tpu7x": 96 * 10**9}


def _program():  # type: ignore[no-untyped-def]
    import jax

    return jax.jit(lambda x, y: x * 2 + y, donate_argnums=0)


def _args(need: int, mesh=None):  # type: ignore[no-untyped-def]
    """Two f32 arrays that together take `need` bytes (rounded to 4 KiB tiles)."""
    import jax
    import jax.numpy as jnp

    n = need // 2 // 4096 * 1024
    kw = {}
    if mesh is not None:
        from jax.sharding import NamedSharding, PartitionSpec

        kw["sharding"] = NamedSharding(mesh, PartitionSpec())
    return [jax.ShapeDtypeStruct((n,), jnp.float32, **kw) for _ in range(2)]


def _estimate_fit(fn, args, chip: str):  # type: ignore[no-untyped-def]
    """hloscope's verdict with no compile at hand: its estimate of the allocation from the
    module as lowered, against the target's limit."""
    from hloscope._analysis._fit import hbm_fit
    from hloscope._analysis._memory import analyze_memory
    from hloscope._sources._reader import read_text
    from hloscope._target._catalog import device_limit

    module = read_text(fn.lower(*args).as_text(dialect="hlo"), filename="<lowered>").module
    limit = device_limit(chip)
    return hbm_fit(analyze_memory(module), limit.hbm_bytes, chip, limit_bytes=limit.bytes,
                   limit=limit.what)


def tpu_rows() -> list[tuple[str, str, int, str, str, str]]:
    import hloscope
    from hloscope._errors import HloscopeError
    from hloscope._target._catalog import CHIPS, device_limit

    rows = []
    fn = _program()
    for chip in (c for c in CHIPS if c.platform == "tpu"):
        limit = device_limit(chip.key).bytes
        for side, factor in (("below", 1 - MARGIN), ("above", 1 + MARGIN)):
            need = int(limit * factor)
            args = _args(need)
            try:
                r = hloscope.inspect(fn, *args, target=chip.key)
            except HloscopeError as e:
                if "does not fit" not in str(e):
                    raise
                xla = "refuses"
                fit = _estimate_fit(fn, args, chip.key)
                ours = ("fits" if fit.fits else "does NOT fit") + " (estimate)"
            else:
                xla = "compiles"
                ours = "fits" if r.fit.fits else "does NOT fit"
            agree = (xla == "compiles") == ours.startswith("fits")
            before = "fits" if need <= BEFORE[chip.key] else "does NOT fit"
            if (before == "fits") != (xla == "compiles"):
                before += " (wrong)"
            rows.append((chip.key, side, need, xla, ours + ("" if agree else "  <- differs"),
                         before))
    return rows


def gpu_rows() -> list[tuple[str, str, int, str, str, str]]:
    import hloscope
    from hloscope._target._catalog import device_limit

    rows = []
    fn = _program()
    for fraction in ("", ".5"):
        if fraction:
            os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = fraction
        else:
            os.environ.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
        for chip in ("h100", "a100-40"):
            limit = device_limit(chip)
            for side, factor in (("below", 1 - MARGIN), ("above", 1 + MARGIN)):
                r = hloscope.inspect(fn, *_args(int(limit.bytes * factor)), target=chip)
                ma = r.memory_analysis or {}
                allocation = (ma["argument_size_in_bytes"] + ma["output_size_in_bytes"]
                              - ma.get("alias_size_in_bytes", 0) + ma["temp_size_in_bytes"])
                # JAX's allocator: total x fraction (gpu_helpers.cc).
                capacity = int(limit.hbm_bytes * float(fraction or 0.75))
                xla = "allocator holds it" if allocation <= capacity else "allocator OOM"
                ours = "fits" if r.fit.fits else "does NOT fit"
                agree = (allocation <= capacity) == r.fit.fits
                label = f"{chip} (fraction {fraction or 'unset: .75'})"
                before = "fits" if allocation <= limit.hbm_bytes else "does NOT fit"
                if (before == "fits") != (allocation <= capacity):
                    before += " (wrong)"
                rows.append((label, side, allocation, xla, ours + ("" if agree else
                                                                   "  <- differs"), before))
    os.environ.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
    return rows


def probe() -> None:
    """The largest need XLA compiles on one device of each TPU generation (8 KiB steps)."""
    import jax

    from hloscope._jax._target import prepare
    from hloscope._target._catalog import CHIPS

    fn = jax.jit(lambda a: a * 2)
    for chip in (c for c in CHIPS if c.platform == "tpu"):
        p = prepare(chip.key)
        mesh = jax.sharding.Mesh(p.devices[:1], ("d",))

        def need(k: int) -> int | None:
            x = _args(k * 8192, mesh)[0]
            try:
                m = fn.lower(x).compile().memory_analysis()
            except Exception:  # noqa: BLE001  (XLA's refusal: RESOURCE_EXHAUSTED)
                return None
            return (m.argument_size_in_bytes + m.output_size_in_bytes
                    + m.temp_size_in_bytes + m.generated_code_size_in_bytes)

        lo, hi, best = (1 << 30) // 8192, (256 << 30) // 8192, 0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            got = need(mid)
            if got is None:
                hi = mid
            else:
                lo, best = mid, got
        print(f"{chip.key:8} {p.info['device_kind']:14} largest need XLA compiles: "
              f"{best:,} B ({best / 2**30:.3f} GiB)", flush=True)


def main() -> None:
    if "--probe" in sys.argv[1:]:
        probe()
        return
    rows = tpu_rows() + gpu_rows()
    print(f"{'target':30} {'program':8} {'need (B)':>16} {'XLA':19} {'hloscope':26} "
          "before (against the HBM)")
    for target, side, need, xla, ours, before in rows:
        print(f"{target:30} {side:8} {need:>16,} {xla:19} {ours:26} {before}")
    same = sum("differs" not in r[4] for r in rows)
    wrong = sum("wrong" in r[5] for r in rows)
    print(f"hloscope's verdict equals XLA's on {same} of {len(rows)} (before: "
          f"{len(rows) - wrong} of {len(rows)})")


if __name__ == "__main__":
    main()
