"""Loop IR as text (``PULLBACK_DUMP=loops``, ``Lowered.loops``), and the infix expression
printer that the C printer specialises."""

from __future__ import annotations

from ....ir.types import StackType
from ..loops import ir as L

#: Binding strength of C's binary operators (higher binds tighter).
PRECEDENCE = {"*": 9, "/": 9, "%": 9, "+": 8, "-": 8, "<": 6, "<=": 6, ">": 6, ">=": 6,
              "==": 5, "!=": 5, "&": 4, "^": 3, "|": 2, "&&": 1, "||": 0}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">=", "and": "&", "or": "|", "xor": "^"}
_SHORT = {"uint8_t": "u8", "int32_t": "i32", "int64_t": "i64", "float": "f32", "double": "f64",
          "pb_tape *": "tape"}


class ExprPrinter:
    """Expressions as infix text with only the parentheses precedence needs; subclasses
    say how constants, element ops, casts and addresses read."""

    def expr(self, e: L.Expr, outer: int = -1) -> str:
        if isinstance(e, L.Int):
            return str(e.value) if e.value >= 0 or outer < 0 else f"({e.value})"
        if isinstance(e, L.Bin):
            p = PRECEDENCE[e.op]
            # the right operand of a non-associative operator needs parentheses at par
            text = f"{self.expr(e.a, p - 1)} {e.op} {self.expr(e.b, p)}"
            return f"({text})" if p <= outer else text
        if isinstance(e, L.Load):
            ptr = self.expr(e.ptr)
            if not ptr.isidentifier():
                ptr = f"({ptr})"
            return f"{ptr}[{self.expr(e.index)}]"
        if isinstance(e, L.Cond):
            return f"({self.expr(e.p)} ? {self.expr(e.a)} : {self.expr(e.b)})"
        if isinstance(e, L.Fn):
            return f"{e.name}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, L.Const):
            return self.const(e)
        if isinstance(e, L.Op):
            return self.op(e)
        if isinstance(e, L.Cast):
            return self.cast(e)
        if isinstance(e, L.Addr):
            return self.addr(e)
        return e.name  # Sym

    def const(self, e: L.Const) -> str:
        return repr(e.value.item() if hasattr(e.value, "item") else e.value)

    def op(self, e: L.Op) -> str:
        args = [self.expr(a) for a in e.args]
        if e.name in _INFIX and len(args) == 2:
            return f"({args[0]} {_INFIX[e.name]} {args[1]})"
        if e.name == "convert":
            return f"{e.out.name}({args[0]})"
        return f"{e.name}({', '.join(args)})"

    def cast(self, e: L.Cast) -> str:
        return f"{_SHORT.get(e.ctype, e.ctype)}({self.expr(e.x)})"

    def addr(self, e: L.Addr) -> str:
        return f"&{self.expr(e.x)}"


