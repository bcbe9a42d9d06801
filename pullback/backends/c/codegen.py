"""Graph IR to C: one C function per IR function, control flow as C control flow.

Values: a 0-d tensor is a C scalar; any other tensor is a buffer (``pb_alloc``) in
row-major order, or a view sharing one (a reshape, a loop's pass-through carry); a stack
is a ``pb_tape *``.  Memory is planned per block from liveness: the block that makes a
buffer owns it and frees it (back to the runtime's pool) right after its last read, a
read inside a nested block counting as one at its equation; a result moves out to the
consumer.  A pointwise equation (or fused run), a ``dynamic_update_slice`` or a scatter
whose operand dies there writes its result into that operand's buffer.  A cond's branches
and a loop's carried variables take over operands that die at the cond or loop, so a
loop body updates its carried arrays in place.  The entry's top-level buffers share one
arena per call, at offsets placed by their lives.  Errors (failed checks, bad indices)
record what to raise in the context and jump to the function's ``fail`` label; the
caller frees every allocation.

Loops: pointwise equations over one shape and full reductions of their values run as
one loop, placed at the first of them (a run, ``_runs``), each value a local stored only
when read after the loop.  A pointwise value is computed in each loop that reads it
instead of stored when that costs less (``_fusible``); its operands then live until the
last of those loops.

Ops without C code yet raise ``Unsupported``, and the caller runs the function on the
interpreter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ...ir.core import Atom, Block, Eqn, Func, Lit, Module, Var
from ...ir.rewrite import free_vars
from ...ir.types import DType, StackType, TensorType
from .codegen_more import MoreOps


class Unsupported(Exception):
    """An op or value the C backend cannot compile yet."""


CTYPES = {"bool": "uint8_t", "int32": "int32_t", "int64": "int64_t", "float32": "float",
          "float64": "double"}


def ctype(dt: DType) -> str:
    return CTYPES[dt.name]


def c_literal(value, dt: DType) -> str:
    """A C expression of exactly ``value`` in dtype ``dt``."""
    v = np.asarray(value).item()
    if dt.is_bool:
        return "1" if v else "0"
    if dt.is_int:
        if dt.name == "int64" and v == -(2 ** 63):
            return "INT64_MIN"
        return f"INT64_C({v})" if dt.name == "int64" else f"((int32_t)({v}))"
    f = float(v)
    if math.isnan(f):
        text = "NAN"
    elif math.isinf(f):
        text = "INFINITY" if f > 0 else "(-INFINITY)"
    else:
        text = f"({f.hex()})"
    return f"((float){text})" if dt.name == "float32" else text


def _math(name: str, dt: DType) -> str:
    return f"{name}f" if dt.name == "float32" else name


def _unary(op: str, x: str, dt: DType) -> str:
    f = dt.is_float
    table = {
        "neg": f"(-({x}))",
        "abs": f"{_math('fabs', dt)}({x})" if f else f"({x} < 0 ? -{x} : {x})",
        "sign": f"(({ctype(dt)})pb_sign({x}))" if f else f"(({x} > 0) - ({x} < 0))",
        "floor": f"{_math('floor', dt)}({x})", "ceil": f"{_math('ceil', dt)}({x})",
        "round": f"{_math('rint', dt)}({x})", "trunc": f"{_math('trunc', dt)}({x})",
        "not": f"(!{x})" if dt.is_bool else f"(~{x})",
    }
    if op in table:
        return table[op]
    names = {"asin": "asin", "acos": "acos", "atan": "atan", "asinh": "asinh",
             "acosh": "acosh", "atanh": "atanh"}
    return f"{_math(names.get(op, op), dt)}({x})"


def _binary(op: str, a: str, b: str, dt: DType) -> str:
    f = dt.is_float
    simple = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&", "or": "|",
              "xor": "^", "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">",
              "ge": ">="}
    if op in simple:
        if dt.is_bool and op in ("add", "mul"):
            return f"({a} {'|' if op == 'add' else '&'} {b})"
        return f"({a} {simple[op]} {b})"
    t = ctype(dt)
    if op in ("max", "min"):
        if f:
            fn = {"max": "pb_fmax", "min": "pb_fmin"}[op] + ("f" if dt.name == "float32" else "")
            return f"{fn}({a}, {b})"
        return f"({a} {'>' if op == 'max' else '<'} {b} ? {a} : {b})"
    if op == "floordiv":
        return f"(({t})pb_floordiv_np({a}, {b}))" if f else f"(({t})pb_ifloordiv({a}, {b}))"
    if op == "mod":
        return f"(({t})pb_fmod_np({a}, {b}))" if f else f"(({t})pb_imod({a}, {b}))"
    if op == "pow":
        return f"{_math('pow', dt)}({a}, {b})" if f else f"(({t})pb_ipow({a}, {b}))"
    if op == "atan2":
        return f"{_math('atan2', dt)}({a}, {b})"
    raise Unsupported(op)


def _convert(x: str, src: DType, dst: DType) -> str:
    if dst.is_bool:
        return f"(({x}) != 0)"
    if dst.is_int and src.is_float:
        return f"(({ctype(dst)})pb_f2i{dst.name[3:]}({x}))"
    return f"(({ctype(dst)})({x}))"


def _strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _linear(shape: Sequence[int], idx: Sequence[str]) -> str:
    terms = [f"({i})*{s}" if s != 1 else f"({i})" for i, s, d in
             zip(idx, _strides(shape), shape, strict=True) if d != 1]
    return " + ".join(terms) or "0"


_UNARY = {"neg", "abs", "sign", "floor", "ceil", "round", "trunc", "exp", "expm1", "log",
          "log1p", "log2", "log10", "sqrt", "cbrt", "sin", "cos", "tan", "asin", "acos",
          "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "not"}
_BINARY = {"add", "sub", "mul", "div", "floordiv", "mod", "pow", "max", "min", "atan2",
           "and", "or", "xor", "eq", "ne", "lt", "le", "gt", "ge"}
_REDUCE = {"reduce_sum": ("sum", "+"), "reduce_prod": ("prod", "*"),
           "reduce_max": ("max", None), "reduce_min": ("min", None)}


#: The most work (m*n*k per matrix) a product runs as the runtime's inline kernel
#: (``pb_gemm_*``) rather than a BLAS call whose packing and dispatch cost more, by the
#: layout of B, measured against OpenBLAS on 1 and 2 threads: a row-major B at least two
#: vectors wide runs as register tiles straight from B; others are first copied in panels.
GEMM_INLINE_MAX_WORK = {True: 1 << 20, False: 1 << 15}
BLAS_PREFIX = "scipy_"
#: dtypes the inline kernel computes; floats beyond its sizes go to BLAS.
_GEMM_DTYPES = {"float32", "float64", "int32", "int64"}


def _block_of(dims: Sequence[int], start: int) -> bool:
    return list(dims) == list(range(start, start + len(dims)))


def _transposed(first, second, start: int) -> bool | None:
    """Whether an operand's two axis blocks after the batch axes come as (second, first)
    (True) or as (first, second) (False); None when they are not two contiguous blocks."""
    if _block_of(first, start) and _block_of(second, start + len(first)):
        return False
    if _block_of(second, start) and _block_of(first, start + len(second)):
        return True
    return None


def _as_gemm(a: TensorType, b: TensorType, lc, rc, lb, rb, lf, rf):
    """``(batch, m, n, k, trans_a, trans_b)`` when a ``dot_general`` is a batch of row-major
    matrix products: leading batch axes in order on both sides, free and contracting axes
    each one contiguous block, contracting axes in the same order; else None."""
    nb = len(lb)
    if list(lb) != list(range(nb)) or list(rb) != list(range(nb)):
        return None
    if sorted(lc) != list(lc) or sorted(rc) != list(rc):
        return None
    trans_a = _transposed(lf, lc, nb)
    trans_b = _transposed(rc, rf, nb)
    if trans_a is None or trans_b is None:
        return None
    batch = math.prod(a.shape[:nb])
    m = math.prod(a.shape[d] for d in lf)
    n = math.prod(b.shape[d] for d in rf)
    k = math.prod(a.shape[d] for d in lc)
    if max(m, n, k) >= 2 ** 31:
        return None
    return batch, m, n, k, trans_a, trans_b


_POINTWISE = _UNARY | _BINARY | {"select", "convert", "stop_gradient"}
#: Consumers that read each element of their operand once, by linear index.
_READS_ONCE = {"select", "convert", "stop_gradient", "broadcast_in_dim", "transpose",
               "slice", "rev", "reshape", *_REDUCE}
#: Pointwise ops whose C expression repeats an operand when it is not a float.
_REPEATS = {"abs", "sign", "max", "min"}


def _destinations(blk: Block) -> dict[int, int]:
    """Array results of the entry block that an equation of it allocates (not a
    control-flow result, which moves in): each is computed straight into the caller's
    output buffer of the first result it is."""
    made = {id(o) for e in blk.eqns if not e.op.blocks and e.op.name != "call"
            for o in e.outputs}
    dest: dict[int, int] = {}
    for k, r in enumerate(blk.results):
        if isinstance(r, Var) and r.type.shape != () and id(r) in made and id(r) not in dest:
            dest[id(r)] = k
    return dest


def _is_pointwise(eqn: Eqn) -> bool:
    """Each element of the result is a function of the same element of each operand
    (0-d operands broadcast), as a broadcast of a 0-d value is too."""
    if eqn.op.name == "broadcast_in_dim":
        return eqn.inputs[0].type.shape == ()
    return eqn.op.name in _POINTWISE


def _pointwise_expr(eqn: Eqn, operand: Callable[[Atom], str]) -> str:
    """The C expression of one element of a pointwise equation's result, given the C
    expressions of its operands' elements."""
    name, ins = eqn.op.name, eqn.inputs
    if name == "select":
        p, a, b = (operand(x) for x in ins)
        return f"({p} ? {a} : {b})"
    if name == "convert":
        return _convert(operand(ins[0]), ins[0].type.dtype, eqn.outputs[0].type.dtype)
    if name in ("stop_gradient", "broadcast_in_dim"):  # a broadcast of a 0-d value
        return operand(ins[0])
    dt = ins[0].type.dtype
    if name in _UNARY:
        return _unary(name, operand(ins[0]), dt)
    return _binary(name, operand(ins[0]), operand(ins[1]), dt)


