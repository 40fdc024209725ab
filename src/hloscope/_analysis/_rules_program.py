"""The advisor's rules about how the program is written: what an expert reads in its shape.

A Python loop unrolled into many copies of one body (HS117), a large array built from
indices with real work on every call (HS118), an embedding lookup written as a one-hot
matmul (HS119), host callbacks and transfers inside a loop (HS120), and work split into
many kernels too small to pay for their launch on a GPU (HS121).
"""

from __future__ import annotations

import re
from collections import Counter

from .._hlo._module import Computation, Instruction
from .._hlo._shape import Shape
from .._units import format_bytes
from ._advice_context import LAUNCH_SECONDS, AdviceContext, ev_inst, ev_kernel
from ._dataflow import control_flow_computations
from ._findings import Finding, FindingGroup, place_key
from ._kernels import Kernel, gemm_contracting
from ._shapes import elements

__all__ = ["by_structure", "constant_rebuilt", "host_transfer", "onehot_gather",
           "small_kernels", "unrolled_loop"]

# HS117: a loop unrolled fewer times, or saving fewer instructions, is not worth a line.
MIN_COPIES = 16
MIN_UNROLLED_INSTRUCTIONS = 1000
# ... and one of the body's largest instructions (this many looked at) must repeat MIN_COPIES
# times along one chain of dependencies.
_CHAIN_KEYS = 8
# HS118: arrays smaller than this are cheap to keep rebuilding (HS102's size); an
# elementwise build needs this many transcendentals per element to cost more than
# writing the array does (one sin or cos per element, a position encoding, does not),
# except where a matmul reads it (a kernel matrix or a basis: one per element will do).
MIN_REBUILT_BYTES = 512 * 1024
TRANSCENDENTALS = 2
# HS119: a one-hot over fewer classes than this is a mask, not a lookup.
MIN_VOCABULARY = 128
# HS120: what one synchronization with the host costs at least, assumed: the device
# waits while the host runs the callback (a Python function) and the data crosses PCIe.
HOST_SYNC_SECONDS = 10e-6
PCIE_BANDWIDTH = 25e9
# ... and a loop that stops for the host this many times per call is worth a line
# whatever its share of the time (each stop drains the device's queue and waits on
# Python: a pattern an expert removes, though a CPU's large kernels hide its cost).
MIN_HOST_SYNCS = 10
# HS121: a computation with fewer small kernels than this is not launch-bound in a way
# batching fixes (a kernel's launch: LAUNCH_SECONDS).
MIN_SMALL_KERNELS = 64

_NO_WORK = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast",
                      "after-all", "opt-barrier", "partition-id", "replica-id"})
_CALLBACKS = ("python_cpu_callback", "python_gpu_callback", "python_callback",
              "ffi_partitioned_python")
_INLINED = frozenset({"call", "fusion"})
_PASS = frozenset({"convert", "bitcast", "reshape", "copy", "transpose", "broadcast"})


# -- HS117 -----------------------------------------------------------------------------

