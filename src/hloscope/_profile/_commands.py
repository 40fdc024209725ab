"""Name the kernels a GPU ran inside XLA's command buffers.

XLA's GPU runtime records runs of consecutive thunks into a command buffer (a CUDA
graph) and launches it whole.  A profile's kernel events from such a launch carry the
buffer's name as their ``hlo_op`` (``command_buffer_7``), or no ``hlo_op`` at all (a
loop's body run as a graph); seen on an H100 with jax 0.11.2.  What names their
instruction is the kernel's own name:

- an instruction XLA compiled a kernel for (a fusion) gives the kernel its name made
  safe for PTX (`kernel_function_name`: ``loop_add_fusion.1`` runs ``loop_add_fusion_1``);
  two fusions that compute the same thing share one kernel, named after the first;
- a library call's kernels (cuBLAS's ``sm90_xmma_gemm_...``, cuDNN's, a sort's, the
  copies XLA runs before a sort: ``memcpy128``) name no instruction.

`name_events` names them by the order XLA runs them in: each launch's events, in time
order, walk the kernels of the computation they run in, in the module's schedule: a
kernel named by its own name is that kernel (or, when it comes again in the same
launch, the next kernel that computes the same thing); an unnamed one is the next kernel
whose own name no event has (a library call), staying on it for the library's further
kernels of other names.  What cannot be placed keeps the buffer's name and its kernel's,
and is reported as time not matched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._analysis._kernels import Kernel
from ._read import TraceEvent

__all__ = ["kernel_function_name", "name_events"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_$]")


def kernel_function_name(instruction: str) -> str:
    """The name XLA's GPU backend gives the kernel of an instruction (`SanitizeFunctionName`
    in openxla/xla ``xla/service/llvm_ir/llvm_util.cc``: each character outside
    ``[A-Za-z0-9_$]`` becomes ``_``; a leading digit gets a ``_`` before it)."""
    name = _UNSAFE.sub("_", instruction) or "__unnamed"
    return "_" + name if name[0].isdigit() else name


def _label(e: TraceEvent) -> str:
    k = e.kernel if len(e.kernel) <= 40 else e.kernel[:39] + "\u2026"
    return f"{e.op or 'unnamed'}: {k}"


def _same_work(a: Kernel, b: Kernel) -> bool:
    return (a.category, a.opcode, a.fusion_kind, a.fused, a.shape) == (
        b.category, b.opcode, b.fusion_kind, b.fused, b.shape)


class _Walk:
    """One computation's kernels in schedule order, walked by one launch's events."""

    def __init__(self, kernels: Sequence[Kernel], named: set[str]) -> None:
        self.kernels = kernels
        self.unnamed = [kernel_function_name(k.name) not in named for k in kernels]
        self.at = 0           # the next kernel a named event may be
        self.library = -1     # the library call the last unnamed events went to
        self.seen: set[str] = set()  # the kernel names that library call ran
        self.first = ""       # the launch's first kernel: seen again, a new launch began

    def place(self, e: TraceEvent, index: int | None) -> int | None:
        """The index of the kernel `e` ran (`index`: the kernel its own name names)."""
        ks = self.kernels
        first, self.first = not self.first, self.first or e.kernel
        if index is not None:
            if index < self.at:  # again in this launch: a twin that shares its kernel
                index = next((j for j in range(self.at, len(ks))
                              if _same_work(ks[j], ks[index])), None)
                if index is None:
                    return None
            self.at, self.library = index + 1, -1
            return index
        if self.library >= 0 and e.kernel not in self.seen and (first or
                                                                e.kernel != self.first):
            self.seen.add(e.kernel)
            return self.library
        j = next((j for j in range(max(self.at, self.library + 1), len(ks))
                  if self.unnamed[j]), None)
        if j is None:
            return None
        self.library, self.seen, self.at = j, {e.kernel}, j + 1
        return j


def name_events(events: list[TraceEvent], kernels: Sequence[Kernel]) -> list[TraceEvent]:
    """`events` with each command-buffer kernel's instruction as its `op` where it can be
    told (see the module docstring); the others keep ``buffer: kernel`` as their `op`."""
    if not any(e.kernel for e in events):
        return events
    by_name: dict[str, Kernel] = {}
    for k in kernels:
        by_name.setdefault(kernel_function_name(k.name), k)
    groups: dict[str, list[Kernel]] = {}
    for k in kernels:
        groups.setdefault(k.group, []).append(k)
    position = {k.name: i for g in groups.values() for i, k in enumerate(g)}
    named = {e.kernel for e in events if e.kernel} | {
        kernel_function_name(op) for op in {e.op for e in events if not e.kernel}}
    out = list(events)
    # One launch: a device's consecutive events of one buffer (or of none, for a loop's).
    order = sorted(range(len(events)), key=lambda i: (events[i].device, events[i].start))
    walk: _Walk | None = None
    key = None
    for at, i in enumerate(order):
        e = events[i]
        if not e.kernel:
            walk, key = None, None
            continue
        if (e.device, e.op) != key:
            walk, key = None, (e.device, e.op)
        k = by_name.get(e.kernel)
        if walk is None:
            group = k.group if k is not None else _first_group(events, order, at, by_name)
            if group is None:
                out[i] = e._replace(op=_label(e))
                continue
            walk = _Walk(groups[group], named)
        index = position[k.name] if k is not None and k.group == walk.kernels[0].group \
            else None
        j = walk.place(e, index)
        if j is None:  # past this launch's last kernel: the next launch of the same buffer
            walk = _Walk(walk.kernels, named)
            j = walk.place(e, index)
        out[i] = e._replace(op=walk.kernels[j].name, kernel="") if j is not None else \
            e._replace(op=_label(e))
    return out


def _first_group(events: list[TraceEvent], order: list[int], at: int,
                 by_name: dict[str, Kernel]) -> str | None:
    """The computation of the first event of this launch, from ``order[at]`` on, whose own
    name names a kernel (a launch that begins with a library call)."""
    first = events[order[at]]
    for i in order[at:at + 64]:
        e = events[i]
        if (e.device, e.op) != (first.device, first.op) or not e.kernel:
            break
        k = by_name.get(e.kernel)
        if k is not None:
            return k.group
    return None
