"""Python semantics at the edges: loops with else, break/continue/return at depth,
walrus, swaps, aliasing and views inside loops and branches, names set on some paths."""

import numpy as np

from programs.registry import program


@program(lambda rng: (rng.standard_normal((3, 4)),),
         lambda rng: (np.abs(rng.standard_normal((2, 3))),))
def nested_break(m):
    total = 0.0
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            if m[i, j] < 0:
                break
            total = total + m[i, j]
        else:
            total = total * 2
    return total


@program(lambda rng: (rng.standard_normal(7),))
def while_continue(x):
    i = 0
    s = 0.0
    while i < x.shape[0]:
        i += 1
        if x[i - 1] < 0:
            continue
        s += x[i - 1]
    return s, i


@program(lambda rng: (rng.standard_normal((3, 3)),), lambda rng: (np.zeros((2, 2)),))
def ret_nested(m):
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            if m[i, j] > 1.0:
                return i, j
    return -1, -1


@program(lambda rng: (rng.standard_normal((3, 2)),))
def rows_inplace(m):
    for row in m:
        row *= 2
    return m.sum()


@program(lambda rng: (rng.standard_normal(5), rng.standard_normal(6)))
def zip_enum(x, y):
    acc = np.zeros(2)
    for k, (a, b) in enumerate(zip(x, y, strict=False)):
        if a > b:
            acc[0] += a * k
        else:
            acc[1] += b
    return acc


@program(lambda rng: (rng.standard_normal(4), 1e-3))
def tuple_state(x, tol):
    state = (x, 0)
    while np.abs(state[0]).max() > tol:
        state = (state[0] * 0.5, state[1] + 1)
    return state


@program(lambda rng: (rng.standard_normal(3),))
def dict_state(x):
    d = {"a": x, "b": x.sum()}
    for _ in range(3):
        d = {"a": d["a"] + 1, "b": d["b"] * 2}
    return d


@program(lambda rng: (rng.standard_normal(3),))
def closure_loop(x):
    fs = [lambda v, k=k: v * k for k in range(3)]
    return sum(f(x) for f in fs)


@program(lambda rng: (rng.standard_normal(3), rng.standard_normal(3)))
def swap(x, y):
    for _ in range(3):
        x, y = y, x
    return x - y


@program(lambda rng: (rng.standard_normal(4),))
def alias_loop(x):
    y = x
    for i in range(x.shape[0]):
        y[i] = i * 1.0
    return x


@program(lambda rng: (rng.standard_normal(3),), lambda rng: (-np.abs(rng.standard_normal(3)),))
def cond_mut(x):
    if x[0] > 0:
        x[1] = 10.0
    else:
        x[2] = -10.0
    return x.sum()


@program(lambda rng: (rng.uniform(0, 50, 5),))
def walrus(x):
    n = 0
    while (m := x.max()) > 1.0:
        x = x / 2
        n += 1
    return x, n, m


@program(lambda rng: (rng.standard_normal(4),), lambda rng: (rng.standard_normal(4) * 1000,))
def fori_else(x):
    for v in x:
        if v > 100:
            found = True
            break
    else:
        found = False
    return found


@program(lambda rng: (rng.standard_normal(3), rng.standard_normal(3) * 3))
def chained(x, y):
    return bool(0 < x.sum() < y.sum() <= 100)


@program(lambda rng: (rng.standard_normal(6),))
def slices(x):
    v = x[::2]
    v[1] = 99.0
    w = x[1:][::-1]
    w[0] = -1.0
    return x


@program(lambda rng: (rng.standard_normal(3),), lambda rng: (-np.abs(rng.standard_normal(3)),))
def mixed_ifexp(x):
    return x.sum() if x.max() > 0 else x.dtype.type(0)


@program(lambda rng: (rng.standard_normal(5),), lambda rng: (rng.uniform(1, 2, 4),))
def early_return_mut(x):
    for i in range(x.shape[0]):
        x[i] = x[i] * 2
        if x[i] > 3:
            return i
    return -1
