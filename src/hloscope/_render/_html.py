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


# The page's script: the core (header, navigation, helpers) and one file per view, run
# as one function so that they share names without touching the page's globals.
SCRIPTS = ("report.js", "report_overview.js", "report_memory.js", "report_kernels.js",
           "report_graph.js", "report_lists.js")


def _asset(name: str) -> str:
    return (resources.files("hloscope") / "_data" / name).read_text(encoding="utf-8")


def _json_in_script(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _script() -> str:
    body = "\n".join(_asset(name) for name in SCRIPTS)
    return f"(function () {{\n{body}\nstart();\n}})();\n"


def render_html(data: dict[str, Any]) -> str:
    """The report page for `data` (from `report_data`)."""
    title = html.escape(f"hloscope: {data.get('module', '')}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{title}</title>\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
        f"<style>\n{_asset('report.css')}</style>\n</head>\n<body>\n"
        "<header id=\"summary\"></header>\n<main id=\"main\"></main>\n"
        "<noscript>The report is drawn by its script: allow JavaScript for this file."
        "</noscript>\n"
        f"<script type=\"application/json\" id=\"hloscope-data\">{_json_in_script(data)}</script>\n"
        f"<script>\n{_script()}</script>\n</body>\n</html>\n"
    )
