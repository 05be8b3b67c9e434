"""The mover's view: two-player board observations relabelled so the player to move is player 0.

Some bridges (OpenSpiel's tic-tac-toe and connect four) emit the same board
for both players, one piece plane per colour, plus a to-play plane. A network
fed that must learn every pattern twice, once per colour ("x has two in a row
and o is to move" and its mirror). In games whose rules treat both colours
alike, relabelling the players so that the mover is always player 0 loses
nothing and lets both seats share what is learnt (pgx's observations are
already this way). ``model.mover_relative`` turns it on; the game declares its
planes in ``EnvSpec.player_planes``.

The relabelling works on the stacked observation ``[..., H, W, L * (C + A)]``
(see :mod:`moozi.model.history`): where the newest frame's to-play plane is 1,
the two piece planes of *every* frame swap, so older frames are seen from the
same (current) mover; then every frame's to-play plane is zeroed, since after
the relabelling the current one always reads 0 (zeroing the older ones too
keeps padding frames before the episode start all zero). Action planes are
untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class MoverView:
    """Where the player planes sit in a stacked observation.

    Attributes:
      frame_channels: C, channels of one frame (the env's observation).
      history_length: L, frames stacked.
      player_planes: ``(player 0's piece plane, player 1's piece plane,
        to-play plane)``, channel indices within one frame (``EnvSpec.player_planes``).
    """

    frame_channels: int
    history_length: int
    player_planes: tuple[int, int, int]

    def __post_init__(self):
        p0, p1, tp = self.player_planes
        if len({p0, p1, tp}) != 3 or not all(0 <= p < self.frame_channels for p in (p0, p1, tp)):
            raise ValueError(f"player_planes {self.player_planes} must be 3 distinct channels in "
                             f"[0, {self.frame_channels})")


def mover_view(observation, view: MoverView):
    """Relabel players so the mover is player 0 (see the module doc).

    Args:
      observation: ``[B, H, W, L * (C + A)]`` stacked observations (float).
      view: the plane layout.

    Returns:
      the same shape: piece planes swapped where the newest frame's to-play
      plane is 1 (read at cell (0, 0)), every to-play plane zeroed. Jittable.
    """
    c, length = view.frame_channels, view.history_length
    p0, p1, tp = view.player_planes
    n = observation.shape[-1]
    swap = np.arange(n)
    keep = np.ones(n, np.float32)
    for frame in range(length):
        base = frame * c
        swap[base + p0], swap[base + p1] = base + p1, base + p0
        keep[base + tp] = 0.0
    player_one = observation[..., :1, :1, (length - 1) * c + tp] > 0.5  # [B, 1, 1]
    relabelled = jnp.where(player_one[..., None], observation[..., swap], observation)
    return relabelled * jnp.asarray(keep)