def unrolled_loop(ctx: AdviceContext) -> list[Finding]:
    """Many copies of one body: instructions of the same opcode, shape and operands'
    opcodes and shapes repeated MIN_COPIES times or more (a Python loop over steps or
    layers that JAX traced into one copy per iteration), MIN_UNROLLED_INSTRUCTIONS or
    more beyond one copy, where the copies form a chain (each on what the one before
    made: a loop, not code per parameter or per array).  A fusion or a call counts with
    the instructions of the computation it runs (XLA compiles those too)."""
    weight = {c.name: len(c.instructions) for c in ctx.module.computations}
    # Each kind of instruction (its `_key`) numbered once, its figures in lists by number:
    # a key's tuple is hashed anew at every dictionary lookup.  The key is made of
    # numbers: each (opcode, shape) numbered once (`form`), each shape object looked up
    # by its id (equal shapes, of one number, are often one object).
    number: dict[tuple[object, ...], int] = {}
    count_of: list[int] = []
    size_of: list[int] = []
    first_of: list[Instruction] = []
    order: list[int] = []  # each instruction's number (-1: no work), for `_chained`
    shape_no: dict[Shape, int] = {}
    shape_of_id: dict[int, int] = {}
    forms: dict[tuple[str, int], int] = {}
    comps = control_flow_computations(ctx.module)
    for comp in comps:
        form: dict[str, int] = {}  # each instruction's form, by name
        for inst in comp.instructions:
            shape = inst.shape
            n = shape_of_id.get(id(shape))
            if n is None:
                n = shape_of_id[id(shape)] = shape_no.setdefault(shape, len(shape_no))
            form[inst.name] = forms.setdefault((inst.opcode, n), len(forms))
        for inst in comp.instructions:
            if inst.opcode in _NO_WORK:
                order.append(-1)
                continue
            j = number.setdefault((form[inst.name], *map(form.__getitem__, inst.operand_names)),
                                  len(count_of))
            if j == len(count_of):
                count_of.append(0)
                size_of.append(0)
                first_of.append(inst)
            order.append(j)
            count_of[j] += 1
            size_of[j] += 1 + (sum(weight.get(c, 0) for c in inst.called_computation_names)
                               if inst.opcode in _INLINED else 0)
    keys = list(number)
    counts = dict(zip(keys, count_of))
    size = dict(zip(keys, size_of))
    first = dict(zip(keys, first_of))
    repeated = [k for k, n in counts.items() if n >= MIN_COPIES]
    if not repeated:
        return []
    # A loop's copies run one after another, each on what the one before made: copies
    # that do not depend on each other (an update per parameter, a list comprehension
    # over distinct arrays) are per-item code, for jax.vmap or stacking (HS121 where the
    # kernels are small), not a loop for lax.scan.
    biggest = sorted(repeated, key=lambda k: (-size[k], -counts[k]))[:_CHAIN_KEYS]
    if not _chained(comps, [number[k] for k in biggest], order, MIN_COPIES):
        return []
    body = repeated
    # A body's instruction appears once or a few times per copy (a step that evaluates
    # the force twice): counting the least repeated one as the copies keeps the saving
    # on the low side.
    copies = min(counts[k] for k in body)
    most = max(counts[k] for k in body)
    held = sum(size[k] for k in body)
    saved = held - held // copies
    if saved < MIN_UNROLLED_INSTRUCTIONS:
        return []
    lines = sorted({str(loc) for k in body if (loc := first[k].source) is not None})
    if _layers_gathered(ctx, lines):
        return []
    top = first[max(body, key=lambda k: (size[k], _comparable(_key(first[k]))))]
    kernels = (sum(counts[k] for k in body) if ctx.module.is_scheduled else 0)
    where = (f", from {len(lines)} source line(s): " + ", ".join(lines[:3])
             + (", ..." if len(lines) > 3 else "")) if lines else ""
    return [Finding(
        "HS117", "a Python loop is unrolled into many copies of one body",
        # (Calls counted with their computation's instructions, once per call: more
        # than the module's own count in a module JAX lowered, which calls helpers.)
        f"{held:,} of the program's {max(held, ctx.module.instruction_count):,} instructions"
        + (f" ({kernels:,} of its kernels)" if kernels else "")
        + f" are copies of {len(body)} instruction(s), each repeated "
        + (f"{copies} times" if copies == most else f"{copies} to {most} times")
        + f"{where} (a loop traced once per iteration): XLA compiles and optimizes every "
        "copy, so compile time and program size grow with the loop's length",
        "write the loop as lax.scan over the steps or layers (stack the per-layer weights "
        "into one array: jax.tree.map(lambda *w: jnp.stack(w), *layers)), or "
        "lax.fori_loop for a loop over steps; lax.scan(..., unroll=k) keeps a little "
        "unrolling where it helps",
        (ev_inst(top, "instruction"),), ctx.saving(instructions=saved),
        place_key(top.metadata.op_name, str(top.source or ""), "unrolled"))]


def _layers_gathered(ctx: AdviceContext, lines: list[str]) -> bool:
    """Whether the unrolled copies are layers whose gathered weights HS116 reports held
    together (FSDP without a scan): its fix is the same scan over the layers, so the
    root cause is said once, there."""
    said = getattr(ctx, "found", {}).get("HS116", ())
    return any(e.source in lines for f in said for e in f.evidence)


def _key(inst: Instruction) -> tuple[object, ...]:
    return (inst.opcode, inst.shape, *((o.opcode, o.shape) for o in inst.operands))


def _chained(comps: list[Computation], kinds: list[int], order: list[int], copies: int) -> bool:
    """Whether some kind of instruction in `kinds` (numbers in `order`: each instruction's,
    -1 for one that does no work, in the order of `comps`, the computations of the control
    flow) has `copies` instructions or more on one path of data dependencies in one
    computation: a loop's copies forming a chain.  It stops at the first such path (most
    unrolled loops show one within their first copies)."""
    index = {kind: j for j, kind in enumerate(kinds)}
    zero = (0,) * len(kinds)
    each = iter(order)
    for comp in comps:
        depth: dict[str, tuple[int, ...]] = {}
        for inst in comp.instructions:
            ins = [d for o in inst.operand_names if (d := depth.get(o)) is not None]
            d = (zero if not ins else ins[0] if len(ins) == 1
                 else tuple(map(max, *ins)))
            j = index.get(next(each))
            if j is not None:
                d = (*d[:j], d[j] + 1, *d[j + 1:])
                if d[j] >= copies:
                    return True
            depth[inst.name] = d
    return False


