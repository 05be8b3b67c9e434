"""A training or testing worker: one actor playing segments and test games with published params."""

from __future__ import annotations

import time

import numpy as np

from moozi.checkpoint import decode_part, encode_part
from moozi.config import config_from_dict
from moozi.hosts.common import check_versions, root_keys, slow_down, use_params, worker_seed


class ActingHost:
    """A training worker (``role="train"``) or the testing worker (``role="test"``).

    ``worker_id`` and ``incarnation`` pick its random streams; worker 0's first
    incarnation uses the run's own streams (a one-worker run is the same run
    whatever the backend).
    """

    def __init__(self, config: dict, role: str, worker_id: int = 0, incarnation: int = 0,
                 expected_versions: dict | None = None):
        check_versions(expected_versions)
        import jax

        from moozi.parts import build_parts
        from moozi.workers import make_actor

        self.config = config_from_dict(config)
        self.role = role
        env, model = build_parts(self.config)
        self.spec = env.spec
        seed = self.config.schedule.seed
        key = root_keys(seed)[1 if role == "train" else 2]
        actor_seed = seed
        if (worker_id, incarnation) != (0, 0):
            key = jax.random.fold_in(jax.random.fold_in(key, worker_id), incarnation)
            actor_seed = worker_seed(seed, 1 if role == "train" else 2, worker_id, incarnation)
        record = role == "test" and self.config.testing.record_every > 0
        from moozi.eval.perfect import testing_opponent

        opponent = testing_opponent(self.config.testing.opponent, self.config.env.name, env.spec) if role == "test" \
            else None
        try:
            self.actor = make_actor(self.config, env, model, role, key, seed=actor_seed, opponent=opponent,
                                    record_frames=True if record else None)
        finally:
            env.close()
        self.busy_s = 0.0

    def run(self, published: dict):
        """One segment with ``published`` params: ``(episodes, metrics)`` (metrics carry the version played)."""
        t = time.perf_counter()
        use_params(self.actor, published)
        episodes, metrics = self.actor.run()
        if self.role == "train":
            slow_down(t, self.config.distributed.slowdown_workers)
        metrics["acting/version"] = self.actor.version
        self.busy_s += time.perf_counter() - t
        metrics["acting/busy_s"] = self.busy_s
        return episodes, metrics

    def test(self, published: dict, num_episodes: int, record: bool = False) -> dict:
        """Play ``num_episodes`` greedy games; their return statistics.

        With ``record`` (and ``testing.record_every > 0``), ``"_episode"`` holds the
        first game (``{"trajectory", "agent_seat"}``, numpy with frames) to draw.
        """
        from moozi.workers import agent_return, play_games

        use_params(self.actor, published)
        # Games left unfinished by the last test were begun by older params: start afresh, so the
        # score (and the best checkpoint chosen by it) belongs to these params alone.
        self.actor.new_episodes()
        games = play_games(self.actor, num_episodes)
        returns = np.array([agent_return(g.trajectory, g.agent_seat, self.spec.two_player) for g in games])
        lengths = np.array([g.length for g in games])
        return {
            "test/return_mean": float(returns.mean()),
            "test/return_std": float(returns.std()),
            "test/return_min": float(returns.min()),
            "test/return_max": float(returns.max()),
            "test/episode_length": float(lengths.mean()),
            "test/episodes": int(len(games)),
            **({"_episode": {"trajectory": games[0].trajectory, "agent_seat": int(games[0].agent_seat)}}
               if record and self.config.testing.record_every > 0 else {}),
        }

    def state(self) -> bytes:
        """The actor's checkpoint part, encoded (crosses the process boundary as bytes)."""
        return encode_part(self.actor.state_dict())

    def load_state(self, data: bytes) -> None:
        self.actor.load_state_dict(decode_part(data, self.actor.template(), where=f"{self.role} part"))

    def close(self) -> None:
        self.actor.close()
