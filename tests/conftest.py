"""Shared helpers: the copied corpus and golden files.

Golden files live in tests/golden/; set HLOSCOPE_UPDATE_GOLDEN=1 to rewrite
them after an intended change (then review the diff).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

# Sharded test programs need 8 virtual CPU devices; this must be set before JAX starts.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import pytest

DATA = Path(__file__).parent / "data"
GOLDEN = Path(__file__).parent / "golden"
SEEDS = DATA / "seeds"
GENERATED = DATA / "generated"
TRUNCATED = SEEDS / "lecture_06_xla_computation_sigmoid.67.truncated.hlo"

# JAX's CUDA plugin for either CUDA (jax[cuda12-local] or jax[cuda13-local]): GPU targets.
HAVE_CUDA_PLUGIN = any(importlib.util.find_spec(m) is not None
                       for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))


@pytest.fixture
def truncated_only(tmp_path):
    """The truncated module of TRUNCATED alone (the file also holds a later, whole module)."""
    p = tmp_path / "lecture_06_truncated_only.hlo"
    p.write_text("\n".join(TRUNCATED.read_text().split("\n")[:219]) + "\n")
    return p


def corpus_modules() -> list[Path]:
    """Every corpus file that holds complete HLO modules."""
    files = sorted(GENERATED.glob("*.hlo")) + sorted(SEEDS.glob("*.hlo"))
    files.append(SEEDS / "fft_cont_2048_pencil8.jax_hpc_profiler.md")
    return [f for f in files if f != TRUNCATED]


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("HLOSCOPE_UPDATE_GOLDEN") or not path.exists():
        if not os.environ.get("HLOSCOPE_UPDATE_GOLDEN") and os.environ.get("CI"):
            pytest.fail(f"golden file {path} is missing")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    expected = path.read_text()
    assert text == expected, f"output differs from golden file {path}"


ROOT = Path(__file__).resolve().parent.parent


# The width text output fits in when the CLI runs under the tests: the default for output
# to a pipe, pinned so that a COLUMNS in the environment changes no golden file.
GOLDEN_COLUMNS = 100


def run_cli(*args: str, columns: int = GOLDEN_COLUMNS) -> subprocess.CompletedProcess[str]:
    """Run `hloscope ARGS` from the repository root, with paths under it made relative
    (so golden files hold the same text on every machine), its text `columns` wide."""
    args = tuple(os.path.relpath(a, ROOT) if a.startswith(str(ROOT)) else a for a in args)
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "hloscope", *args], capture_output=True,
                          text=True, timeout=120, check=False, cwd=ROOT, env=env)
