"""Numerical-methods kernels: PDE stencils, particle simulations, ODE integrators,
iterative linear solvers, quadrature, root finding and estimation, as written in plain
NumPy with loops over time steps and convergence tests on data."""

from __future__ import annotations

import functools
import math

import numpy as np

import pullback as pb
from programs.registry import program


def _spd(rng, n, dtype=np.float64):
    """A well-conditioned symmetric positive definite matrix."""
    a = rng.standard_normal((n, n))
    return (a @ a.T / n + np.eye(n)).astype(dtype)


def _lattice(rng, n, dim, dtype=np.float64):
    """Particles near the sites of a cubic lattice, so that no two nearly coincide."""
    sites = np.stack(np.meshgrid(*[np.arange(n)] * dim, indexing="ij"), axis=-1)
    return (1.1 * sites.reshape(-1, dim) + 0.1 * rng.standard_normal((n ** dim, dim))).astype(dtype)


def _diag_dominant(rng, n, dtype=np.float64):
    a = rng.standard_normal((n, n))
    return (a + np.diag(np.abs(a).sum(axis=1) + 1.0)).astype(dtype)


@program(lambda rng: (rng.uniform(0.0, 1.0, 32), 0.25, 40),
         lambda rng: (rng.uniform(0.0, 1.0, 16).astype(np.float32), 0.4, 10),
         differentiable=(0, 1))
def heat_1d(u, alpha, steps):
    u = u.copy()
    for _ in range(steps):
        u[1:-1] = u[1:-1] + alpha * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return u


@program(lambda rng: (rng.uniform(0.0, 1.0, (12, 10)), 0.2, 15),
         lambda rng: (rng.uniform(0.0, 1.0, (6, 6)).astype(np.float32), 0.1, 5),
         differentiable=(0, 1))
def heat_2d(u, alpha, steps):
    for _ in range(steps):
        lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4.0 * u[1:-1, 1:-1]
        u = u.copy()
        u[1:-1, 1:-1] += alpha * lap
    return u, u.sum()


@program(lambda rng: (rng.uniform(0.0, 1.0, 24), 0.2, 6),
         lambda rng: (rng.uniform(0.0, 1.0, 9).astype(np.float32), 0.3, 3),
         differentiable=(0, 1))
def heat_scalar_loops(u0, alpha, steps):
    """The heat stencil as scalar index loops into a fresh buffer per step (reverse mode
    reads each overwritten element in place: issue 24's 230x case)."""
    u = u0.copy()
    n = u.shape[0]
    for _ in range(steps):
        new = u.copy()
        for i in range(1, n - 1):
            new[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = new
    return np.sum(u * u)


@program(lambda rng: (rng.standard_normal((16, 16)), 0.1),
         lambda rng: (rng.standard_normal((5, 7)).astype(np.float32), 1.0),
         differentiable=(0, 1))
def laplacian_periodic(u, h):
    lap = (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0) + np.roll(u, 1, axis=1)
           + np.roll(u, -1, axis=1) - 4.0 * u) / h ** 2
    interior = np.zeros_like(u)
    interior[1:-1, 1:-1] = (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                            - 4.0 * u[1:-1, 1:-1]) / (h * h)
    return lap, interior


@program(lambda rng: (rng.standard_normal(40), 0.5, 30),
         lambda rng: (rng.standard_normal(12).astype(np.float32), 0.9, 8),
         differentiable=(0, 1))
def wave_leapfrog(u0, courant, steps):
    prev, cur = u0.copy(), u0.copy()
    c2 = courant * courant
    for _ in range(steps):
        nxt = np.zeros_like(cur)
        nxt[1:-1] = 2.0 * cur[1:-1] - prev[1:-1] + c2 * (cur[2:] - 2.0 * cur[1:-1] + cur[:-2])
        prev, cur = cur, nxt
    return cur


