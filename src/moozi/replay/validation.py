"""The one place trajectories are validated before replay stores them (every check names the field)."""

from __future__ import annotations

import numpy as np

from moozi.errors import ReplayError
from moozi.types import Trajectory


def validate_trajectory(traj: Trajectory, *, num_actions: int | None = None, frame_shape=None,
                        frame_dtype=None, capacity: int | None = None) -> dict[str, np.ndarray]:
    """Check one whole episode (``first == 0``, ``last == S - 1``) and return its fields as numpy.

    Every check names the field and what was expected; ``random_actions`` of
    ``None`` comes back all False, ``legal_actions`` of ``None`` all True on
    non-last steps (not recorded: every move counts as legal). The one place
    trajectories are validated.
    """
    def arr(name):
        try:
            return np.asarray(getattr(traj, name))
        except AttributeError:
            raise ReplayError(f"trajectory.{name} is missing") from None

    a = {name: arr(name) for name in (
        "frames", "actions", "rewards", "root_values", "root_policies", "to_play", "first", "last", "is_terminal")}
    frames = a["frames"]
    if frames.ndim < 2:
        raise ReplayError(f"trajectory.frames must be [S, H, W, C] (S = T + 1 steps), got shape {frames.shape}")
    size = frames.shape[0]
    if size < 1:
        raise ReplayError("trajectory.frames has 0 steps: a trajectory holds at least step 0")
    if frame_shape is not None and frames.shape[1:] != tuple(frame_shape):
        raise ReplayError(f"trajectory.frames has frame shape {frames.shape[1:]} but this buffer stores "
                          f"frames of shape {tuple(frame_shape)}")
    if frame_dtype is not None and frames.dtype != np.dtype(frame_dtype):
        raise ReplayError(f"trajectory.frames has dtype {frames.dtype} but the game declares "
                          f"{np.dtype(frame_dtype)} (encode them with moozi.envs.encode_frames)")
    if not np.issubdtype(frames.dtype, np.number) and frames.dtype != np.bool_:
        raise ReplayError(f"trajectory.frames must be numeric, got dtype {frames.dtype}")
    for name in ("actions", "rewards", "root_values", "to_play"):
        if a[name].shape != (size,):
            raise ReplayError(f"trajectory.{name} must have shape [S] = ({size},) like frames, got {a[name].shape}")
    pol = a["root_policies"]
    if pol.ndim != 2 or pol.shape[0] != size:
        raise ReplayError(f"trajectory.root_policies must have shape [S, A] with S = {size}, got {pol.shape}")
    if num_actions is not None and pol.shape[1] != num_actions:
        raise ReplayError(f"trajectory.root_policies has {pol.shape[1]} actions (augmented) but this "
                          f"buffer stores num_actions = {num_actions}")
    n_act = pol.shape[1]
    if n_act < 2:
        raise ReplayError(f"trajectory.root_policies has {n_act} actions: the augmented action "
                          "space holds the dummy action and at least one environment action")
    for name in ("first", "last", "is_terminal"):
        if a[name].shape != ():
            raise ReplayError(f"trajectory.{name} must be a scalar, got shape {a[name].shape}")
    if int(a["first"]) != 0:
        raise ReplayError(f"trajectory.first = {int(a['first'])}: the buffer stores whole episodes from "
                          "their step 0 (first == 0), not windows")
    if int(a["last"]) != size - 1:
        raise ReplayError(f"trajectory.last = {int(a['last'])} but the trajectory has {size} steps: "
                          f"last must be S - 1 = {size - 1}")
    if not np.issubdtype(a["actions"].dtype, np.integer):
        raise ReplayError(f"trajectory.actions must be integers, got dtype {a['actions'].dtype}")
    if a["actions"].min() < 0 or a["actions"].max() >= n_act:
        raise ReplayError(f"trajectory.actions must be augmented indices in [0, {n_act}), got range "
                          f"[{a['actions'].min()}, {a['actions'].max()}]")
    if capacity is not None and size > capacity:
        raise ReplayError(f"trajectory has {size} steps but replay.capacity = {capacity} steps: "
                          "a trajectory longer than the buffer cannot be stored; raise replay.capacity")
    for name in ("frames", "rewards", "root_values", "root_policies"):
        if np.issubdtype(a[name].dtype, np.floating) and not np.all(np.isfinite(a[name])):
            raise ReplayError(f"trajectory.{name} contains NaN or infinite values")
    if traj.random_actions is None:
        a["random_actions"] = np.zeros(size, np.bool_)
    else:
        a["random_actions"] = np.asarray(traj.random_actions)
        if a["random_actions"].shape != (size,):
            raise ReplayError(f"trajectory.random_actions must have shape [S] = ({size},) like frames, "
                              f"got {a['random_actions'].shape}")
        a["random_actions"] = a["random_actions"].astype(np.bool_)
    legal = getattr(traj, "legal_actions", None)
    if legal is None:
        a["legal_actions"] = np.ones((size, n_act - 1), np.bool_)
        a["legal_actions"][-1] = False
    else:
        a["legal_actions"] = np.asarray(legal)
        if a["legal_actions"].shape != (size, n_act - 1):
            raise ReplayError(f"trajectory.legal_actions must have shape [S, A_env] = ({size}, {n_act - 1}) "
                              f"(A_env = augmented actions - 1), got {a['legal_actions'].shape}")
        a["legal_actions"] = a["legal_actions"].astype(np.bool_)
    return a
