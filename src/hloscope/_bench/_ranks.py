"""Many processes (`jax.distributed`): a barrier before timing, every rank's times
gathered, and a clear error instead of a hang.

Everything goes through the coordination service's key-value store and
barriers, which take timeouts, rather than device collectives, which wait
forever for a rank that died.  Every rank publishes its own times under a key
of this benchmark and reads everybody's, so all ranks hold the same result;
only rank 0 writes files (see `BenchResult.save`).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from .._errors import HloscopeError

__all__ = ["Ranks"]

_counter = itertools.count()


class Ranks:
    """The processes of this run; a single process when `jax.distributed` is not set up."""

    def __init__(self, timeout: float = 60.0) -> None:
        import jax

        self.count = jax.process_count()
        self.rank = jax.process_index()
        self.timeout_ms = max(1, int(timeout * 1000))
        self.timeout = timeout
        self.key = f"hloscope/bench/{next(_counter)}"
        self.client: Any = None
        if self.count > 1:
            from jax._src import distributed

            self.client = distributed.global_state.client
            if self.client is None:
                raise HloscopeError("JAX reports several processes but no distributed client",
                                    hint="call jax.distributed.initialize() before "
                                         "hloscope.bench")

    def barrier(self, name: str) -> None:
        """Wait until every rank is here, or raise after the timeout."""
        if self.client is None:
            return
        try:
            self.client.wait_at_barrier(f"{self.key}/{name}", self.timeout_ms)
        except Exception as e:  # noqa: BLE001  (XLA raises its own runtime error types)
            raise HloscopeError(
                f"rank {self.rank} of {self.count}: not every process reached the "
                f"'{name}' barrier within {self.timeout:g} s ({_first_line(e)})",
                hint="a process died, is stuck, or runs a different program; check every "
                     "rank's log, or raise hloscope.bench(timeout=...) for slow starts") from None

    def _get(self, key: str, what: str, rank: int) -> str:
        try:
            return str(self.client.blocking_key_value_get(f"{self.key}/{key}", self.timeout_ms))
        except Exception as e:  # noqa: BLE001
            raise HloscopeError(
                f"rank {self.rank} of {self.count}: rank {rank} did not send its {what} "
                f"within {self.timeout:g} s ({_first_line(e)})",
                hint=f"rank {rank} died or is stuck; check its log, or raise "
                     "hloscope.bench(timeout=...)") from None

    def agree(self, name: str, value: int) -> int:
        """Rank 0's value of `name` (e.g. the adaptive iteration count), on every rank."""
        if self.client is None:
            return value
        if self.rank == 0:
            self.client.key_value_set(f"{self.key}/{name}", str(value))
            return value
        return int(self._get(name, name, 0))

    def same(self, name: str, value: Any) -> None:
        """Raise on every rank when the ranks were given different values of `name`."""
        if self.client is None:
            return
        self.client.key_value_set(f"{self.key}/{name}/{self.rank}", json.dumps(value))
        values = [value if r == self.rank else json.loads(self._get(f"{name}/{r}", name, r))
                  for r in range(self.count)]
        # Every rank has read every value before any raises: rank 0 hosts the coordination
        # service, and its leaving would cut the others off mid-read.
        self.barrier(f"{name} read")
        if any(v != values[0] for v in values):
            def show(v: Any) -> str:
                if isinstance(v, dict):
                    return " ".join(f"{k}={x}" for k, x in v.items())
                return str(v)

            detail = "; ".join(f"rank {r}: {show(v)}" for r, v in enumerate(values))
            raise HloscopeError(f"the ranks disagree on the {name} ({detail})",
                                hint=f"give every process the same {name}")

    def gather(self, times: list[float]) -> list[list[float]]:
        """Every rank's times, in rank order, on every rank.  Ranks that ran a different
        number of iterations are an error, not something to average over."""
        if self.client is None:
            return [list(times)]
        self.client.key_value_set(f"{self.key}/times/{self.rank}", json.dumps(times))
        out = [list(times) if r == self.rank else
               [float(x) for x in json.loads(self._get(f"times/{r}", "times", r))]
               for r in range(self.count)]
        counts = [len(t) for t in out]
        if len(set(counts)) > 1:
            detail = ", ".join(f"rank {r} ran {c}" for r, c in enumerate(counts))
            raise HloscopeError(f"the ranks disagree on the iteration count: {detail}",
                                hint="give every process the same iterations= and min_time=")
        return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__
