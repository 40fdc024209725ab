"""The columns of the CSV files results are written to and read from: hloscope's
(a header row, a ``schema`` column in every row) and jax-hpc-profiler's (no
header, 19 columns, or 20 with ``flops``)."""

from __future__ import annotations

__all__ = ["CANONICAL", "CSV_COLUMNS", "JHP_COLUMNS", "JHP_PARAMS", "JHP_PRECISION",
           "JHP_SOURCE", "PARAM_COLS", "SIZE_COLS"]

CSV_COLUMNS = (
    "schema", "function", "precision", "x", "y", "z", "px", "py", "backend", "nodes",
    "devices", "processes", "device_kind", "runs", "warmup", "trace_ms", "lower_ms",
    "compile_ms", "jit_ms", "first_run_ms", "min_ms", "median_ms", "median_ci_low_ms",
    "median_ci_high_ms", "mean_ms", "std_ms", "iqr_ms", "max_ms", "last_ms", "outliers",
    "overhead_us", "generated_code_bytes", "argument_bytes", "output_bytes", "temp_bytes",
    "peak_bytes", "checks_failed", "jax", "jaxlib", "host", "time", "git_commit", "params",
    "times_ms", "rank_times_ms")
PARAM_COLS = (("function", "Function"), ("precision", "Precision"), ("x", "X"), ("y", "Y"),
               ("z", "Z"), ("px", "PX"), ("py", "PY"), ("backend", "Backend"),
               ("nodes", "Nodes"))
CANONICAL = frozenset(k for _, k in PARAM_COLS)
SIZE_COLS = (("generated_code_bytes", "generated_code"), ("argument_bytes", "argument"),
              ("output_bytes", "output"), ("temp_bytes", "temporary"), ("peak_bytes", "peak"))


JHP_COLUMNS = ("function", "precision", "x", "y", "z", "px", "py", "backend", "nodes",
               "jit_time", "min_time", "max_time", "mean_time", "std_div", "last_time",
               "generated_code", "argument_size", "output_size", "temp_size", "flops")
JHP_PARAMS = (("function", "Function"), ("precision", "Precision"), ("x", "X"), ("y", "Y"),
           ("z", "Z"), ("px", "PX"), ("py", "PY"), ("backend", "Backend"), ("nodes", "Nodes"))
JHP_SOURCE = "jax-hpc-profiler"

# jax-hpc-profiler's precision of a complex type is that of its parts: its `plot` knows
# float32 and float64, and drops rows that say complex64.
JHP_PRECISION = {"complex64": "float32", "complex128": "float64"}
