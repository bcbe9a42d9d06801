"""GradBench ``ba``: ADBench bundle adjustment, its residuals and their sparse Jacobian.

Each observation's two reprojection residuals depend only on its camera (11 values),
its point (3) and its weight (1), so the Jacobian is block sparse: we differentiate the
per-observation residuals, written vectorised over the observations, with respect to
the gathered camera rows, point rows and weights. Because rows do not mix, a reverse
pass (``pb.vjp``) with the cotangent 1 on residual r of every observation gives row r
of every observation's 2 x 15 block at once (two backward passes). The blocks are then
laid out in ADBench's compressed-row form.
"""

from __future__ import annotations

import numpy as np

import pullback as pb

from .._entry import Entry

N_CAM = 11
_UNIT = (np.array([1.0, 0.0]), np.array([0.0, 1.0]))   # cotangents of residual 0 and 1


def rodrigues_rotate(rot: np.ndarray, pt: np.ndarray) -> np.ndarray:
    """Rotate each row of ``pt`` by the angle-axis vector in the same row of ``rot``."""
    sqtheta = np.sum(rot * rot, axis=1, keepdims=True)
    nonzero = sqtheta != 0.0
    theta = np.sqrt(np.where(nonzero, sqtheta, 1.0))
    w = rot / theta
    costheta = np.cos(theta)
    sintheta = np.sin(theta)
    w_cross_pt = np.cross(w, pt)
    tmp = np.sum(w * pt, axis=1, keepdims=True) * (1.0 - costheta)
    rotated = pt * costheta + w_cross_pt * sintheta + w * tmp
    small = pt + np.cross(rot, pt)      # first-order rotation at theta = 0
    return np.where(nonzero, rotated, small)


def project(cam: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Pinhole projection with radial distortion of each point by its camera."""
    xcam = rodrigues_rotate(cam[:, 0:3], x - cam[:, 3:6])
    proj = xcam[:, 0:2] / xcam[:, 2:3]
    rsq = np.sum(proj * proj, axis=1, keepdims=True)
    distortion = 1.0 + cam[:, 9:10] * rsq + cam[:, 10:11] * rsq * rsq
    return proj * distortion * cam[:, 6:7] + cam[:, 7:9]


def reproj_error(cam: np.ndarray, x: np.ndarray, w: np.ndarray,
                 feat: np.ndarray) -> np.ndarray:
    """(p, 2) weighted reprojection residuals, one row per observation."""
    return w[:, None] * (project(cam, x) - feat)


def objective(cams: np.ndarray, xs: np.ndarray, w: np.ndarray, obs: np.ndarray,
              feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reprojection residuals (2 p) and weight residuals 1 - w^2 (p)."""
    err = reproj_error(cams[obs[:, 0]], xs[obs[:, 1]], w, feats)
    return err.reshape(-1), 1.0 - w * w


def _weight_error_sum(w: np.ndarray) -> np.float64:
    return np.sum(1.0 - w * w)


def jacobian_blocks(cams: np.ndarray, xs: np.ndarray, w: np.ndarray, obs: np.ndarray,
                    feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-observation (p, 2, 15) blocks d(residual)/d(camera, point, weight) and dw_err/dw.

    Rows do not mix, so one reverse pass of the residuals with the cotangent 1 on every
    observation's residual r and 0 on the other gives row r of every block at once: two
    backward passes over all observations, sharing one forward pass.
    """
    p = w.shape[0]
    _, backward = pb.vjp(reproj_error, cams[obs[:, 0]], xs[obs[:, 1]], w, feats)
    rows = []
    for r in range(2):
        ct = np.broadcast_to(_UNIT[r], (p, 2))
        dcam, dx, dw, _ = backward(ct)
        rows += [dcam, dx, dw[:, None]]
    blocks = np.concatenate(rows, axis=1)   # (p, 30): each observation's two block rows
    return blocks.reshape(p, 2, 15), pb.grad(_weight_error_sum)(w)


def sparse_jacobian(cams: np.ndarray, xs: np.ndarray, w: np.ndarray, obs: np.ndarray,
                    feats: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Jacobian in ADBench's compressed-row form: row pointers, columns, values.

    Rows 2i and 2i+1 hold observation i's 15 entries (camera, point, weight columns);
    the last p rows hold one entry each, d(1 - w_i^2)/d w_i.
    """
    n, m, p = cams.shape[0], xs.shape[0], w.shape[0]
    blocks, dw = jacobian_blocks(cams, xs, w, obs, feats)
    # indices as 32-bit ints, as ADBench's (and the C++ tool's) sparse matrix has them
    rows = np.concatenate((np.arange(2 * p + 1, dtype=np.int32) * 15,
                           30 * p + np.arange(1, p + 1, dtype=np.int32)))
    at = obs.astype(np.int32)
    cam_cols = N_CAM * at[:, 0:1] + np.arange(N_CAM, dtype=np.int32)[None, :]
    pt_cols = N_CAM * n + 3 * at[:, 1:2] + np.arange(3, dtype=np.int32)[None, :]
    w_cols = N_CAM * n + 3 * m + np.arange(p, dtype=np.int32)
    row_cols = (cam_cols, pt_cols, w_cols[:, None])
    block_cols = np.concatenate(row_cols + row_cols, axis=1)   # (p, 30), as the blocks
    cols = np.concatenate((block_cols.reshape(-1), w_cols))
    vals = np.concatenate((blocks.reshape(-1), dw))
    return rows, cols, vals


_objective = pb.jit(objective)
_jacobian = pb.jit(sparse_jacobian)


def _prepare(raw: dict) -> tuple:
    """Expand the eval's one camera / point / weight / feature into n, m and p copies."""
    n, m, p = int(raw["n"]), int(raw["m"]), int(raw["p"])
    cams = np.tile(np.asarray(raw["cam"], dtype=np.float64), (n, 1))
    xs = np.tile(np.asarray(raw["x"], dtype=np.float64), (m, 1))
    w = np.full(p, float(raw["w"]))
    feats = np.tile(np.asarray(raw["feat"], dtype=np.float64), (p, 1))
    obs = np.stack((np.arange(p) % n, np.arange(p) % m), axis=1).astype(np.int64)
    return cams, xs, w, obs, feats


def _post_objective(out: tuple) -> dict:
    reproj, werr = out
    return {"reproj_error": {"elements": reproj[:2].tolist(), "repeated": reproj.size // 2},
            "w_err": {"element": float(werr[0]), "repeated": werr.size}}


def _post_jacobian(out: tuple) -> dict:
    def head_and_last(a: np.ndarray) -> list:
        return a[:30].tolist() + [a[-1].item()]
    rows, cols, vals = out
    return {"rows": head_and_last(rows), "cols": head_and_last(cols),
            "vals": head_and_last(vals)}


FUNCTIONS = {
    "objective": Entry(_prepare, lambda a: _objective(*a), _post_objective),
    "jacobian": Entry(_prepare, lambda a: _jacobian(*a), _post_jacobian),
}
