"""`hloscope.timer` and `hloscope.time_call`: the times of the user's own code
(a region of a training loop, any callable: JAX, NumPy, anything), measured to
the end of the work it started (JAX dispatches asynchronously), and made into a
`BenchResult` for the same reports, CSV files and plots as `hloscope.bench`'s,
like jax-hpc-profiler's ``chrono_fun``.  An inactive timer
(``timer(name, active=False)``, or ``HLOSCOPE_TIMER=0`` in the environment) does
nothing: its decorator returns the function itself.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from .._errors import HloscopeError
from ._result import BenchResult
from ._stats import time_stats

__all__ = ["Timer", "time_call", "timer"]

# jax-hpc-profiler's parameter names, any case in, its case out.
_CANONICAL = {"function": "Function", "precision": "Precision", "x": "X", "y": "Y", "z": "Z",
              "px": "PX", "py": "PY", "backend": "Backend", "nodes": "Nodes"}


def _wait_for(value: Any) -> None:
    """Wait until the arrays in `value` (any pytree) are computed (nothing to wait for
    when JAX is not in use: NumPy and plain Python finish before they return)."""
    if "jax" not in sys.modules:
        return
    import jax

    jax.block_until_ready(value)


def _result(name: str, times: list[float], first_apart: bool, source: str,
            params: dict[str, Any]) -> BenchResult:
    """`times` as a `BenchResult`: parameters in jax-hpc-profiler's names (the function's
    name filled in), the device count from the grid, or JAX's when it is in use."""
    if not times:
        raise HloscopeError(f"{name}: no runs timed yet", hint="time some runs first")
    table = {"Function": name}
    table.update({_CANONICAL.get(str(k).lower(), str(k)): v for k, v in params.items()})
    first = times[0] if first_apart and len(times) > 1 else None
    meta: dict[str, Any] = {}
    try:
        meta["device_count"] = int(table["PX"]) * int(table["PY"])
    except (KeyError, TypeError, ValueError):
        if "jax" in sys.modules:
            import jax

            meta["device_count"] = jax.device_count()
            meta["process_count"] = jax.process_count()
        else:
            meta["device_count"] = 1
    return BenchResult(name=name, params=table, times=list(times[1:] if first else times),
                       first_run=first, metadata=meta, source=source)


def _wait_for_all() -> None:
    """Wait until every live JAX array is computed: what a region dispatched is among
    them (an array deleted meanwhile, donated to the next step, is skipped)."""
    if "jax" not in sys.modules:
        return
    import jax

    for a in jax.live_arrays():
        try:
            a.block_until_ready()
        except RuntimeError:  # deleted (donated) after it was listed
            pass