def _comparable(key: tuple[object, ...]) -> tuple[object, ...]:
    """`key` with each shape as its text: shapes have no order, and two keys of the same
    size differ in their shapes (arrays of several sizes made alike)."""
    return tuple(_comparable(x) if isinstance(x, tuple) else
                 x.to_text() if isinstance(x, Shape) else x for x in key)


# -- HS118 -----------------------------------------------------------------------------

def constant_rebuilt(ctx: AdviceContext) -> list[Finding]:
    """A large array computed from indices and constants alone (no argument, no loop
    state) by kernels that do real work (a matmul, a reduction, an FFT, or TRANSCENDENTALS
    or more per element, one where a matmul reads it): the program rebuilds it on every
    call, where computing it once outside and passing it in costs nothing per call.
    Cheap ones are HS104's; a broadcast constant, a one-hot or a mask is no build."""
    # (Only kernels that read nothing but constants and such kernels can be.)
    free: dict[str, bool] = {}
    for k in ctx.constant_fed:
        ins = ctx.edges_to.get(k.name, ())
        free[k.name] = k.category not in ("collective", "host transfer") \
            and "callback" not in k.target and all(e.src_kind == "constant" or (e.src_kind == "kernel" and free.get(e.src))
                    for e in ins)
    out = []
    claimed: set[str] = set()
    for k in ctx.constant_fed:
        if not free[k.name]:
            continue
        readers = ctx.edges_from.get(k.name, ())
        if not any(e.dst == "result" or not free.get(e.dst, False) for e in readers):
            continue  # not the last step of the build
        if k.bytes_out < MIN_REBUILT_BYTES:
            # A small result of a large build: a kernel matrix built from constants and
            # factorized or multiplied by within the build (a Gaussian process's weights
            # solved on every call) is rebuilt all the same.
            mats = [x for x in _free_ancestors(ctx, k, free) if x.name not in claimed
                    and x.bytes_out >= MIN_REBUILT_BYTES
                    and free.get(getattr(_multiplier(ctx, x), "name", ""), False)]
            if not mats:
                continue
            k = max(mats, key=lambda x: x.bytes_out)
        build = [x for x in _free_ancestors(ctx, k, free) if x.name not in claimed]
        work = [x for x in build if _does_work(x)]
        inst = ctx.inst(k)
        n = max(1, elements(inst.shape)) if inst is not None else 1
        if _splat(build) or _two_valued(inst) or _banded(inst):
            # A broadcast constant, a one-hot, a mask, a band: nothing worth keeping.
            continue
        # A matrix the program multiplies by (a kernel matrix, a basis) is worth building
        # once from one transcendental per element up (counting those the matmul's
        # kernel applies to it as it reads it: XLA fuses an elementwise prologue into a
        # GEMM); a table added to activations (a position encoding) costs about what
        # writing it does.
        reader = _multiplier(ctx, k)
        fused_in = reader.transcendentals if reader and reader.transcendentals >= n else 0
        per_element = (sum(x.transcendentals for x in build) + fused_in) / n
        needed = 1 if reader else TRANSCENDENTALS
        if not work and per_element < needed and not _matrix_from_indices(ctx, build, reader):
            continue
        work = work or [x for x in build if x.transcendentals] or build
        claimed.update(x.name for x in build)
        runs = ctx.runs(k.group)
        seconds = sum(x.roofline_seconds(ctx.device, x.element_type) for x in build) * runs
        ops = sorted({op for x in work for op, _ in x.fused if op in _WORK | _TRANSCENDENTAL}
                     | ({x.opcode for x in work} & (_WORK | _TRANSCENDENTAL))) or sorted(
            {op for x in build for op, _ in x.fused if op not in _PLAIN})
        out.append(Finding(
            "HS118", "a large array is rebuilt from constants on every call",
            f"{k.name} builds {format_bytes(k.bytes_out)} ({k.shape}) from indices and "
            f"constants alone, with real work ("
            + ("" if fused_in and not ops else f"{', '.join(ops) or k.opcode}; ")
            + f"{len(build)} kernel(s)"
            + (f"; {', '.join(sorted({op for op, _ in reader.fused if op in _TRANSCENDENTAL}))}"
               f" applied by {reader.name} as it reads it" if reader and fused_in else "")
            + "), on every call of the program"
            + (f" ({runs} times per call: it is inside a loop)" if runs > 1 else ""),
            "compute it once outside jit (a DFT matrix, twiddle factors, a basis) and pass "
            "it as an argument, or close over a device array computed once",
            tuple(ev_kernel(x) for x in [k] + [w for w in work if w is not k][:3]),
            ctx.saving(kernels=len(build) * runs, seconds=seconds),
            place_key(k.op_name, k.source, k.shape)))
    return out


