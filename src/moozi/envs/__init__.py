"""Environment bridges behind one step contract (docs/architecture.md §3).

* :mod:`moozi.envs.contract`: ``TimeStep`` (what every bridge yields) and ``EnvSpec``.
* :mod:`moozi.envs.device`: the functional device-env interface (``DeviceEnv``,
  ``reset_batch``, ``step_batch``) and the host-side ``checked_step``.
* :mod:`moozi.envs.registry`: ``make_env("prefix:game", **kwargs)``, ``list_envs``, ``register``.
* Bridges: :mod:`moozi.envs.gymnax_bridge`, :mod:`moozi.envs.pgx_bridge` (their
  packages are imported only when one of their games is built).
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
