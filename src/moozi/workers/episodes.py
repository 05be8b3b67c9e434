"""Finished episodes: what leaves an actor (numpy), and the assembler that cuts them.

An actor plays ``B`` environments in lock-step and emits ``[T, B]`` segments of
:class:`~moozi.workers.policy.StepSample`; :class:`EpisodeAssembler` (host side,
numpy) keeps the steps of each environment's unfinished episode and emits
whole :class:`Episode` objects once their last step arrives, each tagged with
the parameter version its first step was played with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moozi.types import Trajectory

_FIELDS = ("frame", "action", "reward", "is_first", "is_last", "is_terminal", "to_play", "root_value",
           "root_policy", "random_action", "agent_seat", "legal")


@dataclass(frozen=True)
class Episode:
    """One finished episode as numpy.

    trajectory: the whole episode (``first == 0``), frames in the game's storage dtype.
    version: parameter version its first step was played with.
    env_index: which of the actor's environments played it.
    agent_seat: test games: the agent's seat (0 moved first); 0 otherwise.
    source_id: forced mode: the id of the stored trajectory that was replayed; -1 otherwise.
    """

    trajectory: Trajectory
    version: int
    env_index: int
    agent_seat: int = 0
    source_id: int = -1

    @property
    def length(self) -> int:
        """Moves played (the last step's index T)."""
        return int(self.trajectory.last)


def seats(traj: Trajectory) -> np.ndarray:
    """``[T]`` int64: the seat (order of play) of the player to move at each step, 0 for whoever moved first.

    The one definition of "who moves" in a two-player episode: a game's player ids need not follow the order
    of play (pgx draws which id moves first), so a seat is read against the first step's ``to_play``.
    """
    to_play = np.asarray(traj.to_play)
    return (to_play != to_play[0]).astype(np.int64)


def agent_player(traj: Trajectory, agent_seat: int) -> int:
    """The game's player id of the agent that sat in ``agent_seat`` (0: it moved first)."""
    first = int(np.asarray(traj.to_play)[0])
    return first if agent_seat == 0 else 1 - first


def agent_return(traj: Trajectory, agent_seat: int, two_player: bool) -> float:
    """The episode's return from the agent's point of view.

    The reward ``r_{i+1}`` belongs to the player who moved at step ``i``
    (``to_play[i]``); the agent is the first mover if ``agent_seat == 0``.
    """
    rewards = np.asarray(traj.rewards, np.float64)
    if not two_player:
        return float(rewards[1:].sum())
    moved = seats(traj)[:-1] == agent_seat
    return float(np.where(moved, rewards[1:], -rewards[1:]).sum())


class EpisodeAssembler:
    """Cuts ``[T, B]`` step segments into whole episodes (numpy).

    Steps of an episode that spans several segments are kept until its last
    step arrives. ``active [T, B]`` (optional) drops steps of idle
    environments (a replay pool with nothing queued).
    """

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        self._pending: list[list[dict]] = [[] for _ in range(num_envs)]
        self._version = np.zeros(num_envs, np.int64)
        self._source = np.full(num_envs, -1, np.int64)

    def add(self, samples, version: int, active=None, source_ids=None) -> list[Episode]:
        """Add a ``[T, B]`` segment (numpy fields); return the episodes it completed, in order of completion."""
        s = {f: np.asarray(getattr(samples, f)) for f in _FIELDS}
        steps = s["is_last"].shape[0]
        done: list[tuple[int, int, Episode]] = []
        for b in range(self.num_envs):
            keep = np.ones(steps, bool) if active is None else np.asarray(active)[:, b]
            start = 0
            cuts = [i for i in np.flatnonzero(s["is_last"][:, b] & keep)] + [steps - 1]
            for i, end in enumerate(cuts):
                rows = np.arange(start, end + 1)
                rows = rows[keep[rows]]
                if rows.size:
                    if s["is_first"][rows[0], b] and not self._pending[b]:
                        self._version[b] = version
                        if source_ids is not None:
                            self._source[b] = int(np.asarray(source_ids)[rows[0], b])
                    self._pending[b].append({f: v[rows, b] for f, v in s.items()})
                if i < len(cuts) - 1:
                    done.append((int(end), b, self._finish(b)))
                start = end + 1
        done.sort(key=lambda x: (x[0], x[1]))
        return [ep for _, _, ep in done]

    def _finish(self, b: int) -> Episode:
        pieces = self._pending[b]
        self._pending[b] = []
        cat = {f: np.concatenate([p[f] for p in pieces]) for f in _FIELDS}
        if not cat["is_first"][0]:
            raise RuntimeError("an episode did not start with a first step; the segments were not contiguous")
        length = cat["action"].shape[0]
        traj = Trajectory(
            frames=cat["frame"],
            actions=cat["action"].astype(np.int32),
            rewards=cat["reward"].astype(np.float32),
            root_values=cat["root_value"].astype(np.float32),
            root_policies=cat["root_policy"].astype(np.float32),
            to_play=cat["to_play"].astype(np.int32),
            first=np.int32(0),
            last=np.int32(length - 1),
            is_terminal=np.bool_(cat["is_terminal"][-1]),
            random_actions=cat["random_action"].astype(np.bool_),
            legal_actions=cat["legal"].astype(np.bool_),
        )
        return Episode(traj, int(self._version[b]), b, int(cat["agent_seat"][0]), int(self._source[b]))

    def pending_steps(self) -> int:
        """Steps held for episodes not finished yet."""
        return sum(p["action"].shape[0] for pend in self._pending for p in pend)

    def clear(self) -> None:
        """Drop every unfinished episode (its environments restart)."""
        self._pending = [[] for _ in range(self.num_envs)]

    def state_dict(self) -> dict:
        """Per environment, the steps of its unfinished episode as plain arrays (for checkpoints)."""
        out = {"version": self._version.copy(), "source": self._source.copy()}
        for b, pend in enumerate(self._pending):
            out[str(b)] = {f: np.concatenate([p[f] for p in pend]) for f in _FIELDS} if pend else {}
        return out

    def load_state_dict(self, state: dict) -> None:
        missing = [str(b) for b in range(self.num_envs) if str(b) not in state]
        if missing or len([k for k in state if k.isdigit()]) != self.num_envs:
            raise ValueError(f"assembler state holds {len([k for k in state if k.isdigit()])} environments, "
                             f"this actor has {self.num_envs}")
        self._version = np.asarray(state["version"], np.int64).copy()
        self._source = np.asarray(state["source"], np.int64).copy()
        self._pending = [[_with_legal({f: np.asarray(v) for f, v in state[str(b)].items()})] if state[str(b)]
                         else [] for b in range(self.num_envs)]


def _with_legal(steps: dict) -> dict:
    """Unfinished steps saved before legal masks were kept (moozi <= 0.2 checkpoints): every move legal
    on non-last steps, as a replay without masks assumes."""
    if "legal" not in steps:
        num_actions = steps["root_policy"].shape[-1] - 1
        steps["legal"] = np.repeat(~steps["is_last"][:, None], num_actions, axis=1)
    return steps


def play_games(actor, num_games: int, max_calls: int = 100_000, progress=None) -> list[Episode]:
    """Run a test actor until ``num_games`` games finished, evenly across its environments.

    Taking the first games to finish would favour short episodes, so every
    environment plays the same number of games (``ceil(num_games / B)``) and
    the first ``num_games`` of those, taken round-robin over the
    environments, are returned. ``progress(finished, wanted, moves)``, where
    given, is called after every actor segment: games finished that count
    (at most ``per_env`` an environment), ``per_env * B``, and the moves played
    so far in all environments.
    """
    per_env = -(-num_games // actor.num_envs)
    games: list[list[Episode]] = [[] for _ in range(actor.num_envs)]
    moves = 0
    for _ in range(max_calls):
        episodes, metrics = actor.run()
        for ep in episodes:
            games[ep.env_index].append(ep)
        if progress is not None:
            moves += int(metrics.get("acting/env_steps", 0))
            progress(sum(min(len(g), per_env) for g in games), per_env * actor.num_envs, moves)
        if min(len(g) for g in games) >= per_env:
            ordered = [games[b][i] for i in range(per_env) for b in range(actor.num_envs)]
            return ordered[:num_games]
    finished = sum(len(g) for g in games)
    raise RuntimeError(f"only {finished} games finished in {max_calls} actor calls (wanted {num_games})")

