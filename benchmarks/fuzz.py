"""Fuzz hloscope: mutate the corpus modules and check that nothing but HloscopeError escapes.

Takes the corpus (tests/data/generated/*.hlo and tests/data/seeds/*.hlo),
applies one to three random mutations to a module (byte flips, line
deletions and duplications, token swaps, splices of two modules, huge
shapes, deeply nested braces and parentheses, NUL bytes, CRLF line ends,
changed indentation, inserted comments, re-wrapped lines, and a few that
keep the text well-formed but change what it means: renamed operands,
called computations and tuple indexes) and runs the mutant through
`hloscope.read_text` and then everything `hloscope summary`, `kernels`,
`memory` and `lint` run, text renderers included.

Each case runs in a worker process with a time limit and an address-space
cap.  The outcome of a case is one of

  ok          parsed and analysed
  error       an HloscopeError (the input was rejected with a message: good)
  BAD         any other exception (a bug): its type, message, where it was
              raised and the mutation are printed, and the mutant is saved in
              --failures (default /tmp/fuzz_failures/)
  timeout     BAD: the case ran longer than --time-limit seconds
  memory      BAD: MemoryError under the --memory-limit cap, or the worker died

and the counts are printed at the end; the exit status is 1 if any case
was BAD.  The same --seed gives the same cases.  --minimize shrinks one
mutant per distinct failure (exception type and place) to a small text that
still fails the same way.

Usage:
  python benchmarks/fuzz.py                       # 20,000 cases, 2 workers
  python benchmarks/fuzz.py --count 2000 --seed 7 --jobs 2 --minimize
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing as mp
import os
import random
import re
import resource
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS_GLOBS = ("tests/data/generated/*.hlo", "tests/data/seeds/*.hlo")
BAD_STATUSES = ("exception", "timeout", "memory")

Mutation = Callable[[random.Random, str, list[str]], tuple[str, str]]


# -- mutations: each returns (new text, what it did) -------------------------------------------

def _lines(text: str) -> list[str]:
    return text.split("\n")


def _pick_line(rng: random.Random, lines: list[str]) -> int:
    return rng.randrange(len(lines)) if lines else 0


def byte_flips(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    chars = list(text)
    if not chars:
        return text, "byte flips (empty)"
    n = rng.choice((1, 1, 2, 4, 16))
    spots = []
    for _ in range(n):
        i = rng.randrange(len(chars))
        new = chr(rng.choice((rng.randrange(32, 127), rng.randrange(0, 256), ord(chars[i]) ^ 1)))
        spots.append(f"{i}:{chars[i]!r}->{new!r}")
        chars[i] = new
    return "".join(chars), f"byte flips {', '.join(spots[:4])}"


def line_deletion(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    lines = _lines(text)
    i = _pick_line(rng, lines)
    n = rng.choice((1, 1, 1, 3, 10))
    del lines[i:i + n]
    return "\n".join(lines), f"deleted lines {i + 1}-{i + n}"


def line_duplication(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    lines = _lines(text)
    i = _pick_line(rng, lines)
    j = _pick_line(rng, lines)
    lines.insert(j, lines[i] if lines else "")
    return "\n".join(lines), f"copied line {i + 1} before line {j + 1}"


_TOKEN = re.compile(r"[%\w.\-]+|[^\s\w]")


def token_swap(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    spans = [m.span() for m in _TOKEN.finditer(text)]
    if len(spans) < 2:
        return text, "token swap (too few tokens)"
    a, b = sorted(rng.sample(range(len(spans)), 2))
    (s1, e1), (s2, e2) = spans[a], spans[b]
    out = text[:s1] + text[s2:e2] + text[e1:s2] + text[s1:e1] + text[e2:]
    return out, f"swapped tokens {text[s1:e1]!r} and {text[s2:e2]!r}"


def splice(rng: random.Random, text: str, corpus: list[str]) -> tuple[str, str]:
    other = _lines(rng.choice(corpus))
    lines = _lines(text)
    i = _pick_line(rng, lines)
    j = _pick_line(rng, other)
    return ("\n".join(lines[:i] + other[j:]),
            f"first {i} lines, then another module from line {j + 1}")


_DIMS = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")


def huge_shape(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    found = list(_DIMS.finditer(text))
    if not found:
        return text, "huge shape (no shape)"
    m = rng.choice(found)
    dims = m.group(2).split(",") if m.group(2) else []
    big = rng.choice(("999999999999999999", "9223372036854775807", "4294967296",
                      "99999999999999999999999999", "-1", "0"))
    if dims and rng.random() < 0.7:
        dims[rng.randrange(len(dims))] = big
    else:
        dims = [big] * rng.choice((1, 2, 8, 20))
    new = f"{m.group(1)}[{','.join(dims)}]"
    return text[:m.start()] + new + text[m.end():], f"shape {m.group(0)} -> {new}"


def deep_nesting(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    i = rng.randrange(len(text) + 1)
    depth = rng.choice((50, 500, 5000, 50000))
    kind = rng.choice(("()", "{}", "[]", "({"))
    if kind == "({":
        inner = "(" + "{(" * depth + ")}" * depth + ")"
    else:
        inner = kind[0] * depth + ("f32[]" if kind == "()" else "") + kind[1] * depth
    if rng.random() < 0.3:
        inner = inner[:len(inner) // 2]  # unbalanced
    return text[:i] + inner + text[i:], f"{depth}-deep {kind} nesting at offset {i}"


def nul_bytes(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    i = rng.randrange(len(text) + 1)
    n = rng.choice((1, 1, 8))
    return text[:i] + "\0" * n + text[i:], f"{n} NUL byte(s) at offset {i}"


def crlf(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    if rng.random() < 0.5:
        return text.replace("\n", "\r\n"), "CRLF line ends"
    return text.replace("\n", "\r"), "CR line ends"


def indentation(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    pad = rng.choice(("\t", "        ", "", " \t ", "\u00a0"))
    lines = _lines(text)
    out = [pad + line.lstrip() if rng.random() < 0.5 else line for line in lines]
    return "\n".join(out), f"re-indented half the lines with {pad!r}"


def comments(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    lines = _lines(text)
    i = _pick_line(rng, lines)
    comment = rng.choice(("/* a comment */", "// a line comment", "/* unclosed", "# hash",
                          "/* nested /* comment */ */"))
    line = lines[i] if lines else ""
    j = rng.randrange(len(line) + 1)
    if lines:
        lines[i] = line[:j] + comment + line[j:]
    return "\n".join(lines), f"inserted {comment!r} in line {i + 1} at column {j + 1}"


def rewrap(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    lines = _lines(text)
    i = _pick_line(rng, lines)
    if rng.random() < 0.5 and i + 1 < len(lines):
        lines[i:i + 2] = [lines[i] + " " + lines[i + 1].lstrip()]
        return "\n".join(lines), f"joined lines {i + 1} and {i + 2}"
    line = lines[i] if lines else ""
    commas = [m.end() for m in re.finditer(",", line)]
    if not commas:
        return text, "re-wrap (no comma)"
    j = rng.choice(commas)
    lines[i] = line[:j] + "\n      " + line[j:].lstrip()
    return "\n".join(lines), f"broke line {i + 1} after column {j}"


_NAME_REF = re.compile(r"%?([\w.\-]+)")
_INSTRUCTION = re.compile(r"^(\s*(?:ROOT\s+)?%?)([\w.\-]+)(\s*=\s*)(.*)$")


def rename_operand(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    """Make an instruction read another instruction of the text (maybe a later one)."""
    lines = _lines(text)
    names = [m.group(2) for line in lines if (m := _INSTRUCTION.match(line))]
    rows = [k for k, line in enumerate(lines) if "(" in line and _INSTRUCTION.match(line)]
    if not names or not rows:
        return text, "rename operand (no instruction)"
    k = rng.choice(rows)
    line = lines[k]
    open_at = line.index("(", line.index("=")) if "=" in line else line.index("(")
    close_at = line.find(")", open_at)
    inner = line[open_at + 1:close_at] if close_at > 0 else ""
    refs = [m for m in _NAME_REF.finditer(inner) if not m.group(1).isdigit()]
    if not refs:
        return text, "rename operand (no operand)"
    ref = rng.choice(refs)
    new = "%" + rng.choice(names)
    s, e = open_at + 1 + ref.start(), open_at + 1 + ref.end()
    lines[k] = line[:s] + new + line[e:]
    return "\n".join(lines), f"line {k + 1}: operand {ref.group(0)} -> {new}"


_CALLS = re.compile(r"\b(calls|to_apply|body|condition|branch_computations|"
                    r"true_computation|false_computation)=\{?%?([\w.\-]+)")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s*(?:\(|\{)", re.M)


def rename_callee(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    """Make a call, loop, branch or fusion run another computation of the text."""
    found = list(_CALLS.finditer(text))
    comps = _COMPUTATION.findall(text)
    if not found or not comps:
        return text, "rename callee (none)"
    m = rng.choice(found)
    new = rng.choice(comps)
    s, e = m.span(2)
    return text[:s] + new + text[e:], f"{m.group(1)}={m.group(2)} -> {new}"


_INDEX = re.compile(r"\bindex=(\d+)")


def change_index(rng: random.Random, text: str, _corpus: list[str]) -> tuple[str, str]:
    found = list(_INDEX.finditer(text))
    if not found:
        return text, "change index (none)"
    m = rng.choice(found)
    new = str(rng.choice((0, 1, 2, 5, 99, -1)))
    s, e = m.span(1)
    return text[:s] + new + text[e:], f"index={m.group(1)} -> {new}"


MUTATIONS: dict[str, Mutation] = {
    "byte_flips": byte_flips, "line_deletion": line_deletion,
    "line_duplication": line_duplication, "token_swap": token_swap, "splice": splice,
    "huge_shape": huge_shape, "deep_nesting": deep_nesting, "nul_bytes": nul_bytes,
    "crlf": crlf, "indentation": indentation, "comments": comments, "rewrap": rewrap,
    "rename_operand": rename_operand, "rename_callee": rename_callee,
    "change_index": change_index,
}


def mutant(seed: int, case: int, corpus: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """The text of case `case` and the mutations made (the same for the same seed)."""
    rng = random.Random(f"{seed}:{case}")
    name, text = rng.choice(corpus)
    texts = [t for _n, t in corpus]
    done = [f"from {name}"]
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.choice(list(MUTATIONS))
        text, what = MUTATIONS[kind](rng, text, texts)
        done.append(f"{kind}: {what}")
    return text, done


# -- running one case (in a worker) ----------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """What running one text gave: `status` ok / error / exception / timeout / memory,
    with the exception's type, message and the innermost hloscope frame it came from."""

    status: str
    exc_type: str = ""
    message: str = ""
    where: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.exc_type, self.where


