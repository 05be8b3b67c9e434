"""Acting workers (no Ray import): one policy step, two actors, episode assembly.

* :mod:`.policy`: the jitted policy step every actor shares.
* :mod:`.episodes`: :class:`Episode`, the assembler, scoring of test games.
* :mod:`.device_actor` / :mod:`.pool_actor`: the two :class:`Actor` implementations.
* :func:`make_actor`: the actor a config asks for (training or testing role).
"""

from __future__ import annotations

from moozi.workers.actor import Actor
from moozi.workers.episodes import Episode, EpisodeAssembler, agent_player, agent_return, play_games, seats
from moozi.workers.policy import PolicyConfig, StepSample

__all__ = ["Actor", "Episode", "EpisodeAssembler", "PolicyConfig", "StepSample", "agent_player", "agent_return",
           "make_actor", "play_games", "seats"]


def make_actor(config, env, model, role: str, rng, *, seed: int = 0, num_envs: int | None = None,
               opponent=None, pool=None, record_frames: bool | None = None):
    """The actor for ``role`` (``"train"`` or ``"test"``) of a run's ``config``.

    A JAX-native game gets a :class:`~moozi.workers.device_actor.DeviceActor`;
    any other a :class:`~moozi.workers.pool_actor.PoolActor` over a pool of
    ``num_envs`` copies (``pool`` overrides it). ``opponent`` plays the other
    seat of two-player test games (a device or host opponent to match the path;
    :func:`moozi.eval.make_opponent` turns ``"random"`` / ``"perfect"`` into one).
    ``record_frames`` keeps the observations in the episodes (default: training
    only; test games that are drawn as GIFs turn it on).
    """
    from moozi.config import ConfigError
    from moozi.envs.pool import episode_seed, make_pool

    if isinstance(opponent, str):  # the caller resolves names (moozi.eval.make_opponent): workers never import eval
        raise TypeError(f"opponent = {opponent!r}: pass the opponent itself (moozi.eval.make_opponent({opponent!r}, "
                        "game, path=...)), not its name")

    if role not in ("train", "test"):
        raise ValueError(f"role = {role!r} is invalid: allowed 'train' or 'test'")
    train = role == "train"
    c = config
    policy = PolicyConfig(
        spec=env.spec,
        planner=c.planner if train else c.test_planner,
        discount=c.targets.discount,
        history_length=c.targets.history_length,
        mode=role,
        explore_moves=c.acting.explore_moves,
        random_moves=c.acting.random_moves if train else c.testing.random_moves,
        random_move_prob=c.acting.random_move_prob if train else c.testing.random_move_prob,
        temperature=0.0 if train else c.testing.temperature,
        record_frames=train if record_frames is None else bool(record_frames),
    )
    if num_envs is None:
        num_envs = c.env.num_envs if train else c.testing.envs
    acting = c.acting if train else None
    simulator = c.model.dynamics == "simulator"
    if simulator and (env.spec.path != "device" or pool is not None):
        raise ConfigError(f"model.dynamics = simulator (AlphaZero mode) needs a JAX-native game stepped on the "
                          f"device (pgx:, gymnax:); {c.env.name} is stepped on the host. Allowed for it: "
                          "model.dynamics = learned")
    if env.spec.path == "device" and pool is None:
        from moozi.workers.device_actor import DeviceActor

        steps = c.acting.steps_per_epoch if train else c.testing.steps_per_segment
        return DeviceActor(env, model, policy, num_envs, steps, rng, acting=acting, opponent=opponent,
                           simulator=simulator)
    from moozi.workers.pool_actor import PoolActor

    if pool is None:
        pool_seed = seed if train else episode_seed(seed, -1 % 2**31, 0)
        pool = make_pool(c.env.name, num_envs, seed=pool_seed, num_workers=c.env.num_workers if train else 0,
                         modules=c.env.modules, **c.env.kwargs)
    steps = c.acting.steps_per_epoch if train else 1
    return PoolActor(pool, model, policy, steps, rng, acting=acting, opponent=opponent, seed=seed)