_WORK = frozenset({"dot", "convolution", "reduce", "fft"})
_TRANSCENDENTAL = frozenset({"exponential", "log", "sine", "cosine", "tan", "tanh", "power",
                             "atan2", "logistic", "erf", "exponential-minus-one",
                             "log-plus-one", "cbrt", "sqrt", "rsqrt"})


def _multiplier(ctx: AdviceContext, k: Kernel) -> Kernel | None:
    """The matmul, convolution, FFT or linear-algebra solver (a Cholesky factorization,
    a triangular solve) that reads `k`'s array, if one does."""
    for e in ctx.edges_from.get(k.name, ()):
        r = ctx.kernel(e.dst) if e.dst != "result" else None
        if r is not None and (r.category in ("fft", "matmul", "convolution") or any(
                op in ("dot", "convolution", "fft") for op, _ in r.fused)
                or ((i := ctx.inst(r)) is not None and _solver(i))):
            return r
    return None


_SOLVER_RE = re.compile(r"lapack|cusolver|hipsolver|solver|trsm|getrf|potrf|geqrf|syevd|gesvd",
                        re.IGNORECASE)


def _solver(inst: Instruction) -> bool:
    """Whether `inst` (seen through bitcasts and get-tuple-elements) is a linear-algebra
    library call whose operands' layouts the library fixes (column-major LAPACK)."""
    while inst.opcode in ("bitcast", "get-tuple-element") and inst.operands:
        inst = inst.operands[0]
    return inst.opcode in ("triangular-solve", "cholesky") or (
        inst.opcode == "custom-call" and bool(_SOLVER_RE.search(inst.custom_call_target)))


_PLAIN = frozenset({"iota", "broadcast", "constant", "convert", "bitcast", "copy", "reshape",
                    "parameter"})


def _matrix_from_indices(ctx: AdviceContext, build: list[Kernel], reader: Kernel | None) -> bool:
    """Whether a matmul (or convolution, FFT) multiplies by an array the build computes
    from its indices (a Hadamard matrix from popcounts, a Toeplitz or circulant matrix
    from index differences): a fixed matrix, whatever the per-element cost.  Not a bare
    iota, nor one the reader compares with something (a one-hot: HS119's)."""
    if reader is None or any(op == "compare" for op, _ in reader.fused):
        return False
    if not any(op not in _PLAIN for x in build for op, _ in x.fused):
        return False
    return _multiplied(ctx, reader, build[0])


def _multiplied(ctx: AdviceContext, reader: Kernel, k: Kernel) -> bool:
    """Whether the matmul in `reader`'s kernel multiplies by `k`'s array (its operand,
    through elementwise work), not only adds it to the product (a bias the GEMM's
    epilogue applies: HS104's, to build inside the layer)."""
    r, a = ctx.inst(reader), ctx.inst(k)
    if r is None or a is None:
        return False
    mine = [n for n, o in enumerate(r.operands) if _moved_from(o) is a]
    if r.opcode != "fusion" or not r.called_computations:
        return bool(mine)
    params = [i for i in r.called_computations[0].instructions
              if i.opcode == "parameter" and i.parameter_number in mine]
    stack, seen = list(params), set()
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        if i.opcode in ("dot", "convolution"):
            return True
        stack.extend(i.users)
    return False


def _moved_from(inst: Instruction) -> Instruction:
    while inst.opcode in ("bitcast", "copy", "get-tuple-element") and inst.operands:
        inst = inst.operands[0]
    return inst


def _splat(build: list[Kernel]) -> bool:
    """Whether the build only broadcasts constants (no iota: every element alike): XLA
    splats it into its readers' memory for the cost of writing it, whatever a reader then
    computes from it (a scalar a fused matmul's epilogue scales by)."""
    splat = _PLAIN - {"iota"}
    return all(x.opcode in splat
               or (x.opcode == "fusion" and all(op in splat for op, _ in x.fused))
               for x in build)


