"""The HTML report in a real browser: Playwright driving Debian's chromium from disk.

Needs `apt-get install chromium` and `pip install playwright` (.ci/run installs both; no
browser download).  Skipped, with the reason, where either is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import GENERATED, ROOT, SEEDS, run_cli
from test_graph import HOSTILE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("CI"):
    pytest.fail("Debian's chromium is not installed; .ci/run installs it with apt-get",
                pytrace=False)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                       "(apt-get install chromium)"),
]
playwright = pytest.importorskip("playwright.sync_api")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def open_report(browser, path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))
    page.goto("file://" + os.path.abspath(path))
    page.wait_for_selector("body[data-ready='1']", timeout=20000)
    return page, errors


def show(page, view):
    """Open a view from the navigation and wait until it is drawn (routing is by hash)."""
    page.click("#nav-" + view)
    page.wait_for_selector(f"#main[data-view='{view}']")


def report(tmp_path, src, name="r.html"):
    out = tmp_path / name
    r = run_cli("report", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    return out


def test_graph_draws_group_opens_search_finds_panel_shows_hlo(browser, tmp_path):
    page, errors = open_report(browser, report(tmp_path, GENERATED / "f_filter_with_temp.hlo"))
    show(page, "graph")
    assert page.locator("g.kernel").count() >= 1 and page.locator("g.group.closed").count() >= 1
    before = page.locator("g.kernel").count()
    for _ in range(6):  # open groups (scopes may nest) until more kernels show
        page.locator("g.group.closed").first.locator("text.title").click()
        if page.locator("g.kernel").count() > before:
            break
    assert page.locator("g.group.open").count() >= 1
    assert page.locator("g.kernel").count() > before
    page.fill("#search", "fft.9")
    page.press("#search", "Enter")
    assert "found fft.9" in page.inner_text("#search-status")
    assert "fft(" in page.inner_text("#panel-hlo")
    assert page.locator("g.kernel.selected").count() == 1
    show(page, "memory")
    page.locator("#timeline-svg").hover()
    assert "steps" in page.inner_text("#timeline-info")
    shot = page.screenshot(full_page=True)
    assert len(shot) > 20000  # a rendered page, not a blank one
    assert not errors, errors


def test_search_by_source_line_and_op_name(browser, tmp_path):
    page, errors = open_report(browser, report(tmp_path, GENERATED / "f_sum_jax.hlo"))
    show(page, "graph")
    page.fill("#search", "reduce_sum")
    page.press("#search", "Enter")
    assert "found ynn_fusion" in page.inner_text("#search-status")
    page.fill("#search", "generate.py:48")
    page.press("#search", "Enter")
    assert "found" in page.inner_text("#search-status")
    assert not errors, errors


def test_every_corpus_module_renders(browser, tmp_path):
    sources = [p for p in sorted(GENERATED.glob("*.hlo")) + sorted(SEEDS.glob("*.hlo"))
               if "truncated" not in p.name]
    sources.append(SEEDS / "fft_cont_2048_pencil8.jax_hpc_profiler.md")
    for src in sources:
        page, errors = open_report(browser, report(tmp_path, src, src.stem + ".html"))
        assert page.locator("#summary h1").count() == 1
        assert not errors, (src.name, errors)
        page.close()


def test_hostile_metadata_runs_no_script(browser, tmp_path):
    src = tmp_path / "evil.hlo"
    src.write_text(HOSTILE)
    out = report(tmp_path, src, "evil.html")
    text = out.read_text()
    assert "<script>alert" not in text and "<img" not in text
    page, errors = open_report(browser, out)
    show(page, "graph")
    page.fill("#search", "k")
    page.press("#search", "Enter")
    assert page.evaluate("document.querySelectorAll('img, script:not([type])').length") == 1
    assert "&lt;" not in page.inner_text("#panel")  # shown as text, decoded once
    assert "<img src=x onerror=alert(3)>" in page.inner_text("#panel")
    assert not errors, errors


def test_report_of_a_dump_folder_and_the_seed_dump(browser, tmp_path):
    page, errors = open_report(browser, report(tmp_path, GENERATED / "f_for_loop.dump"))
    assert "XLA" in page.inner_text("#summary") and not errors
    page, errors = open_report(browser, report(
        tmp_path, SEEDS / "gpu_auto_sharding.buffer-assignment.txt", "seed.html"))
    text = page.inner_text("#summary")
    assert "30,724" in text.replace("\u202f", ",") or "30.00 KiB" in text
    show(page, "memory")
    assert page.locator("#peak-values tr").count() == 1 + 8  # the 8 values live at the peak
    assert not errors, errors


def test_report_is_deterministic(tmp_path):
    a = report(tmp_path, GENERATED / "f_for_loop.hlo", "a.html").read_bytes()
    b = report(tmp_path, GENERATED / "f_for_loop.hlo", "b.html").read_bytes()
    assert a == b
    assert b"http://" not in a.replace(b"http://www.w3.org/2000/svg", b"") and b"https://" not in a


def test_diff_html_shows_both_graphs_coloured(browser, tmp_path):
    out = tmp_path / "d.html"
    r = run_cli("diff", str(GENERATED / "f_sum_jax.hlo"), str(GENERATED / "f_sum_explicit.hlo"),
                "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    from hloscope._render._diff_html import ADDED, CHANGED, REMOVED
    from hloscope._render._svg import FILLS

    assert text.count("<svg") == 2 and REMOVED in text and ADDED in text

    def rgb(c):
        return [int(c[i:i + 2], 16) for i in (1, 3, 5)]

    # told apart from every kind's own colour (a new user took copies, #f5d0d0, for
    # removed kernels, #f8c9c4 then)
    assert min(sum((x - y) ** 2 for x, y in zip(rgb(mark), rgb(kind))) ** 0.5
               for mark in (REMOVED, ADDED, CHANGED) for kind in FILLS.values()) > 60
    page, errors = open_diff(browser, out)
    assert "2 kernels became 1" in page.inner_text("body")
    assert page.locator("svg").count() == 2 and not errors, errors


def open_diff(browser, path):
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("file://" + os.path.abspath(path))
    page.wait_for_load_state()
    return page, errors


def test_memory_figures_are_labelled_and_explained(browser, tmp_path):
    page, errors = open_report(browser, report(tmp_path, GENERATED / "f_for_loop.dump"))
    show(page, "memory")
    rows = page.locator("#memory-figures tr[data-key]")
    keys = [rows.nth(i).get_attribute("data-key") for i in range(rows.count())]
    assert keys[:3] == ["allocation", "live_range_peak", "timeline_max"]
    assert {"xla_live_range_peak", "xla_temp", "allocation"} <= set(keys)
    peak = page.locator("#memory-figures tr[data-key='live_range_peak']").inner_text()
    assert "2,097,176 B" in peak and "step 6" in peak
    assert "above the peak" in page.locator("#memory-explanations").inner_text()
    assert not errors


def test_report_of_an_unoptimized_module_says_so_first(browser, tmp_path):
    page, errors = open_report(browser, report(tmp_path, GENERATED / "f_barrier.before.hlo"))
    assert "not optimized" in page.locator("#notes").inner_text()
    assert "not optimized" in page.locator("#summary table.facts").inner_text()
    # the overview does not call operations XLA has not fused its kernels (an open-world
    # trial's unoptimized MobileNet read "What XLA made: 2259 kernels ... 0 fusions")
    body = page.locator("body").inner_text()
    assert "As written (not optimized by XLA)" in body and "What XLA made" not in body
    assert not errors


def test_bench_markdown_rendered_by_a_commonmark_renderer_runs_no_script(browser, tmp_path):
    """A benchmark report's Markdown with hostile parameters, names and metadata, rendered
    as a reader's viewer does (markdown-it-py, CommonMark with tables) and opened in the
    browser: no dialog, no script, and every value shows as written."""
    from markdown_it import MarkdownIt
    from test_bench_report import HOSTILE_MD

    from hloscope import BenchResult

    r = BenchResult(HOSTILE_MD[0], {f"p{i}": v for i, v in enumerate(HOSTILE_MD)},
                    times=[1e-3, 2e-3, 1.5e-3], metadata={"host": HOSTILE_MD[1]},
                    checks=[{"parameter": HOSTILE_MD[2], "given": HOSTILE_MD[1],
                             "program": HOSTILE_MD[0], "ok": False, "note": HOSTILE_MD[4]}])
    body = MarkdownIt("commonmark").enable("table").render(r.markdown())
    path = tmp_path / "bench_md.html"
    path.write_text(f"<!doctype html><meta charset=utf-8><body data-ready=1>{body}</body>",
                    encoding="utf-8")
    page, errors = open_report(browser, path)
    page.wait_for_timeout(300)
    assert errors == []  # no dialog fired, no script error
    assert page.evaluate("document.querySelectorAll('script, img, a[href^=javascript]')"
                         ".length") == 0
    text = page.inner_text("body")
    for v in HOSTILE_MD:
        assert v in text, v
    page.close()


# -- every control on every kind of page (issue 19, item 8) -----------------------------

def use_every_control(page) -> int:
    """Click, hover and type into everything a user can on the page (tabs, table rows and
    headers, groups and kernels, buttons, search boxes, timelines); return how many."""
    used = 0

    def each(selector, action, limit=4):
        nonlocal used
        for i in range(limit):
            loc = page.locator(selector + " >> visible=true").nth(i)
            if loc.count() and loc.is_visible():
                action(loc)
                used += 1
                page.wait_for_timeout(40)  # let a link's hashchange switch the view

    each("nav a", lambda a: a.click(), limit=20)
    for view in page.locator("nav a").all() or [None]:
        if view is not None:
            view.click()
            page.wait_for_timeout(40)
        each("th.sortable", lambda th: th.click(), limit=3)
        each("tr.clickable", lambda tr: tr.click(), limit=3)
        if view is not None:
            view.click()  # back to the view: a row may have moved to another one
            page.wait_for_timeout(40)
        each("button", lambda b: b.click(), limit=6)
        each("input[type=search]", lambda i: (i.fill("fusion"), i.press("Enter")))
        each("svg.hover, #timeline-svg", lambda s: s.hover())
        each("g.group.closed text.title", lambda t: t.click(), limit=2)
        each("g.kernel", lambda k: k.click(), limit=2)
    return used


def inspect_report(tmp_path, name, **kw):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import hloscope

    def mlp(w1, w2, x):
        return jnp.sum((jnp.tanh(x @ w1) @ w2) ** 2)

    r = hloscope.inspect(jax.grad(mlp), jnp.ones((256, 512)), jnp.ones((512, 128)),
                         jnp.ones((64, 256)), **kw)
    out = tmp_path / name
    out.write_text(r.html(), encoding="utf-8")
    return out


@pytest.mark.parametrize("kind", ["module", "dump folder", "dump files alone", "sharded",
                                  "inspect", "target"])
def test_every_control_on_every_kind_of_page_raises_no_error(browser, tmp_path, kind):
    if kind == "inspect":
        path = inspect_report(tmp_path, "inspect.html")
    elif kind == "target":
        path = inspect_report(tmp_path, "target.html", target="tpu-v5e:2x4")
    else:
        src = {"module": GENERATED / "f_filter_with_temp.hlo",
               "dump folder": GENERATED / "f_for_loop.dump",
               "dump files alone": SEEDS / "gpu_auto_sharding.buffer-assignment.txt",
               "sharded": GENERATED / "fft_cont_pencil_4x2.hlo"}[kind]
        path = report(tmp_path, src)
    page, errors = open_report(browser, path)
    assert not errors, errors  # nothing logged on load
    assert use_every_control(page) >= 3
    assert not errors, errors
    page.close()


# -- the views (issue 19) ------------------------------------------------------------------

def test_views_keep_the_place_in_the_address(browser, tmp_path):
    path = report(tmp_path, GENERATED / "f_filter_with_temp.hlo")
    page, errors = open_report(browser, path)
    assert page.locator("#view-overview").is_visible()
    assert page.locator("#view-memory").count() == 1 and not page.locator("#view-memory").is_visible()
    page.locator("#answer-kernels tr.clickable").last.click()  # a kernel of the overview
    page.wait_for_selector("#main[data-view='kernels']")
    assert page.url.split("#")[1].startswith("/kernels?k=")
    name = page.locator("#kernel-panel h2").inner_text()
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#kernel-panel h2").inner_text() == name  # the place survives a reload
    page.locator("#kernel-panel a", has_text="show in the graph").click()
    page.wait_for_selector("#main[data-view='graph']")
    assert page.locator("g.kernel.selected").count() == 1
    assert page.locator("#panel h2").inner_text() == name
    page.go_back()
    page.wait_for_selector("#main[data-view='kernels']")
    assert page.locator("#view-kernels").is_visible()
    assert not errors, errors


def test_kernels_table_sorts_filters_and_totals(browser, tmp_path):
    page, errors = open_report(browser, report(tmp_path, GENERATED / "fft_cont_pencil_4x2.hlo"))
    show(page, "kernels")
    rows = page.locator("#kernel-table tbody tr")
    assert rows.count() == 6
    assert "total: 6" in page.inner_text("#kernel-table tfoot")
    page.locator("#kernel-table th", has_text="bytes out").click()  # largest first
    first = page.locator("#kernel-table tbody tr").first.locator("td").nth(1).inner_text()
    kernels = page.evaluate("window.hloscope.data.kernels")
    assert first == max(kernels, key=lambda k: k["bytes"])["name"]
    page.fill("#kernel-filter", "all-gather")
    page.press("#kernel-filter", "Enter")
    assert rows.count() == 2 and "total: 2" in page.inner_text("#kernel-table tfoot")
    page.select_option("#kernel-kind", "collective")
    assert rows.count() == 2
    rows.first.click()
    page.wait_for_selector("#kernel-hlo")
    assert "all-gather" in page.inner_text("#kernel-hlo")
    assert not errors, errors


def test_memory_view_stacks_hovers_and_selects_a_value(browser, tmp_path):
    page, errors = open_report(browser, report(tmp_path, GENERATED / "f_filter_with_temp.hlo"))
    show(page, "memory")
    assert page.locator("#timeline-svg polygon.band").count() >= 2  # stacked by kind
    assert "peak" in page.text_content("#timeline-svg")
    page.click("#stack-scope")
    assert page.locator("#timeline-svg polygon.band").count() >= 1
    page.locator("#timeline-svg").hover()
    assert "steps" in page.inner_text("#timeline-info")
    page.locator("#peak-values th", has_text="bytes").click()
    sizes = page.evaluate("window.hloscope.data.memory.peak_values.map(v => v[2])")
    page.locator("#peak-values tbody tr").first.click()
    panel = page.inner_text("#value-panel")
    assert "live range" in panel and "producer" in panel and "consumers" in panel
    assert page.locator("#timeline-svg rect.range").get_attribute("visibility") == "visible"
    assert page.locator("#peak-values tbody tr.selected").count() == 1
    assert page.locator("#peak-values tbody tr").count() == len(sizes)
    assert not errors, errors


def test_collectives_advisor_and_source_views(browser, tmp_path):
    page, errors = open_report(browser, report(tmp_path, GENERATED / "fft_cont_pencil_4x2.hlo"))
    show(page, "collectives")
    assert "all-gather" in page.inner_text("#collective-groups")
    assert page.locator("#collective-list tbody tr").count() == 2
    show(page, "source")
    assert page.locator("#shardings tr").count() >= 2  # the entry's parameter and result
    assert "devices=" in page.inner_text("#shardings")
    assert "generate.py" in page.inner_text("#source-lines")
    assert not errors, errors


def test_inspect_page_has_the_program_texts_linked_to_kernels(browser, tmp_path):
    page, errors = open_report(browser, inspect_report(tmp_path, "i.html", target="tpu-v5e:2x4"))
    assert "tpu" in page.inner_text("#summary").lower()
    show(page, "source")
    buttons = page.inner_text("#view-source .bar")
    assert "jaxpr" in buttons and "StableHLO" in buttons and "HLO after optimization" in buttons
    assert "mesh" in page.inner_text("#view-source")
    line = page.locator("#ir-text .kernel-line").first
    line.click()
    page.wait_for_selector("#main[data-view='kernels']")
    assert page.locator("#view-kernels").is_visible()
    show(page, "source")
    page.locator("#view-source .bar button", has_text="jaxpr").click()
    assert "lambda" in page.inner_text("#ir-text")
    assert not errors, errors


def _l64():
    """The 64-layer transformer step of benchmarks/parse_speed.py (cached)."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    cached = root / ".bench_cache" / "transformer_64.hlo"
    if not cached.exists():
        pytest.importorskip("jax")
        sys.path.insert(0, str(root / "benchmarks"))
        from parse_speed import generate

        return Path(generate(64, str(root / ".bench_cache")))
    return cached


