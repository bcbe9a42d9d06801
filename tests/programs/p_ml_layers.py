"""Neural-network building blocks as people write them in NumPy: layers, norms,
attention, recurrent cells unrolled over time, convolutions and pooling by loops and
slices, embeddings, and optimiser updates that return new parameters."""

from __future__ import annotations

import numpy as np

from programs.registry import program


def _normal(rng, shape, dtype=np.float64, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def _layer_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


@program(lambda rng: (_normal(rng, (4, 5)), _normal(rng, (5, 3)), _normal(rng, 3), "relu"),
         lambda rng: (_normal(rng, (2, 3), np.float32), _normal(rng, (3, 6), np.float32),
                      _normal(rng, 6, np.float32), "gelu"),
         lambda rng: (_normal(rng, (6, 2)), _normal(rng, (2, 2)), _normal(rng, 2), "sigmoid"),
         differentiable=(0, 1, 2))
def dense(x, w, b, activation):
    z = x @ w + b
    if activation == "relu":
        return np.maximum(z, 0)
    elif activation == "gelu":
        return _gelu(z)
    elif activation == "sigmoid":
        return _sigmoid(z)
    return z


@program(lambda rng: (_normal(rng, (8, 4)),
                      [_normal(rng, (4, 16), scale=0.5), _normal(rng, (16, 16), scale=0.25),
                       _normal(rng, (16, 2), scale=0.25)],
                      [_normal(rng, 16), _normal(rng, 16), _normal(rng, 2)]),
         lambda rng: (_normal(rng, (3, 2), np.float32), [_normal(rng, (2, 5), np.float32)],
                      [np.zeros(5, np.float32)]),
         differentiable=(0, 1, 2))
def mlp_forward(x, weights, biases):
    h = x
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        h = h @ w + b
        if i < len(weights) - 1:
            h = np.tanh(h)
    return _softmax(h)


@program(lambda rng: (_normal(rng, (3, 8), scale=3.0), _normal(rng, 8), _normal(rng, 8)),
         lambda rng: (_normal(rng, (2, 4, 6), np.float32), np.ones(6, np.float32),
                      np.zeros(6, np.float32)),
         differentiable=(0, 1, 2))
def layer_norm(x, gamma, beta):
    return _layer_norm(x, gamma, beta)


@program(lambda rng: (_normal(rng, (5, 4)), _normal(rng, 4), rng.uniform(0.5, 2.0, 4),
                      _normal(rng, 4), _normal(rng, 4)),
         lambda rng: (_normal(rng, (2, 3, 4, 4), np.float32), _normal(rng, 3, np.float32),
                      rng.uniform(0.5, 2.0, 3).astype(np.float32), np.ones(3, np.float32),
                      np.zeros(3, np.float32)),
         differentiable=(0, 1, 2, 3, 4))
def batch_norm_inference(x, running_mean, running_var, gamma, beta):
    if x.ndim == 4:
        shape = (1, -1, 1, 1)
        running_mean, running_var = running_mean.reshape(shape), running_var.reshape(shape)
        gamma, beta = gamma.reshape(shape), beta.reshape(shape)
    inv = 1.0 / np.sqrt(running_var + 1e-5)
    return (x - running_mean) * inv * gamma + beta


@program(lambda rng: (_normal(rng, (4, 6), scale=5.0), -1),
         lambda rng: (_normal(rng, (3, 5), np.float32, scale=5.0), 0),
         differentiable=(0,))
def softmax_and_log_softmax(logits, axis):
    top = np.max(logits, axis=axis, keepdims=True)
    shifted = logits - top
    lse = np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    log_probs = shifted - lse
    return np.exp(log_probs), log_probs


@program(lambda rng: (_normal(rng, (6, 5), scale=2.0), rng.integers(0, 5, 6)),
         lambda rng: (_normal(rng, (4, 3), np.float32, scale=2.0),
                      rng.integers(0, 3, 4).astype(np.int32)),
         differentiable=(0,))
def cross_entropy(logits, labels):
    m = logits.max(axis=1, keepdims=True)
    log_z = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
    picked = logits[np.arange(len(labels)), labels]
    loss = np.mean(log_z - picked)
    accuracy = np.mean(np.argmax(logits, axis=1) == labels)
    return loss, accuracy


@program(lambda rng: (_normal(rng, (5, 4)), rng.integers(0, 4, 5), 0.1),
         lambda rng: (_normal(rng, (3, 6), np.float32), rng.integers(0, 6, 3), 0.0),
         differentiable=(0, 2))
def label_smoothed_nll(logits, labels, smoothing):
    n, k = logits.shape
    top = logits.max(axis=1, keepdims=True)
    log_probs = logits - top - np.log(np.sum(np.exp(logits - top), axis=1, keepdims=True))
    target = np.full((n, k), smoothing / k, dtype=logits.dtype)
    target[np.arange(n), labels] += 1.0 - smoothing
    return -np.sum(target * log_probs) / n


@program(lambda rng: (_normal(rng, (5, 4)), _normal(rng, (5, 4)), _normal(rng, (5, 3)), False),
         lambda rng: (_normal(rng, (6, 8)), _normal(rng, (6, 8)), _normal(rng, (6, 8)), True),
         lambda rng: (_normal(rng, (3, 2), np.float32), _normal(rng, (3, 2), np.float32),
                      _normal(rng, (3, 2), np.float32), True),
         differentiable=(0, 1, 2))
def attention(q, k, v, causal):
    scores = q @ k.T / np.sqrt(q.shape[-1])
    if causal:
        n = scores.shape[0]
        mask = np.triu(np.ones((n, n), dtype=bool), k=1)
        scores = np.where(mask, -1e9, scores)
    return _softmax(scores) @ v


@program(lambda rng: (_normal(rng, (5, 8)), _normal(rng, (8, 8), scale=0.3),
                      _normal(rng, (8, 8), scale=0.3), _normal(rng, (8, 8), scale=0.3),
                      _normal(rng, (8, 8), scale=0.3), 2),
         lambda rng: (_normal(rng, (4, 6), np.float32), _normal(rng, (6, 6), np.float32, 0.3),
                      _normal(rng, (6, 6), np.float32, 0.3), _normal(rng, (6, 6), np.float32, 0.3),
                      _normal(rng, (6, 6), np.float32, 0.3), 3),
         differentiable=(0, 1, 2, 3, 4))
def multi_head_attention(x, wq, wk, wv, wo, n_heads):
    t, d = x.shape
    hd = d // n_heads

    def split(m):
        return m.reshape(t, n_heads, hd).transpose(1, 0, 2)

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
    heads = _softmax(scores) @ v
    return heads.transpose(1, 0, 2).reshape(t, d) @ wo


@program(lambda rng: (_normal(rng, (7, 3)), np.zeros(4), _normal(rng, (3, 4), scale=0.5),
                      _normal(rng, (4, 4), scale=0.5), _normal(rng, 4)),
         lambda rng: (_normal(rng, (5, 2), np.float32), _normal(rng, 3, np.float32),
                      _normal(rng, (2, 3), np.float32, 0.5), _normal(rng, (3, 3), np.float32, 0.5),
                      np.zeros(3, np.float32)),
         differentiable=(0, 1, 2, 3, 4))
def rnn_tanh(xs, h0, wx, wh, b):
    h = h0
    states = np.zeros((xs.shape[0], h0.shape[0]), dtype=h0.dtype)
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ wx + h @ wh + b)
        states[t] = h
    return states, h