def _two_valued(inst: Instruction | None) -> bool:
    """Whether the array holds one of two constants chosen by comparing indices (a one-hot,
    a triangular or band mask): one compare per element, as cheap to build as to read;
    where a matmul multiplies by it the expert's fix is a gather (HS119) or a cumulative
    sum, not passing the mask in."""
    if inst is None:
        return False
    if inst.opcode == "fusion" and inst.called_computations:
        inst = inst.called_computations[0].root
    while inst.opcode in _PASS and inst.operands:
        inst = inst.operands[0]
    if inst.opcode == "compare":
        return True
    return inst.opcode == "select" and all(
        _moved_to_constant(o) for o in inst.operands[1:])


_ARITHMETIC = frozenset({"add", "subtract", "multiply", "divide", "negate", "maximum",
                         "minimum"})
_AFFINE = frozenset({"add", "subtract", "negate", "abs"})


def _banded(inst: Instruction | None) -> bool:
    """Whether every element of the array is one of a few constants chosen by where it
    lies relative to the diagonals: constants selected (or multiplied in) by comparing
    affine functions of the indices (i == j, |i - j| == 1, i >= j), and arithmetic of
    such arrays: a banded, triangular or diagonal matrix.  One compare per element
    builds it, about what reading it costs; the expert's fix is a structured operation
    (a banded or tridiagonal solve, a cumsum), not passing the dense matrix in.  (A
    Hadamard matrix compares popcounts of the indices: not affine, a real build.)"""
    if inst is None or inst.opcode != "fusion" or not inst.called_computations:
        return False
    return _piecewise(inst.called_computations[0].root, 0)


def _piecewise(inst: Instruction, depth: int) -> bool:
    while inst.opcode in _PASS and inst.operands:
        inst = inst.operands[0]
    if depth > 12:
        return False
    if inst.opcode == "constant":
        return True
    if inst.opcode in ("compare", "and", "or", "not"):  # 0 or 1 by where it lies
        return _predicate(inst, depth)
    if inst.opcode == "select":
        return _predicate(inst.operands[0], depth + 1) and all(
            _piecewise(o, depth + 1) for o in inst.operands[1:])
    if inst.opcode in _ARITHMETIC:
        return all(_piecewise(o, depth + 1) for o in inst.operands)
    return False


def _predicate(inst: Instruction, depth: int) -> bool:
    while inst.opcode in _PASS and inst.operands:
        inst = inst.operands[0]
    if inst.opcode == "compare":
        return all(_affine(o, depth + 1) for o in inst.operands)
    return inst.opcode in ("and", "or", "not") and depth < 12 and all(
        _predicate(o, depth + 1) for o in inst.operands)


def _affine(inst: Instruction, depth: int) -> bool:
    while inst.opcode in _PASS and inst.operands:
        inst = inst.operands[0]
    if inst.opcode in ("iota", "constant"):
        return True
    if depth > 12:
        return False
    if inst.opcode in _AFFINE:
        return all(_affine(o, depth + 1) for o in inst.operands)
    if inst.opcode == "multiply":  # by a constant only
        return sum(not _moved_to_constant(o) for o in inst.operands) <= 1 and all(
            _affine(o, depth + 1) for o in inst.operands)
    return False


def _moved_to_constant(inst: Instruction) -> bool:
    while inst.opcode in _PASS and inst.operands:
        inst = inst.operands[0]
    return inst.opcode == "constant"


def _does_work(k: Kernel) -> bool:
    """A matmul, a convolution, an FFT or a reduction: more than elementwise."""
    return k.opcode in _WORK or k.category in ("fft", "matmul", "convolution") \
        or any(op in _WORK for op, _ in k.fused)


def _free_ancestors(ctx: AdviceContext, k: Kernel, free: dict[str, bool]) -> list[Kernel]:
    seen = {k.name}
    order = [k]
    stack = [k]
    while stack:
        cur = stack.pop()
        for e in ctx.edges_to.get(cur.name, ()):
            if e.src_kind == "kernel" and e.src not in seen and free.get(e.src):
                p = ctx.kernel(e.src)
                if p is not None:
                    seen.add(e.src)
                    order.append(p)
                    stack.append(p)
    return order


def _work_kind(k: Kernel) -> tuple[object, ...]:
    return (tuple(op for op, _ in k.fused) or (k.opcode,), k.op_name, k.source)


