"""GradBench ``ht``: ADBench hand tracking, its residuals and their Jacobian.

A skinned hand model is posed by 26 parameters (global rotation, global translation,
finger joint angles); each residual is a data point minus the model point it
corresponds to. In the "complicated" variant a model point is a barycentric combination
(with the differentiable ``us``) of a triangle's vertices. Following ADBench, the
Jacobian has 2 + 26 columns in that variant: d r_i / d u_i (each residual depends on
its own point's two ``us`` only) then d r / d theta; in the simple variant, 26.
"""

from __future__ import annotations

import numpy as np

import pullback as pb

from .._entry import Entry

N_FINGERS = 5


def pose_index(n_bones: int) -> np.ndarray:
    """Where each entry of the (n_bones + 3, 3) pose table comes from in [theta, 0, 1].

    Row 0 is the global rotation, row 1 the global scale (ones), row 2 the translation;
    row 3 + i holds bone i's Euler angles: each finger's base joint has two angles,
    its other two joints one, and the wrist rows stay zero.
    """
    zero, one = 26, 27
    idx = np.full((n_bones + 3, 3), zero, dtype=np.int64)
    idx[0] = [0, 1, 2]
    idx[1] = one
    idx[2] = [3, 4, 5]
    i_theta = 6
    row = 5
    for _ in range(N_FINGERS):
        for joint in range(3):
            idx[row, 0] = i_theta
            i_theta += 1
            if joint == 0:
                idx[row, 1] = i_theta
                i_theta += 1
            row += 1
        row += 1
    return idx


def angle_axis_to_rotation(aa: np.ndarray) -> np.ndarray:
    """Rodrigues' rotation matrix of an angle-axis vector (identity below norm 1e-4)."""
    sq = np.sum(aa * aa)
    small = sq < 1e-8
    norm = np.sqrt(np.where(small, 1.0, sq))
    x, y, z = aa[0] / norm, aa[1] / norm, aa[2] / norm
    s, c = np.sin(norm), np.cos(norm)
    rot = np.stack([
        np.stack([x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s]),
        np.stack([x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s]),
        np.stack([x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c]),
    ])
    return np.where(small, np.eye(3), rot)


def euler_to_rotation(angles: np.ndarray) -> np.ndarray:
    """(B, 3, 3) rotations Rz Ry Rx from rows of (x, z, y) Euler angles."""
    tx, tz, ty = angles[:, 0], angles[:, 1], angles[:, 2]
    zero = np.zeros_like(tx)
    one = np.ones_like(tx)
    cx, sx, cy, sy, cz, sz = np.cos(tx), np.sin(tx), np.cos(ty), np.sin(ty), np.cos(tz), np.sin(tz)
    rx = np.stack([np.stack([one, zero, zero], 1), np.stack([zero, cx, -sx], 1),
                   np.stack([zero, sx, cx], 1)], 1)
    ry = np.stack([np.stack([cy, zero, sy], 1), np.stack([zero, one, zero], 1),
                   np.stack([-sy, zero, cy], 1)], 1)
    rz = np.stack([np.stack([cz, -sz, zero], 1), np.stack([sz, cz, zero], 1),
                   np.stack([zero, zero, one], 1)], 1)
    return np.matmul(np.matmul(rz, ry), rx)


def skinned_positions(theta: np.ndarray, model: dict, parents: tuple,
                      is_mirrored: bool) -> np.ndarray:
    """(3, V) vertex positions of the posed, skinned and globally transformed model."""
    n_bones = len(parents)
    pose = np.concatenate((theta, np.zeros(1), np.ones(1)))[model["pose_index"]]
    rot = euler_to_rotation(pose[3:])
    top = np.concatenate((rot, np.zeros((n_bones, 3, 1))), axis=2)
    bottom = np.broadcast_to(np.array([0.0, 0.0, 0.0, 1.0]), (n_bones, 1, 4))
    relatives = np.matmul(model["base_relatives"], np.concatenate((top, bottom), axis=1))
    absolutes = []
    for i in range(n_bones):
        if parents[i] == -1:
            absolutes.append(relatives[i])
        else:
            absolutes.append(absolutes[parents[i]] @ relatives[i])
    transforms = np.matmul(np.stack(absolutes), model["inverse_base_absolutes"])
    # Linear blend skinning: blend the bones' 3x4 transforms per vertex (weights_t.T is the
    # (V, B) skinning matrix), then apply each vertex's blended transform to its position.
    bases = model["base_positions_t"]
    n_verts = bases.shape[1]
    blended = transforms[:, 0:3, :].reshape(n_bones, 12).T @ model["weights_t"]   # (12, V)
    positions = np.sum(blended.reshape(3, 4, n_verts) * bases[None, :, :], axis=1)
    if is_mirrored:
        positions = positions * np.array([-1.0, 1.0, 1.0])[:, None]
    glob = angle_axis_to_rotation(pose[0]) * pose[1][None, :]
    return glob @ positions + pose[2][:, None]