def analyse(text: str) -> None:
    """Read `text` and run what summary, kernels, memory and lint run, renderers included."""
    import hloscope
    from hloscope._analysis._summary import summarize
    from hloscope._render._kernels_text import render_advice, render_kernels
    from hloscope._render._memory_text import render_memory
    from hloscope._render._text import render_json, render_summary

    for m in hloscope.read_text(text).modules:
        s = summarize(m)
        render_summary(s)
        render_json(s.to_dict())
        g = hloscope.kernel_graph(m)
        render_kernels(g, scheduled=m.is_scheduled)
        render_json(g.to_dict())
        r = hloscope.analyze_memory(m)
        render_memory(r)
        render_json(r.to_dict())
        render_advice(m.name, hloscope.advise_groups(m, graph=g))


def _where(tb: traceback.StackSummary) -> str:
    """The innermost frame in hloscope's own code: ``package/file.py:line function``."""
    for frame in reversed(tb):
        path = frame.filename.replace(os.sep, "/")
        if "/hloscope/" in path:
            return f"{path.split('/hloscope/', 1)[1]}:{frame.lineno} {frame.name}"
    last = tb[-1] if tb else None
    return f"{last.filename}:{last.lineno} {last.name}" if last else "?"


def run_case(text: str) -> Outcome:
    import hloscope

    try:
        analyse(text)
        return Outcome("ok")
    except hloscope.HloscopeError as e:
        return Outcome("error", type(e).__name__, e.one_line()[:200])
    except MemoryError:
        return Outcome("memory", "MemoryError", "", _where(traceback.extract_tb(sys.exc_info()[2])))
    except RecursionError as e:
        return Outcome("exception", "RecursionError", str(e)[:200],
                       _where(traceback.extract_tb(e.__traceback__)))
    except Exception as e:  # noqa: BLE001 - every other exception is what we look for
        return Outcome("exception", type(e).__name__, str(e)[:300],
                       _where(traceback.extract_tb(e.__traceback__)))


