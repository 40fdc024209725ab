"""Measured time: a profile's kernel events joined to the module's kernel graph.

Data flows one way: capture (`_capture`: JAX's profiler around the compiled
function, `_contention`: what other processes took meanwhile; `_api`:
`hloscope.profile`) -> read (`_read`: `jax.profiler.ProfileData`)
-> match to the module's kernels (`_match`; `_load`: `hloscope.read_profile`)
-> `MeasuredTimes` (`_times`) -> consumers: the renderers, the report, the
advisor's ranking (`_rank`) and diff (`_diff`).
"""
