"""Replay buffer: stores trajectories once, builds targets when sampling (DESIGN.md §1, §4).

A plain Python class that owns numpy state (no Ray import); the learner and
driver call it in-process and the Ray backend wraps it unchanged.

Storage layout
--------------
A ring buffer over *steps* of ``capacity`` slots. Whole episodes (step 0 to
their last step ``T``, ``T + 1`` steps) are written contiguously at the write
head (wrapping round the end of the arrays) and evicted whole, oldest first.
Every step ever added has a *position id* (``gid``): the running count of
steps added before it. Because the ring is filled in order, a step's slot is
``gid % capacity``, and a gid is still stored iff
``total_steps_added - size <= gid < total_steps_added``. Position ids are what
:meth:`ReplayBuffer.sample` returns and what :meth:`update_priorities` /
:meth:`update_search_stats` take; an id whose step was evicted in between is
ignored rather than silently hitting the step that reused its slot.

Per slot (``[capacity, ...]`` numpy arrays, preallocated at the first insert):
frames (``uint8`` / ``float16`` when every frame stored so far is exactly
representable, else ``float32``; see :attr:`ReplayConfig.frame_storage`),
actions, rewards, root values v*, root policies p*, to_play, the owning
trajectory id, the raw priority and whether the position may be sampled.
Per trajectory (a ring of ``capacity`` records indexed by
``trajectory_id % capacity``; ids are consecutive so live ids never collide):
the gid of its step 0, its length and its terminal flag.

Sampling
--------
* ``"uniform"``: a sum tree over 0/1 leaves (1 = sampleable), weights 1.
* ``"proportional"``: a sum tree over ``p_i ** alpha`` and a min tree over
  ``p_i``; stratified prefix-sum search (one draw per equal-mass segment, as in
  Schaul et al. 2016), ``O(B log n)``.
* ``"rank"``: ``P(i) ∝ rank(i) ** -alpha`` with rank 1 the highest priority.
  Ranks are drawn from the exact rank distribution by inverse-CDF search
  (stratified, ``O(B log n)``) and mapped to positions through an ``argsort``
  of the priorities that is *refreshed lazily*: only when the number of
  positions inserted, evicted or re-prioritised since the last refresh reaches
  ``rank_refresh_fraction`` of the sampleable positions, or when a draw lands
  on a position evicted since then. Amortised cost per sample is
  ``O(B log n / rank_refresh_fraction)``. Staleness: between refreshes the
  order reflects older priorities, positions inserted since are not sampled,
  and a slot reused by a newer trajectory keeps the old slot's rank.

Importance weights are ``w_i = (n P(i)) ** -beta / max_j (n P(j)) ** -beta``
with ``n`` the number of sampleable positions and the maximum taken over the
whole buffer (the least likely position), so weights are at most 1 and do not
depend on what else is in the batch. ``beta`` can be annealed by the driver
(:attr:`ReplayBuffer.beta` or the ``beta`` argument of :meth:`sample`).

Targets are built at sample time from a window ``t - L .. t + K + N`` of the
stored episode with a jitted, vmapped :func:`moozi.targets.make_targets`, so
refreshed search statistics (reanalyze) flow straight into training.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from moozi.config import (
    ConfigError,
    TargetConfig,
    _choice,
    _fail,
    _nonneg_int,
    _number_in,
    _positive_int,
)
from moozi.sumtree import MinTree, SumTree
from moozi.types import Batch, Targets, Trajectory

__all__ = ["ReplayConfig", "ReplayBuffer", "ReplayError"]

_SAMPLING = ("uniform", "proportional", "rank")
_INITIAL = ("computed", "max")
_FRAME_STORAGE = ("auto", "float32")


class ReplayError(ValueError):
    """Bad input to the replay buffer, or an operation it cannot do yet."""


@dataclass(frozen=True)
class ReplayConfig:
    """Replay buffer settings.

    capacity: storage size in steps (whole episodes are evicted oldest first;
      an episode longer than this cannot be stored).
    sampling: ``"uniform"``, ``"proportional"`` (p ** alpha) or ``"rank"``
      (rank(p) ** -alpha).
    alpha: prioritisation exponent (0 gives uniform probabilities).
    beta: importance-sampling exponent (0: no correction, 1: full); the driver
      may anneal it through ``ReplayBuffer.beta`` or ``sample(beta=...)``.
    epsilon: added to every priority ``|v* - G|`` so no position has zero mass.
    min_size: steps that must be stored before ``sample`` is allowed.
    initial_priority: ``"computed"`` (new positions get ``|v*_t - G^N_t| + epsilon``
      from :func:`moozi.targets.priorities`) or ``"max"`` (the largest
      priority seen so far, 1 at first, as in Schaul et al.).
    sample_last_step: also sample each episode's last step T (no action was
      taken there; its policy target is the dummy one-hot). MuZero samples
      ``0 .. T-1`` only, the default.
    stratified: draw one sample per equal-probability segment (lower variance)
      instead of i.i.d. draws.
    rank_refresh_fraction: rank sampling re-sorts priorities once this fraction
      of the sampleable positions has been inserted, evicted or re-prioritised.
    weight_normalization: ``"buffer"`` divides importance weights by the
      largest weight any stored position could get (standard PER as in
      Schaul et al. and OpenAI baselines: weights do not depend on the rest of
      the batch); ``"batch"`` by the largest weight in the batch (as in
      EfficientZero / muzero-general). With ``"buffer"`` one position of tiny
      priority (``~epsilon``) scales every weight down, which can silently stall
      learning, so the default is ``"batch"``.
    frame_storage: ``"auto"`` stores frames as ``uint8`` or ``float16`` while
      that is lossless (checked at every insert; storage is widened when a new
      episode needs it) and ``float32`` otherwise; ``"float32"`` always.
    """

    capacity: int = 100_000
    sampling: Literal["uniform", "proportional", "rank"] = "proportional"
    alpha: float = 1.0
    beta: float = 1.0
    epsilon: float = 1e-6
    min_size: int = 1
    initial_priority: Literal["computed", "max"] = "computed"
    sample_last_step: bool = False
    stratified: bool = True
    rank_refresh_fraction: float = 0.1
    weight_normalization: Literal["buffer", "batch"] = "batch"
    frame_storage: Literal["auto", "float32"] = "auto"

    def __post_init__(self):
        o = "replay"
        _positive_int(o, "capacity", self.capacity)
        _choice(o, "sampling", self.sampling, _SAMPLING)
        _number_in(o, "alpha", self.alpha, 0.0, float("inf"))
        _number_in(o, "beta", self.beta, 0.0, float("inf"))
        _number_in(o, "epsilon", self.epsilon, 0.0, float("inf"))
        _nonneg_int(o, "min_size", self.min_size)
        _choice(o, "initial_priority", self.initial_priority, _INITIAL)
        for name in ("sample_last_step", "stratified"):
            if not isinstance(getattr(self, name), bool):
                _fail(o, name, getattr(self, name), "true or false")
        _number_in(o, "rank_refresh_fraction", self.rank_refresh_fraction, 0.0, 1.0, lo_open=True)
        _choice(o, "weight_normalization", self.weight_normalization, ("buffer", "batch"))
        _choice(o, "frame_storage", self.frame_storage, _FRAME_STORAGE)
        if self.min_size > self.capacity:
            _fail(o, "min_size", self.min_size, f"at most capacity = {self.capacity}")
        if self.sampling == "proportional" and self.epsilon == 0.0 and self.alpha > 0.0:
            # Zero-priority positions would never be sampled and make weights infinite.
            _fail(o, "epsilon", self.epsilon, "a number > 0 for proportional sampling")


# --------------------------------------------------------------------------- jitted math


@functools.lru_cache(maxsize=None)
def _targets_fn(config: TargetConfig, num_actions: int):
    """Jitted ``vmap`` of ``make_targets``; frames may arrive as uint8/float16."""
    from moozi.targets import make_targets

    def one(traj: Trajectory, t):
        traj = traj.replace(frames=traj.frames.astype(jnp.float32))
        return make_targets(traj, t, config, num_actions)

    return jax.jit(jax.vmap(one))


@functools.lru_cache(maxsize=None)
def _priorities_fn(config: TargetConfig):
    from moozi.targets import priorities

    return jax.jit(lambda traj: priorities(traj, config))


def _bucket(n: int) -> int:
    """Padded length for per-episode jitted calls: a power of two (few compiles)."""
    return max(8, 1 << (n - 1).bit_length())


def _to_rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    if isinstance(rng, jax.Array):
        data = rng
        if jnp.issubdtype(rng.dtype, jax.dtypes.prng_key):
            data = jax.random.key_data(rng)
        return np.random.default_rng(np.asarray(data, dtype=np.uint32).reshape(-1))
    raise ReplayError(
        f"rng = {rng!r} is invalid: allowed a numpy Generator, an int seed or a JAX PRNG key"
    )


def _lossless(frames: np.ndarray, dtype) -> bool:
    if dtype == np.float32:
        return True
    if dtype == np.uint8:
        if frames.size and (frames.min() < 0 or frames.max() > 255):
            return False
        with np.errstate(invalid="ignore"):
            return bool(np.array_equal(frames.astype(np.uint8).astype(np.float32), frames))
    with np.errstate(over="ignore"):
        return bool(np.array_equal(frames.astype(dtype).astype(np.float32), frames))


_DTYPE_LADDER = (np.uint8, np.float16, np.float32)


# --------------------------------------------------------------------------- buffer



def _per_index(name: str, values, live: np.ndarray, dtype) -> np.ndarray:
    """One finite value per index id, flattened, or a clear :class:`ReplayError`."""
    arr = np.asarray(values, dtype=dtype).reshape(-1)
    if arr.shape != live.shape:
        raise ReplayError(f"{name} has {arr.size} entries but indices has {live.size}: they must match")
    if not np.all(np.isfinite(arr)):
        raise ReplayError(f"{name} contain NaN or infinite values")
    return arr

class ReplayBuffer:
    """Bounded replay over whole episodes with uniform / proportional / rank sampling.

    Args:
      config: :class:`ReplayConfig`.
      target_config: :class:`~moozi.config.TargetConfig` used to build targets
        and initial priorities (L, K, N, gamma).
      num_actions: A, the augmented action-space size; inferred from the first
        trajectory's ``root_policies`` when ``None``.
      frame_shape: ``(H, W, C)``; inferred from the first trajectory when ``None``.
    """

    def __init__(
        self,
        config: ReplayConfig,
        target_config: TargetConfig,
        num_actions: int | None = None,
        frame_shape: tuple[int, ...] | None = None,
    ):
        if not isinstance(config, ReplayConfig):
            raise ConfigError(f"config must be a ReplayConfig, got {type(config).__name__}")
        if not isinstance(target_config, TargetConfig):
            raise ConfigError(
                f"target_config must be a TargetConfig, got {type(target_config).__name__}"
            )
        if num_actions is not None:
            _positive_int("replay", "num_actions", num_actions)
        self.config = config
        self.target_config = target_config
        self._num_actions = num_actions
        self._frame_shape = tuple(int(d) for d in frame_shape) if frame_shape is not None else None
        cap = config.capacity
        self._beta = float(config.beta)

        # Per-slot step data (frames / policies allocated at the first insert).
        self._frames: np.ndarray | None = None
        self._root_policies: np.ndarray | None = None
        self._actions = np.zeros(cap, np.int32)
        self._rewards = np.zeros(cap, np.float32)
        self._root_values = np.zeros(cap, np.float32)
        self._to_play = np.zeros(cap, np.int32)
        self._random_actions = np.zeros(cap, np.bool_)
        self._slot_traj = np.full(cap, -1, np.int64)
        self._priority = np.zeros(cap, np.float64)  # raw |v*-G| + eps; 0 if not sampleable
        self._sampleable = np.zeros(cap, np.bool_)
        # Per-trajectory ring, indexed by id % capacity.
        self._traj_start = np.zeros(cap, np.int64)  # gid of step 0
        self._traj_len = np.zeros(cap, np.int64)  # T + 1
        self._traj_terminal = np.zeros(cap, np.bool_)
        # Counters.
        self._size = 0  # steps stored
        self._num_sampleable = 0
        self._total_steps = 0  # steps ever added == gid of the next step
        self._oldest_id = 0
        self._next_id = 0
        self._max_priority = 1.0
        # Sampling structures.
        self._sum = SumTree(cap) if config.sampling in ("uniform", "proportional") else None
        self._min = MinTree(cap) if config.sampling == "proportional" else None
        self._rank_order = np.zeros(0, np.int64)  # slots, highest priority first
        self._rank_changes = 0
        self._rank_valid = False
        self._rank_cdf_cache: tuple[int, np.ndarray] | None = None

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
    def num_actions(self) -> int | None:
        return self._num_actions

    @property
    def frame_shape(self) -> tuple[int, ...] | None:
        return self._frame_shape

    @property
    def frame_dtype(self):
        """Storage dtype of frames (``None`` before the first insert)."""
        return None if self._frames is None else self._frames.dtype

    @property
    def beta(self) -> float:
        """Importance-sampling exponent used by :meth:`sample` (settable, for annealing)."""
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        _number_in("replay", "beta", value, 0.0, float("inf"))
        self._beta = float(value)

    @property
    def window_length(self) -> int:
        """Steps gathered per sampled position: ``t - L .. t + K + N``."""
        c = self.target_config
        return c.history_length + c.unroll_steps + c.td_steps + 1

    def ready(self) -> bool:
        """Whether :meth:`sample` may be called (``min_size`` reached, something sampleable)."""
        return self._size >= max(self.config.min_size, 1) and self._num_sampleable > 0

    def trajectory_ids(self) -> np.ndarray:
        """Ids of stored trajectories, oldest first."""
        return np.arange(self._oldest_id, self._next_id, dtype=np.int64)

    # ------------------------------------------------------------------ insertion

    def _validate(self, traj: Trajectory) -> dict[str, np.ndarray]:
        def arr(name):
            try:
                return np.asarray(getattr(traj, name))
            except AttributeError:
                raise ReplayError(f"trajectory.{name} is missing") from None

        a = {name: arr(name) for name in (
            "frames", "actions", "rewards", "root_values", "root_policies", "to_play",
            "first", "last", "is_terminal")}
        frames = a["frames"]
        if frames.ndim < 2:
            raise ReplayError(
                f"trajectory.frames must be [S, H, W, C] (S = T + 1 steps), got shape {frames.shape}"
            )
        size = frames.shape[0]
        if size < 1:
            raise ReplayError("trajectory.frames has 0 steps: a trajectory holds at least step 0")
        if self._frame_shape is not None and frames.shape[1:] != self._frame_shape:
            raise ReplayError(
                f"trajectory.frames has frame shape {frames.shape[1:]} but this buffer stores "
                f"frames of shape {self._frame_shape}"
            )
        if not np.issubdtype(frames.dtype, np.number) and frames.dtype != np.bool_:
            raise ReplayError(f"trajectory.frames must be numeric, got dtype {frames.dtype}")
        for name in ("actions", "rewards", "root_values", "to_play"):
            if a[name].shape != (size,):
                raise ReplayError(
                    f"trajectory.{name} must have shape [S] = ({size},) like frames, "
                    f"got {a[name].shape}"
                )
        pol = a["root_policies"]
        if pol.ndim != 2 or pol.shape[0] != size:
            raise ReplayError(
                f"trajectory.root_policies must have shape [S, A] with S = {size}, got {pol.shape}"
            )
        if self._num_actions is not None and pol.shape[1] != self._num_actions:
            raise ReplayError(
                f"trajectory.root_policies has {pol.shape[1]} actions (augmented) but this "
                f"buffer stores num_actions = {self._num_actions}"
            )
        num_actions = pol.shape[1] if self._num_actions is None else self._num_actions
        if num_actions < 2:
            raise ReplayError(
                f"trajectory.root_policies has {num_actions} actions: the augmented action "
                "space holds the dummy action and at least one environment action"
            )
        for name in ("first", "last", "is_terminal"):
            if a[name].shape != ():
                raise ReplayError(f"trajectory.{name} must be a scalar, got shape {a[name].shape}")
        if int(a["first"]) != 0:
            raise ReplayError(
                f"trajectory.first = {int(a['first'])}: the buffer stores whole episodes from "
                "their step 0 (first == 0), not windows"
            )
        if int(a["last"]) != size - 1:
            raise ReplayError(
                f"trajectory.last = {int(a['last'])} but the trajectory has {size} steps: "
                f"last must be S - 1 = {size - 1}"
            )
        if not np.issubdtype(a["actions"].dtype, np.integer):
            raise ReplayError(f"trajectory.actions must be integers, got dtype {a['actions'].dtype}")
        if a["actions"].min() < 0 or a["actions"].max() >= num_actions:
            raise ReplayError(
                f"trajectory.actions must be augmented indices in [0, {num_actions}), got range "
                f"[{a['actions'].min()}, {a['actions'].max()}]"
            )
        if size > self.config.capacity:
            raise ReplayError(
                f"trajectory has {size} steps but replay.capacity = {self.config.capacity} steps: "
                "a trajectory longer than the buffer cannot be stored; raise replay.capacity"
            )
        for name in ("frames", "rewards", "root_values", "root_policies"):
            if not np.all(np.isfinite(a[name])):
                raise ReplayError(f"trajectory.{name} contains NaN or infinite values")
        if traj.random_actions is None:
            a["random_actions"] = np.zeros(size, np.bool_)
        else:
            a["random_actions"] = np.asarray(traj.random_actions)
            if a["random_actions"].shape != (size,):
                raise ReplayError(
                    f"trajectory.random_actions must have shape [S] = ({size},) like frames, "
                    f"got {a['random_actions'].shape}"
                )
            a["random_actions"] = a["random_actions"].astype(np.bool_)
        return a

    def _allocate(self, frame_shape, num_actions: int, frames: np.ndarray) -> None:
        cap = self.config.capacity
        self._frame_shape = tuple(int(d) for d in frame_shape)
        self._num_actions = int(num_actions)
        dtype = np.float32
        if self.config.frame_storage == "auto":
            dtype = next(d for d in _DTYPE_LADDER if _lossless(frames, d))
        self._frames = np.zeros((cap, *self._frame_shape), dtype)
        self._root_policies = np.zeros((cap, self._num_actions), np.float32)

    def _widen_frames(self, frames: np.ndarray) -> None:
        current = self._frames.dtype
        if _lossless(frames, current):
            return
        start = [np.dtype(d) for d in _DTYPE_LADDER].index(current) + 1
        # The new dtype must hold both the old frames (true for any wider rung) and the new ones.
        dtype = next(d for d in _DTYPE_LADDER[start:] if _lossless(frames, d))
        self._frames = self._frames.astype(dtype)

    def _slots(self, gids: np.ndarray) -> np.ndarray:
        return gids % self.config.capacity

    def _evict_oldest(self) -> None:
        tid = self._oldest_id
        rec = tid % self.config.capacity
        start, length = int(self._traj_start[rec]), int(self._traj_len[rec])
        slots = self._slots(np.arange(start, start + length, dtype=np.int64))
        n_removed = int(self._sampleable[slots].sum())
        self._sampleable[slots] = False
        self._priority[slots] = 0.0
        self._slot_traj[slots] = -1
        self._set_tree_leaves(slots)
        self._num_sampleable -= n_removed
        self._rank_changes += n_removed
        self._size -= length
        self._oldest_id += 1

    def _set_tree_leaves(self, slots: np.ndarray) -> None:
        """Push ``_priority`` / ``_sampleable`` of ``slots`` into the sampling trees."""
        s = self.config.sampling
        ok = self._sampleable[slots]
        if s == "uniform":
            self._sum.update(slots, ok.astype(np.float64))
        elif s == "proportional":
            p = self._priority[slots]
            self._sum.update(slots, np.where(ok, p**self.config.alpha, 0.0))
            self._min.update(slots, np.where(ok, p, np.inf))

    def _initial_priorities(self, a: dict[str, np.ndarray]) -> np.ndarray:
        if self.config.initial_priority == "max":
            return np.full(a["rewards"].shape[0], self._max_priority, np.float64)
        return self._computed_priorities(a)

    def add(self, traj: Trajectory) -> int:
        """Store one whole episode (``first == 0``, ``last == S - 1``); returns its trajectory id.

        Evicts the oldest episodes (whole) until it fits. Arrays may be numpy or JAX.
        """
        a = self._validate(traj)
        frames = a["frames"]
        size = frames.shape[0]
        if self._frames is None:
            self._allocate(frames.shape[1:], a["root_policies"].shape[1], frames)
        else:
            self._widen_frames(frames)
        prio = self._initial_priorities(a)

        cap = self.config.capacity
        while cap - self._size < size:
            self._evict_oldest()

        tid = self._next_id
        start = self._total_steps
        slots = self._slots(np.arange(start, start + size, dtype=np.int64))
        self._frames[slots] = frames.astype(self._frames.dtype)
        self._actions[slots] = a["actions"]
        self._rewards[slots] = a["rewards"]
        self._root_values[slots] = a["root_values"]
        self._root_policies[slots] = a["root_policies"]
        self._to_play[slots] = a["to_play"]
        self._random_actions[slots] = a["random_actions"]
        self._slot_traj[slots] = tid
        ok = np.ones(size, np.bool_)
        if not self.config.sample_last_step:
            ok[-1] = False
        self._sampleable[slots] = ok
        self._priority[slots] = np.where(ok, prio, 0.0)
        if ok.any():
            self._max_priority = max(self._max_priority, float(prio[ok].max()))
        self._set_tree_leaves(slots)

        rec = tid % cap
        self._traj_start[rec] = start
        self._traj_len[rec] = size
        self._traj_terminal[rec] = bool(a["is_terminal"])
        self._next_id += 1
        self._total_steps += size
        self._size += size
        self._num_sampleable += int(ok.sum())
        self._rank_changes += int(ok.sum())
        return tid

    # ------------------------------------------------------------------ sampling

    def _uniforms(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """``[B]`` numbers in ``[0, 1)``: stratified (one per segment) or i.i.d."""
        u = rng.random(batch_size)
        if self.config.stratified:
            u = (np.arange(batch_size) + u) / batch_size
        return np.minimum(u, np.nextafter(1.0, 0.0))

    def _refresh_rank(self) -> None:
        slots = np.flatnonzero(self._sampleable)
        order = np.argsort(-self._priority[slots], kind="stable")
        self._rank_order = slots[order].astype(np.int64)
        self._rank_changes = 0
        self._rank_valid = True

    def _rank_cdf(self, n: int) -> np.ndarray:
        if self._rank_cdf_cache is None or self._rank_cdf_cache[0] != n:
            mass = np.arange(1, n + 1, dtype=np.float64) ** -self.config.alpha
            self._rank_cdf_cache = (n, np.cumsum(mass))
        return self._rank_cdf_cache[1]

    def _sample_rank(self, u: np.ndarray, beta: float):
        stale = (not self._rank_valid) or (
            self._rank_changes
            >= self.config.rank_refresh_fraction * max(self._num_sampleable, 1)
        )
        for attempt in range(2):
            if stale:
                self._refresh_rank()
            n = self._rank_order.size
            cdf = self._rank_cdf(n)
            ranks = np.searchsorted(cdf, u * cdf[-1], side="right")
            ranks = np.minimum(ranks, n - 1)
            slots = self._rank_order[ranks]
            if self._sampleable[slots].all():
                break
            stale = True  # a draw hit a position evicted since the last sort
        # P(i) = r^-alpha / Z; the least likely position has rank n.
        alpha = self.config.alpha
        weights = (n / (ranks + 1.0)) ** (-alpha * beta)
        return slots, weights

    def _gids(self, slots: np.ndarray) -> np.ndarray:
        cap = self.config.capacity
        rec = self._slot_traj[slots] % cap
        start = self._traj_start[rec]
        return start + (slots - start) % cap

    def sample(self, batch_size: int, rng, beta: float | None = None) -> tuple[Batch, np.ndarray]:
        """Sample ``batch_size`` positions and build their targets.

        Args:
          batch_size: B.
          rng: a ``numpy.random.Generator`` (advanced in place), an int seed or a
            JAX PRNG key.
          beta: importance exponent for this call (default :attr:`beta`).

        Returns:
          ``(batch, indices)``: ``batch.targets`` has a leading ``[B]`` axis,
          ``batch.weights`` ``[B]`` float32 importance weights (at most 1, see
          ``weight_normalization``; all 1 for uniform sampling); ``indices`` ``[B]`` int64
          position ids for :meth:`update_priorities` / :meth:`update_search_stats`.

        Raises:
          ReplayError: fewer than ``min_size`` steps stored, or nothing sampleable.
        """
        slots, weights = self._draw(batch_size, rng, beta)
        targets = self._build_targets(slots)
        batch = Batch(targets=targets, weights=jnp.asarray(weights, jnp.float32))
        return batch, self._gids(slots)

    def sample_indices(self, batch_size: int, rng, beta: float | None = None):
        """Like :meth:`sample` without building targets.

        Returns:
          ``(indices [B] int64, weights [B] float32)``.
        """
        slots, weights = self._draw(batch_size, rng, beta)
        return self._gids(slots), weights.astype(np.float32)

    def _draw(self, batch_size: int, rng, beta: float | None):
        _positive_int("replay", "batch_size", batch_size)
        if beta is None:
            beta = self._beta
        else:
            _number_in("replay", "beta", beta, 0.0, float("inf"))
        if self._size < self.config.min_size or self._num_sampleable == 0:
            raise ReplayError(
                f"cannot sample yet: {self._size} steps stored ({self._num_sampleable} sampleable "
                f"positions), replay.min_size = {self.config.min_size}"
            )
        return self._sample_slots(batch_size, _to_rng(rng), float(beta))

    def _sample_slots(self, batch_size: int, gen: np.random.Generator, beta: float):
        slots, weights = self._sample_slots_buffer_norm(batch_size, gen, beta)
        if self.config.weight_normalization == "batch":
            weights = weights / weights.max()
        return slots, weights

    def _sample_slots_buffer_norm(self, batch_size: int, gen: np.random.Generator, beta: float):
        u = self._uniforms(batch_size, gen)
        s = self.config.sampling
        if s == "rank":
            return self._sample_rank(u, beta)
        total = self._sum.total()
        slots = self._sum.find(u * total)
        if s == "uniform":
            return slots, np.ones(batch_size, np.float64)
        prob = self._sum.get(slots) / total
        p_min = self._min.min() ** self.config.alpha / total
        weights = (prob / p_min) ** (-beta)
        return slots, weights

    def _windows(self, slots: np.ndarray) -> tuple[Trajectory, np.ndarray]:
        """Gather ``t - L .. t + K + N`` windows (clipped to each episode) for ``slots``."""
        cap = self.config.capacity
        big_l = self.target_config.history_length
        rec = self._slot_traj[slots] % cap
        start = self._traj_start[rec]
        last = self._traj_len[rec] - 1
        t = (slots - start) % cap  # step index within the episode
        steps = t[:, None] - big_l + np.arange(self.window_length)[None, :]
        steps = np.clip(steps, 0, last[:, None])
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

    def _build_targets(self, slots: np.ndarray) -> Targets:
        window, ts = self._windows(slots)
        return _targets_fn(self.target_config, self._num_actions)(window, ts)

    # ------------------------------------------------------------------ updates

    def _live(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """``(mask, slots)``: which position ids are still stored, and their slots."""
        gids = np.asarray(indices)
        if not np.issubdtype(gids.dtype, np.integer):
            raise ReplayError(f"indices must be integer position ids, got dtype {gids.dtype}")
        gids = gids.astype(np.int64).reshape(-1)
        live = (gids >= self._total_steps - self._size) & (gids < self._total_steps)
        return live, self._slots(gids)

    def update_priorities(self, indices, priorities) -> int:
        """Set priorities ``|priorities| + epsilon`` of sampled positions.

        Ids whose step was evicted since sampling (or that are not sampleable,
        such as an episode's last step) are skipped. Duplicate ids: last wins.

        Returns:
          the number of ids applied.
        """
        live, slots = self._live(indices)
        prio = _per_index("priorities", priorities, live, np.float64)
        ok = live.copy()
        ok[live] = self._sampleable[slots[live]]
        slots, prio = slots[ok], np.abs(prio[ok]) + self.config.epsilon
        if slots.size == 0:
            return 0
        self._priority[slots] = prio
        self._max_priority = max(self._max_priority, float(prio.max()))
        if self.config.sampling != "uniform":  # uniform leaves only change on insert/evict
            self._set_tree_leaves(slots)
        self._rank_changes += int(slots.size)
        return int(slots.size)

    def locate(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """``(trajectory_ids, steps)`` of stored position ids (``-1, -1`` where evicted)."""
        live, slots = self._live(indices)
        tids = np.where(live, self._slot_traj[slots], -1)
        gids = np.asarray(indices, np.int64).reshape(-1)
        start = self._traj_start[tids % self.config.capacity]
        steps = np.where(live, gids - start, -1)
        return tids, steps

    def trajectory_indices(self, trajectory_id: int) -> np.ndarray:
        """Position ids ``[T + 1]`` of a stored trajectory's steps 0..T."""
        rec = self._record(trajectory_id)
        start = int(self._traj_start[rec])
        return np.arange(start, start + int(self._traj_len[rec]), dtype=np.int64)

    def _record(self, trajectory_id: int) -> int:
        tid = int(trajectory_id)
        if not self._oldest_id <= tid < self._next_id:
            raise ReplayError(
                f"trajectory id {tid} is not stored (stored ids: "
                f"[{self._oldest_id}, {self._next_id}))"
            )
        return tid % self.config.capacity

    def get_trajectory(self, trajectory_id: int) -> Trajectory:
        """A stored episode as a numpy :class:`~moozi.types.Trajectory` (frames float32)."""
        rec = self._record(trajectory_id)
        slots = self._slots(self.trajectory_indices(trajectory_id))
        return Trajectory(
            frames=self._frames[slots].astype(np.float32),
            actions=self._actions[slots].copy(),
            rewards=self._rewards[slots].copy(),
            root_values=self._root_values[slots].copy(),
            root_policies=self._root_policies[slots].copy(),
            to_play=self._to_play[slots].copy(),
            first=np.int32(0),
            last=np.int32(slots.size - 1),
            is_terminal=np.bool_(self._traj_terminal[rec]),
            random_actions=self._random_actions[slots].copy(),
        )

    def update_search_stats(
        self, indices, root_values, root_policies=None, refresh_priorities: bool = True
    ) -> int:
        """Store refreshed search statistics (reanalyze) in place.

        Args:
          indices: ``[M]`` position ids (from :meth:`sample` or
            :meth:`trajectory_indices`); evicted ones are skipped.
          root_values: ``[M]`` new v*.
          root_policies: ``[M, A]`` new p* (``None`` keeps the stored ones).
          refresh_priorities: recompute ``|v* - G^N| + epsilon`` for every
            sampleable position of each touched trajectory (targets are always
            rebuilt at sample time, so they need nothing).

        Returns:
          the number of ids applied.
        """
        live, slots = self._live(indices)
        values = _per_index("root_values", root_values, live, np.float32)
        if root_policies is not None:
            pol = np.asarray(root_policies, dtype=np.float32)
            if pol.shape != (live.size, self._num_actions):
                raise ReplayError(
                    f"root_policies must have shape [M, A] = ({live.size}, {self._num_actions}), "
                    f"got {pol.shape}"
                )
            if not np.all(np.isfinite(pol)):
                raise ReplayError("root_policies contain NaN or infinite values")
        slots = slots[live]
        self._root_values[slots] = values[live]
        if root_policies is not None:
            self._root_policies[slots] = pol[live]
        if refresh_priorities and slots.size:
            for tid in np.unique(self._slot_traj[slots]):
                self._recompute_priorities(int(tid))
        return int(slots.size)

    def _recompute_priorities(self, trajectory_id: int) -> None:
        """Reset a stored trajectory's priorities to ``|v* - G^N| + epsilon``."""
        slots = self._slots(self.trajectory_indices(trajectory_id))
        rec = self._record(trajectory_id)
        a = {
            "rewards": self._rewards[slots],
            "root_values": self._root_values[slots],
            "to_play": self._to_play[slots],
            "random_actions": self._random_actions[slots],
            "is_terminal": self._traj_terminal[rec],
        }
        prio = self._computed_priorities(a)
        ok = self._sampleable[slots]
        self._priority[slots] = np.where(ok, prio, 0.0)
        if ok.any():
            self._max_priority = max(self._max_priority, float(prio[ok].max()))
        self._set_tree_leaves(slots)
        self._rank_changes += int(ok.sum())

    def _computed_priorities(self, a: Mapping[str, Any]) -> np.ndarray:
        """``|v*_i - G^N_i| + epsilon`` for one whole episode (padded to a bucket length).

        :func:`moozi.targets.priorities` reads rewards, values, to_play and
        random_actions only,
        so frames and policies are passed as 1-element placeholders.
        """
        size = np.asarray(a["rewards"]).shape[0]
        pad = _bucket(size) - size

        def padded(x, dtype):
            return np.pad(np.asarray(x, dtype), (0, pad))

        bucket = size + pad
        traj = Trajectory(
            frames=np.zeros((bucket, 1, 1, 1), np.float32),
            actions=np.zeros(bucket, np.int32),
            rewards=padded(a["rewards"], np.float32),
            root_values=padded(a["root_values"], np.float32),
            root_policies=np.zeros((bucket, 1), np.float32),
            to_play=padded(a["to_play"], np.int32),
            first=np.int32(0),
            last=np.int32(size - 1),
            is_terminal=np.bool_(a["is_terminal"]),
            random_actions=padded(a["random_actions"], np.bool_),
        )
        prio = np.asarray(_priorities_fn(self.target_config)(traj), np.float64)[:size]
        return prio + self.config.epsilon

    # ------------------------------------------------------------------ logging

    def stats(self) -> dict[str, float]:
        """Namespaced numbers for logging (priority statistics are O(capacity) numpy)."""
        ok = self._sampleable
        prio = self._priority[ok]
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

    _STATE_VERSION = 1
    _ARRAYS = (
        "actions", "rewards", "root_values", "to_play", "slot_traj", "priority",
        "sampleable", "traj_start", "traj_len", "traj_terminal", "rank_order", "random_actions",
    )
    # Keys a checkpoint written before they existed may lack, with their fill value.
    _OPTIONAL = {"random_actions": False}
    _INTS = (
        "size", "num_sampleable", "total_steps", "oldest_id", "next_id", "rank_changes",
    )

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly, as numpy arrays, ints and floats (copies).

        Sampling trees are derived data and rebuilt by :meth:`load_state_dict`
        (bit-identical: every tree node is recomputed from its children).
        """
        state: dict[str, Any] = {
            "version": self._STATE_VERSION,
            "capacity": self.config.capacity,
            "sampling": _SAMPLING.index(self.config.sampling),
            "alpha": float(self.config.alpha),
            "sample_last_step": int(self.config.sample_last_step),
            "num_actions": -1 if self._num_actions is None else int(self._num_actions),
            "frame_shape": np.asarray(self._frame_shape or (), np.int64),
            "frames": (np.zeros(0, np.float32) if self._frames is None else self._frames.copy()),
            "root_policies": (
                np.zeros(0, np.float32) if self._root_policies is None
                else self._root_policies.copy()
            ),
            "max_priority": float(self._max_priority),
            "beta": float(self._beta),
            "rank_valid": int(self._rank_valid),
        }
        for name in self._ARRAYS:
            state[name] = getattr(self, "_" + name).copy()
        for name in self._INTS:
            state[name] = int(getattr(self, "_" + name))
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict` (into a buffer built with the same config)."""
        missing = [k for k in ("version", "capacity", *self._ARRAYS, *self._INTS)
                   if k not in state and k not in self._OPTIONAL]
        if missing:
            raise ReplayError(f"replay state is missing keys: {', '.join(missing)}")
        if int(state["version"]) != self._STATE_VERSION:
            raise ReplayError(
                f"replay state version {int(state['version'])} is not supported "
                f"(expected {self._STATE_VERSION})"
            )
        checks = {
            "capacity": (int(state["capacity"]), self.config.capacity),
            "sampling": (_SAMPLING[int(state["sampling"])], self.config.sampling),
            "alpha": (float(state["alpha"]), float(self.config.alpha)),
            "sample_last_step": (bool(state["sample_last_step"]), self.config.sample_last_step),
        }
        for name, (saved, mine) in checks.items():
            if saved != mine:
                raise ReplayError(
                    f"replay state was saved with replay.{name} = {saved!r} but this buffer "
                    f"has replay.{name} = {mine!r}"
                )
        cap = self.config.capacity
        num_actions = int(state["num_actions"])
        frame_shape = tuple(int(d) for d in np.asarray(state["frame_shape"]).reshape(-1))
        if num_actions >= 0:
            if self._num_actions is not None and self._num_actions != num_actions:
                raise ReplayError(
                    f"replay state has num_actions = {num_actions} but this buffer has "
                    f"num_actions = {self._num_actions}"
                )
            frames = np.array(state["frames"])
            policies = np.array(state["root_policies"], np.float32)
            if frames.size == 0 and policies.size == 0:
                # Saved before its first trajectory: shapes known, storage not allocated yet.
                self._num_actions, self._frame_shape = num_actions, frame_shape
                frames = policies = None
            elif frames.shape != (cap, *frame_shape) or policies.shape != (cap, num_actions):
                raise ReplayError(
                    f"replay state frames {frames.shape} / root_policies {policies.shape} do not "
                    f"match capacity {cap}, frame shape {frame_shape}, num_actions {num_actions}"
                )
            self._num_actions, self._frame_shape = num_actions, frame_shape
            self._frames, self._root_policies = frames, policies
        else:
            self._frames = self._root_policies = None
        for name in self._ARRAYS:
            current = getattr(self, "_" + name)
            if name not in state:  # an older checkpoint: the documented fill value
                setattr(self, "_" + name, np.full_like(current, self._OPTIONAL[name]))
                continue
            value = np.array(state[name], dtype=current.dtype)
            if name != "rank_order" and value.shape != current.shape:
                raise ReplayError(
                    f"replay state {name} has shape {value.shape}, expected {current.shape}"
                )
            setattr(self, "_" + name, value)
        for name in self._INTS:
            setattr(self, "_" + name, int(state[name]))
        self._max_priority = float(state["max_priority"])
        self._beta = float(state["beta"])
        self._rank_valid = bool(int(state["rank_valid"]))
        self._rank_cdf_cache = None
        ok = self._sampleable
        if self.config.sampling == "uniform":
            self._sum.set_all(ok.astype(np.float64))
        elif self.config.sampling == "proportional":
            self._sum.set_all(np.where(ok, self._priority**self.config.alpha, 0.0))
            self._min.set_all(np.where(ok, self._priority, np.inf))