def _lstm_params(rng, d_in, d_h, dtype):
    return {"w": _normal(rng, (d_in + d_h, 4 * d_h), dtype, 0.4),
            "b": _normal(rng, 4 * d_h, dtype, 0.1)}


@program(lambda rng: (_normal(rng, (6, 2, 3)), _lstm_params(rng, 3, 4, np.float64)),
         lambda rng: (_normal(rng, (4, 1, 2), np.float32), _lstm_params(rng, 2, 3, np.float32)),
         differentiable=(0, 1))
def lstm(xs, params):
    steps, batch, _ = xs.shape
    hidden = params["b"].shape[0] // 4
    h = np.zeros((batch, hidden), dtype=xs.dtype)
    c = np.zeros_like(h)
    for t in range(steps):
        z = np.concatenate([xs[t], h], axis=1) @ params["w"] + params["b"]
        i, f, g, o = np.split(z, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
    return h, c


@program(lambda rng: (_normal(rng, (5, 3)), _normal(rng, (3, 12), scale=0.5),
                      _normal(rng, (4, 12), scale=0.5), _normal(rng, 12, scale=0.1)),
         lambda rng: (_normal(rng, (3, 2), np.float32), _normal(rng, (2, 6), np.float32, 0.5),
                      _normal(rng, (2, 6), np.float32, 0.5), np.zeros(6, np.float32)),
         differentiable=(0, 1, 2, 3))
def gru(xs, w, u, b):
    hidden = u.shape[0]
    h = np.zeros(hidden, dtype=xs.dtype)
    outputs = []
    for x in xs:
        gx, gh = x @ w + b, h @ u
        r = _sigmoid(gx[:hidden] + gh[:hidden])
        z = _sigmoid(gx[hidden:2 * hidden] + gh[hidden:2 * hidden])
        n = np.tanh(gx[2 * hidden:] + r * gh[2 * hidden:])
        h = (1.0 - z) * n + z * h
        outputs.append(h)
    return np.stack(outputs)


@program(lambda rng: (_normal(rng, 20), _normal(rng, 3)),
         lambda rng: (_normal(rng, 9, np.float32), _normal(rng, 4, np.float32)),
         differentiable=(0, 1))
def conv1d_valid_loop(x, w):
    k = len(w)
    out = np.zeros(len(x) - k + 1, dtype=x.dtype)
    for i in range(len(out)):
        out[i] = np.sum(x[i:i + k] * w)
    return out


@program(lambda rng: (_normal(rng, (3, 16)), _normal(rng, (4, 3, 3)), _normal(rng, 4), 2),
         lambda rng: (_normal(rng, (2, 7), np.float32), _normal(rng, (3, 2, 2), np.float32),
                      np.zeros(3, np.float32), 1),
         differentiable=(0, 1, 2))
def conv1d_channels_stride(x, w, b, stride):
    c_out, _, k = w.shape
    padded = np.pad(x, ((0, 0), (k // 2, k // 2)))
    n_out = (padded.shape[1] - k) // stride + 1
    out = np.empty((c_out, n_out), dtype=x.dtype)
    for i in range(n_out):
        window = padded[:, i * stride:i * stride + k]
        out[:, i] = np.tensordot(w, window, axes=([1, 2], [0, 1])) + b
    return np.maximum(out, 0.0)


@program(lambda rng: (_normal(rng, (5, 5)), _normal(rng, (3, 3))),
         lambda rng: (_normal(rng, (4, 6), np.float32), _normal(rng, (2, 2), np.float32)),
         differentiable=(0, 1))
def conv2d_loops(image, kernel):
    kh, kw = kernel.shape
    oh, ow = image.shape[0] - kh + 1, image.shape[1] - kw + 1
    out = np.zeros((oh, ow), dtype=image.dtype)
    for i in range(oh):
        for j in range(ow):
            out[i, j] = np.sum(image[i:i + kh, j:j + kw] * kernel)
    return out


@program(lambda rng: (_normal(rng, (2, 12)), 3),
         lambda rng: (_normal(rng, (3, 8), np.float32), 2),
         differentiable=(0,))
def max_pool1d(x, size):
    c, n = x.shape
    pooled = x[:, :n - n % size].reshape(c, n // size, size).max(axis=2)
    looped = np.stack([x[:, i:i + size].max(axis=1) for i in range(0, n - size + 1, size)],
                      axis=1)
    return pooled, pooled - looped


@program(lambda rng: (_normal(rng, (6, 6)),),
         lambda rng: (_normal(rng, (4, 8), np.float32),),
         differentiable=(0,))
def max_pool2d(image):
    h, w = image.shape
    out = np.empty((h // 2, w // 2), dtype=image.dtype)
    for i in range(0, h, 2):
        for j in range(0, w, 2):
            out[i // 2, j // 2] = image[i:i + 2, j:j + 2].max()
    return out


@program(lambda rng: (_normal(rng, (4, 6)), _normal(rng, (6, 12), scale=0.4), _normal(rng, 12),
                      _normal(rng, (12, 6), scale=0.3), _normal(rng, 6), np.ones(6),
                      np.zeros(6)),
         lambda rng: (_normal(rng, (2, 3), np.float32), _normal(rng, (3, 4), np.float32, 0.4),
                      np.zeros(4, np.float32), _normal(rng, (4, 3), np.float32, 0.3),
                      np.zeros(3, np.float32), np.ones(3, np.float32), np.zeros(3, np.float32)),
         differentiable=(0, 1, 2, 3, 4, 5, 6))
def residual_block(x, w1, b1, w2, b2, gamma, beta):
    h = _layer_norm(x, gamma, beta)
    h = _gelu(h @ w1 + b1) @ w2 + b2
    return x + h


@program(lambda rng: (_normal(rng, (10, 4)), rng.integers(0, 10, (3, 5))),
         lambda rng: (_normal(rng, (6, 3), np.float32), rng.integers(0, 6, 4).astype(np.int32)),
         differentiable=(0,))
def embedding_mean_pool(table, ids):
    vectors = table[ids]
    pooled = vectors.mean(axis=-2)
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)


@program(lambda rng: ({"w": _normal(rng, (3, 2)), "b": _normal(rng, 2)},
                      {"w": _normal(rng, (3, 2)), "b": _normal(rng, 2)},
                      {"w": np.zeros((3, 2)), "b": np.zeros(2)},
                      {"w": np.zeros((3, 2)), "b": np.zeros(2)}, 1, 1e-3),
         lambda rng: ({"k": _normal(rng, 4, np.float32)}, {"k": _normal(rng, 4, np.float32)},
                      {"k": _normal(rng, 4, np.float32, 0.1)},
                      {"k": rng.uniform(0.0, 0.1, 4).astype(np.float32)}, 5, 0.01),
         differentiable=(0, 1, 2, 3, 5))
def adam_step(params, grads, m, v, t, lr):
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    new_params, new_m, new_v = {}, {}, {}
    for name in params:
        new_m[name] = beta1 * m[name] + (1 - beta1) * grads[name]
        new_v[name] = beta2 * v[name] + (1 - beta2) * grads[name] ** 2
        m_hat = new_m[name] / (1 - beta1 ** t)
        v_hat = new_v[name] / (1 - beta2 ** t)
        new_params[name] = params[name] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return new_params, (new_m, new_v, t + 1)


@program(lambda rng: ([_normal(rng, (3, 3)), _normal(rng, 3)], _normal(rng, (8, 3)),
                      _normal(rng, 8), 0.05, 10),
         lambda rng: ([_normal(rng, (2, 2), np.float32), _normal(rng, 2, np.float32)],
                      _normal(rng, (5, 2), np.float32), _normal(rng, 5, np.float32), 0.1, 4),
         differentiable=(0, 1, 2, 3))
def sgd_linear_regression(params, x, y, lr, steps):
    w, b = params
    losses = []
    for _ in range(steps):
        pred = (x @ w + b).sum(axis=1)
        err = pred - y
        grad_out = np.outer(2.0 * err / len(y), np.ones(w.shape[1], dtype=w.dtype))
        w = w - lr * x.T @ grad_out
        b = b - lr * grad_out.sum(axis=0)
        losses.append(np.mean(err ** 2))
    return [w, b], np.array(losses)


# --- the same, written with pullback's own model library (pb.nn, pb.optim) --------------


def _digits_like(rng, dtype=np.float64):
    return _normal(rng, (3, 1, 6, 6), dtype), rng.integers(0, 4, 3)


@program(lambda rng: _digits_like(rng), lambda rng: _digits_like(rng, np.float32),
         differentiable=(0,))
def nn_conv_classifier_loss(images, labels):
    """pb.nn layers from a fixed key: conv, ReLU, pool, dense, cross-entropy."""
    import pullback as pb
    from pullback import nn

    k1, k2 = pb.random.split(pb.random.key(7), 2)
    conv = nn.Conv2d.init(k1, 1, 4, 3, padding=1, dtype=images.dtype)
    dense = nn.Linear.init(k2, 4 * 3 * 3, 4, dtype=images.dtype)
    h = nn.MaxPool2d(2)(nn.relu(conv(images)))
    return nn.softmax_cross_entropy_with_integer_labels(dense(h.reshape(h.shape[0], -1)),
                                                        labels)


@program(lambda rng: (_normal(rng, (2, 5, 3)), _normal(rng, (2, 5, 2)), 3),
         lambda rng: (_normal(rng, (3, 4, 3), np.float32), _normal(rng, (3, 4, 2), np.float32),
                      2))
def nn_lstm_adamw_steps(xs, targets, steps):
    """An LSTM regressor trained by a clipped AdamW, pb.optim's pure-function state
    threaded through a Python loop; the losses and the trained head."""
    import pullback as pb
    from pullback import nn, optim

    k1, k2 = pb.random.split(pb.random.key(3), 2)
    model = (nn.LSTM.init(k1, 3, 4, dtype=xs.dtype), nn.Linear.init(k2, 4, 2, dtype=xs.dtype))
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(0.05, weight_decay=0.01))

    def loss(m):
        hs, _ = m[0](xs)
        return nn.mse(m[1](hs), targets)

    state = opt.init(model)
    losses = []
    for _ in range(steps):
        value, grads = pb.value_and_grad(loss)(model)
        updates, state = opt.update(grads, state, model)
        model = optim.apply_updates(model, updates)
        losses.append(value)
    return np.array(losses), model[1].weight
