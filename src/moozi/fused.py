"""Acting, a device replay and learning fused into one compiled chunk (issue 89's device schedule).

For a JAX-native game the whole training loop can stay on the device: per epoch the actor's segment of ``T``
steps of ``B`` environments (:func:`~moozi.workers.device_actor.make_device_rollout`), stored into a
:class:`~moozi.replay.ring.Ring` and prioritised as the host buffer would (:func:`~moozi.replay.ring.ring_mature`),
then ``U`` updates, each on a batch drawn by priority (:func:`~moozi.replay.ring.ring_sample`), built by the same
target code as the host path's (:func:`~moozi.update.update_from_windows`) and re-prioritised with the update's
new priorities. ``E`` such epochs are one ``lax.scan``: one host call, the metrics returned stacked at the end.

Only what the host keeps books with leaves the device: each epoch's mean of every update metric, and the acted
steps' rewards and flags (episode returns and lengths, env steps). The chunk is the composition of the pieces,
nothing more (``tests/test_fused.py`` checks it equals the pieces called one by one).

XLA:CPU runs a training update inside a while loop 5-6x slower than alone (docs/results/gpu-prep): on a CPU
``unroll=True`` unrolls the chunk's loops (the benchmark's option), and :class:`DeviceLoop` runs the pieces one
compiled call each instead (fastest there, and quick to compile); on a GPU the loop is the point.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from moozi.config import ConfigError, ReplayConfig, TargetConfig
from moozi.replay.ring import (
    RING_FIELDS,
    Ring,
    ring_init,
    ring_mature,
    ring_ready,
    ring_sample,
    ring_sequences,
    ring_set_priorities,
    ring_store,
)

LEDGER_FIELDS = ("reward", "is_first", "is_last", "is_terminal")
"""The acted step fields a chunk returns (``[E, T, B]``) so the host can count episodes and their returns."""


def check_device_schedule(config, spec) -> None:
    """Refuse what the device schedule cannot run (a ConfigError naming the field and what to change)."""
    if not config.schedule.acts_in_learner:
        return
    why = []
    if spec.path != "device":
        why.append(f"{config.env.name} is stepped on the host; the device schedule acts in one compiled program "
                   "(JAX-native games: gymnax:, pgx:)")
    if config.distributed.backend != "local":
        why.append("distributed.backend = ray: the device schedule runs in one process (distributed.backend = local)")
    if config.reanalyze.fraction > 0:
        why.append("reanalyze.fraction > 0: the ring is not reanalyzed yet (reanalyze.fraction = 0)")
    if config.replay.sampling == "rank":
        why.append("replay.sampling = rank: the ring samples uniform or proportional")
    if config.learner.devices > 1:
        why.append("learner.devices > 1: one device (learner.devices = 1)")
    if config.acting.play_best:
        why.append("acting.play_best: the chunk acts with the newest params (play_best = false)")
    if why:
        raise ConfigError("schedule.kind = device cannot run this config: " + "; ".join(why) +
                          ". Use schedule.kind = sync, or change those settings")


def ring_rows(capacity: int, num_envs: int, steps: int, window: int) -> int:
    """Columns per environment for a replay of ``capacity`` steps: a multiple of the segment length ``steps``,
    at least two windows."""
    per_env = -(-capacity // num_envs)
    return max(-(-per_env // steps), -(-2 * window // steps)) * steps


def act_and_store(rollout: Callable, params, carry, ring: Ring, temperature, *, target_config: TargetConfig,
                  replay_config: ReplayConfig):
    """One segment acted with ``params`` at ``temperature``, stored and prioritised: ``(carry, ring, steps)``,
    ``steps`` the segment's :data:`LEDGER_FIELDS` (``[T, B]``)."""
    carry, samples = rollout(params, carry, temperature)
    segment = {k: getattr(samples, k) for k in RING_FIELDS}
    ring = ring_store(ring, segment)
    ring = ring_mature(ring, samples.is_first.shape[0], target_config, replay_config.epsilon,
                       replay_config.initial_priority)
    return carry, ring, {k: getattr(samples, k) for k in LEDGER_FIELDS}


