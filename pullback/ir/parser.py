"""Reading the textual form of graph IR back (see ``printer.py`` for the format).

Parsing runs in two phases: first every function's signature, so that ``call``s may name
functions defined later or recursively; then the bodies.  Each equation's output types
are inferred again from its operands and compared with the written ones.  Errors are
``ParseError``s that give the line and column of the text and what was expected.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import Loc, ParseError
from .core import Atom, Block, Eqn, Func, Lit, Module, Var
from .op import OPS, Op
from .types import DTYPES, DType, StackType, TensorType, Type
from .verify import param_problem

_DTYPES = {d.short: d for d in DTYPES}
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_TOKEN = re.compile(
    rf"""(?P<nl>\n)
    |(?P<ws>[ \t\r]+)
    |(?P<comment>\#[^\n]*)
    |(?P<string>{_STRING})
    |(?P<var>%[A-Za-z0-9_.]+)
    |(?P<func>@(?:[A-Za-z0-9_.]+|{_STRING}))
    |(?P<arrow>->)
    |(?P<number>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|-inf\b)
    |(?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
    |(?P<punct>[(){{}}\[\],:=~<>])""",
    re.VERBOSE,
)
_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class _Tok:
    kind: str  # 'nl', 'comment', 'string', 'var', 'func', 'number', 'ident', 'eof', or the punct
    text: str
    line: int
    col: int


def _describe(tok: _Tok) -> str:
    return {"nl": "end of line", "eof": "end of text"}.get(tok.kind, repr(tok.text))


def _tokenize(text: str) -> list[_Tok]:
    """Tokens with 1-based line/col; blank lines and comment-only lines are dropped."""
    toks: list[_Tok] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        col = pos - line_start + 1
        if m is None:
            raise _error(text, line, col, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup
        at_line_start = not toks or toks[-1].kind == "nl"
        if kind == "nl":
            if not at_line_start:
                toks.append(_Tok("nl", "\n", line, col))
            line, line_start = line + 1, m.end()
        elif kind == "comment" and at_line_start:
            pass
        elif kind != "ws":
            toks.append(_Tok(m.group() if kind == "punct" else kind, m.group(), line, col))
        pos = m.end()
    if toks and toks[-1].kind != "nl":
        toks.append(_Tok("nl", "\n", line, pos - line_start + 1))
    toks.append(_Tok("eof", "", line, pos - line_start + 1))
    return toks


def _error(text: str, line: int, col: int, message: str) -> ParseError:
    lines = text.splitlines()
    shown = lines[line - 1] if 0 < line <= len(lines) else ""
    return ParseError(f"{line}:{col}: {message}\n    {shown}\n    {' ' * (col - 1)}^")


@dataclass
class _Header:
    func: Func
    body: int  # index of the first token of the body
    scope: dict[str, Var]


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokenize(text)
        self.pos = 0
        self.funcs: dict[str, Func] = {}
        self.scopes: list[dict[str, Var]] = []

    # -- tokens ----------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> _Tok:
        return self.toks[min(self.pos + ahead, len(self.toks) - 1)]

    def next(self) -> _Tok:
        tok = self.peek()
        self.pos += 1
        return tok

    def fail(self, expected: str, tok: _Tok | None = None) -> ParseError:
        tok = tok or self.peek()
        return self.error(tok, f"expected {expected}, found {_describe(tok)}")

    def error(self, tok: _Tok, message: str) -> ParseError:
        return _error(self.text, tok.line, tok.col, message)

    def expect(self, kind: str, expected: str | None = None) -> _Tok:
        if self.peek().kind != kind:
            raise self.fail(expected or repr(kind))
        return self.next()

    def keyword(self, word: str) -> _Tok:
        if self.peek().kind != "ident" or self.peek().text != word:
            raise self.fail(repr(word))
        return self.next()

    def accept(self, kind: str) -> bool:
        if self.peek().kind == kind:
            self.pos += 1
            return True
        return False

    def comma_list(self, item, close: str) -> list:
        """``item (',' item)*`` up to ``close`` (not consumed); may be empty."""
        out = []
        while self.peek().kind != close:
            out.append(item())
            if not self.accept(","):
                break
        return out

    # -- module ----------------------------------------------------------------------

    def module(self) -> Module:
        headers = []
        while self.peek().kind != "eof":
            headers.append(self.header())
            self.skip_body()
        if not headers:
            raise self.fail("'func'")
        for h in headers:
            self.pos = h.body
            self.scopes = [h.scope]
            h.func.block.eqns, h.func.block.results = self.block_body("return")
        return Module([h.func for h in headers])

    def header(self) -> _Header:
        self.keyword("func")
        tok = self.expect("func", "a function name '@name'")
        name = self.func_name(tok)
        if name in self.funcs:
            raise self.error(tok, f"function @{name} defined twice")
        self.scopes = [{}]
        params = self.var_defs()
        self.expect("arrow", "'->'")
        self.expect("(")
        out_types = self.comma_list(self.type_, ")")
        self.expect(")")
        self.expect("{")
        self.expect("nl", "end of line after '{'")
        func = Func(name, Block(params), out_types)
        self.funcs[name] = func
        return _Header(func, self.pos, self.scopes[0])

    def skip_body(self) -> None:
        """Past the closing brace of the body whose first token is current."""
        depth = 1
        while depth:
            tok = self.next()
            if tok.kind == "eof":
                raise self.fail("'}' closing the function", tok)
            depth += {"{": 1, "}": -1}.get(tok.kind, 0)
        self.expect("nl", "end of line after '}'")

    # -- blocks and equations ----------------------------------------------------------

    def block_body(self, terminator: str) -> tuple[list[Eqn], list[Atom]]:
        """Equations up to ``terminator results`` and the closing brace."""
        eqns = []
        while not (self.peek().kind == "ident" and self.peek().text == terminator):
            if self.peek().kind in ("}", "eof"):
                raise self.fail(repr(terminator))
            eqns.append(self.eqn())
        self.next()
        results = self.comma_list(self.atom, "nl")
        self.expect("nl", "end of line")
        self.expect("}")
        self.expect("nl", "end of line after '}'")
        return eqns, results

    def eqn(self) -> Eqn:
        start = self.peek()
        outs: list[tuple[_Tok, Var]] = []
        if start.kind == "var":
            outs = self.comma_list(self.var_def, "=")
            self.expect("=")
        op = self.op()
        inputs = [] if self.peek().kind in ("{", "comment", "nl") else self.comma_list(
            self.atom, "nl")
        params = self.params(op)
        has_regions = self.accept("{")
        loc = self.loc() if self.peek().kind == "comment" else None
        self.expect("nl", "end of line")
        if has_regions != bool(op.blocks):
            raise self.error(start, f"{op.name} {'has' if op.blocks else 'has no'} regions")
        if has_regions:
            params |= {name: self.region(name) for name in op.blocks}
            self.expect("}")
            self.expect("nl", "end of line after '}'")
        eqn = Eqn(op, inputs, [v for _, v in outs], params, loc)
        self.check_types(eqn, start)
        self.define_all(outs)
        return eqn

    def op(self) -> Op:
        tok = self.expect("ident", "an op name")
        if tok.text not in OPS:
            raise self.error(tok, f"unknown op {tok.text!r}")
        return OPS[tok.text]

    def params(self, op: Op) -> dict[str, Any]:
        """``{k=v, ...}`` (absent when the op's only params are regions)."""
        tok = self.peek()
        params: dict[str, Any] = {}
        if tok.kind == "{" and self.peek(1).kind not in ("nl", "comment"):
            self.next()
            items = self.comma_list(self.param, "}")
            self.expect("}")
            params = dict(items)
            if len(params) != len(items):
                raise self.error(tok, f"{op.name}: a param is given twice")
        problem = param_problem(op, params, exclude=op.blocks)
        if problem:
            raise self.error(tok, f"{op.name}: {problem}")
        return params

    def param(self) -> tuple[str, Any]:
        tok = self.expect("ident", "a param name")
        self.expect("=")
        return tok.text, self.value()

    def region(self, name: str) -> Block:
        self.keyword(name)
        self.scopes.append({})
        try:
            params = self.var_defs()
            self.expect("{")
            self.expect("nl", "end of line after '{'")
            return Block(params, *self.block_body("yield"))
        finally:
            self.scopes.pop()

    def check_types(self, eqn: Eqn, tok: _Tok) -> None:
        """The written output types are what the op's shape rule gives."""
        where = f"{eqn.op.name}: "
        try:
            inferred = eqn.op.infer_types([a.type for a in eqn.inputs], eqn.params)
        except Exception as e:  # a shape rule given ill-formed operands may fail any way
            raise self.error(tok, str(e).split("\n")[0]) from None
        if len(inferred) != len(eqn.outputs):
            raise self.error(tok, f"{where}{len(inferred)} outputs, {len(eqn.outputs)} written")
        for v, t in zip(eqn.outputs, inferred, strict=True):
            if v.type != t:
                raise self.error(tok, f"{where}output type is {t}, written {v.type}")

    def loc(self) -> Loc:
        tok = self.next()
        parts = tok.text[1:].strip().rsplit(":", 2)
        if len(parts) != 3 or not all(_INT.fullmatch(p) for p in parts[1:]):
            raise self.fail("a location 'file:line:col'", tok)
        return Loc(parts[0], int(parts[1]), int(parts[2]))

    # -- values ------------------------------------------------------------------------

    def var_def(self) -> tuple[_Tok, Var]:
        """``%name:type`` (put in scope by ``define_all`` where the caller decides)."""
        tok = self.expect("var", "a value '%name'")
        self.expect(":")
        return tok, Var(self.type_())

    def var_defs(self) -> list[Var]:
        """Block parameters ``(%a:t, ...)``, in scope at once."""
        self.expect("(")
        defs = self.comma_list(self.var_def, ")")
        self.expect(")")
        return self.define_all(defs)

    def define_all(self, defs: list[tuple[_Tok, Var]]) -> list[Var]:
        for tok, v in defs:
            if any(tok.text in s for s in self.scopes):
                raise self.error(tok, f"{tok.text} is defined twice")
            self.scopes[-1][tok.text] = v
        return [v for _, v in defs]

    def atom(self) -> Atom:
        tok = self.peek()
        if tok.kind == "var":
            self.next()
            for scope in reversed(self.scopes):
                if tok.text in scope:
                    return scope[tok.text]
            raise self.error(tok, f"{tok.text} is not defined here")
        tree = self.lit_tree()
        self.expect(":")
        ttok = self.peek()
        t = self.type_()
        if not isinstance(t, TensorType):
            raise self.error(ttok, f"a literal cannot have type {t}")
        return Lit(self.lit_array(tree, t, tok), t)

    def lit_array(self, tree, t: TensorType, start: _Tok) -> np.ndarray:
        """The array of type ``t`` that the nested lists ``tree`` spell."""
        leaves: list[_Tok] = []

        def walk(node, shape):
            if not shape:
                if isinstance(node, list):
                    raise self.error(start, f"expected a scalar of {t}, found a list")
                leaves.append(node)
            elif not isinstance(node, list) or len(node) != shape[0]:
                raise self.error(start, f"expected a list of {shape[0]} elements for {t}")
            else:
                for x in node:
                    walk(x, shape[1:])

        walk(tree, t.shape)
        values = [self.scalar(tok, t.dtype) for tok in leaves]
        return np.array(values, dtype=t.dtype.np).reshape(t.shape)

    def scalar(self, tok: _Tok, dt: DType) -> bool | int | float:
        if dt.is_bool and tok.text in ("True", "False"):
            return tok.text == "True"
        if dt.is_int and _INT.fullmatch(tok.text):
            info = np.iinfo(dt.np)
            if info.min <= int(tok.text) <= info.max:
                return int(tok.text)
            raise self.error(tok, f"{tok.text} does not fit in {dt.name}")
        if dt.is_float and tok.text not in ("True", "False"):
            return float(tok.text)
        raise self.error(tok, f"{tok.text} is not a {dt.name} value")

    def lit_tree(self):
        """A scalar token, or nested lists of them."""
        if self.accept("["):
            items = self.comma_list(self.lit_tree, "]")
            self.expect("]")
            return items
        tok = self.peek()
        if tok.kind == "number" or tok.text in ("True", "False", "inf", "nan"):
            return self.next()
        raise self.fail("a value or a literal")

    def type_(self) -> Type:
        if self.peek().text == "stack":
            self.next()
            return StackType()
        start = self.peek()
        weak = self.accept("~")
        dt = self.dtype()
        self.expect("[")
        dims = self.comma_list(lambda: int(self.expect("number", "a dimension").text), "]")
        self.expect("]")
        try:
            return TensorType(tuple(dims), dt, weak)
        except ValueError as e:
            raise self.error(start, f"invalid type: {e}") from None

    def func_name(self, tok: _Tok) -> str:
        return self.unquote(tok, tok.text[1:]) if tok.text.startswith('@"') else tok.text[1:]

    def unquote(self, tok: _Tok, quoted: str) -> str:
        try:
            return json.loads(quoted)
        except json.JSONDecodeError as e:
            raise self.error(tok, f"bad string: {e.msg}") from None

    def dtype(self) -> DType:
        tok = self.expect("ident", "a type")
        if tok.text not in _DTYPES:
            raise self.error(tok, f"unknown dtype {tok.text!r}")
        return _DTYPES[tok.text]

    def value(self) -> Any:
        """A param value: number, bool, None, string, tuple, dtype, type or @function."""
        tok = self.peek()
        if tok.kind == "(":
            self.next()
            items = tuple(self.comma_list(self.value, ")"))
            self.expect(")")
            return items
        if tok.kind == "string":
            self.next()
            return self.unquote(tok, tok.text)
        if tok.kind == "func":
            self.next()
            name = self.func_name(tok)
            if name not in self.funcs:
                raise self.error(tok, f"no function @{name}")
            return self.funcs[name]
        if tok.text in _CONSTANTS:
            self.next()
            return _CONSTANTS[tok.text]
        if tok.kind in ("~", "ident") and (tok.text in ("~", "stack") or self.peek(1).kind == "["):
            return self.type_()
        if tok.kind == "ident":
            return self.dtype()
        if tok.kind == "number":
            self.next()
            return int(tok.text) if _INT.fullmatch(tok.text) else float(tok.text)
        raise self.fail("a param value")


_CONSTANTS = {"True": True, "False": False, "None": None, "inf": np.inf, "nan": np.nan}


def parse_module(text: str) -> Module:
    """The Module that ``text`` spells; its entry is the first function."""
    return _Parser(text).module()


def parse_func(text: str) -> Func:
    """The first function of ``text`` (the others are reachable through its calls)."""
    return parse_module(text).main