def _batchable(ctx: AdviceContext, kernels: list[Kernel], small: list[Kernel]) -> int:
    """How many of the `small` kernels batching could remove: per kind of work, its count
    less its longest chain of dependencies (the launches left when every independent
    copy is batched), for the _CHAIN_KEYS commonest kinds; any other kind's copies are
    taken as independent."""
    counts = Counter(_work_kind(k) for k in small)
    top = [kind for kind, n in counts.most_common(_CHAIN_KEYS) if n > 1]
    index = {kind: j for j, kind in enumerate(top)}
    is_small = {k.name for k in small}
    zero = (0,) * len(top)
    longest = list(zero)
    depth: dict[str, tuple[int, ...]] = {}
    for k in kernels:
        ins = [d for e in ctx.edges_to.get(k.name, ())
               if e.src_kind == "kernel" and (d := depth.get(e.src)) is not None]
        d = zero if not ins else ins[0] if len(ins) == 1 else tuple(map(max, *ins))
        j = index.get(_work_kind(k)) if k.name in is_small else None
        if j is not None:
            d = (*d[:j], d[j] + 1, *d[j + 1:])
            longest[j] = max(longest[j], d[j])
        depth[k.name] = d
    return sum(n - (longest[index[kind]] if kind in index else 1)
               for kind, n in counts.items())


# -- HS119 -----------------------------------------------------------------------------

def onehot_gather(ctx: AdviceContext) -> list[Finding]:
    """A matmul that contracts a one-hot array (``compare(ids, iota)``, converted to a
    float) over its classes: an embedding lookup written as ``one_hot(ids, V) @ table``.
    ``table[ids]`` reads the rows it needs; the matmul reads every row and multiplies
    by zeros, and the one-hot (or its iota) is written to memory."""
    out = []
    insts = [i for c in ctx.module.computations for i in c.instructions
             if i.opcode in ("dot", "compare") or _matmul_convolution(i) or _gemm_call(i)]
    if not any(i.opcode == "compare" and len(i.shape.dims) >= 2
               and "direction=EQ" in i.attr_text for i in insts):
        return []  # no one-hot anywhere
    dots = [i for i in insts if i.opcode != "compare"]
    for dot in dots:
        hit = _onehot_operand(ctx, dot)
        k = _kernel_of(ctx, dot) if hit is not None else None
        if hit is None or k is None:
            continue
        side, vocab, stored = hit
        at_peak = {v.inst.name for v in ctx.lr.peak_values}
        other = dot.operands[1 - side]
        runs = ctx.runs(k.group)
        stored_bytes = stored.shape.total_byte_size if stored is not None else 0
        rows = dot.shape.total_byte_size  # a gather reads and writes the rows it needs
        maker = ctx.kernel(stored.name) if stored is not None else None
        spent = sum(x.roofline_seconds(ctx.device, x.element_type)
                    for x in (k, maker) if x is not None)
        # What the matmul and the one-hot's kernel take beyond a gather, less the
        # one-hot's write and read (counted as traffic).
        seconds = max(0.0, spent - (2 * rows + 2 * stored_bytes) / ctx.device.bandwidth)
        out.append(Finding(
            "HS119", "an embedding lookup is written as a one-hot matmul",
            f"{k.name} multiplies a one-hot array over {vocab:,} classes by "
            f"{other.shape} ({k.flops / 1e9:,.1f} GFLOP for {format_bytes(rows)} of rows)"
            + (f"; the one-hot's {stored.opcode} {stored.name} ({stored.shape}, "
               f"{format_bytes(stored_bytes)}) is written to memory for it"
               if stored is not None else ""),
            "look the rows up instead: table[ids] (or jnp.take(table, ids, axis=0)); "
            "its gradient is a scatter-add of the rows, not a matmul",
            (ev_kernel(k),) + ((ev_inst(stored, "array"),) if stored is not None else ()),
            ctx.saving(peak=stored_bytes if stored is not None and stored.name in at_peak
                       else 0, traffic=2 * stored_bytes * runs, seconds=seconds * runs),
            place_key(dot.metadata.op_name, str(dot.source or ""), str(dot.shape))))
    return out


def _kernel_of(ctx: AdviceContext, inst: Instruction) -> Kernel | None:
    """The kernel that runs `inst` (itself, or the fusion it is fused into)."""
    for _ in range(8):
        k = ctx.kernel(inst.name)
        if k is not None and k.group == inst.computation.name:
            return k
        callers = ctx.module.callers(inst.computation)
        if len(callers) != 1:
            return None
        inst = callers[0]
    return None


