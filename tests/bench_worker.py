"""One rank of the multi-process benchmark tests (run by test_bench_multiprocess.py).

argv: RANK NPROC PORT MODE OUTDIR, MODE one of ok, die (rank 1 leaves before timing),
disagree (rank 1 asks for more iterations), mintime (min_time=3 on an array sharded
across both processes, so that the ranks run in step; prints every rank's timed total).
"""

import os
import sys
import time

rank, nproc, port, mode, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], \
    sys.argv[5]
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"

import jax

jax.distributed.initialize(f"localhost:{port}", num_processes=nproc, process_id=rank,
                           initialization_timeout=60)
import jax.numpy as jnp

import hloscope

print(f"rank {rank}: {jax.process_count()} processes, {jax.device_count()} devices, "
      f"{jax.local_device_count()} local", flush=True)
if mode == "die" and rank == 1:
    os._exit(0)


def leave(code: int) -> None:
    """Exit at once (no JAX shutdown barrier); rank 0 hosts the coordination service, so it
    leaves after the others have printed."""
    if rank == 0:
        time.sleep(2)
    os._exit(code)


iterations = 5 + (rank if mode == "disagree" else 0)
x, min_time = jnp.ones((64, 64)), None
if mode == "mintime":
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("x",)), PartitionSpec("x"))
    x = jax.make_array_from_callback((64, 64), sharding,
                                     lambda idx: np.ones((16, 64), np.float32))
    min_time = 3.0
t0 = time.monotonic()
try:
    r = hloscope.bench(lambda x: jnp.sin(x) @ x.T, x, iterations=iterations,
                       warmup=1, timeout=8, min_time=min_time)
except hloscope.HloscopeError as e:
    print(f"rank {rank}: HLOSCOPE-ERROR after {time.monotonic() - t0:.1f} s: {e.one_line()}",
          flush=True)
    leave(2)
print(f"rank {rank}: RESULT {r.summary_line()}", flush=True)
if mode == "mintime":
    print(f"rank {rank}: TOTALS {' '.join(repr(sum(t)) for t in r.ranks)}", flush=True)
print(f"rank {rank}: WROTE {len(r.save(out))}", flush=True)
leave(0)
