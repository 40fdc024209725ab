"""`hloscope.inspect(fn, *args)` with its advice checked: the report of `_jax._inspect`
whose advisor groups were checked by compiling their fixes (`check_advice`)."""

from __future__ import annotations

from typing import Any

from .._jax import _inspect as _base
from ._compare import check_advice
from ._program import Program

__all__ = ["inspect", "show"]


def inspect(fn: Any, *args: Any, check: bool = True,
            static_argnums: int | tuple[int, ...] = (),
            static_argnames: str | tuple[str, ...] = (),
            compiler_options: dict[str, Any] | None = None, target: str | None = None,
            mesh: str | dict[str, int] | None = None,
            shard: dict[int, Any] | list[Any] | None = None, **kwargs: Any) -> Any:
    program = Program(fn, args, kwargs, static_argnums, static_argnames, compiler_options,
                      target, mesh, shard)
    report = program.inspect()
    report._cache["program"] = program  # noqa: SLF001  (for lint's own threshold)
    if check and type(fn).__name__ != "Lowered":  # a Lowered has no function to change
        # Checked when the advice is first read: a caller after the module alone compiles
        # nothing more.
        report._cache["check"] = lambda advice: _checked(report, program, advice)  # noqa: SLF001
    return report


def _checked(report: Any, program: Program, advice: Any) -> Any:
    """`check_advice`; where checking itself fails, the advice as estimated, saying so."""
    try:
        return check_advice(report, program, advice)
    except Exception as e:  # noqa: BLE001  (the advice stands without its checks)
        from .._analysis._advisor import Advice

        return Advice(advice.groups, advice.device, advice.optimized, advice.quiet,
                      advice.notes + (f"the savings could not be checked ({type(e).__name__}: "
                                      f"{str(e)[:160]}): they are estimated",),
                      advice.checked_out, explained=advice.explained)


inspect.__doc__ = (_base.inspect.__doc__ or "") + """
    `check` (default True): the advisor's findings are checked where a fix is mechanical
    (donation, XLA flags, remat of scan bodies, precision of upcast matmuls): the fixed
    function is compiled the same way and each group says XLA's figures for both
    compiles (``checked: XLA's footprint 8.38 MiB -> 5.75 MiB``), or ``estimated``; at
    most one extra compile per kind of finding, when `report.advice` is first read
    (docs/advisor.md).
    """


def show(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """`inspect` (its advice checked) and display the report (see `Report.show`)."""
    report = inspect(fn, *args, **kwargs)
    report.show()
    return report
