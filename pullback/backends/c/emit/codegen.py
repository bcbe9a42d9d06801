"""Loop IR as C99: one C function per loop function, kernels as OpenMP loops, element ops
as C expressions of the vectorisable math library, faults as an error code.

A function returns 0, or records what to raise in its context and returns 1 (``fail``);
the caller frees every allocation.  Its arena (one allocation per call) is taken first.
"""

from __future__ import annotations

import math

import numpy as np

from ....ir.types import DType, StackType, float64
from ..build.threads import products_share_team
from ..build.units import MARK, PART
from ..loops import ir as L
from ..loops.ir import Unsupported, ctype
from ..loops.printer import ExprPrinter
from .parts import TopVar, outline

BLAS_PREFIX = "scipy_"


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


def _site(site: int) -> str:
    """The statement recording the fault site whose line a fault names ('' for none)."""
    return f"ctx->check_id = {site}; " if site >= 0 else ""


def _math(name: str, dt: DType) -> str:
    return f"{name}f" if dt.name == "float32" else name


def _small_power(e: L.Op) -> int | None:
    """The exponent of a float ``pow`` by a literal 2, 3 or 4 (runtime.h's products)."""
    if e.name != "pow" or not e.dtype.is_float or not isinstance(e.args[1], L.Const):
        return None
    n = float(e.args[1].value)
    return int(n) if n in (2.0, 3.0, 4.0) else None


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
    if op in _DOUBLE_ONLY:
        return _in_double(_DOUBLE_ONLY[op], [x], dt)
    return f"{_math(op, dt)}({x})"


#: Element ops implemented in runtime.h for doubles only (float32 is widened, as SciPy's
#: loops widen it).
_DOUBLE_ONLY = {"lgamma": "pb_lgamma", "erfinv": "pb_erfinv", "ndtri": "pb_ndtri",
                "i0e": "pb_i0e", "i1e": "pb_i1e", "polygamma": "pb_polygamma"}


def _in_double(fn: str, args: list[str], dt: DType) -> str:
    if dt.name == "float32":
        return f"((float){fn}({', '.join(f'(double)({a})' for a in args)}))"
    return f"{fn}({', '.join(args)})"


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
    if op == "polygamma":
        return _in_double(_DOUBLE_ONLY[op], [a, b], dt)
    raise Unsupported(op)


def _convert(x: str, src: DType, dst: DType) -> str:
    if dst.is_bool:
        return f"(({x}) != 0)"
    if src.is_bool and dst.is_float:  # a choice: gcc 12 left loops casting uint8_t scalar
        return f"(({x}) ? {c_literal(1, dst)} : {c_literal(0, dst)})"
    if dst.is_int and src.is_float:
        return f"(({ctype(dst)})pb_f2i{dst.name[3:]}({x}))"
    return f"(({ctype(dst)})({x}))"


def _charge(body: list[L.Stmt]) -> int:
    """What one run of ``body`` charges the poll budget: its work, capped (any cost
    above the budget polls every time)."""
    return min(L.work(body), 1 << 30)


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pragma(s: L.Loop) -> str:
    kind = {"parallel simd": "parallel for simd schedule(static)",
            "parallel": "parallel for schedule(static)", "simd": "simd"}[s.pragma]
    return " ".join(["#pragma omp", kind, *s.reductions])


