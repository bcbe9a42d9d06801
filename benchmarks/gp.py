"""The gradient of a Gaussian process's negative log marginal likelihood with respect to
its hyperparameters, float64: an RBF kernel with one lengthscale per input dimension on
n = 1000 points (300 with ``--quick``) in d = 5 dimensions, written as NumPy / SciPy:

    def nll(theta, x, y):
        z = x / np.exp(theta[:d])
        sq = np.sum(z * z, axis=1)
        k = np.exp(theta[d]) * np.exp(z @ z.T - 0.5 * sq[:, None] - 0.5 * sq)
        low = np.linalg.cholesky(k + np.exp(theta[d + 1]) * np.eye(n))
        alpha = solve_triangular(low.T, solve_triangular(low, y, lower=True), lower=False)
        return 0.5 * y @ alpha + np.sum(np.log(np.diag(low))) + 0.5 * n * np.log(2 pi)

by ``pb.jit(pb.grad(nll))`` and ``pb.grad(pb.jit(nll))``.  The reference (float64) and
the NumPy peer are the gradient by hand, dNLL/dtheta = 0.5 tr((K^-1 - alpha alpha^T)
dK/dtheta), with K^-1 from LAPACK's ``potri`` (via ``scipy.linalg.lapack``) and each
lengthscale's trace contracted without forming dK/dtheta: for M = W * K_rbf,
tr(W dK/dlog l_j) = 2 (sum_i (M 1)_i z_ij^2 - z_j^T M z_j).

Peers: that NumPy gradient, ``jax.jit(jax.grad(nll))`` (``jnp.linalg.cholesky``,
``jax.scipy.linalg.solve_triangular``), torch eager autograd (``torch.linalg.cholesky``,
``torch.linalg.solve_triangular``).  Bound: the LAPACK calls of the hand-written gradient
alone (``potrf``, then ``potri`` of the factor), n^3 flops; not a hard floor (reverse
mode does not form K^-1, but its blocked Cholesky adjoint costs the same 2 n^3 / 3).

    python benchmarks/gp.py [--quick] [--threads 1|2|both] [--only SYSTEMS] [--json PATH]
"""

import _harness as H

args = H.setup("gp")

import numpy as np  # noqa: E402
import scipy.linalg as sl  # noqa: E402
from scipy.linalg import lapack  # noqa: E402

import pullback as pb  # noqa: E402

N, D = (300 if H.quick() else 1000), 5
rng = np.random.default_rng(0)
X = rng.uniform(-2.0, 2.0, (N, D))
Y = np.sin(X @ rng.standard_normal(D)) + 0.1 * rng.standard_normal(N)
THETA = np.concatenate([np.log(np.full(D, 1.5)), [np.log(1.2), np.log(0.05)]])
LOG2PI = np.log(2 * np.pi)


def nll(theta, x, y):
    n, d = x.shape
    z = x / np.exp(theta[:d])
    sq = np.sum(z * z, axis=1)
    k = np.exp(theta[d]) * np.exp(z @ z.T - 0.5 * sq[:, None] - 0.5 * sq)
    low = np.linalg.cholesky(k + np.exp(theta[d + 1]) * np.eye(n))
    alpha = sl.solve_triangular(low.T, sl.solve_triangular(low, y, lower=True), lower=False)
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(low))) + 0.5 * n * LOG2PI


def np_grad(theta, x, y):
    """The gradient by hand: W = K^-1 - alpha alpha^T from potrf + potri, then
    0.5 tr(W dK/dtheta) per parameter, the lengthscales' without forming dK/dtheta."""
    n, d = x.shape
    z = x / np.exp(theta[:d])
    sq = np.sum(z * z, axis=1)
    rbf = z @ z.T
    rbf -= 0.5 * sq[:, None]
    rbf -= 0.5 * sq
    np.exp(rbf, out=rbf)
    rbf *= np.exp(theta[d])
    noise = np.exp(theta[d + 1])
    k = rbf.copy()
    k.flat[:: n + 1] += noise
    low, info = lapack.dpotrf(k, lower=1)
    alpha = lapack.dpotrs(low, y, lower=1)[0]
    w, info = lapack.dpotri(low, lower=1)  # K^-1, lower triangle
    w = np.tril(w) + np.tril(w, -1).T
    w -= np.outer(alpha, alpha)
    m = w * rbf
    g = np.empty(d + 2)
    g[:d] = (m.sum(axis=1) @ (z * z)) - np.einsum("ij,ij->j", z, m @ z)
    g[d] = 0.5 * np.sum(m)
    g[d + 1] = 0.5 * noise * np.trace(w)
    return g


