"""The examples of README.md and of every page of docs/, run as written.

Every fenced block of README.md and docs/*.md is one test, README's first, then the pages
of docs/ in the order of DOCS (a page may read a file an earlier page's example wrote):

- ```console blocks hold commands, each on a line starting with `$ hloscope `, and the
  output the README shows for it on the lines after it (stdout and stderr together, as a
  terminal shows them; none shown: only the exit status is checked).  Each command runs as
  `python -m hloscope ...` with this tree's src/ on PYTHONPATH, 100 columns wide (the width
  of output to a pipe), JAX on the CPU (JAX_PLATFORMS=cpu), in one scratch folder shared
  by the whole README (so `results/` written by one block is read by a later one), which
  holds a copy of examples/ and a link to tests/ (the README's examples run from a clone
  of the repository).  The output must
  equal the README's; a `...` in the README's output stands for any text (as in doctest),
  so an example may show part of a long output.  XLA's own log lines (glog lines such as
  GSPMD's deprecation warning, and the stack traces it logs with them), which go straight
  to stderr, are left out of both.
- ```python blocks are interactive sessions (`>>>`), run with doctest (ELLIPSIS,
  NORMALIZE_WHITESPACE), one after the other in one namespace, in a subprocess with 8
  virtual CPU devices (XLA_FLAGS), in the same scratch folder.
- a block may be preceded by HTML comments that say how to test it:
  `<!-- readme-test: output varies -->`: timings, paths or machine-dependent numbers; the
  output is compared with every number masked, every run of white space (line breaks
  included: a longer number may wrap a line elsewhere) made one space, and table rules
  made one width;
  `<!-- readme-test: exit N -->`: every command of the block exits with status N;
  `<!-- readme-test: excerpt of PATH -->`: the block is part of the file PATH that an
  earlier block wrote (`...` as above);
  `<!-- readme-test: tree -->`: a map of the source tree whose first column names files and
  folders that exist;
  `<!-- readme-test: not run: REASON -->`: listed as a skipped test, with the reason.
- any other block fails: every example is run, or says why not.

Commands that need JAX (inspect, bench, run) and Python blocks that import it run only
where JAX is installed; Python blocks that mention matplotlib need it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import GOLDEN_COLUMNS, ROOT

README = ROOT / "README.md"
# The order the pages run in (every page of docs/ is run; those not named here run last).
_ORDER = ["cli", "kernels", "advisor", "diff", "report", "memory", "run", "targets", "python",
          "bench", "plots", "json", "glossary", "quiet", "development"]


def _docs() -> list[Path]:
    pages = sorted((ROOT / "docs").glob("*.md"))
    rank = {name: k for k, name in enumerate(_ORDER)}
    return [README] + sorted(pages, key=lambda p: (rank.get(p.stem, len(rank)), p.stem))


DOCS = _docs()
JAX_COMMANDS = {"inspect", "bench", "run"}
HAVE_JAX = importlib.util.find_spec("jax") is not None
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@dataclass
class Block:
    doc: str  # README.md or docs/NAME.md
    line: int  # the line of the opening fence, 1-based
    lang: str
    text: str
    marks: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.doc}:line{self.line}-{self.lang or 'plain'}"

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    def mark(self, name: str) -> str | None:
        for m in self.marks:
            if m == name or m.startswith(name + " ") or m.startswith(name + ":"):
                return m[len(name):].lstrip(" :")
        return None


_MARK = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->$")
_FENCE = re.compile(r"^(`{3,})(\S*)\s*$")


def doc_blocks(path: Path) -> list[Block]:
    doc = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks, marks, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        m = _MARK.match(line.strip())
        if m:
            marks.append(m.group(1))
        elif (f := _FENCE.match(line)):
            fence, body = f.group(1), []
            i += 1
            while i < len(lines) and lines[i].rstrip() != fence:
                body.append(lines[i])
                i += 1
            assert i < len(lines), f"{doc}:{i - len(body)}: a block that never closes"
            start = i - len(body)
            blocks.append(Block(doc, start, f.group(2), "\n".join(body), marks))
            marks = []
        elif line.strip():
            marks = []  # a mark is for the block right after it
        i += 1
    return blocks


BLOCKS = [b for path in DOCS for b in doc_blocks(path)]


@dataclass
class Command:
    where: str
    argv: list[str]
    shown: list[str]  # the output the README shows


def commands(block: Block) -> list[Command]:
    out: list[Command] = []
    for k, line in enumerate(block.text.split("\n")):
        if line.startswith("$ "):
            argv = shlex.split(line[2:])
            assert argv[0] == "hloscope", (
                f"{block.doc}:{block.line + k}: console blocks run `$ hloscope ...` commands "
                f"only, not {line!r}")
            out.append(Command(f"{block.doc}:{block.line + k}", argv[1:], []))
        else:
            assert out, f"{block.doc}:{block.line + k}: output before any `$ hloscope` command"
            out[-1].shown.append(line)
    assert out, f"{block.where}: a console block without a `$ hloscope` command"
    return out


def needs_jax(block: Block) -> bool:
    if block.lang == "console":
        return any(c.argv and (c.argv[0] in JAX_COMMANDS or c.argv[0] == "diff" and any(
            ".py:" in a for a in c.argv[1:])) for c in commands(block))
    return bool(re.search(r"^>>> (import|from) [^\n]*\bjax\b", block.text, re.M))


# --- comparing output ---------------------------------------------------------------------

_GLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] ")


def without_xla_logs(text: str) -> str:
    """`text` less XLA's glog lines (and the stack traces logged with them), which XLA's
    C++ code writes to stderr itself."""
    out, in_trace = [], False
    for line in text.split("\n"):
        if line.startswith("*** Begin stack trace ***"):
            in_trace = True
        elif in_trace:
            in_trace = not line.startswith("*** End stack trace ***")
        elif not _GLOG.match(line):
            out.append(line)
    return "\n".join(out)


def tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n")).strip("\n")


def ellipsis_match(want: str, got: str) -> bool:
    """doctest's ELLIPSIS: `...` in `want` matches any text (newlines too)."""
    pieces = want.split("...")
    if len(pieces) == 1:
        return want == got
    start, end = pieces[0], pieces[-1]
    if not (got.startswith(start) and got.endswith(end)) or \
            len(start) + len(end) > len(got):
        return False
    pos, stop = len(start), len(got) - len(end)
    for piece in pieces[1:-1]:
        k = got.find(piece, pos, stop)
        if k < 0:
            return False
        pos = k + len(piece)
    return True


