#!/bin/bash
# One lease of a machine with one NVIDIA GPU (run from the repository root; OUT: a folder
# for what comes back, one archive): will it fit (first, before any process holds the
# GPU), deviceless answers against the GPU's (benchmarks/gpu_check.py), profiles as users
# take them (benchmarks/gpu_capture.py), `hloscope profile` as a user runs it, and the
# profile figures of benchmarks/profile_accuracy.py on the GPU.  Each part has its own
# time limit; about 6 minutes on an H100.  PARTS picks some (default: all of fit device
# capture cli donate accuracy); `donate` takes `bench` and `profile` of
# benchmarks/donate_elementwise.py alternately, twice each.
set -u
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT/g"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 PY=${PY:-python3}
PARTS=" ${PARTS:-fit device capture cli donate accuracy} "
on() { [[ $PARTS == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
$PY -c "import jax, jaxlib; print('jax', jax.__version__, jax.devices())" 2>&1 | tail -1
on fit && { echo "== fit"; timeout 150 $PY benchmarks/gpu_check.py fit "$OUT/g/check" 2>&1 | cut -c1-300; }
on device && { echo "== gpu_check device"; timeout 220 $PY benchmarks/gpu_check.py device "$OUT/g/check" > "$OUT/g/gpu_check.log" 2>&1; echo rc=$?; }
on capture && { echo "== capture"; timeout 200 $PY benchmarks/gpu_capture.py "$OUT/g/cap" 2>&1 | grep -v "^[WI]0" | tail -12; }
on cli && { echo "== hloscope profile (CLI)"; timeout 60 $PY -m hloscope profile examples/train_step.py:train_step --inputs 'make_inputs(8, 1024, 512)' -n 20 --top 5 > "$OUT/g/cli_profile.txt" 2>&1; echo rc=$?; head -20 "$OUT/g/cli_profile.txt"; }
if on donate; then
  echo "== donating elementwise: bench, profile, bench, profile"
  D=benchmarks/donate_elementwise.py:step; I=${DONATE_INPUTS:-'make_inputs(8192)'}
  for i in 1 2; do
    timeout 60 $PY -m hloscope bench $D --inputs "$I" -n 50 --min-time 0.5 2>&1 | grep -v "^[WI]0" | head -3
    timeout 60 $PY -m hloscope profile $D --inputs "$I" --top 2 2>&1 | grep -v "^[WI]0" | head -12
  done
fi
on accuracy && { echo "== profile_accuracy on the GPU"; JAX_PLATFORMS=cuda timeout 330 $PY benchmarks/profile_accuracy.py --no-big --runs 20 --min-time 0.5 > "$OUT/g/profile_gpu.txt" 2>&1; echo rc=$?
grep -v "^[WI]0" "$OUT/g/profile_gpu.txt" | tail -30 | cut -c1-200; }
tar czf "$OUT/gpu.tgz" -C "$OUT" g && rm -rf "$OUT/g"
