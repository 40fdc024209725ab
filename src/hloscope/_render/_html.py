"""The self-contained HTML report: one file, no network, opens from disk.

The page is static HTML with the report data embedded as JSON (with ``<``,
``>`` and ``&`` escaped so no text from the module can end the script block)
and hloscope's own small script and style sheet inline.  The script puts
every text from the module into the page with ``textContent``, never as
markup.  The same module gives a byte-identical file.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

__all__ = ["render_html"]


def _asset(name: str) -> str:
    return (resources.files("hloscope") / "_data" / name).read_text(encoding="utf-8")


def _json_in_script(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _notes(data: dict[str, Any]) -> str:
    """What the page leaves out of a very large module, said at the top of the page."""
    notes = data.get("notes") or []
    if not notes:
        return ""
    items = "".join(f"<p>{html.escape(n)}</p>" for n in notes)
    return f"<section id=\"notes\" class=\"info\">{items}</section>\n"


def render_html(data: dict[str, Any]) -> str:
    """The report page for `data` (from `report_data`)."""
    title = html.escape(f"hloscope: {data.get('module', '')}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{title}</title>\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
        f"<style>\n{_asset('report.css')}</style>\n</head>\n<body>\n"
        "<header id=\"summary\"></header>\n" + _notes(data)
        + "<section id=\"timeline\"></section>\n"
        "<section id=\"layout\"><div id=\"graph\"></div><aside id=\"panel\">"
        "<p>Select a kernel to see its HLO, sizes and source line.</p></aside></section>\n"
        f"<script type=\"application/json\" id=\"hloscope-data\">{_json_in_script(data)}</script>\n"
        f"<script>\n{_asset('report.js')}</script>\n</body>\n</html>\n"
    )
