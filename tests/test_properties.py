"""Property-based tests: generated modules round-trip, and cut or corrupted text
fails with a located HloParseError (never another exception, never a hang)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hloscope
from hloscope._analysis._summary import summarize

_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,6}(\.[0-9]{1,3})?", fullmatch=True)
_ETYPE = st.sampled_from(["f32", "bf16", "s32", "pred", "f16", "s4", "u8", "c64", "f8e4m3fn"])
_STR = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=20)


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@st.composite
def shapes(draw):
    dims = draw(st.lists(st.integers(1, 64), max_size=3))
    perm = list(reversed(range(len(dims))))
    return f"{draw(_ETYPE)}[{','.join(map(str, dims))}]{{{','.join(map(str, perm))}}}"


@st.composite
def attributes(draw):
    out = []
    if draw(st.booleans()):
        out.append("metadata={op_name=%s source_file=%s source_line=%d}" % (
            _quote(draw(_STR)), _quote(draw(_STR)), draw(st.integers(0, 9999))))
    if draw(st.booleans()):
        out.append(draw(st.sampled_from([
            "sharding={replicated}", "sharding={devices=[2,1]0,1}",
            "sharding={devices=[4,2]<=[2,4]T(1,0)}", "sharding={maximal device=1}",
            "sharding={{replicated}, {devices=[2]0,1}}"])))
    if draw(st.booleans()):
        out.append("frontend_attributes={k=%s}" % _quote(draw(_STR)))
    if draw(st.booleans()):
        out.append("backend_config=%s" % _quote(draw(_STR)))
    return ", ".join(out)


@st.composite
def modules(draw):
    n_comps = draw(st.integers(1, 3))
    comp_names = draw(st.lists(_NAME, min_size=n_comps, max_size=n_comps, unique=True))
    lines = [f"HloModule {draw(_NAME)}" + (", is_scheduled=true" if draw(st.booleans()) else "")]
    sigil = "%" if draw(st.booleans()) else ""
    for ci, cname in enumerate(comp_names):
        entry = ci == n_comps - 1
        names = draw(st.lists(_NAME, min_size=1, max_size=8, unique=True))
        body = []
        for k, name in enumerate(names):
            shape = draw(shapes())
            root = "ROOT " if k == len(names) - 1 else ""
            if k == 0 or draw(st.integers(0, 4)) == 0:
                rhs = f"{shape} parameter({k})"
            else:
                op = draw(st.sampled_from(["add", "multiply", "tuple", "custom-call", "fusion"]))
                n_ops = 2 if op in ("add", "multiply") else draw(st.integers(1, 3))
                ops = draw(st.lists(st.sampled_from(names[:k]), min_size=n_ops, max_size=n_ops))
                rhs = f"{shape} {op}({', '.join(sigil + o for o in ops)})"
                if op == "fusion" and ci > 0:
                    rhs += f", kind=kLoop, calls={sigil}{comp_names[0]}"
            attrs = draw(attributes())
            if attrs:
                rhs += ", " + attrs
            body.append(f"  {root}{sigil}{name} = {rhs}")
        head = ("ENTRY " if entry else "") + sigil + cname + " {"
        lines.append("\n" + head + "\n" + "\n".join(body) + "\n}")
    return "\n".join(lines) + "\n"


SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(modules())
def test_generated_modules_round_trip(text):
    m = hloscope.parse(text)
    again = hloscope.parse(m.to_text())
    assert again == m
    assert again.to_text() == m.to_text()
    for inst in m.instructions():  # every typed view decodes without error
        inst.metadata, inst.sharding, inst.frontend_attributes, inst.backend_config
        inst.source, inst.called_computation_names
        assert inst.shape.byte_size >= 0
    summarize(m)


@SETTINGS
@given(modules(), st.floats(0.0, 1.0))
def test_cut_text_fails_cleanly(text, where):
    cut = text[: int(len(text) * where)]
    try:
        hf = hloscope.read_text(cut)
    except hloscope.HloParseError as e:
        assert 1 <= e.line <= cut.count("\n") + 1
        assert e.column >= 1
        assert "^" in e.get_context()
        return
    except hloscope.HloSourceError:
        return
    # A cut that falls after a complete computation is still a valid module.
    for m in hf.modules:
        summarize(m)


@SETTINGS
@given(modules(), st.data())
def test_corrupted_text_fails_cleanly(text, data):
    pos = data.draw(st.integers(0, max(0, len(text) - 1)))
    junk = data.draw(st.sampled_from(["{", "}", "(", '"', "=", ",", "%", "\x01", "ROOT ",
                                      "\n", "]", "\u00e9", "<script>", "/*"]))
    bad = text[:pos] + junk + text[pos:]
    try:
        hf = hloscope.read_text(bad)
        for m in hf.modules:
            summarize(m)
            for inst in m.instructions():
                inst.attributes
    except hloscope.HloscopeError as e:
        str(e)