def _loop_shape(eqn: Eqn) -> tuple[int, ...] | None:
    """The shape of the loop ``eqn`` can join: a pointwise result's, a full reduction's
    operand's (None for other equations and 0-d values)."""
    if _is_pointwise(eqn):
        shape = eqn.outputs[0].type.shape
    elif eqn.op.name in _REDUCE and len(eqn.params["axes"]) == eqn.inputs[0].type.ndim:
        shape = eqn.inputs[0].type.shape
    else:
        return None
    return shape or None


#: How many later equations over its shape a run tries to take in.
RUN_REACH = 256


def _runs(blk: Block) -> dict[int, list[Eqn]]:
    """Runs of two or more pointwise equations and full reductions over one shape,
    computed as one loop at the place of the first (keyed by its index).  Each reads
    only values that exist there (made before it, or by a run that starts before it) or
    pointwise values of its own run; reduced values exist after the loop.  Equations
    between the members stay in place, after the loop."""
    eqns = blk.eqns
    where = {id(o): k for k, e in enumerate(eqns) for o in e.outputs}
    same: dict[tuple[int, ...], list[int]] = {}
    for k, e in enumerate(eqns):
        shape = _loop_shape(e)
        if shape is not None:
            same.setdefault(shape, []).append(k)
    runs: dict[int, list[Eqn]] = {}
    start: dict[int, int] = {}  # an equation of a run: where its run starts
    for ks in same.values():
        for n, k in enumerate(ks):
            if k in start:
                continue
            members = [k]
            made = {id(eqns[k].outputs[0])} if _is_pointwise(eqns[k]) else set()
            for j in ks[n + 1:n + 1 + RUN_REACH]:
                e = eqns[j]
                if j not in start and all(
                        id(a) in made or where.get(id(a), -1) < k or
                        start.get(where[id(a)], k) < k for a in e.inputs):
                    members.append(j)
                    if _is_pointwise(e):
                        made.add(id(e.outputs[0]))
            if len(members) >= 2:
                runs[k] = [eqns[j] for j in members]
                start.update((j, k) for j in members)
    return runs


#: Per-element costs that decide whether a value is computed in each loop that reads it
#: rather than stored once, in units of one vector arithmetic operation: a division or
#: square root, a call of a (vectorised) math function, a byte moved between memory and
#: the cores.  Storing an element moves its bytes twice (the line is read, then written).
#: Measured on 10M float32 gradients, one thread: recomputing ``exp(x)`` in the backward
#: loop costs about what storing and loading it does, recomputing a sigmoid and the
#: terms of its derivative instead of storing three arrays saves a quarter of the time.
COST_DIV, COST_CALL, COST_BYTE = 2, 4, 2
#: Values whose expression costs more than this are never computed twice.
RECOMPUTE_MAX = 64
_ARITH = {"neg", "abs", "sign", "floor", "ceil", "round", "trunc", "not", "add", "sub",
          "mul", "max", "min", "and", "or", "xor", "eq", "ne", "lt", "le", "gt", "ge",
          "select", "convert", "stop_gradient", "broadcast_in_dim"}


def _op_cost(eqn: Eqn) -> int:
    name = eqn.op.name
    return 1 if name in _ARITH else COST_DIV if name in ("div", "sqrt") else COST_CALL


def _expressions(blk: Block, kept: set[int]) -> dict[int, tuple[int, int]]:
    """Pointwise array values of ``blk`` as expressions of the arrays they read from
    memory (values in ``kept`` have a buffer: they are read, not composed), up to a
    cost of ``RECOMPUTE_MAX``: the cost of each element, and the bytes read for it."""
    parts: dict[int, tuple[dict[int, int], dict[int, int]]] = {}  # equations, leaves
    for e in blk.eqns:
        v = e.outputs[0] if e.outputs else None
        if v is None or not _is_pointwise(e) or v.type.shape == ():
            continue
        ops, leaves = {id(e): _op_cost(e)}, {}
        for a in e.inputs:
            if id(a) in parts and id(a) not in kept:
                ops.update(parts[id(a)][0])
                leaves.update(parts[id(a)][1])
            elif a.type.shape != ():
                leaves[id(a)] = a.type.dtype.np.itemsize
        if sum(ops.values()) <= RECOMPUTE_MAX:
            parts[id(v)] = ops, leaves
    return {v: (sum(ops.values()), sum(leaves.values())) for v, (ops, leaves) in parts.items()}


def _reads_elementwise(c: Eqn) -> bool:
    """Whether ``c``'s own loop reads each element of its operands by linear index, once
    (an operand of ``_REPEATS`` ops would be computed twice)."""
    return c.op.name in _READS_ONCE or (c.op.name in _UNARY | _BINARY and (
        c.inputs[0].type.dtype.is_float or c.op.name not in _REPEATS))


