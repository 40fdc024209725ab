"""The user's mistakes are the user's: each is shown pointing into their file, exit 2,
never as "a bug in hloscope"; the Python API raises their own exception with context."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, run_cli

import hloscope

PROG = "tests/data/user/prog.py"


def _user_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr.split("error:")[-1]
    assert r.stderr.count("error:") == 1, r.stderr
    return r.stderr


@pytest.mark.parametrize("command", ["inspect", "bench"])
@pytest.mark.parametrize("args, expected", [
    ([f"{PROG}:matmul", "--arg", "f32[3,3]"],
     [f"matmul ({PROG}:8) takes 2 arguments (x, y); 1 --arg given",
      "--inputs 'make_inputs()'"]),
    ([f"{PROG}:matmul", "--arg", "f32[3,3]", "--arg", "f32[3,3]", "--arg", "f32[3]"],
     ["takes 2 arguments (x, y); 3 --arg given"]),
    ([f"{PROG}:SCALE"], [f"{PROG}:SCALE is an int, not a function"]),
    ([f"{PROG}:matmull", "--arg", "f32[3]"],
     [f"{PROG} has no 'matmull'", f"did you mean {PROG}:matmul?"]),
    ([f"{PROG}:reshaper", "--arg", "f32[6]", "--static", "m=3"],
     ["has no parameter 'm' (it takes x, n)"]),
    ([f"{PROG}:matmul", "--inputs", "make_inputz(3)"],
     [f"--inputs 'make_inputz(3)': {PROG} has no 'make_inputz'",
      "did you mean --inputs 'make_inputs(3)'"]),
    ([f"{PROG}:matmul", "--arg", "f32[-1,3]", "--arg", "f32[3,3]"],
     ["--arg 'f32[-1,3]': a dimension below 0"]),
    ([f"{PROG}:matmul", "--arg", "floot32[3,3]", "--arg", "f32[3,3]"],
     ["--arg 'floot32[3,3]' is not a shape like f32[128,2]", "NumPy's float32"]),
])
def test_argument_mistakes_say_what_the_function_takes(command, args, expected):
    err = _user_error(run_cli(command, *args, "-n", "1") if command == "bench"
                      else run_cli(command, *args))
    for text in expected:
        assert text in err


@pytest.mark.parametrize("args, expected", [
    (["inspect", PROG], [f"{PROG}: name the function, as {PROG}:FUNCTION",
                         "its functions: ", "matmul"]),
    (["profile", PROG], [f"{PROG}: name the function, as {PROG}:FUNCTION"]),
    (["summary", PROG], ["no HLO module found", "this is Python, not HLO",
                         f"{PROG}:FUNCTION, to hloscope inspect"]),
    (["summary", "tests/data/user/fragment.hlo"],  # as pasted in openxla/xla#5655
     ["no HLO module found", "instructions without the computation around them"]),
    (["memory", f"{PROG}:matmul"], ["cannot read the file",
                                     "a function (FILE.py:FUNCTION) goes to hloscope inspect"]),
])
def test_a_python_file_where_a_function_or_hlo_is_wanted_says_which(args, expected):
    """A program file with no function named, or a function given to a command that reads
    HLO text, is one error saying what to give instead."""
    err = _user_error(run_cli(*args))
    for text in expected:
        assert text in err, err



@pytest.mark.parametrize("command", ["inspect", "bench"])
@pytest.mark.parametrize("args, first, frames", [
    # a shape error two calls deep: both frames, innermost last, each with its line
    ([f"{PROG}:shape_bug", "--arg", "f32[3,4]"],
     f"error: {PROG}:18: TypeError: dot_general requires contracting dimensions",
     [f"{PROG}:14 in shape_bug", "return project(x, w)", f"{PROG}:18 in project",
      "return x @ w"]),
    ([f"{PROG}:branchy", "--arg", "f32[3]"],
     f"error: {PROG}:22: TracerBoolConversionError", ["if x.sum() > 0:", "jnp.where"]),
    ([f"{PROG}:reshaper", "--arg", "f32[6]", "--static", "n=foo"],
     f"error: {PROG}:28: TypeError", ["--static n=foo passed the string 'foo'"]),
    (["tests/data/user/import_fails.py:f", "--arg", "f32[3]"],
     "error: tests/data/user/import_fails.py:4: JSONDecodeError",
     ["while importing tests/data/user/import_fails.py", 'CONFIG = json.loads("{not json")']),
    (["tests/data/user/syntax_error.py:f"],
     "error: tests/data/user/syntax_error.py:2: SyntaxError: invalid syntax", ["x +* 2"]),
    ([f"{PROG}:matmul", "--inputs", "broken_inputs(3)"],
     f"error: {PROG}:36: TypeError", ["while calling --inputs broken_inputs(3)"]),
])
def test_exceptions_in_the_users_code_point_into_their_file(command, args, first, frames):
    err = _user_error(run_cli(command, *args, "-n", "1") if command == "bench"
                      else run_cli(command, *args))
    assert err.startswith(first), err
    for text in frames:
        assert text in err
    assert "hloscope/_" not in err and "site-packages" not in err


@pytest.mark.parametrize("inputs, n", [("make_sharded(2)", 8), ("shard_by_hand(2)", 8)])
def test_sharded_inputs_on_one_cpu_device_hint_at_devices(inputs, n):
    """Inputs made for a mesh, where JAX has one CPU device (no --devices, no XLA_FLAGS):
    the user's error, with the hint to run on virtual CPU devices; with it, they run."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "hloscope", "inspect", f"{PROG}:double", *a],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
        env={**env, "JAX_PLATFORMS": "cpu"})
    err = _user_error(run("--inputs", inputs))
    assert f"while calling --inputs {inputs}" in err
    assert err.strip().endswith(f"hint: JAX has one CPU device here; a program sharded over "
                                f"{n} devices runs on virtual CPU devices: --devices {n}"), err
    ok = run("--inputs", inputs, "--devices", str(n))
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("command", ["bench", "profile"])
def test_an_exception_at_run_time_is_the_users(command):
    """A host callback that raises: the error points at its line, and JAX's own log of
    the callback's traceback (a second, longer report) is not printed."""
    err = _user_error(run_cli(command, f"{PROG}:runtime_bug", "--arg", "f32[3]", "-n", "1"))
    assert "ValueError: bad value seen at run time (while running runtime_bug)" in err
    assert err.startswith(f"error: {PROG}:40: ") and "jax.debug.callback failed" not in err


