"""JAX without its plugins' chatter: what native code prints when there is no hardware.

With JAX's CUDA plugin or libtpu installed (the target extras) on a machine without a GPU
or TPU, every start of JAX makes their C++ code print on file descriptor 2 that it found
no CUDA driver or no TPU: true, expected, and in the way of hloscope's own output.
`import_jax_quietly` starts JAX with those lines held back, and the traceback JAX logs
when its CUDA plugin cannot load CUDA (one line instead where a GPU driver is present);
anything else is passed on.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["import_jax_quietly", "jax_started", "quiet_native_stderr", "start_jax_quietly"]

# What XLA's native libraries print on stderr when a plugin loads on a machine without
# its hardware: true, expected, and no use to someone compiling for a target.
_NOISE = re.compile(
    r"cudart_stub\.cc|Could not find cuda drivers|All log messages before absl::Initialize"
    r"|Logging before InitGoogle|TPU_WORKER_HOSTNAMES|TPU_ACCELERATOR_TYPE"
    r"|Source Location Trace|libtpu_init_utils|could not determine TPU worker"
    r"|Failed to find host bounds|^\s*$")


# XLA's own warnings and notes (glog's W and I lines): `quiet_native_stderr(logs=False)`
# holds them back too, for compiles hloscope makes of its own (a fix it checks), whose
# warnings are about a program the user did not write.
_LOG_LINE = re.compile(r"^[WI][0-9]{4} [0-9:.]+\s+[0-9]+ \S+:[0-9]+\]")


@contextmanager
def quiet_native_stderr(replay: bool = True, logs: bool = True) -> Iterator[list[str]]:
    """Capture what native code writes to file descriptor 2; on exit write back the
    lines that are not the known noise of plugins without hardware (when `replay`; XLA's
    warnings and notes left out too where `logs` is False).  The captured text is put in
    the yielded list."""
    got: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (some notebook kernels)
        yield got
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield got
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            got.append(text)
            if replay:
                keep = [line for line in text.splitlines() if not _NOISE.search(line)
                        and (logs or not _LOG_LINE.match(line))]
                if keep:
                    sys.stderr.write("\n".join(keep) + "\n")


class _NoCudaHere(logging.Filter):
    """Drops JAX's "Jax plugin configuration error" for its CUDA plugin when CUDA cannot
    be loaded: a traceback at every start on a machine without a GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "plugin configuration error" in message and "cuda" in message.lower():
            self.dropped += 1
            return False
        return True


@contextmanager
def _no_cuda_traceback() -> Iterator[None]:
    logger = logging.getLogger("jax._src.xla_bridge")
    quiet = _NoCudaHere()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)
        if quiet.dropped and os.path.exists("/proc/driver/nvidia/version"):
            # A GPU is here but CUDA would not load: that the user must hear, in one line.
            sys.stderr.write("note: JAX's CUDA plugin could not load CUDA, so JAX runs on "
                             "the CPU (JAX_PLATFORMS=cpu skips the attempt)\n")


def import_jax_quietly() -> Any:
    """Import JAX without the plugins' no-hardware chatter on stderr.  JAX's backends are
    not started (XLA_FLAGS set later, for virtual CPU devices, still count)."""
    if "jax" in sys.modules:
        return sys.modules["jax"]
    with quiet_native_stderr(), _no_cuda_traceback():
        import jax
    return jax


def start_jax_quietly() -> Any:
    """Import JAX and start its backends without that chatter (call it after XLA_FLAGS
    and jax.distributed are set up: backends start once)."""
    jax = import_jax_quietly()
    with quiet_native_stderr(), _no_cuda_traceback():
        jax.devices()
    return jax


def jax_started() -> bool:
    """Whether JAX has started its backends in this process (without starting them)."""
    if sys.modules.get("jax") is None:
        return False
    try:
        from jax._src import xla_bridge
    except ImportError:  # a JAX without this private module: be safe
        return True
    return bool(getattr(xla_bridge, "_backends", {}))