def _worker(conn: Connection, memory_limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    sys.setrecursionlimit(10_000)
    importlib.import_module("hloscope")  # once, before the first case's clock starts

    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        case, text = job
        conn.send((case, run_case(text)))


class _Pool:
    """Worker processes that each run one case at a time, killed past the time limit."""

    def __init__(self, jobs: int, time_limit: float, memory_limit: int) -> None:
        self.time_limit = time_limit
        self.memory_limit = memory_limit
        self.ctx = mp.get_context("fork")
        self.workers: list[list] = [self._start() for _ in range(jobs)]

    def _start(self) -> list:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child, self.memory_limit), daemon=True)
        proc.start()
        child.close()
        return [proc, parent, None, 0.0]  # process, connection, (case, text) running, deadline

    def _restart(self, w: list) -> None:
        w[0].kill()
        w[0].join()
        w[1].close()
        w[:] = self._start()

    def run(self, jobs: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str, Outcome]]:
        """Run every (case, text); yield (case, text, outcome) as they finish."""
        pending = iter(jobs)
        exhausted = False
        while True:
            for w in self.workers:
                if w[2] is None and not exhausted:
                    job = next(pending, None)
                    if job is None:
                        exhausted = True
                        continue
                    w[1].send(job)
                    w[2], w[3] = job, time.monotonic() + self.time_limit
            busy = [w for w in self.workers if w[2] is not None]
            if not busy:
                return
            timeout = max(0.0, min(w[3] for w in busy) - time.monotonic())
            ready = wait([w[1] for w in busy], timeout=timeout)
            for w in busy:
                case, text = w[2]
                if w[1] in ready:
                    try:
                        _case, outcome = w[1].recv()
                    except (EOFError, OSError):
                        outcome = Outcome("memory", "WorkerDied", f"exit code {w[0].exitcode}")
                        self._restart(w)
                    w[2] = None
                    yield case, text, outcome
                elif time.monotonic() >= w[3]:
                    self._restart(w)
                    w[2] = None
                    yield case, text, Outcome("timeout", "Timeout",
                                              f"over {self.time_limit:g} s")

    def close(self) -> None:
        for w in self.workers:
            try:
                w[1].send(None)
            except (BrokenPipeError, OSError):
                pass
            w[0].join(timeout=2)
            if w[0].is_alive():
                w[0].kill()


