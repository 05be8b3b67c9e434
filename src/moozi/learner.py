"""The learner / parameter server: owns the train state, the target network and replay.

A plain class (no Ray import): the local driver calls it in-process, and the
Ray backend wraps it whole, so batches and priorities never cross a process
boundary. Episodes come in (:meth:`Learner.add_episodes`), training runs in
chunks (:meth:`Learner.train`), and parameters go out as numpy, versioned
(:meth:`Learner.publish`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from moozi.config import ConfigError, LearnerConfig, ReplayConfig, TargetConfig
from moozi.envs.contract import EnvSpec
from moozi.errors import NonFiniteError
from moozi.model.networks import Model
from moozi.replay import ReplayBuffer
from moozi.targets import priorities as target_priorities
from moozi.types import Trajectory
from moozi.update import DataParallel, TrainState, init_train_state, make_window_update_fn


def _bucket(n: int) -> int:
    """Padded length for per-episode jitted calls: a power of two (few compiles)."""
    return max(8, 1 << (n - 1).bit_length())


@functools.lru_cache(maxsize=None)
def _priorities_fn(config: TargetConfig):
    return jax.jit(lambda traj: target_priorities(traj, config))


def episode_priorities(traj: Trajectory, config: TargetConfig) -> np.ndarray:
    """``[T + 1]`` initial priorities ``|v*_i - G^N_i|`` of one whole episode (numpy).

    :func:`moozi.targets.priorities` reads rewards, values, to_play and
    random_actions only, so frames and policies are passed as placeholders and
    the episode is padded to a power-of-two length (few compilations).
    """
    size = int(np.asarray(traj.rewards).shape[0])
    pad = _bucket(size) - size

    def padded(x, dtype):
        return np.pad(np.asarray(x, dtype), (0, pad))

    random = traj.random_actions if traj.random_actions is not None else np.zeros(size, bool)
    window = Trajectory(
        frames=np.zeros((size + pad, 1, 1, 1), np.float32),
        actions=np.zeros(size + pad, np.int32),
        rewards=padded(traj.rewards, np.float32),
        root_values=padded(traj.root_values, np.float32),
        root_policies=np.zeros((size + pad, 1), np.float32),
        to_play=padded(traj.to_play, np.int32),
        first=np.int32(0),
        last=np.int32(size - 1),
        is_terminal=np.bool_(traj.is_terminal),
        random_actions=padded(random, np.bool_),
    )
    return np.asarray(_priorities_fn(config)(window), np.float64)[:size]


def training_symmetries(config: LearnerConfig, spec: EnvSpec) -> tuple:
    """The symmetries the learner augments with: the game's when ``augment_symmetries`` is on, else none.
    Refuses the switch for a game that declares none."""
    if not config.augment_symmetries:
        return ()
    if len(spec.symmetries) < 2:
        raise ConfigError(f"learner.augment_symmetries = true needs a game with board symmetries; {spec.name} "
                          "declares none (EnvSpec.symmetries; moozi knows them for tic-tac-toe, connect four, "
                          "Othello and Go). Allowed for it: false")
    return spec.symmetries


def training_chance_code(config: LearnerConfig, spec: EnvSpec, chance_outcomes: int):
    """The game's code function the learner trains the chance prior on (``learner.chance_codes = game``), or
    None (the encoder's codes). Refuses a game that names no outcomes, or a code count the model lacks."""
    if config.chance_codes != "game":
        return None
    from moozi.envs.chance import chance_code

    if not spec.chance_code:
        raise ConfigError(f"learner.chance_codes = 'game' needs a game that names its chance outcomes; {spec.name} "
                          "names none (EnvSpec.chance_code; moozi knows them for pgx:2048). Allowed for it: encoder")
    code = chance_code(spec.chance_code)
    if chance_outcomes != code.outcomes:
        raise ConfigError(f"model.chance_outcomes = {chance_outcomes} with learner.chance_codes = 'game': "
                          f"{spec.name} names {code.outcomes} outcomes ({code.what}); allowed: "
                          f"model.chance_outcomes = {code.outcomes}")
    return code.fn


class Learner:
    """Owns a :class:`~moozi.update.TrainState`, the jitted update and the replay buffer.

    Args:
      model: the network.
      spec: the game (frame shape, storage dtype and scale).
      learner_config / target_config / replay_config: the run's settings.
      rng: PRNG key for the initial parameters.
      replay_seed: seeds replay's own generator.

    ``version`` counts published parameter sets; actors compare it to know
    whether their copy is stale.
    """

    def __init__(self, model: Model, spec: EnvSpec, learner_config: LearnerConfig, target_config: TargetConfig,
                 replay_config: ReplayConfig, rng, replay_seed: int = 0):
        self.model = model
        self.config = learner_config
        self.target_config = target_config
        self.state: TrainState = init_train_state(model, learner_config, rng)
        self._parallel = DataParallel(learner_config.devices) if learner_config.devices > 1 else None
        if self._parallel is not None:
            self.state = self._parallel.state(self.state)
        self.replay = ReplayBuffer(replay_config, target_config, spec.observation_shape, model.num_actions,
                                   frame_dtype=spec.observation_dtype, seed=replay_seed)
        self._symmetries = training_symmetries(learner_config, spec)
        self._update = make_window_update_fn(model, learner_config, target_config, spec.observation_scale,
                                             self._symmetries,
                                             None if self._parallel is None else self._parallel.replicated,
                                             training_chance_code(learner_config, spec, model.config.chance_outcomes))
        self.version = 0
        self._published = jax.device_get(self.state.params)
        self.loop = None  # schedule.kind = device: the moozi.fused.DeviceLoop (acting and the ring), checkpointed here
        # Per stored trajectory: the params version it was played with (policy lag at sampling) and the
        # stamp of the reanalyze request that last handed it out (least recently reanalyzed first).
        self._traj_version: dict[int, int] = {}
        self._reanalyzed_at: dict[int, int] = {}
        self._searched_version: dict[int, int] = {}  # params version of the newest search (acting or reanalyze)
        self._reanalyze_stamp = 0

    @property
    def updates(self) -> int:
        """Updates done so far."""
        return int(self.state.step)

    # ------------------------------------------------------------------ data in

    def add_episodes(self, episodes) -> int:
        """Store finished episodes (``Episode`` objects or ``Trajectory``); returns steps added."""
        steps = 0
        computed = self.replay.config.initial_priority == "computed"
        for ep in episodes:
            traj = getattr(ep, "trajectory", ep)
            prio = episode_priorities(traj, self.target_config) if computed else None
            tid = self.replay.add(traj, prio)
            self._traj_version[tid] = int(getattr(ep, "version", self.version))
            steps += int(traj.last) + 1
        self._forget_evicted()
        return steps

    def _forget_evicted(self) -> None:
        """Drop bookkeeping of evicted trajectories (memory stays bounded once replay is full)."""
        stored = self.replay.trajectory_ids()
        oldest = int(stored[0]) if stored.size else float("inf")
        for book in (self._traj_version, self._reanalyzed_at, self._searched_version):
            if book and min(book) < oldest:
                for tid in [t for t in book if t < oldest]:
                    del book[tid]

    def update_search_stats(self, ids, root_values, root_policies=None) -> int:
        """Reanalyze results in: store fresh v* / p* and recompute the touched trajectories' priorities."""
        touched = self.replay.update_search_stats(ids, root_values, root_policies)
        if self.replay.config.initial_priority == "computed":
            for tid in touched:
                traj = self.replay.get_trajectory(int(tid))
                self.replay.set_trajectory_priorities(int(tid), episode_priorities(traj, self.target_config))
        return len(touched)

    def reanalyze_batch(self, num_positions: int) -> tuple[int, list[Trajectory], list[int]]:
        """Stored episodes to re-search, stalest search first.

        An episode's search statistics are as old as the params that produced
        them: the acting params for one never reanalyzed, the learner's params
        when it was last handed out otherwise. The stalest go first (ties:
        oldest episode first), so fresh self-play data is not re-searched with
        params no newer than the ones that just played it.

        Returns ``(stamp, trajectories, ids)`` with at least ``num_positions``
        positions (fewer if replay holds fewer); ``stamp`` must come back with
        the results (:meth:`apply_reanalyzed`) so that a write-back overtaken by
        a newer request for the same episode, or for an evicted one, is skipped.
        """
        self._forget_evicted()
        ids = self.replay.trajectory_ids()
        if ids.size == 0:
            return 0, [], []
        searched = np.array([self._searched_version.get(int(t), self._traj_version.get(int(t), -1)) for t in ids])
        order = np.lexsort((ids, searched))  # stalest search, then oldest
        self._reanalyze_stamp += 1
        stamp = self._reanalyze_stamp
        chosen, trajs, total = [], [], 0
        for i in order:
            tid = int(ids[i])
            traj = self.replay.get_trajectory(tid)
            chosen.append(tid)
            trajs.append(traj)
            self._reanalyzed_at[tid] = stamp
            self._searched_version[tid] = self.version
            total += int(traj.last) + 1
            if total >= num_positions:
                break
        return stamp, trajs, chosen

    def apply_reanalyzed(self, episodes, stamp: int | None = None) -> dict[str, float]:
        """Store the fresh v* / p* of replayed episodes (a forced-action actor's output).

        Each episode's ``source_id`` names the stored trajectory it replayed.
        Skipped: one evicted since it was handed out, and (with ``stamp``) one
        handed out again by a newer :meth:`reanalyze_batch` since. Returns
        counts and the change of the search statistics over the written
        positions' non-last steps: ``reanalyze/abs_dv`` (mean |v*_new - v*_old|)
        and ``reanalyze/kl`` (mean KL(p*_old || p*_new)).
        """
        done = skipped = positions = 0
        dv, kl = [], []
        for ep in episodes:
            tid = int(ep.source_id)
            if not self.replay.has_trajectory(tid) or (stamp is not None and self._reanalyzed_at.get(tid) != stamp):
                skipped += 1
                continue
            ids = self.replay.trajectory_indices(tid)
            if ids.size != int(ep.trajectory.last) + 1:
                raise ValueError(f"episode replaying trajectory {tid} has {int(ep.trajectory.last) + 1} steps, "
                                 f"the stored one {ids.size}")
            old = self.replay.get_trajectory(tid)
            new_v = np.asarray(ep.trajectory.root_values, np.float64)
            new_p = np.asarray(ep.trajectory.root_policies, np.float64)
            acted = slice(0, ids.size - 1)
            dv.append(np.abs(new_v[acted] - np.asarray(old.root_values, np.float64)[acted]))
            p_old = np.asarray(old.root_policies, np.float64)[acted]
            kl.append(np.sum(p_old * (np.log(p_old + 1e-12) - np.log(new_p[acted] + 1e-12)), axis=-1))
            done += self.update_search_stats(ids, ep.trajectory.root_values, ep.trajectory.root_policies)
            positions += ids.size
        dv_all = np.concatenate(dv) if dv else np.zeros(0)
        kl_all = np.concatenate(kl) if kl else np.zeros(0)
        return {"reanalyze/trajectories": float(done), "reanalyze/skipped": float(skipped),
                "reanalyze/positions": float(positions),
                "reanalyze/abs_dv": float(dv_all.mean()) if dv_all.size else 0.0,
                "reanalyze/kl": float(kl_all.mean()) if kl_all.size else 0.0}

    def sampling_lag(self, ids) -> np.ndarray:
        """Policy lag (published versions since it was played) of stored positions ``ids``."""
        tids, _ = self.replay.locate(ids)
        return np.array([self.version - self._traj_version.get(int(t), self.version) for t in tids if t >= 0])

    def ready(self, min_steps: int = 0) -> bool:
        """Replay holds at least ``min_steps`` steps and can be sampled."""
        return self.replay.size >= min_steps and self.replay.ready()

    # ------------------------------------------------------------------ training

    def train(self, num_updates: int, batch_size: int, lr_scale: float = 1.0) -> dict[str, float]:
        """Run ``num_updates`` updates; return their mean metrics (one host sync per call).

        ``lr_scale`` multiplies the learning rate of this call's updates (the
        driver's decay over the run's budget, :func:`moozi.update.budget_lr_scale`).

        Batches are prefetched one ahead: while the device runs update ``i``
        (asynchronous dispatch), the host samples and transfers batch
        ``i + 1``. The new priorities of the whole chunk are written back to
        replay at the end, so within one call the sampler sees the priorities
        as they were when the call began (a lag of at most ``num_updates``
        updates, like any asynchronous prioritized replay).
        """
        if num_updates <= 0:
            return {}
        par = self._parallel
        if par is None:
            put = lambda s: jax.device_put((s.windows, s.positions, s.weights, s.symmetry))  # noqa: E731
            scale = jax.device_put(np.float32(lr_scale))  # an array, so a new value never recompiles
        else:  # data parallel: the batch split over the mesh, the scale on every device
            put = lambda s: par.batch((s.windows, s.positions, s.weights, s.symmetry), batch_size)  # noqa: E731
            scale = jax.device_put(np.float32(lr_scale), par.replicated)
        n_sym = max(len(self._symmetries), 1)
        sample = self.replay.sample(batch_size, symmetries=n_sym)
        batch = put(sample)
        ids, priorities, flags, sums = [], [], [], None
        for i in range(num_updates):
            self.state, metrics, prio = self._update(self.state, *batch[:3], scale, batch[3])
            ids.append(sample.ids)
            priorities.append(prio)
            flags.append(metrics.pop("train/nonfinite"))
            sums = metrics if sums is None else jax.tree_util.tree_map(jnp.add, sums, metrics)
            if i + 1 < num_updates:
                sample = self.replay.sample(batch_size, symmetries=n_sym)
                batch = put(sample)
        sums, priorities, flags, step = jax.device_get((sums, priorities, flags, self.state.step))
        if any(flags):  # the state kept the last finite one at each of them (moozi.update.update_step)
            start = int(step) - (num_updates - int(sum(flags)))  # the step counts applied updates only
            first = start + 1 + next(i for i, f in enumerate(flags) if f)
            raise NonFiniteError(f"non-finite loss or gradient at update {first:,} ({int(sum(flags))} of this "
                                 f"call's {num_updates} updates; those were skipped)", first)
        for batch_ids, prio in zip(ids, priorities):
            self.replay.update_priorities(batch_ids, prio)
        out = {k: float(v) / num_updates for k, v in sums.items() if k != "train/step"}
        lag = self.sampling_lag(np.concatenate(ids))
        if lag.size:
            out.update({"lag/sampled_mean": float(lag.mean()), "lag/sampled_p95": float(np.percentile(lag, 95)),
                        "lag/sampled_max": float(lag.max())})
        return out

    # ------------------------------------------------------------------ params out

    def acting_params(self):
        """The params acting and testing use (device arrays): the newest."""
        return self.state.params

    def histograms(self, bins: int = 30) -> dict[str, dict]:
        """Raw histograms (:mod:`moozi.observe.histograms`) of every parameter (``params/...``) and of Adam's
        running average of the gradients (``grad_mean/...``, the optimiser's first moment: what the updates
        follow, with no extra work in the update step)."""
        from moozi.observe.histograms import tree_histograms

        out = tree_histograms(jax.device_get(self.state.params), "params", bins)
        adam = [s for s in jax.tree_util.tree_leaves(self.state.opt_state,
                                                     is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))
                if isinstance(s, optax.ScaleByAdamState)]
        if adam:
            out.update(tree_histograms(jax.device_get(adam[0].mu), "grad_mean", bins))
        return out

    def publish(self) -> tuple[int, object]:
        """Make the current acting params the published ones: ``(new version, numpy params)``."""
        self._published = jax.device_get(self.acting_params())
        self.version += 1
        return self.version, self._published

    def params(self) -> tuple[int, object]:
        """``(version, numpy params)`` last published."""
        return self.version, self._published

    def target_params(self):
        """The target network's params as numpy (what reanalyze searches with)."""
        return jax.device_get(self.state.target_params)

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict:
        """Train state (params, target params, optimiser), version and published params (replay is its own part)."""
        out = {"train_state": self.state, "version": self.version, "published": self._published}
        if self.loop is not None:  # the device schedule's acting and ring
            out["loop"] = self.loop.state_dict()
        return out

    def template(self) -> dict:
        out = {"train_state": self.state, "version": None, "published": None}
        if self.loop is not None:
            out["loop"] = self.loop.template()
        return out

    def books_state_dict(self) -> dict:
        """Per-trajectory bookkeeping (versions played with, reanalyze stamps): saved with replay."""
        def pairs(book):
            keys = np.array(sorted(book), np.int64)
            return {"ids": keys, "values": np.array([book[int(k)] for k in keys], np.int64)}

        return {"versions": pairs(self._traj_version), "reanalyzed_at": pairs(self._reanalyzed_at),
                "searched": pairs(self._searched_version), "stamp": int(self._reanalyze_stamp)}

    def load_books_state_dict(self, state: dict) -> None:
        def book(d):
            return {int(k): int(v) for k, v in zip(np.asarray(d["ids"]).reshape(-1), np.asarray(d["values"]).reshape(-1))}

        self._traj_version = book(state["versions"])
        self._reanalyzed_at = book(state["reanalyzed_at"])
        self._searched_version = book(state["searched"]) if "searched" in state else {}
        self._reanalyze_stamp = int(state["stamp"])

    def load_state_dict(self, data: dict) -> None:
        """Restore :meth:`state_dict` output (restored against :meth:`template`)."""
        self.model.check_params(data["train_state"].params)
        self.state = data["train_state"] if self._parallel is None else self._parallel.state(data["train_state"])
        self.version = int(data["version"])
        self._published = jax.tree_util.tree_map(np.asarray, data["published"])
        self.model.check_params(self._published)
        if self.loop is not None:
            self.loop.load_state_dict(data["loop"])
