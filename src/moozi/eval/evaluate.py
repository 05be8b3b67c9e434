"""``moozi eval``: play a trained agent (test planner, greedy) against an opponent."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from moozi.config import ConfigError, TestingConfig
from moozi.parts import build_parts
from moozi.run_dir import load_run_config, open_run
from moozi.workers import agent_return, make_actor, play_games


def check_simulations(simulations) -> None:
    if not isinstance(simulations, int) or isinstance(simulations, bool) or simulations < 1:
        raise ConfigError(f"simulations = {simulations!r} is invalid: allowed an integer >= 1 (1: the prior alone)")


@dataclass(frozen=True)
class TestSettings:
    """How evaluation games are played; each None keeps the run's own (``test_planner`` / ``testing``).

    simulations: the test planner's simulations per move (1: the prior alone).
    temperature: moves drawn from the search's policy raised to ``1 / temperature`` (0: greedy).
    random_moves / random_move_prob: the agent's first this-many moves are uniformly random, and each later
      one with this probability (an epsilon test).
    package: MinAtar games: play the run's game under the same rules on this package (``"minatar"``, the
      original one, or ``"gymnax"``, its port; :func:`moozi.envs.protocol.counterpart`).
    planner: ``"thesis"``: the MooZi thesis's test planner (Table 5.1: PUCT, 40 simulations, c1 1.75, c2 19652,
      Dirichlet noise 0.1 (alpha and fraction, as the author's code sets both), temperature 0.25), in place of
      the run's; ``simulations`` and ``temperature`` still override it.
    """

    __test__ = False  # not a pytest class

    simulations: int | None = None
    temperature: float | None = None
    random_moves: int | None = None
    random_move_prob: float | None = None
    package: str | None = None
    planner: str | None = None

    def __post_init__(self):
        if self.simulations is not None:
            check_simulations(self.simulations)
        if self.package not in (None, "minatar", "gymnax"):
            raise ConfigError(f"--package {self.package!r} is invalid: allowed minatar, gymnax")
        if self.planner not in (None, "thesis"):
            raise ConfigError(f"--planner {self.planner!r} is invalid: allowed thesis (the thesis's Table 5.1 test "
                              "planner); leave it out for the run's own")
        TestingConfig(**self._testing_changes())  # the testing section's own checks name the key

    def apply(self, config):
        """``config`` with these settings in its game, test planner and testing section."""
        if self.package is not None:
            from moozi.envs.protocol import counterpart

            config = dataclasses.replace(config, env=counterpart(config.env, self.package))
        if self.planner == "thesis":
            config = dataclasses.replace(
                config, test_planner=thesis_test_planner(config.test_planner),
                testing=dataclasses.replace(config.testing, temperature=THESIS_TEST_TEMPERATURE))
        if self.simulations is not None:
            config = dataclasses.replace(config, test_planner=dataclasses.replace(
                config.test_planner, num_simulations=self.simulations))
        changes = self._testing_changes()
        return dataclasses.replace(config, testing=dataclasses.replace(config.testing, **changes)) if changes \
            else config

    def _testing_changes(self) -> dict:
        return {k: getattr(self, k) for k in ("temperature", "random_moves", "random_move_prob")
                if getattr(self, k) is not None}

    @staticmethod
    def of(config) -> dict:
        """The settings a config plays test games with (for results)."""
        t, p = config.testing, config.test_planner
        noise = {"dirichlet_alpha": float(p.dirichlet_alpha), "dirichlet_fraction": float(p.dirichlet_fraction)} \
            if p.kind == "puct" else {"gumbel_scale": float(p.gumbel_scale)}
        return {"simulations": int(p.num_simulations), "temperature": float(t.temperature),
                "random_moves": int(t.random_moves), "random_move_prob": float(t.random_move_prob),
                "planner": p.kind, **noise}


THESIS_TEST_TEMPERATURE = 0.25
"""The thesis's test temperature (Table 5.1)."""


def thesis_test_planner(base):
    """``base`` (a :class:`~moozi.config.PlannerConfig`) as the thesis's test planner (Table 5.1's testing row:
    PUCT, 40 simulations, c1 1.75, c2 19652, Dirichlet noise 0.1); its depth cap and other fields kept."""
    return dataclasses.replace(base, kind="puct", num_simulations=40, pb_c_init=1.75, pb_c_base=19652.0,
                               dirichlet_alpha=0.1, dirichlet_fraction=0.1)


def mean_interval(values, z: float = 1.96) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``values`` with a normal-approximation interval (sample std; a single
    value, or values that never differ, give a zero-width interval: one game repeated is not a sample)."""
    x = np.asarray(values, np.float64)
    mean = float(x.mean())
    half = z * float(x.std(ddof=1)) / np.sqrt(x.size) if x.size > 1 else 0.0
    return mean, float(mean - half), float(mean + half)


def few_outcomes_note(result: dict) -> str | None:
    """A warning for a single-player evaluation whose games were (nearly) all alike, else None.

    Greedy test play in a deterministic game repeats a handful of games (gymnax Breakout: two, by the
    ball's starting side), so ``return_low``/``return_high`` then describe those few outcomes, not the
    spread of the agent's play (games that all reach an episode cap look the same, hence "either").
    Said from 8 games up with at most 2 distinct returns."""
    distinct, games = result.get("distinct_returns"), result.get("games", 0)
    if distinct is None or games < 8 or distinct > 2:
        return None
    return (f"only {distinct} distinct return{'s' if distinct > 1 else ''} in {games} games: either the games "
            "all reached one score (an episode cap), or the game and the test play are deterministic and the "
            "games repeat, so the interval describes these few games, not the spread of the agent's play; "
            "--random-move-prob 0.01 (or --temperature) plays a spread of games")


class EvalProgress:
    """:func:`~moozi.workers.play_games`'s progress as one line every ``every_s`` seconds, none before: 64 games of
    7,200 moves run for minutes, and a silent evaluation looks hung. ``say(line)`` prints it (the CLI: stderr)."""

    def __init__(self, say, every_s: float = 60.0, clock=time.monotonic):
        self.say, self.every_s, self.clock = say, every_s, clock
        self.start = self.last = clock()

    def __call__(self, finished: int, wanted: int, moves: int) -> None:
        now = self.clock()
        if now - self.last < self.every_s:
            return
        self.last = now
        self.say(f"moozi eval: {finished} of {wanted} games over, {moves:,} moves played, "
                 f"{(now - self.start) / 60:.1f} min")


def play(run_dir: Path | str, opponent: str = "random", games: int = 100, seed: int = 0,
         checkpoint: str = "latest", record_frames: bool = False, with_spec: bool = False,
         settings: TestSettings | None = None, say=None):
    """Play ``games`` games of a run's checkpoint (test planner; greedy moves unless ``settings`` or the
    run's ``testing`` section add randomness).

    ``checkpoint``: ``"latest"`` (the newest good one), ``"best"`` or an update
    count (:func:`moozi.run_dir.find_checkpoint`). ``record_frames`` keeps
    each game's observations (to draw them). ``say``, where given, gets a
    progress line every minute (:class:`EvalProgress`).

    Returns ``(config, two_player, episodes, checkpoint metadata)`` (and the game's
    spec with ``with_spec``); each :class:`~moozi.workers.Episode` holds the whole
    trajectory and the agent's seat.
    """
    from moozi.eval.perfect import make_opponent

    run = open_run(run_dir, checkpoint, (settings or TestSettings()).apply(load_run_config(run_dir)), keep_env=True)
    config, env = run.config, run.env
    try:
        two_player = env.spec.two_player
        opp = None
        if two_player:
            try:
                opp = make_opponent(opponent, config.env.name, path=env.spec.path)
            except ValueError as err:
                raise ConfigError(f"--opponent {opponent}: {err}") from err
        elif opponent != "random":
            logging.getLogger("moozi").warning("%s is a single-player game: --opponent %s is ignored",
                                               config.env.name, opponent)
        num_envs = min(games, 128)
        if two_player and num_envs % 2:
            num_envs = max(num_envs - 1, 2)
        actor = make_actor(config, env, run.model, "test", jax.random.key(seed), seed=seed ^ 0x5EED,
                           num_envs=num_envs, opponent=opp, record_frames=record_frames)
        try:
            actor.set_params(0, run.params)
            results = play_games(actor, games, progress=None if say is None else EvalProgress(say))
        finally:
            actor.close()
    finally:
        env.close()
    meta = run.meta
    return (config, two_player, results, meta, env.spec) if with_spec else (config, two_player, results, meta)


def play_in_arena(run_dir: Path | str, opponent: str, games: int, seed: int = 0, checkpoint: str = "latest"):
    """``games`` games of a run's checkpoint against any arena player (``moozi.eval.players``: os-mcts-100,
    another RUN, gtp:COMMAND, ...), the agent taking each seat in turn from the initial position, each game
    replayed on the game to record its frames (to draw them).

    Returns ``(config, two_player, episodes, checkpoint metadata, spec, scores)`` like :func:`play` with
    ``with_spec`` (the trajectories carry no search value: ``root_values`` are NaN, the arena keeps none) and
    each game's score for the agent (1, 0.5, 0; a forfeit counts, though its trajectory stops at the
    forfeited move).
    """
    import json
    import tempfile

    from moozi.envs.pool import make_pool
    from moozi.eval.arena import run_match
    from moozi.types import Trajectory
    from moozi.workers import Episode

    run = open_run(run_dir, checkpoint)
    config = run.config
    if not run.spec.two_player:
        raise ConfigError(f"{config.env.name} is a single-player game: it has no opponent")
    with tempfile.TemporaryDirectory(prefix="moozi-watch-") as folder:
        records = Path(folder) / "games.jsonl"
        run_match(f"{run_dir}@{checkpoint}", opponent, pairs=(games + 1) // 2, opening_plies=0, seed=seed,
                  records=str(records))
        played = [r for r in map(json.loads, records.read_text().splitlines()) if "moves" in r][:games]  # no header
    pool = make_pool(config.env.name, 1, seed=seed, modules=config.env.modules, **config.env.kwargs)
    episodes, scores = [], []
    try:
        for g in played:
            ts = pool.reset(seed)
            steps = [ts]
            for move in g["moves"]:
                ts = pool.step(np.asarray([move], np.int32))
                steps.append(ts)
            n = len(steps)
            traj = Trajectory(
                frames=np.stack([np.asarray(t.observation)[0] for t in steps]),
                actions=np.asarray([m + 1 for m in g["moves"]] + [0], np.int32),
                rewards=np.asarray([float(np.asarray(t.reward)[0]) for t in steps], np.float32),
                root_values=np.full(n, np.nan, np.float32),
                root_policies=np.zeros((n, run.spec.num_actions + 1), np.float32),
                to_play=np.asarray([int(np.asarray(t.to_play)[0]) for t in steps], np.int32),
                first=np.int32(0), last=np.int32(n - 1), is_terminal=np.bool_(bool(np.asarray(ts.is_terminal)[0])))
            episodes.append(Episode(traj, version=0, env_index=0, agent_seat=int(g["a_seat"])))
            scores.append(float(g["score_a"]))
    finally:
        pool.close()
    return config, True, episodes, run.meta, run.spec, scores


def evaluate(run_dir: Path | str, opponent: str = "random", games: int = 100, seed: int = 0,
             checkpoint: str = "latest", settings: TestSettings | None = None, say=None) -> dict:
    """Play ``games`` games of a trained agent against ``opponent``; a JSON-ready summary.

    Two-player games: the agent takes each seat in half of the games (exactly
    half when ``games`` is even); results are from the agent's point of view.
    Single-player games ignore the opponent and report returns. ``say``: a
    progress line every minute of play against the built-in opponents and on
    single-player games (:class:`EvalProgress`).
    """
    from moozi.eval.perfect import OPPONENTS

    if opponent not in OPPONENTS:
        config = load_run_config(run_dir)
        env, _ = build_parts(config)
        two = env.spec.two_player
        env.close()
        if two:
            return _evaluate_in_arena(run_dir, opponent, games, seed, checkpoint, settings or TestSettings())
    config, two_player, results, meta = play(run_dir, opponent, games, seed, checkpoint, settings=settings, say=say)
    returns = np.array([agent_return(g.trajectory, g.agent_seat, two_player) for g in results])
    seats = np.array([g.agent_seat for g in results])
    out = {
        "run_dir": str(run_dir),
        "env": config.env.name,
        "opponent": opponent if two_player else None,
        "games": int(len(results)),
        "checkpoint": meta["path"],
        "updates": int(meta["counters"]["updates"]),
        "env_steps": int(meta["counters"]["env_steps"]),
        **TestSettings.of(config),
    }
    from moozi.envs.protocol import of_config

    protocol = of_config(config)
    if protocol is not None:
        out["protocol"] = protocol.as_dict()
    if two_player:
        out.update(
            wins=int(np.sum(returns > 0)),
            draws=int(np.sum(returns == 0)),
            losses=int(np.sum(returns < 0)),
            games_as_first_seat=int(np.sum(seats == 0)),
            losses_as_first_seat=int(np.sum((returns < 0) & (seats == 0))),
            losses_as_second_seat=int(np.sum((returns < 0) & (seats == 1))),
        )
    else:
        mean, low, high = mean_interval(returns)
        out.update(return_mean=mean, return_low=low, return_high=high, return_std=float(returns.std()),
                   return_min=float(returns.min()), return_max=float(returns.max()),
                   distinct_returns=int(np.unique(returns).size))
    return out


def _evaluate_in_arena(run_dir, opponent: str, games: int, seed: int, checkpoint: str,
                       settings: TestSettings) -> dict:
    """``moozi eval`` against any arena player (``moozi.eval.players``): the agent takes each seat in half the
    games (pairs from the initial position, seats swapped); the arena's summary is kept under ``"match"``."""
    import tempfile
    from pathlib import Path

    from moozi.checkpoint import load_checkpoint
    from moozi.eval.arena import run_match
    from moozi.run_dir import find_checkpoint

    if games < 2:
        raise ConfigError(f"--games {games}: an arena opponent plays pairs, so at least 2")
    if settings.random_moves:
        raise ConfigError(f"--random-moves {settings.random_moves}: against an arena opponent the games start "
                          "from the same random openings in pairs; use `moozi match RUN OPPONENT --opening-plies N`")
    options = {"sims": settings.simulations, "temp": settings.temperature, "eps": settings.random_move_prob}
    sims = "".join(f",{k}={v}" for k, v in options.items() if v is not None)
    with tempfile.TemporaryDirectory(prefix="moozi-eval-") as folder:  # the records are not kept
        m = run_match(f"{run_dir}@{checkpoint}{sims}", opponent, pairs=games // 2, opening_plies=0, seed=seed,
                      records=str(Path(folder) / "games.jsonl"))
    m.pop("records", None)
    first, second = m["a_first"], m["a_second"]
    path = find_checkpoint(run_dir, str(m["a"]["updates"]))
    counters = load_checkpoint(path, parts=[])[1]["counters"]
    return {
        "run_dir": str(run_dir), "env": m["game"], "opponent": opponent, "games": m["games"],
        "checkpoint": str(path), "updates": int(counters["updates"]), "env_steps": int(counters["env_steps"]),
        "simulations": m["a"]["settings"].get("sims"), "temperature": m["a"]["settings"].get("temp", 0.0),
        "random_move_prob": m["a"]["settings"].get("eps", 0.0), "wins": m["wins"], "draws": m["draws"], "losses": m["losses"],
        "games_as_first_seat": sum(first.values()), "losses_as_first_seat": first["losses"],
        "losses_as_second_seat": second["losses"], "score": m["score"], "elo": m["elo"], "match": m,
    }