@program(lambda rng: (rng.standard_normal((5, 3)), rng.standard_normal((5, 3)) * 0.1,
                      rng.uniform(0.5, 2.0, 5), 0.01, 10),
         lambda rng: (rng.standard_normal((4, 2)).astype(np.float32),
                      np.zeros((4, 2), np.float32), np.ones(4, np.float32), 0.05, 3),
         differentiable=(0, 1, 2, 3))
def nbody_steps(pos, vel, mass, dt, steps):
    softening = 0.1

    def accelerations(p):
        d = p[None, :, :] - p[:, None, :]
        inv_r3 = (np.sum(d * d, axis=-1) + softening ** 2) ** -1.5
        return np.einsum("ij,ijk->ik", inv_r3 * mass[None, :], d)

    acc = accelerations(pos)
    for _ in range(steps):
        vel = vel + 0.5 * dt * acc
        pos = pos + dt * vel
        acc = accelerations(pos)
        vel = vel + 0.5 * dt * acc
    kinetic = 0.5 * np.sum(mass[:, None] * vel ** 2)
    return pos, vel, kinetic


@program(lambda rng: (rng.standard_normal(6), rng.standard_normal(10)),
         lambda rng: (rng.standard_normal(4).astype(np.float32), 0.5),
         lambda rng: ([1.0, -3.0, 0.5, 2.0], rng.standard_normal((2, 3))),
         differentiable=(0, 1))
def horner(coeffs, x):
    """Evaluates sum(coeffs[i] * x**i), highest power first, with its derivative."""
    value = coeffs[-1] * np.ones_like(x)
    slope = np.zeros_like(value)
    for c in reversed(coeffs[:-1]):
        slope = slope * x + value
        value = value * x + c
    return value, slope


def _lotka_volterra(t, y, params):
    a, b, c, d = params
    prey, pred = y[0], y[1]
    return np.array([a * prey - b * prey * pred, d * prey * pred - c * pred])


def _rk4(f, y, t0, t1, n, params):
    h = (t1 - t0) / n
    t = t0
    for _ in range(n):
        k1 = f(t, y, params)
        k2 = f(t + h / 2, y + h / 2 * k1, params)
        k3 = f(t + h / 2, y + h / 2 * k2, params)
        k4 = f(t + h, y + h * k3, params)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t = t + h
    return y, t


@program(lambda rng: (np.array([1.0, 0.5]), (1.1, 0.4, 0.4, 0.1), 5.0, 100),
         lambda rng: (np.array([2.0, 1.0], np.float32), (0.8, 0.5, 0.3, 0.2), 2.0, 20),
         differentiable=(0, 1, 2))
def rk4_lotka_volterra(y0, params, t_end, n):
    return _rk4(_lotka_volterra, y0, 0.0, t_end, n, params)


@program(lambda rng: (1.0, 0.0, 0.3, 2.0, 200),
         lambda rng: (np.float32(0.5), np.float32(1.0), np.float32(0.1), np.float32(1.5), 50),
         differentiable=(0, 1, 2, 3))
def euler_damped_oscillator(x, v, damping, t_end, n):
    dt = t_end / n
    energy = []
    for _ in range(n):
        a = -x - damping * v
        x, v = x + dt * v, v + dt * a
        energy.append(0.5 * (x * x + v * v))
    return x, v, energy[-1] - energy[0]


@program(lambda rng: (4.0, 0.5, 3000), lambda rng: (rng.uniform(1.0, 9.0), 0.1, 700),
         differentiable=(0, 1))
def driven_oscillator(a, b, n):
    """A damped oscillator driven by sin and cos of t, scored by a branch on the sign
    of v: scalar code whose gradient in (a, b) runs forward mode in two lanes, and whose
    sin and cos the native backend computes itself."""
    dt = 1e-3
    x, v, score = 0.0, 1.0, 0.0
    for i in range(n):
        t = i * dt
        force = math.sin(t) + 0.1 * math.cos(3.0 * t) - a * x - b * v
        x, v = x + dt * v, v + dt * force
        score = score + (v * x * x if v > 0 else -0.5 * v * x)
    return score * dt


