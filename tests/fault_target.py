"""The program of the multi-process fault tests (test_bench_faults.py), with ways to
fail on cue: env DIE_AT=trace (while tracing) or timed (DIE_AFTER seconds, default 1,
after the timed runs began: the CLI's rank writes its phases to HLOSCOPE_PROGRESS);
DIE_RANK (default 1); DIE_SIG (default SIGKILL; SIGSTOP stops the rank instead);
DIE_PID=parent (signal the rank's supervisor, the `hloscope` process, instead of the
rank); DIE_STAMP (a file that gets the time of the fault).  Inputs: `make(n)`, an
array sharded over every device of every process, so the program's reduction is a
collective across processes; `local(n)`, an array on this process's first device, so
the program runs no cross-process collective."""

import os
import signal
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


_rank = []


def _maybe_die(phase):
    rank = _rank[0] if _rank else jax.process_index()
    if os.environ.get("DIE_AT") == phase and rank == int(os.environ.get("DIE_RANK", "1")):
        if os.environ.get("DIE_STAMP"):  # when the fault happened, for the tests' delays
            with open(os.environ["DIE_STAMP"], "w") as f:
                f.write(repr(time.time()))
        pid = os.getppid() if os.environ.get("DIE_PID") == "parent" else os.getpid()
        os.kill(pid, getattr(signal, os.environ.get("DIE_SIG", "SIGKILL")))


def _when_timing():
    path = os.environ["HLOSCOPE_PROGRESS"]
    while True:
        with open(path) as f:
            if "timed runs" in f.read():
                break
        time.sleep(0.05)
    time.sleep(float(os.environ.get("DIE_AFTER", "1")))
    _maybe_die("timed")


def _arm():
    _rank.append(jax.process_index())
    if os.environ.get("DIE_AT") == "timed":
        threading.Thread(target=_when_timing, daemon=True).start()


def local(n):
    _arm()
    return [jnp.ones((n, n), jnp.float32)]


def make(n):
    _arm()
    mesh = Mesh(np.array(jax.devices()), ("x",))
    s = NamedSharding(mesh, P("x"))
    return [jax.make_array_from_callback((n * jax.device_count(), n), s,
                                         lambda idx: np.ones((n, n), np.float32))]


def f(x):
    _maybe_die("trace")
    y = jnp.sin(x) @ x.T
    return y.sum()