def _onehot_operand(ctx: AdviceContext,
                    dot: Instruction) -> tuple[int, int, Instruction | None] | None:
    """(operand number, classes, the array stored for it) where an operand of `dot` is a
    one-hot contracted over its classes."""
    for side, key in ((0, "lhs_contracting_dims"), (1, "rhs_contracting_dims")):
        dims = (_contracting(dot, side) if dot.opcode == "convolution" else
                gemm_contracting(dot, side) or () if dot.opcode == "custom-call" else
                _ints(dot.attr(key)))
        if len(dims) != 1 or side >= len(dot.operand_names):
            continue
        vocab = dot.operands[side].shape.dims[dims[0]]
        if vocab < MIN_VOCABULARY:
            continue
        stored: list[Instruction] = []
        cmp = _trace(ctx, dot.operands[side], stored, through=_PASS - {"broadcast"})
        if cmp.opcode != "compare" or cmp.attr("direction") != "EQ":
            continue
        ends = [_trace(ctx, o, stored, through=_PASS) for o in cmp.operands]
        iotas = [e for e in ends if e.opcode == "iota"]
        if len(iotas) != 1:
            continue
        classes = iotas[0].shape.dims[_iota_dim(iotas[0])]
        if classes % vocab:  # contracted over the classes (or a split of them: split-K)
            continue
        return side, classes, (stored[0] if stored else None)
    return None


def _gemm_call(inst: Instruction) -> bool:
    """XLA:GPU's cuBLAS GEMM custom-call (``__cublas$gemm``, ``__cublas$lt$matmul``): a
    matmul the GPU compiler gave to cuBLAS (a V100's, where no Triton fusion holds it)."""
    t = inst.custom_call_target.lower() if inst.opcode == "custom-call" else ""
    return t.startswith("__cublas") and ("gemm" in t or "matmul" in t)


def _matmul_convolution(inst: Instruction) -> bool:
    """A convolution with a window of one element everywhere: a matmul (what XLA's TPU
    backend makes of a dot: ``dim_labels=0bf_io0->0bf``, ``window={size=1}``)."""
    if inst.opcode != "convolution" or "->" not in (inst.attr("dim_labels") or ""):
        return False
    window = inst.attr("window") or ""
    sizes = re.search(r"size=([0-9x]+)", window)
    return sizes is None or all(n == "1" for n in sizes.group(1).split("x"))


def _contracting(conv: Instruction, side: int) -> tuple[int, ...]:
    """The dimension a matmul-convolution contracts on operand `side`: the input's
    feature dimension (``f``), the kernel's input feature dimension (``i``)."""
    labels = (conv.attr("dim_labels") or "").split("->")[0].split("_")
    if len(labels) != 2:
        return ()
    d = labels[side].find("f" if side == 0 else "i")
    return (d,) if d >= 0 else ()


def _trace(ctx: AdviceContext, inst: Instruction, stored: list[Instruction],
           through: frozenset[str]) -> Instruction:
    """Where `inst`'s value comes from, through the opcodes `through`, into fusions and
    out of fused computations' parameters; `stored` gets the first array held in memory
    on the way (a fusion's output or operand)."""
    for _ in range(64):
        if inst.opcode in through and inst.operand_names:
            inst = inst.operands[0]
        elif inst.opcode == "parameter" and inst.computation is not None:
            callers = ctx.module.callers(inst.computation)
            if len(callers) != 1 or callers[0].opcode != "fusion":
                return inst
            inst = callers[0].operands[inst.parameter_number]
            if not stored and inst.opcode not in _NO_WORK:
                stored.append(inst)
        elif inst.opcode == "fusion" and inst.called_computations:
            if not stored and ctx.kernel(inst.name) is not None:  # not one fused inside
                stored.append(inst)
            inst = inst.called_computations[0].root
        else:
            return inst
    return inst


def _ints(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(x) for x in text.strip("{}").split(",") if x.strip())
    except ValueError:
        return ()


def _iota_dim(inst: Instruction) -> int:
    dims = _ints(inst.attr("iota_dimension"))
    return dims[0] if dims else 0


# -- HS120 -----------------------------------------------------------------------------