_NUMBER = re.compile(r"\d[\d,]*(\.\d+)?(e[-+]?\d+)?")


def masked(text: str) -> str:
    """`text` with every number N, and white space and table rules (`-----`, as wide as
    their column's numbers) collapsed."""
    return " ".join(re.sub(r"--+", "--", _NUMBER.sub("N", text)).split())


_BUSY = re.compile(r"note: (other processes used|this machine was busy)")


def without_busy_notes(text: str) -> str:
    """`text` without the notes that say other processes shared the machine (bench's and
    profile's, each with its wrapped lines): what else a machine runs, no page can show."""
    out: list[str] = []
    skipping = False
    for line in text.split("\n"):
        if _BUSY.match(line):
            skipping = True
            continue
        if skipping and line.startswith(" "):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out)


def check_output(where: str, shown: list[str], got: str, varies: bool) -> None:
    want = tidy("\n".join(shown))
    got = tidy(without_xla_logs(without_busy_notes(got) if varies else got))
    if varies:
        assert ellipsis_match(masked(want), masked(got)), (
            f"{where}: the output differs from the README's (numbers and line breaks "
            f"aside); the real output:\n{got}")
        return
    assert ellipsis_match(want, got), (
        f"{where}: the output differs from the README's; the real output:\n{got}")


# --- running the README -------------------------------------------------------------------