@program(lambda rng: (_diag_dominant(rng, 6), rng.standard_normal(6), 1e-12),
         lambda rng: (_diag_dominant(rng, 4, np.float32), rng.standard_normal(4).astype(np.float32),
                      1e-5),
         differentiable=(0, 1))
def jacobi(a, b, tol):
    d = np.diag(a)
    off = a - np.diag(d)
    x = np.zeros_like(b)
    for _ in range(500):
        x_new = (b - off @ x) / d
        if np.max(np.abs(x_new - x)) < tol:
            return x_new
        x = x_new
    raise RuntimeError("Jacobi iteration did not converge")


@program(lambda rng: (_diag_dominant(rng, 5), rng.standard_normal(5), 30),
         lambda rng: (_diag_dominant(rng, 3, np.float32), rng.standard_normal(3).astype(np.float32),
                      10),
         differentiable=(0, 1))
def gauss_seidel(a, b, sweeps):
    n = len(b)
    x = np.zeros_like(b)
    for _ in range(sweeps):
        for i in range(n):
            sigma = a[i, :i] @ x[:i] + a[i, i + 1:] @ x[i + 1:]
            x[i] = (b[i] - sigma) / a[i, i]
    residual = np.linalg.norm(a @ x - b)
    return x, residual


@program(lambda rng: (_spd(rng, 5), 1e-12),
         lambda rng: (np.diag([4.0, 2.0, 1.0]) + 0.1, 1e-12),
         differentiable=(0,))
def power_iteration(a, tol):
    v = np.ones(a.shape[0]) / np.sqrt(a.shape[0])
    lam = 0.0
    delta = 1.0
    while delta > tol:
        w = a @ v
        v = w / np.linalg.norm(w)
        new_lam = v @ a @ v
        delta = abs(new_lam - lam)
        lam = new_lam
    return lam, v * np.sign(v[0])


@program(lambda rng: (0.0, math.pi, 64),
         lambda rng: (-1.0, 2.5, 10),
         differentiable=(0, 1))
def simpson_and_trapezoid(a, b, n):
    x = np.linspace(a, b, n + 1)
    y = np.exp(-x * x) * np.cos(3.0 * x)
    h = (b - a) / n
    simpson = h / 3 * (y[0] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum() + y[-1])
    trapezoid = h * (y.sum() - 0.5 * (y[0] + y[-1]))
    return simpson, trapezoid


@program(lambda rng: (np.sin(np.linspace(0.0, 3.0, 25)), 0.125),
         lambda rng: (rng.standard_normal(9).astype(np.float32), 0.5),
         differentiable=(0, 1))
def cumulative_trapezoid(y, dx):
    out = np.zeros(len(y), dtype=y.dtype)
    for i in range(1, len(y)):
        out[i] = out[i - 1] + 0.5 * dx * (y[i] + y[i - 1])
    vectorised = np.concatenate([np.zeros(1, dtype=y.dtype),
                                 np.cumsum(0.5 * dx * (y[1:] + y[:-1]))])
    return out, vectorised


@program(lambda rng: (_lattice(rng, 2, 3), 1.0, 1.0),
         lambda rng: (_lattice(rng, 3, 2, np.float32), 0.5, 0.8),
         differentiable=(0, 1, 2))
def lennard_jones(pos, epsilon, sigma):
    n = pos.shape[0]
    d = pos[:, None, :] - pos[None, :, :]
    r2 = np.sum(d * d, axis=-1) + np.eye(n)
    s6 = (sigma * sigma / r2) ** 3
    pair = 4.0 * epsilon * (s6 * s6 - s6)
    upper = np.triu(np.ones((n, n), dtype=pos.dtype), 1)
    energy = np.sum(pair * upper)
    coef = 24.0 * epsilon * (2.0 * s6 * s6 - s6) / r2 * (1.0 - np.eye(n))
    forces = np.sum(coef[:, :, None] * d, axis=1)
    return energy, forces


@program(lambda rng: (np.linspace(-2.0, 0.5, 12), np.linspace(-1.1, 1.1, 9), 30),
         lambda rng: (np.linspace(-1.5, 0.3, 5).astype(np.float32),
                      np.linspace(-0.7, 0.7, 4).astype(np.float32), 20),
         differentiable=())