class Timer:
    """The times of a region of a program, measured to the end of the work it started.

    JAX dispatches work asynchronously: a block of code returns long before the device
    has done what it asked for, so a plain clock around it measures the dispatch.  A
    `Timer` waits for the work before it stops the clock:

    ```python
    t = hloscope.timer("step")
    for batch in data:
        with t:
            state = t.result(train_step(state, batch))   # waits for `state`
    print(t)            # step: median 4.12 ms over 100 runs ...
    ```

    - `result(value)` names what the region produced (any pytree of arrays) and returns
      it; the clock stops when it is computed.
    - Without `result`, the clock stops when every live JAX array is computed (which
      includes what the region produced, and may include work started before it).
    - As a decorator, `@t` times each call of a function until its result is computed.

    Every use appends to `times` (seconds); a region that raised appends nothing.
    """

    active = True

    def __init__(self, name: str = "region") -> None:
        self.name = name
        self.times: list[float] = []
        self._t0: float | None = None
        self._results: list[Any] = []

    def result(self, value: Any) -> Any:
        """Mark `value` as what the current region produced; returns it unchanged."""
        if self._t0 is None:
            raise HloscopeError(f"timer {self.name!r}: result() is called inside a "
                                "`with` block of the timer")
        self._results.append(value)
        return value

    def __enter__(self) -> Timer:
        if self._t0 is not None:
            raise HloscopeError(f"timer {self.name!r} is already timing a region",
                                hint="nest two different timers, not one twice")
        self._results = []
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        t0, self._t0 = self._t0, None
        results, self._results = self._results, []
        if kind is not None or t0 is None:
            return
        if results:
            _wait_for(results)
        else:
            _wait_for_all()
        self.times.append(time.perf_counter() - t0)

    def __call__(self, fn: Any) -> Any:
        """As a decorator: time every call of `fn` until its result is computed."""
        import functools

        @functools.wraps(fn)
        def wrapped(*a: Any, **k: Any) -> Any:
            with self:
                return self.result(fn(*a, **k))

        return wrapped

    @property
    def stats(self) -> dict[str, Any]:
        """The statistics of `times` (see `BenchResult.stats`)."""
        return time_stats(self.times)

    def to_result(self, *, first_apart: bool = True, **params: Any) -> BenchResult:
        """The times as a `BenchResult`, for the same report, CSV and plots as
        `hloscope.bench`'s.  `params` in jax-hpc-profiler's names (``x=``, ``px=``,
        ``precision=``, ...); the first run is kept apart from the statistics unless
        `first_apart` is False."""
        return _result(self.name, self.times, first_apart, "hloscope.timer", params)

    def save(self, path: str, *, first_apart: bool = True, **params: Any) -> list[str]:
        """`to_result(...).save(path)`: a folder (report .md, .json, .html and a row in
        results.csv) or one file (.md, .json, .html, .csv)."""
        return self.to_result(first_apart=first_apart, **params).save(path)

    def __repr__(self) -> str:
        if not self.times:
            return f"Timer({self.name!r}: no runs yet)"
        s = self.stats
        return (f"Timer({self.name!r}: median {s['median'] * 1e3:.4g} ms, min "
                f"{s['min'] * 1e3:.4g}, max {s['max'] * 1e3:.4g} over {s['runs']} runs)")

    __str__ = __repr__


class _Inactive(Timer):
    """A timer switched off: `with` and `result` do nothing, the decorator returns the
    function itself, `times` stays empty."""

    active = False

    def result(self, value: Any) -> Any:
        return value

    def __enter__(self) -> Timer:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        return None

    def __call__(self, fn: Any) -> Any:
        return fn

    def __repr__(self) -> str:
        return f"Timer({self.name!r}: inactive)"

    __str__ = __repr__


_timers: dict[str, Timer] = {}


def timer(name: str = "region", *, active: bool | None = None) -> Timer:
    """The `Timer` of this name (created on first use, shared after): ``with
    hloscope.timer("step") as t: state = t.result(step(state))``.  With
    ``active=False`` (or ``HLOSCOPE_TIMER=0`` in the environment, when `active` is not
    given) an inactive timer that costs nothing."""
    if active is None:
        active = os.environ.get("HLOSCOPE_TIMER", "1").strip().lower() not in ("0", "false",
                                                                               "off", "no")
    if not active:
        return _Inactive(name)
    return _timers.setdefault(name, Timer(name))


def time_call(fn: Callable[..., Any], *args: Any, iterations: int = 10, warmup: int = 1,
              name: str | None = None, **params: Any) -> BenchResult:
    """Time `fn(*args)` as it is, any callable (NumPy, SciPy, plain Python, a JAX function
    without hloscope's compile analysis): the first call apart, `warmup` calls discarded,
    then `iterations` timed calls, each to the end of the work it started (JAX's outputs
    are waited for).  `params` in jax-hpc-profiler's names; the result goes into the same
    reports, CSV files and plots as `hloscope.bench`'s."""
    if iterations < 1 or warmup < 0:
        raise HloscopeError(f"time_call: iterations={iterations}, warmup={warmup}",
                            hint="time at least one run, with zero or more warm-up runs")
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    t = time.perf_counter
    times: list[float] = []
    for i in range(1 + warmup + iterations):
        a = t()
        out = fn(*args)
        _wait_for(out)
        dt = t() - a
        if i == 0 or i > warmup:
            times.append(dt)
    result = _result(label, times, True, "hloscope.time_call", params)
    result.warmup = warmup
    return result