class _C(ExprPrinter):
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self.vector = 0  # inside this many loops with a pragma (SIMD: libmvec math)
        self.polls = False  # a loop on data polls for Ctrl-C (``loop_on_data``)
        self.top: dict[str, TopVar] = {}  # variables declared at the body's top level
        self.assigned: set[str] = set()  # variables assigned after their declaration
        self.index = -1  # the top-level statement being printed
        self.parts: list[str] = []  # the parts the functions printed were cut into

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    # -- expressions ------------------------------------------------------------------

    def const(self, e: L.Const) -> str:
        return c_literal(e.value, e.dtype)

    def op(self, e: L.Op) -> str:
        args = [self.expr(a) for a in e.args]
        if e.name == "select":  # runtime.h's blends: both operands read, no branch
            blend = _math("pb_blend", e.dtype) if e.dtype.is_float else f"pb_blend_{e.dtype.name}"
            return f"{blend}({args[0]}, {args[1]}, {args[2]})"
        if e.name == "convert":
            return _convert(args[0], e.dtype, e.out)
        if e.name == "log2" and e.dtype.is_float and not self.vector:  # scalar code
            return f"{_math('pb_log2', e.dtype)}({args[0]})"
        if e.name in ("sin", "cos") and e.dtype == float64 and not self.vector:
            return f"pb_{e.name}({args[0]})"
        if len(args) == 1:
            return _unary(e.name, args[0], e.dtype)
        power = _small_power(e)
        if power:
            return f"{_math(f'pb_pow{power}', e.dtype)}({args[0]})"
        return _binary(e.name, args[0], args[1], e.dtype)

    def cast(self, e: L.Cast) -> str:
        x = self.expr(e.x)
        return f"(({e.ctype}){x})" if x.isidentifier() else f"(({e.ctype})({x}))"

    def addr(self, e: L.Addr) -> str:
        if isinstance(e.x, L.Const):
            return f"(&(const {ctype(e.x.dtype)}){{{self.expr(e.x)}}})"
        return f"(&{self.expr(e.x)})"

    # -- statements -------------------------------------------------------------------

    def nested(self, head: str, body: list[L.Stmt], tail: str = "}") -> None:
        self.line(head)
        self.depth += 1
        self.block(body)
        self.depth -= 1
        if tail:
            self.line(tail)

    def loop_on_data(self, head: str, body: list[L.Stmt]) -> None:
        """A loop of the program (``while``, ``for`` over a range), which may run for
        ever: each iteration charges its work to the function's budget (``PB_TICK``),
        which polls for Ctrl-C when spent.  The charge comes right after a while loop's
        test (before it, the C compiler no longer moves the test to the loop's end;
        after the body, it no longer threads the body's branches into the next test).
        No such loop is inside an OpenMP loop."""
        self.polls = True
        test = next((k + 1 for k, s in enumerate(body) if isinstance(s, L.Break)), 0)
        self.line(head)
        self.depth += 1
        self.block(body[:test])
        self.line(f"if (PB_TICK(ctx, pb_ticks, {_charge(body)})) goto fail;")
        self.block(body[test:])
        self.depth -= 1
        self.line("}")

    def declare(self, name: str, ctype: str, again: str | None = None) -> None:
        """Note a variable declared, for the parts a large function is cut into."""
        if self.depth == 1:
            self.top[name] = TopVar(ctype, self.index, again)

    def assign(self, target: str) -> None:
        if target.isidentifier():
            self.assigned.add(target)

    def block(self, stmts: list[L.Stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: L.Stmt) -> None:  # noqa: C901 - one case per statement kind
        e = self.expr
        if isinstance(s, L.Decl):
            init = e(s.init) if s.init is not None else \
                ("NULL" if s.ctype.endswith("*") else "0")
            sep = "" if s.ctype.endswith("*") else " "
            self.declare(s.name, s.ctype)
            self.line(f"{s.ctype}{sep}{s.name} = {init};")
        elif isinstance(s, L.Set):
            self.assign(e(s.target))
            self.line(f"{e(s.target)} {s.op} {e(s.value)};")
        elif isinstance(s, L.Alloc):
            if s.arena:
                again = f"{s.ctype} *{s.name} = ({s.ctype} *)(pb_arena + {s.offset});"
                self.declare(s.name, f"{s.ctype} *", again)
                self.line(f"{again} PB_LIVE({s.name}, {max(s.count, 1)} * sizeof({s.ctype}));")
            else:
                self.declare(s.name, f"{s.ctype} *")
                self.line(f"{s.ctype} *{s.name} = ({s.ctype} *)pb_alloc(ctx, "
                          f"{max(s.count, 1)} * sizeof({s.ctype})); if (!{s.name}) goto oom;")
        elif isinstance(s, L.Free):
            self.line(f"PB_DEAD({s.name}, {s.arena_bytes});" if s.arena_bytes else
                      f"pb_free(ctx, {s.name});")
        elif isinstance(s, L.Pointer):
            const = "const " if s.const else ""
            line = f"{const}{s.ctype} *{s.name} = {e(s.value) if s.value is not None else 'NULL'};"
            self.declare(s.name, f"{const}{s.ctype} *", line if s.value is not None else None)
            self.line(line)
        elif isinstance(s, L.Move):
            self.assign(e(s.dest))
            self.line(f"{e(s.dest)} = {e(s.src)};")
        elif isinstance(s, L.Copy):
            size = f"{s.count} * sizeof({s.ctype})"
            if not s.fresh:
                self.line(f"memcpy({s.dest}, {e(s.src)}, {size});")
                return
            decl = f"{s.ctype} *" if s.declare else ""
            if s.declare:
                self.declare(s.dest, decl)
            else:
                self.assign(s.dest)
            self.line(f"{decl}{s.dest} = ({s.ctype} *)pb_copy(ctx, {e(s.src)}, {size});")
            self.line(f"if (!{s.dest}) goto oom;")
        elif isinstance(s, L.Loop):
            if s.pragma:
                self.line(_pragma(s))
            step = f"{s.var}++" if s.step == 1 else f"{s.var} += {s.step}"
            head = f"for (int64_t {s.var} = {e(s.start)}; {s.var} < {e(s.stop)}; {step})"
            self.vector += bool(s.pragma)
            if len(s.body) == 1 and isinstance(s.body[0], L.Set):
                self.depth, depth = 0, self.depth
                self.stmt(s.body[0])
                self.depth = depth
                self.line(f"{head} {self.lines.pop()}")
            else:
                self.nested(head + " {", s.body)
            self.vector -= bool(s.pragma)
        elif isinstance(s, L.Range):
            i, h, st = s.var, e(s.hi), e(s.step)
            self.loop_on_data(f"for ({s.ctype} {i} = {e(s.lo)}; {st} > 0 ? {i} < {h} : "
                              f"{i} > {h}; {i} += {st}) {{", s.body)
        elif isinstance(s, L.Forever):
            self.loop_on_data("for (;;) {", s.body)
        elif isinstance(s, L.Break):
            self.line(f"if (!({e(s.cond)})) break;")
        elif isinstance(s, L.Skip):
            self.line(f"if ({e(s.cond)}) continue;")
        elif isinstance(s, L.If):
            if not s.orelse:
                self.nested(f"if ({e(s.cond)}) {{", s.then)
            else:
                self.nested(f"if ({e(s.cond)}) {{", s.then, tail="")
                self.nested("} else {", s.orelse)
        elif isinstance(s, L.Scope):
            self.nested("{", s.body)
        elif isinstance(s, L.Gemm):
            self.gemm(s)
        elif isinstance(s, L.Runtime):
            call = f"{s.name}({', '.join(e(a) for a in s.args)})"
            if s.fault is None:
                self.line(call + ";")
            elif not s.fault[0]:
                self.line(f"if ({call}) {{ {_site(s.site)}goto fail; }}" if s.site >= 0
                          else f"if ({call}) goto fail;")
            else:
                self.line(f"if ({call}) {{ pb_fail(ctx, {_string(s.fault[0])}, "
                          f"{_string(s.fault[1])}); {_site(s.site)}goto fail; }}")
        elif isinstance(s, L.Call):
            args = "".join(f", {e(a)}" for a in s.args)
            self.line(f"if ({s.func}(ctx{args})) goto fail;")
        elif isinstance(s, L.Raise):
            args = "".join(f", (long long){e(a)}" for a in s.args)
            self.line(f"{{ snprintf(ctx->msg, sizeof ctx->msg, {_string(s.fmt)}{args}); "
                      f"ctx->exc = {_string(s.exception)}; {_site(s.site)}goto fail; }}")
        elif isinstance(s, L.Failed):
            self.line(f"ctx->check_id = {s.check}; ctx->n_values = {len(s.values)};")
            for j, (is_float, v) in enumerate(s.values):
                self.line(f"ctx->{'fvalues' if is_float else 'ivalues'}[{j}] = {e(v)};")
            self.line("goto fail;")
        elif isinstance(s, L.Print):
            ptrs = ", ".join(e(p) for p, _, _ in s.buffers) or "NULL"
            sizes = ", ".join(f"{n} * sizeof({ct})" for _, n, ct in s.buffers) or "0"
            self.line(f"{{ const void *pd[] = {{{ptrs}}}; const size_t ps[] = {{{sizes}}};")
            self.line(f"  if (ctx->print(ctx->owner, {s.k}, {len(s.buffers)}, pd, ps)) "
                      "{ ctx->exc = \"RuntimeError\"; goto fail; } }")
        else:
            raise TypeError(f"no C for {type(s).__name__}")

    def gemm(self, s: L.Gemm) -> None:
        e = self.expr
        m, n, k, ct = s.m, s.n, s.k, ctype(s.dtype)
        loop, a, b, c = "", e(s.a), e(s.b), e(s.c)
        addend = "NULL" if s.addend is None else e(s.addend)
        alpha = "1" if s.alpha is None else e(s.alpha)
        if s.batch > 1:
            loop = f"for (int64_t q = 0; q < {s.batch}; q++) "
            a, b, c = f"{a} + q * {m * k}", f"{b} + q * {k * n}", f"{c} + q * {m * n}"
            if s.addend is not None:
                addend = f"{addend} + q * {m * n}"
        args = f"{m}, {n}, {k}, ({ct})({alpha}), {a}, {int(s.trans_a)}, {b}, " \
               f"{int(s.trans_b)}, {addend}, {c}"
        if not s.blas:
            self.line(f"{loop}pb_gemm_{s.dtype.name}({args});")
            return
        fn = f"{BLAS_PREFIX}cblas_{'s' if s.dtype.name == 'float32' else 'd'}gemm"
        ta = "CblasTrans" if s.trans_a else "CblasNoTrans"
        tb = "CblasTrans" if s.trans_b else "CblasNoTrans"
        lda, ldb = (m if s.trans_a else k), (k if s.trans_b else n)
        # the runtime's packed kernels where BLAS's are narrower than the CPU's vectors
        # or the product is one BLAS would spend packing B for (runtime.h)
        self.line(f"if (pb_packed_gemm({s.whole or m}, {n}, {k})) "
                  f"{loop}{{ if (pb_gemm_packed_{s.dtype.name}({args})) goto oom; }}")
        self.line("else {")
        # BLAS adds into C itself (by name: a function cut into parts has new Syms)
        if s.addend is not None and e(s.addend) != e(s.c):
            self.line(f"  memcpy({e(s.c)}, {e(s.addend)}, {s.batch * m * n} * sizeof({ct}));")
        beta = "0.0" if s.addend is None else "1.0"
        call = f"{loop}{fn}(CblasRowMajor, {ta}, {tb}, {m}, {n}, {k}, {alpha}, {a}, " \
               f"{lda}, {b}, {ldb}, {beta}, {c}, {n});"
        if s.batch > 1 and products_share_team(s.batch, m, n, k):
            # the batch's products at once, one a thread, BLAS on one thread meanwhile
            self.line("  const int pb_blas = pb_blas_alone();")
            self.line("  #pragma omp parallel for schedule(static)")
            self.line(f"  {call}")
            self.line("  pb_blas_restore(pb_blas);")
        else:
            self.line(f"  {call}")
        self.line("}")

    # -- functions ----------------------------------------------------------------------

    def function(self, f: L.LoopFunc) -> str:
        if f.recursive:  # deep recursion raises RecursionError; long recursion polls
            self.line(f"if (pb_enter(ctx, {_charge(f.body)})) return 1;")
        if f.arena:
            self.line(f"char *pb_arena = (char *)pb_alloc(ctx, {f.arena});")
            self.line(f"if (!pb_arena) goto oom; PB_DEAD(pb_arena, {f.arena});")
        head, stmts = len(self.lines), []
        for self.index, s in enumerate(f.body):
            start = len(self.lines)
            self.stmt(s)
            stmts.append(self.lines[start:])
        tail = ["    return 0;", "oom:", '    return pb_fail(ctx, "MemoryError", "out of memory");',
                "fail:", "    return 1;"]
        cut = None if f.recursive else outline(
            f.name, _params(f), [p.name for p in f.params], bool(f.arena),
            self.lines[:head], stmts, self.top, self.assigned, tail)
        if cut is not None:
            self.lines, self.parts = cut
        elif self.polls:
            self.lines.insert(0, "    int64_t pb_ticks = PB_POLL_TICKS;")
        return "\n".join([prototype(f) + " {", *self.lines, *tail, "}", ""])


def prototype(f: L.LoopFunc) -> str:
    """``static int name(pb_ctx *ctx, operands..., result pointers...)``."""
    return f"static int {f.name}(pb_ctx *ctx" + "".join(f", {p}" for p in _params(f)) + ")"


def _params(f: L.LoopFunc) -> list[str]:
    """A function's parameters after its context: an operand array is a const pointer, a
    result array the caller's buffer (entry) or a pointer to one the callee allocates."""
    params = []
    for p in f.params:
        t = p.type
        if isinstance(t, StackType):
            params.append(f"pb_tape {'**' if p.out else '*'}{p.name}")
        elif not p.out:
            params.append(f"{ctype(t.dtype)} {p.name}" if t.shape == () else
                          f"const {ctype(t.dtype)} *{p.name}")
        elif t.shape == () or f.entry:
            params.append(f"{ctype(t.dtype)} *{p.name}")
        else:
            params.append(f"{ctype(t.dtype)} **{p.name}")
    return params


def generate(module: L.LoopModule) -> str:
    """The C text of a loop module: its constant tables, prototypes, then functions, and
    the parts large functions were cut into, each after a ``MARK`` (the last line then
    is one: the module's entry follows it)."""
    consts = [f"static const {ctype(dt)} {name}[] = "
              f"{{{', '.join(c_literal(v, dt) for v in values) or '0'}}};"
              for name, dt, values in module.consts]
    protos = [prototype(f) + ";" for f in module.funcs]
    printers = [_C() for _ in module.funcs]
    bodies = [c.function(f) for c, f in zip(printers, module.funcs, strict=True)]
    parts = [line for c in printers for line in c.parts]
    if not parts:
        return "\n".join([*consts, "", *protos, "", *bodies])
    declared = [line.removesuffix(" {") + ";" for line in parts if line.startswith(f"{PART} int ")]
    return "\n".join([*consts, "", f"#ifndef {PART}", f"#define {PART} static", "#endif",
                      *protos, *declared, "", *bodies, MARK, *parts])

