"""History stacking: the last L frames and L actions as one image (docs/architecture.md §4).

Frames o_{t-L+1..t} (zeros before the episode start) and actions
a_{t-L..t-1} (dummy before the start), each action one-hot over the augmented
action space, divided by |A^a| and tiled over (H, W); everything is
concatenated on the channel axis, oldest first:

    [o_{t-L+1}, ..., o_t, onehot(a_{t-L})/A, ..., onehot(a_{t-1})/A]

giving ``(H, W, L * (C + A))``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from moozi.types import DUMMY_ACTION


def stacked_channels(frame_channels: int, num_actions: int, history_length: int) -> int:
    """Channel count of a stacked observation: ``L * (C + A)``."""
    return history_length * (frame_channels + num_actions)


def stack_history(frames, actions, num_actions: int):
    """Stack a history window into one observation.

    Args:
      frames: ``[L, H, W, C]`` float frames o_{t-L+1..t} (already zero before the start).
      actions: ``[L]`` int augmented actions a_{t-L..t-1}; ``actions[i]`` led to ``frames[i]``.
      num_actions: A, the augmented action-space size.

    Returns:
      ``[H, W, L * (C + A)]`` float32.
    """
    if frames.ndim != 4:
        raise ValueError(f"frames must be [L, H, W, C], got shape {frames.shape}")
    if actions.shape != frames.shape[:1]:
        raise ValueError(f"actions must be [L] = {frames.shape[:1]}, got shape {actions.shape}")
    length, height, width, channels = frames.shape
    frame_planes = jnp.transpose(frames.astype(jnp.float32), (1, 2, 0, 3)).reshape(
        height, width, length * channels
    )
    onehot = jax.nn.one_hot(actions, num_actions, dtype=jnp.float32) / num_actions
    action_planes = jnp.broadcast_to(
        onehot.reshape(1, 1, length * num_actions), (height, width, length * num_actions)
    )
    return jnp.concatenate([frame_planes, action_planes], axis=-1)


def history_at(frames, actions, first, t, history_length: int, num_actions: int):
    """Stacked observation at index ``t`` of a stored trajectory.

    Reads frames at ``t-L+1..t`` and actions at ``t-L..t-1`` from the stored
    arrays, with zeros / dummy for indices before ``first`` (the episode's step 0).

    Args:
      frames: ``[S, H, W, C]`` stored frames; ``actions``: ``[S]`` augmented actions
        (``actions[i]`` is the action taken at step i).
      first: ``[]`` int index of the episode's step 0 (may be negative in a window).
      t: ``[]`` int index to stack at; ``first <= t``.
      history_length: L; ``num_actions``: A.

    Returns:
      ``[H, W, L * (C + A)]`` float32; jit- and vmap-friendly.
    """
    size = frames.shape[0]
    offsets = jnp.arange(history_length) - (history_length - 1)
    frame_idx = t + offsets
    frame_ok = frame_idx >= first
    window = frames[jnp.clip(frame_idx, 0, size - 1)]
    window = jnp.where(frame_ok[:, None, None, None], window, 0.0)
    action_idx = frame_idx - 1
    action_ok = action_idx >= first
    acts = jnp.where(action_ok, actions[jnp.clip(action_idx, 0, size - 1)], DUMMY_ACTION)
    return stack_history(window, acts, num_actions)


def history_init(batch_size: int, frame_shape, history_length: int):
    """Empty rolling history: zeros frames ``[B, L, H, W, C]``, dummy actions ``[B, L]``."""
    frames = jnp.zeros((batch_size, history_length, *frame_shape), jnp.float32)
    actions = jnp.full((batch_size, history_length), DUMMY_ACTION, jnp.int32)
    return frames, actions


def history_push(state, frame, action, is_first):
    """Append one step to a rolling history.

    Args:
      state: ``(frames [B, L, H, W, C], actions [B, L])``.
      frame: ``[B, H, W, C]`` the new observation o_t.
      action: ``[B]`` augmented action a_{t-1} that led to it (ignored where ``is_first``).
      is_first: ``[B]`` bool, o_t starts an episode: the history is cleared first.

    Returns:
      the new state.
    """
    frames, actions = state
    keep = ~is_first
    frames = jnp.where(keep[:, None, None, None, None], frames, 0.0)
    actions = jnp.where(keep[:, None], actions, DUMMY_ACTION)
    action = jnp.where(is_first, DUMMY_ACTION, action)
    frames = jnp.concatenate([frames[:, 1:], frame[:, None].astype(jnp.float32)], axis=1)
    actions = jnp.concatenate([actions[:, 1:], action[:, None].astype(jnp.int32)], axis=1)
    return frames, actions


def history_observation(state, num_actions: int):
    """Stacked observations ``[B, H, W, L * (C + A)]`` from a rolling history."""
    frames, actions = state
    return jax.vmap(stack_history, in_axes=(0, 0, None))(frames, actions, num_actions)
