"""The child process of `hloscope run`'s trial compile (``python -m
hloscope._jax._run_child``): reads ``{"text", "plan", "name"}`` as JSON on stdin,
compiles the module as the plan says, and prints ``{"ok": true, "seconds": S}`` or
``{"ok": false, "error": ..., "hint": ...}``.  An XLA CHECK failure kills this process,
not the user's; `_exec.compile_in_child` reads the fatal line from its stderr."""

from __future__ import annotations

import json
import sys


def main() -> int:
    d = json.loads(sys.stdin.read())
    from .._errors import HloscopeError
    from .._sources._reader import read_text
    from ._exec import Plan, compile_plan
    from ._quiet import start_jax_quietly

    start_jax_quietly()
    import jax

    plan = Plan.from_dict(d["plan"])
    try:
        m = read_text(d["text"]).module
        devices = jax.devices()[:plan.partitions]
        if len(devices) < plan.partitions:
            raise HloscopeError(f"{d['name']}: needs {plan.partitions} devices, the child "
                                f"has {len(devices)}")
        _, seconds = compile_plan(devices[0].client, m, d["text"], plan, devices)
    except HloscopeError as e:
        print(json.dumps({"ok": False, "error": e.message, "hint": e.hint,
                          "library": bool(getattr(e, "library", False))}))
        return 0
    print(json.dumps({"ok": True, "seconds": seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
