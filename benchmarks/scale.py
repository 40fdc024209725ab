"""How hloscope's commands scale: 10^4, 10^5 and 10^6 instructions of five shapes.

Generates HLO text by plain string building (no JAX) in five shapes that
each stress a different part of the analyses:

  chain      a chain of elementwise ops (the common case, and the longest schedule)
  wide       wide tuples: a tuple parameter, a multi-output fusion with as many
             outputs (in-place pairs) and a tuple result, each a quarter of the module
  whiles     many while loops in a row sharing one body and one condition
  temps      many temporaries live at once, of varied sizes (the heap simulation)

  loops      1,000 while loops in a row at 10^6, each with a 1,000-instruction body of
             its own (a program of many scanned layers)

then runs each command on each module in a fresh subprocess and prints the
time per command (measured inside the subprocess, from reading the file to
writing the output, so interpreter start-up is left out) with its CPU time in
parentheses (on a shared machine the wall time says as much about the others'
work as about hloscope's), its peak resident memory, and the CPU time per
instruction at the largest size over that at the smallest (1.0: linear; the
target is at most 1.5).  The load average is printed beside each row.

  parse      hloscope.read_text
  summary    hloscope summary FILE
  kernels    hloscope kernels FILE
  memory     hloscope memory FILE
  lint       hloscope lint FILE
  report     hloscope report FILE -o TMP.html
  graph      hloscope graph FILE -o TMP.svg (refused past --max-kernels, counted before any analysis)

Usage:
  python benchmarks/scale.py                         # every size (takes many minutes)
  python benchmarks/scale.py --sizes 10000 100000    # a quick run
  python benchmarks/scale.py --shapes chain temps --commands memory report --timeout 600
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

SIZES = (10_000, 100_000, 1_000_000)
COMMANDS = ("parse", "summary", "kernels", "memory", "lint", "report", "graph")


# -- module generators -----------------------------------------------------------------------

_UNARY = ("negate", "exponential", "tanh", "abs", "sine")


def chain(n: int) -> str:
    """A chain of `n` elementwise instructions, each reading the one before (and the argument)."""
    lines = ["HloModule chain, is_scheduled=true", "",
             "ENTRY %main (p: f32[64]) -> f32[64] {", "  %v0 = f32[64]{0} parameter(0)"]
    for i in range(1, n):
        if i % 3 == 0:
            body = f"add(%v{i - 1}, %v0)"
        else:
            body = f"{_UNARY[i % len(_UNARY)]}(%v{i - 1})"
        root = "ROOT " if i == n - 1 else ""
        lines.append(f"  {root}%v{i} = f32[64]{{0}} {body}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def wide(n: int) -> str:
    """A `k`-element tuple parameter, its elements, a `k`-output fusion over them (its fused
    computation too), the fusion's outputs and a `k`-element tuple result: about 4k + 4
    instructions."""
    k = max(1, (n - 4) // 5)
    elem = "f32[8]{0}"
    tup = "(" + ", ".join([elem] * k) + ")"
    sig = "(" + ", ".join(["f32[8]"] * k) + ")"
    fused = [f"%fused ({', '.join(f'q{i}: f32[8]' for i in range(k))}) -> {sig} {{"]
    fused += [f"  %q{i} = {elem} parameter({i})" for i in range(k)]
    fused += [f"  %m{i} = {elem} multiply(%q{i}, %q{i})" for i in range(k)]
    fused.append(f"  ROOT %mt = {tup} tuple({', '.join(f'%m{i}' for i in range(k))})")
    fused.append("}")
    entry = [f"ENTRY %main (p: {sig}) -> {sig} {{", f"  %p = {tup} parameter(0)"]
    entry += [f"  %g{i} = {elem} get-tuple-element(%p), index={i}" for i in range(k)]
    entry += [f"  %e{i} = {elem} negate(%g{i})" for i in range(k)]
    entry.append(f"  %f = {tup} fusion({', '.join(f'%e{i}' for i in range(k))}), kind=kLoop, "
                 "calls=%fused")
    entry += [f"  %o{i} = {elem} get-tuple-element(%f), index={i}" for i in range(k)]
    entry.append(f"  ROOT %r = {tup} tuple({', '.join(f'%o{i}' for i in range(k))})")
    entry.append("}")
    return "\n".join(["HloModule wide, is_scheduled=true", "", *fused, "", *entry]) + "\n"


def whiles(n: int) -> str:
    """About n/3 while loops in a row, each on the last one's result, all sharing one body and
    one condition."""
    k = max(1, (n - 12) // 3)
    state = "(s32[], f32[64]{0})"
    head = f"""HloModule whiles, is_scheduled=true

%cond (s: (s32[], f32[64])) -> pred[] {{
  %s = {state} parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %lim = s32[] constant(4)
  ROOT %lt = pred[] compare(%i, %lim), direction=LT
}}

%body (s: (s32[], f32[64])) -> (s32[], f32[64]) {{
  %s = {state} parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[64]{{0}} get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %y = f32[64]{{0}} sine(%x)
  ROOT %t = {state} tuple(%i1, %y)
}}

