"""The components a backend hosts, each built from plain data (a config dict and integers).

* :class:`LearnerHost`: the learner / parameter server. Owns the train state,
  target network, replay and the run's checkpoints; batches and priorities
  never leave it. Parameters leave as one ``{"version", "params"}`` object per
  version.
* :class:`ActingHost`: a training worker (W of them) or the testing worker:
  one :class:`~moozi.workers.Actor` with its own episode assembly.
* :class:`ReanalyzeHost`: a reanalyze worker: a forced-action pool actor over
  a :class:`~moozi.envs.replay_env.ReplayEnvPool`, searching stored positions
  with the target parameters and no noise.

They import no Ray; :mod:`moozi.driver.distributed` wraps them as Ray actors
and :class:`~moozi.driver.backend.LocalBackend` calls them in-process. Each
owns its randomness, derived from the run seed, its worker id and its
incarnation (a restarted worker plays new games).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from moozi.checkpoint import (
    CheckpointError,
    PendingCheckpoint,
    checkpoint_name,
    decode_part,
    encode_part,
    find_latest,
    list_checkpoints,
    load_checkpoint,
    read_chunked_part,
    read_part_bytes,
)
from moozi.config import config_from_dict
from moozi.config.loading import reanalyze_planner
from moozi.run_dir import BEST_DIR, KEPT_DIR


def worker_seed(seed: int, *ids: int) -> int:
    """An independent integer seed for the component named by ``ids`` of a run seeded ``seed``."""
    return int(np.random.SeedSequence([int(seed), *map(int, ids)]).generate_state(1, np.uint32)[0])


def versions() -> dict[str, str]:
    """The versions a cluster's processes must agree on."""
    import jax

    import moozi

    return {"moozi": moozi.__version__, "jax": jax.__version__}


def check_versions(expected: dict | None) -> None:
    """Refuse to run a component whose moozi / jax differ from the driver's (a mixed cluster)."""
    if not expected:
        return
    here = versions()
    wrong = [f"{k} {here[k]} here but {v} on the driver" for k, v in expected.items() if here.get(k) != v]
    if wrong:
        import socket

        raise RuntimeError(f"version mismatch on node {socket.gethostname()}: " + "; ".join(wrong)
                           + ". Install the same versions on every node of the cluster.")


def _slow_down(since: float, factor: float) -> None:
    """Testing knob: make the work since ``since`` take ``factor`` times as long."""
    if factor > 1.0:
        time.sleep((factor - 1.0) * (time.perf_counter() - since))


def _root_keys(seed: int):
    import jax

    return jax.random.split(jax.random.key(seed), 3)  # learner, training actor, testing actor


