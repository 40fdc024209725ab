"""Every saving checked where it can be: the advisor's mechanical fixes compiled.

Data flows one way through this room: the advice of a compiled function and the function
itself (`Program`) -> the fixed variants (`_fixes`, `_upcast`) -> their compiles (the
same device or target) -> XLA's figures compared (`_compare`) -> a `Check` on each group.
`_api.inspect` is `hloscope.inspect`.
"""
