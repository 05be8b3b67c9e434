"""Board symmetries: what a game declares, and how training windows are transformed by them.

A symmetry of a game is a pair ``(cells, actions)`` of permutations under
which the rules do not change: ``cells`` rearranges the ``H * W`` board cells
of every observation plane (``new_frame[i] = frame[cells[i]]``, cells in
row-major order), and ``actions`` maps each environment action to its image
(``a -> actions[a]``). Values and rewards are unchanged by a symmetry, so a
stored position seen through one is another position of the same worth with
the policy permuted: AlphaZero's data augmentation.

Games declare their symmetries in ``EnvSpec.symmetries`` (the identity
first); the bridges do for tic-tac-toe, connect four, Othello and Go, and a
user's ``HostEnv`` may. ``learner.augment_symmetries`` shows each sampled
window to the learner through a random one of them.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from moozi.types import Array, Trajectory

Symmetry = tuple[tuple[int, ...], tuple[int, ...]]


def _grid_maps(h: int, w: int) -> list[np.ndarray]:
    """Cell index maps of the board symmetries of an ``h x w`` grid: ``m[i]`` is the cell whose content
    cell ``i`` shows. The dihedral group (8) of a square board; identity, both flips and the half turn (4)
    of a rectangle."""
    grid = np.arange(h * w).reshape(h, w)
    maps = [grid, grid[::-1, :], grid[:, ::-1], grid[::-1, ::-1]]
    if h == w:
        maps += [grid.T, grid.T[::-1, :], grid.T[:, ::-1], grid.T[::-1, ::-1]]
    return [m.reshape(-1) for m in maps]


def cell_symmetries(h: int, w: int, extra_actions: int = 0) -> tuple[Symmetry, ...]:
    """Symmetries of a board game on an ``h x w`` grid whose actions are its cells (row-major), followed by
    ``extra_actions`` actions that no symmetry moves (a pass): tic-tac-toe, Othello, Go."""
    out = []
    for m in _grid_maps(h, w):
        # the move at cell c is shown at the cell i with m[i] = c
        image = np.empty(h * w, np.int64)
        image[m] = np.arange(h * w)
        actions = tuple(int(x) for x in image) + tuple(range(h * w, h * w + extra_actions))
        out.append((tuple(int(x) for x in m), actions))
    return tuple(out)


def column_mirror(h: int, w: int) -> tuple[Symmetry, ...]:
    """Identity and the left-right mirror of a game whose actions are the ``w`` columns (connect four)."""
    grid = np.arange(h * w).reshape(h, w)
    identity = (tuple(range(h * w)), tuple(range(w)))
    mirror = (tuple(int(x) for x in grid[:, ::-1].reshape(-1)), tuple(range(w - 1, -1, -1)))
    return (identity, mirror)


def check_symmetries(symmetries, observation_shape: tuple[int, ...], num_actions: int) -> str | None:
    """Why ``symmetries`` cannot be a game's (None if they can): permutations of the right sizes, the identity first."""
    if not isinstance(symmetries, tuple):
        return "a tuple of (cells, actions) permutation pairs"
    h, w = observation_shape[0], observation_shape[1]
    for k, sym in enumerate(symmetries):
        if not (isinstance(sym, tuple) and len(sym) == 2):
            return f"a tuple of (cells, actions) pairs (entry {k} is not a pair)"
        cells, actions = sym
        if not isinstance(cells, tuple) or sorted(cells) != list(range(h * w)):
            return f"entry {k}: cells must be a permutation of the {h * w} board cells 0..{h * w - 1}"
        if not isinstance(actions, tuple) or sorted(actions) != list(range(num_actions)):
            return f"entry {k}: actions must be a permutation of the {num_actions} actions 0..{num_actions - 1}"
    if symmetries and symmetries[0] != (tuple(range(h * w)), tuple(range(num_actions))):
        return "the identity first (entry 0 must leave every cell and action in place)"
    return None