# -- shrinking a failing text -------------------------------------------------------------------

def minimize(text: str, key: tuple[str, str], pool: _Pool, budget: int = 400) -> str:
    """A smaller text that fails with the same (type, place): drop lines, then characters."""
    tries = 0

    def fails(candidate: str) -> bool:
        nonlocal tries
        tries += 1
        (_c, _t, outcome), = list(pool.run(iter([(0, candidate)])))
        return outcome.status in BAD_STATUSES and outcome.key == key

    for unit in ("\n", ""):
        parts = text.split("\n") if unit else list(text)
        chunk = max(1, len(parts) // 2)
        while chunk >= 1 and tries < budget:
            i = 0
            changed = False
            while i < len(parts) and tries < budget:
                candidate = parts[:i] + parts[i + chunk:]
                if candidate and fails(unit.join(candidate)):
                    parts = candidate
                    changed = True
                else:
                    i += chunk
            if not changed:
                chunk //= 2
        text = unit.join(parts)
        if len(text) > 4000:
            break  # characters one by one would take too long
    return text


# -- the driver ---------------------------------------------------------------------------------

@dataclass
class _Tally:
    counts: Counter = field(default_factory=Counter)
    errors_by_stage: Counter = field(default_factory=Counter)
    bad: dict[tuple[str, str], list[tuple[int, Outcome, list[str]]]] = field(default_factory=dict)


def load_corpus() -> list[tuple[str, str]]:
    files = sorted(p for pattern in CORPUS_GLOBS for p in ROOT.glob(pattern))
    return [(p.name, p.read_text(encoding="utf-8", errors="replace")) for p in files]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000, help="cases (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default: 2)")
    parser.add_argument("--time-limit", type=float, default=10.0,
                        help="seconds per case (default: %(default)s)")
    parser.add_argument("--memory-limit", type=float, default=3.0,
                        help="GiB of address space per worker (default: %(default)s)")
    parser.add_argument("--failures", type=Path, default=Path("/tmp/fuzz_failures"),
                        help="where BAD mutants are saved (default: %(default)s)")
    parser.add_argument("--minimize", action="store_true",
                        help="shrink one mutant per distinct failure and save it as min-*.hlo")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)

    corpus = load_corpus()
    if not corpus:
        print("no corpus modules found under tests/data", file=sys.stderr)
        return 2
    pool = _Pool(args.jobs, args.time_limit, int(args.memory_limit * (1 << 30)))
    tally = _Tally()
    mutations: dict[int, list[str]] = {}

    def cases() -> Iterator[tuple[int, str]]:
        for case in range(args.count):
            text, done = mutant(args.seed, case, corpus)
            mutations[case] = done
            yield case, text

    start = time.monotonic()
    try:
        for n, (case, text, outcome) in enumerate(pool.run(cases()), 1):
            done = mutations.pop(case)
            tally.counts[outcome.status] += 1
            if outcome.status == "error":
                tally.errors_by_stage[outcome.exc_type] += 1
            if outcome.status in BAD_STATUSES:
                _report_bad(args.failures, args.seed, case, text, outcome, done, tally)
            if not args.quiet and (n % 250 == 0 or n == args.count):
                rate = n / max(time.monotonic() - start, 1e-9)
                print(f"  {n:,}/{args.count:,} cases, {rate:.0f}/s, "
                      f"BAD so far: {sum(tally.counts[s] for s in BAD_STATUSES)}",
                      file=sys.stderr, flush=True)
        if args.minimize and tally.bad:
            _minimize_all(tally, args, pool, corpus)
    finally:
        pool.close()
    _summary(tally, args.count, time.monotonic() - start)
    return 1 if any(tally.counts[s] for s in BAD_STATUSES) else 0


