"""The public entry points: ``jit`` compiles a Python function per argument signature,
``make_ir`` shows what it compiles to.

A specialisation is made in four steps, each another layer's: stage (the frontend,
``frontend/specialise.py``: the signature of a call, which arguments are run-time values
and which are part of the cache key, and the function staged for it; a transform's
``__pb_stage__`` emits its IR there) → optimise (``passes.manager.optimize``) → compile
(the backend named by ``backend=`` or ``PULLBACK_BACKEND``: ``c`` by default, the
interpreter where no C compiler works) → call (a known specialisation goes straight
through the backend's fast entry, ``backends/c/call/fast.py``).  What is left here is
choosing among specialisations, writing back what a call wrote, and the fallbacks to
plain Python.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from . import config, numpy_api, tiered  # noqa: F401  (numpy_api registers the NumPy mappings)
from .backends import interp
from .errors import (
    CompileError,
    ConcretizationError,
    InternalError,
    UnsupportedError,
    internal_errors,
    warn_user,
)
from .frontend.lifting import has_ref
from .frontend.outside import current_inputs
from .frontend.specialise import Signature, Staged, signature, stage
from .frontend.stager import Stager
from .ir.core import Func
from .ir.verify import verify
from .keys import Registry, callable_key
from .passes.manager import optimize
from .tracebacks import BARE_RAISE_KEEPS_TRACEBACK, hide_internal_frames, public
from .tree import tree_leaves, tree_unflatten

if TYPE_CHECKING:
    from .backends.c import FastEntry

BACKENDS = ("interp", "c")


@dataclass
class Lowered:
    """One specialisation, stage by stage (``pb.jit(f).lower(*args)``)."""

    staged: Func  # the IR the frontend staged
    passes: list[tuple[str, Func]]  # the IR after each optimisation pass
    ir: Func  # the IR that runs
    backend: str
    donated: dict[int, int] = field(default_factory=dict)  # see ``donation``

    @property
    def source(self) -> str:
        """The generated C (the native backend's module for this IR)."""
        from .backends import c

        return c.source_of(self.ir, self.donated).text

    @property
    def loops(self) -> str:
        """The loop IR the C is printed from: kernels, buffers, library calls."""
        from .backends import c

        return c.source_of(self.ir, self.donated).loops

    def compile(self) -> Callable[..., list]:
        """A callable running the IR natively (``c``) or on the interpreter."""
        if self.backend == "c":
            from .backends import c

            return c.compile_func(self.ir, self.donated)
        return lambda *inputs: interp.run(self.ir, *inputs)


def donation(staged: Staged, sig: Signature, handed: Sequence[int]) -> dict[int, int]:
    """Which parameters of ``staged`` (positions ``handed`` among ``sig``'s leaves, in
    the order of the arguments) become which of its array results: the result is
    written into the argument's memory and the argument itself returned
    (``donate_argnums``; the C backend pairs them, ``plan.donation.entry_pairs``).  None
    where the function writes to its arguments (those writes come back to them); an
    argument it returns as it is (or a view of) is not written."""
    if not handed or staged.writeback or staged.outside_writeback:
        return {}
    from .backends.c.plan.donation import entry_pairs

    returned = {s[1] if s[0] == "arg" else s[1][1] for s in staged.outputs
                if s[0] == "arg" or (s[0] == "view" and s[1][0] == "arg")}
    params = [sig.dynamic.index(i) for i in handed if i in sig.dynamic and i not in returned]
    results = [k for k, spec in enumerate(o for o in staged.outputs if o[0] == "dyn")
               if spec[1] == "array"]
    return entry_pairs(staged.func, params, results)


def _compile(staged: Staged, backend: str, donated: dict[int, int]) -> None:
    """Native code for ``staged`` when the backend is ``c`` (``donated``: the parameters
    callers hand over, with the results they become), built now or, where the
    interpreter runs it quickly, on a thread from the end of its first call, which runs
    there (``tiered``)."""
    if backend != "c":
        return

    def build(quick: bool = False) -> Callable[..., list]:
        from .backends import c

        with tiered.BUILDING:
            return c.compile_func(staged.func, donated, quick=quick)

    if tiered.worth_it(staged.func):
        tiered.defer(staged, build)
    else:
        staged.runner = _native(staged, functools.partial(build, config.tiered()))
        upgrade = getattr(staged.runner, "upgrade", None)
        if upgrade is not None:  # not under BUILDING: other builds pass it
            tiered.defer(staged, upgrade, upgrade=True)


def _native(staged: Staged, build: Callable[[], Callable[..., list]]) -> Any:
    """What ``build`` returns: ``staged``'s native code, or None where the C backend
    cannot compile it yet and the interpreter runs it (with a warning once per reason)."""
    from .backends import c

    try:
        return build()
    except c.Unsupported as e:
        _warn_once(f"pullback: running {staged.func.name} on the interpreter: {e}")
    except c.NoCompilerError:
        c.warn_no_compiler_once()
    return None


def _switch(staged: Staged, build: Future | None) -> None:
    """Run ``staged`` natively from now on if its deferred ``build`` made native code;
    what the build raised is raised here, but for an upgrade's: the code it would have
    replaced goes on running, with a warning."""
    if build is None:
        return
    if staged.runner is not None and build.exception() is not None:
        _warn_once(f"pullback: {staged.func.name} goes on running the code built quickly "
                   f"for its first call: building it optimised failed: {build.exception()}")
        return
    staged.runner = _native(staged, build.result)


def finish_builds() -> None:
    """Wait for every native build still running on a thread of its own (``tiered``),
    so that every call from now on runs natively (a benchmark's timed calls), and for
    the C backend's one-time builds in the background (the precompiled prelude a
    machine's first modules start, the measurements of the machine started meanwhile),
    so that they do not share the cores with what is timed next; what a build raised is
    raised here."""
    for staged, build in tiered.wait_all():
        _switch(staged, build)
    compiler = sys.modules.get("pullback.backends.c.build.compiler")
    if compiler is not None:  # else no build has run
        compiler.wait_background()
        sys.modules["pullback.backends.c.build.tuning"].wait_later()  # compiler imports it


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)