REF = np_grad(THETA, X, Y)
REF_F = nll(THETA, X, Y)


def err_grad(g):
    return H.relerr(g, REF)


def err_fwd(v):
    return H.relerr(v, REF_F)


# ------------------------------------------------------------------ bound
KMAT = np.exp(THETA[D]) * np.exp(-0.5 * np.sum((X[:, None] - X[None]) ** 2 / 1.5 ** 2, -1))
KMAT += np.exp(THETA[D + 1]) * np.eye(N)


def lapack_only():
    low = lapack.dpotrf(KMAT, lower=1)[0]
    return lapack.dpotri(low, lower=1)[0]


H.measure("LAPACK potrf + potri", "grad", lapack_only, kind="bound")

# ------------------------------------------------------------------ pullback
H.warm("pullback")
fwd = pb.jit(nll, backend="c")
H.measure("pullback jit(nll)", "fwd", lambda: fwd(THETA, X, Y), check=err_fwd,
          kind="pullback")
for source, fn in (("jit(grad(nll))", pb.jit(pb.grad(nll), backend="c")),
                   ("grad(jit(nll))", pb.grad(pb.jit(nll, backend="c")))):
    H.measure(f"pullback {source}", "grad", lambda f=fn: f(THETA, X, Y), check=err_grad,
              kind="pullback")

# ------------------------------------------------------------------ numpy
if H.want("numpy"):
    H.measure("numpy + scipy (nll)", "fwd", lambda: nll(THETA, X, Y), check=err_fwd)
    H.measure("numpy + scipy.linalg.lapack (by hand)", "grad", lambda: np_grad(THETA, X, Y),
              check=err_grad)

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
if jax is not None:
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    jax.config.update("jax_enable_x64", True)
    H.warm("jax")

    def jnll(theta, x, y):
        n, d = x.shape
        z = x / jnp.exp(theta[:d])
        sq = jnp.sum(z * z, axis=1)
        k = jnp.exp(theta[d]) * jnp.exp(z @ z.T - 0.5 * sq[:, None] - 0.5 * sq)
        low = jnp.linalg.cholesky(k + jnp.exp(theta[d + 1]) * jnp.eye(n))
        alpha = jsl.solve_triangular(low.T, jsl.solve_triangular(low, y, lower=True),
                                     lower=False)
        return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diag(low))) + 0.5 * n * LOG2PI

    args_j = [jax.device_put(v) for v in (THETA, X, Y)]
    for what, fn in (("fwd", jax.jit(jnll)), ("grad", jax.jit(jax.grad(jnll)))):
        H.measure(f"jax.jit({'nll' if what == 'fwd' else 'grad(nll)'})", what,
                  lambda f=fn: jax.block_until_ready(f(*args_j)),
                  check=err_fwd if what == "fwd" else err_grad)

# ------------------------------------------------------------------ torch
torch = H.optional("torch") if H.want("torch") else None
if torch is not None:
    H.pin_torch(torch)

    def tnll(theta, x, y):
        n, d = x.shape
        z = x / torch.exp(theta[:d])
        sq = torch.sum(z * z, dim=1)
        k = torch.exp(theta[d]) * torch.exp(z @ z.T - 0.5 * sq[:, None] - 0.5 * sq)
        low = torch.linalg.cholesky(k + torch.exp(theta[d + 1]) * torch.eye(n, dtype=x.dtype))
        a = torch.linalg.solve_triangular(low, y[:, None], upper=False)
        alpha = torch.linalg.solve_triangular(low.T, a, upper=True)[:, 0]
        return 0.5 * y @ alpha + torch.sum(torch.log(torch.diagonal(low))) + 0.5 * n * LOG2PI

    xt, yt = torch.from_numpy(X), torch.from_numpy(Y)

    def torch_grad():
        theta = torch.tensor(THETA, requires_grad=True)
        tnll(theta, xt, yt).backward()
        return theta.grad.numpy()

    H.measure("torch eager (autograd)", "grad", torch_grad, check=err_grad)

H.finish(f"GP negative log likelihood, RBF kernel, n = {N}, d = {D}, float64")
