"""Benchmarks, in one place, in the order the data flows (each module imports
only those above it; the result's `save`/`markdown`/`html` call `_output`,
which reads results by their attributes and never imports them back):

1. `_measure`: `bench` (JAX, imported lazily), `_timer`: `timer`; with `_ranks` (many
   processes, through the coordination service's key-value store) and
   `_metadata` (what ran where; the user's parameters checked against the
   program).
2. `_stats`, `_result`: the statistics of a series of times; `BenchResult`,
   plain data that needs no JAX.
3. `_columns`, `_jhp`, `_files`: the columns of the CSV files; reading
   jax-hpc-profiler's CSV and Markdown; `load_results` for every format.
4. `_select`, `_scaling`: which results (filters); strong and weak scaling, and
   time against data size, from many results.
5. `_report`: the content of one result's report, computed once.
6. `_markdown`, `_html`, `_plot`: renderers (a report; the scaling plots).
7. `_output`: every file a result is written to (JSON, CSV, Markdown, HTML,
   jax-hpc-profiler's CSV), each whole or not at all.
"""