@pytest.fixture(scope="module")
def l64_page(tmp_path_factory):
    return report(tmp_path_factory.mktemp("l64"), _l64(), "l64.html")


def test_l64_overview_fits_one_screen_and_graph_labels_are_readable(browser, l64_page):
    assert l64_page.stat().st_size < 10_000_000
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("file://" + str(l64_page))
    page.wait_for_selector("body[data-ready='1']", timeout=30000)
    fits = page.evaluate("""() => {
      const v = document.getElementById('view-overview');
      return [v.scrollHeight <= v.clientHeight, document.documentElement.scrollHeight <= 1000,
              v.getBoundingClientRect().bottom <= 1000];
    }""")
    assert fits == [True, True, True]
    for box in ("#answer-kernels", "#answer-memory", "#answer-collectives", "#answer-advisor"):
        assert page.locator(box).is_visible() and page.locator(box + " a").count() >= 1
    show(page, "graph")
    assert page.evaluate("window.hloscope.labelPx()") >= 10
    assert page.locator("g.kernel.peak").count() == 1  # the peak's group opened, in view
    assert page.locator("#minimap use").count() == 1
    show(page, "advisor")
    assert page.locator(".finding").count() <= 5
    assert not errors, errors


SCREENSHOT = ROOT / "docs" / "img" / "report.png"
SCREENSHOT_SIZE = (1200, 540)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_readme_screenshot_is_the_demo_report(browser, tmp_path):
    """README's picture of the report: the demo module's page, taken by this test
    (HLOSCOPE_UPDATE_GOLDEN=1 retakes it; otherwise it must be there, a PNG of its size)."""
    if not os.environ.get("HLOSCOPE_UPDATE_GOLDEN"):
        assert png_size(SCREENSHOT.read_bytes()) == SCREENSHOT_SIZE, (
            f"{SCREENSHOT}: retake it with HLOSCOPE_UPDATE_GOLDEN=1 pytest {__file__} -k screenshot")
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for args in (["demo", "--save", "fft.hlo"], ["report", "fft.hlo", "-o", "fft.html"]):
        subprocess.run([sys.executable, "-m", "hloscope", *args], cwd=tmp_path, env=env,
                       check=True, capture_output=True, timeout=120)
    page, errors = open_report(browser, tmp_path / "fft.html")
    page.set_viewport_size({"width": SCREENSHOT_SIZE[0], "height": SCREENSHOT_SIZE[1]})
    page.wait_for_timeout(300)
    SCREENSHOT.write_bytes(page.screenshot())
    assert not errors, errors
    assert png_size(SCREENSHOT.read_bytes()) == SCREENSHOT_SIZE


