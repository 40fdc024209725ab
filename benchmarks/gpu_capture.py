"""Profiles of the GPU-sized programs of benchmarks/profile_accuracy.py and of the README's
training step, each with its module, as a user takes them (JAX's own capture, no hloscope):

    python benchmarks/gpu_capture.py OUT

OUT/NAME/module.hlo (`compiled.as_text()`) and OUT/NAME/plugins/profile/<run>/*.xplane.pb
(3 runs after 3 warm-ups; the .trace.json.gz removed).  For the profile reader's GPU path.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples"))


def main(out: Path) -> None:
    import jax

    from profile_accuracy import programs
    from train_step import make_inputs, train_step

    todo = list(programs(True)) + [("train step", train_step, make_inputs(8, 1024, 512))]
    for name, fn, args in todo:
        folder = out / name.replace(" ", "_").replace("/", "_").replace("(", "").replace(")", "")
        folder.mkdir(parents=True, exist_ok=True)
        try:
            compiled = jax.jit(fn).lower(*args).compile()
            (folder / "module.hlo").write_text(compiled.as_text())
            for _ in range(3):
                jax.block_until_ready(compiled(*args))
            with jax.profiler.trace(str(folder)):
                for _ in range(3):
                    jax.block_until_ready(compiled(*args))
        except Exception as e:  # noqa: BLE001 - recorded; the next program goes on
            (folder / "error.txt").write_text(f"{type(e).__name__}: {e}")
        for junk in glob.glob(str(folder / "**" / "*.trace.json.gz"), recursive=True):
            os.remove(junk)
        print(name, sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