class _Text(ExprPrinter):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def func(self, f: L.LoopFunc) -> None:
        params = ", ".join(f"{'out ' if p.out else ''}{p.name}: {_type(p.type)}"
                           for p in f.params)
        arena = f"  arena {f.arena} B" if f.arena else ""
        self.line(0, f"func {f.name}({params}){arena}")
        self.block(f.body, 1)

    def block(self, stmts: list[L.Stmt], depth: int) -> None:
        for s in stmts:
            self.stmt(s, depth)

    def stmt(self, s: L.Stmt, d: int) -> None:  # noqa: C901 - one case per statement kind
        e = self.expr
        if isinstance(s, L.Decl):
            init = f" = {e(s.init)}" if s.init is not None else ""
            self.line(d, f"{s.name}: {_SHORT.get(s.ctype, s.ctype)}{init}")
        elif isinstance(s, L.Set):
            self.line(d, f"{e(s.target)} {s.op} {e(s.value)}")
        elif isinstance(s, L.Alloc):
            where = f"arena+{s.offset}" if s.arena else "pool"
            self.line(d, f"alloc {s.name}: {_SHORT[s.ctype]}[{s.count}] {where}")
        elif isinstance(s, L.Free):
            self.line(d, f"free {s.name}")
        elif isinstance(s, L.Pointer):
            self.line(d, f"{s.name}: {_SHORT[s.ctype]}* = "
                         f"{e(s.value) if s.value is not None else 'null'}")
        elif isinstance(s, L.Move):
            self.line(d, f"{e(s.dest)} <- {e(s.src)}")
        elif isinstance(s, L.Copy):
            kind = "copy" if s.fresh else "copy into"
            self.line(d, f"{s.dest} = {kind} {e(s.src)}[:{s.count}]")
        elif isinstance(s, L.Loop):
            tags = " ".join(filter(None, ["kernel" if s.pragma else "", s.pragma,
                                          *s.reductions]))
            bounds = e(s.stop) if isinstance(s.start, L.Int) and s.start.value == 0 and \
                s.step == 1 else f"{e(s.start)}, {e(s.stop)}"
            if s.step != 1:
                bounds += f", {s.step}"
            fused = f"  # {' '.join(s.fused)}" if s.fused else ""
            self.line(d, f"{tags + ' ' if tags else ''}for {s.var} in range({bounds}):{fused}")
            self.block(s.body, d + 1)
        elif isinstance(s, L.Range):
            self.line(d, f"for {s.var}: {_SHORT[s.ctype]} in range({e(s.lo)}, {e(s.hi)}, "
                         f"{e(s.step)}):")
            self.block(s.body, d + 1)
        elif isinstance(s, L.Forever):
            self.line(d, "loop:")
            self.block(s.body, d + 1)
        elif isinstance(s, L.Break):
            self.line(d, f"break unless {e(s.cond)}")
        elif isinstance(s, L.Skip):
            self.line(d, f"continue if {e(s.cond)}")
        elif isinstance(s, L.If):
            self.line(d, f"if {e(s.cond)}:")
            self.block(s.then, d + 1)
            if s.orelse is not None:
                self.line(d, "else:")
                self.block(s.orelse, d + 1)
        elif isinstance(s, L.Scope):
            self.line(d, "block:")
            self.block(s.body, d + 1)
        elif isinstance(s, L.Gemm):
            ta, tb = ("ᵀ" if s.trans_a else ""), ("ᵀ" if s.trans_b else "")
            batch = f"[{s.batch}]" if s.batch > 1 else ""
            product = f"{e(s.a)}{ta} @ {e(s.b)}{tb}"
            if s.alpha is not None:
                product = f"{e(s.alpha)} * ({product})"
            into = "="
            if s.addend is s.c:
                into = "+="
            elif s.addend is not None:
                product = f"{e(s.addend)} + {product}"
            self.line(d, f"gemm.{'blas' if s.blas else 'inline'} {s.dtype.name}{batch} "
                         f"{s.m}x{s.n}x{s.k}: {e(s.c)} {into} {product}")
        elif isinstance(s, L.Runtime):
            fails = f" or raise {s.fault[0] or 'its error'}{_site(s.site)}" if s.fault else ""
            self.line(d, f"{s.name}({', '.join(e(a) for a in s.args)}){fails}")
        elif isinstance(s, L.Call):
            self.line(d, f"call {s.func}({', '.join(e(a) for a in s.args)})")
        elif isinstance(s, L.Raise):
            args = f" % ({', '.join(e(a) for a in s.args)})" if s.args else ""
            self.line(d, f"raise {s.exception}({s.fmt!r}{args}){_site(s.site)}")
        elif isinstance(s, L.Failed):
            self.line(d, f"fail check {s.check} ({', '.join(e(v) for _, v in s.values)})")
        elif isinstance(s, L.Print):
            self.line(d, f"print {s.k} ({', '.join(e(p) for p, _, _ in s.buffers)})")
        else:
            raise TypeError(f"no text for {type(s).__name__}")


def _site(site: int) -> str:
    """Where a fault names its line: the module's fault site (see ``Failed``'s check)."""
    return f" at site {site}" if site >= 0 else ""


def _type(t) -> str:
    if isinstance(t, StackType):
        return "tape"
    return f"{t.dtype.name}{list(t.shape)}" if t.shape else t.dtype.name


def format_module(module: L.LoopModule) -> str:
    """The module's constants and functions as indented text."""
    out = _Text()
    for name, dt, values in module.consts:
        shown = ", ".join(map(repr, values[:8])) + (", ..." if len(values) > 8 else "")
        out.line(0, f"const {name}: {dt.name}[{len(values)}] = [{shown}]")
    for f in module.funcs:
        out.func(f)
    return "\n".join(out.lines) + "\n"