def objective(theta: np.ndarray, us: np.ndarray, model: dict, parents: tuple,
              is_mirrored: bool) -> np.ndarray:
    """Residuals (3 * npts,), point-major: data point minus corresponding model point."""
    pos = skinned_positions(theta, model, parents, is_mirrored)
    if us.shape[0] == 0:
        hand = pos[:, model["correspondences"]]
    else:
        verts = model["corr_verts"]
        u0 = us[:, 0]
        u1 = us[:, 1]
        hand = (u0 * pos[:, verts[:, 0]] + u1 * pos[:, verts[:, 1]]
                + (1.0 - u0 - u1) * pos[:, verts[:, 2]])
    return (model["points_t"] - hand).T.reshape(-1)


def _shifted(theta: np.ndarray, shift: np.ndarray, us: np.ndarray, model: dict,
             parents: tuple, is_mirrored: bool) -> np.ndarray:
    """The residuals with every point's (u0, u1) moved by the same ``shift``."""
    return objective(theta, us + shift[None, :], model, parents, is_mirrored)


def jacobian(theta: np.ndarray, us: np.ndarray, model: dict, parents: tuple,
             is_mirrored: bool) -> np.ndarray:
    """(3 npts, [2 +] 26): d r / d us (one column per u coordinate) then d r / d theta.

    Point i's residuals depend on its own (u0, u1) only, so the derivative with respect to
    a shift applied to every point's u at once is exactly the compressed us block: one
    forward pass (``pb.jacfwd``) with 2 + 26 tangents gives the whole Jacobian.
    """
    if us.shape[0] == 0:
        return pb.jacfwd(objective, argnums=0)(theta, us, model, parents, is_mirrored)
    j_theta, j_shift = pb.jacfwd(_shifted, argnums=(0, 1))(
        theta, np.zeros(2), us, model, parents, is_mirrored)
    return np.concatenate((j_shift, j_theta), axis=1)


# ``parents`` (a tuple of ints) and ``is_mirrored`` are Python scalars the compiled code is
# specialised on, checked on each call; passed by position, a call takes the fast path
# (static_argnames and keywords took the general one: 70 us of a 0.39 ms objective).
_objective = pb.jit(objective)
_jacobian = pb.jit(jacobian)


def _prepare(raw: dict) -> tuple:
    data = raw["data"]
    m = data["model"]
    parents = tuple(int(p) for p in m["parents"])
    corr = np.asarray(data["correspondences"], dtype=np.int64)
    us = np.asarray(raw.get("us", []), dtype=np.float64).reshape(-1, 2)
    model = {
        "pose_index": pose_index(len(parents)),
        "base_relatives": np.asarray(m["base_relatives"], dtype=np.float64),
        "inverse_base_absolutes": np.asarray(m["inverse_base_absolutes"], dtype=np.float64),
        "base_positions_t": np.ascontiguousarray(
            np.asarray(m["base_positions"], dtype=np.float64).T),
        "weights_t": np.ascontiguousarray(np.asarray(m["weights"], dtype=np.float64).T),
        "correspondences": corr,
        "corr_verts": np.asarray(m["triangles"], dtype=np.int64)[corr] if us.size else
        np.zeros((0, 3), dtype=np.int64),
        "points_t": np.ascontiguousarray(np.asarray(data["points"], dtype=np.float64).T),
    }
    return (np.asarray(raw["theta"], dtype=np.float64), us, model, parents,
            bool(m["is_mirrored"]))


FUNCTIONS = {
    "objective": Entry(_prepare, lambda a: _objective(*a), lambda r: r.tolist()),
    "jacobian": Entry(_prepare, lambda a: _jacobian(*a), lambda j: j.tolist()),
}
