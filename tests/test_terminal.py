"""The terminal: text from a module never drives it, text output fits it, --help reads well.

- Control characters, escape sequences and bidi overrides in module and
  computation names, op_name, source files and custom-call targets reach no
  terminal raw: not from summary, kernels, memory, lint, check or diff, not
  from an error or a note (they are shown escaped, ``\\x1b``).
- Every line of those commands' text fits in $COLUMNS (80 here) on a module
  with very long names, and ``--wide`` shows the names whole.
- ``hloscope --help`` and every ``hloscope CMD --help`` fit 80 columns, name
  every option with its description, and show no ``<bool>``-style types.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hloscope._cli._app import app
from hloscope._render._term import (DEFAULT_WIDTH, ELLIPSIS, MIN_WIDTH, fit, fit_columns, middle,
                                    safe, safe_text, terminal_width)
from hloscope._render._text import render_json, table

from conftest import GENERATED, run_cli

# Raw in names the tolerant parser takes whole (module, computation): CSI, OSC with BEL,
# the C1 CSI, bidi overrides and isolates.
RAW = "\x1b[2J\x1b]0;pwned\x07\u202e\u2066\x9b"
# The same and more in HLO strings (op_name, source_file, custom_call_target), as XLA
# escapes them: the parser decodes them to real ESC, BEL, CR, LF, TAB, U+202E, U+009B.
ESCAPED = r"\033[31m\033]0;pwned\007\r\n\t\342\200\256\302\233"
LONG = "_" + "very_long_name_segment" * 6


def _unsafe(text: str) -> list[str]:
    """The characters of `text` that a terminal could act on (a newline is the text's own)."""
    return sorted({c for c in text if not c.isprintable() and c != "\n"})


def _evil(tmp_path: Path) -> Path:
    t = (GENERATED / "f_recalc.hlo").read_text()
    t = t.replace("HloModule jit_f", "HloModule jit_f" + RAW, 1)
    t = t.replace('op_name="', 'op_name="' + ESCAPED)
    t = re.sub(r'^(\d+) "generate.py"', lambda m: f'{m.group(1)} "gen{ESCAPED}erate.py"', t,
               flags=re.M)
    t = t.replace("%main.2", "%main" + RAW + ".2")
    p = tmp_path / "evil.hlo"
    p.write_text(t)
    return p


def _evil_call(tmp_path: Path) -> Path:
    p = tmp_path / "call.hlo"
    meta = f'metadata={{op_name="{ESCAPED}" source_file="{ESCAPED}.py" source_line=3}}'
    p.write_text(f"""HloModule m{RAW}

ENTRY %e{RAW} (p: f32[8]) -> f32[8] {{
  %p = f32[8]{{0}} parameter(0), {meta}
  %c = f32[8]{{0}} custom-call(%p), custom_call_target="tgt{ESCAPED}", {meta}
  ROOT %a = f32[8]{{0}} add(%c, %p)
}}
""")
    return p


@pytest.mark.parametrize("command", ["summary", "kernels", "memory", "lint"])
def test_module_text_never_reaches_the_terminal_raw(tmp_path, command):
    for path in (_evil(tmp_path), _evil_call(tmp_path)):
        r = run_cli(command, str(path))
        assert r.returncode == 0, r.stderr
        assert _unsafe(r.stdout) == [] and _unsafe(r.stderr) == []
        assert "\\x1b[" in r.stdout and "\\u202e" in r.stdout  # shown, escaped
        wide = run_cli(command, "--wide", str(path))
        assert _unsafe(wide.stdout) == []
    assert "tgt\\x1b[31m" in run_cli("summary", str(_evil_call(tmp_path))).stdout


def test_check_diff_errors_and_notes_are_escaped(tmp_path):
    evil, call = _evil(tmp_path), _evil_call(tmp_path)
    for args in (["check", str(evil)], ["check", str(call)],
                 ["diff", str(evil), str(GENERATED / "f_stored.hlo")],
                 ["diff", str(call), str(evil)]):
        r = run_cli(*args)
        assert _unsafe(r.stdout) == [] and _unsafe(r.stderr) == [], args
    # a strictly valid module whose strings hold escapes: check passes and says so
    clean_name = tmp_path / "strings.hlo"
    clean_name.write_text(evil.read_text().replace(RAW, ""))
    r = run_cli("check", str(clean_name))
    assert r.returncode == 0 and "module jit_f: ok" in r.stdout and _unsafe(r.stdout) == []
    # the error quotes the damaged line and the names read before it
    bad = tmp_path / "bad.hlo"
    bad.write_text(evil.read_text().replace("ROOT", "ROOT \x1b[5m oops", 1))
    for command in ("summary", "check", "lint"):
        r = run_cli(command, str(bad))
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert _unsafe(r.stderr) == [] and r.stdout == ""
    # a file name with control characters, in an error and in a note
    named = tmp_path / f"x{RAW}.hlo"
    r = run_cli("summary", str(named))
    assert r.returncode == 2 and "\\x1b[2J" in r.stderr and _unsafe(r.stderr) == []
    two = tmp_path / "two.hlo"
    two.write_text(evil.read_text() + "\n" + call.read_text())
    r = run_cli("summary", str(two))
    assert "holds 2 modules" in r.stderr and _unsafe(r.stderr) == [] and _unsafe(r.stdout) == []
    r = run_cli("summary", "--list", str(two))
    assert r.returncode == 0 and _unsafe(r.stdout) == []


def test_json_escapes_what_json_leaves_raw(tmp_path):
    r = run_cli("kernels", "--json", str(_evil_call(tmp_path)))
    assert r.returncode == 0 and _unsafe(r.stdout) == []
    data = json.loads(r.stdout)["modules"][0]
    assert data["module"] == "m" + RAW  # the same strings when read back
    assert render_json({"a": "é\u202e\x85\U000e0001"}) == \
        '{\n  "a": "é\\u202e\\u0085\\udb40\\udc01"\n}\n'
    assert render_json({"a": "plain é ▁"}) == '{\n  "a": "plain é ▁"\n}\n'


# -- width -----------------------------------------------------------------------


def _long(tmp_path: Path, name: str) -> Path:
    t = (GENERATED / f"{name}.hlo").read_text()
    t = re.sub(r"%([A-Za-z_][\w.\-]*)", lambda m: f"%{m.group(1)}{LONG}", t)
    t = re.sub(r"^HloModule (\S+?),", lambda m: f"HloModule {m.group(1)}{LONG},", t, flags=re.M)
    t = t.replace('op_name="', 'op_name="jit(f)/some/deeply/nested/scope/of/the/model/')
    t = re.sub(r'^(\d+) "([^"]*)"', lambda m: f'{m.group(1)} "/home/user/projects/a/very/long/'
               f'path/to/the/sources/of/the/model/{m.group(2)}"', t, flags=re.M)
    p = tmp_path / f"long_{name}.hlo"
    p.write_text(t)
    return p


@pytest.mark.parametrize("name", ["fft_cont_pencil_4x2", "f_for_loop", "f_recalc"])
def test_text_fits_80_columns_and_wide_shows_names_whole(tmp_path, name):
    path = _long(tmp_path, name)
    other = _long(tmp_path, "f_stored")
    runs = [("summary",), ("kernels",), ("kernels", "--device", "a100"), ("memory",), ("lint",),
            ("check",), ("summary", "--list")]
    for args in runs:
        r = run_cli(*args, str(path), columns=80)
        assert r.returncode == 0, (args, r.stderr)
        too_long = [ln for ln in r.stdout.splitlines() if len(ln) > 80]
        assert too_long == [], (args, too_long)
    r = run_cli("diff", str(path), str(other), columns=80)
    assert r.returncode == 0 and max(map(len, r.stdout.splitlines())) <= 80
    module = json.loads(run_cli("kernels", "--json", str(path)).stdout)["modules"][0]
    kernel = max((k["name"] for k in module["kernels"]), key=len)
    assert kernel.endswith(LONG)
    for args in (("summary",), ("kernels",), ("memory",)):
        narrow = run_cli(*args, str(path), columns=80).stdout
        assert ELLIPSIS in narrow and module["module"] not in narrow
        wide = run_cli(*args, "--wide", str(path), columns=80).stdout
        assert ELLIPSIS not in wide and f"Module {module['module']}\n" in wide
        assert any(len(ln) > 80 for ln in wide.splitlines())
    wide = run_cli("kernels", "--wide", str(path), columns=80).stdout
    assert kernel in wide and "/home/user/projects/a/very/long/path" in wide


def test_default_width_pinned_by_columns(tmp_path):
    path = _long(tmp_path, "f_sum_jax")
    at100 = run_cli("kernels", str(path))  # run_cli pins COLUMNS=100 (the default for pipes)
    assert max(map(len, at100.stdout.splitlines())) == 100
    at60 = run_cli("kernels", str(path), columns=60)
    assert max(map(len, at60.stdout.splitlines())) <= 60


# -- the helpers -------------------------------------------------------------------


def test_safe_escapes_what_a_terminal_acts_on():
    assert safe("fusion.12") == "fusion.12"
    assert safe("a\x1b[31mb\r\n\t\x07") == "a\\x1b[31mb\\r\\n\\t\\x07"
    assert safe("\u202e\u2066\x9b\x7f\u200b\ufeff\U000e0001") == \
        "\\u202e\\u2066\\x9b\\x7f\\u200b\\ufeff\\U000e0001"
    assert safe("é ü 日本 ▁█ C:\\path") == "é ü 日本 ▁█ C:\\path"  # printable stays
    assert safe_text("a\x1b\nb\r") == "a\\x1b\nb\\r"
    assert safe(safe("\x1b")) == safe("\x1b")


def test_source_paths_are_written_from_their_package_or_the_project():
    from hloscope._render._term import short_paths, tail

    venv = "/home/u/venv/lib/python3.11/site-packages/torch/nn/functional.py:3458"
    assert short_paths(venv) == "torch/nn/functional.py:3458"
    assert short_paths("sync (/usr/lib/python3/dist-packages/torch_xla/torch_xla.py:87)") == \
        "sync (torch_xla/torch_xla.py:87)"
    assert short_paths("/proj/src/train.py:42", cwd="/proj") == "src/train.py:42"
    assert short_paths("/elsewhere/train.py:42", cwd="/proj") == "/elsewhere/train.py:42"
    assert tail("torch/nn/functional.py:3458", 19) == "\u2026functional.py:3458"
    assert tail("a.py:1", 19) == "a.py:1"
    rows = [["k", venv]]
    assert "torch/nn/functional.py:3458" in table(["name", "source"], rows, width=80)
    assert venv in table(["name", "source"], rows)  # --wide: whole


def test_middle_keeps_start_and_end():
    assert middle("fusion.12_multiply.3", 20) == "fusion.12_multiply.3"
    assert middle("fusion.12.add.multiply.3", 20) == "fusion.12.…ultiply.3"
    assert len(middle("x" * 300, 17)) == 17 and middle("abc", 1) == ELLIPSIS


def test_terminal_width(monkeypatch):
    class Pipe:
        def isatty(self) -> bool:
            return False

    monkeypatch.delenv("COLUMNS", raising=False)
    assert terminal_width(Pipe()) == DEFAULT_WIDTH
    monkeypatch.setenv("COLUMNS", "123")
    assert terminal_width(Pipe()) == 123
    monkeypatch.setenv("COLUMNS", "10")
    assert terminal_width(Pipe()) == MIN_WIDTH
    monkeypatch.setenv("COLUMNS", "wide")
    assert terminal_width(Pipe()) == DEFAULT_WIDTH


def test_table_cuts_the_widest_then_drops_columns():
    rows = [["fusion.12" + "x" * 40 + "multiply.3", "f32[8]", "1.00 KiB", "generate.py:12"]]
    heads = ["kernel", "shape", "bytes", "source"]
    whole = table(heads, rows, right=(2,))
    assert "x" * 40 in whole and ELLIPSIS not in whole
    cut = table(heads, rows, right=(2,), width=60)
    assert all(len(ln) <= 60 for ln in cut.splitlines()) and "fusion.12" in cut
    assert ELLIPSIS in cut and "multiply.3" in cut and "1.00 KiB" in cut
    narrow = table(heads, rows, right=(2,), width=40, drop=("shape",))
    assert "shape" not in narrow and all(len(ln) <= 40 for ln in narrow.splitlines())
    keep, widths = fit_columns(["a", "b"], [10, 10], 30)
    assert keep == [0, 1] and widths == [10, 10]


def test_fit_wraps_prose_and_cuts_long_words():
    text = "  " + " ".join(["word"] * 40) + "\n" + "Module " + "n" * 200 + "\n"
    out = fit(text, 60)
    assert all(len(ln) <= 60 for ln in out.splitlines())
    assert out.splitlines()[1].startswith("    word")
    assert fit(text, None) == text


# -- --help --------------------------------------------------------------------------


def _help(*args: str) -> str:
    r = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert r.exit_code == 0, r.output
    return r.output


def _words(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_main_help_fits_and_says_what_path_is():
    out = _help()
    assert max(map(len, out.splitlines())) <= 80
    words = _words(out)
    for needle in ("HLO text file", "XLA dump folder", "Markdown report", "--module",
                   "inspect --save", "--wide", "Exit status"):
        assert needle in words
    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        assert re.search(rf"│ {re.escape(name)} +\S", out), name
    assert "<bool>" not in out


COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_help_names_and_describes_every_option(name):
    out = _help(name)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80, name
    for noise in ("<bool>", "<str>", "<int", "<float>", "<path>", "<list", "x>=", "{"):
        assert noise not in out, (name, noise)
    words = _words(out)
    cmd = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    usage = next(ln for ln in lines if "Usage:" in ln)
    for param in cmd.params:
        assert param.help, f"{name} {param.name} has no help"
        assert _words(param.help) in words, (name, param.name)
        if param.param_type_name == "argument":
            assert param.metavar and param.metavar in usage
        else:
            assert max(param.opts, key=len) in out
    if any(p.param_type_name == "argument" and p.name in ("path", "file", "a") for p in cmd.params):
        assert "HLO text file" in words


def test_reflow_joins_paragraph_lines_and_keeps_list_items():
    from hloscope._cli._help import reflow

    doc = """First line
    goes on.

    - one item
      continued
    - two
    """
    assert reflow(doc) == "First line goes on.\n\n- one item continued\n- two"


def test_a_table_too_wide_leaves_out_empty_columns_before_cutting_cells():
    from hloscope._render._text import table

    rows = [[f"kernel_{i}", "-", f"f32[{64 + i},128,256]{{2,1,0}}", "-", "1.00 MiB"]
            for i in range(3)]
    out = table(["kernel", "target", "output", "bound", "bytes"], rows, right=(4,), width=50)
    assert "target" not in out and "bound" not in out
    assert "f32[66,128,256]{2,1,0}" in out and "…" not in out
    wide = table(["kernel", "target", "output", "bound", "bytes"], rows, right=(4,), width=100)
    assert "target" in wide  # room enough: every column stays
