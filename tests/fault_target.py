"""The program of the multi-process fault tests (test_bench_faults.py), with ways to
fail on cue: env DIE_AT=trace (while tracing) or later (DIE_AFTER seconds after the
inputs are made, during the runs), DIE_RANK (default 1), DIE_SIG (default SIGKILL;
SIGSTOP stops the rank instead).  Inputs: `make(n)`, an array sharded over every device
of every process, so the program's reduction is a collective across processes."""

import os
import signal
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


_rank = []


def _maybe_die(phase):
    rank = _rank[0] if _rank else jax.process_index()
    if os.environ.get("DIE_AT") == phase and rank == int(os.environ.get("DIE_RANK", "1")):
        os.kill(os.getpid(), getattr(signal, os.environ.get("DIE_SIG", "SIGKILL")))


def make(n):
    _rank.append(jax.process_index())
    if os.environ.get("DIE_AT") == "later":
        threading.Timer(float(os.environ.get("DIE_AFTER", "8")), _maybe_die, ("later",)).start()
    mesh = Mesh(np.array(jax.devices()), ("x",))
    s = NamedSharding(mesh, P("x"))
    return [jax.make_array_from_callback((n * jax.device_count(), n), s,
                                         lambda idx: np.ones((n, n), np.float32))]


def f(x):
    _maybe_die("trace")
    y = jnp.sin(x) @ x.T
    return y.sum()
