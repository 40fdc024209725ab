"""hloscope.inspect: one compile, XLA's figures, the same analyses as reading the text."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

from xla_programs import PROGRAMS

import hloscope


@pytest.mark.parametrize("name", ["cond_branches", "scan_carry_and_stack", "dynamic_update_loop",
                                  "tuple_outputs_grad", "sharded_matmul_psum"])
def test_inspect_matches_xla_and_the_text(name):
    if name.startswith("sharded") and len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    fn, args = PROGRAMS[name]()
    r = hloscope.inspect(fn, *args)
    assert set(r.timings) == {"trace", "lower", "compile"} and min(r.timings.values()) >= 0
    assert r.jaxpr and r.stablehlo and r.hlo_before and "is_scheduled=true" in r.hlo_after
    assert r.memory.xla is not None  # XLA's dump files were read from the one compile
    assert r.memory.peak_bytes == r.memory.xla.live_range_peak_bytes
    xla_temp = r.memory_analysis["temp_size_in_bytes"]
    assert abs(r.memory.temp_estimate_bytes - xla_temp) <= 0.05 * xla_temp
    again = hloscope.kernel_graph(hloscope.read_text(r.hlo_after).module)
    assert [k.name for k in r.kernels.kernels] == [k.name for k in again.kernels]
    assert r.versions["jax"] == jax.__version__ and r.device["count"] == len(jax.devices())


def test_report_saves_and_loads(tmp_path):
    fn, args = PROGRAMS["remat_scan_grad"]()
    r = hloscope.inspect(fn, *args)
    path = r.save(str(tmp_path / "r.json"))
    back = hloscope.load(path)
    assert back.to_dict() == r.to_dict()
    assert back.memory.peak_bytes == r.memory.peak_bytes
    assert [f.rule for f in back.findings] == [f.rule for f in r.findings]


def test_lowered_is_accepted_and_compiled_is_refused_clearly():
    fn, args = PROGRAMS["cond_branches"]()
    r = hloscope.inspect(fn.lower(*args))
    assert r.hlo_after and "trace" not in r.timings
    with pytest.raises(hloscope.HloscopeError, match="Compiled"):
        hloscope.inspect(fn.lower(*args).compile())


def test_notebook_html_embeds_the_report_page():
    fn, args = PROGRAMS["cond_branches"]()
    html = hloscope.inspect(fn, *args)._repr_html_()
    assert html.startswith("<div><b>") and "<iframe srcdoc=" in html and "sandbox=" in html
    assert "<script>" not in html.split("srcdoc=")[0]


def test_load_rejects_other_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "something/1"}')
    with pytest.raises(hloscope.HloscopeError, match="not an hloscope inspect report"):
        hloscope.load(str(bad))
    with pytest.raises(hloscope.HloscopeError, match="cannot read"):
        hloscope.load(str(tmp_path / "missing.json"))


# -- variants, sweeps, devices ------------------------------------------------------

def _fft_variants():
    import jax.numpy as jnp

    def f_fft_multi(x, n=5):  # seed 004's three FFT variants
        res = 0
        for i in range(n):
            res = res + jnp.fft.irfftn((i + 2) * jnp.fft.rfftn(x + i, axes=(1, 2, 3)),
                                       axes=(1, 2, 3)) ** (i + 2)
        return res

    def f_fft_multi_for(x, n=5):
        def step(i, res):
            return res + jnp.fft.irfftn((i + 2) * jnp.fft.rfftn(x + i + 1, axes=(1, 2, 3)),
                                        axes=(1, 2, 3)) ** (i + 2)
        return jax.lax.fori_loop(0, n, step, jnp.zeros_like(x))

    def f_fft_multi_barrier(x, n=5):
        res = 0
        for i in range(n):
            res = res + jnp.fft.irfftn((i + 2) * jnp.fft.rfftn(x + i, axes=(1, 2, 3)),
                                       axes=(1, 2, 3)) ** (i + 2)
            res, x = jax.lax.optimization_barrier((res, x))
        return res

    return f_fft_multi, f_fft_multi_for, f_fft_multi_barrier, jnp.zeros((2, 16, 16, 8))


def test_sweep_follows_xla_for_seed_004s_fft_variants(tmp_path):
    loop, fori, barrier, x = _fft_variants()
    sweeps = {label: hloscope.sweep(f, x, n=range(1, 5)) for label, f in
              (("python loop", loop), ("jax for loop", fori), ("barriers", barrier))}
    for s in sweeps.values():  # hloscope's curve has XLA's shape (within 5% at every n)
        for ours, theirs in zip(s.figure("temp"), s.figure("xla_temp")):
            assert abs(ours - theirs) <= 0.05 * theirs
    py, fo = sweeps["python loop"].figure("temp"), sweeps["jax for loop"].figure("temp")
    assert py == sorted(py) and py[-1] > 2 * py[0]          # grows with n
    assert len(set(fo[1:])) == 1 and fo[-1] < py[-1]         # the loop stays flat
    path = hloscope.plot_sweeps(sweeps, str(tmp_path / "sweep.png"))
    assert (tmp_path / "sweep.png").stat().st_size > 10000 and path.endswith(".png")


def test_compare_table():
    loop, fori, _barrier, x = _fft_variants()
    c = hloscope.compare({"python loop": (loop, (x,), {"n": 3, "static_argnames": ("n",)}),
                          "jax for loop": (fori, (x,), {"n": 3, "static_argnames": ("n",)})})
    text = c.table()
    assert "python loop" in text and "jax for loop" in text and "temp bytes (XLA)" in text
    assert len(c.rows) == 2 and c.to_dict()["columns"][0] == "variant"
    assert "<table>" in c._repr_html_()


def test_use_cpu_devices_too_late_is_a_clear_error():
    jax.devices()  # the backends are running in this test process
    have = jax.device_count()
    hloscope.use_cpu_devices(have)  # asking for what is there is fine
    with pytest.raises(hloscope.HloscopeError, match="too late"):
        hloscope.use_cpu_devices(have + 3)


@pytest.mark.parametrize("n", [0, -2, True])
def test_use_cpu_devices_refuses_fewer_than_one(n):
    with pytest.raises(hloscope.HloscopeError, match="CPU devices: a program runs on at "
                                                     "least one"):
        hloscope.use_cpu_devices(n)


def test_a_library_function_has_no_source_line_in_hloscope():
    """A library function given as the target (jax.numpy's sin) has no frame of its own
    for JAX to name: a kernel's source is never hloscope's own call of it."""
    report = hloscope.inspect(jax.numpy.sin, jax.numpy.ones(8))
    sources = [k.source or "" for k in report.kernels.kernels]
    assert sources and not any("hloscope" in s for s in sources), sources


def test_use_cpu_devices_before_jax_starts():
    import subprocess
    import sys

    code = ("import hloscope; hloscope.use_cpu_devices(4); import jax; "
            "print(jax.device_count())")
    env = {k: v for k, v in __import__("os").environ.items() if k != "XLA_FLAGS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120, check=False)
    assert r.stdout.strip().endswith("4"), r.stderr


def test_inspect_command(tmp_path):
    from conftest import run_cli

    script = tmp_path / "prog.py"
    script.write_text("import jax.numpy as jnp\n\ndef f(x, n=2):\n    for _ in range(n):\n"
                      "        x = jnp.sin(x) @ x.T\n    return x.sum()\n")
    out, saved = tmp_path / "r.html", tmp_path / "r.json"
    r = run_cli("inspect", f"{script}:f", "--arg", "f32[32,32]", "--static", "n=3",
                "-o", str(out), "--save", str(saved))
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("f: needs ") and "(what XLA allocates)" in first
    assert "live at once" in first and "compile" in r.stdout
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert hloscope.load(str(saved)).name == "f"
    bad = run_cli("inspect", f"{script}:nope", "--arg", "f32[4]")
    assert bad.returncode == 2 and "has no 'nope'" in bad.stderr


def test_notebook_display_in_a_real_kernel_rendered_in_chromium(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    import shutil

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import jax, jax.numpy as jnp, hloscope\n"
        "f = lambda x: jnp.fft.irfftn(jnp.fft.rfftn(x) * 2)\n"
        "hloscope.show(f, jnp.ones((16, 16, 8)))")]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outputs = [o for o in nb.cells[0].outputs if o.get("output_type") == "display_data"]
    assert outputs, nb.cells[0].outputs
    html = outputs[0]["data"]["text/html"]
    assert "<iframe srcdoc=" in html and "<summary>jaxpr" in html and "HLO after optimization" in html
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed")
    from playwright.sync_api import sync_playwright

    page_file = tmp_path / "cell.html"
    page_file.write_text("<!DOCTYPE html><html><body>" + html + "</body></html>")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = b.new_page(viewport={"width": 1200, "height": 1000})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto("file://" + str(page_file))
        frame = page.frames[1]
        frame.wait_for_selector("body[data-ready='1']", timeout=20000)
        assert frame.locator("#answer-kernels tr").count() >= 1  # the overview, first
        frame.click("#nav-graph")  # hash routing inside the notebook's iframe
        frame.wait_for_selector("#main[data-view='graph']")
        assert frame.locator("g.kernel, g.group").count() >= 1
        shot = page.screenshot()
        b.close()
    assert len(shot) > 20000 and not errors, errors


def _corpus_program(name):
    """Some programs of ../shared/corpus/generate.py (seed 004's examples), as written there."""
    import jax.numpy as jnp

    x = jnp.zeros((1024 * 128, 2))
    x3d = jnp.zeros((64, 64, 32, 2))
    programs = {
        "f_well_fused": (lambda x: jnp.sin(x * 2) + (x * 2) ** 2
                         + jnp.arange(x.shape[0])[:, None] * 3 + (x[0] + x - x * 2), x),
        "f_for_loop": (lambda x: jax.lax.fori_loop(0, 4, lambda i, x: x * x + 1, x), x),
        "f_for_unrolled": (lambda x: jax.lax.fori_loop(0, 4, lambda i, x: x * x + 1, x,
                                                       unroll=4), x),
        "f_fft3d": (lambda x: jnp.fft.irfftn(jnp.fft.rfftn(x, axes=(0, 1, 2)), axes=(0, 1, 2)),
                    x3d),
    }
    fn, arg = programs[name]
    return jax.jit(fn), arg


@pytest.mark.parametrize("name", ["f_well_fused", "f_for_loop", "f_for_unrolled", "f_fft3d"])
def test_inspect_on_corpus_programs_agrees_with_xla_and_the_corpus_file(name):
    from conftest import GENERATED

    fn, arg = _corpus_program(name)
    r = hloscope.inspect(fn, arg)
    assert r.memory.peak_bytes == r.memory.xla.live_range_peak_bytes
    assert r.memory.temp_estimate_bytes == r.memory_analysis["temp_size_in_bytes"]
    stored = hloscope.kernel_graph(hloscope.read(GENERATED / f"{name}.hlo").module)
    if jax.__version__ == "0.10.2":  # the corpus was made with this version
        assert [(k.category, k.fusion_kind, k.shape) for k in r.kernels.kernels] == \
            [(k.category, k.fusion_kind, k.shape) for k in stored.kernels]
