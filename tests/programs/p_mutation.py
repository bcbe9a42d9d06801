"""Programs that write into arrays: element and slice stores in loops, preallocated
buffers, arguments updated in place (the caller must see the change), aliases and
views written through, and classic in-place algorithms."""

from __future__ import annotations

import numpy as np

from programs.registry import program


@program(lambda rng: (rng.standard_normal(12),),
         lambda rng: (rng.standard_normal(7).astype(np.float32),),
         differentiable=(0,))
def fill_buffer_static(x):
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = x[i] * x[i] + i
    out[0] = 0.0
    return out


@program(lambda rng: (rng.standard_normal(10),),
         lambda rng: (rng.integers(-9, 10, 15),),
         lambda rng: (rng.integers(-9, 10, 6).astype(np.int32),),
         differentiable=(0,))
def prefix_sum_in_place(x):
    for i in range(1, len(x)):
        x[i] += x[i - 1]
    return x


@program(lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal(4)),
         lambda rng: (rng.integers(0, 10, (2, 5)), rng.integers(0, 3, 5)),
         lambda rng: (rng.standard_normal(6).astype(np.float32),
                      rng.standard_normal(6).astype(np.float32)),
         differentiable=())
def augmented_ops_on_argument(x, y):
    x += y
    x *= 2
    x -= y
    return None


@program(lambda rng: (rng.standard_normal(5),),
         lambda rng: (rng.integers(0, 100, 8),),
         differentiable=(0,))
def alias_then_write(x):
    y = x
    y[0] = 1
    z = y
    z[-1] += x[0]
    return x.sum()


@program(lambda rng: (rng.standard_normal((4, 3)), 2),
         lambda rng: (rng.integers(-5, 5, (3, 6)).astype(np.int32), 0),
         differentiable=(0,))
def zero_row_through_view(m, i):
    row = m[i]
    total = row.sum()
    row[:] = 0
    m[-1] += total
    return total


@program(lambda rng: (rng.standard_normal((5, 3)),),
         lambda rng: (rng.standard_normal((4, 4)).astype(np.float32),),
         differentiable=(0,))
def zero_largest_row(m):
    norms = np.sum(m * m, axis=1)
    i = np.argmax(norms)
    row = m[i]
    row *= 0.0
    return m, norms[i]


@program(lambda rng: (rng.standard_normal(10),),
         lambda rng: (rng.integers(0, 50, 9),),
         differentiable=(0,))
def write_through_slices(x):
    inner = x[1:-1]
    inner *= 2
    inner[0] = -1
    evens = x[::2]
    evens += 10
    tail = x[-3:]
    tail[::-1] = x[:3].copy()
    return x[2:5]


@program(lambda rng: (rng.standard_normal((4, 5)), rng.standard_normal(4)),
         lambda rng: (rng.standard_normal((3, 3)).astype(np.float32),
                      rng.standard_normal(3).astype(np.float32)),
         differentiable=(0, 1))
def set_columns(m, col):
    for j in range(m.shape[1]):
        m[:, j] = col * (j + 1) + m[:, j].mean()
    return m


@program(lambda rng: (rng.standard_normal((5, 3)), 1, 3),
         lambda rng: (rng.integers(0, 9, (4, 2)), 0, 3),
         differentiable=(0,))
def swap_rows_fancy(m, i, j):
    m[[i, j]] = m[[j, i]]
    return m[i] - m[j]


@program(lambda rng: (rng.standard_normal((4, 4)) + 4.0 * np.eye(4), rng.standard_normal(4)),
         lambda rng: (rng.standard_normal((6, 6)), rng.standard_normal(6)),
         lambda rng: ((rng.standard_normal((3, 3)) + 3.0 * np.eye(3)).astype(np.float32),
                      rng.standard_normal(3).astype(np.float32)),
         differentiable=(0, 1))
def gauss_elimination_in_place(a, b):
    """Overwrites ``a`` with its row-echelon form and ``b`` accordingly, as LAPACK would."""
    n = len(b)
    for k in range(n - 1):
        p = k + np.argmax(np.abs(a[k:, k]))
        if p != k:
            a[[k, p]] = a[[p, k]]
            b[[k, p]] = b[[p, k]]
        for r in range(k + 1, n):
            factor = a[r, k] / a[k, k]
            a[r, k:] -= factor * a[k, k:]
            b[r] -= factor * b[k]
    x = np.zeros_like(b)
    for i in range(n - 1, -1, -1):
        x[i] = (b[i] - a[i, i + 1:] @ x[i + 1:]) / a[i, i]
    return x


@program(lambda rng: (rng.standard_normal(9),),
         lambda rng: (rng.integers(-20, 20, 12),),
         lambda rng: (rng.permutation(8).astype(np.int32),),
         lambda rng: (np.arange(5.0),),
         differentiable=())
def bubble_sort_in_place(x):
    n = len(x)
    swapped = True
    passes = 0
    while swapped:
        swapped = False
        for j in range(n - 1 - passes):
            if x[j] > x[j + 1]:
                x[j], x[j + 1] = x[j + 1], x[j]
                swapped = True
        passes += 1
    return passes