def host_transfer(ctx: AdviceContext) -> list[Finding]:
    """A host callback (``jax.debug.print``, ``pure_callback``, ``io_callback``), an
    infeed or outfeed, or a send/recv to the host inside a loop: each iteration stops
    for the host."""
    comps = control_flow_computations(ctx.module)
    looped = _loop_computations(ctx, comps)
    out = []
    for comp in comps:
        if comp.name not in looped:
            continue
        for inst in comp.instructions:
            what = _host_op(inst)
            if not what:
                continue
            runs = ctx.runs(comp.name)
            moved = sum(o.shape.total_byte_size for o in inst.operands) \
                + (inst.shape.total_byte_size if inst.opcode in ("infeed", "recv") else 0)
            syncs = f"{runs:,} times per call" if runs > 1 else "once per iteration"
            out.append(Finding(
                "HS120", "the program stops for the host inside a loop",
                f"{inst.name} is {what} inside a loop: it runs {syncs}, and each time "
                f"the device waits for the host ({format_bytes(moved)} each way at most)",
                "collect what you want to see in the loop's outputs (lax.scan's ys) and "
                "print or transfer it once after the loop, or remove the debug print",
                (ev_inst(inst, "host transfer"),),
                ctx.saving(kernels=runs,
                           seconds=runs * (HOST_SYNC_SECONDS + moved / PCIE_BANDWIDTH)),
                place_key(inst.metadata.op_name, str(inst.source or ""), what)))
    return out


def by_structure(group: FindingGroup) -> bool:
    """Whether `group` is worth a line whatever its share: host round trips in every step
    of a loop that runs MIN_HOST_SYNCS times or more per call."""
    return group.rule == "HS120" and group.saving.kernels >= MIN_HOST_SYNCS


def _host_op(inst: Instruction) -> str:
    if inst.opcode == "custom-call":
        target = inst.custom_call_target
        if any(c in target for c in _CALLBACKS):
            return f"a host callback ({target})"
        return ""
    if inst.opcode in ("infeed", "outfeed"):
        return f"an {inst.opcode}"
    if inst.opcode in ("send", "recv") and "is_host_transfer=true" in inst.attr_text:
        return f"a {inst.opcode} to the host"
    return ""


def _loop_computations(ctx: AdviceContext, comps: list[Computation]) -> set[str]:
    """Computations that run inside a while loop (its body or condition, or what they
    call); `comps`: the module's control-flow computations."""
    out: set[str] = set()
    stack: list[str] = []
    for comp in comps:
        for inst in comp.instructions:
            if inst.opcode == "while":
                stack.extend(inst.called_computation_names)
    while stack:
        name = stack.pop()
        if name in out:
            continue
        out.add(name)
        for inst in ctx.module.computation(name).instructions:
            if inst.opcode != "fusion":
                stack.extend(inst.called_computation_names)
    return out


# -- HS121 -----------------------------------------------------------------------------

def small_kernels(ctx: AdviceContext) -> list[Finding]:
    """On a GPU, a computation of MIN_SMALL_KERNELS or more kernels each of which takes
    less than its launch (LAUNCH_SECONDS) on the roofline: launching them costs more
    than their work.  Batched (one kernel per kind of work), the launches go."""
    launch = LAUNCH_SECONDS.get(ctx.platform)
    if launch is None:
        return []
    out = []
    for g in [ctx.module.entry.name] + [g.name for g in ctx.graph.groups]:
        kernels = [k for k in ctx.graph.kernels_in(g) if k.category != "collective"]
        small = [k for k in kernels if k.roofline_seconds(ctx.device, k.element_type) < launch]
        if len(small) < MIN_SMALL_KERNELS:
            continue
        work = sum(k.roofline_seconds(ctx.device, k.element_type) for k in small)
        if len(small) * launch <= 2 * work:
            continue
        kinds = {_work_kind(k) for k in small}
        # Kernels of one kind batch into one only where none waits for another's result:
        # copies along one chain of dependencies (the steps of an iterative solver) stay
        # one launch per step however they are written.
        saved = _batchable(ctx, kernels, small)
        if saved < MIN_SMALL_KERNELS // 2:
            continue  # each does different work, or each waits for the one before
        runs = ctx.runs(g)
        biggest = max(k.bytes_accessed for k in small)
        first = small[0]
        out.append(Finding(
            "HS121", "work is split into many kernels too small to pay for their launch",
            f"{'the entry' if g == ctx.module.entry.name else g} launches {len(small)} "
            f"kernels that each move at most {format_bytes(biggest)} and take "
            f"{work / len(small) * 1e9:,.1f} ns on average on the roofline, against about "
            f"{launch * 1e6:.0f} us to launch each (assumed); {len(kinds)} kinds of work "
            "among them",
            "batch the work: stack the arrays and apply one operation (jax.vmap over the "
            "list, jnp.stack/concatenate, or one array instead of a Python list of "
            "small ones), so XLA launches one kernel per kind of work",
            tuple(ev_kernel(k) for k in small[:4]),
            ctx.saving(kernels=saved * runs, seconds=saved * launch * runs),
            place_key(first.op_name, first.source, g)))
    return out
