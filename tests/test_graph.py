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


def _picture(path):
    return hloscope.draw(hloscope.read(path).module).picture


def _inside(x, y, r, pad=1.0):
    rx, ry, rw, rh = r
    return rx + pad < x < rx + rw - pad and ry + pad < y < ry + rh - pad


def test_frames_hold_their_titles_and_long_arrows_go_around():
    """A TensorFlow TPU module with a while loop and a conditional (an open-world trial):
    the condition's title ran over the body's frame, an empty branch's frame was a speck
    whose title covered a kernel, and an arrow from an argument to a kernel four layers
    down ran through the loop body's frame and its boxes."""
    from hloscope._render._graph_layout import CHAR_W, _along

    from conftest import ROOT

    pic = _picture(ROOT / "tests" / "data" / "open_world"
                   / "24_tf_tpu_while_conditional_send.hlo")
    frames = {f.name: f for f in pic.frames}
    for f in pic.frames:
        assert f.w >= len(f.title) * CHAR_W + 16, f.title
    assert frames["region_3.60"].title.endswith(": no kernels")
    rects = [(f.x, f.y, f.w, f.h) for f in pic.frames]
    for i, a in enumerate(rects):   # frames side by side never overlap
        for b in rects[i + 1:]:
            nested = (a[0] <= b[0] and a[1] <= b[1] and b[0] + b[2] <= a[0] + a[2]) or \
                (b[0] <= a[0] and b[1] <= a[1] and a[0] + a[2] <= b[0] + b[2])
            apart = a[0] + a[2] <= b[0] or b[0] + b[2] <= a[0] or \
                a[1] + a[3] <= b[1] or b[1] + b[3] <= a[1]
            assert nested or apart, (a, b)
    for b in pic.boxes:
        for f in pic.frames:   # a box is in a frame, or clear of it
            r = (f.x, f.y, f.w, f.h)
            corners = [(b.x, b.y), (b.x + b.w, b.y + b.h)]
            ins = [_inside(x, y, r, 0) for x, y in corners]
            assert all(ins) or not any(ins), (b.id, f.name)
    long = next(a for a in pic.arrows if a.src.startswith("argument:")
                and a.dst == "k:compare.8")
    assert len(long.via) >= 4
    body = frames["region_0.10"]
    for k in range(1, 40):   # the arrow stays out of the loop body and of other boxes
        x, y = _along(long.path(), k / 40)
        assert not _inside(x, y, (body.x, body.y, body.w, body.h), 2), (x, y)
        for b in pic.boxes:
            if b.id not in (long.src, long.dst):
                assert not _inside(x, y, (b.x, b.y, b.w, b.h), 2), (b.id, x, y)


def test_arrow_labels_do_not_cover_each_other():
    from conftest import ROOT

    from hloscope._render._graph_layout import LABEL_CHAR_W, LABEL_H

    for path in (ROOT / "tests" / "data" / "open_world"
                 / "24_tf_tpu_while_conditional_send.hlo",
                 GENERATED / "fft_cont_pencil_4x2.hlo", GENERATED / "f_for_loop.hlo"):
        pic = _picture(path)
        labels = [(a.label_at[0], a.label_at[1] - LABEL_H + 2, len(a.label) * LABEL_CHAR_W,
                   LABEL_H) for a in pic.arrows if a.label]
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                dx = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
                dy = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
                assert dx <= 0 or dy <= 0, (path.name, a, b)


def test_the_canvas_holds_every_label():
    """A narrow graph (one chain of kernels) whose arrows' labels are wider than its boxes:
    the SVG was cut at 273 px, through a label."""
    from hloscope._render._graph_layout import LABEL_CHAR_W

    for path in (GENERATED / "fft_cont_pencil_4x2.hlo", GENERATED / "f_sum_jax.hlo"):
        pic = _picture(path)
        for a in pic.arrows:
            assert a.label_at[0] + len(a.label) * LABEL_CHAR_W <= pic.width, (path, a.label)
