"""StableHLO (MLIR text) read as HLO: what ``xm.get_stablehlo`` and ``jax ... .as_text()`` print.

hloscope's model is HLO text.  A StableHLO module (``module @IrToHlo.24 ... {
func.func @main(...) ...}``) is converted to HLO by XLA's own converter, the
one in jaxlib (``mlir_module_to_xla_computation``), so JAX must be installed
to read one; every command then reads the HLO as if the user had printed it.

torch_xla prints its StableHLO with "pretty" debug locations that no MLIR
parser takes: a preamble of ``#loc12 = "forward"(#loc1)`` / ``#loc21 = #loc17
at #loc18`` lines split over several lines, and ``"aten__relu"(#loc32)`` or
``[unknown]`` after operations and arguments.  `parseable_stablehlo` drops
them (the HLO then has no source lines) when the text does not parse as it is.

`parseable_stablehlo` (MLIR text XLA parses) and `stablehlo_to_hlo_text` (HLO
text) are what ``hloscope run`` needs; the reader calls the second.
"""

from __future__ import annotations

import re

from .._errors import HloSourceError

__all__ = ["is_stablehlo", "parseable_stablehlo", "stablehlo_to_hlo_text"]

# [^\S\n]*, not \s*: \s* would run over every following blank line from each line start
# (quadratic on a text of newlines).
_MODULE_RE = re.compile(r"^[^\S\n]*module\b[^\n]*\{", re.M)
_FUNC_RE = re.compile(r"^[^\S\n]*func\.func\b", re.M)
_PRETTY_LOC_RE = re.compile(r' "(?:[^"\\]|\\.)*"\(#loc[0-9]*\)| \[unknown\]')
_LOC_DEF_RE = re.compile(r"^#loc[0-9]*\b.*\n?(?:^ at .*\n?)*", re.M)


def is_stablehlo(text: str) -> bool:
    """Whether `text` looks like a StableHLO/MHLO module in MLIR text (not HLO text)."""
    head = text[: 1 << 16]
    if "HloModule" in head.split("module", 1)[0]:
        return False
    return bool((_MODULE_RE.search(head) or _FUNC_RE.search(head))
                and ("stablehlo." in text or "mhlo." in text or "func.func" in head))


def parseable_stablehlo(text: str) -> str:
    """`text` without torch_xla's pretty debug locations (see the module docstring): the
    preamble before ``module`` and the ``"name"(#locN)`` / ``[unknown]`` suffixes.
    Text without them is returned unchanged."""
    m = _MODULE_RE.search(text)
    if m is None or not ("(#loc" in text or "[unknown]" in text):
        return text
    body = text[m.start():].lstrip("\n")
    body = _LOC_DEF_RE.sub("", body)
    return _PRETTY_LOC_RE.sub("", body)


def stablehlo_to_hlo_text(text: str, *, filename: str = "<string>") -> str:
    """The HLO text of a StableHLO module, converted by XLA's converter in jaxlib.

    Raises `HloSourceError` when JAX is not installed or XLA cannot read the module
    (with XLA's first line of complaint)."""
    path = None if filename == "<string>" else filename
    try:
        from .._jax._quiet import import_jax_quietly

        import_jax_quietly()
        from jax._src.lib import xla_client as xc
    except ImportError:
        raise HloSourceError(
            "this is StableHLO (MLIR text); hloscope converts it to HLO with JAX, which is "
            "not installed", path=path,
            hint="pip install jax, or save HLO text instead of StableHLO: "
                 "torch_xla._XLAC._get_xla_tensors_hlo([tensor]) (torch_xla) or "
                 "jax.jit(f).lower(x).as_text(dialect='hlo') (JAX)") from None
    convert = xc._xla.mlir.mlir_module_to_xla_computation
    first_error = ""
    for candidate in dict.fromkeys((text, parseable_stablehlo(text))):
        try:
            computation = convert(candidate, use_tuple_args=False, return_tuple=False)
        except Exception as e:  # noqa: BLE001  (XLA raises its own error types)
            first_error = first_error or _first_line(str(e))
            continue
        return str(computation.as_hlo_text())
    raise HloSourceError(f"XLA cannot read this StableHLO: {first_error}", path=path,
                         hint="save HLO text instead of StableHLO: "
                              "torch_xla._XLAC._get_xla_tensors_hlo("
                              "[tensor]) (torch_xla) or jax.jit(f).lower(x).as_text("
                              "dialect='hlo') (JAX)")


def _first_line(message: str) -> str:
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    return (lines[0] if lines else "unknown error")[:300]