ENTRY %main (p: f32[64]) -> f32[64] {{
  %r0 = f32[64]{{0}} parameter(0)
  %zero = s32[] constant(0)"""
    lines = [head]
    for i in range(1, k + 1):
        lines.append(f"  %init{i} = {state} tuple(%zero, %r{i - 1})")
        lines.append(f"  %w{i} = {state} while(%init{i}), condition=%cond, body=%body")
        root = "ROOT " if i == k else ""
        lines.append(f"  {root}%r{i} = f32[64]{{0}} get-tuple-element(%w{i}), index=1")
    lines.append("}")
    return "\n".join(lines) + "\n"


def temps(n: int) -> str:
    """About n/3 temporaries of varied sizes made first and consumed last (in reverse order),
    so all of them are live at once."""
    k = max(2, (n - 8) // 3)
    sizes = [16 * (1 + (i * 7) % 13) for i in range(k)]
    lines = ["HloModule temps, is_scheduled=true", "",
             "%sum (a: f32[], b: f32[]) -> f32[] {", "  %a = f32[] parameter(0)",
             "  %b = f32[] parameter(1)", "  ROOT %s = f32[] add(%a, %b)", "}", "",
             "ENTRY %main (p: f32[]) -> f32[] {", "  %p = f32[] parameter(0)",
             "  %zero = f32[] constant(0)"]
    lines += [f"  %t{i} = f32[{s}]{{0}} broadcast(%p), dimensions={{}}"
              for i, s in enumerate(sizes)]
    acc = "%zero"
    for i in reversed(range(k)):
        lines.append(f"  %r{i} = f32[] reduce(%t{i}, %zero), dimensions={{0}}, to_apply=%sum")
        root = "ROOT " if i == 0 else ""
        lines.append(f"  {root}%acc{i} = f32[] add({acc}, %r{i})")
        acc = f"%acc{i}"
    lines.append("}")
    return "\n".join(lines) + "\n"


def loops(n: int) -> str:
    """About sqrt(n) while loops in a row, each with a body of its own of about sqrt(n)
    instructions (a chain of elementwise ops on the loop's array): 1,000 loops of 1,000
    instructions at 10^6, as a program of many scanned layers is."""
    k = max(1, round(n ** 0.5))         # loops
    m = max(2, (n - 8 * k) // (k + 1))  # chain length in each body
    state = "(s32[], f32[64]{0})"
    sig = "(s: (s32[], f32[64]))"
    lines = ["HloModule loops, is_scheduled=true", "",
             f"%cond {sig} -> pred[] {{", f"  %s = {state} parameter(0)",
             "  %i = s32[] get-tuple-element(%s), index=0", "  %lim = s32[] constant(4)",
             "  ROOT %lt = pred[] compare(%i, %lim), direction=LT", "}", ""]
    for b in range(k):
        lines += [f"%body{b} {sig} -> (s32[], f32[64]) {{", f"  %s = {state} parameter(0)",
                  "  %i = s32[] get-tuple-element(%s), index=0",
                  "  %x0 = f32[64]{0} get-tuple-element(%s), index=1",
                  "  %one = s32[] constant(1)", "  %i1 = s32[] add(%i, %one)"]
        for j in range(1, m):
            op = f"add(%x{j - 1}, %x0)" if j % 3 == 0 else \
                f"{_UNARY[j % len(_UNARY)]}(%x{j - 1})"
            lines.append(f"  %x{j} = f32[64]{{0}} {op}")
        lines += [f"  ROOT %t = {state} tuple(%i1, %x{m - 1})", "}", ""]
    lines += ["ENTRY %main (p: f32[64]) -> f32[64] {", "  %r0 = f32[64]{0} parameter(0)",
              "  %zero = s32[] constant(0)"]
    for i in range(1, k + 1):
        lines.append(f"  %init{i} = {state} tuple(%zero, %r{i - 1})")
        lines.append(f"  %w{i} = {state} while(%init{i}), condition=%cond, body=%body{i - 1}")
        root = "ROOT " if i == k else ""
        lines.append(f"  {root}%r{i} = f32[64]{{0}} get-tuple-element(%w{i}), index=1")
    lines.append("}")
    return "\n".join(lines) + "\n"


SHAPES: dict[str, Callable[[int], str]] = {
    "chain": chain, "wide": wide, "whiles": whiles, "temps": temps, "loops": loops}


# -- running one command (in the subprocess) ---------------------------------------------------

def run_one(command: str, path: str) -> float:
    """Run `command` on the module at `path` in this process; return the seconds it took."""
    import hloscope
    from hloscope._cli._app import app

    start = time.perf_counter()
    if command == "parse":
        with open(path, encoding="utf-8") as f:
            hloscope.read_text(f.read())
        return time.perf_counter() - start
    args = [command, path]
    out = None
    if command in ("report", "graph"):
        fd, out = tempfile.mkstemp(suffix=".html" if command == "report" else ".svg")
        os.close(fd)
        args += ["-o", out]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                app(args, standalone_mode=False)
            except SystemExit as e:
                if e.code and not (command == "graph" and e.code == 2):  # too many kernels
                    raise
        return time.perf_counter() - start
    finally:
        if out is not None:
            os.unlink(out)


def _worker(command: str, path: str) -> None:
    cpu = time.process_time()
    seconds = run_one(command, path)
    print(json.dumps({"seconds": seconds, "cpu": time.process_time() - cpu}))


def _generate(shape: str, n: int, path: str) -> None:
    """Write the module `shape` of about `n` instructions to `path`; print its instruction
    count (run in a subprocess, so that the driver stays small: a child's peak resident
    memory is counted from the size of the process it was started from)."""
    text = SHAPES[shape](n)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(instruction_count(text))


def generate(shape: str, n: int, path: str) -> int:
    """`_generate` in a subprocess; the module's instruction count."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--generate", shape,
                          str(n), path], check=True, capture_output=True, text=True)
    return int(out.stdout.strip())


# -- the driver --------------------------------------------------------------------------------

def measure(command: str, path: str,
            timeout: float) -> tuple[float | None, float | None, float | None, str]:
    """(seconds, CPU seconds, peak RSS in MiB, note) of `command` on `path` in a fresh
    subprocess (the CPU time is what the machine's other work does not change)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", command, path],
            stdout=out, stderr=err, text=True)
        status, rusage = _wait(proc.pid, timeout)
        proc.returncode = 0  # reaped here (os.wait4), not by Popen
        rss = rusage.ru_maxrss / 1024 if rusage is not None else None  # KiB on Linux
        if status is None:
            return None, None, rss, f"timeout ({timeout:.0f} s)"
        out.seek(0)
        err.seek(0)
        if status != 0:
            last = (err.read().strip().splitlines() or ["?"])[-1]
            return None, None, rss, f"exit {status}: {last[:60]}"
        done = json.loads(out.read().strip().splitlines()[-1])
        return done["seconds"], done["cpu"], rss, ""


def _wait(pid: int, timeout: float):  # type: ignore[no-untyped-def]
    """Reap `pid` with its own resource usage; kill it after `timeout` seconds.
    Returns (exit status or None on timeout, rusage)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        done, status, rusage = os.wait4(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), rusage
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            _pid, _status, rusage = os.wait4(pid, 0)
            return None, rusage
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def instruction_count(text: str) -> int:
    """Instructions in generated text (every indented ``%name = ...`` line)."""
    return sum(1 for line in text.splitlines() if line.startswith("  ") and " = " in line)


def _fmt_time(t: float | None) -> str:
    return "-" if t is None else f"{t:.2f} s" if t < 100 else f"{t:.0f} s"


def _fmt_rss(m: float | None) -> str:
    return "-" if m is None else f"{m:,.0f} MiB"


def _ratio(points: list[tuple[int, float | None]]) -> str:
    """Time per instruction at the largest size over that at the smallest."""
    done = [(n, t) for n, t in points if t is not None]
    if len(done) < 2 or len(done) != len(points):
        return "-"
    (n0, t0), (n1, t1) = done[0], done[-1]
    return f"{(t1 / n1) / (t0 / n0):.2f}" if t0 > 0 else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="instructions per module (default: %(default)s)")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS))
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one command may take (default: %(default)s)")
    parser.add_argument("--worker", nargs=2, metavar=("COMMAND", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--generate", nargs=3, metavar=("SHAPE", "N", "FILE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(*args.worker)
        return 0
    if args.generate:
        _generate(args.generate[0], int(args.generate[1]), args.generate[2])
        return 0
    sizes = sorted(args.sizes)
    width = 30
    header = f"{'shape':<7} {'command':<8}" + "".join(f"{n:>{width},}" for n in sizes) + \
        "   ratio"
    print(f"wall time (inside the subprocess), its CPU time, and peak RSS per command; "
          f"ratio: CPU time per instruction at {sizes[-1]:,} over that at {sizes[0]:,}; "
          f"load average at the start {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
    print(header)
    print("-" * len(header))
    failed = False
    with tempfile.TemporaryDirectory(prefix="hloscope-scale-") as tmp:
        for shape in args.shapes:
            files = []
            for n in sizes:
                path = os.path.join(tmp, f"{shape}-{n}.hlo")
                files.append((generate(shape, n, path), path))
            for command in args.commands:
                cells = []
                points = []
                for count, path in files:
                    seconds, cpu, rss, note = measure(command, path, args.timeout)
                    failed |= bool(note)
                    points.append((count, cpu))
                    cells.append(note[:width - 1] if note else
                                 f"{_fmt_time(seconds)} ({_fmt_time(cpu)}) {_fmt_rss(rss)}")
                print(f"{shape:<7} {command:<8}" + "".join(f"{c:>{width}}" for c in cells)
                      + f"   {_ratio(points):>5}  load {os.getloadavg()[0]:.1f}", flush=True)
            for path in files:
                os.unlink(path[1])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