class LearnerHost:
    """The learner, replay and checkpoints of one run (see the module doc)."""

    def __init__(self, config: dict, run_dir: str, expected_versions: dict | None = None):
        check_versions(expected_versions)
        from moozi.learner import Learner
        from moozi.parts import build_parts, stream_seed

        self.config = config_from_dict(config)
        self.run_dir = Path(run_dir)
        env, model = build_parts(self.config)
        self.spec = env.spec
        env.close()
        seed = self.config.schedule.seed
        self.learner = Learner(model, self.spec, self.config.learner, self.config.targets, self.config.replay,
                               _root_keys(seed)[0], replay_seed=stream_seed(seed, 0))
        self.busy_s = 0.0
        self._best: dict | None = None  # checkpoints/best's params, as published: acting.play_best's
        self._best_read = False

    # --- data and training ------------------------------------------------------------

    def add_episodes(self, episodes) -> dict:
        """Store episodes; returns steps added and the policy lag (versions) of the episodes at insertion."""
        steps = self.learner.add_episodes(episodes)
        lag = np.array([self.learner.version - ep.version for ep in episodes], np.float64)
        return {"steps": steps, "episodes": len(episodes), "lag": lag.tolist()}

    def ready(self, min_steps: int) -> bool:
        return self.learner.ready(min_steps)

    def train(self, num_updates: int, batch_size: int, lr_scale: float = 1.0) -> dict:
        t = time.perf_counter()
        out = self.learner.train(num_updates, batch_size, lr_scale)
        _slow_down(t, self.config.distributed.slowdown_learner)
        self.busy_s += time.perf_counter() - t
        return out

    def train_and_publish(self, num_updates: int, batch_size: int, lr_scale: float = 1.0) -> dict:
        """Async schedule: a chunk of updates, then a new version. The result is the published object
        (``version``, ``params``) with the chunk's ``metrics``, so it is stored once and passed by reference."""
        metrics = self.train(num_updates, batch_size, lr_scale)
        return {**self.publish(), "metrics": metrics}

    def publish(self) -> dict:
        """Publish the current params: the one object every worker receives by reference."""
        version, params = self.learner.publish()
        return {"version": version, "params": params}

    def params(self) -> dict:
        version, params = self.learner.params()
        return {"version": version, "params": params}

    def histograms(self) -> dict:
        """Raw histograms of the parameters and of Adam's gradient average (``output.histogram_every_updates``)."""
        return self.learner.histograms()

    def target_params(self) -> dict:
        """The target network (reanalyze's parameters), tagged with the published version it came with."""
        return {"version": self.learner.version, "params": self.learner.target_params(), "target": True}

    def stats(self) -> dict:
        out = self.learner.replay.stats()
        out["learner/busy_s"] = self.busy_s
        return out

    def checksum(self) -> float:
        """Sum of |params| (identical runs give identical sums)."""
        import jax

        return float(sum(np.abs(np.asarray(x, np.float64)).sum() for x in jax.tree_util.tree_leaves(
            jax.device_get(self.learner.state.params))))

    # --- reanalyze ------------------------------------------------------------------

    def reanalyze_batch(self, num_positions: int) -> dict:
        stamp, trajectories, ids = self.learner.reanalyze_batch(num_positions)
        return {"stamp": stamp, "trajectories": trajectories, "ids": ids}

    def apply_reanalyzed(self, stamp: int, episodes) -> dict:
        return self.learner.apply_reanalyzed(episodes, stamp)

    # --- checkpoints ------------------------------------------------------------------

    def save(self, step: int, parts: dict, meta: dict, with_replay: bool) -> dict:
        """Write one checkpoint: the learner's parts here, ``parts`` (name -> encoded bytes) from the workers.

        The replay is streamed a chunk at a time (its live steps only), so the write needs little memory
        beyond the buffer. Returns ``{"path", "metrics"}``: what the write cost (``checkpoint/*``)."""
        from moozi.observe.memory import PeakRss

        out = self.config.output
        directory = self.run_dir / "checkpoints"
        t = time.perf_counter()
        try:
            with PeakRss() as peak:
                pending = PendingCheckpoint(directory, step)
                try:
                    pending.write_part("learner", self.learner.state_dict())
                    if with_replay:
                        pending.write_chunked("replay", *self.learner.replay.checkpoint_chunks())
                        pending.write_part("books", self.learner.books_state_dict())
                    for name, data in parts.items():
                        pending.write_encoded(name, data)
                except BaseException:
                    pending.abort()
                    raise
                path = pending.commit(meta, keep=out.keep_checkpoints, keep_part="replay")
        except OSError as e:  # a full or read-only disk: say what was kept
            previous = list_checkpoints(directory)
            kept = (f"the previous checkpoint {directory / checkpoint_name(previous[-1].step)} is intact" if previous
                    else "no earlier checkpoint exists")
            raise CheckpointError(f"the checkpoint at update {step} was not written to {directory} "
                                  f"({e.strerror or e}); {kept}") from e
        try:
            self._keep_params(step, meta)
        except OSError as e:  # the checkpoint itself is committed: say so
            raise CheckpointError(f"the checkpoint at update {step} was written ({path}), but its params were not "
                                  f"kept in {directory / KEPT_DIR} ({e.strerror or e})") from e
        metrics = {"checkpoint/write_s": time.perf_counter() - t,
                   "checkpoint/bytes": float(sum(p["bytes"] for p in pending.parts.values()))}
        if with_replay:
            metrics["checkpoint/replay_bytes"] = float(pending.parts["replay"]["bytes"])
        if peak.extra_mb is not None:
            metrics["checkpoint/peak_extra_mb"] = peak.extra_mb
        return {"path": str(path), "metrics": metrics}

    def _keep_params(self, step: int, meta: dict) -> None:
        """At the first checkpoint past each ``output.keep_every_updates`` updates, keep the current params in
        ``checkpoints/kept`` (a params-only checkpoint, as ``best``; never pruned)."""
        every = self.config.output.keep_every_updates
        directory = self.run_dir / "checkpoints" / KEPT_DIR
        kept = list_checkpoints(directory)
        if not every or step // every <= (kept[-1].step // every if kept else 0):
            return
        version, params = self.learner.params()
        pending = PendingCheckpoint(directory, step)
        try:
            pending.write_part("learner", {"published": params, "version": int(version)})
        except BaseException:
            pending.abort()
            raise
        pending.commit(meta, keep=10**9)

    def save_best(self, published: dict, meta: dict) -> str:
        """Keep ``published`` (the params a test just scored best with) as ``checkpoints/best``.

        A checkpoint folder of its own with one part, ``learner`` = ``{"published": params}``,
        so :func:`moozi.driver.load_params` reads it like any checkpoint; ``meta`` says
        when and with what score. One is kept; a failed write leaves the previous one.
        """
        pending = PendingCheckpoint(self.run_dir / "checkpoints" / BEST_DIR, int(meta["counters"]["updates"]))
        try:
            pending.write_part("learner", {"published": published["params"], "version": int(published["version"])})
        except BaseException:
            pending.abort()
            raise
        path = str(pending.commit(meta, keep=1))
        self._best, self._best_read = {"version": int(published["version"]), "params": published["params"]}, True
        return path

    def best(self) -> dict | None:
        """``checkpoints/best``'s params as published (``{'version', 'params'}``; None before there is one): what
        training workers act with under ``acting.play_best``. A resumed run reads them from the run's folder."""
        if not self._best_read:
            self._best_read = True
            from moozi.checkpoint import CheckpointError
            from moozi.run_dir import open_run

            try:
                opened = open_run(self.run_dir, "best", self.config)
                self._best = {"version": int(opened.meta.get("version", 0)), "params": opened.params}
            except (CheckpointError, FileNotFoundError, OSError):
                self._best = None
        return self._best

    def restore(self, worker_parts: list[str]) -> dict:
        """Load the newest checkpoint whose every part is good; return its metadata, path and the workers'
        parts (encoded). A corrupt one, whichever part is bad, is set aside (``checkpoints/rejected``) and
        listed in ``rejected``; the replay comes from the same checkpoint or, when it holds none, from the
        newest good one that does (then the resume is not exact)."""
        import logging

        directory = self.run_dir / "checkpoints"
        rejected: list = []
        path, record = find_latest(directory, parts=["learner"], set_aside=True, rejected=rejected)
        # find_latest checked every part's checksum: reading them again only checks sizes
        parts, meta = load_checkpoint(path, {"learner": self.learner.template()}, parts=["learner"], verified=True)
        if "replay" in record["parts"]:
            replay_path, replay_record = path, record
        else:
            replay_path, replay_record = find_latest(directory, parts=["replay"], set_aside=True, rejected=rejected)
            logging.getLogger("moozi").warning(
                "replay restored from the older checkpoint %s (output.replay_every_checkpoints = %d): "
                "this resume is not exact", replay_path, self.config.output.replay_every_checkpoints)
        self.learner.load_state_dict(parts["learner"])
        self.learner.replay.load_chunks(*read_chunked_part(replay_path, "replay", verified=True))
        if "books" in replay_record["parts"]:
            self.learner.load_books_state_dict(load_checkpoint(replay_path, parts=["books"], verified=True)[0]["books"])
        encoded = {name: read_part_bytes(path, name) for name in worker_parts if name in record["parts"]}
        return {"meta": meta, "path": str(path), "parts": encoded, "rejected": rejected}

    def close(self) -> None:
        pass


