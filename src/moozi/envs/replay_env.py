"""A mock environment that replays stored trajectories (for reanalyze and tests).

:class:`ReplayEnvPool` has the batched interface of
:class:`~moozi.envs.pool.HostPool` (``spec``, ``num_envs``, ``reset()``,
``step(actions)``, ``episode_step``, ``close()``), but instead of playing a
game each of its ``B`` slots replays one stored :class:`~moozi.types.Trajectory`
step by step. A reanalyze worker (or a test) can therefore drive stored games
through exactly the code that acts in live ones.

Queue and slots:

* ``add(trajectories)`` appends trajectories to a FIFO queue (``pending`` of
  them wait there); it can be called at any time to refill it.
* Each slot plays one trajectory from its step 0 (index ``first``) to its last
  step (index ``last``). The step after the last one, the slot takes the next
  trajectory from the queue, whose step 0 is a first step: the auto-reset of
  the step contract (docs/architecture.md §3).
* When the queue is empty the slot is *idle* (``active`` False): it yields an
  absorbing last step with a zero observation, reward 0, ``is_first`` False,
  ``is_last`` and ``is_terminal`` True, an all-False legal mask and
  ``to_play`` 0; ``slot_trajectory_id``, ``slot_step`` and ``stored_action``
  are -1 there. An idle slot takes the next trajectory added to the queue at
  the next ``step`` (that step is a first step, as after any last step).
* ``exhausted``: the queue is empty and every slot is idle.

What a replayed step holds (stored index ``i`` of a trajectory ``tr``):

* ``observation = tr.frames[i]`` (float32; stored uint8 frames are decoded with the spec's scale), ``reward = tr.rewards[i]`` (0 on
  the first step whatever is stored there), ``is_first = i == tr.first``,
  ``is_last = i == tr.last``, ``is_terminal = is_last and tr.is_terminal``,
  ``to_play = tr.to_play[i]``.
* ``legal_actions``: the trajectory's own ``legal_actions`` (recorded by
  actors and kept by the replay buffer), or the ``legal_actions=`` given to
  :meth:`ReplayEnvPool.add` (``[S, num_actions]`` bool per trajectory), which
  wins; with neither, all True on every non-last step. The last-step row is
  ignored (a last step has no legal action: all False).

Actions given to :meth:`ReplayEnvPool.step` are ignored (only their shape is
checked): the stored game goes on whatever is played. ``stored_action [B]``
is the environment action the trajectory took at the current step
(``to_env_action(tr.actions[i])``; -1 on last steps and idle slots), which is
what a reanalyze worker passes. ``slot_trajectory_id [B]`` says which
trajectory each slot is replaying (the id given to ``add``, by default a
running count from 0) and ``slot_step [B]`` at which stored index ``i``.

Every trajectory must hold its whole episode (``0 <= first <= last < S``), so
a window cut out of the middle of an episode cannot be replayed; ``add``
checks this and the shapes against ``spec`` and raises ``ValueError``.
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from moozi.envs.contract import EnvSpec, IllegalActionError, TimeStep, decode_frames
from moozi.types import DUMMY_ACTION, Trajectory, to_env_action


@dataclass(frozen=True)
class _Stored:
    """One trajectory as numpy arrays, checked against the spec."""

    id: int
    frames: np.ndarray  # [S, H, W, C] float32
    actions: np.ndarray  # [S] int32 augmented
    rewards: np.ndarray  # [S] float32
    to_play: np.ndarray  # [S] int32
    legal: np.ndarray | None  # [S, A_env] bool
    first: int
    last: int
    is_terminal: bool


def _unbatch(trajectories) -> list[Trajectory]:
    """A Trajectory (unbatched or with a leading batch axis) or an iterable of them -> a list."""
    if isinstance(trajectories, Trajectory):
        frames = np.asarray(trajectories.frames)
        first = np.asarray(trajectories.first)
        if first.ndim == 0:
            return [trajectories]
        n = first.shape[0]
        if frames.shape[:1] != (n,):
            raise ValueError(f"a batched Trajectory has first of shape {first.shape} but frames of shape {frames.shape}")
        def row(value, k):
            return None if value is None else np.asarray(value)[k]

        return [Trajectory(**{f.name: row(getattr(trajectories, f.name), k)
                              for f in dataclasses.fields(trajectories)}) for k in range(n)]
    out = []
    for tr in trajectories:
        if not isinstance(tr, Trajectory):
            raise TypeError(f"expected moozi.types.Trajectory objects, got {type(tr).__name__}")
        out.extend(_unbatch(tr))
    return out


class ReplayEnvPool:
    """``num_envs`` slots replaying queued trajectories behind the ``HostPool`` interface.

    Args:
      spec: the environment the trajectories were played in (observation
        shape, number of actions, players); its ``path`` is set to ``"host"``.
      num_envs: B, the number of slots.
      trajectories: optional trajectories to queue at once (see :meth:`add`).
    """

    def __init__(self, spec: EnvSpec, num_envs: int, trajectories: Iterable[Trajectory] | Trajectory = ()):
        if not isinstance(spec, EnvSpec):
            raise TypeError(f"spec must be an EnvSpec, got {type(spec).__name__}")
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs = {num_envs!r} is invalid: allowed an integer >= 1")
        self.spec = dataclasses.replace(spec, path="host") if spec.path != "host" else spec
        self.num_envs = num_envs
        self._queue: collections.deque[_Stored] = collections.deque()
        self._next_id = 0
        self._slots: list[_Stored | None] = [None] * num_envs  # None: idle
        self._index = np.full((num_envs,), -1, np.int64)  # stored index i of each slot's current step
        self._closed = False
        if not isinstance(trajectories, Trajectory):
            trajectories = list(trajectories)
        if isinstance(trajectories, Trajectory) or trajectories:
            self.add(trajectories)

    # ------------------------------------------------------------------ queue

    def add(self, trajectories, legal_actions=None, ids: Sequence[int] | None = None) -> list[int]:
        """Queue trajectories for replay (FIFO); returns their ids.

        Args:
          trajectories: a :class:`~moozi.types.Trajectory` (unbatched, or with a
            leading batch axis on every field) or an iterable of them; numpy or
            JAX arrays.
          legal_actions: optional legal masks, one ``[S, num_actions]`` bool
            array per trajectory (a sequence, or one ``[N, S, num_actions]``
            array); default: each trajectory's own ``legal_actions``, or all
            legal on non-last steps where it has none.
          ids: optional ids reported in ``slot_trajectory_id`` (non-negative
            ints, e.g. replay-buffer indices); default: a running count from 0.
        """
        self._check_open()
        trs = _unbatch(trajectories)
        if legal_actions is not None and len(legal_actions) != len(trs):
            raise ValueError(f"legal_actions holds {len(legal_actions)} masks for {len(trs)} trajectories")
        if ids is not None:
            ids = [int(i) for i in ids]
            if len(ids) != len(trs) or any(i < 0 for i in ids):
                raise ValueError(f"ids must be {len(trs)} non-negative integers, got {ids!r}")
        stored = []
        for k, tr in enumerate(trs):
            tid = ids[k] if ids is not None else self._next_id + k
            legal = tr.legal_actions if legal_actions is None else legal_actions[k]
            stored.append(self._check(tr, legal, tid))
        self._queue.extend(stored)  # only once all are checked: a bad one queues nothing
        if ids is None:
            self._next_id += len(trs)
        return [s.id for s in stored]

    def _check(self, tr: Trajectory, legal, tid: int) -> _Stored:
        spec, where = self.spec, f"{self.spec.name}: trajectory {tid}"
        frames = np.asarray(tr.frames)
        if frames.dtype != np.float32:  # stored frames (e.g. uint8) -> observations
            frames = np.asarray(decode_frames(spec, frames), np.float32)
        s = frames.shape[0] if frames.ndim else 0
        if frames.shape[1:] != spec.observation_shape:
            raise ValueError(f"{where}: frames have shape {frames.shape}; expected [S, *{spec.observation_shape}]")
        fields = {}
        for name, dtype in (("actions", np.int32), ("rewards", np.float32), ("to_play", np.int32)):
            x = np.asarray(getattr(tr, name))
            if x.shape != (s,):
                raise ValueError(f"{where}: {name} has shape {x.shape}; expected ({s},)")
            fields[name] = x.astype(dtype)
        first, last = int(np.asarray(tr.first)), int(np.asarray(tr.last))
        if not 0 <= first <= last < s:
            raise ValueError(
                f"{where}: first = {first}, last = {last} with S = {s} stored steps: only a whole episode "
                f"(0 <= first <= last < S) can be replayed"
            )
        live = slice(first, last)  # steps with a real action
        acts = fields["actions"][live]
        if np.any((acts < 1) | (acts > spec.num_actions)):
            raise ValueError(
                f"{where}: augmented actions {acts.tolist()} at steps {first}..{last - 1} must lie in 1..{spec.num_actions}"
            )
        tp = fields["to_play"][first : last + 1]
        if np.any((tp < 0) | (tp >= spec.num_players)):
            raise ValueError(f"{where}: to_play {tp.tolist()} must lie in 0..{spec.num_players - 1}")
        if legal is not None:
            legal = np.asarray(legal, bool)
            if legal.shape != (s, spec.num_actions):
                raise ValueError(f"{where}: legal_actions has shape {legal.shape}; expected ({s}, {spec.num_actions})")
            if not legal[live].any(axis=-1).all():
                raise ValueError(f"{where}: legal_actions is empty on a step that is not the last")
            stored = to_env_action(acts)
            if not legal[live][np.arange(last - first), stored].all():
                raise ValueError(f"{where}: a stored action is not legal under legal_actions")
        return _Stored(tid, frames, fields["actions"], fields["rewards"], fields["to_play"], legal, first, last,
                       bool(np.asarray(tr.is_terminal)))

    @property
    def pending(self) -> int:
        """Trajectories waiting in the queue (not yet taken by a slot)."""
        return len(self._queue)

    @property
    def active(self) -> np.ndarray:
        """``[B]`` bool: the slot is replaying a trajectory (its last step included); False when idle."""
        return np.array([s is not None for s in self._slots], bool)

    @property
    def exhausted(self) -> bool:
        """The queue is empty and every slot is idle: nothing more will be replayed until ``add``."""
        return not self._queue and not self.active.any()

    @property
    def slot_trajectory_id(self) -> np.ndarray:
        """``[B]`` int64 id of the trajectory each slot is replaying (-1 when idle)."""
        return np.array([-1 if s is None else s.id for s in self._slots], np.int64)

    @property
    def slot_step(self) -> np.ndarray:
        """``[B]`` int32 stored index ``i`` (into the trajectory's arrays) of each slot's current step (-1 when idle)."""
        return self._index.astype(np.int32)

    @property
    def episode_step(self) -> np.ndarray:
        """``[B]`` int32 actions taken so far in each slot's current episode (``i - first``; 0 when idle)."""
        return np.array([0 if s is None else self._index[b] - s.first for b, s in enumerate(self._slots)], np.int32)

    @property
    def stored_action(self) -> np.ndarray:
        """``[B]`` int32 environment action the trajectory took at the current step
        (``to_env_action(actions[i])``); -1 on last steps and idle slots."""
        out = np.full((self.num_envs,), to_env_action(DUMMY_ACTION), np.int32)
        for b, s in enumerate(self._slots):
            if s is not None and self._index[b] < s.last:
                out[b] = to_env_action(s.actions[self._index[b]])
        return out

    # ------------------------------------------------------------------ stepping

    def _take(self, b: int) -> None:
        """Slot ``b`` starts the next queued trajectory, or goes idle."""
        s = self._queue.popleft() if self._queue else None
        self._slots[b] = s
        self._index[b] = -1 if s is None else s.first

    def _timestep(self) -> TimeStep:
        spec, bsz = self.spec, self.num_envs
        obs = np.zeros((bsz, *spec.observation_shape), np.float32)
        reward = np.zeros((bsz,), np.float32)
        is_first = np.zeros((bsz,), bool)
        is_last = np.ones((bsz,), bool)
        is_terminal = np.ones((bsz,), bool)
        legal = np.zeros((bsz, spec.num_actions), bool)
        to_play = np.zeros((bsz,), np.int32)
        for b, s in enumerate(self._slots):
            if s is None:
                continue
            i = int(self._index[b])
            obs[b] = s.frames[i]
            is_first[b] = i == s.first
            reward[b] = 0.0 if is_first[b] else s.rewards[i]
            is_last[b] = i == s.last
            is_terminal[b] = is_last[b] and s.is_terminal
            if not is_last[b]:
                legal[b] = True if s.legal is None else s.legal[i]
            to_play[b] = s.to_play[i]
        return TimeStep(observation=obs, reward=reward, is_first=is_first, is_last=is_last,
                        is_terminal=is_terminal, legal_actions=legal, to_play=to_play)

    def reset(self, seed: int | None = None) -> TimeStep:
        """``[B]`` first steps: a slot in the middle of a trajectory starts it again from its
        first step; a slot on the last step of its trajectory, or idle, takes the next queued
        one (or stays idle). ``seed`` is accepted for the pool interface and ignored (a replay
        is deterministic)."""
        self._check_open()
        for b, s in enumerate(self._slots):
            if s is None or self._index[b] == s.last:
                self._take(b)
            else:
                self._index[b] = s.first
        return self._timestep()

    def step(self, actions=None) -> TimeStep:
        """Advance every slot one stored step; ``actions [B]`` are ignored (their shape is
        checked when given). After a last step (or when idle) a slot takes the next queued
        trajectory."""
        self._check_open()
        if actions is not None:
            actions = np.asarray(actions)
            if actions.shape != (self.num_envs,):
                raise IllegalActionError(
                    f"{self.spec.name}: actions has shape {actions.shape}; expected ({self.num_envs},)"
                )
        for b, s in enumerate(self._slots):
            if s is None or self._index[b] == s.last:
                self._take(b)
            else:
                self._index[b] += 1
        return self._timestep()

    def close(self) -> None:
        """Drop the queue and the slots' trajectories; the pool cannot be used afterwards."""
        self._queue.clear()
        self._slots = [None] * self.num_envs
        self._index[:] = -1
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self.spec.name}: this ReplayEnvPool is closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