def _report_bad(folder: Path, seed: int, case: int, text: str, outcome: Outcome,
                done: list[str], tally: _Tally) -> None:
    first = outcome.key not in tally.bad
    tally.bad.setdefault(outcome.key, []).append((case, outcome, done))
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"seed{seed}-case{case}-{outcome.exc_type}"
    (folder / f"{stem}.hlo").write_text(text, encoding="utf-8", errors="surrogateescape")
    (folder / f"{stem}.txt").write_text(
        f"{outcome.status}: {outcome.exc_type}: {outcome.message}\nat {outcome.where}\n"
        + "".join(f"mutation: {d}\n" for d in done), encoding="utf-8")
    if first:
        print(f"BAD {outcome.status}: {outcome.exc_type}: {outcome.message[:200]}\n"
              f"    at {outcome.where}\n    case {case}: {'; '.join(done)[:300]}\n"
              f"    saved {folder / stem}.hlo", flush=True)


def _minimize_all(tally: _Tally, args: argparse.Namespace, pool: _Pool,
                  corpus: list[tuple[str, str]]) -> None:
    for key, hits in tally.bad.items():
        case = hits[0][0]
        text, _done = mutant(args.seed, case, corpus)
        small = minimize(text, key, pool)
        path = args.failures / f"min-{key[0]}-{re.sub(r'[^A-Za-z0-9]+', '_', key[1])[:60]}.hlo"
        path.write_text(small, encoding="utf-8", errors="surrogateescape")
        print(f"minimized {key[0]} at {key[1]}: {len(text):,} -> {len(small):,} chars, {path}",
              flush=True)


def _summary(tally: _Tally, count: int, seconds: float) -> None:
    c = tally.counts
    print(f"\n{count:,} cases in {seconds:.0f} s")
    print(f"  ok (parsed and analysed)      {c['ok']:>7,}")
    print(f"  HloscopeError (rejected, good) {c['error']:>6,}  "
          + ", ".join(f"{k} {v:,}" for k, v in tally.errors_by_stage.most_common()))
    print(f"  BAD other exceptions          {c['exception']:>7,}")
    print(f"  BAD timeouts                  {c['timeout']:>7,}")
    print(f"  BAD memory errors / crashes   {c['memory']:>7,}")
    if tally.bad:
        print(f"\n{len(tally.bad)} distinct failures (type, place):")
        for (exc, where), hits in sorted(tally.bad.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(hits):>5} x {exc} at {where}: {hits[0][1].message[:100]}")


if __name__ == "__main__":
    sys.exit(main())