def learn_from_ring(learn: Callable, state, ring: Ring, key, lr_scale, *, target_config: TargetConfig,
                    replay_config: ReplayConfig, batch_size: int, symmetries: int = 0):
    """One update on a batch drawn from the ring by priority; the batch's positions re-prioritised:
    ``(state, ring, metrics)``. ``learn``: ``(state, windows, positions, weights, lr_scale[, symmetry]) ->
    (state, metrics, priorities)`` (:func:`~moozi.update.update_from_windows` with its settings bound; with
    ``symmetries`` > 0 each window is seen through a uniformly drawn one of that many board symmetries, as the
    host buffer's samples are)."""
    history = target_config.history_length
    ahead = target_config.unroll_steps + target_config.td_steps
    alpha = 0.0 if replay_config.sampling == "uniform" else replay_config.alpha  # uniform: every weight 1
    key, sym_key = jax.random.split(key)
    env_index, column, weights = ring_sample(ring, key, batch_size, history, ahead, alpha, replay_config.beta,
                                             replay_config.weight_normalization)
    windows = ring_sequences(ring, env_index, column, history, ahead)
    extra = (jax.random.randint(sym_key, (batch_size,), 0, symmetries),) if symmetries else ()
    state, metrics, priorities = learn(state, windows, jnp.full((batch_size,), history, jnp.int32), weights,
                                       lr_scale, *extra)
    ring = ring_set_priorities(ring, env_index, column, priorities, replay_config.epsilon)
    return state, ring, metrics


def make_chunk(rollout: Callable, learn: Callable, *, target_config: TargetConfig, replay_config: ReplayConfig,
               batch_size: int, updates_per_epoch: int, epochs: int, unroll: bool = False, symmetries: int = 0):
    """Jitted ``(state, carry, ring, key, temperatures [E], lr_scale) -> (state, carry, ring, out)``: ``E =
    epochs`` epochs of one segment acted and ``updates_per_epoch`` updates; ``out["metrics"]``: each update
    metric's mean per epoch ``[E]``, ``out["steps"]``: the acted :data:`LEDGER_FIELDS` ``[E, T, B]``. The state,
    carry and ring are donated. The ring must already hold a sampleable position. ``symmetries``: as
    :func:`learn_from_ring`."""
    act = functools.partial(act_and_store, rollout, target_config=target_config, replay_config=replay_config)
    one = functools.partial(learn_from_ring, learn, target_config=target_config, replay_config=replay_config,
                            batch_size=batch_size, symmetries=symmetries)

    def epoch(lr_scale, c, xs):
        state, carry, ring = c
        key, temperature = xs
        carry, ring, steps = act(state.params, carry, ring, temperature)

        def update(c2, k):
            st, rg = c2
            st, rg, metrics = one(st, rg, k, lr_scale)
            return (st, rg), metrics

        (state, ring), metrics = jax.lax.scan(update, (state, ring), jax.random.split(key, updates_per_epoch),
                                              unroll=updates_per_epoch if unroll else 1)
        return (state, carry, ring), {"metrics": jax.tree.map(lambda m: jnp.mean(m, axis=0), metrics),
                                      "steps": steps}

    def chunk(state, carry, ring, key, temperatures, lr_scale):
        (state, carry, ring), out = jax.lax.scan(functools.partial(epoch, jnp.asarray(lr_scale, jnp.float32)),
                                                 (state, carry, ring),
                                                 (jax.random.split(key, epochs), jnp.asarray(temperatures,
                                                                                             jnp.float32)),
                                                 unroll=epochs if unroll else 1)
        return state, carry, ring, out

    return jax.jit(chunk, donate_argnums=(0, 1, 2))


