"""Which results to plot: jax-hpc-profiler's filters (function, precision, data size,
device count, backend, process grid), each naming what there is when it keeps nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .._errors import HloscopeError

if TYPE_CHECKING:
    from ._result import BenchResult

__all__ = ["select"]


def _param(r: BenchResult, key: str) -> str:
    v = r.params.get(key)
    return "" if v is None else str(v)


def _size_of(r: BenchResult) -> str:
    dims = [_param(r, k) for k in ("X", "Y", "Z") if _param(r, k)]
    return "x".join(dims)


def _size_matches(r: BenchResult, want: str) -> bool:
    dims = [d for d in _size_of(r).split("x") if d]
    want_dims = want.lower().replace("³", "").split("x")
    if len(want_dims) == 1:  # 128: the size along x, as jax-hpc-profiler's --data_size
        return bool(dims) and dims[0] == want_dims[0] or _param(r, "size") == want_dims[0]
    return dims == want_dims


def _grid(r: BenchResult) -> str:
    return f"{_param(r, 'PX')}x{_param(r, 'PY')}" if _param(r, "PX") else ""


def select(results: list[BenchResult], *, functions: Sequence[str] = (),
           precisions: Sequence[str] = (), sizes: Sequence[str] = (),
           devices: Sequence[int] = (), backends: Sequence[str] = (),
           grids: Sequence[str] = ()) -> list[BenchResult]:
    """The results that pass every filter given (an empty filter keeps everything); an
    `HloscopeError` naming the values present when a filter keeps nothing."""
    filters: list[tuple[str, Sequence[object], Callable[[BenchResult], str],
                        Callable[[BenchResult, object], bool]]] = [
        ("function", functions, lambda r: _param(r, "Function") or r.name,
         lambda r, w: (_param(r, "Function") or r.name) == w),
        ("precision", precisions, lambda r: _param(r, "Precision"),
         lambda r, w: _param(r, "Precision") == w),
        ("size", sizes, _size_of, lambda r, w: _size_matches(r, str(w))),
        ("device count", devices, lambda r: str(r.devices or "?"),
         lambda r, w: r.devices == int(w)),  # type: ignore[call-overload]
        ("backend", backends, lambda r: _param(r, "Backend"),
         lambda r, w: _param(r, "Backend").lower() == str(w).lower()),
        ("grid", grids, _grid, lambda r, w: _grid(r) == str(w).lower()),
    ]
    out = list(results)
    for what, wanted, show, keep in filters:
        if not wanted:
            continue
        kept = [r for r in out if any(keep(r, w) for w in wanted)]
        if not kept:
            present = sorted({show(r) for r in out} - {""}, key=lambda x: (len(x), x))
            raise HloscopeError(
                f"no result with {what} {', '.join(map(str, wanted))} "
                f"(here: {', '.join(present[:12]) or 'none'}{', ...' if len(present) > 12 else ''})",
                hint=f"pick a {what} from the list, or leave the filter out")
        out = kept
    return out