def _output(value: np.ndarray, spec: tuple, inputs: list) -> Any:
    _, kind, weak = spec
    if weak:
        return value.item()
    if kind == "scalar":
        return value[()]
    if not value.flags.writeable or any(value is a for a in inputs):
        return value.copy()
    return value


def run(staged: Staged, sig: Signature, extra: Sequence[Any] = ()) -> Any:
    """Run a specialisation on the run-time leaves of a call's arguments (and on the
    values of its ``extra`` parameters); its result, and the arguments it mutates
    written back.  A specialisation whose native code is deferred (``tiered``) runs on
    the interpreter once, starting its build when that run ends; a later call waits for
    the build and runs natively.  One built quickly runs so until its optimised build,
    started when its first call ends, is ready: calls do not wait for that one."""
    if not tiered.pending(staged):
        return _run(staged, sig, extra)
    if tiered.upgrading(staged):
        _switch(staged, tiered.ready(staged))
    elif tiered.started(staged):
        _switch(staged, tiered.wait(staged))
    try:
        return _run(staged, sig, extra)
    finally:
        tiered.start(staged)


def _run(staged: Staged, sig: Signature, extra: Sequence[Any]) -> Any:
    leaves, outside = sig.leaves[:-1], sig.outside
    inputs = [leaves[i] for i in sig.dynamic]
    if staged.runner is not None:
        outs = staged.runner(*inputs, *extra, *outside)
    else:
        outs = interp.run(staged.func, *inputs, *extra, *outside)
    n = len(outs) - len(staged.writeback) - len(staged.outside_writeback)
    it = iter(outs[:n])
    def caller(whose: tuple) -> Any:
        kind, i = whose
        return leaves[i] if kind == "arg" else outside[i]

    def view(whose: tuple, recipes: tuple) -> Any:
        v = caller(whose)
        for recipe in recipes:
            v = recipe(v)
        return v

    result = [_output(next(it), s, [*inputs, *outside]) if s[0] == "dyn" else
              view(*s[1:]) if s[0] == "view" else
              caller(s) if s[0] in ("arg", "outside") else s[1] for s in staged.outputs]
    written = iter(outs[n:])
    for i, value in zip(staged.writeback, written, strict=False):
        np.copyto(leaves[i], value, casting="no")
    for k, value in zip(staged.outside_writeback, written, strict=False):
        np.copyto(outside[k], value, casting="no")
    return tree_unflatten(staged.out_tree, result)


