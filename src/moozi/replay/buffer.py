"""Replay buffer: stores whole episodes once, samples raw windows (numpy only).

A plain class that owns numpy state and its own random generator (no JAX, no
Ray import): the learner calls it in-process, and under Ray it lives inside
the learner's process, so batches and priorities never cross a process
boundary. Targets are *not* built here: :meth:`ReplayBuffer.sample` returns
the raw windows ``t - L .. t + K + N`` around each sampled position, and the
learner's jitted update builds the targets from them with
:func:`moozi.targets.make_targets` (so refreshed search statistics from
reanalyze flow straight into training).

Storage layout
--------------
A ring buffer over *steps* of ``capacity`` slots. Whole episodes (step 0 to
their last step ``T``) are written contiguously at the write head (wrapping
round) and evicted whole, oldest first. Every step ever added has a *position
id*: the running count of steps added before it. A position's slot is
``id % capacity``, and an id is still stored iff
``total_steps_added - size <= id < total_steps_added``. Ids are what
:meth:`sample` returns and what :meth:`update_priorities` /
:meth:`update_search_stats` take; an id whose step was evicted in between is
skipped rather than silently hitting the step that reused its slot.

Frames are stored in the dtype the game declares (``EnvSpec.observation_dtype``:
uint8 for binary planes and pixels, float32 otherwise); the buffer checks that
every added episode has it. Sampling strategies live in
:mod:`moozi.replay.samplers`.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

import numpy as np

from moozi.config import ReplayConfig, TargetConfig
from moozi.errors import ConfigError, ReplayError
from moozi.replay.samplers import make_sampler
from moozi.replay.validation import validate_trajectory
from moozi.types import ReplaySample, Trajectory
from moozi.validate import number_in, positive_int

__all__ = ["ReplayBuffer", "validate_trajectory"]

_SAMPLING = ("uniform", "proportional", "rank")


def _per_index(name: str, values, n: int, dtype) -> np.ndarray:
    """One finite value per id, flattened, or a clear :class:`ReplayError`."""
    arr = np.asarray(values, dtype=dtype).reshape(-1)
    if arr.shape != (n,):
        raise ReplayError(f"{name} has {arr.size} entries but ids has {n}: they must match")
    if not np.all(np.isfinite(arr)):
        raise ReplayError(f"{name} contain NaN or infinite values")
    return arr


class ReplayBuffer:
    """Bounded replay over whole episodes; uniform, proportional or rank-based sampling.

    Args:
      config: :class:`~moozi.config.ReplayConfig`.
      target_config: ``history_length`` L, ``unroll_steps`` K and ``td_steps`` N
        set the window ``t - L .. t + K + N`` that :meth:`sample` returns.
      frame_shape: ``(H, W, C)`` of one frame.
      num_actions: A, the augmented action-space size.
      frame_dtype: storage dtype of frames (``EnvSpec.observation_dtype``).
      seed: seeds the buffer's own generator (saved in :meth:`state_dict`).
    """

    def __init__(self, config: ReplayConfig, target_config: TargetConfig, frame_shape, num_actions: int,
                 frame_dtype="float32", seed: int = 0):
        if not isinstance(config, ReplayConfig):
            raise ConfigError(f"config must be a ReplayConfig, got {type(config).__name__}")
        if not isinstance(target_config, TargetConfig):
            raise ConfigError(f"target_config must be a TargetConfig, got {type(target_config).__name__}")
        positive_int("replay", "num_actions", num_actions)
        self.config = config
        self.target_config = target_config
        self.frame_shape = tuple(int(d) for d in frame_shape)
        self.num_actions = int(num_actions)
        self.frame_dtype = np.dtype(frame_dtype)
        self.rng = np.random.default_rng(seed)
        cap = config.capacity
        self._beta = float(config.beta)
        # Per-slot step data.
        self._frames = np.zeros((cap, *self.frame_shape), self.frame_dtype)
        self._root_policies = np.zeros((cap, self.num_actions), np.float32)
        self._actions = np.zeros(cap, np.int32)
        self._rewards = np.zeros(cap, np.float32)
        self._root_values = np.zeros(cap, np.float32)
        self._to_play = np.zeros(cap, np.int32)
        self._random_actions = np.zeros(cap, np.bool_)
        self._legal_actions = np.zeros((cap, self.num_actions - 1), np.bool_)  # over environment actions
        self._slot_traj = np.full(cap, -1, np.int64)
        self._priority = np.zeros(cap, np.float64)  # raw |v*-G| + eps; 0 if not sampleable
        self._sampleable = np.zeros(cap, np.bool_)
        # Per-trajectory ring, indexed by id % capacity (ids are consecutive, live ones never collide).
        self._traj_start = np.zeros(cap, np.int64)  # position id of step 0
        self._traj_len = np.zeros(cap, np.int64)  # T + 1
        self._traj_terminal = np.zeros(cap, np.bool_)
        self._size = 0
        self._num_sampleable = 0
        self._total_steps = 0
        self._oldest_id = 0
        self._next_id = 0
        self._max_priority = 1.0
        self._sampler = make_sampler(config, self._priority, self._sampleable)

    # ------------------------------------------------------------------ properties

    def __len__(self) -> int:
        return self._size

    @property
    def size(self) -> int:
        """Steps stored."""
        return self._size

    @property
    def num_trajectories(self) -> int:
        return self._next_id - self._oldest_id

    @property
    def num_positions(self) -> int:
        """Positions that can be sampled."""
        return self._num_sampleable

    @property
    def total_steps_added(self) -> int:
        return self._total_steps

    @property
    def beta(self) -> float:
        """Importance-sampling exponent used by :meth:`sample` (settable, for annealing)."""
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        number_in("replay", "beta", value, 0.0, float("inf"))
        self._beta = float(value)

    @property
    def window_length(self) -> int:
        """Steps gathered per sampled position: ``t - L .. t + K + N``."""
        c = self.target_config
        return c.history_length + c.unroll_steps + c.td_steps + 1

    @property
    def nbytes(self) -> int:
        """Bytes of the preallocated storage arrays."""
        return sum(getattr(self, n).nbytes for n in (
            "_frames", "_root_policies", "_actions", "_rewards", "_root_values", "_to_play", "_random_actions",
            "_legal_actions", "_slot_traj", "_priority", "_sampleable", "_traj_start", "_traj_len", "_traj_terminal"))

    def ready(self) -> bool:
        """Whether :meth:`sample` may be called (``min_size`` reached, something sampleable)."""
        return self._size >= max(self.config.min_size, 1) and self._num_sampleable > 0

    def trajectory_ids(self) -> np.ndarray:
        """Ids of stored trajectories, oldest first."""
        return np.arange(self._oldest_id, self._next_id, dtype=np.int64)

    # ------------------------------------------------------------------ insertion

    def _slots(self, ids: np.ndarray) -> np.ndarray:
        return ids % self.config.capacity

    def _evict_oldest(self) -> None:
        rec = self._oldest_id % self.config.capacity
        start, length = int(self._traj_start[rec]), int(self._traj_len[rec])
        slots = self._slots(np.arange(start, start + length, dtype=np.int64))
        self._num_sampleable -= int(self._sampleable[slots].sum())
        self._sampleable[slots] = False
        self._priority[slots] = 0.0
        self._slot_traj[slots] = -1
        self._sampler.changed(slots)
        self._size -= length
        self._oldest_id += 1

    def add(self, traj: Trajectory, priorities=None) -> int:
        """Store one whole episode; returns its trajectory id.

        Args:
          traj: ``first == 0``, ``last == S - 1``, frames in the buffer's dtype.
          priorities: ``[S]`` raw priorities ``|v* - G^N|`` (``epsilon`` is
            added here), e.g. from :func:`moozi.targets.priorities`; ``None``
            gives every position the largest priority seen so far.

        Evicts the oldest episodes (whole) until it fits.
        """
        a = validate_trajectory(traj, num_actions=self.num_actions, frame_shape=self.frame_shape,
                                frame_dtype=self.frame_dtype, capacity=self.config.capacity)
        size = a["frames"].shape[0]
        if priorities is None:
            prio = np.full(size, self._max_priority, np.float64)
        else:
            prio = np.abs(_per_index("priorities", priorities, size, np.float64)) + self.config.epsilon
        cap = self.config.capacity
        while cap - self._size < size:
            self._evict_oldest()
        tid = self._next_id
        start = self._total_steps
        slots = self._slots(np.arange(start, start + size, dtype=np.int64))
        self._frames[slots] = a["frames"]
        self._actions[slots] = a["actions"]
        self._rewards[slots] = a["rewards"]
        self._root_values[slots] = a["root_values"]
        self._root_policies[slots] = a["root_policies"]
        self._to_play[slots] = a["to_play"]
        self._random_actions[slots] = a["random_actions"]
        self._legal_actions[slots] = a["legal_actions"]
        self._slot_traj[slots] = tid
        ok = np.ones(size, np.bool_)
        if not self.config.sample_last_step:
            ok[-1] = False
        self._sampleable[slots] = ok
        self._priority[slots] = np.where(ok, prio, 0.0)
        if ok.any():
            self._max_priority = max(self._max_priority, float(prio[ok].max()))
        self._sampler.changed(slots)
        rec = tid % cap
        self._traj_start[rec] = start
        self._traj_len[rec] = size
        self._traj_terminal[rec] = bool(a["is_terminal"])
        self._next_id += 1
        self._total_steps += size
        self._size += size
        self._num_sampleable += int(ok.sum())
        return tid

    # ------------------------------------------------------------------ sampling

    def _ids(self, slots: np.ndarray) -> np.ndarray:
        rec = self._slot_traj[slots] % self.config.capacity
        start = self._traj_start[rec]
        return start + (slots - start) % self.config.capacity

    def sample_ids(self, batch_size: int, beta: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``batch_size`` positions: ``(ids [B] int64, weights [B] float32)``.

        Weights are importance weights at most 1 (see ``weight_normalization``;
        all 1 for uniform sampling). Advances the buffer's own generator.
        """
        positive_int("replay", "batch_size", batch_size)
        beta = self._beta if beta is None else beta
        number_in("replay", "beta", beta, 0.0, float("inf"))
        if self._size < self.config.min_size or self._num_sampleable == 0:
            raise ReplayError(f"cannot sample yet: {self._size} steps stored ({self._num_sampleable} sampleable "
                              f"positions), replay.min_size = {self.config.min_size}")
        u = self.rng.random(batch_size)
        if self.config.stratified:
            u = (np.arange(batch_size) + u) / batch_size
        u = np.minimum(u, np.nextafter(1.0, 0.0))
        slots, weights = self._sampler.draw(u, float(beta))
        if self.config.weight_normalization == "batch":
            weights = weights / weights.max()
        return self._ids(slots), weights.astype(np.float32)

    def sample(self, batch_size: int, beta: float | None = None, symmetries: int = 1) -> ReplaySample:
        """Draw ``batch_size`` positions and gather their raw windows (see :class:`~moozi.types.ReplaySample`);
        with ``symmetries`` > 1 also a uniformly random symmetry index per window (from this buffer's generator,
        so a resumed run draws the same)."""
        ids, weights = self.sample_ids(batch_size, beta)
        windows, positions = self.windows(ids)
        symmetry = self.rng.integers(symmetries, size=batch_size).astype(np.int32) if symmetries > 1 else None
        return ReplaySample(windows=windows, positions=positions, ids=ids, weights=weights, symmetry=symmetry)

    def windows(self, ids) -> tuple[Trajectory, np.ndarray]:
        """Windows ``t - L .. t + K + N`` (reads clipped to each episode) around stored position ids.

        Returns ``(windows, positions)``: a :class:`Trajectory` with a leading
        ``[B]`` axis (frames in storage dtype) and ``[B]`` int32 index of each
        position inside its window (always L).
        """
        live, slots = self._live(ids)
        if not live.all():
            raise ReplayError("windows() got ids of positions that are no longer stored")
        cap = self.config.capacity
        big_l = self.target_config.history_length
        rec = self._slot_traj[slots] % cap
        start = self._traj_start[rec]
        last = self._traj_len[rec] - 1
        t = (slots - start) % cap
        steps = np.clip(t[:, None] - big_l + np.arange(self.window_length)[None, :], 0, last[:, None])
        wslots = (start[:, None] + steps) % cap
        window = Trajectory(
            frames=self._frames[wslots],
            actions=self._actions[wslots],
            rewards=self._rewards[wslots],
            root_values=self._root_values[wslots],
            root_policies=self._root_policies[wslots],
            to_play=self._to_play[wslots],
            first=(big_l - t).astype(np.int32),
            last=(last - t + big_l).astype(np.int32),
            is_terminal=self._traj_terminal[rec].copy(),
            random_actions=self._random_actions[wslots],
        )
        return window, np.full(slots.shape, big_l, np.int32)

    # ------------------------------------------------------------------ updates

    def _live(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """``(mask, slots)``: which position ids are still stored, and their slots."""
        ids = np.asarray(ids)
        if not np.issubdtype(ids.dtype, np.integer):
            raise ReplayError(f"ids must be integer position ids, got dtype {ids.dtype}")
        ids = ids.astype(np.int64).reshape(-1)
        live = (ids >= self._total_steps - self._size) & (ids < self._total_steps)
        return live, self._slots(ids)

    def _set_priorities(self, slots: np.ndarray, prio: np.ndarray) -> None:
        self._priority[slots] = prio
        ok = self._sampleable[slots]
        if ok.any():
            self._max_priority = max(self._max_priority, float(prio[ok].max()))
        self._sampler.changed(slots)

    def update_priorities(self, ids, priorities) -> int:
        """Set priorities ``|priorities| + epsilon`` of sampled positions; returns how many applied.

        Ids evicted since sampling (or not sampleable, such as an episode's last
        step) are skipped. Duplicate ids: the last one wins.
        """
        live, slots = self._live(ids)
        prio = _per_index("priorities", priorities, live.size, np.float64)
        ok = live.copy()
        ok[live] = self._sampleable[slots[live]]
        if not ok.any():
            return 0
        self._set_priorities(slots[ok], np.abs(prio[ok]) + self.config.epsilon)
        return int(ok.sum())

    def set_trajectory_priorities(self, trajectory_id: int, priorities) -> None:
        """Set the priorities of every position of a stored trajectory (``[T + 1]`` raw values)."""
        slots = self._slots(self.trajectory_indices(trajectory_id))
        prio = np.abs(_per_index("priorities", priorities, slots.size, np.float64)) + self.config.epsilon
        self._set_priorities(slots, np.where(self._sampleable[slots], prio, 0.0))

    def locate(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """``(trajectory_ids, steps)`` of stored position ids (``-1, -1`` where evicted)."""
        live, slots = self._live(ids)
        tids = np.where(live, self._slot_traj[slots], -1)
        ids = np.asarray(ids, np.int64).reshape(-1)
        start = self._traj_start[tids % self.config.capacity]
        return tids, np.where(live, ids - start, -1)

    def trajectory_indices(self, trajectory_id: int) -> np.ndarray:
        """Position ids ``[T + 1]`` of a stored trajectory's steps 0..T."""
        rec = self._record(trajectory_id)
        start = int(self._traj_start[rec])
        return np.arange(start, start + int(self._traj_len[rec]), dtype=np.int64)

    def has_trajectory(self, trajectory_id: int) -> bool:
        """Whether the trajectory is still stored (not evicted)."""
        return self._oldest_id <= int(trajectory_id) < self._next_id

    def _record(self, trajectory_id: int) -> int:
        tid = int(trajectory_id)
        if not self._oldest_id <= tid < self._next_id:
            raise ReplayError(f"trajectory id {tid} is not stored (stored ids: [{self._oldest_id}, {self._next_id}))")
        return tid % self.config.capacity

    def get_trajectory(self, trajectory_id: int) -> Trajectory:
        """A stored episode as a numpy :class:`~moozi.types.Trajectory` (frames in storage dtype)."""
        rec = self._record(trajectory_id)
        slots = self._slots(self.trajectory_indices(trajectory_id))
        return Trajectory(
            frames=self._frames[slots].copy(),
            actions=self._actions[slots].copy(),
            rewards=self._rewards[slots].copy(),
            root_values=self._root_values[slots].copy(),
            root_policies=self._root_policies[slots].copy(),
            to_play=self._to_play[slots].copy(),
            first=np.int32(0),
            last=np.int32(slots.size - 1),
            is_terminal=np.bool_(self._traj_terminal[rec]),
            random_actions=self._random_actions[slots].copy(),
            legal_actions=self._legal_actions[slots].copy(),
        )

    def update_search_stats(self, ids, root_values, root_policies=None) -> np.ndarray:
        """Store refreshed search statistics (reanalyze) in place.

        Args:
          ids: ``[M]`` position ids; evicted ones are skipped.
          root_values: ``[M]`` new v*.
          root_policies: ``[M, A]`` new p* (``None`` keeps the stored ones).

        Returns:
          the ids of the trajectories touched: their priorities are stale
          (the learner recomputes them, :meth:`set_trajectory_priorities`).
        """
        live, slots = self._live(ids)
        values = _per_index("root_values", root_values, live.size, np.float32)
        if root_policies is not None:
            pol = np.asarray(root_policies, dtype=np.float32)
            if pol.shape != (live.size, self.num_actions):
                raise ReplayError(f"root_policies must have shape [M, A] = ({live.size}, {self.num_actions}), "
                                  f"got {pol.shape}")
            if not np.all(np.isfinite(pol)):
                raise ReplayError("root_policies contain NaN or infinite values")
            self._root_policies[slots[live]] = pol[live]
        self._root_values[slots[live]] = values[live]
        return np.unique(self._slot_traj[slots[live]])

    # ------------------------------------------------------------------ logging

    def stats(self) -> dict[str, float]:
        """Namespaced numbers for logging (priority statistics are O(capacity) numpy)."""
        prio = self._priority[self._sampleable]
        has = prio.size > 0
        return {
            "replay/size_steps": float(self._size),
            "replay/size_trajectories": float(self.num_trajectories),
            "replay/num_positions": float(self._num_sampleable),
            "replay/fill_fraction": self._size / self.config.capacity,
            "replay/total_steps_added": float(self._total_steps),
            "replay/total_trajectories_added": float(self._next_id),
            "replay/priority_min": float(prio.min()) if has else 0.0,
            "replay/priority_mean": float(prio.mean()) if has else 0.0,
            "replay/priority_max": float(prio.max()) if has else 0.0,
            "replay/max_priority_seen": float(self._max_priority),
            "replay/beta": float(self._beta),
        }

    # ------------------------------------------------------------------ checkpoints

    STATE_VERSION = 4  # 4: only the live steps, in chunks; 3: every slot (legal masks kept); 2: no legal masks
    _STEP_ARRAYS = ("frames", "root_policies", "actions", "rewards", "root_values", "to_play", "random_actions",
                    "legal_actions", "priority", "sampleable")  # per stored step, oldest first
    _ARRAYS = (*_STEP_ARRAYS, "slot_traj", "traj_start", "traj_len", "traj_terminal")  # a version 2-3 state
    _INTS = ("size", "num_sampleable", "total_steps", "oldest_id", "next_id")
    CHUNK_BYTES = 1 << 20  # a chunk's size; a checkpoint's write or read needs about 5x it beyond the buffer

    def _header(self) -> dict[str, Any]:
        import json

        live = np.arange(self._oldest_id, self._next_id, dtype=np.int64) % self.config.capacity
        state: dict[str, Any] = {
            "version": self.STATE_VERSION,
            "capacity": self.config.capacity,
            "sampling": self.config.sampling,
            "alpha": float(self.config.alpha),
            "sample_last_step": int(self.config.sample_last_step),
            "max_priority": float(self._max_priority),
            "beta": float(self._beta),
            "rng": json.dumps(self.rng.bit_generator.state),
            "sampler": self._sampler.state_dict(),
            "traj_len": self._traj_len[live],  # per stored episode, oldest first (their starts follow)
            "traj_terminal": self._traj_terminal[live],
        }
        for name in self._INTS:
            state[name] = int(getattr(self, "_" + name))
        return state

    def _steps(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Copies of the per-step arrays of position ids ``start .. stop - 1``."""
        slots = self._slots(np.arange(start, stop, dtype=np.int64))
        return {name: getattr(self, "_" + name)[slots] for name in self._STEP_ARRAYS}

    def _step_chunks(self, steps: int):
        """The live steps' arrays, oldest first, ``steps`` at a time (each chunk copied when reached)."""
        for start in range(self._total_steps - self._size, self._total_steps, steps):
            yield self._steps(start, min(start + steps, self._total_steps))

    def checkpoint_chunks(self, chunk_bytes: int | None = None):
        """``(header, chunks)``: the state to resume exactly, the stored steps as a lazy stream of chunks.

        The header holds the counters, the generator's state (JSON text), the
        sampler's state and each stored episode's length and terminal flag;
        each chunk holds the per-step arrays of up to ``chunk_bytes`` (default
        :attr:`CHUNK_BYTES`) worth of consecutive stored steps, oldest first.
        Only the live steps are written, so its size follows the content, not
        the capacity; a chunk is copied when the stream reaches it.
        """
        per_step = sum(getattr(self, "_" + n)[:1].nbytes for n in self._STEP_ARRAYS)
        steps = max(1, int(chunk_bytes or self.CHUNK_BYTES) // per_step)
        return self._header(), self._step_chunks(steps)

    def state_dict(self) -> dict[str, Any]:
        """:meth:`checkpoint_chunks` in one dict (the per-step arrays whole, oldest step first).
        Sum trees are rebuilt on load."""
        return {**self._header(), **self._steps(self._total_steps - self._size, self._total_steps)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output (or a version 2-3 state) into a buffer of the same config."""
        self.load_chunks(state, ())

    def load_chunks(self, header: Mapping[str, Any], chunks) -> None:
        """Restore :meth:`checkpoint_chunks` output, reading one chunk at a time, into a buffer built with the
        same config and shapes. A header that holds the per-step arrays itself (:meth:`state_dict`) needs no
        chunks; a version 2-3 header holds every slot."""
        import json

        version = int(header.get("version", -1))
        if version not in (2, 3, self.STATE_VERSION):
            raise ReplayError(f"replay state version {header.get('version')!r} is not supported "
                              f"(this moozi reads versions 2 to {self.STATE_VERSION})")
        if version == 2:  # saved before legal masks were kept: every move legal on stored non-last steps
            header = dict(header, legal_actions=self._legal_from_version_2(header))
        needed = self._ARRAYS if version < 4 else ("traj_len", "traj_terminal")
        missing = [k for k in (*needed, *self._INTS, "rng") if k not in header]
        if missing:
            raise ReplayError(f"replay state is missing keys: {', '.join(missing)}")
        self._check_saved_config(header)
        if version < 4:
            for name in self._ARRAYS:
                self._set_array(name, header[name], getattr(self, "_" + name))
        else:
            self._load_live(header, chunks)
        for name in self._INTS:
            setattr(self, "_" + name, int(header[name]))
        self._max_priority = float(header["max_priority"])
        self._beta = float(header["beta"])
        self.rng.bit_generator.state = json.loads(header["rng"])
        self._sampler.rebuild()
        self._sampler.load_state_dict(dict(header.get("sampler") or {}))

    def _check_saved_config(self, header: Mapping[str, Any]) -> None:
        checks = {
            "capacity": (int(header["capacity"]), self.config.capacity),
            "sampling": (str(header["sampling"]), self.config.sampling),
            "alpha": (float(header["alpha"]), float(self.config.alpha)),
            "sample_last_step": (bool(header["sample_last_step"]), self.config.sample_last_step),
        }
        for name, (saved, mine) in checks.items():
            if saved != mine:
                raise ReplayError(f"replay state was saved with replay.{name} = {saved!r} but this buffer "
                                  f"has replay.{name} = {mine!r}")

    @staticmethod
    def _set_array(name: str, value, current: np.ndarray, where=Ellipsis) -> None:
        value = np.asarray(value)
        want = current.shape if where is Ellipsis else (len(where), *current.shape[1:])
        if value.shape != want or value.dtype != current.dtype:
            raise ReplayError(f"replay state {name} is {value.shape} {value.dtype}, this buffer stores "
                              f"{want} {current.dtype}")
        current[where] = value  # in place: the sampler shares priority / sampleable

    def _load_live(self, header: Mapping[str, Any], chunks) -> None:
        """Version 4: empty every slot, then write the stored episodes' records and steps back in place."""
        cap = self.config.capacity
        size, total = int(header["size"]), int(header["total_steps"])
        oldest, nxt = int(header["oldest_id"]), int(header["next_id"])
        lengths = np.asarray(header["traj_len"], np.int64)
        if lengths.shape != (nxt - oldest,) or int(lengths.sum()) != size or not 0 <= size <= min(cap, total):
            raise ReplayError(f"replay state is inconsistent: {lengths.size} episode lengths summing to "
                              f"{int(lengths.sum())} for {nxt - oldest} episodes of {size} steps")
        self._slot_traj[:] = -1
        self._priority[:] = 0.0
        self._sampleable[:] = False
        first = total - size
        recs = np.arange(oldest, nxt, dtype=np.int64) % cap
        self._traj_len[recs] = lengths
        self._traj_start[recs] = first + np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self._set_array("traj_terminal", header["traj_terminal"], self._traj_terminal, recs)
        self._slot_traj[self._slots(np.arange(first, total, dtype=np.int64))] = np.repeat(
            np.arange(oldest, nxt, dtype=np.int64), lengths)
        done = 0
        inline = {n: header[n] for n in self._STEP_ARRAYS if n in header}
        for chunk in itertools.chain([inline] if inline else [], chunks):
            n = len(np.asarray(chunk["frames"]))
            if done + n > size:
                raise ReplayError(f"replay state holds more than its {size} steps")
            slots = self._slots(np.arange(first + done, first + done + n, dtype=np.int64))
            for name in self._STEP_ARRAYS:
                if name not in chunk:
                    raise ReplayError(f"a replay chunk lacks {name}")
                self._set_array(name, chunk[name], getattr(self, "_" + name), slots)
            done += n
        if done != size:
            raise ReplayError(f"replay state holds {done} of its {size} steps")

    def whole_slots_state(self) -> dict[str, Any]:
        """The state as moozi wrote it before version 4 (checkpoint format 2): every slot of every array, in
        one dict. Not written any more; kept so tests and benchmarks can make an old checkpoint's state."""
        import json

        state = {"version": 3, "capacity": self.config.capacity, "sampling": self.config.sampling,
                 "alpha": float(self.config.alpha), "sample_last_step": int(self.config.sample_last_step),
                 "max_priority": float(self._max_priority), "beta": float(self._beta),
                 "rng": json.dumps(self.rng.bit_generator.state), "sampler": self._sampler.state_dict()}
        for name in self._ARRAYS:
            state[name] = getattr(self, "_" + name).copy()
        for name in self._INTS:
            state[name] = int(getattr(self, "_" + name))
        return state

    def _legal_from_version_2(self, state: Mapping[str, Any]) -> np.ndarray:
        """The legal masks a version 2 state implies: all True on every stored step but episodes' last ones."""
        legal = np.zeros_like(self._legal_actions)
        cap = self.config.capacity
        starts, lengths = np.asarray(state["traj_start"]), np.asarray(state["traj_len"])
        for tid in range(int(state["oldest_id"]), int(state["next_id"])):
            start, length = int(starts[tid % cap]), int(lengths[tid % cap])
            slots = np.arange(start, start + length - 1, dtype=np.int64) % cap
            legal[slots] = True
        return legal
