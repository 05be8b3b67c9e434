"""Environment bridges behind one step contract (docs/architecture.md §3).

* :mod:`moozi.envs.contract`: ``TimeStep`` (what every bridge yields) and ``EnvSpec``.
* :mod:`moozi.envs.device`: the functional device-env interface (``DeviceEnv``,
  ``reset_batch``, ``step_batch``) and the host-side ``checked_step``.
* :mod:`moozi.envs.registry`: ``make_env("prefix:game", **kwargs)``, ``list_envs``, ``register``.
* :mod:`moozi.envs.protocol`: MinAtar protocols (the thesis's and gymnax's) as one named choice and a record.
* Bridges, each package imported only when one of its games is built: :mod:`moozi.envs.gymnax_bridge` and
  :mod:`moozi.envs.pgx_bridge` (JAX-native, the device path), :mod:`moozi.envs.openspiel_bridge`,
  :mod:`moozi.envs.minatar_bridge` and :mod:`moozi.envs.gym_bridge` (Gymnasium and Atari; the host path
  through :mod:`moozi.envs.host` and :mod:`moozi.envs.pool`, worker processes for the emulators).
* :mod:`moozi.envs.replay_env` (stored episodes replayed for reanalyze), :mod:`moozi.envs.symmetry` (board
  symmetries), :mod:`moozi.envs.notation` (moves in a game's own notation: ``x3`` in connect four).
"""

from moozi.envs.contract import (
    EnvSpec,
    GameContractError,
    IllegalActionError,
    TimeStep,
    UnknownEnvError,
    check_lossless,
    decode_frames,
    encode_frames,
)
from moozi.envs.device import DeviceEnv, EnvState, check_actions, checked_step, reset_batch, step_batch
from moozi.envs.registry import list_envs, make_env, register, unregister

__all__ = [
    "DeviceEnv",
    "EnvSpec",
    "EnvState",
    "GameContractError",
    "IllegalActionError",
    "TimeStep",
    "UnknownEnvError",
    "check_actions",
    "check_lossless",
    "checked_step",
    "decode_frames",
    "encode_frames",
    "list_envs",
    "make_env",
    "register",
    "reset_batch",
    "step_batch",
    "unregister",
]
