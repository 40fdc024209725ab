"""How much memory a program may really use on a target device: XLA's or JAX's own limit.

A device's HBM is not what a program gets:

- **TPU.** XLA's TPU compiler refuses a program whose arguments, outputs, temporaries
  and code exceed the HBM it has available per device ("Ran out of memory in memory
  space hbm. Used 15.75G of 15.75G hbm"), which is the chip's HBM less what libtpu
  reserves.  `TPU_AVAILABLE` holds, per generation, the largest need (arguments +
  outputs + temp + generated code) that libtpu 0.0.42.1 compiled, found by compiling
  programs just above and below (``benchmarks/fit_verdict.py --probe``; within 8 KiB).
- **GPU.** XLA's GPU compiler checks nothing; at run time JAX's allocator takes a
  fraction of the device's memory (``total_memory * memory_fraction`` in
  openxla/xla ``xla/pjrt/gpu/gpu_helpers.cc``, ``CreateBFCAllocator``, with or
  without preallocation), 0.75 unless ``XLA_CLIENT_MEM_FRACTION`` (or its old name
  ``XLA_PYTHON_CLIENT_MEM_FRACTION``) says otherwise; ``XLA_PYTHON_CLIENT_ALLOCATOR=
  platform`` allocates from the whole device instead (JAX's "GPU memory allocation"
  page).  `gpu_limit` reads those settings from the environment of this process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .._errors import HloscopeError
from .._units import format_bytes

__all__ = ["Limit", "TPU_AVAILABLE", "TPU_SOURCE", "gpu_limit", "tpu_limit"]

# libtpu's name of a generation -> bytes per device.  The message XLA prints when a
# program does not fit rounds them: v2 7.48G, v3 15.48G, v4 15.25G, v5e 15.75G, v5p
# 95.74G, v6e 31.25G, 7x 94.75G (G = 2^30 bytes).
TPU_AVAILABLE: dict[str, int] = {
    "v2": 8_034_187_264,
    "v3": 16_624_121_856,
    "v4": 16_372_986_880,
    "v5e": 16_909_328_896,
    "v5p": 102_803_432_448,
    "v6e": 33_550_233_600,
    "tpu7x": 101_732_836_352,
}
TPU_SOURCE = ("XLA's TPU compiler (libtpu 0.0.42.1): the HBM it has available per device, "
              "as its refusal says (\"Used 15.75G of 15.75G hbm\"); measured as the largest "
              "program that compiles (benchmarks/fit_verdict.py --probe)")
_GPU_SOURCE = ("JAX's GPU allocator takes total memory x memory fraction (openxla/xla "
               "xla/pjrt/gpu/gpu_helpers.cc); JAX's page \"GPU memory allocation\"")


@dataclass(frozen=True, slots=True)
class Limit:
    """The bytes a program may use per device (`bytes`), out of `hbm_bytes`; `what` says
    where the figure comes from in a few words, `source` in full."""

    bytes: int
    hbm_bytes: int
    what: str
    source: str
    share: str = ""  # a GPU's: "75%", or "all" with the platform allocator


def tpu_limit(tpu_name: str, hbm_bytes: int) -> Limit:
    """XLA's available HBM per device of a TPU generation (libtpu's name: ``v5e``)."""
    avail = TPU_AVAILABLE.get(tpu_name)
    if avail is None:
        return Limit(hbm_bytes, hbm_bytes, "the device's HBM", "the chip's HBM")
    return Limit(avail, hbm_bytes, "the HBM XLA's TPU compiler has available per device "
                 f"(of {format_bytes(hbm_bytes)}; the rest is libtpu's)", TPU_SOURCE)


def _fraction(env: Mapping[str, str]) -> tuple[float, str]:
    """The memory fraction JAX gives its GPU allocator and the variable that set it."""
    for name in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"):
        text = env.get(name, "").strip()
        if text:
            try:
                value = float(text)
            except ValueError:
                raise HloscopeError(f"{name}={text!r} is not a number",
                                    hint=f"set {name} to a fraction such as .75, or unset "
                                         "it") from None
            if not 0 < value <= 1.0:
                raise HloscopeError(f"{name}={text!r}: JAX's memory fraction is between 0 "
                                    "and 1", hint=f"set {name} to a fraction such as .75")
            return value, name
    return 0.75, ""


def gpu_limit(name: str, hbm_bytes: int, env: Mapping[str, str] | None = None) -> Limit:
    """What JAX's allocator will take on one GPU (called `name`) under the settings in
    `env` (default: this process's environment)."""
    env = os.environ if env is None else env
    allocator = env.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default").strip().lower()
    if allocator == "platform":
        return Limit(hbm_bytes, hbm_bytes, f"all of the {name}'s {format_bytes(hbm_bytes)}: "
                     "XLA_PYTHON_CLIENT_ALLOCATOR=platform allocates from the whole device",
                     _GPU_SOURCE, "all")
    fraction, var = _fraction(env)
    grow = env.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").strip() in ("false", "False", "0")
    how = "grows to" if grow else "takes"
    said = (f"under {var}={env[var].strip()}" if var else
            "by default (XLA_PYTHON_CLIENT_MEM_FRACTION)")
    what = (f"{fraction * 100:g}% of the {name}'s {format_bytes(hbm_bytes)} that JAX's "
            f"allocator {how} {said}" + (", XLA_PYTHON_CLIENT_PREALLOCATE=false" if grow
                                         else ""))
    return Limit(int(hbm_bytes * fraction), hbm_bytes, what, _GPU_SOURCE,
                 f"{fraction * 100:g}%")
