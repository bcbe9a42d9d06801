"""Every transform accepts every callable: ``pb.jit`` objects, transform objects,
``functools.partial``, bound methods, lambdas and callable objects, called from plain
Python and from staged code; ``jit(jit(f))`` is ``jit(f)``; a transform built afresh on
every call finds what the first one compiled."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pullback as pb
from pullback import api

X = np.array([0.3, -1.2, 2.0])
V = np.array([1.0, 0.5, -2.0])


@pb.jit
def energy(x):  # a helper someone jitted on its own
    return np.sum(np.sin(x) ** 2)


def total(x):
    return energy(x) * 3  # called from other code


def energy_grad(x):
    return 2 * np.sin(x) * np.cos(x)


def test_the_issue_example_in_every_form():
    np.testing.assert_allclose(pb.grad(energy)(X), energy_grad(X))
    out, tangent = pb.jvp(energy, (X,), (V,))
    assert out == pytest.approx(energy(X))
    assert tangent == pytest.approx(energy_grad(X) @ V)
    assert pb.jit(total)(X) == pytest.approx(3 * np.sum(np.sin(X) ** 2))
    np.testing.assert_allclose(pb.grad(total)(X), 3 * energy_grad(X))
    np.testing.assert_allclose(pb.jit(pb.grad(total))(X), 3 * energy_grad(X))
    value, vjp_fn = pb.vjp(energy, X)
    np.testing.assert_allclose(vjp_fn(2.0)[0], 2 * energy_grad(X))
    for backend in ("interp", "c"):
        np.testing.assert_allclose(pb.jit(pb.grad(total), backend=backend)(X),
                                   3 * energy_grad(X))


def test_jit_of_jit_is_jit():
    assert pb.jit(energy) is energy
    inner = pb.jit(lambda x, n: x * n, static_argnames="n")
    outer = pb.jit(inner, static_argnames=("n",))
    assert outer is inner
    wider = pb.jit(pb.jit(lambda x, n, k: x * n + k, static_argnames="n"),
                   static_argnames="k")
    assert wider.static_argnames == ("n", "k")
    assert wider.fn.__name__ == "<lambda>" and not isinstance(wider.fn, api.Jitted)


def scale(x, n):
    return x * n


scale_jit = pb.jit(scale, static_argnames="n")


def test_a_jitted_helper_keeps_its_static_arguments():
    def caller(x):
        return np.sum(scale_jit(x, 3)) + np.sum(scale_jit(x, n=2))

    assert pb.jit(caller)(X) == pytest.approx(5 * np.sum(X))
    np.testing.assert_allclose(pb.grad(caller)(X), np.full(3, 5.0))

    def dynamic_static(x):
        return scale_jit(x, x[0])

    with pytest.raises(pb.ConcretizationError, match="static"):
        pb.jit(dynamic_static)(X)


class Model:
    def __init__(self, w):
        self.w = w

    @pb.jit
    def loss(self, x):
        return np.sum(self.w * x ** 2)

    def plain(self, x):
        return np.sum(np.tanh(self.w * x))

    def __call__(self, x):
        return np.sum(self.w * np.exp(x))


def _callables():
    m = Model(np.array([1.0, 2.0, 3.0]))
    w = m.w
    return {
        "function": (energy.fn, lambda x: 2 * np.sin(x) * np.cos(x)),
        "jit": (energy, energy_grad),
        "jit of jit": (pb.jit(pb.jit(energy)), energy_grad),
        "lambda": (lambda x: np.sum(x ** 3), lambda x: 3 * x ** 2),
        "partial": (functools.partial(lambda a, x: np.sum(a * x * x), 3.0),
                    lambda x: 6 * x),
        "partial of jit": (functools.partial(pb.jit(lambda x, a: np.sum(a * x * x)), a=2.0),
                           lambda x: 4 * x),
        "bound method": (m.plain, lambda x: w / np.cosh(w * x) ** 2),
        "jitted method": (m.loss, lambda x: 2 * w * x),
        "callable object": (m, lambda x: w * np.exp(x)),
        "checkpoint": (pb.checkpoint(energy), energy_grad),
        "custom_jvp": (_softplus_sum, lambda x: 1 / (1 + np.exp(-x))),
        "custom_vjp": (_doubled_sum, lambda x: np.full_like(x, 2.0)),
        "grad (summed)": (_summed(pb.grad(energy)),
                          lambda x: 2 * np.cos(2 * x)),
        "value_and_grad (summed)": (_summed_pair(pb.value_and_grad(energy)),
                                    lambda x: energy_grad(x) + 2 * np.cos(2 * x)),
    }


@pb.custom_jvp
def _softplus_sum(x):
    return np.sum(np.log1p(np.exp(x)))


@_softplus_sum.defjvp
def _softplus_sum_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _softplus_sum(x), np.sum(t / (1 + np.exp(-x)))


@pb.custom_vjp
def _doubled_sum(x):
    return np.sum(x * 2.0)


_doubled_sum.defvjp(lambda x: (_doubled_sum(x), np.ones_like(x)),
                    lambda ones, ct: (ct * 2.0 * ones,))


def _summed(g):
    return lambda x: np.sum(g(x))


def _summed_pair(g):
    def f(x):
        value, grad = g(x)
        return value + np.sum(grad)
    return f


CALLABLES = _callables()


@pytest.mark.parametrize("name", sorted(CALLABLES))
@pytest.mark.parametrize("backend", ["interp", "c"])
def test_every_transform_accepts_every_callable(name, backend):
    fn, grad = CALLABLES[name]
    want_value = np.sum(fn(X)) if not isinstance(fn, api.Jitted) else fn(X)
    want_grad = grad(X)
    jit = functools.partial(pb.jit, backend=backend)
    assert jit(fn)(X) == pytest.approx(want_value, rel=1e-12)
    np.testing.assert_allclose(jit(pb.grad(fn))(X), want_grad, rtol=1e-10)
    np.testing.assert_allclose(pb.grad(jit(fn))(X), want_grad, rtol=1e-10)
    value, g = pb.value_and_grad(fn)(X)
    assert value == pytest.approx(want_value, rel=1e-12)
    np.testing.assert_allclose(g, want_grad, rtol=1e-10)
    _, tangent = pb.jvp(fn, (X,), (V,))
    assert tangent == pytest.approx(want_grad @ V, rel=1e-10)
    _, vjp_fn = pb.vjp(fn, X)
    np.testing.assert_allclose(vjp_fn(1.0)[0], want_grad, rtol=1e-10)
    np.testing.assert_allclose(pb.jacrev(fn)(X), want_grad, rtol=1e-10)
    np.testing.assert_allclose(pb.jacfwd(fn)(X), want_grad, rtol=1e-10)

    def staged(x):  # called from staged code, and transformed there
        return fn(x) * 2.0 + np.sum(pb.grad(fn)(x) * x)

    assert jit(staged)(X) == pytest.approx(2 * want_value + want_grad @ X, rel=1e-10)
    assert pb.make_ir(pb.grad(fn))(X) is not None


def test_lower_make_ir_and_dump_work_on_transform_objects(capsys, monkeypatch):
    for fn in (pb.grad(energy), pb.jit(pb.grad(energy)), pb.hessian(energy),
               pb.checkpoint(energy), _doubled_sum):
        ir = pb.make_ir(fn)(X)
        assert "func @" in str(ir)
        for lowered in (pb.jit(fn).lower(X), fn.lower(X)):
            assert lowered.ir is not None and lowered.passes
    assert "pb_" in pb.jit(pb.grad(energy), backend="c").lower(X).source
    monkeypatch.setenv("PULLBACK_DUMP", "ir")
    pb.jit(pb.grad(lambda x: np.sum(np.cos(x) * 5.0)))(X)
    assert "sin" in capsys.readouterr().out  # the derivative of cos


def test_transforms_built_afresh_hit_the_cache(monkeypatch):
    stagings = []
    real = api.stage
    monkeypatch.setattr(api, "stage", lambda *a: stagings.append(a[2]) or real(*a))

    def f(x):
        return np.sum(np.sin(x) * x)

    w = np.array([1.0, 2.0, 3.0])
    for k in range(5):
        pb.grad(f)(X)
        pb.jit(pb.grad(pb.jit(f)))(X)
        pb.value_and_grad(lambda x: np.sum(w * x ** 2))(X)  # a new lambda each time
        pb.jvp(f, (X,), (V,))
        pb.vjp(f, X)[1](1.0)
        pb.hessian(lambda x: np.sum(x ** 4))(X)
        pb.grad(functools.partial(lambda a, x: np.sum(a * x), float(k)))(X)
    # one staging per computation; the partial binds a different value each time
    assert len(stagings) == 6 + 5, stagings

    def closure(c):
        return pb.grad(lambda x: np.sum(c * x))

    np.testing.assert_allclose(closure(2.0)(X), 2.0)  # closure values are in the key
    np.testing.assert_allclose(closure(3.0)(X), 3.0)
    a, b = np.ones(3), np.full(3, 2.0)
    np.testing.assert_allclose(closure(a)(X), a)  # arrays by identity, kept alive
    np.testing.assert_allclose(closure(b)(X), b)


def test_the_cache_key_holds_the_globals_a_function_reads():
    """Two jits of one lambda reading a global rebound in between are two computations
    (found by the composition matrix's author: the key once held only the module)."""
    global _H
    got = []
    for h in (np.sin, np.cos):
        _H = h
        got.append(pb.jit(lambda x: _H(x))(X))  # noqa: B023 (read when called: the point)
        got.append(pb.grad(lambda x: np.sum(_H(x)))(X))  # noqa: B023
    np.testing.assert_allclose(got[0], np.sin(X))
    np.testing.assert_allclose(got[1], np.cos(X))
    np.testing.assert_allclose(got[2], np.cos(X))
    np.testing.assert_allclose(got[3], -np.sin(X))


_H = np.sin


def _loop_sum(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.sin(x[i]) * x[i]
    return s


def test_a_composition_through_jit_is_the_direct_computation():
    """jit inside a transform or a caller costs nothing: the same IR as written directly."""
    import re

    jitted = pb.jit(_loop_sum)

    def text(fn):
        ir = str(pb.make_ir(fn)(np.linspace(0.1, 1.0, 4)))
        return re.sub(r"   # .*", "", ir).replace("@lambda", "@f").replace("@_loop_sum", "@f")

    for composed, direct in [
            (pb.grad(jitted), pb.grad(_loop_sum)),
            (pb.jit(pb.grad(jitted)), pb.grad(_loop_sum)),
            (pb.hessian(jitted), pb.hessian(_loop_sum)),
            (pb.grad(pb.checkpoint(jitted)), pb.grad(pb.checkpoint(_loop_sum))),
            (lambda x: jitted(x) * 2.0, lambda x: _loop_sum(x) * 2.0)]:
        assert text(composed) == text(direct)


def test_a_transform_of_a_jitted_function_runs_on_its_backend():
    """``pb.grad(pb.jit(f, backend=...))`` runs on that backend whatever the default
    (the suite's is the interpreter)."""
    def f(x):
        return np.sum(np.sin(x))

    for backend in ("c", "interp"):
        for t in (pb.grad(pb.jit(f, backend=backend)),
                  pb.jacfwd(pb.grad(pb.jit(f, backend=backend)))):
            assert t.jitted().backend == backend
    np.testing.assert_allclose(pb.grad(pb.jit(f, backend="c"))(np.ones(3)), np.cos(np.ones(3)))
