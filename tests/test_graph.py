"""Pictures of the kernel graph: SVG (golden, escaped, deterministic) and PNG."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from conftest import GENERATED, check_golden, run_cli

import hloscope


@pytest.mark.parametrize("name", ["f_sum_jax", "f_for_loop", "f_filter_with_temp",
                                  "fft_cont_pencil_4x2"])
def test_svg_golden_valid_and_deterministic(name):
    m = hloscope.read(GENERATED / f"{name}.hlo").module
    svg = hloscope.draw(m).svg
    assert svg == hloscope.draw(hloscope.read(GENERATED / f"{name}.hlo").module).svg
    ET.fromstring(svg)  # well-formed XML
    check_golden(f"graph/{name}.svg", svg)


def test_picture_marks_the_peak_and_labels_arrays():
    svg = hloscope.draw(hloscope.read(GENERATED / "f_sum_jax.hlo").module).svg
    assert "f32[131072,2]  1.00 MiB" in svg
    assert "live at the peak" in svg and 'stroke="#c0392b"' in svg
    assert "ynn_fusion" in svg and "reduce" in svg


def test_loops_are_frames():
    d = hloscope.draw(hloscope.read(GENERATED / "f_for_loop.hlo").module)
    assert sorted(f.title.split()[0] + " " + f.title.split()[1] for f in d.picture.frames) == [
        "while body", "while condition"]


HOSTILE = '''HloModule evil, is_scheduled=true

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}

ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0), metadata={op_name="<script>alert(1)</script>" source_file="\\"onload=alert(2) x.py" source_line=1}
  %k = f32[4]{0} custom-call(%a), custom_call_target="<img src=x onerror=alert(3)>", metadata={op_name="jit(f)/<b>bold</b>&amp;"}
  ROOT %f = f32[4]{0} fusion(%k), kind=kLoop, calls=%fused, metadata={op_name="</title><script>alert(4)</script>" source_file="a'b\\".py" source_line=2}
}
'''


def test_hostile_metadata_is_escaped():
    svg = hloscope.draw(hloscope.parse(HOSTILE)).svg
    root = ET.fromstring(svg)
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    assert "<script" not in svg and "<img" not in svg and "<b>" not in svg
    assert "&lt;img src=x onerror=alert(3)&gt;" in svg
    assert all("onload" not in k and "onerror" not in k
               for e in root.iter() for k in e.attrib)


def test_png_is_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.image

    path = hloscope.draw(hloscope.read(GENERATED / "f_for_loop.hlo").module).save(
        str(tmp_path / "g.png"))
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert pixels.std() > 0.05  # not blank




def test_graph_cli(tmp_path):
    out = tmp_path / "g.svg"
    r = run_cli("graph", str(GENERATED / "f_sum_jax.hlo"), "-o", str(out))
    assert r.returncode == 0 and out.read_text().startswith("<svg")
    r = run_cli("graph", str(GENERATED / "f_sum_jax.hlo"), "-o", str(tmp_path / "g.pdf"))
    assert r.returncode == 2 and "unknown file type" in r.stderr
    r = run_cli("graph", str(GENERATED / "f_filter_with_temp.hlo"), "-o", str(out), "--max-kernels", "3")
    assert r.returncode == 2 and "too many" in r.stderr


def test_report_groups_never_show_more_than_a_chunk():
    from hloscope._analysis._memory import analyze_memory
    from hloscope._analysis._summary import summarize
    from hloscope._render._report_data import CHUNK, report_data

    lines = ["HloModule wide, is_scheduled=true", "ENTRY e {", "  p = f32[8]{0} parameter(0)"]
    prev = "p"
    for i in range(2000):
        lines.append(f'  n{i} = f32[8]{{0}} negate({prev}), metadata={{op_name="jit(f)/neg"}}')
        prev = f"n{i}"
    lines.append(f"  ROOT r = f32[8]{{0}} copy({prev})")
    lines.append("}")
    m = hloscope.parse("\n".join(lines) + "\n")
    g = hloscope.kernel_graph(m)
    data = report_data(m, summarize(m), g, analyze_memory(m),
                       hloscope.advise_groups(m, graph=g))
    groups = data["groups"]
    assert max(len(x["groups"]) + len(x["kernels"]) for x in groups) <= CHUNK
    assert groups[data["top"]]["size"] == len(g.kernels) == 2001
    assert all(k["group"] >= 0 for k in data["kernels"])