class DeviceLoop:
    """The device schedule's acting and replay (``schedule.kind = device``), owned by the learner: the training
    actor's environments and search state, the :class:`~moozi.replay.ring.Ring` and the compiled chunk.

    Args:
      actor: the run's training :class:`~moozi.workers.device_actor.DeviceActor` (its rollout, environments and
        keys: the first segment is the one a sync run's actor plays).
      learn: ``(state, windows, positions, weights, lr_scale) -> (state, metrics, priorities)``.
      config: the run's config (``targets``, ``replay``, ``schedule``, ``acting``).
      key: the key the chunks' sampling keys come from.
      fuse: run a call as one compiled chunk (a GPU's way); else (a CPU's) as its pieces, one compiled call
        each, with the same keys and results (``tests/test_fused.py``): XLA:CPU runs an update inside a loop
        5-6x slower, an unrolled chunk compiles for minutes, and the pieces apart ran fastest there
        (docs/results/gpu-prep). Either way nothing but the books leaves the device.
      params: the network's parameters (their shapes size the ring).
      symmetries: the board symmetries each sampled window is seen through (0: no augmentation).

    ``updates_per_epoch`` is ``samples_per_env_step x B x T / batch_size`` rounded (at least 1): the replay ratio
    the run keeps is that over ``B x T``; ``schedule.epochs_per_call`` epochs are one chunk.
    """

    def __init__(self, actor, learn: Callable, config, key, fuse: bool, params, symmetries: int = 0):
        from moozi.workers.actor import schedule_temperature

        self._temperature = functools.partial(schedule_temperature, config.acting)
        self.actor, self.config = actor, config
        tc, s = config.targets, config.schedule
        self.steps, self.envs = actor.num_steps, actor.num_envs
        self.history, self.ahead = tc.history_length, tc.unroll_steps + tc.td_steps
        self.updates_per_epoch = max(1, round(s.samples_per_env_step * self.steps * self.envs / s.batch_size))
        self.epochs = s.epochs_per_call
        kw = dict(target_config=tc, replay_config=config.replay)
        shapes = jax.eval_shape(actor.rollout, params, actor.carry, jnp.float32(1.0))[1]
        rows = ring_rows(config.replay.capacity, self.envs, self.steps, self.history + self.ahead + 1)
        self.ring = ring_init({k: getattr(shapes, k) for k in RING_FIELDS}, rows)
        self._act = jax.jit(functools.partial(act_and_store, actor.rollout, **kw), donate_argnums=(1, 2))
        self.fuse = fuse
        if fuse:
            self._chunk = make_chunk(actor.rollout, learn, batch_size=s.batch_size,
                                     updates_per_epoch=self.updates_per_epoch, epochs=self.epochs,
                                     symmetries=symmetries, **kw)
        else:
            self._learn = jax.jit(functools.partial(learn_from_ring, learn, batch_size=s.batch_size,
                                                    symmetries=symmetries, **kw), donate_argnums=(0, 1))
        self.key = key
        actor.carry = jax.tree.map(jnp.copy, actor.carry)  # a buffer per leaf (equal constants may share one): donated
        self.open = np.zeros((2, self.envs), np.float64)  # per environment: the return so far, the moves so far

    def sampleable(self) -> int:
        """Positions the ring can be sampled at now (prioritised, their sequence whole)."""
        return int(jnp.sum(ring_ready(self.ring, self.history, self.ahead)))

    def act(self, params) -> dict:
        """One segment acted with ``params`` and stored, nothing learned (filling the ring): its books
        (:meth:`_books`)."""
        temperature = self._temperature(self.actor.env_steps)
        self.actor.carry, self.ring, steps = self._act(params, self.actor.carry, self.ring, jnp.float32(temperature))
        return self._books(jax.device_get(steps), 1, [temperature])

    def run(self, state, lr_scale: float):
        """One chunk (``epochs_per_call`` epochs of acting and ``updates_per_epoch`` updates): ``(state, books)``,
        the books with ``metrics`` (each update metric's mean over the chunk)."""
        per_epoch = self.steps * self.envs
        temps = [self._temperature(self.actor.env_steps + e * per_epoch) for e in range(self.epochs)]
        self.key, key = jax.random.split(self.key)
        if self.fuse:
            state, self.actor.carry, self.ring, out = self._chunk(state, self.actor.carry, self.ring, key,
                                                                  jnp.asarray(temps, jnp.float32),
                                                                  jnp.float32(lr_scale))
        else:
            state, out = self._pieces(state, key, temps, jnp.float32(lr_scale))
        out = jax.device_get(out)
        books = self._books(out["steps"], self.epochs, temps)
        books["metrics"] = {k: float(np.mean(v)) for k, v in out["metrics"].items() if k != "train/step"}
        books["nonfinite"] = int(np.count_nonzero(out["metrics"]["train/nonfinite"]))
        books["updates"] = self.epochs * self.updates_per_epoch
        return state, books

    def stats(self) -> dict[str, float]:
        """The ring's figures under the host buffer's names (``replay/*``): steps held, sampleable positions, fill,
        the sampleable positions' priorities and the largest priority set."""
        ok = np.asarray(ring_ready(self.ring, self.history, self.ahead))
        prio = np.asarray(self.ring.priority)[ok]
        rows = self.ring.priority.shape[1]
        has = prio.size > 0
        return {"replay/size_steps": float(int(self.ring.filled) * self.envs),
                "replay/num_positions": float(prio.size),
                "replay/fill_fraction": int(self.ring.filled) / rows,
                "replay/total_steps_added": float(self.actor.env_steps),
                "replay/priority_min": float(prio.min()) if has else 0.0,
                "replay/priority_mean": float(prio.mean()) if has else 0.0,
                "replay/priority_max": float(prio.max()) if has else 0.0,
                "replay/max_priority_seen": float(self.ring.max_priority)}

    def _pieces(self, state, key, temps, lr_scale):
        """:meth:`run`'s chunk as its pieces, one compiled call each (the keys split as :func:`make_chunk`'s)."""
        steps, metrics = [], []
        for k, temperature in zip(jax.random.split(key, self.epochs), temps):
            self.actor.carry, self.ring, acted = self._act(state.params, self.actor.carry, self.ring,
                                                           jnp.float32(temperature))
            steps.append(acted)
            per = []
            for ku in jax.random.split(k, self.updates_per_epoch):
                state, self.ring, m = self._learn(state, self.ring, ku, lr_scale)
                per.append(m)
            metrics.append(jax.tree.map(lambda *v: jnp.mean(jnp.stack(v)), *per))
        stack = lambda *v: jnp.stack(v)  # noqa: E731
        return state, {"metrics": jax.tree.map(stack, *metrics), "steps": jax.tree.map(stack, *steps)}

    def _books(self, steps: dict, epochs: int, temps) -> dict:
        """What the host counts of ``epochs`` acted segments (:data:`LEDGER_FIELDS`, ``[E, T, B]`` or ``[T, B]``):
        env steps, and the returns (rewards after each episode's first step, summed, as the sync schedule's
        ``train/episode_return``) and lengths (moves) of the episodes that ended, carried across calls."""
        reward = np.asarray(steps["reward"], np.float64).reshape(-1, self.envs)
        first = np.asarray(steps["is_first"]).reshape(-1, self.envs)
        last = np.asarray(steps["is_last"]).reshape(-1, self.envs)
        returns, lengths = [], []
        for t in range(reward.shape[0]):
            self.open[0] = np.where(first[t], 0.0, self.open[0] + reward[t])
            self.open[1] = np.where(first[t], 0.0, self.open[1] + 1)
            for b in np.flatnonzero(last[t]):
                returns.append(float(self.open[0, b]))
                lengths.append(int(self.open[1, b]))
        played = epochs * self.steps * self.envs
        self.actor.env_steps += played
        return {"env_steps": played, "epochs": epochs, "returns": returns, "lengths": lengths,
                "temperature": float(np.mean(temps))}

    def state_dict(self) -> dict:
        """The actor (its carry, env steps), the ring, the sampling key and the open episodes' books."""
        return {"actor": self.actor.state_dict(), "ring": self.ring, "key": self.key, "open": self.open.copy()}

    def template(self) -> dict:
        return {"actor": self.actor.template(), "ring": self.ring, "key": self.key, "open": None}

    def load_state_dict(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.actor.carry = jax.tree.map(jnp.copy, jax.device_put(self.actor.carry))
        self.ring = jax.device_put(state["ring"])
        self.key = state["key"]
        self.open = np.asarray(state["open"], np.float64).reshape(2, self.envs).copy()
