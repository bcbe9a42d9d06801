"""What the parts of the stager may rely on each other for.

One ``Stager`` stages a call; its parts live in one module each: expressions and values
(``stager.py``), statements (``statements.py``), control flow (``control.py``), calls
(``calls.py``) and functions staged on their own (``subfunction.py``).  Each part is a
mixin deriving from ``Staging``, and so is typed by it: what a part uses of another is
listed here, with the module that implements it.  The handlers given the stager as an
argument (``builtins.py``, ``idioms.py``, ``regions.py``, ``views.py``) take a
``Staging`` too.  ``Stager`` cannot be made while one of these is missing.
"""

from __future__ import annotations

import ast
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from ..errors import Loc
from ..ir.core import Atom
from .iteration import Counted
from .outside import Outside
from .scope import FLAGS, Frame, StagedFunction
from .source import Source
from .values import Ref


class Staging(ABC):
    """The stager as its parts see it."""

    # -- limits (stager.py) ----------------------------------------------------------
    MAX_UNROLL: ClassVar[int]  # items unrolled at compile time, per loop or sequence
    MAX_STATIC_DEPTH: ClassVar[int]  # calls staged inline inside each other
    GENERALISE_AT: ClassVar[int]  # recursion depth where depth counters become run-time
    MAX_STEPS: ClassVar[int]  # staged calls and unrolled iterations, in all

    # -- state (set in Stager.__init__) ----------------------------------------------
    frame: Frame | None  # the function being staged, ...
    src: Source | None  # ... and its source
    frames: list[Frame]  # the staged call stack
    active: list[tuple]  # keys of the user calls being staged
    recursive: dict[tuple, Any]  # recursive functions being staged, by call key
    region: int  # serial where the innermost dynamic region began (-1: none)
    steps: int  # against MAX_STEPS
    arguments: list[Ref]  # cells of the top-level arguments
    deferred: Exception | None  # the last error moved to run time
    in_rules: list  # custom-derivative functions whose rules are staged
    outside: Outside | None  # reads of globals and closure cells

    # -- expressions and values (stager.py) ------------------------------------------
    @abstractmethod
    def loc(self, node: ast.AST) -> Loc: ...

    @abstractmethod
    def eval(self, node: ast.expr) -> Any: ...

    @abstractmethod
    def test(self, node: ast.expr) -> bool | Atom:
        """The truth of a condition: a Python bool, or a 0-d bool IR value."""

    @abstractmethod
    def truth(self, v: Any) -> bool | Atom: ...

    @abstractmethod
    def truth_cell(self, v: Any) -> Ref: ...

    @abstractmethod
    def static_value(self, v: Any, what: str) -> Any: ...

    @abstractmethod
    def new(self, obj: Any) -> Any:
        """Record a container made while staging."""

    @abstractmethod
    def adopt(self, x: Any) -> Any: ...

    @abstractmethod
    def check_mutable(self, obj: Any, what: str) -> None: ...

    @abstractmethod
    def binop(self, name: str, a: Any, b: Any) -> Any: ...

    @abstractmethod
    def unary(self, name: str, v: Any) -> Any: ...

    @abstractmethod
    def not_(self, t: bool | Atom) -> Any: ...

    @abstractmethod
    def compare(self, op: ast.cmpop, a: Any, b: Any) -> Any: ...

    @abstractmethod
    def getattr(self, obj: Any, name: str) -> Any: ...

    @abstractmethod
    def getitem(self, obj: Any, idx: Any) -> Any: ...

    @abstractmethod
    def iterable(self, v: Any, node: ast.AST | None) -> Counted | list:
        """What ``for`` iterates: a ``Counted`` (may stay rolled) or a static list."""

    @abstractmethod
    def unroll(self, v: Any, node: ast.AST | None) -> list: ...

    # -- statements (statements.py) --------------------------------------------------
    @abstractmethod
    def exec_block(self, stmts: list[ast.stmt]) -> None: ...

    @abstractmethod
    def assign(self, target: ast.expr, value: Any) -> None: ...

    @abstractmethod
    def setitem(self, obj: Any, idx: Any, value: Any) -> None: ...

    @abstractmethod
    def inplace(self, name: str, a: Any, b: Any) -> Any: ...

    # -- control flow (control.py) ---------------------------------------------------
    @abstractmethod
    def branch_value(self, pred: Atom, then_fn: Callable[[], Any],
                     else_fn: Callable[[], Any]) -> Any:
        """The value of ``then_fn()`` or ``else_fn()`` as ``pred`` decides at run time."""

    @abstractmethod
    def branch(self, pred: Atom, then_fn: Callable[[], Any], else_fn: Callable[[], Any],
               value: bool = False) -> Any: ...

    @abstractmethod
    def flow(self, flags: tuple[str, ...] = FLAGS) -> tuple[bool | Atom, list[str]]:
        """Whether control has left the current statement list: static or run-time."""

    @abstractmethod
    def guarded(self, flow: Atom, names: list[str], rest: Callable[[], None]) -> None: ...

    @abstractmethod
    def carried_loop(self, names: set[str], form: Any, min_trips: int | None) -> None: ...

    # -- calls (calls.py) ------------------------------------------------------------
    @abstractmethod
    def call(self, fn: Any, args: list, kwargs: dict, node: ast.AST | None = None) -> Any: ...

    @abstractmethod
    def make_function(self, node: ast.FunctionDef | ast.Lambda) -> StagedFunction: ...

    @abstractmethod
    def budget(self) -> None:
        """Count one staged call or unrolled iteration against ``MAX_STEPS``."""

    # -- functions staged on their own (subfunction.py) ------------------------------
    @abstractmethod
    def stage_recursive(self, key: tuple, name: str, leaves: list, tree: Any,
                        enter: Callable[[dict], Any]) -> Any: ...

    @abstractmethod
    def recursive_call(self, key: tuple, leaves: list) -> Any: ...