def augment_tables(symmetries) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gather tables over the *augmented* action space (dummy = 0, environment action ``e`` = ``e + 1``):
    ``(cells [S, H*W], action_image [S, A+1], policy_source [S, A+1])`` int32; ``policy_source`` is the
    inverse of ``action_image`` (the permuted policy's entry ``j`` is the old entry ``policy_source[j]``)."""
    cells = np.array([s[0] for s in symmetries], np.int32)
    image = np.array([(0,) + tuple(a + 1 for a in s[1]) for s in symmetries], np.int32)
    return cells, image, np.argsort(image, axis=1).astype(np.int32)


def augment_windows(windows: Trajectory, symmetry: Array, tables) -> Trajectory:
    """Show each of ``B`` replay windows through its symmetry (inside the learner's jit).

    Args:
      windows: :class:`Trajectory` with a leading ``[B]`` axis; frames ``[B, S, H, W, C]``,
        actions ``[B, S]`` augmented, root_policies ``[B, S, A + 1]``.
      symmetry: ``[B]`` int index into the game's symmetries (0: the identity).
      tables: :func:`augment_tables` output.

    Returns:
      the windows with frames, actions and policies permuted (and legal masks,
      where present); rewards, values, players and flags are unchanged.
    """
    cells, image, source = (jnp.asarray(t) for t in tables)
    frames = windows.frames
    b, s, h, w, c = frames.shape
    flat = frames.reshape(b, s, h * w, c)
    flat = jnp.take_along_axis(flat, cells[symmetry][:, None, :, None], axis=2)
    actions = jnp.take_along_axis(image[symmetry], windows.actions.astype(jnp.int32), axis=1)
    policies = jnp.take_along_axis(windows.root_policies, source[symmetry][:, None, :], axis=2)
    out = windows.replace(frames=flat.reshape(b, s, h, w, c), actions=actions.astype(windows.actions.dtype),
                          root_policies=policies)
    if windows.legal_actions is not None:  # over environment actions: the augmented table without the dummy
        env_source = source[symmetry][:, 1:] - 1
        out = out.replace(legal_actions=jnp.take_along_axis(windows.legal_actions, env_source[:, None, :], axis=2))
    return out


def draw_symmetries(key, batch: int, probability, count: int) -> Array:
    """``[B]`` int32 symmetry indices for a search at play time (AlphaZero.jl's ``flip_probability``): with
    ``probability`` a uniformly drawn non-identity one of the game's ``count`` symmetries, else 0 (the identity)."""
    import jax

    k_use, k_which = jax.random.split(key)
    use = jax.random.uniform(k_use, (batch,)) < probability
    which = jax.random.randint(k_which, (batch,), 1, max(count, 2))
    return jnp.where(use & (count > 1), which, 0).astype(jnp.int32)


def transform_history(history, symmetry: Array, tables):
    """A rolling history ``(frames [B, L, H, W, C], actions [B, L] augmented)`` seen through ``symmetry [B]``
    (:func:`augment_tables`): every frame's cells and every past action permuted, as :func:`augment_windows`."""
    cells, image, _ = (jnp.asarray(t) for t in tables)
    frames, actions = history
    b, length, h, w, c = frames.shape
    flat = jnp.take_along_axis(frames.reshape(b, length, h * w, c), cells[symmetry][:, None, :, None], axis=2)
    actions = jnp.take_along_axis(image[symmetry], actions.astype(jnp.int32), axis=1)
    return flat.reshape(b, length, h, w, c), actions.astype(history[1].dtype)


def transform_legal(legal: Array, symmetry: Array, tables) -> Array:
    """Legal environment actions ``[B, A_env]`` as seen through ``symmetry [B]``: ``out[j] = legal[source[j]]``."""
    _, _, source = (jnp.asarray(t) for t in tables)
    return jnp.take_along_axis(legal, source[symmetry][:, 1:] - 1, axis=1)


def untransform_policy(policy: Array, symmetry: Array, tables) -> Array:
    """Per environment action values ``[B, A_env]`` found on the transformed board, back on the real one:
    the real move ``a`` is the transformed move ``image[a]`` (``out[a] = policy[image[a]]``)."""
    _, image, _ = (jnp.asarray(t) for t in tables)
    return jnp.take_along_axis(policy, image[symmetry][:, 1:] - 1, axis=1)
