"""Many processes (`jax.distributed`): a barrier before timing, every rank's times
gathered, and a clear error instead of a hang or an abort.

Everything hloscope exchanges goes through the coordination service's
key-value store and barriers, which take timeouts, rather than device
collectives, which wait forever for a rank that died.  Every rank publishes
its own times under a key of this benchmark and reads everybody's, so all
ranks hold the same result; only rank 0 writes files (see `BenchResult.save`).

Every rank raises its own pulse (a counter in the store) twice a second for
the whole benchmark; while the program runs, a watchdog reads the others'
pulses, and a rank whose pulse stands still for the timeout died or was
stopped: the error names it, whatever the program does.  The program itself
may hold collectives across processes; a rank that dies while they run makes
them fail (an error from the collective library, turned into an
`HloscopeError` naming the phase), and a rank that stops answering makes them
wait forever: the watchdog then prints the error and ends the process
(`os._exit(2)`), since nothing can interrupt XLA's collective.

After a fault, JAX's own shutdown at exit would wait for the missing rank
(and then abort): hloscope disarms it, so the process ends as soon as the
error is handled.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .._errors import HloscopeError

__all__ = ["Ranks", "disarm_shutdown", "is_peer_failure"]

# Words in the errors XLA's collective libraries raise when a peer went away.
_PEER_WORDS = ("gloo", "connection reset", "connection refused", "connection closed",
               "socket closed", "broken pipe", "unavailable", "deadline_exceeded",
               "coordination service", "heartbeat", "nccl", "peer", "barrier")
_kept: list[Any] = []  # the disarmed client and service: never destroyed (see below)


def is_peer_failure(error: BaseException) -> bool:
    """Whether `error` reads like a collective that failed because another process left."""
    text = f"{type(error).__name__} {error}".lower()
    return any(w in text for w in _PEER_WORDS)


def _leak(obj: object) -> None:
    """Keep `obj` alive past the interpreter's finalization (which clears module globals):
    its destructor would shut the distributed runtime down, and the client's error poller
    ends the process when the service goes (an abort)."""
    try:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    except Exception:  # noqa: BLE001  (not CPython: `_kept` holds it as long as it can)
        pass


def disarm_shutdown() -> None:
    """Make JAX's shutdown at exit a no-op.  It waits at a barrier for every process
    (a dead one never comes) and its client ends the process when the service reports
    a missing rank; after a fault hloscope has already said what happened.  The client
    and service are kept referenced forever (their destructors would shut down too)."""
    try:
        from jax._src import distributed
    except ImportError:  # pragma: no cover  (JAX's private layout changed)
        return
    state = distributed.global_state
    for attr in ("preemption_sync_manager", "client", "service"):
        obj = getattr(state, attr, None)
        if obj is not None:
            _kept.append(obj)
            _leak(obj)
            try:
                setattr(state, attr, None)
            except AttributeError:  # pragma: no cover
                pass

_counter = itertools.count()
_BEAT = 0.5  # seconds between two raises of a rank's pulse
_GRACE = 1.0  # seconds the run in flight may take to end once a rank is found missing
_SERVICE_GONE = "the coordination service is gone (rank 0, which hosts it, died)"
_SERVICE_STOPPED = "rank 0, which hosts the coordination service, stopped answering"


def _quiet(pulses: dict[int, tuple[str, float]], now: float, limit: float) -> str:
    """Who gave no sign of life for `limit` seconds at time `now` ("" when everyone did).

    `pulses` holds each other rank's last pulse and when it changed, and under -1 when
    the store (hosted by rank 0) last answered."""
    store = now - pulses[-1][1]  # the store answers every beat while rank 0 runs
    if store > limit:
        return _SERVICE_STOPPED
    ranks = [r for r, (_, t) in list(pulses.items()) if r >= 0 and now - t > limit]
    if 0 in ranks and store > 2 * _BEAT + 0.5:
        # rank 0's pulse last rose up to a beat before the store last answered, so it
        # goes quiet first: a store quiet as well means rank 0 itself stopped
        return _SERVICE_STOPPED
    return f"{_ranks(ranks)} stopped answering" if ranks else ""


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

    def phase(self, name: str) -> None:
        """Say which phase this process is in, for the CLI's supervisor (a line appended
        to the file named by ``HLOSCOPE_PROGRESS``, when set)."""
        path = os.environ.get("HLOSCOPE_PROGRESS")
        if path:
            with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as f:
                f.write(name + "\n")

    def fault(self, message: str, hint: str = "") -> HloscopeError:
        """The error for a rank gone missing; JAX's shutdown is disarmed first."""
        disarm_shutdown()
        return HloscopeError(message, hint=hint)

    def missing(self, name: str) -> list[int]:
        """The ranks that never arrived at barrier `name` (each rank leaves a key as it
        arrives; reading them never blocks, unlike asking the service who is alive)."""
        out = []
        for r in range(self.count):
            try:
                self.client.key_value_try_get(f"{self.key}/{name}/at/{r}")
            except Exception:  # noqa: BLE001  (NOT_FOUND, or the service is gone)
                out.append(r)
        return out

    def _pulse_key(self, rank: int) -> str:
        return f"{self.key}/alive/{rank}"

    @contextlib.contextmanager
    def pulse(self) -> Iterator[None]:
        """Raise this rank's pulse (a counter in the key-value store) twice a second while
        the benchmark runs, whatever the program does, so that the others can tell a rank
        that died or was stopped from one that is slow."""
        if self.client is None:
            yield
            return
        done = threading.Event()
        key = self._pulse_key(self.rank)

        def run() -> None:
            while True:
                with contextlib.suppress(Exception):  # the service may be gone
                    self.client.key_value_increment(key, 1)
                if done.wait(_BEAT):
                    return

        thread = threading.Thread(target=run, name="hloscope-pulse", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(2 * _BEAT)  # not forever: a raise may wait for a stopped rank 0

    def _pulses(self) -> dict[int, str] | None:
        """Every other rank's pulse ("" for one not seen yet); None when the coordination
        service itself is gone (rank 0, which hosts it, died)."""
        try:
            entries = self.client.key_value_dir_get(f"{self.key}/alive/")
        except Exception:  # noqa: BLE001
            return None
        seen = {k.rsplit("/", 1)[-1]: str(v) for k, v in entries}
        return {r: seen.get(str(r), "") for r in range(self.count) if r != self.rank}

    def silent(self) -> list[int] | None:
        """The other ranks whose pulse stood still for a second; None when the
        coordination service is gone."""
        before = self._pulses()
        time.sleep(2 * _BEAT)
        after = self._pulses()
        if before is None or after is None:
            return None
        return [r for r in before if before[r] == after[r]]

    def _who(self) -> str:
        silent = self.silent()
        if silent is None:
            return _SERVICE_GONE
        if silent:
            return f"{_ranks(silent)} stopped answering"
        return "another process stopped answering"

    def peer_failure(self, error: BaseException, phase: str) -> HloscopeError | None:
        """The error for `error` raised by the program's own collectives in `phase` when
        another process left (None with one process, or for any other error)."""
        if self.client is None or not is_peer_failure(error):
            return None
        return self.fault(f"rank {self.rank} of {self.count}: {self._who()} during the "
                          f"{phase}: the program's collectives failed ({_first_line(error)})",
                          hint="check the other ranks' logs for why they stopped")

    @contextlib.contextmanager
    def watch(self, phase: str, progress: list[float]) -> Iterator[Callable[[], None]]:
        """Guard a phase that runs the program; yields `check`, to call after each run.

        A watchdog reads the other ranks' pulses (see `pulse`): when one stands still for
        the timeout, that rank died or was stopped, and `check` raises the error naming
        it.  When the program is stuck meanwhile (its collectives wait for that rank) or
        no run finishes for the timeout, nothing can interrupt XLA: the watchdog prints
        the error and ends the process (exit status 2)."""
        lost: list[str] = []

        def check() -> None:
            if lost:
                raise self.fault(lost[0], hint=lost[1])

        if self.client is None:
            yield check
            return
        done = threading.Event()
        rank, count, timeout = self.rank, self.count, self.timeout
        who = f"rank {rank} of {count}"

        def leave(message: str, hint: str) -> None:
            sys.stderr.write(f"error: {message}\nhint: {hint}\n")
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(2)

        # The others' pulses, read by a thread of their own (a read waits forever when
        # rank 0, which hosts the store, is stopped): each rank's last value and when it
        # changed; rank -1: when the store last answered.
        pulses: dict[int, tuple[str, float]] = {-1: ("", time.monotonic())}

        def read() -> None:
            while not done.is_set():
                current = self._pulses()
                now = time.monotonic()
                if current is not None:
                    pulses[-1] = ("", now)
                    for r, value in current.items():
                        if r not in pulses or pulses[r][0] != value:
                            pulses[r] = (value, now)
                done.wait(_BEAT)

        def run() -> None:
            start = time.monotonic()
            seen, since, lost_at = len(progress), start, start
            while not done.wait(_BEAT / 2):
                now = time.monotonic()
                if lost:
                    if now - lost_at > _GRACE:  # the run in flight does not end: stuck
                        leave(*lost)
                    continue
                gone = _quiet(pulses, now, timeout)
                if gone:
                    lost_at = now
                    lost[:] = [f"{who}: {gone} during the {phase} (no sign of life for "
                               f"{timeout:g} s: it died, was stopped, or its machine is "
                               "overloaded)",
                               "check that rank's log; raise --timeout (bench(timeout=...)) "
                               "for an overloaded machine"]
                elif len(progress) != seen:
                    seen, since = len(progress), now
                elif now - since > timeout:
                    silent = (_quiet(pulses, now, 2 * _BEAT + 0.5)
                              or "another process stopped answering")
                    leave(f"{who}: no run finished for {timeout:g} s during the {phase}: "
                          f"{silent}, and the program's collectives wait for it "
                          "(hloscope ends this process: nothing can interrupt them)",
                          "check the other ranks (a stopped or overloaded process), or raise "
                          "the timeout")

        reader = threading.Thread(target=read, name="hloscope-pulses", daemon=True)
        thread = threading.Thread(target=run, name="hloscope-watchdog", daemon=True)
        reader.start()
        thread.start()
        try:
            yield check
        finally:
            done.set()
            thread.join()
            reader.join(2 * _BEAT)  # not forever: a read may wait for a stopped rank 0

    def barrier(self, name: str) -> None:
        """Wait until every rank is here, or raise after the timeout."""
        if self.client is None:
            return
        try:
            self.client.key_value_set(f"{self.key}/{name}/at/{self.rank}", "1")
            self.client.wait_at_barrier(f"{self.key}/{name}", self.timeout_ms)
        except Exception as e:  # noqa: BLE001  (XLA raises its own runtime error types)
            missing = [r for r in self.missing(name) if r != self.rank]
            who = (f"rank{'s' if len(missing) > 1 else ''} "
                   f"{', '.join(map(str, missing))} did not" if missing else
                   "not every process did")
            detail = "it died or is stuck" if missing else _first_line(e)
            raise self.fault(
                f"rank {self.rank} of {self.count}: {who} reach the '{name}' barrier within "
                f"{self.timeout:g} s ({detail})",
                hint="a process died, is stuck, or runs a different program; check every "
                     "rank's log, or raise the timeout (--timeout, bench(timeout=...)) for "
                     "slow starts") from None

    def _get(self, key: str, what: str, rank: int) -> str:
        try:
            return str(self.client.blocking_key_value_get(f"{self.key}/{key}", self.timeout_ms))
        except Exception as e:  # noqa: BLE001
            raise self.fault(
                f"rank {self.rank} of {self.count}: rank {rank} did not send its {what} "
                f"within {self.timeout:g} s ({_first_line(e)})",
                hint=f"rank {rank} died or is stuck; check its log, or raise "
                     "hloscope.bench(timeout=...)") from None

    def _everyone(self, name: str, value: Any, what: str) -> list[Any]:
        """Every rank's `value` of `name` (any JSON value), in rank order, on every rank."""
        self.client.key_value_set(f"{self.key}/{name}/{self.rank}", json.dumps(value))
        return [value if r == self.rank else json.loads(self._get(f"{name}/{r}", what, r))
                for r in range(self.count)]

    def agree(self, name: str, value: int) -> int:
        """The largest value of `name` (a run count) over every rank, on every rank."""
        if self.client is None:
            return value
        return max(int(v) for v in self._everyone(name, value, "run count"))

    def same(self, name: str, value: Any) -> None:
        """Raise on every rank when the ranks were given different values of `name`."""
        if self.client is None:
            return
        values = self._everyone(name, value, name)
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
                                hint=f"give every process the same {name}" + (
                                    " (the same arguments, parameters and code; `module` is "
                                    "a digest of the compiled program)"
                                    if name == "program" else ""))

    def same_program(self, arguments: str, params: dict[str, Any], module: str) -> None:
        """Raise on every rank when the ranks compiled different programs: their
        arguments, parameters or optimized module differ."""
        if self.client is None:
            return
        digest = hashlib.sha256(module.encode("utf-8", "replace")).hexdigest()[:12]
        value = {"arguments": arguments, "module": digest}
        if params:
            value["params"] = " ".join(f"{k}={v}" for k, v in sorted(params.items()))
        self.same("program", value)

    def gather(self, times: list[float]) -> list[list[float]]:
        """Every rank's times, in rank order, on every rank.  Ranks that ran a different
        number of iterations are an error, not something to average over."""
        if self.client is None:
            return [list(times)]
        out = [[float(x) for x in t] for t in self._everyone("times", times, "times")]
        counts = [len(t) for t in out]
        if len(set(counts)) > 1:
            detail = ", ".join(f"rank {r} ran {c}" for r, c in enumerate(counts))
            raise HloscopeError(f"the ranks disagree on the iteration count: {detail}",
                                hint="give every process the same iterations= and min_time=")
        return out


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__
