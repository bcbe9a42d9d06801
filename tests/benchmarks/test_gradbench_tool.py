"""The GradBench tool (benchmarks/gradbench): every eval on a small input, checked against
float64 central differences or a plain NumPy derivation, and the protocol loop.

No GradBench needed. This directory has no ``__init__.py`` on purpose: tests/conftest.py
puts tests/ first on sys.path, and a regular package ``tests/benchmarks`` would then
shadow the repository's ``benchmarks`` package that these tests import.
"""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from benchmarks.gradbench import tool  # noqa: E402
from benchmarks.gradbench._entry import Entry  # noqa: E402
from benchmarks.gradbench.evals import (  # noqa: E402
    ba,
    det,
    gmm,
    hello,
    ht,
    kmeans,
    llsq,
    lse,
    lstm,
    ode,
    particle,
    saddle,
)

RUNS = {"min_runs": 1, "min_seconds": 0}


def call(module, function: str, raw):
    """Run one eval function the way the tool does, returning its JSON output."""
    out = tool.evaluate(module.FUNCTIONS[function], raw)
    assert out["success"]
    names = [t["name"] for t in out["timings"]]
    assert names[0] == "compile" and names.count("evaluate") >= 1
    return out["output"]


def central_diff(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d f / d x by central differences; f maps an array to an array (or a scalar)."""
    x = np.asarray(x, dtype=np.float64)
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        hi = np.asarray(f((x.reshape(-1) + e).reshape(x.shape)), dtype=np.float64)
        lo = np.asarray(f((x.reshape(-1) - e).reshape(x.shape)), dtype=np.float64)
        cols.append(((hi - lo) / (2 * eps)).reshape(-1))
    return np.stack(cols, axis=-1)          # (outputs, inputs)


def test_hello():
    assert call(hello, "square", 3.0) == 9.0
    assert call(hello, "double", 3.0) == 6.0


def test_lse():
    x = np.random.default_rng(0).normal(size=7) * 30
    ref = math.log(sum(math.exp(v) for v in x))
    assert call(lse, "primal", {"x": x.tolist()} | RUNS) == pytest.approx(ref)
    soft = np.exp(x - ref)
    np.testing.assert_allclose(call(lse, "gradient", {"x": x.tolist()} | RUNS), soft,
                               rtol=1e-12, atol=1e-14)


def test_llsq():
    x = np.random.default_rng(1).random(4)
    n = 9

    def y(x):
        t = np.array([-1 + i * 2 / (n - 1) for i in range(n)])
        r = np.sign(t) - sum(x[j] * t ** j for j in range(x.size))
        return 0.5 * np.sum(r * r)
    raw = {"x": x.tolist(), "n": n} | RUNS
    assert call(llsq, "primal", raw) == pytest.approx(y(x), rel=1e-12)
    np.testing.assert_allclose(call(llsq, "gradient", raw), central_diff(y, x)[0], rtol=1e-6)


@pytest.mark.parametrize("s", [3, 12])     # 12: the gradient takes snapshots
def test_ode(s):
    x = np.random.default_rng(2).random(5)

    def solve(x):       # RK4, one component at a time
        h = 2.0 / s
        y = np.zeros(x.size)

        def rhs(y):
            return np.array([x[0]] + [x[i] * y[i - 1] for i in range(1, x.size)])
        for _ in range(s):
            k1 = rhs(y)
            k2 = rhs(y + h / 2 * k1)
            k3 = rhs(y + h / 2 * k2)
            k4 = rhs(y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return y
    raw = {"x": x.tolist(), "s": s} | RUNS
    np.testing.assert_allclose(call(ode, "primal", raw), solve(x), rtol=1e-12)
    np.testing.assert_allclose(call(ode, "gradient", raw),
                               central_diff(lambda v: solve(v)[-1], x)[0], rtol=1e-6)


def test_det():
    a = np.random.default_rng(3).random((4, 4))
    raw = {"A": a.reshape(-1).tolist(), "ell": 4} | RUNS
    assert call(det, "primal", raw) == pytest.approx(np.linalg.det(a), rel=1e-10)
    cofactors = np.linalg.det(a) * np.linalg.inv(a).T
    np.testing.assert_allclose(call(det, "gradient", raw), cofactors.reshape(-1), rtol=1e-9)


def test_kmeans():
    rng = np.random.default_rng(4)
    p = rng.random((30, 3))
    c = p[-4:].copy()
    d2 = ((p[:, None, :] - c[None]) ** 2).sum(-1)
    raw = {"points": p.tolist(), "centroids": c.tolist()} | RUNS
    assert call(kmeans, "cost", raw) == pytest.approx(d2.min(1).sum(), rel=1e-12)
    jac = np.zeros_like(c)
    hess = np.zeros_like(c)
    for i, j in enumerate(d2.argmin(1)):
        jac[j] += 2 * (c[j] - p[i])
        hess[j] += 2
    np.testing.assert_allclose(call(kmeans, "dir", raw), jac / hess, rtol=1e-12, atol=1e-14)


def _gmm_naive(alpha, mu, q, l, x, m, gamma):
    """The README's definition, term by term (likelihood and Wishart prior)."""
    k, d = mu.shape
    phi = np.exp(alpha) / np.exp(alpha).sum()
    qs = []
    for j in range(k):
        qk = np.diag(np.exp(q[j]))
        ii = 0
        for col in range(d):
            for row in range(col + 1, d):
                qk[row, col] = l[j, ii]
                ii += 1
        qs.append(qk)
    log_lik = 0.0
    for xi in x:
        dens = 0.0
        for j in range(k):
            prec = qs[j].T @ qs[j]
            r = xi - mu[j]
            dens += phi[j] * np.exp(-0.5 * r @ prec @ r) / np.sqrt(
                (2 * np.pi) ** d / np.linalg.det(prec))
        log_lik += np.log(dens)
    dof = d + m + 1
    log_prior = 0.0
    for j in range(k):
        prec = qs[j].T @ qs[j]
        log_prior += ((dof - d - 1) / 2 * np.log(np.linalg.det(prec))
                      - gamma ** 2 * np.trace(prec) / 2
                      - dof * d / 2 * np.log(2) + dof * d * np.log(gamma)
                      - gmm.log_gamma_d(dof / 2, d))
    return log_lik + log_prior


def test_gmm():
    rng = np.random.default_rng(5)
    d, k, n, m, gamma = 3, 2, 6, 1, 1.3
    ind = {"alpha": rng.normal(size=k), "mu": rng.random((k, d)),
           "q": rng.normal(size=(k, d)) * 0.3, "l": rng.normal(size=(k, d * (d - 1) // 2))}
    x = rng.normal(size=(n, d))
    raw = {"d": d, "k": k, "n": n, "x": x.tolist(), "m": m, "gamma": gamma} | RUNS | {
        name: v.tolist() for name, v in ind.items()}
    naive = _gmm_naive(ind["alpha"], ind["mu"], ind["q"], ind["l"], x, m, gamma)
    assert call(gmm, "objective", raw) == pytest.approx(naive, rel=1e-10)
    got = call(gmm, "jacobian", raw)
    for name in ind:
        def f(v, name=name):
            args = dict(ind, **{name: v})
            return _gmm_naive(args["alpha"], args["mu"], args["q"], args["l"], x, m, gamma)
        np.testing.assert_allclose(np.asarray(got[name]).reshape(-1),
                                   central_diff(f, ind[name])[0], rtol=1e-5, atol=1e-7)


def test_lstm():
    rng = np.random.default_rng(6)
    layers, b, c = 2, 3, 5
    main = rng.random((2 * layers, 4 * b))
    extra = rng.random((3, b))
    state = rng.random((2 * layers, b))
    seq = rng.integers(0, 2, size=(c, b)).astype(np.float64)

    def loss(main, extra):      # ADBench's loop, one element at a time
        hid = state[0::2].copy()
        cel = state[1::2].copy()
        total = 0.0
        sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
        for t in range(c - 1):
            inp = [seq[t, i] * extra[0, i] for i in range(b)]
            for li in range(layers):
                w, bias = main[2 * li], main[2 * li + 1]
                for i in range(b):
                    f = sig(inp[i] * w[i] + bias[i])
                    g = sig(hid[li, i] * w[b + i] + bias[b + i])
                    o = sig(inp[i] * w[2 * b + i] + bias[2 * b + i])
                    ch = math.tanh(hid[li, i] * w[3 * b + i] + bias[3 * b + i])
                    cel[li, i] = cel[li, i] * f + g * ch
                    hid[li, i] = o * math.tanh(cel[li, i])
                inp = list(hid[li])
            pred = [inp[i] * extra[1, i] + extra[2, i] for i in range(b)]
            lse_ = math.log(sum(math.exp(v) for v in pred) + 2)
            total += sum(seq[t + 1, i] * (pred[i] - lse_) for i in range(b))
        return -total / ((c - 1) * b)
    raw = {"main_params": main.tolist(), "extra_params": extra.tolist(),
           "state": state.tolist(), "sequence": seq.tolist()} | RUNS
    assert call(lstm, "objective", raw) == pytest.approx(loss(main, extra), rel=1e-12)
    ref = np.concatenate((central_diff(lambda v: loss(v, extra), main)[0],
                          central_diff(lambda v: loss(main, v), extra)[0]))
    np.testing.assert_allclose(call(lstm, "jacobian", raw), ref, rtol=1e-6, atol=1e-9)


def _ba_raw():
    return {"n": 2, "m": 3, "p": 5, "cam": [0.3, -0.2, 0.4, 1.0, 2.0, -3.0, 500.0, 2.0, -1.0,
                                            1e-3, 1e-6],
            "x": [0.5, -0.3, 8.0], "w": 0.9, "feat": [10.0, -20.0]} | RUNS


def test_ba_objective_matches_numpy_rodrigues():
    raw = _ba_raw()
    cams, xs, w, obs, feats = ba._prepare(raw)
    out = call(ba, "objective", raw)
    cam, x = cams[0], xs[0]
    theta = np.linalg.norm(cam[:3])
    k = cam[:3] / theta
    xo = x - cam[3:6]
    xr = (xo * np.cos(theta) + np.cross(k, xo) * np.sin(theta)
          + k * (k @ xo) * (1 - np.cos(theta)))
    proj = xr[:2] / xr[2]
    rsq = proj @ proj
    proj = proj * (1 + cam[9] * rsq + cam[10] * rsq ** 2) * cam[6] + cam[7:9]
    np.testing.assert_allclose(out["reproj_error"]["elements"], w[0] * (proj - feats[0]),
                               rtol=1e-12)
    assert out["reproj_error"]["repeated"] == 5
    assert out["w_err"] == {"element": pytest.approx(1 - 0.81), "repeated": 5}


def test_ba_sparse_jacobian_matches_central_differences():
    raw = _ba_raw()
    args = ba._prepare(raw)
    cams, xs, w, obs, feats = args
    n, m, p = cams.shape[0], xs.shape[0], w.shape[0]
    rows, cols, vals = ba.sparse_jacobian(*args)     # plain NumPy call
    dense = np.zeros((3 * p, 11 * n + 3 * m + p))
    for r in range(3 * p):
        for at in range(rows[r], rows[r + 1]):
            dense[r, cols[at]] += vals[at]

    def residuals(flat):
        c = flat[:11 * n].reshape(n, 11)
        xx = flat[11 * n:11 * n + 3 * m].reshape(m, 3)
        ww = flat[11 * n + 3 * m:]
        err, werr = ba.objective(c, xx, ww, obs, feats)   # plain NumPy call
        return np.concatenate((err, werr))
    flat = np.concatenate((cams.reshape(-1), xs.reshape(-1), w))
    ref = central_diff(residuals, flat, eps=1e-7)
    np.testing.assert_allclose(dense, ref, rtol=1e-5, atol=1e-4)
    out = call(ba, "jacobian", raw)
    assert out["rows"] == rows[:30].tolist() + [int(rows[-1])]
    assert len(out["vals"]) == 31


def _ht_raw(complicated: bool):
    """A random 22-bone hand (a chain per finger) with 8 vertices and 5 data points."""
    rng = np.random.default_rng(7)
    n_bones, n_verts, n_pts = 22, 8, 5
    parents = [-1, 0] + [1 if (i - 2) % 4 == 0 else i - 1 for i in range(2, n_bones)]

    def transform():
        a = np.eye(4)
        a[:3, :3] += 0.2 * rng.normal(size=(3, 3))
        a[:3, 3] = rng.normal(size=3)
        return a.tolist()
    weights = rng.random((n_verts, n_bones))
    weights /= weights.sum(1, keepdims=True)
    model = {"bone_count": n_bones, "bone_names": [f"b{i}" for i in range(n_bones)],
             "parents": parents,
             "base_relatives": [transform() for _ in range(n_bones)],
             "inverse_base_absolutes": [transform() for _ in range(n_bones)],
             "base_positions": np.concatenate((rng.normal(size=(n_verts, 3)),
                                               np.ones((n_verts, 1))), 1).tolist(),
             "weights": weights.tolist(),
             "triangles": rng.integers(0, n_verts, size=(6, 3)).tolist(),
             "is_mirrored": False}
    raw = {"theta": (0.3 * rng.normal(size=26)).tolist(),
           "data": {"model": model, "correspondences": rng.integers(0, 6, n_pts).tolist(),
                    "points": rng.normal(size=(n_pts, 3)).tolist()},
           "us": rng.random((n_pts, 2)).tolist() if complicated else []}
    return raw | RUNS


@pytest.mark.parametrize("complicated", [True, False])
def test_ht_jacobian_matches_central_differences(complicated):
    raw = _ht_raw(complicated)
    theta, us, model, parents, mirrored = ht._prepare(raw)
    res = np.asarray(call(ht, "objective", raw))
    assert res.shape == (15,)
    jac = np.asarray(call(ht, "jacobian", raw))

    def of_theta(t):
        return ht.objective(t, us, model, parents, mirrored)   # plain NumPy call
    ref = central_diff(of_theta, theta)
    if complicated:
        full = central_diff(lambda u: ht.objective(theta, u, model, parents, mirrored), us)
        # each point's 3 residuals depend only on its own (u0, u1)
        du = np.stack([full[3 * i:3 * i + 3, 2 * i:2 * i + 2] for i in range(us.shape[0])])
        ref = np.concatenate((du.reshape(-1, 2), ref), axis=1)
    assert jac.shape == ref.shape
    np.testing.assert_allclose(jac, ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(res, of_theta(theta), rtol=1e-12)


def test_ht_pose_index_spreads_26_parameters():
    idx = ht.pose_index(22)
    used = sorted(int(v) for v in idx.reshape(-1) if v < 26)
    assert used == list(range(26))


def native_entry(module, mode: str) -> Entry:
    """Nested gradient descents take minutes on the interpreter: compile them to C."""
    from pullback.backends.c.build import compiler
    if not compiler.have_compiler():
        pytest.skip("no C compiler")
    make = module.make_saddle if module is saddle else module.make_particle
    fn = make(module._MODES[mode[0]], module._MODES[mode[1]], backend="c")
    entry = module.FUNCTIONS[mode]
    return Entry(entry.prepare, fn, entry.post)


@pytest.mark.parametrize("mode", ["rr", "ff"])
def test_saddle_reaches_the_saddle_point(mode):
    out = tool.evaluate(native_entry(saddle, mode), {"start": [1.0, 1.0]} | RUNS)["output"]
    np.testing.assert_allclose(out, [8.246324826140356e-06] * 4, rtol=1e-6)


@pytest.mark.parametrize("mode", ["fr", "rf"])
def test_particle_reaches_the_origin(mode):
    out = tool.evaluate(native_entry(particle, mode), {"w": 0.0} | RUNS)["output"]
    assert out == pytest.approx(0.2071918746486116, rel=1e-6)


def test_protocol_loop():
    messages = [
        {"id": 0, "kind": "start", "eval": "lse"},
        {"id": 1, "kind": "define", "module": "lse"},
        {"id": 2, "kind": "evaluate", "module": "lse", "function": "primal",
         "input": {"x": [1.0, 2.0], "min_runs": 3, "min_seconds": 0}},
        {"id": 3, "kind": "analysis", "of": 2, "valid": True},
        {"id": 4, "kind": "define", "module": "nonexistent"},
        {"id": 5, "kind": "evaluate", "module": "lse", "function": "nope",
         "input": {"x": [1.0], "min_runs": 1, "min_seconds": 0}},
        {"kind": "end"},
        {"id": 6, "kind": "start", "eval": "never read"},
    ]
    stdin = io.StringIO("".join(json.dumps(msg) + "\n" for msg in messages))
    stdout = io.StringIO()
    tool.serve(stdin, stdout)
    replies = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [r["id"] for r in replies] == [0, 1, 2, 3, 4, 5]
    assert replies[0] == {"id": 0, "tool": "pullback"}
    assert replies[1] == {"id": 1, "success": True}
    assert replies[2]["success"]
    assert replies[2]["output"] == pytest.approx(math.log(math.exp(1) + math.exp(2)))
    names = [t["name"] for t in replies[2]["timings"]]
    assert names == ["compile", "evaluate", "evaluate", "evaluate"]
    assert replies[3] == {"id": 3}
    assert not replies[4]["success"] and "nonexistent" in replies[4]["error"]
    assert not replies[5]["success"] and "nope" in replies[5]["error"]


def test_summarize_tables(tmp_path):
    from benchmarks.gradbench import summarize

    def summary(name, ms):
        rows = [{"function": "gradient", "description": f"n={n}", "median_ms": ms * n,
                 "status": "valid", "other_ms": {"compile": 100.0}} for n in (1, 2)]
        return {"eval": "lse", "tool": name, "rows": rows}
    for name, ms in (("pullback", 1.0), ("manual", 2.0), ("jax", 0.5)):
        (tmp_path / f"lse_{name}.json").write_text(json.dumps(summary(name, ms)))
    runs = summarize.load(tmp_path)
    over = summarize.overview(runs)
    assert over[2].split(" | ")[1:5] == ["2/2", "0.5x", "2x", "2x"]
    big = summarize.largest(runs)
    assert big[2] == "| lse | gradient | n=2 | 2 | 4 | 1 | - |"
    per = summarize.per_function(runs)
    assert per[2] == "| lse | gradient | 2 | 0.5x (0.5x) | 2x (2x) | 2x (2x) |"


def test_jax_compile_is_its_first_runs_excess(tmp_path):
    from benchmarks.gradbench import summarize

    runs = [[{"name": "evaluate", "nanoseconds": ns} for ns in (9e6, 1e6, 2e6, 1e6)]]
    lines = [{"message": {"kind": "evaluate", "input": {"x": [1.0]}}}] + \
        [{"response": {"success": True, "timings": t}} for t in runs]
    log = tmp_path / "lse_jax.jsonl"
    log.write_text("\n".join(json.dumps(x) for x in lines))
    assert summarize.first_run_excess(log) == pytest.approx(7.5)


def test_pullback_compile_is_its_first_call_less_one_run():
    """The compiling first call also ran the function once: that run is not compile
    time (JAX's first run is counted less its median the same way)."""
    from benchmarks.gradbench import summarize

    assert summarize._compile_ms({"median_ms": 40.0, "other_ms": {"compile": 100.0}}) == 60.0
    assert summarize._compile_ms({"median_ms": 40.0, "other_ms": {"compile": 30.0}}) == 0.0
    assert summarize._compile_ms({"median_ms": 40.0}) == 0.0