def mandelbrot_per_point(re, im, max_iter):
    counts = np.zeros((len(im), len(re)), dtype=np.int64)
    for i, ci in enumerate(im):
        for j, cr in enumerate(re):
            zr, zi = 0.0 * cr, 0.0 * ci
            n = 0
            while n < max_iter and zr * zr + zi * zi <= 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            counts[i, j] = n
    return counts


@program(lambda rng: (np.linspace(-2.0, 0.5, 40), np.linspace(-1.2, 1.2, 30), 50),
         lambda rng: (np.linspace(-1.5, 0.3, 7).astype(np.float32),
                      np.linspace(-0.7, 0.7, 6).astype(np.float32), 25),
         differentiable=())
def mandelbrot_vectorised(re, im, max_iter):
    cr, ci = np.meshgrid(re, im)
    zr, zi = np.zeros_like(cr), np.zeros_like(ci)
    counts = np.zeros(cr.shape, dtype=np.int32)
    for _ in range(max_iter):
        inside = zr * zr + zi * zi <= 4.0
        counts += inside
        zr, zi = (np.where(inside, zr * zr - zi * zi + cr, zr),
                  np.where(inside, 2.0 * zr * zi + ci, zi))
    return counts


@program(lambda rng: (np.array([0.3, -0.2, 0.1, -2.0]), rng.uniform(-2, 2, (20, 2)),
                      rng.standard_normal(20)),
         lambda rng: (np.array([0.1, 0.0, -1.0], np.float32),
                      rng.uniform(-2, 2, (6, 1)).astype(np.float32),
                      rng.standard_normal(6).astype(np.float32)),
         differentiable=(0,))
def gp_negative_log_likelihood(theta, x, y):
    """A Gaussian process's NLL as scikit-learn computes it: RBF kernel, Cholesky, two
    triangular solves (reverse mode: the blocked Cholesky adjoint)."""
    n, d = x.shape
    z = x / np.exp(theta[:d])
    sq = np.sum(z * z, axis=1)
    k = np.exp(theta[d]) * np.exp(z @ z.T - 0.5 * sq[:, None] - 0.5 * sq)
    low = np.linalg.cholesky(k + np.exp(theta[d + 1]) * np.eye(n))
    alpha = np.linalg.solve(low.T, np.linalg.solve(low, y))
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(low)))


@program(lambda rng: (_spd(rng, 5), rng.standard_normal(5)),
         lambda rng: (_spd(rng, 4), rng.standard_normal((4, 2))),
         lambda rng: (_spd(rng, 3, np.float32), rng.standard_normal(3).astype(np.float32)),
         differentiable=(0, 1))
def cholesky_solve(a, b):
    low = np.linalg.cholesky(a)
    y = np.linalg.solve(low, b)
    x = np.linalg.solve(low.T, y)
    log_det = 2.0 * np.sum(np.log(np.diag(low)))
    return x, log_det


@program(lambda rng: (rng.standard_normal(4), _spd(rng, 4), rng.standard_normal((3, 2))),
         lambda rng: (rng.standard_normal(4).astype(np.float32), _spd(rng, 4, np.float32),
                      rng.standard_normal((5, 2)).astype(np.float32)),
         differentiable=(0, 1, 2))
def kalman_filter_track(x, p, measurements):
    """Constant-velocity model in 2-D: state (px, py, vx, vy), position measured."""
    dt = 0.1
    f = np.eye(4, dtype=x.dtype)
    f[0, 2] = f[1, 3] = dt
    h = np.eye(2, 4, dtype=x.dtype)
    q = 0.01 * np.eye(4, dtype=x.dtype)
    r = 0.25 * np.eye(2, dtype=x.dtype)
    for z in measurements:
        x = f @ x
        p = f @ p @ f.T + q
        s = h @ p @ h.T + r
        k = p @ h.T @ np.linalg.inv(s)
        x = x + k @ (z - h @ x)
        p = (np.eye(4, dtype=x.dtype) - k @ h) @ p
    return x, p


