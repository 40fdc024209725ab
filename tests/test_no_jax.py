"""Reading and analysing a file works without JAX, and `import hloscope` stays light."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import sys
sys.modules["jax"] = None        # any `import jax` now fails
sys.modules["jaxlib"] = None
import hloscope
from hloscope._analysis._summary import summarize
m = hloscope.read("tests/data/generated/fft_cont_pencil_4x2.hlo").module
s = summarize(m)
assert s.collectives, "expected collectives"
heavy = [k for k in ("numpy", "rich", "typer", "matplotlib") if k in sys.modules]
assert not heavy, heavy
print("ok")
"""


def test_core_without_jax():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


STABLEHLO_SCRIPT = r"""
import sys
sys.modules["jax"] = None
sys.modules["jaxlib"] = None
import hloscope
try:
    hloscope.read("tests/data/torch_xla/raw/mlp_forward.stablehlo.mlir")
except hloscope.HloSourceError as e:
    assert "JAX, which is not installed" in str(e) and "_get_xla_tensors_hlo" in e.hint, e
    print("ok")
"""


def test_stablehlo_without_jax_says_what_to_do():
    r = subprocess.run([sys.executable, "-c", STABLEHLO_SCRIPT], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
