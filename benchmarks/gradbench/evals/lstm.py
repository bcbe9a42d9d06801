"""GradBench ``lstm``: ADBench's diagonal-weight LSTM loss over a character sequence.

Parameters, as the eval sends them: ``main_params`` (2 l, 4 b) holds per layer a row of
weights and a row of biases, each split into forget, input, output and change gates;
``extra_params`` (3, b) is the input weight, output weight and output bias; ``state``
(2 l, b) the initial hidden and cell rows per layer; ``sequence`` (c, b).
"""

from __future__ import annotations

import numpy as np

import pullback as pb

from .._entry import Entry


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x))."""
    return 1.0 / (1.0 + np.exp(-x))


def lstm_objective(main_params: np.ndarray, extra_params: np.ndarray, state: np.ndarray,
                   sequence: np.ndarray) -> np.float64:
    """Mean log-likelihood loss of predicting each character from the previous ones."""
    n_layers = main_params.shape[0] // 2
    b = sequence.shape[1]
    hidden = state[0::2].copy()
    cell = state[1::2].copy()
    total = 0.0
    for t in range(sequence.shape[0] - 1):
        x = sequence[t] * extra_params[0]
        for i in range(n_layers):
            w = main_params[2 * i]
            bias = main_params[2 * i + 1]
            h = hidden[i]
            forget = sigmoid(x * w[0:b] + bias[0:b])
            ingate = sigmoid(h * w[b:2 * b] + bias[b:2 * b])
            outgate = sigmoid(x * w[2 * b:3 * b] + bias[2 * b:3 * b])
            change = np.tanh(h * w[3 * b:] + bias[3 * b:])
            c = cell[i] * forget + ingate * change
            cell[i] = c
            x = outgate * np.tanh(c)
            hidden[i] = x
        ypred = x * extra_params[1] + extra_params[2]
        lse = np.log(np.sum(np.exp(ypred)) + 2.0)   # ADBench's log(sum exp + 2)
        total = total + np.sum(sequence[t + 1] * (ypred - lse))
    return -total / ((sequence.shape[0] - 1) * b)


_objective = pb.jit(lstm_objective)
_jacobian = pb.jit(pb.grad(lstm_objective, argnums=(0, 1)))


def _prepare(raw: dict) -> tuple:
    return tuple(np.asarray(raw[k], dtype=np.float64)
                 for k in ("main_params", "extra_params", "state", "sequence"))


def _post_jacobian(g: tuple) -> list:
    return np.concatenate([g[0].reshape(-1), g[1].reshape(-1)]).tolist()


FUNCTIONS = {
    "objective": Entry(_prepare, lambda a: _objective(*a), float),
    "jacobian": Entry(_prepare, lambda a: _jacobian(*a), _post_jacobian),
}
