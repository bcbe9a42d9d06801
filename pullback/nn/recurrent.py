"""Recurrent cells and the layers that run them over a sequence.

The weights follow torch's layout transposed to ``[in, out]`` (as ``Linear`` keeps them):
``w_ih [input, G*H]``, ``w_hh [H, G*H]``, biases ``[G*H]``, the ``G`` gates side by side
in torch's order (LSTM i, f, g, o; GRU r, z, n), so a torch checkpoint loads by
transposing.  Each step is one fused product per weight; the gates are slices of it.
A cell steps a batch ``x [B, F]``, state ``[B, H]``, or one example (``[F]``, ``[H]``).

The input's part of the pre-activations does not depend on the state, so a sequence layer
computes it for every step at once, ``xs [B, T, F] @ w_ih`` as one product before the time
loop (as torch and cuDNN do), and its gradient in ``w_ih`` and ``xs`` is then one product
over all steps after the backward loop instead of one small one per step; only
``h @ w_hh`` stays in the loop.  Where the hidden bias adds straight to the pre-activation
(RNN, LSTM) it joins the input's bias there, so each step adds one precomputed array to
its product (the backend folds that add into the product's store).

A sequence layer is a Python ``for`` loop over the time axis that writes each step's
output into a preallocated array.  Staged, that loop stays a loop (a list of outputs
stacked at the end would unroll it: staging the gradient of a 100-step LSTM took 10 s
unrolled, 0.2 s rolled), and its gradient runs it backwards from the saved steps.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from .. import random as prandom
from ..derivatives.custom import custom_vjp
from . import init as initialisers
from .activations import sigmoid

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]


@dataclasses.dataclass
class _Cell:
    """The parameters every cell has; subclasses say how many gates and how a step runs."""

    w_ih: Any
    w_hh: Any
    b_ih: Any
    b_hh: Any

    gates: ClassVar[int]
    #: whether ``b_hh`` adds to the pre-activation unscaled, so it can join ``b_ih``
    #: (not in the GRU, whose reset gate scales the hidden part after its bias)
    hidden_bias_joins: ClassVar[bool] = True

    @classmethod
    def init(cls, key: Any, input_size: int, hidden_size: int, *, bias: bool = True,
             dtype: Any = np.float32) -> Any:
        """torch's initialisation: every weight and bias U(-1/sqrt(H), 1/sqrt(H));
        ``bias=False`` leaves both biases None."""
        bound = 1.0 / np.sqrt(hidden_size)
        width = cls.gates * hidden_size
        k_ih, k_hh, k_bi, k_bh = prandom.split(key, 4)
        w_ih = initialisers.uniform(k_ih, (input_size, width), bound, dtype)
        w_hh = initialisers.uniform(k_hh, (hidden_size, width), bound, dtype)
        if not bias:
            return cls(w_ih, w_hh, None, None)
        return cls(w_ih, w_hh, initialisers.uniform(k_bi, (width,), bound, dtype),
                   initialisers.uniform(k_bh, (width,), bound, dtype))

    @property
    def hidden_size(self) -> int:
        return self.w_hh.shape[0]

    def input_part(self, x: Any) -> Any:
        """``x @ w_ih + b_ih`` (``+ b_hh`` where it joins): every gate's pre-activation
        from the input ``x [..., F]``, for one step or for a whole sequence at once."""
        y = x @ self.w_ih
        for b in (self.b_ih, self.b_hh if self.hidden_bias_joins else None):
            if b is not None:
                y = y + b
        return y

    def _hidden_part(self, h: Any) -> Any:
        """``h @ w_hh`` (``+ b_hh`` where it did not join the input's part)."""
        y = h @ self.w_hh
        return y if self.b_hh is None or self.hidden_bias_joins else y + self.b_hh

    def __call__(self, x: Any, state: Any) -> Any:
        """One step from the input ``x``."""
        return self.step(self.input_part(x), state)

    def step(self, xw: Any, state: Any) -> Any:
        """One step from the input's part of the pre-activations, ``input_part(x)``."""
        raise NotImplementedError

    def _zeros(self, batch: int) -> Any:
        return np.zeros((batch, self.hidden_size), self.w_hh.dtype)

    def initial_state(self, batch: int) -> Any:
        """The zero state for ``batch`` sequences."""
        return self._zeros(batch)

    @staticmethod
    def output(state: Any) -> Any:
        """The part of the state a layer emits at each step (the hidden state)."""
        return state


@dataclasses.dataclass
class RNNCell(_Cell):
    """Elman cell: ``h' = tanh(x @ w_ih + b_ih + h @ w_hh + b_hh)``."""

    gates: ClassVar[int] = 1

    def step(self, xw: Any, h: Any) -> Any:
        return np.tanh(xw + self._hidden_part(h))


@dataclasses.dataclass
class LSTMCell(_Cell):
    """Long short-term memory; the state is the pair ``(h, c)``."""

    gates: ClassVar[int] = 4

    def initial_state(self, batch: int) -> tuple[Any, Any]:
        return self._zeros(batch), self._zeros(batch)

    @staticmethod
    def output(state: tuple[Any, Any]) -> Any:
        return state[0]

    def step(self, xw: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        h, c, _ = _lstm_step(xw, *state, self.w_hh)
        return h, c


@dataclasses.dataclass
class GRUCell(_Cell):
    """Gated recurrent unit, as torch has it: the reset gate scales the hidden part of
    the candidate after its bias, ``n = tanh(x W_in + b_in + r * (h W_hn + b_hn))``, so
    the input and hidden products stay apart for the last third of the gates."""

    gates: ClassVar[int] = 3
    hidden_bias_joins: ClassVar[bool] = False

    def step(self, gi: Any, h: Any) -> Any:
        n = self.hidden_size
        gh = self._hidden_part(h)
        rz = sigmoid(gi[..., :2 * n] + gh[..., :2 * n])
        r, z = rz[..., :n], rz[..., n:]
        candidate = np.tanh(gi[..., 2 * n:] + r * gh[..., 2 * n:])
        return (1 - z) * candidate + z * h


@dataclasses.dataclass
class _Sequence:
    """A cell run over the time axis of batch-first inputs ``[B, T, F]``."""

    cell: Any

    cell_type: ClassVar[type]

    @classmethod
    def init(cls, key: Any, input_size: int, hidden_size: int, *, bias: bool = True,
             dtype: Any = np.float32) -> Any:
        return cls(cls.cell_type.init(key, input_size, hidden_size, bias=bias, dtype=dtype))

    def __call__(self, xs: Any, state: Any = None) -> tuple[Any, Any]:
        """``ys [B, T, H], last_state``; ``state`` defaults to the cell's zero state."""
        batch, steps = xs.shape[:2]
        if state is None:
            state = self.cell.initial_state(batch)
        # The first step fixes the state's dtype (NumPy's promotion of the inputs, weights
        # and initial state), so the loop's carried state and the outputs keep one type.
        xw = self.cell.input_part(xs)
        state = self.cell.step(xw[:, 0], state)
        first = self.cell.output(state)
        ys = np.empty((batch, steps, first.shape[-1]), first.dtype)
        ys[:, 0] = first
        for t in range(1, steps):
            state = self.cell.step(xw[:, t], state)
            ys[:, t] = self.cell.output(state)
        return ys, state


@dataclasses.dataclass
class RNN(_Sequence):
    """An ``RNNCell`` over a sequence; the last state is ``h [B, H]``."""

    cell_type: ClassVar[type] = RNNCell


@dataclasses.dataclass
class LSTM(_Sequence):
    """An ``LSTMCell`` over a sequence; the last state is ``(h, c)``.

    Its gradient is written out (``_lstm_layer``) rather than derived step by step, as
    torch and cuDNN do: the backward loop writes each step's pre-activation gradient into
    one array, so the hidden weight's gradient is one product over all steps after the
    loop (not one small product per step) and the input part's gradient is that array."""

    cell_type: ClassVar[type] = LSTMCell

    def __call__(self, xs: Any, state: Any = None) -> tuple[Any, Any]:
        if state is None:
            state = self.cell.initial_state(xs.shape[0])
        ys, h, c = _lstm_layer(self.cell.input_part(xs), *state, self.cell.w_hh)
        return ys, (h, c)


@dataclasses.dataclass
class GRU(_Sequence):
    """A ``GRUCell`` over a sequence; the last state is ``h [B, H]``."""

    cell_type: ClassVar[type] = GRUCell


def _lstm_step(xw: Any, h: Any, c: Any, w_hh: Any) -> tuple[Any, Any, Any]:
    """One LSTM step from the input part ``xw``: ``h, c`` and the gates ``[i f g o]``."""
    n = w_hh.shape[0]
    hw = h @ w_hh
    # One tanh over all four gates, sigmoid(x) = (1 + tanh(x / 2)) / 2: the gates are
    # one pass over the pre-activations and their gradient reads one saved array
    # (exp-based sigmoids kept three per gate on the tape).  Each part is scaled before
    # the sum, so the step's input part is read where the pass needs it rather than
    # copied into the product's result first.
    half = np.repeat(np.array([0.5, 0.5, 1.0, 0.5], hw.dtype), n)
    gates = np.tanh(hw * half + xw * half) * half + (1 - half)
    i, f = gates[..., :n], gates[..., n:2 * n]
    g, o = gates[..., 2 * n:3 * n], gates[..., 3 * n:]
    c = f * c + i * g
    return o * np.tanh(c), c, gates


def _lstm_run(xw: Any, h: Any, c: Any, w_hh: Any, save: bool) -> tuple[Any, ...]:
    """The layer's steps over ``xw [B, T, 4H]``: ``ys, h, c``, and where ``save`` what its
    gradient reads of every step: the gates ``[B, T, 4H]`` and the state ``h, c`` the
    step starts from ``[B, T, H]`` each.  The first step fixes the state's dtype (NumPy's
    promotion of the inputs, weights and initial state), so the loop's carried state and
    the outputs keep one type."""
    batch, steps = xw.shape[:2]
    h_in, c_in = h, c
    h, c, gates = _lstm_step(xw[:, 0], h, c, w_hh)
    ys = np.empty((batch, steps, h.shape[-1]), h.dtype)
    ys[:, 0] = h
    saved = ()
    if save:
        gs = np.empty((batch, steps, gates.shape[-1]), gates.dtype)
        hs, cs = np.empty_like(ys), np.empty_like(ys)
        gs[:, 0], hs[:, 0], cs[:, 0] = gates, h_in, c_in
        saved = (gs, hs, cs)
    for t in range(1, steps):
        if save:
            hs[:, t], cs[:, t] = h, c
        h, c, gates = _lstm_step(xw[:, t], h, c, w_hh)
        ys[:, t] = h
        if save:
            gs[:, t] = gates
    return ys, h, c, *saved


@custom_vjp
def _lstm_layer(xw: Any, h: Any, c: Any, w_hh: Any) -> tuple[Any, Any, Any]:
    """``ys [B, T, H]`` and the last ``h, c`` of an LSTM over the input parts ``xw``."""
    return _lstm_run(xw, h, c, w_hh, False)


def _lstm_fwd(xw: Any, h: Any, c: Any, w_hh: Any) -> tuple[Any, Any]:
    ys, h_last, c_last, gs, hs, cs = _lstm_run(xw, h, c, w_hh, True)
    return (ys, h_last, c_last), (gs, hs, cs, xw, h, c, w_hh)


def _lstm_bwd(res: Any, ct: Any) -> tuple[Any, Any, Any, Any]:
    """Backpropagation through time: each step's pre-activation gradient ``dz`` (the
    sigmoid gates' derivative ``s (1 - s)``, the tanh gate's ``1 - g^2``) goes into
    ``dzs``, the gradient of ``xw``; then ``w_hh``'s is ``h_prev^T @ dzs`` over all
    steps at once (``hs``: the hidden state each step starts from)."""
    gs, hs, cs, xw, h0, c0, w_hh = res
    dys, dh, dc = ct
    batch, steps, n = hs.shape
    dzs = np.empty_like(gs)
    for t in range(steps - 1, -1, -1):
        gates, c_prev = gs[:, t], cs[:, t]
        i, f = gates[:, :n], gates[:, n:2 * n]
        g, o = gates[:, 2 * n:3 * n], gates[:, 3 * n:]
        tc = np.tanh(f * c_prev + i * g)
        dh = dh + dys[:, t]
        dc = dc + dh * o * (1 - tc * tc)
        dz = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                             dc * i * (1 - g * g), dh * tc * o * (1 - o)], axis=-1)
        dzs[:, t] = dz
        dc = dc * f
        # dz @ w_hh.T as one contraction of both operands' last axes: no transpose of
        # w_hh for the loop to read (a compiled loop would copy it out first)
        dh = np.tensordot(dz, w_hh, axes=(-1, -1))
    dw = hs.reshape(batch * steps, n).T @ dzs.reshape(batch * steps, 4 * n)
    return tuple(_cotangent(d, x) for d, x in ((dzs, xw), (dh, h0), (dc, c0), (dw, w_hh)))


def _cotangent(d: Any, x: Any) -> Any:
    """``d``, the gradient of a value that ``x`` broadcast to (a state without the batch
    axis) and promoted, summed over the broadcast axes and in ``x``'s dtype."""
    if d.ndim > x.ndim:
        d = np.sum(d, axis=tuple(range(d.ndim - x.ndim)))
    ones = tuple(k for k in range(x.ndim) if x.shape[k] == 1 and d.shape[k] != 1)
    if ones:
        d = np.sum(d, axis=ones, keepdims=True)
    return d.astype(x.dtype)


_lstm_layer.defvjp(_lstm_fwd, _lstm_bwd)