@program(lambda rng: (rng.uniform(0.5, 10.0, 6),),
         lambda rng: (rng.uniform(0.1, 3.0, 4).astype(np.float32),),
         differentiable=(0,))
def newton_cube_root(a):
    tol = 1e-12 if a.dtype == np.float64 else 1e-5
    x = np.maximum(a, 1.0)
    step = np.ones_like(a)
    iterations = 0
    while np.max(np.abs(step)) > tol * np.max(x) and iterations < 100:
        step = (x ** 3 - a) / (3.0 * x * x)
        x = x - step
        iterations += 1
    return x


def _bisect(f, lo, hi, tol):
    """Root of ``f`` in [lo, hi]; which half the recursion enters depends on the data."""
    mid = 0.5 * (lo + hi)
    if hi - lo < tol:
        return mid
    if f(lo) * f(mid) <= 0:
        return _bisect(f, lo, mid, tol)
    return _bisect(f, mid, hi, tol)


@program(lambda rng: (rng.uniform(0.5, 3.0),),
         lambda rng: (np.float64(5.5),),
         differentiable=())
def bisection_kepler(mean_anomaly):
    eccentricity = 0.3
    return _bisect(lambda e: e - eccentricity * np.sin(e) - mean_anomaly, 0.0, 2.0 * np.pi,
                   1e-9)


def _chain_rhs(x, y):
    """y_0' = x_0, y_i' = x_i y_{i-1}: each element reads its left neighbour."""
    return x * np.concatenate((np.ones(1), y[:-1]))


@program(lambda rng: (rng.uniform(0.5, 1.5, 64), 2.0, 12),
         lambda rng: (rng.uniform(0.5, 1.5, 9).astype(np.float32), 1.0, 3),
         differentiable=(0,))
def rk4_chain(x, t_end, steps):
    """Fourth-order Runge-Kutta on a chain ODE (GradBench's ``ode``): the stages read the
    state shifted by one element (concatenations read in place, their pads in reverse)."""
    h = t_end / steps
    y = np.zeros_like(x)
    for _ in range(steps):
        k1 = _chain_rhs(x, y)
        k2 = _chain_rhs(x, y + h * k1 / 2)
        k3 = _chain_rhs(x, y + h * k2 / 2)
        k4 = _chain_rhs(x, y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return y


@program(lambda rng: (rng.standard_normal((4000, 16)), rng.standard_normal((200, 16))),
         lambda rng: (rng.standard_normal((30, 3)).astype(np.float32),
                      rng.standard_normal((4, 3)).astype(np.float32)))
def nearest_centroid_cost(points, centroids):
    """k-means cost: each point's squared distance to its nearest centroid, summed (the
    4000 x 200 product runs a panel of rows at a time inside its row minima)."""
    pp = np.sum(points * points, axis=1)
    cc = np.sum(centroids * centroids, axis=1)
    d2 = pp[:, None] - 2.0 * (points @ centroids.T) + cc[None, :]
    return np.sum(np.min(d2, axis=1))


@pb.custom_jvp
def _softplus(z):
    return np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0.0)


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    (z,), (t,) = primals, tangents
    return _softplus(z), t / (1.0 + np.exp(-z))  # the rule calls the function: its primal


@functools.partial(pb.jit, static_argnames="passes")
def _smoothed(x, passes):
    y = x
    for _ in range(passes):
        y = 0.5 * (y + np.roll(y, 1))
    return y


@program(lambda rng: (rng.standard_normal(12), 2),
         lambda rng: (rng.standard_normal(6).astype(np.float32), 1),
         differentiable=(0,))
def softplus_energy_of_jitted_helpers(x, passes):
    """Code organised as users organise it: a helper jitted on its own (with a static
    argument) and a numerically stable softplus with a custom forward rule, both called
    from the program, in a loop."""
    y = _smoothed(x, passes)
    e = 0.0
    for k in range(3):
        e = e + np.sum(_softplus(y * (k + 1.0))) / y.size
    return e
