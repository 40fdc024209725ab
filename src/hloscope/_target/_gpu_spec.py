"""XLA's GPU target configs (``GpuTargetConfigProto`` in protobuf text format).

hloscope ships the configs XLA publishes in ``xla/backends/gpu/target_config/specs``
(see ``_data/gpu_targets/SOURCES.md``) and reads from them what a report needs:
HBM size, memory bandwidth and peak FLOP/s per element type.  A config may carry
fields an older JAX plugin does not know; `strip_fields` removes them (the JAX front
end learns which from the plugin's own parse error and records what it removed).

Only the subset of text format these files use is read: ``name: value`` and
``name { ... }`` blocks, one field per line, ``#`` comments.
"""

from __future__ import annotations

import re
from typing import Any

from .._errors import HloscopeError

__all__ = ["GpuFigures", "gpu_figures", "parse_textproto", "strip_fields"]

_FIELD_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*(.*?)\s*)?(\{)?\s*$")

# XLA's PrimitiveType numbers (xla_data.proto) for the keys of the rate tables.
_PRIMITIVE = {2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32", 9: "u64",
              10: "f16", 11: "f32", 12: "f64", 16: "bf16", 19: "f8e5m2", 20: "f8e4m3fn",
              21: "s4", 22: "u4", 23: "f8e4m3b11fnuz", 24: "f8e5m2fnuz", 25: "f8e4m3fnuz",
              28: "f8e4m3", 29: "f8e3m4", 32: "f4e2m1fn", 33: "f8e8m0fnu"}


def _scalar(text: str) -> Any:
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text  # an enum name such as ACCELERATED_FEATURES


def parse_textproto(text: str, *, source: str = "<config>") -> dict[str, Any]:
    """Nested dicts; every field maps to a list of its values (fields may repeat)."""
    root: dict[str, Any] = {}
    stack = [root]
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if '"' not in raw else raw.strip()
        if not line or line.startswith("#"):
            continue
        if line == "}":
            if len(stack) == 1:
                raise HloscopeError(f"{source}:{n}: '}}' without a block to close")
            stack.pop()
            continue
        m = _FIELD_RE.match(line)
        if m is None or (m.group(2) is None and m.group(3) is None):
            raise HloscopeError(f"{source}:{n}: cannot read {line[:60]!r} as a text-format "
                                "field")
        key = m.group(1)
        if m.group(3):
            child: dict[str, Any] = {}
            stack[-1].setdefault(key, []).append(child)
            stack.append(child)
        else:
            stack[-1].setdefault(key, []).append(_scalar(m.group(2) or ""))
    if len(stack) != 1:
        raise HloscopeError(f"{source}: a block is not closed")
    return root


def strip_fields(text: str, names: set[str] | frozenset[str]) -> str:
    """`text` without the fields (scalars or whole blocks) called any of `names`."""
    out: list[str] = []
    skip_depth = 0
    for raw in text.splitlines():
        line = raw.strip()
        if skip_depth:
            skip_depth += line.endswith("{") - (line == "}")
            continue
        m = _FIELD_RE.match(line)
        if m is not None and m.group(1) in names:
            if m.group(3):
                skip_depth = 1
            continue
        out.append(raw)
    return "\n".join(out) + "\n"


class GpuFigures:
    """What a report takes from a config: `hbm_bytes`, `bandwidth` (bytes/s), `flops`
    (peak FLOP/s per element type, from the matrix units where the config lists them,
    else the vector units), `name` and `cores`."""

    __slots__ = ("bandwidth", "cores", "flops", "hbm_bytes", "name")

    def __init__(self, name: str, hbm_bytes: int, bandwidth: float, flops: dict[str, float],
                 cores: int) -> None:
        self.name = name
        self.hbm_bytes = hbm_bytes
        self.bandwidth = bandwidth
        self.flops = flops
        self.cores = cores


def _one(d: dict[str, Any], key: str, default: Any = None) -> Any:
    v = d.get(key)
    return v[0] if v else default


def _rates(info: dict[str, Any], key: str, cores: int) -> dict[str, float]:
    """FLOP/s per element type: an FMA is two operations, as vendors count them."""
    out: dict[str, float] = {}
    desc = _one(info, key)
    if not desc:
        return out
    for entry in desc.get("rate_infos", []):
        dtype = _PRIMITIVE.get(_one(entry, "key", -1))
        value = _one(entry, "value") or {}
        if dtype is None:
            continue
        out[dtype] = (2.0 * float(_one(value, "clock_rate_ghz", 0.0)) * 1e9
                      * int(_one(value, "units_per_core", 0)) * int(_one(value, "ops_per_clock", 0))
                      * cores)
    return out


def compute_capability(config: dict[str, Any]) -> tuple[int, int]:
    """The GPU's CUDA compute capability, (major, minor), from a parsed config."""
    info = _one(config, "gpu_device_info") or {}
    cc = _one(info, "cuda_compute_capability") or {}
    return int(_one(cc, "major", 0)), int(_one(cc, "minor", 0))


def gpu_figures(config: dict[str, Any]) -> GpuFigures:
    """Read a parsed config (see `parse_textproto`)."""
    info = _one(config, "gpu_device_info") or {}
    cores = int(_one(info, "core_count", 0))
    flops = _rates(info, "scalar_unit_description", cores)
    flops.update(_rates(info, "matrix_unit_description", cores))
    if "f32" not in flops and cores:
        # Configs without rate tables: the FP32 vector peak from the core count.
        flops["f32"] = (2.0 * float(_one(info, "clock_rate_ghz", 0.0)) * 1e9 * cores
                        * int(_one(info, "fpus_per_core", 0)))
    name = str(_one(config, "device_description_str", "") or _one(info, "name", "GPU"))
    return GpuFigures(name, int(_one(info, "device_memory_size", 0)),
                      float(_one(info, "memory_bandwidth", 0.0)), flops, cores)