@program(lambda rng: (rng.standard_normal(10),),
         lambda rng: (rng.integers(0, 6, 11).astype(np.int32),),
         differentiable=(0,))
def insertion_sort_copy(values):
    x = values.copy()
    for i in range(1, len(x)):
        key = x[i]
        j = i - 1
        while j >= 0 and x[j] > key:
            x[j + 1] = x[j]
            j -= 1
        x[j + 1] = key
    return x


@program(lambda rng: (rng.standard_normal(8), rng.permutation(8)[:5], rng.standard_normal(5)),
         lambda rng: (rng.integers(0, 9, 6).astype(np.int32), np.array([4, -1, 0]),
                      np.array([7, 8, 9], np.int32)),
         differentiable=(0, 2))
def scatter_set_and_add(x, idx, v):
    y = x.copy()
    y[idx] = v
    x[idx] += 2 * v
    return y


@program(lambda rng: (rng.standard_normal((6, 3)), rng.permutation(6)[:4].astype(np.int32)),
         differentiable=(0,))
def scatter_rows(m, rows):
    m[rows, 1:] = m[rows, :-1] * 2.0
    m[rows[::-1], 0] += np.arange(len(rows))
    return m


@program(lambda rng: (rng.uniform(0.0, 1.0, 40), 5),
         lambda rng: (rng.uniform(0.0, 1.0, 25).astype(np.float32), 3),
         differentiable=())
def histogram_counts(values, nbins):
    counts = np.zeros(nbins, dtype=np.int64)
    for v in values:
        b = min(np.floor(v * nbins).astype(np.int64), nbins - 1)
        counts[b] += 1
    return counts


@program(lambda rng: (rng.standard_normal(20),),
         lambda rng: (rng.integers(-5, 5, 12),),
         lambda rng: (-np.ones(4),),
         differentiable=(0,))
def compact_positive(x):
    out = np.zeros_like(x)
    k = 0
    for v in x:
        if v > 0:
            out[k] = v
            k += 1
    return out, k


@program(lambda rng: (rng.uniform(0.1, 1.0, 30), 4.0),
         lambda rng: (rng.uniform(0.1, 1.0, 10).astype(np.float32), 100.0),
         differentiable=(0,))
def fill_until_budget(costs, budget):
    chosen = np.zeros_like(costs)
    spent = costs.dtype.type(0)
    k = 0
    while k < len(costs) and spent + costs[k] <= budget:
        chosen[k] = costs[k]
        spent = spent + costs[k]
        k += 1
    return chosen, k


@program(lambda rng: (rng.standard_normal(6), 4),
         lambda rng: (rng.standard_normal(3).astype(np.float32), 5),
         differentiable=(0,))
def lower_triangle_fill(x, n):
    m = np.zeros((n, len(x)), dtype=x.dtype)
    for i in range(n):
        k = min(i + 1, len(x))
        m[i, :k] = x[:k] * (i + 1)
    return m


@program(lambda rng: (rng.standard_normal((4, 4)),),
         lambda rng: (rng.integers(0, 9, (3, 3)),),
         differentiable=(0,))
def transpose_in_place(m):
    n = m.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            m[i, j], m[j, i] = m[j, i], m[i, j]
    return np.trace(m)


@program(lambda rng: (rng.standard_normal(9),),
         lambda rng: (rng.integers(0, 9, 6).astype(np.int32),),
         differentiable=())
def reverse_two_pointers(x):
    i, j = 0, len(x) - 1
    while i < j:
        x[i], x[j] = x[j], x[i]
        i += 1
        j -= 1


@program(lambda rng: (rng.standard_normal(5), rng.standard_normal(5)),
         lambda rng: (rng.integers(0, 9, (2, 3)), rng.integers(0, 9, (2, 3))),
         differentiable=(0, 1))
def swap_contents(a, b):
    tmp = a.copy()
    a[:] = b
    b[...] = tmp
    return a - b


@program(lambda rng: ({"w": rng.standard_normal((2, 3)), "b": rng.standard_normal(3)},
                      {"w": rng.standard_normal((2, 3)), "b": rng.standard_normal(3)}),
         lambda rng: ({"k": rng.standard_normal(4).astype(np.float32)},
                      {"k": rng.standard_normal(4).astype(np.float32)}),
         differentiable=())
def accumulate_into_dict(acc, update):
    for name in acc:
        acc[name] += update[name]
        update[name] *= 0.5
    return len(acc)


@program(lambda rng: (rng.uniform(0.5, 1.5, (4, 3)),),
         lambda rng: (rng.uniform(0.5, 1.5, (3, 2)).astype(np.float32),),
         differentiable=(0,))
def row_cumulative_product(m):
    for i in range(1, m.shape[0]):
        prev, row = m[i - 1], m[i]
        row *= prev
    return m[-1]


@program(lambda rng: (rng.standard_normal((3, 4)),
                      [rng.standard_normal(4), rng.standard_normal(4)]),
         differentiable=(0, 1))
def write_list_of_buffers(src, bufs):
    for buf in bufs:
        buf[:2] = src[0, :2]
        buf[2:] += src[1:, 2:].sum(axis=0)
    bufs[0][-1] = 0.0
    return src
