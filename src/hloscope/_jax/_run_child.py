"""The child process of `hloscope run`'s trial run (``python -m hloscope._jax._run_child``).

Reads ``{"text", "plan", "name"}`` as JSON on stdin, then compiles the module as the plan
says and runs it once on zeros, by the same route as the parent (`run_module`), and
prints ``{"ok": true, "seconds": S}`` or ``{"ok": false, "error", "hint", "library",
"compile"}``.  An XLA CHECK failure (at compile time, or a collective's rendezvous that
never completes) kills this process, not the user's; `_exec.compile_in_child` reads the
fatal line from its stderr."""

from __future__ import annotations

import json
import sys


def main() -> int:
    d = json.loads(sys.stdin.read())
    from .._errors import HloscopeError
    from .._sources._reader import read_text
    from ._exec import CompileError, Plan
    from ._quiet import start_jax_quietly

    start_jax_quietly()
    plan = Plan.from_dict(d["plan"])
    try:
        from ._run import run_module

        m = read_text(d["text"]).module
        zeros = {str(p.parameter_number): "zeros" for p in m.entry.parameters}
        r = run_module(m, partitions=plan.partitions, inputs=zeros, iterations=0,
                       isolate=False, fallback=False, _plan=plan)
    except HloscopeError as e:
        print(json.dumps({"ok": False, "error": e.message, "hint": e.hint,
                          "library": bool(getattr(e, "library", False)),
                          "compile": isinstance(e, CompileError)}))
        return 0
    print(json.dumps({"ok": True, "seconds": r.compile_time}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