class _Specialisations:
    """What every ``Jitted`` of one computation shares (see ``keys``): the compiled
    specialisations, the fast entry of the last call, the function's signature."""

    __slots__ = ("cache", "lock", "fast", "params", "ints")

    def __init__(self) -> None:
        self.cache: dict[tuple, list[Staged]] = {}  # per signature, newest first
        self.lock = threading.Lock()
        self.fast: FastEntry | None = None  # see backends.c.fast_entry
        self.params: inspect.Signature | None = None  # fn's signature, once asked
        self.ints: dict[str, set[int]] = {}  # Python-int arguments' values compiled for


_SPECIALISATIONS = Registry()

#: Values of one Python int argument a function is compiled for before pullback warns
#: that each value compiles anew (see ``Jitted._count_static_ints``).
MANY_STATIC_INTS = 8


class Jitted:
    """A compiled function: staged once per argument signature, then run."""

    def __init__(self, fn: Callable, static_argnames: Sequence[str], backend: str | None,
                 donate: Sequence[str] = ()):
        backend = backend or config.backend()
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; available: {', '.join(BACKENDS)}")
        if not callable(fn):
            raise TypeError(f"pb.jit: {type(fn).__name__} object is not callable")
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.static_argnames = tuple(static_argnames)
        self.backend = backend
        self.donate = tuple(donate)  # the arguments whose arrays callers hand over
        cells: list = []  # the closure cells the key met, in order (see frontend.outside)
        self._spec: _Specialisations = _SPECIALISATIONS.get(callable_key(self, cells=cells),
                                                            _Specialisations)
        self._cells = cells

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("jit", key_of(self.fn), self.static_argnames, self.backend, self.donate)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        """Met while staging: the wrapped function, staged where it is called."""
        if self.static_argnames:
            bound = self.signature().bind(*args, **kwargs)
            for name in self.static_argnames:
                if name in bound.arguments and has_ref(bound.arguments[name]):
                    raise ConcretizationError(
                        f"argument {name!r} of {self.__name__} is static (static_argnames) "
                        "but is given a run-time value here",
                        hint="pass a value known at compile time (a Python int, a shape, "
                        "a static argument of the caller)")
        return st.call(self.fn, args, kwargs)

    def signature(self) -> inspect.Signature:
        spec = self._spec
        if spec.params is None:
            spec.params = inspect.signature(self.fn)
        return spec.params

    #: Specialisations kept per argument signature for different outside values
    VARIANTS = 8

    @public
    def specialise(self, *args: Any, **kwargs: Any) -> tuple[Staged, Signature]:
        """The specialisation for this call, staged if there is none; the values it
        reads from outside are in the signature (``sig.outside``)."""
        spec = self._spec
        sig = signature(self.fn, args, kwargs, self.static_argnames, self.signature())
        found = self._variant(spec.cache.get(sig.key, ()), sig)
        if found is not None:
            return found, sig
        with spec.lock:
            variants = spec.cache.get(sig.key, [])
            found = self._variant(variants, sig)
            if found is None:
                found = self._build(sig, self._handed_over(sig, args, kwargs))
                self._count_static_ints(args, kwargs)
                if self._variant([found], sig) is None:
                    raise RuntimeError(f"pullback: compiling {self.__name__} changed the "
                                       "globals or closure values it reads")
                spec.cache[sig.key] = [found, *variants][:self.VARIANTS]
        return found, sig

    def _variant(self, variants: Sequence[Staged], sig: Signature) -> Staged | None:
        leaves = sig.leaves[:-1]
        for staged in variants:
            values = current_inputs(staged.captures, self._cells, leaves)
            if values is not None:
                sig.outside = values
                return staged
        return None

    def _handed_over(self, sig: Signature, args: tuple, kwargs: dict) -> list[int]:
        """The positions among ``sig``'s leaves of the arrays of donated arguments that
        no other argument holds too, in the order of the arguments."""
        if not self.donate:
            return []
        arguments = self.signature().bind(*args, **kwargs).arguments
        ids = {name: [id(x) for x in tree_leaves(v)] for name, v in arguments.items()}
        others = {i for n, v in ids.items() if n not in self.donate for i in v}
        position = {id(x): i for i, x in enumerate(sig.leaves[:-1])
                    if isinstance(x, np.ndarray)}
        handed = [position[i] for n in arguments if n in self.donate for i in ids[n]
                  if i in position and i not in others]
        return list(dict.fromkeys(handed))

    def _build(self, sig: Signature, handed: Sequence[int] = ()) -> Staged:
        """Stage, optimise and compile one specialisation (``handed``: the positions of
        leaves callers hand over, see ``donation``); anything but the errors a user may
        see becomes an ``InternalError`` naming where staging was."""
        name = getattr(self.fn, "__name__", "f").replace("<lambda>", "lambda")
        with internal_errors(self.fn):
            staged = stage(self.fn, sig, name, self._cells)
            if config.verifying():
                verify(staged.func)  # what staging made (optimize verifies what it makes)
            staged.staged_func, staged.func = staged.func, optimize(staged.func)
            if config.dumps("ir"):
                print(staged.func)
            _compile(staged, self.backend, donation(staged, sig, handed))
        return staged

    @public
    def wait(self) -> None:
        """Wait until the specialisations compiled so far whose first calls ran on the
        interpreter while their native code built (``tiered``) run natively (or are
        known not to); what a build raised is raised here."""
        for variants in list(self._spec.cache.values()):
            for staged in variants:
                _switch(staged, tiered.wait(staged))

    @public
    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """What this function compiles to for these arguments: the IR as staged and
        after each pass, and the C source."""
        staged, sig = self.specialise(*args, **kwargs)
        passes: list[tuple[str, Func]] = []
        with internal_errors(self.fn):
            optimize(staged.staged_func, trace=passes)
        return Lowered(staged.staged_func, passes, staged.func, self.backend,
                       donation(staged, sig, self._handed_over(sig, args, kwargs)))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            spec = self._spec
            fast = spec.fast
            if fast is not None and not kwargs:
                call, form, tree, taken, _, nest, pinned, captures, _ = fast
                for env, name, seen in pinned:
                    if env.get(name) is not seen:
                        break
                else:
                    if tree is None and taken is None and not captures:
                        out = call(args, form)
                    else:
                        out = fast.through(args, self._cells)
                    if out is not NotImplemented:
                        return out if nest is None else nest(out)
            try:
                staged, sig = self.specialise(*args, **kwargs)
            except (CompileError, InternalError):
                raise
            except Exception as e:  # the program's own, raised while staging ran it
                if hasattr(self.fn, "__pb_stage__") or not getattr(e, "_pullback_wrote", 0):
                    raise
                return self._as_plain_python(args, kwargs)  # after writes it made
            if staged.runner is None and not tiered.pending(staged) and self._as_python():
                return self.fn(*args, **kwargs)
            if staged.writeback or staged.outside_writeback:
                return self._run_writing(staged, sig, args, kwargs)
            result = run(staged, sig)
            if not kwargs and staged.runner is not None and not tiered.pending(staged):
                from .backends import c

                spec.fast = c.fast_entry(staged, sig, args) or spec.fast
            return result
        except Exception as e:  # the API's boundary (``tracebacks.public``, inline: no call)
            hide_internal_frames(e)
            if BARE_RAISE_KEEPS_TRACEBACK:
                raise
            raise e  # noqa: B904 (Python 3.10: re-raised with the filtered traceback)

    def _run_writing(self, staged: Staged, sig: Signature, args: tuple, kwargs: dict) -> Any:
        """A call that writes to the caller's arrays, which the compiled code does all at
        once when it returns.  Where plain Python would see more, the call runs as plain
        Python (a function only jitted) or is refused (a transform): where arrays it is
        given may overlap in memory (views of one base: a write to one changes another),
        and where it faults midway (the writes made before the fault stay made)."""
        plain = not hasattr(self.fn, "__pb_stage__")
        arrays = [a for a in (*(sig.leaves[i] for i in sig.dynamic), *sig.outside)
                  if type(a) is np.ndarray]
        if any(np.may_share_memory(a, b) for i, a in enumerate(arrays)
               for b in arrays[i + 1:] if a is not b):
            if not plain:
                raise UnsupportedError(
                    f"{self.__name__} writes to its arrays, and arrays it is given share "
                    "memory (views of one array): pullback would not see one write "
                    "through another", hint="pass copies (`.copy()`), or the base array")
            return self.fn(*args, **kwargs)
        try:
            return run(staged, sig)
        except (CompileError, InternalError):
            raise
        except Exception:
            if not plain:
                raise
        return self._as_plain_python(args, kwargs, printed=True)

    def _as_plain_python(self, args: tuple, kwargs: dict, printed: bool = False) -> Any:
        """A call that faulted, run again as plain Python: the compiled code wrote nothing
        to the caller's arrays, plain Python makes the writes before the fault and raises
        it (what the compiled code ``printed`` on the way is not printed twice)."""
        with contextlib.redirect_stdout(io.StringIO()) if printed else contextlib.nullcontext():
            return self.fn(*args, **kwargs)

    def _count_static_ints(self, args: tuple, kwargs: dict) -> None:
        """Warn once per argument when this function has been compiled for more than
        ``MANY_STATIC_INTS`` values of one Python int argument (a compile-time constant:
        each value compiles anew), unless it is static by name."""
        seen_by_name = self._spec.ints
        for name, value in self.signature().bind(*args, **kwargs).arguments.items():
            if type(value) is not int or name in self.static_argnames:
                continue
            seen = seen_by_name.setdefault(name, set())
            if len(seen) > MANY_STATIC_INTS:
                continue  # said already
            seen.add(value)
            if len(seen) > MANY_STATIC_INTS:
                warn_user(
                    f"pullback: {self.__name__} has been compiled for {len(seen)} values of "
                    f"its argument {name!r}: a Python int is a compile-time constant, so "
                    f"each new value compiles again.  Pass np.int64({name}) (or an array) "
                    "to make it a run-time value, or name it in static_argnames if one "
                    "compilation per value is intended")

    def _as_python(self) -> bool:
        """Whether a call runs ``fn`` itself: where no C compiler works, a function only
        jitted (no transform: ``fn`` is the program's own callable) runs as plain Python,
        which is exact and far faster than the interpreter (scalar loops: about 150x),
        once staging has accepted it.  An explicit ``backend="interp"`` and transforms
        run their IR on the interpreter."""
        if self.backend != "c" or hasattr(self.fn, "__pb_stage__"):
            return False
        from .backends.c.build import compiler

        return not compiler.have_compiler()

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)


