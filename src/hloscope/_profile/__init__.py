"""Measured time: a profile's kernel events joined to the module's kernel graph.

Data flows one way: capture (`_capture`, JAX's profiler) -> read (`_read`,
`jax.profiler.ProfileData`) -> match to the module's kernels (`_match`) ->
`MeasuredTimes` (`_times`) -> consumers (the renderers, the report, the
advisor's ranking: `_rank`).
"""
