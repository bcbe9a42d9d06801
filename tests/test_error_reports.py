"""What an error looks like to the user: it names the line of *their* program and shows
it, whether it was found while compiling or raised by compiled code on either backend,
and its traceback shows their frames, not pullback's (``PULLBACK_TRACEBACK=full`` shows
every frame)."""

from __future__ import annotations

import inspect
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

import pullback as pb
from pullback.ops import elementwise as E

PACKAGE = str(Path(pb.__file__).resolve().parent)


def _report(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))


def _files(e: BaseException) -> list[str]:
    return [frame.f_code.co_filename for frame, _ in traceback.walk_tb(e.__traceback__)]


#: Python 3.10's re-raise shows the one line of pullback that re-raised (tracebacks.public).
BOUNDARY_FRAMES = 0 if sys.version_info >= (3, 11) else 1


def _internal_frames(e: BaseException) -> int:
    return sum(f.startswith(PACKAGE) for f in _files(e))


def _line_of(fn, text: str) -> int:
    """The line number of the line of ``fn`` holding ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def ambiguous(x):
    if x > 0:
        return x
    return -x


def test_a_compile_time_error_shows_the_programs_frames_only():
    with pytest.raises(ValueError, match="ambiguous") as info:
        pb.jit(ambiguous)(np.ones(3))
    report = _report(info.value)
    assert f"{__file__}:{_line_of(ambiguous, 'if x > 0')}" in report
    assert "if x > 0:" in report
    assert _internal_frames(info.value) <= BOUNDARY_FRAMES, report
    assert __file__ in _files(info.value)


def test_full_tracebacks_on_request(monkeypatch):
    monkeypatch.setenv("PULLBACK_TRACEBACK", "full")
    with pytest.raises(ValueError, match="ambiguous") as info:
        pb.jit(ambiguous)(np.ones(3))
    assert _internal_frames(info.value) > BOUNDARY_FRAMES + 5


def _raises_at_compile_time(n):
    raise LookupError(f"no entry {n}")


def test_a_staged_raise_names_its_line_at_every_entry():
    def f(x):
        return x * _raises_at_compile_time(3)

    for entry in (pb.jit(f), pb.grad(f), pb.make_ir(f), pb.jit(f).lower):
        with pytest.raises(LookupError, match="no entry 3") as info:
            entry(2.0)
        report = _report(info.value)
        assert f"{__file__}:{_line_of(_raises_at_compile_time, 'raise LookupError')}" in report
        assert _internal_frames(info.value) <= BOUNDARY_FRAMES, report


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


def _flatten_pair(p):
    raise RuntimeError("cannot flatten this pair")


pb.register_pytree(Pair, _flatten_pair, lambda aux, leaves: Pair(*leaves))


def test_frames_of_the_programs_own_python_stay():
    """Python that pullback runs for the program (here a pytree's flatten) keeps its
    frames: they are the program's."""
    with pytest.raises(RuntimeError, match="cannot flatten") as info:
        pb.jit(lambda p: p.a)(Pair(np.ones(2), np.ones(2)))
    files = _files(info.value)
    assert files.count(__file__) == 2, _report(info.value)  # the call, the flatten
    assert _internal_frames(info.value) <= BOUNDARY_FRAMES, _report(info.value)


def test_an_internal_error_keeps_pullbacks_frames_in_its_cause(monkeypatch):
    def f(x):
        return np.sum(np.exp(x))

    def broken_infer(*args, **kwargs):
        raise KeyError("some internal table")

    monkeypatch.setattr(E.exp, "infer", broken_infer)
    with pytest.raises(pb.InternalError) as info:
        pb.jit(f)(np.ones(2))
    assert any(f.startswith(PACKAGE) for f in _files(info.value.__cause__))


def test_the_vjp_cotangent_shape_is_checked_without_internal_frames():
    out, vjp_fn = pb.vjp(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(ValueError, match=r"vjp: a cotangent of shape \(4,\) for a result of "
                       r"shape \(3,\)") as info:
        vjp_fn(np.ones(4))
    assert _internal_frames(info.value) <= BOUNDARY_FRAMES


# -- faults of compiled code ----------------------------------------------------------------


def index_twice(x, i):
    y = x * 2
    return y[i]


def checked(x):
    assert np.all(x > 0), "values must be positive"
    return np.mean(x)


def divide(a, b):
    return a / b


def stepped(x, step):
    s = 0.0
    for i in range(0, 10, step):
        s = s + x[i % x.shape[0]]
    return s


def gathered(x, idx):
    return np.sum(x[idx])


def factor(a):
    return np.linalg.cholesky(a)


def in_a_loop(x, n):
    s = 0.0
    k = 0
    while k < n:
        s = s + x[k]
        k += 1
    return s


FAULTS = [
    (index_twice, (np.ones(3), np.int64(5)), IndexError,
     "index 5 is out of bounds for axis 0 with size 3", "return y[i]"),
    (checked, (np.array([1.0, -2.0]),), AssertionError, "values must be positive", "assert"),
    (divide, (1.0, 0.0), ZeroDivisionError, "float division by zero", "return a / b"),
    (stepped, (np.arange(3.0), np.int64(0)), ValueError, "range() arg 3 must not be zero",
     "for i in range"),
    (gathered, (np.arange(5.0), np.array([0, 9])), IndexError,
     "index 9 is out of bounds for axis 0 with size 5", "x[idx]"),
    (factor, (-np.eye(2),), np.linalg.LinAlgError, "Matrix is not positive definite",
     "cholesky"),
    (in_a_loop, (np.ones(3), np.int64(4)), IndexError,
     "index 3 is out of bounds for axis 0 with size 3", "s = s + x[k]"),
]


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize(("fn", "args", "exc", "message", "text"), FAULTS,
                         ids=[f[0].__name__ for f in FAULTS])
def test_a_fault_names_the_programs_line(fn, args, exc, message, text, backend):
    with pytest.raises(exc) as plain:
        fn(*args)
    jitted = pb.jit(fn, backend=backend)
    for _ in range(2):  # the first call compiles; the second takes the fast entry
        with pytest.raises(exc) as info:
            jitted(*args)
        e = info.value
        assert type(e) is type(plain.value)
        assert str(e).startswith(message) and str(plain.value).startswith(message)
        report = _report(e)
        assert f"{__file__}:{_line_of(fn, text)}:" in report, report
        assert f"in {fn.__name__}" in report and text in report
        assert _internal_frames(e) <= BOUNDARY_FRAMES, report
    if backend == "c":
        staged, _ = jitted.specialise(*args)
        assert staged.runner is not None, "expected native code"


def test_a_fault_in_a_derivative_names_the_line():
    def loss(x, i):
        y = np.sin(x)
        return y[i] * 2.0

    for backend in ("interp", "c"):
        with pytest.raises(IndexError) as info:
            pb.jit(pb.grad(loss), backend=backend)(np.ones(3), np.int64(7))
        assert f"{__file__}:{_line_of(loss, 'return y[i]')}:" in _report(info.value)


def _same_code_elsewhere(x, i):
    return x[i] * 2.0


def _same_code(x, i):
    return x[i] * 2.0


def test_equal_code_at_two_places_names_each_its_own_line():
    """Functions compiling to the same C share a module unless their faults' lines differ:
    each names its own line."""
    for fn in (_same_code, _same_code_elsewhere, _same_code):
        with pytest.raises(IndexError) as info:
            pb.jit(fn, backend="c")(np.ones(2), np.int64(3))
        assert f"{__file__}:{_line_of(fn, 'return x[i]')}:" in _report(info.value)