class Session:
    """Runs the README's blocks in order, in one scratch folder, each at most once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        shutil.copytree(ROOT / "examples", folder / "examples")
        (folder / "tests").symlink_to(ROOT / "tests", target_is_directory=True)
        self.done: dict[int, object] = {}
        self.skipped: dict[int, str] = {}
        self.python: dict[int, dict] | None = None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("XLA_FLAGS", "COLUMNS", "LINES", "TF_CPP_MIN_LOG_LEVEL")}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env["COLUMNS"] = str(GOLDEN_COLUMNS)
        env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr in the order they are written
        env["JAX_PLATFORMS"] = "cpu"  # the README's outputs are the CPU's, GPU or not
        return env

    def skip_reason(self, block: Block) -> str | None:
        if block.lang in ("console", "python") and needs_jax(block) and not HAVE_JAX:
            return "needs JAX (pip install '.[jax]'), which is not installed"
        if block.lang == "python" and "matplotlib" in block.text and not HAVE_MATPLOTLIB:
            return "needs matplotlib (the plot extra), which is not installed"
        return None

    def run(self, index: int) -> object:
        """The result of block `index`, after running every earlier block once."""
        self.advance(index)
        if index in self.skipped:
            pytest.skip(self.skipped[index])
        return self.done[index]

    def advance(self, index: int) -> None:
        """Run the blocks up to `index` that have not run yet, in order."""
        for k in range(index + 1):
            if k not in self.done and k not in self.skipped:
                block = BLOCKS[k]
                reason = self.skip_reason(block)
                if reason is not None:
                    self.skipped[k] = reason
                elif block.lang == "console" and block.mark("not run") is None:
                    self.done[k] = [self.command(c) for c in commands(block)]
                elif block.lang == "python":
                    self.done[k] = self.python_result(k)
                else:
                    self.done[k] = None

    def command(self, c: Command) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hloscope", *c.argv], cwd=self.folder,
                              env=self.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=300, check=False)

    def python_result(self, index: int) -> dict:
        """Every Python block runs in one subprocess (on first need), in order."""
        if self.python is None:
            todo = [{"index": k, "doc": b.doc, "line": b.line, "text": b.text,
                     "skip": b.mark("not run") or self.skip_reason(b)}
                    for k, b in enumerate(BLOCKS) if b.lang == "python"]
            env = {**self.env(), "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
            p = subprocess.run([sys.executable, "-c", _PYTHON_RUNNER, json.dumps(todo)],
                               cwd=self.folder, env=env, capture_output=True, text=True,
                               timeout=300, check=False)
            assert p.returncode == 0, f"the Python blocks' runner failed:\n{p.stdout}\n{p.stderr}"
            self.python = {r["index"]: r for r in json.loads(p.stdout.split("\0")[-1])}
        return self.python[index]


# Runs doctests block by block, in one namespace; prints NUL and a JSON list of results.
_PYTHON_RUNNER = textwrap.dedent('''
    import doctest, io, json, sys
    todo = json.loads(sys.argv[1])
    parser = doctest.DocTestParser()
    globs = {"__name__": "__readme__"}
    results = []
    for b in todo:
        if b["skip"]:
            results.append({"index": b["index"], "skipped": b["skip"]})
            continue
        test = parser.get_doctest(b["text"], globs, "%s:%d" % (b["doc"], b["line"]), b["doc"],
                                  b["line"])
        out = io.StringIO()
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                       | doctest.NORMALIZE_WHITESPACE)
        r = runner.run(test, out=out.write, clear_globs=False)
        globs.update(test.globs)
        results.append({"index": b["index"], "examples": r.attempted, "failed": r.failed,
                        "report": out.getvalue()})
    sys.stdout.write("\\0" + json.dumps(results))
''')


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Session:
    return Session(tmp_path_factory.mktemp("readme"))


# --- the tests ----------------------------------------------------------------------------


def test_the_docs_have_examples():
    langs = [b.lang for b in BLOCKS]
    assert langs.count("console") >= 10 and langs.count("python") >= 4
    readme = [b.lang for b in BLOCKS if b.doc == "README.md"]
    assert readme.count("console") >= 5 and readme.count("python") >= 1


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[b.id for b in BLOCKS])
def test_readme_block(index: int, session: Session) -> None:
    block = BLOCKS[index]
    where = block.where
    reason = block.mark("not run")
    if reason is not None:
        assert reason, f"{where}: say why the block is not run"
        pytest.skip(f"{where} not run: {reason}")
    if block.mark("tree") is not None:
        check_tree(where, block)
        return
    excerpt = block.mark("excerpt of")
    if excerpt is not None:
        check_excerpt(where, block, excerpt, session)
        return
    if block.lang == "console":
        status = int(block.mark("exit") or 0)
        varies = block.mark("output varies") is not None
        for c, r in zip(commands(block), session.run(index)):  # type: ignore[arg-type]
            here = f"{c.where}: hloscope {shlex.join(c.argv)}"
            assert "Traceback" not in r.stdout, f"{here}:\n{r.stdout}"
            assert r.returncode == status, (
                f"{here}: exit status {r.returncode}, the README says {status}:\n{r.stdout}")
            if c.shown:
                check_output(here, c.shown, r.stdout, varies)
        return
    if block.lang == "python":
        first = next((ln for ln in block.text.split("\n") if ln.strip()), "")
        assert first.startswith(">>> "), (
            f"{where}: Python examples are interactive sessions (>>>), so that what they "
            "show is checked")
        result = session.run(index)
        assert isinstance(result, dict)
        if "skipped" in result:
            pytest.skip(result["skipped"])
        assert result["examples"] > 0
        assert result["failed"] == 0, f"{where}:\n{result['report']}"
        return
    pytest.fail(f"{where}: a ```{block.lang} block that no test runs: write it as a console "
                "block of `$ hloscope` commands or a >>> session, or mark it "
                "<!-- readme-test: not run: WHY -->")


def check_tree(where: str, block: Block) -> None:
    base = None
    for line in block.text.split("\n"):
        if not line or line.startswith(" "):
            if base is not None and line.startswith("  ") and not line.startswith("    "):
                name = line.split()[0]
                assert (base / name).exists(), f"{where}: {base / name} does not exist"
            continue
        name = line.split()[0]
        assert (ROOT / name).exists(), f"{where}: {name} does not exist"
        base = ROOT / name if name.startswith("src/") else None


def check_excerpt(where: str, block: Block, path: str, session: Session) -> None:
    # the file comes from an earlier block: run the README up to here
    index = BLOCKS.index(block)
    session.advance(index - 1)
    file = session.folder / path
    if not file.exists():
        skipped = sorted({session.skipped[k] for k in range(index) if k in session.skipped})
        if skipped:
            pytest.skip(f"{where}: {path} comes from an example that was skipped: "
                        + "; ".join(skipped))
        pytest.fail(f"{where}: no example before this block writes {path}")
    text = file.read_text(encoding="utf-8")
    want = tidy(block.text)
    assert ellipsis_match("..." + want + "...", text), (
        f"{where}: this part of {path} is not in the file the example wrote:\n{text}")


def test_markers_are_known():
    for b in BLOCKS:
        for m in b.marks:
            assert re.match(r"(not run: \S|output varies$|exit \d+$|excerpt of \S|tree$)", m), (
                f"{b.where}: unknown readme-test mark {m!r}")


def test_no_internal_references_in_user_docs():
    """README.md and docs/ speak to users: no references to the project's own notes."""
    for path in DOCS:
        for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
            low = line.lower()
            assert not re.search(r"\bseeds? \d|\bissues? \d|later issue", low), (
                f"{path.name}:{n}: an internal reference: {line.strip()}")


def test_links_between_pages_resolve():
    """Every relative link of README.md and docs/ names a file that exists."""
    for path in DOCS:
        for m in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", path.read_text(encoding="utf-8")):
            target = m.group(1)
            if not re.match(r"[a-z]+:", target):
                assert (path.parent / target).exists(), f"{path.name}: no {target}"
