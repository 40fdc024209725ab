"""hloscope's own saved files, read and checked field by field at load time.

`hloscope inspect --save` / `Report.save` write an inspect report (schema
``hloscope.inspect/1``); `hloscope bench -o` writes benchmark results (schema
``hloscope.bench/1``).  Both are read back by `hloscope.load`,
`hloscope.load_results` and every command that reads a module.  A damaged or
crafted file is refused here, at load time, with an `HloSourceError` that
names the file and the field: not a `TypeError`, a `RecursionError` on deep
nesting, or a wrong type accepted now that fails later.  Non-finite numbers
(``NaN``, ``Infinity``) are refused too: no time or size is ever one.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .._errors import HloSourceError

__all__ = ["BENCH_SCHEMA", "INSPECT_SCHEMA", "Fields", "saved_report", "is_saved_json", "load_json", "report_fields"]

INSPECT_SCHEMA = "hloscope.inspect/1"
BENCH_SCHEMA = "hloscope.bench/1"

# Deeper than this, a saved file is crafted: hloscope's own files nest a few levels.
_MAX_DEPTH = 64


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number hloscope writes")


def _depth(value: Any, limit: int) -> bool:
    """Whether `value` nests deeper than `limit` (without recursion)."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return True
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return False


def load_json(path: str, text: str | None = None, *, what: str = "file") -> Any:
    """The JSON at `path` (or `text`), refusing what hloscope never writes."""
    if text is None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise HloSourceError(f"cannot read the {what} ({e.strerror})", path=path) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise HloSourceError(f"not text (binary data): not a {what} hloscope wrote",
                                 path=path) from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise HloSourceError(f"nested too deeply to be a {what} hloscope wrote",
                             path=path) from None
    except json.JSONDecodeError as e:
        raise HloSourceError(f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})",
                             path=path, hint=f"pass a {what} hloscope wrote") from None
    except ValueError as e:
        raise HloSourceError(f"not valid JSON: {e}", path=path) from None
    if _depth(value, _MAX_DEPTH):
        raise HloSourceError(f"nested too deeply to be a {what} hloscope wrote", path=path)
    return value


def is_saved_json(head: str) -> bool:
    """Whether the start of a file looks like a JSON object (a saved report or result)."""
    return head.lstrip().startswith("{")


class Fields:
    """Typed access to one JSON object's fields; each refusal names the file and field."""

    def __init__(self, d: Any, path: str, *, what: str, where: str = "") -> None:
        if not isinstance(d, dict):
            raise HloSourceError(f"{where or 'the ' + what} is {_kind(d)}, not an object",
                                 path=path)
        self.d = d
        self.path = path
        self.what = what
        self.where = where

    def _bad(self, key: str, want: str, value: Any) -> HloSourceError:
        name = f"{self.where}.{key}" if self.where else key
        return HloSourceError(f"field {name!r} is {_kind(value)}, expected {want}",
                              path=self.path, hint=f"re-create the {self.what} with hloscope")

    def has(self, key: str) -> bool:
        return self.d.get(key) is not None

    def text(self, key: str, default: str | None = "") -> str:
        v = self.d.get(key, default)
        if v is None and default is None:
            raise HloSourceError(f"field {key!r} is missing", path=self.path,
                                 hint=f"re-create the {self.what} with hloscope")
        if v is None:
            return default or ""
        if not isinstance(v, str):
            raise self._bad(key, "a string", v)
        return v

    def number(self, key: str, *, optional: bool = True, minimum: float | None = None
               ) -> float | None:
        v = self.d.get(key)
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self._bad(key, "a number", v)
        if minimum is not None and v < minimum:
            raise self._bad(key, f"a number >= {minimum:g}", v)
        return v

    def integer(self, key: str, default: int = 0, *, minimum: int = 0) -> int:
        v = self.d.get(key, default)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise self._bad(key, f"an integer >= {minimum}", v)
        return v

    def obj(self, key: str, *, optional: bool = True) -> dict[str, Any] | None:
        v = self.d.get(key)
        if v is None and optional:
            return None
        if not isinstance(v, dict):
            raise self._bad(key, "an object", v)
        return v

    def numbers(self, key: str, *, minimum: float | None = None,
                optional: bool = True) -> dict[str, float] | None:
        """An object whose values are all finite numbers (or null when `optional`)."""
        d = self.obj(key, optional=optional)
        if d is None:
            return None
        sub = Fields(d, self.path, what=self.what, where=key)
        return {k: sub.number(k, optional=False, minimum=minimum) for k in d}  # type: ignore[misc]

    def sizes(self, key: str) -> dict[str, int | None]:
        """An object of sizes in bytes: non-negative integers or null."""
        d = self.obj(key) or {}
        out: dict[str, int | None] = {}
        for k, v in d.items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise Fields(d, self.path, what=self.what, where=key)._bad(
                    k, "a size in bytes (an integer >= 0) or null", v)
            out[k] = v
        return out

    def strings(self, key: str) -> dict[str, str]:
        d = self.obj(key) or {}
        sub = Fields(d, self.path, what=self.what, where=key)
        return {k: sub.text(k) for k in d}

    def integers(self, key: str) -> list[int]:
        """A list of integers >= 0 (empty when missing)."""
        v = self.d.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
            raise self._bad(key, "a list of integers >= 0", v)
        return list(v)

    def times(self, key: str) -> list[float]:
        """A list of times in seconds: finite numbers >= 0."""
        v = self.d.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self._bad(key, "a list of times", v)
        return [self._time(key, i, x) for i, x in enumerate(v)]

    def _time(self, key: str, i: int, x: Any) -> float:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) \
                or x < 0:
            raise self._bad(f"{key}[{i}]", "a time in seconds (a number >= 0)", x)
        return float(x)

    def time_lists(self, key: str) -> list[list[float]]:
        v = self.d.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(r, list) for r in v):
            raise self._bad(key, "a list of lists of times", v)
        return [[self._time(f"{key}[{i}]", j, x) for j, x in enumerate(r)]
                for i, r in enumerate(v)]

    def objects(self, key: str) -> list[dict[str, Any]]:
        v = self.d.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            raise self._bad(key, "a list of objects", v)
        return list(v)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