def _use_params(actor, published: dict) -> None:
    """Give ``actor`` a learner's published ``{'version', 'params'}``; to the device only on a new version."""
    if not isinstance(published, dict) or "version" not in published:
        raise TypeError("expected the {'version', 'params'} object a learner publishes")
    version = int(published["version"])
    if actor.params is None or version != actor.version:
        actor.set_params(version, published["params"])


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
        key = _root_keys(seed)[1 if role == "train" else 2]
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
        _use_params(self.actor, published)
        episodes, metrics = self.actor.run()
        if self.role == "train":
            _slow_down(t, self.config.distributed.slowdown_workers)
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

        _use_params(self.actor, published)
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


class ReanalyzeHost:
    """A reanalyze worker: re-searches stored episodes with given (target) params and the reanalyze planner
    (``reanalyze_planner``; default the training planner without root noise).

    Histories are rebuilt by replaying each stored episode from its first step
    with the stored actions forced (:class:`~moozi.envs.replay_env.ReplayEnvPool`),
    so every position is searched exactly as an actor would have, and the
    same jitted policy step produces the new v* and p*.
    """

    def __init__(self, config: dict, worker_id: int = 0, incarnation: int = 0,
                 expected_versions: dict | None = None):
        check_versions(expected_versions)
        import jax

        from moozi.envs.replay_env import ReplayEnvPool
        from moozi.parts import build_parts
        from moozi.workers.policy import PolicyConfig
        from moozi.workers.pool_actor import PoolActor

        self.config = c = config_from_dict(config)
        env, model = build_parts(c)
        self.spec = env.spec
        env.close()
        policy = PolicyConfig(spec=self.spec, planner=reanalyze_planner(c), discount=c.targets.discount,
                              history_length=c.targets.history_length, mode="forced", record_frames=False)
        self.pool = ReplayEnvPool(self.spec, c.reanalyze.envs)
        key = jax.random.fold_in(jax.random.key(worker_seed(c.schedule.seed, 3, worker_id)), incarnation)
        self.actor = PoolActor(self.pool, model, policy, num_steps=16, rng=key)
        self.busy_s = 0.0
        self.positions = 0

    def reanalyze(self, published: dict, batch: dict):
        """Re-search the stored episodes of a :meth:`LearnerHost.reanalyze_batch`: ``(stamp, episodes, metrics)``."""
        t = time.perf_counter()
        _use_params(self.actor, published)
        ids = list(batch["ids"])
        self.pool.add(batch["trajectories"], ids=ids)
        wanted, done = set(ids), {}
        while len(done) < len(wanted):
            episodes, _ = self.actor.run()
            for ep in episodes:
                if ep.source_id in wanted:
                    done[ep.source_id] = ep
            if self.pool.exhausted and len(done) < len(wanted) and not episodes:
                raise RuntimeError(f"reanalyze: {len(wanted) - len(done)} stored episodes never finished")
        episodes = [done[i] for i in ids]
        positions = sum(int(ep.trajectory.last) + 1 for ep in episodes)
        self.positions += positions
        dt = time.perf_counter() - t
        self.busy_s += dt
        return batch["stamp"], episodes, {"reanalyze/positions_per_s": positions / max(dt, 1e-9),
                                          "reanalyze/busy_s": self.busy_s}

    def close(self) -> None:
        self.actor.close()