def _fusible(blk: Block, runs: dict[int, list[Eqn]]) -> set[int]:
    """Values of ``blk`` computed in each loop that reads them instead of into a buffer:
    array results of pointwise equations that later equations of the block read element
    by element (vertical fusion: elementwise chains into one loop, reductions and layout
    changes absorbing their producers).  A value read by several loops, or one a run
    computes and later loops read, is computed again in each of them when that costs no
    more than storing and loading it."""
    run_of = {id(e): k for k, run in runs.items() for e in run}
    readers: dict[int, list[Eqn]] = {}
    for e in blk.eqns:
        for a in e.inputs:
            readers.setdefault(id(a), []).append(e)
    kept = {id(r) for r in blk.results}  # values with a buffer in any case
    kept |= {id(v) for e in blk.eqns for inner in e.blocks() for v in free_vars(inner)}
    kept |= {id(a) for e in blk.eqns if id(e) not in run_of and not _reads_elementwise(e)
             for a in e.inputs}
    exprs = _expressions(blk, kept)
    at: dict[int, tuple[set[int], int]] = {}  # a fused value: the runs computing it, and
    for e in reversed(blk.eqns):              # how many times other loops do
        v = e.outputs[0] if e.outputs else None
        if v is None or id(v) not in exprs or id(v) in kept:
            continue
        own = run_of.get(id(e))
        loops, times = set(), 0
        for c in readers.get(id(v), []):
            r = run_of.get(id(c))
            w = c.outputs[0]
            if r is not None:
                loops.add(r)
            if id(w) in at:
                loops |= at[id(w)][0]
                times += at[id(w)][1]
            elif r is None:  # its own loop, reading each element of v this many times
                times += max(1, w.type.size // max(v.type.size, 1))
        loops.discard(own)
        evals = len(loops) + times
        cost, nbytes = exprs[id(v)]
        size = COST_BYTE * v.type.dtype.np.itemsize
        each = cost + COST_BYTE * nbytes
        spare = 0 if own is not None else 1  # one evaluation storing it needs too
        if evals and (evals - spare) * each <= 2 * size + evals * size:
            at[id(v)] = loops, times
    return set(at)


def _views(eqn: Eqn, fusible: set[int], dest: dict[int, int]) -> list[tuple[Var, Var]]:
    """``(result, operand)`` pairs of ``eqn`` where the result shares the operand's buffer:
    a reshape, and a loop's carries its body passes through unchanged."""
    name = eqn.op.name
    if name == "reshape":
        pairs = [(eqn.outputs[0], eqn.inputs[0])]
    elif name in ("for_loop", "while_loop"):
        body = eqn.params["body"]
        skip = 1 if name == "for_loop" else 0  # the iteration index
        xs = eqn.inputs[3:] if name == "for_loop" else eqn.inputs
        pairs = [(o, x) for o, x, p, r in zip(eqn.outputs, xs, body.params[skip:],
                                              body.results, strict=True) if r is p]
    else:
        return []
    return [(o, x) for o, x in pairs
            if isinstance(x, Var) and isinstance(x.type, TensorType) and x.type.shape != ()
            and o.type.shape != () and id(x) not in fusible and id(o) not in dest]


@dataclass
class _Slot:
    """A buffer of the entry's top block placed in the call's arena: its name, its
    declaration (line index, element C type and count), its bytes rounded up to 64, and
    its life: from the line declaring it up to (not including) the line where it ends."""

    name: str
    line: int
    ctype: str
    count: int
    nbytes: int
    start: int
    end: int = -1


def _place(slots: Sequence[_Slot]) -> tuple[list[int], int]:
    """Offsets in one arena for buffers with these lives (largest first, each at the
    lowest offset clear of the placed ones whose lives overlap its own), and its size."""
    offsets = [0] * len(slots)
    placed: list[int] = []
    for k in sorted(range(len(slots)), key=lambda k: -slots[k].nbytes):
        a = slots[k]
        busy = sorted((offsets[j], offsets[j] + slots[j].nbytes) for j in placed
                      if slots[j].start < a.end and a.start < slots[j].end)
        at = 0
        for lo, hi in busy:
            if at + a.nbytes <= lo:
                break
            at = max(at, hi)
        offsets[k] = at
        placed.append(k)
    return offsets, max((o + s.nbytes for o, s in zip(offsets, slots, strict=True)), default=0)


@dataclass
class _Owned:
    """A buffer a block frees: the position of its last read, its dtype and size."""

    last: int
    dtype: str = ""
    size: int = -1


@dataclass
class _Scope:
    """An open block's memory plan.  Positions are equation indices (a run's equations
    are read at its first, a fused equation at its last consumer's; parameters at -1,
    results at ``len(eqns)``)."""

    runs: dict[int, list[Eqn]]
    pos: list[int]  # per equation: where its operands are read
    root: dict[int, Var]  # a view's id: the value owning its buffer
    last: dict[int, int]  # a buffer-owning value's id: position of its last read
    views: set[int]
    owned: dict[str, _Owned] = field(default_factory=dict)  # C name: buffers to free
    at: int = -1  # the position being emitted


def _plan(blk: Block, runs: dict[int, list[Eqn]], fusible: set[int],
          dest: dict[int, int]) -> _Scope:
    """Where each buffer of ``blk`` is read last (views extend their owner's life)."""
    eqns = blk.eqns
    readers: dict[int, list[int]] = {}
    for k, e in enumerate(eqns):
        for a in e.inputs:
            readers.setdefault(id(a), []).append(k)
    pos = list(range(len(eqns)))
    index = {id(e): k for k, e in enumerate(eqns)}
    for start, run in runs.items():
        for e in run:
            pos[index[id(e)]] = start
    for k in reversed(range(len(eqns))):
        outs = eqns[k].outputs
        if len(outs) == 1 and id(outs[0]) in fusible:
            pos[k] = max(pos[k], *(pos[r] for r in readers[id(outs[0])]))
    root: dict[int, Var] = {}
    views: set[int] = set()
    for e in eqns:
        for o, x in _views(e, fusible, dest):
            root[id(o)] = root.get(id(x), x)
            views.add(id(o))
    last: dict[int, int] = {}

    def use(a: Atom, at: int) -> None:
        if isinstance(a, Var):
            r = id(root.get(id(a), a))
            last[r] = max(last.get(r, -1), at)

    for p in blk.params:
        use(p, -1)
    for k, e in enumerate(eqns):
        for a in [*e.outputs, *e.inputs, *(v for inner in e.blocks() for v in free_vars(inner))]:
            use(a, pos[k])
    for r in blk.results:
        use(r, len(eqns))
    return _Scope(runs, pos, root, last, views)


#: Loops over at least this many elements run on every thread (``PULLBACK_NUM_THREADS``).
PARALLEL_MIN = 1 << 16


def _vector_pragma(n: int, clause: str = "") -> str:
    """SIMD for every flat loop; threads too for long ones."""
    kind = "parallel for simd schedule(static)" if n >= PARALLEL_MIN else "simd"
    return f"#pragma omp {kind} {clause}".rstrip()


class ModuleGen:
    """The C text of a module: its constants, then one function per IR function."""

    def __init__(self, module: Module):
        self.module = module
        self.names = {id(f): f"pbf_{k}" for k, f in enumerate(module.funcs.values())}
        self.entry = module.main
        self.consts: list[str] = []
        self.checks: list[Eqn] = []
        self.prints: list[Eqn] = []

    def constant(self, lit: Lit) -> str:
        name = f"pbk_{len(self.consts)}"
        dt = lit.type.dtype
        values = ", ".join(c_literal(v, dt) for v in lit.value.reshape(-1)) or "0"
        self.consts.append(f"static const {ctype(dt)} {name}[] = {{{values}}};")
        return name

    def generate(self) -> str:
        funcs = list(self.module.funcs.values())
        protos = [FuncGen(self, f).prototype() + ";" for f in funcs]
        bodies = [FuncGen(self, f).emit() for f in funcs]
        return "\n".join([*self.consts, "", *protos, "", *bodies])


class FuncGen(MoreOps):
    def __init__(self, mod: ModuleGen, func: Func):
        self.mod, self.func = mod, func
        self.lines: list[str] = []
        self.depth = 1
        self.vars: dict[int, str] = {}
        self.count = 0
        self.scopes: list[_Scope] = []  # the open blocks, innermost last
        self.slots: dict[str, _Slot] = {}  # live buffers of the entry's top block
        self.arena: list[_Slot] = []  # their lives, once over
        self.fused: dict[int, Callable[[str], str]] = {}  # values computed where read
        self.entry = func is mod.entry
        self.dest: dict[int, int] = {}  # entry results computed in the caller's buffers
        self.fusible: set[int] = set()
        self.loop: dict[int, str] | None = None  # in a run's loop body: values as locals

    # -- names and values -------------------------------------------------------

    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def scalar(self, a: Atom) -> str:
        """A 0-d atom as a C expression."""
        if isinstance(a, Lit):
            return c_literal(a.value, a.type.dtype)
        return self.vars[id(a)]

    def buf(self, a: Atom) -> str:
        """A tensor atom's data as a C pointer expression (a fused value is computed into
        a buffer here, where a consumer needs one)."""
        fused = self.fused.pop(id(a), None)
        if fused is not None:
            self.define(a)
            self.flat_loop(a, fused)
        if isinstance(a, Lit):
            if a.type.shape == ():
                return f"(&(const {ctype(a.type.dtype)}){{{c_literal(a.value, a.type.dtype)}}})"
            return self.mod.constant(a)
        if a.type.shape == ():
            return f"(&{self.vars[id(a)]})"
        return self.vars[id(a)]

    def elem(self, a: Atom, index: str) -> str:
        """Element ``index`` (a linear index) of a tensor atom; 0-d atoms broadcast; a
        fused value is its expression (in a run's loop, a local computed once)."""
        if a.type.shape == ():
            return self.scalar(a)
        if self.loop is not None and id(a) in self.loop:
            return self.loop[id(a)]
        fused = self.fused.get(id(a))
        if fused is None:
            return f"{self.buf(a)}[{index}]"
        if self.loop is None:
            return f"({fused(index)})"
        name = self.fresh("t")
        self.line(f"{ctype(a.type.dtype)} {name} = {fused(index)};")
        self.loop[id(a)] = name
        return name

    def define(self, v: Var, allocate: bool = True) -> str:
        """Declare ``v``, owned by the open block: a scalar, a buffer (a new one, or
        NULL until a result moves in when not ``allocate``), or a tape pointer."""
        name = self.fresh()
        self.vars[id(v)] = name
        t = v.type
        if isinstance(t, StackType):
            self.line(f"pb_tape *{name} = NULL;")
        elif t.shape == ():
            self.line(f"{ctype(t.dtype)} {name} = 0;")
        elif id(v) in self.dest:  # the entry's result, computed in the caller's buffer
            self.line(f"{ctype(t.dtype)} *{name} = r{self.dest[id(v)]};")
        elif not allocate:
            self.line(f"{ctype(t.dtype)} *{name} = NULL;")
            self.own(name, v)
        else:
            ct = ctype(t.dtype)
            here = len(self.lines)
            nbytes = max(64, -(-t.size * t.dtype.np.itemsize // 64) * 64)
            self.slots[name] = _Slot(name, here, ct, t.size, nbytes, here)
            self.line(f"{ct} *{name} = @{name}@;")
            if not (self.entry and len(self.scopes) == 1):
                self.on_heap(name)
            self.own(name, v)
        return name

    # -- memory -------------------------------------------------------------------

    @property
    def scope(self) -> _Scope:
        return self.scopes[-1]

    def own(self, name: str, v: Var | None = None, last: int | None = None) -> None:
        """The open block owns buffer ``name`` holding ``v`` (None: a scratch buffer of
        the equation being emitted) until position ``last`` (default: ``v``'s last
        read)."""
        s = self.scope
        if v is None:
            s.owned[name] = _Owned(s.at)
            return
        if last is None:
            last = s.last.get(id(s.root.get(id(v), v)), s.at)
        s.owned[name] = _Owned(last, v.type.dtype.name, v.type.size)

    def on_heap(self, name: str) -> None:
        """Buffer ``name`` comes from ``pb_alloc`` (not the arena): a nested block
        frees it or it is not of the top block."""
        slot = self.slots.pop(name)
        self.lines[slot.line] = self.lines[slot.line].replace(
            f"@{name}@;", f"({slot.ctype} *)pb_alloc(ctx, {max(slot.count, 1)} * "
                          f"sizeof({slot.ctype})); if (!{name}) goto oom;")

    def free(self, name: str) -> None:
        """The end of buffer ``name``'s life: back to the pool, or its arena bytes free
        for later buffers."""
        slot = self.slots.pop(name, None)
        if slot is None:
            self.line(f"pb_free(ctx, {name});")
        else:
            slot.end = len(self.lines)
            self.line(f"PB_DEAD({name}, {slot.nbytes});")  # for AddressSanitizer
            self.arena.append(slot)

    def release(self, upto: int) -> None:
        """Free the open block's buffers read last at or before position ``upto``."""
        owned = self.scope.owned
        for name in [n for n, o in owned.items() if o.last <= upto]:
            del owned[name]
            self.free(name)

    def reuse(self, out: Var, lo: int, hi: int, names: Sequence[str] | None = None) -> bool:
        """Give ``out`` the buffer of a value of the same dtype and size that the open
        block owns and reads last between positions ``lo`` and ``hi`` (among ``names``
        when given): the caller computes ``out`` element by element from elements at
        the same index, so writing over that buffer is safe."""
        if id(out) in self.dest or out.type.shape == ():
            return False
        owned = self.scope.owned
        for name, o in owned.items():
            if lo <= o.last <= hi and o.dtype == out.type.dtype.name and \
                    o.size == out.type.size and (names is None or name in names):
                self.vars[id(out)] = name
                self.own(name, out)
                return True
        return False

    def dying(self, name: str | None) -> bool:
        """Whether the open block owns buffer ``name`` and reads it last here."""
        o = self.scope.owned.get(name)
        return o is not None and o.size >= 0 and o.last == self.scope.at

    def take(self, name: str) -> None:
        """Buffer ``name`` passes from the open block to a block nested in it."""
        del self.scope.owned[name]
        if name in self.slots:
            self.on_heap(name)

    def hand_over(self, eqn: Eqn, xs: Sequence[Atom]) -> list[bool]:
        """Per operand in ``xs``: whether its buffer passes to ``eqn``'s blocks (it dies
        at ``eqn`` and is not read there another way)."""
        seen = [self.vars.get(id(a)) for a in eqn.inputs if isinstance(a, Var)]
        seen += [self.vars.get(id(v)) for inner in eqn.blocks() for v in free_vars(inner)]
        out = []
        for x in xs:
            name = self.vars.get(id(x)) if isinstance(x, Var) else None
            ok = self.dying(name) and seen.count(name) == 1
            if ok:
                self.take(name)
            out.append(ok)
        return out

    def hand_over_reads(self, eqn: Eqn) -> list[tuple[str, Var]]:
        """The buffers that ``eqn``'s blocks (each run at most once) read from outside
        and that die at ``eqn`` (not operands too): they pass to those blocks."""
        operands = {self.vars.get(id(a)) for a in eqn.inputs if isinstance(a, Var)}
        reads = {self.vars.get(id(v)): v for inner in eqn.blocks() for v in free_vars(inner)}
        taken = [(n, v) for n, v in reads.items() if n not in operands and self.dying(n)]
        for name, _ in taken:
            self.take(name)
        return taken

    def open_block(self, blk: Block, names: Sequence[str], owns: Sequence[bool],
                   adopt: Sequence[tuple[str, Var]] = ()) -> None:
        """Plan ``blk``, bind its parameters to ``names``; it owns those marked in
        ``owns`` and the outer buffers in ``adopt`` (frees them after their last read
        or moves them to a result)."""
        runs = _runs(blk)
        fusible = _fusible(blk, runs)
        self.fusible |= fusible
        s = _plan(blk, runs, fusible, self.dest)
        self.scopes.append(s)
        self.bind(blk.params, names)
        for p, name, own in zip(blk.params, names, owns, strict=True):
            if own:
                self.own(name, p)
        reads = free_vars(blk) if adopt else []
        for name, v in adopt:
            self.own(name, v, max((s.last.get(id(u), -1) for u in reads
                                   if self.vars.get(id(u)) == name), default=-1))
        self.release(-1)

    def close_block(self) -> None:
        """Free what the block still owns (its results have moved out)."""
        for name in self.scopes.pop().owned:
            self.free(name)

    # -- functions ----------------------------------------------------------------

    def prototype(self) -> str:
        params = []
        for k, t in enumerate(self.func.in_types):
            if isinstance(t, StackType):
                params.append(f"pb_tape *p{k}")
            elif t.shape == ():
                params.append(f"{ctype(t.dtype)} p{k}")
            else:
                params.append(f"const {ctype(t.dtype)} *p{k}")
        for k, t in enumerate(self.func.out_types):
            if isinstance(t, StackType):
                params.append(f"pb_tape **r{k}")
            elif t.shape == ():
                params.append(f"{ctype(t.dtype)} *r{k}")
            elif self.entry:  # the caller's output buffer
                params.append(f"{ctype(t.dtype)} *r{k}")
            else:
                params.append(f"{ctype(t.dtype)} **r{k}")
        return f"static int {self.mod.names[id(self.func)]}(pb_ctx *ctx" + \
            "".join(f", {p}" for p in params) + ")"

    def emit(self) -> str:
        blk = self.func.block
        if self.entry:
            self.dest = _destinations(blk)
        self.open_block(blk, [f"p{k}" for k in range(len(blk.params))],
                        [False] * len(blk.params))
        self.block_body(blk)
        if self.entry:
            self.entry_results(blk)
        else:
            self.results_out(blk.results, [f"(*r{k})" for k in range(len(blk.results))])
        self.close_block()
        self.place_arena()
        self.line("return 0;")
        self.line("oom:")
        self.line('return pb_fail(ctx, "MemoryError", "out of memory");')
        self.line("fail:")
        self.line("return 1;")
        return "\n".join([self.prototype() + " {", *self.lines, "}", ""])

    def place_arena(self) -> None:
        """Give the top block's buffers their offsets in one allocation per call, buffers
        whose lives do not overlap sharing bytes."""
        if not self.arena:
            return
        offsets, total = _place(self.arena)
        for slot, at in zip(self.arena, offsets, strict=True):
            self.lines[slot.line] = self.lines[slot.line].replace(
                f"@{slot.name}@;", f"({slot.ctype} *)(pb_arena + {at}); PB_LIVE({slot.name}, "
                                   f"{max(slot.count, 1)} * sizeof({slot.ctype}));")
        self.lines[:0] = [f"    char *pb_arena = (char *)pb_alloc(ctx, {total});",
                          f"    if (!pb_arena) goto oom; PB_DEAD(pb_arena, {total});"]

    def entry_results(self, blk: Block) -> None:
        """The entry function's results: arrays computed in place need nothing, others
        are copied into the caller's buffers; scalars are stored."""
        for k, r in enumerate(blk.results):
            t = r.type
            if t.shape == ():
                self.line(f"*r{k} = {self.scalar(r)};")
            elif self.dest.get(id(r)) != k:
                self.line(f"memcpy(r{k}, {self.buf(r)}, {t.size} * sizeof({ctype(t.dtype)}));")

    def results_out(self, results: Sequence[Atom], dests: Sequence[str]) -> None:
        """Move or copy a block's ``results`` into ``dests`` (C lvalues) while the
        block is open; moved buffers leave its ownership."""
        owned = self.scope.owned
        moved = []
        staged = []
        for r in results:
            t = r.type
            if isinstance(t, StackType) or t.shape == ():
                staged.append(self.scalar(r) if not isinstance(t, StackType) else self.vars[id(r)])
                continue
            name = self.vars.get(id(r)) if isinstance(r, Var) else None
            if name in owned and name not in moved:
                moved.append(name)
                staged.append(name)
            else:
                tmp = self.fresh("m")
                ct = ctype(t.dtype)
                self.line(f"{ct} *{tmp} = ({ct} *)pb_copy(ctx, {self.buf(r)}, "
                          f"{t.size} * sizeof({ct}));")
                self.line(f"if (!{tmp}) goto oom;")
                staged.append(tmp)
        for name in moved:
            del owned[name]
        for dest, value in zip(dests, staged, strict=True):
            self.line(f"{dest} = {value};")

    def block_body(self, blk: Block) -> None:
        """The open block's equations, each buffer freed after its last read."""
        s = self.scope
        later = {id(e) for run in s.runs.values() for e in run[1:]}
        for k, eqn in enumerate(blk.eqns):
            s.at = k if k in s.runs else s.pos[k]
            if k in s.runs:
                self.run(s.runs[k])
            elif id(eqn) not in later:
                handler = getattr(self, "op_" + eqn.op.name, None)
                if handler is None:
                    handler = self.elementwise if eqn.op.name in _UNARY | _BINARY else None
                if handler is None and eqn.op.name in _REDUCE:
                    handler = self.reduce
                if handler is None:
                    raise Unsupported(f"the C backend has no code for {eqn.op.name} yet")
                handler(eqn)
            self.release(k)

    # -- elementwise ----------------------------------------------------------------

    def flat_loop(self, out: Var, expr: Callable[[str], str]) -> None:
        """``out[i] = expr(i)`` over every element (a scalar assignment for 0-d)."""
        if out.type.shape == ():
            self.line(f"{self.vars[id(out)]} = {expr('0')};")
            return
        self.line(_vector_pragma(out.type.size))
        self.line(f"for (int64_t i = 0; i < {out.type.size}; i++) "
                  f"{self.vars[id(out)]}[i] = {expr('i')};")

    def pointwise(self, out: Var, expr: Callable[[str], str]) -> None:
        """``out[i] = expr(i)`` (over a dying operand's buffer if one fits), or, when
        ``out`` is fused into its one consumer, just remember ``expr`` for that consumer
        to compute in its own loop."""
        if id(out) in self.fusible:
            self.fused[id(out)] = expr
            return
        if not self.reuse(out, self.scope.at, self.scope.at):
            self.define(out)
        self.flat_loop(out, expr)

    def elementwise(self, eqn: Eqn) -> None:
        self.pointwise(eqn.outputs[0], lambda i: _pointwise_expr(
            eqn, lambda a: self.elem(a, i)))

    op_select = op_convert = op_stop_gradient = elementwise

    def run(self, run: list[Eqn]) -> None:
        """A run as one loop, at the place of its first equation: each pointwise value is
        a local of the loop body, stored (at the end of the body) only when read after
        the run and not computed again there; a stored value may take over the buffer
        of one the run reads last.  Each reduction accumulates in the same loop.  Values
        only later loops need are computed there, not here."""
        s = self.scope
        first = run[0]
        n = (first.outputs[0] if _is_pointwise(first) else first.inputs[0]).type.size
        stored = [e.outputs[0] for e in run if e.op.name not in _REDUCE and
                  id(e.outputs[0]) not in self.fusible and
                  s.last.get(id(e.outputs[0]), -1) > s.at]
        needed, body = {id(v) for v in stored}, []
        for e in reversed(run):
            if e.op.name in _REDUCE or id(e.outputs[0]) in needed:
                needed.update(id(a) for a in e.inputs)
                body.insert(0, e)
        for v in stored:
            if not self.reuse(v, s.at, s.at):
                self.define(v)
        accs, clauses = {}, []
        for e in body:
            if e.op.name in _REDUCE:
                self.define(e.outputs[0])
                accs[id(e)], clause = self._accumulator(e)
                clauses.append(clause)
        if body:
            self.line(_vector_pragma(n, " ".join(clauses)))
            self.line(f"for (int64_t i = 0; i < {n}; i++) {{")
            self.depth += 1
            self.loop = {}
            for e in body:
                v = e.outputs[0]
                if id(e) in accs:
                    self._accumulate(e, accs[id(e)], self.elem(e.inputs[0], "i"))
                else:
                    expr = _pointwise_expr(e, lambda a: self.elem(a, "i"))
                    self.loop[id(v)] = name = self.fresh("t")
                    self.line(f"{ctype(v.type.dtype)} {name} = {expr};")
            for v in stored:
                self.line(f"{self.vars[id(v)]}[i] = {self.loop[id(v)]};")
            self.loop = None
            self.depth -= 1
            self.line("}")
        for e in run:
            out = e.outputs[0]
            if id(e) in accs:
                self.line(f"{self.vars[id(out)]} = ({ctype(out.type.dtype)})"
                          f"{self._reduced(e, accs[id(e)])};")
            elif id(out) in self.fusible:  # computed again where read
                self.pointwise(out, lambda i, e=e: _pointwise_expr(
                    e, lambda a: self.elem(a, i)))

    def op_random_bits(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        (key,) = eqn.inputs
        self.define(out)
        self.flat_loop(out, lambda i: f"pb_splitmix({self.scalar(key)}, (uint64_t)({i}))")

    # -- index arithmetic -------------------------------------------------------------

    def nd_loop(self, shape: Sequence[int], body: Callable[[list[str]], None],
                collapse: bool = False) -> None:
        """Nested loops over ``shape``; ``body(index names)`` emits the innermost code.
        ``collapse``: one flat loop whose indices are derived (for a pragma above it)."""
        if collapse and len(shape) > 1:
            flat = self.fresh("f")
            self.line(f"for (int64_t {flat} = 0; {flat} < {math.prod(shape)}; {flat}++) {{")
            self.depth += 1
            idx = []
            for k, st in enumerate(_strides(shape)):
                name = self.fresh("i")
                self.line(f"int64_t {name} = ({flat} / {st}) % {shape[k]};")
                idx.append(name)
            body(idx)
            self.depth -= 1
            self.line("}")
            return
        idx = [self.fresh("i") for _ in shape]
        opened = 0
        for i, d in zip(idx, shape, strict=True):
            self.line(f"for (int64_t {i} = 0; {i} < {d}; {i}++) {{")
            self.depth += 1
            opened += 1
        body(idx)
        for _ in range(opened):
            self.depth -= 1
            self.line("}")

    def gather_loop(self, out: Var, source: Atom, index_of: Callable[[list[str]], list[str]]
                    ) -> None:
        """``out[i] = source[index_of(i)]`` over ``out``'s shape."""
        self.define(out)
        if out.type.size == 0:
            return
        dest = self.vars[id(out)]
        shape = out.type.shape

        def body(idx):
            src = self.elem(source, _linear(source.type.shape, index_of(idx)))
            if shape == ():
                self.line(f"{dest} = {src};")
            else:
                self.line(f"{dest}[{_linear(shape, idx)}] = {src};")

        self.nd_loop(shape, body)

    def op_broadcast_in_dim(self, eqn: Eqn) -> None:
        (x,) = eqn.inputs
        if x.type.shape == ():
            self.elementwise(eqn)
            return
        dims = eqn.params["dims"]
        self.gather_loop(eqn.outputs[0], x, lambda idx: [
            "0" if x.type.shape[k] == 1 else idx[d] for k, d in enumerate(dims)])

    def op_reshape(self, eqn: Eqn) -> None:
        """A view of its operand's buffer, or a copy where it cannot be one."""
        (out,) = eqn.outputs
        if id(out) in self.scope.views:
            self.vars[id(out)] = self.vars[id(eqn.inputs[0])]
            return
        self.define(out)
        self.flat_loop(out, lambda i: self.elem(eqn.inputs[0], i))

    def op_transpose(self, eqn: Eqn) -> None:
        perm = eqn.params["perm"]

        def index_of(idx):
            src = [""] * len(perm)
            for j, p in enumerate(perm):
                src[p] = idx[j]
            return src

        self.gather_loop(eqn.outputs[0], eqn.inputs[0], index_of)

    def op_slice(self, eqn: Eqn) -> None:
        start, stride = eqn.params["start"], eqn.params["stride"]
        self.gather_loop(eqn.outputs[0], eqn.inputs[0], lambda idx: [
            f"{s} + {i}*{st}" for i, s, st in zip(idx, start, stride, strict=True)])

    def op_rev(self, eqn: Eqn) -> None:
        x = eqn.inputs[0]
        dims = eqn.params["dims"]
        self.gather_loop(eqn.outputs[0], x, lambda idx: [
            f"{x.type.shape[k] - 1} - {i}" if k in dims else i for k, i in enumerate(idx)])

    def op_iota(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        self.define(out)
        dim = eqn.params["dim"]
        dest = self.vars[id(out)]
        ct = ctype(out.type.dtype)
        if out.type.shape == ():
            self.line(f"{dest} = 0;")
            return
        self.nd_loop(out.type.shape, lambda idx: self.line(
            f"{dest}[{_linear(out.type.shape, idx)}] = ({ct}){idx[dim]};"))

    def op_concatenate(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        self.define(out)
        axis = eqn.params["axis"]
        dest = self.vars[id(out)]
        offset = 0
        for x in eqn.inputs:
            def body(idx, x=x, offset=offset):
                at = [f"{i} + {offset}" if k == axis else i for k, i in enumerate(idx)]
                self.line(f"{dest}[{_linear(out.type.shape, at)}] = "
                          f"{self.elem(x, _linear(x.type.shape, idx))};")

            if x.type.size:
                self.nd_loop(x.type.shape, body)
            offset += x.type.shape[axis]

    def op_pad(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        x, value = eqn.inputs
        lo, interior = eqn.params["lo"], eqn.params["interior"]
        self.define(out)
        dest = self.vars[id(out)]
        if out.type.size == 0:
            return
        self.flat_loop(out, lambda i: self.scalar(value))
        if x.type.size == 0:
            return

        def body(idx):
            at = [f"({l} + {i}*{g + 1})" for i, l, g in zip(idx, lo, interior, strict=True)]
            inside = " && ".join(f"{a} >= 0 && {a} < {d}"
                                 for a, d in zip(at, out.type.shape, strict=True))
            self.line(f"if ({inside}) {dest}[{_linear(out.type.shape, at)}] = "
                      f"{self.elem(x, _linear(x.type.shape, idx))};")

        self.nd_loop(x.type.shape, body)

    # -- reductions -------------------------------------------------------------------

    def _accumulator(self, eqn: Eqn) -> tuple[str, str]:
        """Declare a reduction's accumulator; its name and the OpenMP clause combining
        its copies across SIMD lanes and threads.  OpenMP's max and min drop NaNs, so a
        float max/min also keeps a flag of the NaNs it saw (NumPy's answer is NaN)."""
        kind = _REDUCE[eqn.op.name][0]
        dt = eqn.inputs[0].type.dtype
        acc = self.fresh("a")
        if dt.is_bool:
            op = "|" if kind in ("sum", "max") else "&"
            self.line(f"uint8_t {acc} = {int(op == '&')};")
            return acc, f"reduction({op}:{acc})"
        op = {"sum": "+", "prod": "*"}.get(kind, kind)
        if not dt.is_float:
            lim = "INT64" if dt.name == "int64" else "INT32"
            init = {"sum": "0", "prod": "1", "max": f"{lim}_MIN", "min": f"{lim}_MAX"}[kind]
            self.line(f"{ctype(dt)} {acc} = {init};")
            return acc, f"reduction({op}:{acc})"
        init = {"sum": "0.0", "prod": "1.0", "max": "-INFINITY", "min": "INFINITY"}[kind]
        self.line(f"double {acc} = {init};")
        if kind in ("sum", "prod"):
            return acc, f"reduction({op}:{acc})"
        self.line(f"uint8_t {acc}n = 0;")
        return acc, f"reduction({op}:{acc}) reduction(|:{acc}n)"

    def _accumulate(self, eqn: Eqn, acc: str, v: str) -> None:
        kind = _REDUCE[eqn.op.name][0]
        dt = eqn.inputs[0].type.dtype
        if dt.is_bool:
            self.line(f"{acc} = {acc} {'|' if kind in ('sum', 'max') else '&'} {v};")
        elif kind in ("sum", "prod"):
            self.line(f"{acc} = {acc} {'+' if kind == 'sum' else '*'} {v};")
        else:  # a later equal value wins, as in NumPy's loops (0.0 vs -0.0)
            e = self.fresh("e")
            self.line(f"{ctype(dt)} {e} = {v};")
            self.line(f"{acc} = {e} {'>=' if kind == 'max' else '<='} {acc} ? {e} : {acc};")
            if dt.is_float:
                self.line(f"{acc}n |= {e} != {e};")

    def _reduced(self, eqn: Eqn, acc: str) -> str:
        """The reduction's value once its loop is over."""
        kind = _REDUCE[eqn.op.name][0]
        if eqn.inputs[0].type.dtype.is_float and kind in ("max", "min"):
            return f"({acc}n ? NAN : {acc})"
        return acc

    def reduce(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        (x,) = eqn.inputs
        axes = eqn.params["axes"]
        self.define(out)
        kept = [k for k in range(x.type.ndim) if k not in axes]
        dest = self.vars[id(out)]

        def outer(oidx):
            acc, clause = self._accumulator(eqn)

            def inner(ridx):
                full, ko, kr = [], iter(oidx), iter(ridx)
                for k in range(x.type.ndim):
                    full.append(next(kr) if k in axes else next(ko))
                self._accumulate(eqn, acc, self.elem(x, _linear(x.type.shape, full)))

            if axes:
                extent = math.prod(x.type.shape[a] for a in axes)
                self.line(_vector_pragma(extent if not kept else 0, clause))
            self.nd_loop([x.type.shape[a] for a in axes], inner, collapse=True)
            where = dest if out.type.shape == () else \
                f"{dest}[{_linear(out.type.shape, oidx)}]"
            self.line(f"{where} = ({ctype(out.type.dtype)}){self._reduced(eqn, acc)};")

        self.nd_loop([x.type.shape[k] for k in kept], outer)

    def _arg_reduce(self, eqn: Eqn, cmp: str) -> None:
        (out,) = eqn.outputs
        (x,) = eqn.inputs
        axis = eqn.params["axis"]
        self.define(out)
        dest = self.vars[id(out)]
        shape = x.type.shape
        kept = [shape[k] for k in range(len(shape)) if k != axis]
        nan = x.type.dtype.is_float

        def body(oidx):
            best, at = self.fresh("b"), self.fresh("k")
            full = list(oidx)
            full.insert(axis, "0")
            self.line(f"{ctype(x.type.dtype)} {best} = "
                      f"{self.elem(x, _linear(shape, full))}; int64_t {at} = 0;")
            j = self.fresh("j")
            full[axis] = j
            v = self.elem(x, _linear(shape, full))
            nan_first = f"{best} == {best} && " if nan else ""
            take = f"({nan_first}({v} {cmp} {best}" + (f" || {v} != {v}))" if nan else "))")
            self.line(f"for (int64_t {j} = 1; {j} < {shape[axis]}; {j}++) "
                      f"if {take} {{ {best} = {v}; {at} = {j}; }}")
            where = dest if out.type.shape == () else \
                f"{dest}[{_linear(out.type.shape, oidx)}]"
            self.line(f"{where} = {at};")

        self.nd_loop(kept, body)

    def op_argmax(self, eqn: Eqn) -> None:
        self._arg_reduce(eqn, ">")

    def op_argmin(self, eqn: Eqn) -> None:
        self._arg_reduce(eqn, "<")

    def _cumulative(self, eqn: Eqn, sym: str) -> None:
        (out,) = eqn.outputs
        (x,) = eqn.inputs
        axis, reverse = eqn.params["axis"], eqn.params["reverse"]
        self.define(out)
        dest = self.vars[id(out)]
        shape = x.type.shape
        kept = [shape[k] for k in range(len(shape)) if k != axis]
        ct = ctype(x.type.dtype)

        def body(oidx):
            acc = self.fresh("a")
            self.line(f"{ct} {acc} = {'0' if sym == '+' else '1'};")
            j = self.fresh("j")
            full = list(oidx)
            pos = f"{shape[axis] - 1} - {j}" if reverse else j
            full.insert(axis, pos)
            lin = _linear(shape, full)
            self.line(f"for (int64_t {j} = 0; {j} < {shape[axis]}; {j}++) {{ "
                      f"{acc} = {acc} {sym} {self.elem(x, lin)}; {dest}[{lin}] = {acc}; }}")

        if out.type.size:
            self.nd_loop(kept, body)

    def op_cumsum(self, eqn: Eqn) -> None:
        self._cumulative(eqn, "+")

    def op_cumprod(self, eqn: Eqn) -> None:
        self._cumulative(eqn, "*")

    # -- products -----------------------------------------------------------------

    def op_dot_general(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        a, b = eqn.inputs
        (lc, rc), (lb, rb) = eqn.params["contract"], eqn.params["batch"]
        lf = [k for k in range(a.type.ndim) if k not in lc and k not in lb]
        rf = [k for k in range(b.type.ndim) if k not in rc and k not in rb]
        gemm = _as_gemm(a.type, b.type, lc, rc, lb, rb, lf, rf)
        if gemm is not None and a.type.dtype == b.type.dtype == out.type.dtype and \
                out.type.dtype.name in _GEMM_DTYPES and out.type.size:
            self._gemm(eqn, *gemm)
            return
        self.define(out)
        dest = self.vars[id(out)]
        dt = a.type.dtype
        acc_t = "double" if dt.is_float else ctype(dt)

        def body(oidx):
            nb, nl = len(lb), len(lf)
            bi, li, ri = oidx[:nb], oidx[nb:nb + nl], oidx[nb + nl:]
            acc = self.fresh("a")
            self.line(f"{acc_t} {acc} = 0;")

            def inner(cidx):
                ai, bj = [""] * a.type.ndim, [""] * b.type.ndim
                for k, i in zip(lb, bi, strict=True):
                    ai[k] = i
                for k, i in zip(rb, bi, strict=True):
                    bj[k] = i
                for k, i in zip(lf, li, strict=True):
                    ai[k] = i
                for k, i in zip(rf, ri, strict=True):
                    bj[k] = i
                for k1, k2, c in zip(lc, rc, cidx, strict=True):
                    ai[k1], bj[k2] = c, c
                x = self.elem(a, _linear(a.type.shape, ai))
                y = self.elem(b, _linear(b.type.shape, bj))
                op = "|" if dt.is_bool else "+"
                prod = f"({x} & {y})" if dt.is_bool else f"({acc_t}){x} * {y}"
                self.line(f"{acc} = {acc} {op} {prod};")

            self.nd_loop([a.type.shape[k] for k in lc], inner)
            where = dest if out.type.shape == () else \
                f"{dest}[{_linear(out.type.shape, oidx)}]"
            self.line(f"{where} = ({ctype(out.type.dtype)}){acc};")

        self.nd_loop(out.type.shape, body)

    def _gemm(self, eqn: Eqn, batch: int, m: int, n: int, k: int, trans_a: bool,
              trans_b: bool) -> None:
        """A batch of row-major matrix products, each one call of the runtime's inline
        kernel or of BLAS ``gemm``, computed into the accumulator's buffer when the
        product is added to one that dies there."""
        (out,) = eqn.outputs
        a, b = eqn.inputs
        dt = out.type.dtype
        x, y = self.buf(a), self.buf(b)
        acc = self._accumulator_of(eqn, {x, y})
        if acc is None:
            self.define(out)
            c = self.buf(out)
        else:
            c = acc
            self.fused[id(out)] = lambda i: c_literal(0, dt)
        if batch == 1:
            loop, a_q, b_q, c_q = "", x, y, c
        else:
            q = self.fresh("q")
            loop = f"for (int64_t {q} = 0; {q} < {batch}; {q}++) "
            a_q, b_q, c_q = f"{x} + {q} * {m * k}", f"{y} + {q} * {k * n}", f"{c} + {q} * {m * n}"
        lanes = 64 // dt.np.itemsize
        work_cap = GEMM_INLINE_MAX_WORK[not trans_b and n >= 2 * lanes]
        if not dt.is_float or k == 0 or m * n * k <= work_cap:
            self.line(f"{loop}pb_gemm_{dt.name}({m}, {n}, {k}, {a_q}, {int(trans_a)}, {b_q}, "
                      f"{int(trans_b)}, {c_q}, {int(acc is not None)});")
            return
        fn = f"{BLAS_PREFIX}cblas_{'s' if dt.name == 'float32' else 'd'}gemm"
        ta = "CblasTrans" if trans_a else "CblasNoTrans"
        tb = "CblasTrans" if trans_b else "CblasNoTrans"
        lda, ldb = (m if trans_a else k), (k if trans_b else n)
        beta = "1.0" if acc is not None else "0.0"
        self.line(f"{loop}{fn}(CblasRowMajor, {ta}, {tb}, {m}, {n}, {k}, 1.0, {a_q}, {lda}, "
                  f"{b_q}, {ldb}, {beta}, {c_q}, {n});")

    @cached_property
    def _homes(self) -> dict[int, tuple[Block, int]]:
        """Each equation of the function, nested ones too: its block and index there."""
        homes: dict[int, tuple[Block, int]] = {}

        def walk(blk: Block) -> None:
            for k, e in enumerate(blk.eqns):
                homes[id(e)] = (blk, k)
                for inner in e.blocks():
                    walk(inner)

        walk(self.func.block)
        return homes

    @cached_property
    def _summed(self) -> dict[int, str]:
        """Adds (by id) whose product operand was computed into the buffer named here."""
        return {}

    def _accumulator_of(self, eqn: Eqn, operands: set[str]) -> str | None:
        """The buffer of ``acc`` when the product ``eqn`` is read only by the next
        equation, ``acc + product``, and may be computed into it: ``acc`` is a buffer of
        the open block, not one of the product's ``operands``, that dies at that add
        (its last read, per the block's plan), and the sum needs a buffer of its own (it
        is not fused, in a fused run, or the caller's output).  The add is then
        recorded to take that buffer over; the product reads as zeros."""
        (p,) = eqn.outputs
        blk, k = self._homes.get(id(eqn), (None, -1))
        s = self.scope
        if blk is None or k + 1 >= len(blk.eqns):
            return None
        add = blk.eqns[k + 1]
        if add.op.name != "add" or any(e is add for run in s.runs.values() for e in run):
            return None
        (total,) = add.outputs
        others = [x for x in add.inputs if x is not p]
        if len(others) != 1 or not isinstance(others[0], Var) or \
                others[0].type != total.type or id(total) in self.fusible | set(self.dest):
            return None
        name = self.vars.get(id(others[0]))
        owned = s.owned.get(name)
        if owned is None or owned.size != total.type.size or name in operands or \
                owned.last != s.pos[k + 1]:
            return None
        reads = [x for e in blk.eqns for x in e.inputs] + list(blk.results) + \
            [v for e in blk.eqns for inner in e.blocks() for v in free_vars(inner)]
        if sum(x is p for x in reads) != 1:
            return None
        self._summed[id(add)] = name
        return name

    def op_add(self, eqn: Eqn) -> None:
        """An add whose product was computed into its accumulator's buffer: the sum takes
        that buffer over (computing ``acc + 0`` element by element also stays right)."""
        name = self._summed.pop(id(eqn), None)
        s = self.scope
        if name is not None and self.reuse(eqn.outputs[0], s.at, s.at, [name]):
            for x in eqn.inputs:
                self.fused.pop(id(x), None)
            return
        self.elementwise(eqn)

    # -- indexing -------------------------------------------------------------------

    def _starts(self, x: Atom, starts: Sequence[Atom], sizes: Sequence[int]) -> list[str]:
        names = []
        for s, d, n in zip(starts, x.type.shape, sizes, strict=True):
            name = self.fresh("s")
            self.line(f"int64_t {name} = pb_clamp((int64_t){self.scalar(s)}, 0, {d - n});")
            names.append(name)
        return names

    def op_dynamic_slice(self, eqn: Eqn) -> None:
        x, *starts = eqn.inputs
        at = self._starts(x, starts, eqn.params["sizes"])
        self.gather_loop(eqn.outputs[0], x, lambda idx: [
            f"{s} + {i}" for s, i in zip(at, idx, strict=True)])

    def update_of(self, eqn: Eqn) -> None:
        """Start ``eqn``'s result as its first operand: that operand's buffer when it
        dies here and nothing else of ``eqn`` reads it, else a copy."""
        (out,) = eqn.outputs
        x, *others = eqn.inputs
        name = self.vars.get(id(x)) if isinstance(x, Var) else None
        s = self.scope
        if name not in [self.vars.get(id(a)) for a in others] and \
                self.reuse(out, s.at, s.at, [name]):
            return
        self.define(out)
        self.flat_loop(out, lambda i: self.elem(x, i))

    def op_dynamic_update_slice(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        x, upd, *starts = eqn.inputs
        at = self._starts(x, starts, upd.type.shape)
        self.update_of(eqn)
        dest = self.vars[id(out)]
        if upd.type.size == 0:
            return
        self.nd_loop(upd.type.shape, lambda idx: self.line(
            f"{dest}[{_linear(x.type.shape, [f'{s} + {i}' for s, i in zip(at, idx, strict=True)])}]"
            f" = {self.elem(upd, _linear(upd.type.shape, idx))};"))

    def _checked_index(self, idx_atom: Atom, lin: str, axis: int, size: int) -> str:
        j = self.fresh("g")
        self.line(f"int64_t {j} = (int64_t){self.elem(idx_atom, lin)};")
        self.line(f"if ({j} < 0 || {j} >= {size}) {{ snprintf(ctx->msg, sizeof ctx->msg, "
                  f"\"index %lld is out of bounds for axis {axis} with size {size}\", "
                  f"(long long){j}); ctx->exc = \"IndexError\"; goto fail; }}")
        return j

    def op_gather(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        x, idx = eqn.inputs
        axis = eqn.params["axis"]
        self.define(out)
        dest = self.vars[id(out)]
        n = idx.type.ndim

        def body(oidx):
            j = self._checked_index(idx, _linear(idx.type.shape, oidx[axis:axis + n]), axis,
                                    x.type.shape[axis])
            src = [*oidx[:axis], j, *oidx[axis + n:]]
            self.line(f"{dest}[{_linear(out.type.shape, oidx)}] = "
                      f"{self.elem(x, _linear(x.type.shape, src))};")

        if out.type.size:
            if out.type.shape == ():
                raise Unsupported("gather to a 0-d result")
            self.nd_loop(out.type.shape, body)

    def _scatter(self, eqn: Eqn, add: bool) -> None:
        (out,) = eqn.outputs
        x, idx, upd = eqn.inputs
        axis = eqn.params["axis"]
        self.update_of(eqn)
        dest = self.vars[id(out)]
        n = idx.type.ndim
        if upd.type.size == 0:
            return

        def body(uidx):
            j = self._checked_index(idx, _linear(idx.type.shape, uidx[axis:axis + n]), axis,
                                    x.type.shape[axis])
            at = _linear(x.type.shape, [*uidx[:axis], j, *uidx[axis + n:]])
            value = self.elem(upd, _linear(upd.type.shape, uidx))
            self.line(f"{dest}[{at}] {'+=' if add else '='} {value};")

        self.nd_loop(upd.type.shape, body)

    def op_scatter(self, eqn: Eqn) -> None:
        self._scatter(eqn, add=False)

    def op_scatter_add(self, eqn: Eqn) -> None:
        self._scatter(eqn, add=True)

    # -- control flow ---------------------------------------------------------------

    def bind(self, params: Sequence[Var], names: Sequence[str]) -> None:
        for p, n in zip(params, names, strict=True):
            self.vars[id(p)] = n

    def sub_block(self, blk: Block, names: Sequence[str], dests: Sequence[str],
                  owns: Sequence[bool], adopt: Sequence[tuple[str, Var]] = ()) -> None:
        """Emit ``blk`` with its parameters bound to ``names`` (owning those marked in
        ``owns``, and the outer buffers in ``adopt``), its results moved into ``dests``,
        and its own buffers freed."""
        self.line("{")
        self.depth += 1
        self.open_block(blk, names, owns, adopt)
        self.block_body(blk)
        self.results_out(blk.results, dests)
        self.close_block()
        self.depth -= 1
        self.line("}")

    def declare_outputs(self, eqn: Eqn) -> list[str]:
        """Variables for a control op's results, owned by the enclosing block."""
        return [self.define(v, allocate=False) for v in eqn.outputs]

    def op_cond(self, eqn: Eqn) -> None:
        """Each branch owns the buffers it reads that die at the cond."""
        pred, *xs = eqn.inputs
        outs = self.declare_outputs(eqn)
        args = [self.value_name(x) for x in xs]
        owns, adopt = self.hand_over(eqn, xs), self.hand_over_reads(eqn)
        self.line(f"if ({self.scalar(pred)})")
        self.sub_block(eqn.params["then"], args, outs, owns, adopt)
        self.line("else")
        self.sub_block(eqn.params["orelse"], args, outs, owns, adopt)

    def value_name(self, a: Atom) -> str:
        """A name to bind a block parameter to (literals get a variable)."""
        if isinstance(a, Var):
            return self.vars[id(a)]
        name = self.fresh("c")
        if a.type.shape == ():
            self.line(f"{ctype(a.type.dtype)} {name} = {self.scalar(a)};")
        else:
            self.line(f"const {ctype(a.type.dtype)} *{name} = {self.mod.constant(a)};")
        return name

    def carry_init(self, eqn: Eqn, xs: Sequence[Atom]) -> list[str]:
        """The loop's carried variables, which become its results: a carry the body
        passes through is a view of its operand, an operand dying here moves in, others
        are copied."""
        views = self.scope.views
        moves = self.hand_over(eqn, [None if id(o) in views else x
                                     for o, x in zip(eqn.outputs, xs, strict=True)])
        names = []
        for x, out, move in zip(xs, eqn.outputs, moves, strict=True):
            t = x.type
            if id(out) in views or move:
                name = self.vars[id(out)] = self.vars[id(x)]
                if move:
                    self.own(name, out)
            else:
                name = self.define(out, allocate=False)
                if isinstance(t, StackType):
                    self.line(f"{name} = {self.vars[id(x)]};")
                elif t.shape == ():
                    self.line(f"{name} = {self.scalar(x)};")
                else:
                    ct = ctype(t.dtype)
                    self.line(f"{name} = ({ct} *)pb_copy(ctx, {self.buf(x)}, "
                              f"{t.size} * sizeof({ct}));")
                    self.line(f"if (!{name}) goto oom;")
            names.append(name)
        return names

    def loop_body(self, body: Block, carry: Sequence[str], prefix: Sequence[str] = ()) -> None:
        """One iteration: the body on the carried variables, owning the arrays it does
        not pass through (it updates them in place or frees them); then its results
        replace them (buffers it owns move in, others are copied)."""
        self.line("{")
        self.depth += 1
        params = body.params[len(prefix):]
        passthrough = [r is p for r, p in zip(body.results, params, strict=True)]
        owns = [isinstance(p.type, TensorType) and p.type.shape != () and not s
                for p, s in zip(params, passthrough, strict=True)]
        self.open_block(body, [*prefix, *carry], [False] * len(prefix) + owns)
        self.block_body(body)
        news = [self.fresh("n") for _ in carry]
        for n, r in zip(news, body.results, strict=True):
            t = r.type
            decl = "pb_tape *" if isinstance(t, StackType) else (
                f"{ctype(t.dtype)} " if t.shape == () else f"{ctype(t.dtype)} *")
            self.line(f"{decl}{n};")
        changed = [not s for s in passthrough]
        self.results_out([r for r, c in zip(body.results, changed, strict=True) if c],
                         [n for n, c in zip(news, changed, strict=True) if c])
        self.close_block()
        for c, n, ch in zip(carry, news, changed, strict=True):
            if ch:
                self.line(f"{c} = {n};")
        self.depth -= 1
        self.line("}")

    def op_while_loop(self, eqn: Eqn) -> None:
        carry = self.carry_init(eqn, eqn.inputs)
        cond = eqn.params["cond"]
        self.line("for (;;) {")
        self.depth += 1
        go = self.fresh("go")
        self.line(f"uint8_t {go};")
        self.sub_block(cond, carry, [go], [False] * len(carry))
        self.line(f"if (!{go}) break;")
        self.loop_body(eqn.params["body"], carry)
        self.depth -= 1
        self.line("}")

    def op_for_loop(self, eqn: Eqn) -> None:
        lo, hi, step, *xs = eqn.inputs
        carry = self.carry_init(eqn, xs)
        body = eqn.params["body"]
        it = ctype(lo.type.dtype)
        i, h, s = self.fresh("it"), self.fresh("hi"), self.fresh("st")
        self.line(f"{it} {h} = {self.scalar(hi)}, {s} = {self.scalar(step)};")
        self.line(f"if ({s} == 0) {{ ctx->exc = \"ValueError\"; snprintf(ctx->msg, "
                  f"sizeof ctx->msg, \"range() arg 3 must not be zero\"); goto fail; }}")
        self.line(f"for ({it} {i} = {self.scalar(lo)}; {s} > 0 ? {i} < {h} : {i} > {h}; "
                  f"{i} += {s}) {{")
        self.depth += 1
        self.loop_body(body, carry, prefix=[i])
        self.depth -= 1
        self.line("}")

    def op_call(self, eqn: Eqn) -> None:
        callee = eqn.params["callee"]
        outs = self.declare_outputs(eqn)
        args = []
        for x in eqn.inputs:
            t = x.type
            if isinstance(t, StackType):
                args.append(self.vars[id(x)])
            elif t.shape == ():
                args.append(self.scalar(x))
            else:
                args.append(self.buf(x))
        args += [f"&{o}" for o in outs]
        self.line(f"if ({self.mod.names[id(callee)]}(ctx, {', '.join(args)})) goto fail;")

    def _inline_region(self, eqn: Eqn, region: str) -> None:
        outs = self.declare_outputs(eqn)
        args = [self.value_name(x) for x in eqn.inputs]
        self.sub_block(eqn.params[region], args, outs, self.hand_over(eqn, eqn.inputs),
                       self.hand_over_reads(eqn))

    def op_checkpoint(self, eqn: Eqn) -> None:
        self._inline_region(eqn, "body")

    def op_custom_jvp(self, eqn: Eqn) -> None:
        self._inline_region(eqn, "primal")

    def op_custom_vjp(self, eqn: Eqn) -> None:
        self._inline_region(eqn, "primal")

    # -- effects and stacks ---------------------------------------------------------

    def op_debug_print(self, eqn: Eqn) -> None:
        """The operands' bytes go to the Python side, which formats and prints them in
        program order."""
        k = len(self.mod.prints)
        self.mod.prints.append(eqn)
        n = len(eqn.inputs)
        data, sizes = self.fresh("pd"), self.fresh("ps")
        ptrs = ", ".join(self.buf(x) for x in eqn.inputs) or "NULL"
        nbytes = ", ".join(f"{x.type.size} * sizeof({ctype(x.type.dtype)})"
                           for x in eqn.inputs) or "0"
        self.line(f"const void *{data}[] = {{{ptrs}}}; const size_t {sizes}[] = {{{nbytes}}};")
        self.line(f"if (ctx->print({k}, {n}, {data}, {sizes})) "
                  "{ ctx->exc = \"RuntimeError\"; goto fail; }")

    def op_check(self, eqn: Eqn) -> None:
        ok, *values = eqn.inputs
        if any(v.type.shape != () for v in values) or len(values) > 8:
            raise Unsupported("a check with array operands")
        k = len(self.mod.checks)
        self.mod.checks.append(eqn)
        self.line(f"if (!({self.scalar(ok)})) {{")
        self.depth += 1
        self.line(f"ctx->check_id = {k}; ctx->n_values = {len(values)};")
        for j, v in enumerate(values):
            slot = "fvalues" if v.type.dtype.is_float else "ivalues"
            self.line(f"ctx->{slot}[{j}] = {self.scalar(v)};")
        self.line("goto fail;")
        self.depth -= 1
        self.line("}")

    def op_stack_new(self, eqn: Eqn) -> None:
        name = self.define(eqn.outputs[0])
        self.line(f"{name} = pb_tape_new(ctx); if (!{name}) goto oom;")

    def op_stack_push(self, eqn: Eqn) -> None:
        s, x = eqn.inputs
        name = self.define(eqn.outputs[0])
        t = x.type
        src = self.buf(x) if t.shape != () or isinstance(x, Lit) else f"&{self.scalar(x)}"
        self.line(f"if (pb_tape_push(ctx, {self.vars[id(s)]}, {src}, "
                  f"{t.size} * sizeof({ctype(t.dtype)}))) goto fail;")
        self.line(f"{name} = {self.vars[id(s)]};")

    def op_stack_pop(self, eqn: Eqn) -> None:
        (s,) = eqn.inputs
        tape, x = eqn.outputs
        tname = self.define(tape)
        xname = self.define(x)
        t = x.type
        dst = xname if t.shape != () else f"&{xname}"
        self.line(f"if (pb_tape_pop(ctx, {self.vars[id(s)]}, {dst}, "
                  f"{t.size} * sizeof({ctype(t.dtype)}))) goto fail;")
        self.line(f"{tname} = {self.vars[id(s)]};")


def generate(module: Module) -> tuple[str, list[Eqn], list[Eqn]]:
    """The C functions of ``module`` (the entry is ``pbf_0``), its checks and its prints,
    each in the order of their ids."""
    gen = ModuleGen(module)
    text = gen.generate()
    return text, gen.checks, gen.prints