def test_terms_have_tooltips(browser, tmp_path):
    """Words of docs/glossary.md in the report explain themselves on hover (title)."""
    page, errors = open_report(browser, report(tmp_path, GENERATED / "f_sum_jax.hlo"))
    titles = page.eval_on_selector_all(
        ".explained", "els => els.map(e => [e.textContent.trim(), e.title])")
    text = " ".join(t for _, t in titles)
    assert "kLoop fusion:" in text or "ynn_fusion:" in text, titles
    assert "flops:" in text, titles
    show(page, "memory")
    assert page.locator("#view-memory .explained").count() >= 1
    assert not errors, errors


def test_long_source_paths_keep_their_end(browser, tmp_path):
    """A long source path is cut at its start, never its end: the file and line show
    (`…/gen_transformer.py:LINE`), the whole path in the tooltip."""
    long = "/home/me/projects/a/very/long/directory/name/models/gen_transformer.py"
    hlo = tmp_path / "long.hlo"
    hlo.write_text((GENERATED / "f_sum_jax.hlo").read_text().replace('"generate.py"',
                                                                      f'"{long}"'))
    page, errors = open_report(browser, report(tmp_path, hlo))
    for view in ("overview", "kernels", "memory"):
        show(page, view)
        cells = page.eval_on_selector_all(
            f"#view-{view} td.src", "els => els.map(e => [e.textContent, e.title])")
        cut = [(t, title) for t, title in cells if title.startswith(long)]
        assert cut, (view, cells)
        for text, title in cut:
            assert text.startswith("…") and text.endswith(title[len(long) - 19:]), (text, title)
            assert "gen_transformer.py:" in text
    show(page, "overview")  # and no style cuts it again (the overview's narrow cards)
    clipped = page.eval_on_selector_all(
        "#view-overview td.src", "els => els.filter(e => e.scrollWidth > e.clientWidth + 1 || "
        "e.getBoundingClientRect().right > e.closest('.card').getBoundingClientRect().right)"
        ".map(e => e.textContent)")
    assert not clipped, clipped
    assert not errors, errors


def test_a_profiled_report_ranks_and_colours_by_measured_time(browser, tmp_path):
    folder = os.path.join(os.path.dirname(__file__), "data", "profiles", "cpu_scan")
    out = tmp_path / "p.html"
    r = run_cli("report", os.path.join(folder, "module.hlo"), "--profile", folder, "-o",
                str(out))
    assert r.returncode == 0, r.stderr
    page, errors = open_report(browser, out)
    assert "Longest kernels (measured" in page.inner_text("#main")
    shares = page.eval_on_selector_all(  # each measured kernel's share of the step
        "#view-overview tr.clickable td.num", "els => els.map(e => e.textContent)")
    assert any(s.endswith("%") for s in shares), shares
    show(page, "kernels")
    heads = page.inner_text("#kernel-table thead")
    assert "measured" in heads and "estimated" in heads
    show(page, "graph")
    for _ in range(6):  # open groups until kernels show
        if page.locator("g.kernel rect[style]").count():
            break
        page.locator("g.group.closed").first.locator("text.title").click()
    assert page.locator("g.kernel rect[style]").count() >= 1  # coloured by measured time
    assert not errors, errors