_TEXTS = ("jaxpr", "stablehlo", "hlo_before", "hlo_after", "buffer_assignment", "live_range")


def report_fields(d: Any, path: str) -> dict[str, Any]:
    """The fields of an inspect report (schema ``hloscope.inspect/1``), checked."""
    f = Fields(d, path, what="report")
    schema = d.get("schema")
    if schema != INSPECT_SCHEMA:
        raise HloSourceError(f"not an hloscope inspect report (schema {schema!r}, expected "
                             f"{INSPECT_SCHEMA!r})", path=path,
                             hint="pass a file written by hloscope inspect --save or "
                                  "Report.save")
    out: dict[str, Any] = {"name": f.text("name", default=None)}
    for key in _TEXTS:
        out[key] = f.text(key)
    out["memory_analysis"] = f.numbers("memory_analysis")
    out["cost_analysis"] = f.numbers("cost_analysis")
    out["timings"] = f.numbers("timings", minimum=0) or {}
    out["shardings"] = f.obj("shardings") or {}
    out["device"] = f.obj("device") or {}
    out["versions"] = f.strings("versions")
    out["target"] = f.obj("target")
    out["donated"] = f.integers("donated")
    if not out["hlo_after"]:
        raise HloSourceError("the report holds no optimized HLO (field 'hlo_after' is empty)",
                             path=path, hint="re-create it with hloscope inspect --save")
    return out


def saved_report(path: str) -> dict[str, Any]:
    """The inspect report in a saved JSON file: an inspect report itself, or the one a
    benchmark result carries.  Anything else is refused saying what the file is."""
    d = load_json(path, what="saved report")
    schema = d.get("schema") if isinstance(d, dict) else None
    if schema == BENCH_SCHEMA:
        if not d.get("report"):
            raise HloSourceError("a benchmark result without the program's report (it was "
                                 "read from a CSV or measured elsewhere)", path=path,
                                 hint="hloscope plot reads it; hloscope bench -o writes "
                                      "results that carry their report")
        d = d["report"]
        if not isinstance(d, dict):
            raise HloSourceError("field 'report' is not an object", path=path)
        schema = INSPECT_SCHEMA  # report_fields refuses any other
    if schema == INSPECT_SCHEMA:
        fields = report_fields(d, path)
        checks = d.get("advice_checks")
        if checks is not None and not isinstance(checks, dict):
            raise HloSourceError("field 'advice_checks' is not an object", path=path,
                                 hint="re-create it with hloscope inspect --save")
        fields["advice_checks"] = checks
        return fields
    what = f"schema {schema!r}" if isinstance(schema, str) else "no hloscope schema"
    raise HloSourceError(f"a JSON file with {what}: not a report hloscope can read a "
                         "module from", path=path,
                         hint="pass HLO text, an XLA dump folder, or a report saved by "
                              "hloscope inspect --save")
