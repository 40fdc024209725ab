"""`hloscope.timer`: the times of a region of the user's own program, measured to
the end of the work it started (JAX dispatches asynchronously)."""

from __future__ import annotations

import time
from typing import Any

from .._errors import HloscopeError
from ._stats import time_stats

__all__ = ["Timer", "timer"]


def _wait_for(value: Any) -> None:
    """Wait until the arrays in `value` (any pytree) are computed."""
    import jax

    jax.block_until_ready(value)


def _wait_for_all() -> None:
    """Wait until every live JAX array is computed: what a region dispatched is among
    them (an array deleted meanwhile, donated to the next step, is skipped)."""
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

    def __repr__(self) -> str:
        if not self.times:
            return f"Timer({self.name!r}: no runs yet)"
        s = self.stats
        return (f"Timer({self.name!r}: median {s['median'] * 1e3:.4g} ms, min "
                f"{s['min'] * 1e3:.4g}, max {s['max'] * 1e3:.4g} over {s['runs']} runs)")

    __str__ = __repr__


_timers: dict[str, Timer] = {}


def timer(name: str = "region") -> Timer:
    """The `Timer` of this name (created on first use, shared after): ``with
    hloscope.timer("step") as t: state = t.result(step(state))``."""
    return _timers.setdefault(name, Timer(name))
