"""One rank of a plain Python script that benchmarks with hloscope.bench and does
nothing special at exit (no os._exit): what a user writes.  argv: RANK PORT.  Env DIE
set: rank 1 is killed after JAX's backend is up, before the benchmark."""

import os
import sys
import time

rank, port = int(sys.argv[1]), sys.argv[2]
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"

import jax

jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=rank,
                           initialization_timeout=60)
import jax.numpy as jnp

import hloscope

x = jnp.ones((64, 64))  # the backend is up: every process joined
if rank == 1 and os.environ.get("DIE"):
    os.kill(os.getpid(), 9)
t0 = time.monotonic()
try:
    r = hloscope.bench(lambda a: jnp.sin(a) @ a.T, x, iterations=5, warmup=1, timeout=6)
except hloscope.HloscopeError as e:
    print(f"rank {rank}: HLOSCOPE-ERROR after {time.monotonic() - t0:.1f} s: {e.one_line()}",
          flush=True)
    raise
print(f"rank {rank}: RESULT {r.summary_line()}", flush=True)