def test_inputs_make_the_arguments_of_inspect():
    r = run_cli("inspect", f"{PROG}:matmul", "--inputs", "make_inputs(4)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("matmul: needs ") and "; 1 kernel;" in r.stdout.split("\n")[0]


_NO_JAX = r"""
import sys
sys.modules["jax"] = None
sys.modules["jaxlib"] = None
sys.argv = ["hloscope", *sys.argv[1:]]
from hloscope._cli._app import main
main()
"""


@pytest.mark.parametrize("command", ["inspect", "bench"])
def test_without_jax_the_install_command_is_the_answer(command):
    r = subprocess.run([sys.executable, "-c", _NO_JAX, command, f"{PROG}:matmul", "--arg",
                        "f32[3]"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        f"error: JAX is not installed: hloscope {command} compiles with JAX",
        "hint: pip install 'hloscope[jax]'"]


def test_the_python_api_raises_the_users_exception_with_context():
    jnp = pytest.importorskip("jax.numpy")
    sys.path.insert(0, str(ROOT / "tests" / "data" / "user"))
    try:
        import prog
    finally:
        sys.path.pop(0)
    with pytest.raises(TypeError, match="dot_general") as info:
        hloscope.inspect(prog.shape_bug, jnp.ones((3, 4)))
    assert "hloscope: raised while JAX traced shape_bug" in getattr(info.value, "__notes__", [
        "hloscope: raised while JAX traced shape_bug"])
    assert not isinstance(info.value, hloscope.HloscopeError)


@pytest.fixture(scope="module")
def saved_report(tmp_path_factory):
    pytest.importorskip("jax")
    path = tmp_path_factory.mktemp("saved") / "matmul.json"
    r = run_cli("inspect", f"{PROG}:matmul", "--inputs", "make_inputs(8)", "--save", str(path))
    assert r.returncode == 0, r.stderr
    return path


@pytest.mark.parametrize("command", ["summary", "memory", "kernels", "lint", "report"])
def test_a_saved_report_is_read_by_every_command(saved_report, command, tmp_path):
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    r = run_cli(command, str(saved_report), *extra)
    assert r.returncode == 0, r.stderr
    assert "jit_matmul" in r.stdout or command == "report"


def test_a_saved_report_keeps_xlas_figures(saved_report):
    r = run_cli("memory", str(saved_report), "--json")
    (m,) = json.loads(r.stdout)["modules"]
    assert m["xla"]["files"] == ["buffer-assignment", "live-range"]
    assert m["xla"]["live_range_peak_bytes"] == m["peak_bytes"] > 0


_REPORT = {"schema": "hloscope.inspect/1", "name": "f", "hlo_after": "HloModule m\n"}


@pytest.mark.parametrize("content, message", [
    ('{"a": 1}', "not an hloscope inspect report (schema None"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"schema": "hloscope.inspect/1", "name": "f", "hlo_after": "x", '
     '"timings": {"trace": NaN}}', "NaN is not a number hloscope writes"),
    (json.dumps({**_REPORT, "timings": {"trace": "fast"}}),
     "field 'timings.trace' is a string, expected a number"),
    (json.dumps({**_REPORT, "timings": {"trace": -1}}), "expected a number >= 0"),
    (json.dumps({**_REPORT, "versions": {"jax": 4}}), "field 'versions.jax' is the number 4"),
    (json.dumps({**_REPORT, "hlo_after": ""}), "holds no optimized HLO"),
    (json.dumps({**_REPORT, "name": None}), "field 'name' is missing"),
    (json.dumps({**_REPORT, "memory_analysis": [1, 2]}), "field 'memory_analysis' is a list"),
    (json.dumps({**_REPORT, "donated": [0, -1]}),
     "field 'donated' is a list, expected a list of integers >= 0"),
    ('{"schema": "hloscope.inspect/1", "na', "not valid JSON: Unterminated string"),
    ("\x00\xff\xfe binary", "not valid JSON"),
])
def test_load_refuses_a_damaged_report_naming_the_field(tmp_path, content, message):
    path = tmp_path / "r.json"
    path.write_text(content, encoding="utf-8", errors="surrogateescape")
    with pytest.raises(hloscope.HloscopeError, match="r.json") as info:
        hloscope.load(str(path))
    assert message in str(info.value)


_RESULT = {"schema": "hloscope.bench/1", "name": "f", "times": [0.001, 0.002]}


@pytest.mark.parametrize("result, message", [
    ({**_RESULT, "times": [0.001, "x"]}, "field 'times[1]' is a string"),
    ({**_RESULT, "times": 3}, "field 'times' is the number 3"),
    ({**_RESULT, "ranks": [[0.1], 5]}, "expected a list of lists of times"),
    ({**_RESULT, "sizes": {"peak": -4}}, "field 'sizes.peak' is the number -4"),
    ({**_RESULT, "params": {"X": [1]}}, "field 'params.X' is a list"),
    ({**_RESULT, "warmup": "3"}, "field 'warmup' is a string"),
    ({**_RESULT, "report": {"schema": "hloscope.inspect/1", "name": "f"}},
     "holds no optimized HLO"),
])
def test_load_results_refuses_a_damaged_result_naming_the_field(tmp_path, result, message):
    path = tmp_path / "res.json"
    path.write_text(json.dumps(result))
    with pytest.raises(hloscope.HloscopeError, match="res.json") as info:
        hloscope.load_results(str(path))
    assert message in str(info.value)


def test_load_results_refuses_nan_in_a_csv(tmp_path):
    from hloscope._bench._columns import CSV_COLUMNS

    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update(schema="hloscope.bench/1", times_ms="1.0 nan 2.0", warmup="0")
    path = tmp_path / "results.csv"
    path.write_text(",".join(CSV_COLUMNS) + "\n" + ",".join(row[c] for c in CSV_COLUMNS) + "\n")
    with pytest.raises(hloscope.HloscopeError, match="not a time"):
        hloscope.load_results(str(path))


def test_arg_takes_numpys_names_of_element_types():
    """--arg float32[2,3] is f32[2,3], as a NumPy user writes it (bfloat16, int32, bool)."""
    from hloscope._cli._targets import array_args

    got = array_args(["float32[2,3]", "bfloat16[4]", "int32[]", "bool[2]"], abstract=True)
    assert [(a.shape, str(a.dtype)) for a in got] == [
        ((2, 3), "float32"), ((4,), "bfloat16"), ((), "int32"), ((2,), "bool")]


def test_profile_and_bench_of_shapes_alone_say_they_need_arrays(tmp_path):
    """`make_inputs` returning jax.ShapeDtypeStruct (as for `inspect --target`): profile and
    bench say running needs arrays (a trial got JAX's 'is not a valid JAX type')."""
    prog = tmp_path / "sds.py"
    prog.write_text("import jax, jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x) * 2\n\n"
                    "def make():\n    return (jax.ShapeDtypeStruct((64, 64), jnp.float32),)\n")
    for cmd in ("profile", "bench"):
        r = run_cli(cmd, f"{prog}:f", "--inputs", "make()")
        assert r.returncode == 2, (cmd, r.stderr)
        assert "jax.ShapeDtypeStruct (shapes, no data: the first float32[64, 64])" in r.stderr
        assert "Traceback" not in r.stderr


def test_spec_mesh_and_static_mistakes_are_named():
    """A trial's mistakes taken silently or misread before: an unclosed parenthesis in a
    partition spec (read as 'dat, model'), an axis named twice in --mesh (the last kept),
    `--static remat=Ture` (passed as the string 'Ture', which is truthy)."""
    from hloscope import HloscopeError
    from hloscope._cli._targets import static_kwargs
    from hloscope._jax._target import parse_mesh, parse_spec

    with pytest.raises(HloscopeError, match="parentheses do not pair up"):
        parse_spec("(data,model")
    with pytest.raises(HloscopeError, match="the axis 'data' is given twice"):
        parse_mesh("data=2,data=4", 8)
    with pytest.raises(HloscopeError, match="did you mean True"):
        static_kwargs(["remat=Ture"])
    assert static_kwargs(["mode=fast", "remat=True"]) == {"mode": "fast", "remat": True}
    assert tuple(parse_spec("(data,model),None")) == (("data", "model"), None)


def test_a_pytree_leaf_a_spec_does_not_fit_is_named_by_its_path(tmp_path):
    prog = tmp_path / "tree.py"
    prog.write_text(
        "import jax, jax.numpy as jnp\n\ndef f(p, opt):\n    return p, opt\n\n"
        "def make():\n    s = jax.ShapeDtypeStruct\n"
        "    return ({'w': s((64, 64), jnp.float32)},\n"
        "            {'m': s((64, 64), jnp.float32), 'step': s((), jnp.int32)})\n")
    r = run_cli("inspect", f"{prog}:f", "--inputs", "make()", "--target", "tpu-v5e:2x4",
                "--shard", "1=data")
    assert r.returncode == 2, r.stderr
    assert "argument 1['step'] has 0 dimension(s)" in r.stderr