def jit(fn: Callable | None = None, *, static_argnames: Sequence[str] | str = (),
        backend: str | None = None, donate_argnums: int | Sequence[int] = (),
        donate_argnames: Sequence[str] | str = ()) -> Any:
    """Compile ``fn``: staged from its source per argument signature, cached.

    ``donate_argnums``/``donate_argnames``: arguments whose arrays the caller hands over
    (a training step's parameters and optimiser state): each result of the same shape
    and dtype as one of them is written into that array's memory, in place, and the
    array itself is returned; the caller must not use the old values afterwards.  An
    array that cannot be written (read-only, or sharing memory with another argument)
    is copied instead; results never change, only which memory holds them."""
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    if isinstance(donate_argnames, str):
        donate_argnames = (donate_argnames,)
    if isinstance(donate_argnums, int):
        donate_argnums = (donate_argnums,)
    if fn is None:
        return lambda f: jit(f, static_argnames=static_argnames, backend=backend,
                             donate_argnums=donate_argnums, donate_argnames=donate_argnames)
    inner = fn.fn if isinstance(fn, Jitted) else fn
    donate = (*_names_of(inner, donate_argnums), *donate_argnames)
    if isinstance(fn, Jitted):  # jit(jit(f)) is jit(f)
        names = (*fn.static_argnames, *(n for n in static_argnames
                                        if n not in fn.static_argnames))
        donate = (*fn.donate, *(n for n in donate if n not in fn.donate))
        if names == fn.static_argnames and backend in (None, fn.backend) and \
                donate == fn.donate:
            return fn
        return Jitted(fn.fn, names, backend or fn.backend, donate)
    return Jitted(fn, static_argnames, backend, donate)


def _names_of(fn: Callable, argnums: Sequence[int]) -> tuple[str, ...]:
    """The names of ``fn``'s positional parameters ``argnums``."""
    if not argnums:
        return ()
    params = [p.name for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = []
    for k in argnums:
        if not isinstance(k, int) or not -len(params) <= k < len(params):
            raise ValueError(f"pb.jit: donate_argnums={tuple(argnums)!r} but "
                             f"{getattr(fn, '__name__', 'the function')} takes "
                             f"{len(params)} positional parameters")
        names.append(params[k])
    return tuple(names)


def make_ir(fn: Callable, *, static_argnames: Sequence[str] | str = ()) -> Callable[..., Func]:
    """``make_ir(f)(*args)``: the IR ``jit(f)`` runs for these arguments (printable)."""
    jitted = jit(fn, static_argnames=static_argnames)

    @public
    def ir(*args: Any, **kwargs: Any) -> Func:
        return jitted.specialise(*args, **kwargs)[0].func

    return ir
