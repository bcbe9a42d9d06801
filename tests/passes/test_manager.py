"""The pipeline: what reverse mode emits for a small loss, optimised; dumps after each
pass; the verifier names the pass that broke the IR."""

import re

import numpy as np
import pytest

import pullback as pb
from pullback.config import verifying, verifying_passes
from pullback.errors import VerifyError
from pullback.ir.builder import build_func
from pullback.ir.core import Lit
from pullback.ir.printer import format_func
from pullback.ir.types import TensorType, float64
from pullback.ops import elementwise as E
from pullback.passes import manager
from pullback.passes.manager import PIPELINE, optimize
from pullback.passes.walk import FunctionPass

from .passcheck import assert_same_outcome, count_eqns, golden, sample_args


def loss(x, w):
    h = np.tanh(x @ w)
    return np.sum(h * h) + 0.5 * np.sum(w)


def _without_locations(text: str) -> str:
    return re.sub(r"   # .*", "", text)


def test_the_gradient_of_a_small_loss():
    """Products with broadcast ones, repeated products and the unread value of the loss
    go; the constant gradient of ``0.5 * sum(w)`` is one broadcast literal."""
    x, w = np.ones((2, 3)), np.ones((3, 4))
    staged = pb.jit(pb.grad(loss, argnums=(0, 1))).specialise(x, w)[0].staged_func
    before = format_func(staged)
    out = optimize(staged)
    assert format_func(staged) == before
    assert _without_locations(format_func(out)) == golden("""
        func @loss(%0:f64[3,4], %1:f64[2,3]) -> (f64[2,3], f64[3,4]) {
          %2:f64[2,4] = dot_general %1, %0 {contract=((1,), (0,)), batch=((), ())}
          %3:f64[2,4] = tanh %2
          %4:f64[2,4] = mul %3, %3
          %5:f64[3,4] = broadcast_in_dim 0.5:f64[] {shape=(3, 4), dims=()}
          %6:f64[2,4] = add %3, %3
          %7:f64[2,4] = sub 1.0:~f64[], %4
          %8:f64[2,4] = mul %6, %7
          %9:f64[2,3] = dot_general %8, %0 {contract=((1,), (1,)), batch=((), ())}
          %10:f64[3,4] = dot_general %1, %8 {contract=((0,), (0,)), batch=((), ())}
          %11:f64[3,4] = add %5, %10
          return %9, %11
        }
    """)
    assert (count_eqns(staged), count_eqns(out)) == (19, 10)
    assert_same_outcome(out, staged, sample_args(staged))


def _tiny():
    return build_func("tiny", [TensorType((), float64)], lambda x: E.mul(E.add(x, 0.0), 1.0))


def test_dump_after_each_pass(monkeypatch, capsys):
    monkeypatch.setenv("PULLBACK_DUMP", "ir,passes")
    optimize(_tiny())
    headers = re.findall(r"^# after (\w+)$", capsys.readouterr().out, re.M)
    assert headers == [name for name, _ in PIPELINE]
    assert headers[0] == "inline" and headers.count("dce") == 2


def test_dump_ir_alone_prints_nothing_here(monkeypatch, capsys):
    monkeypatch.setenv("PULLBACK_DUMP", "ir")
    optimize(_tiny())
    assert capsys.readouterr().out == ""


def _broken_pipeline(monkeypatch, verify: str) -> list[str]:
    """The pipeline's first two passes, then one that breaks the IR, then a counter of
    the passes that ran after it; the list it counts in."""
    after: list[str] = []
    breaks = FunctionPass(lambda block, rw: setattr(block, "results", [Lit(np.float32(1))]))
    counts = FunctionPass(lambda block, rw: after.append("counts"))
    monkeypatch.setenv("PULLBACK_VERIFY", verify)
    monkeypatch.setattr(manager, "PIPELINE", [*PIPELINE[:2], ("breaks", breaks),
                                              ("counts", counts)])
    return after


def test_the_verifier_names_the_pass_that_broke_the_ir(monkeypatch):
    after = _broken_pipeline(monkeypatch, "passes")
    with pytest.raises(VerifyError, match="after pass breaks: @tiny: result 0 has type f32"):
        optimize(_tiny())
    assert after == []  # found before the next pass


def test_the_verifier_checks_the_pipelines_result_and_says_how_to_find_the_pass(monkeypatch):
    after = _broken_pipeline(monkeypatch, "1")
    with pytest.raises(VerifyError, match=r"after the passes \(PULLBACK_VERIFY=passes names "
                                          r"the one\): @tiny: result 0 has type f32"):
        optimize(_tiny())
    assert after == ["counts"]  # once, at the end


@pytest.mark.parametrize(("value", "on", "each"), [
    ("1", True, False), ("yes", True, False), ("passes", True, True), ("0", False, False),
    ("", False, False)])
def test_pullback_verify_zero_turns_the_verifier_off(monkeypatch, value, on, each):
    monkeypatch.setenv("PULLBACK_VERIFY", value)
    assert verifying() is on and verifying_passes() is each
