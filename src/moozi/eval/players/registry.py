"""Player strings: ``parse_player`` and ``make_player`` (the forms are listed in the package doc)."""

from __future__ import annotations

import math

from moozi.config import ConfigError
from moozi.eval.players.external import GTPPlayer, HumanPlayer
from moozi.eval.players.learned import RunPlayer, TrueModelPlayer
from moozi.eval.players.openspiel import AlphaBetaPlayer, OpenSpielMCTSPlayer
from moozi.eval.players.options import SearchOptions
from moozi.eval.players.simple import EpsilonPlayer, PerfectPlayer, RandomPlayer

BUILTIN = ("random", "perfect", "solver", "human", "ab", "ab-D", "os-mcts-N", "mcts-N", "RUN[@CKPT]", "prior:RUN[@CKPT]",
           "az:RUN[@CKPT]", "gtp:COMMAND")
RUN_PREFIXES = ("prior:", "az:", "mcts:")  # a run's player kinds (``mcts:`` is the plain RUN's, as ids print it)
# option -> (type, smallest allowed value, what it is)
NUMBERS = {"sims": (int, 1, "simulations per move"), "temp": (float, 0.0, "a move temperature"),
           "eps": (float, 0.0, "a probability of a random move"), "ms": (float, 0.0, "milliseconds per move"),
           "rollouts": (int, 1, "random rollouts per leaf"), "uct": (float, 0.0, "an exploration constant"),
           "solve": (int, 0, "0 or 1"), "result": (int, 0, "0 or 1"),
           "timeout": (float, 0.01, "seconds an engine may take to answer one command"),
           "sym": (float, 0.0, "a probability of searching through a random board symmetry"),
           "ptemp": (float, 0.0, "a prior temperature"), "lcb": (float, 0.0, "a lower confidence bound's constant")}


def is_builtin(head: str) -> bool:
    """Whether a player string's head names a built-in player (else it should be a run directory)."""
    return head in ("random", "perfect", "solver", "human", "ab") or head.startswith(("ab-", "os-mcts-", "mcts-", "gtp:"))


def run_of(head: str) -> tuple[str, str]:
    """``(kind prefix, run directory and checkpoint)`` of a run player's head (the prefix '' for a plain RUN)."""
    for prefix in RUN_PREFIXES:
        if head.startswith(prefix):
            return prefix, head[len(prefix):]
    return "", head


def _check_numbers(text: str, options: dict) -> None:
    """Numeric options must be numbers in range: a ConfigError that names the option and what it allows."""
    for key, value in options.items():
        if key not in NUMBERS:
            continue
        kind, low, what = NUMBERS[key]
        high = 1 if key in ("eps", "solve", "result", "sym") else math.inf
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and low <= value <= high and (kind is float or float(value).is_integer())):
            allowed = f"{'an integer' if kind is int else 'a number'} >= {low}" + (" and <= 1" if high == 1 else "")
            raise ConfigError(f"player {text!r}: {key}={value!r} is not {what}: allowed {allowed}")


def parse_player(text: str) -> tuple[str, dict]:
    """``"head,key=value,..."`` -> ``(head, options)``; options are numbers where they parse as numbers."""
    head, *rest = [t.strip() for t in str(text).split(",")]
    options = {}
    for item in rest:
        if "=" not in item:
            raise ConfigError(f"player {text!r}: option {item!r} is not key=value")
        k, v = item.split("=", 1)
        try:
            options[k.strip()] = int(v) if v.strip().lstrip("-").isdigit() else float(v)
        except ValueError:
            options[k.strip()] = v.strip()
    if not head:
        raise ConfigError(f"player {text!r} is empty: allowed {', '.join(BUILTIN)}")
    return head, options


def make_player(text: str, game: str, seed: int = 0, game_kwargs: dict | None = None):
    """A player from its string (see the module doc) for ``game``; unknown kinds or options fail by name."""
    head, options = parse_player(text)
    _check_numbers(text, options)
    eps = options.pop("eps", 0.0)

    def unused(allowed=()):
        extra = sorted(set(options) - set(allowed))
        if extra:
            raise ConfigError(f"player {text!r}: unknown option(s) {extra}; allowed: eps"
                              + "".join(f", {a}" for a in allowed))

    if head == "random":
        unused()
        player = RandomPlayer(seed)
    elif head == "perfect":
        unused()
        player = PerfectPlayer(game, seed)
    elif head == "solver":
        unused(("result",))
        from moozi.eval.players.solver import SolverPlayer

        player = SolverPlayer(game, seed, result_only=bool(options.get("result", 0)))
    elif head == "human":
        unused()
        player = HumanPlayer(game, game_kwargs)
    elif head == "ab" or head.startswith("ab-"):
        unused()
        depth = head[len("ab-"):] if head != "ab" else None
        if depth is not None and not depth.isdigit():
            raise ConfigError(f"player {text!r}: ab-D needs a search depth in plies, e.g. ab-6 (or ab: the whole game)")
        player = AlphaBetaPlayer(game, None if depth is None else int(depth), seed, kwargs=game_kwargs)
    elif head.startswith("os-mcts-"):
        unused(("rollouts", "uct", "solve"))
        n = head[len("os-mcts-"):]
        if not n.isdigit():
            raise ConfigError(f"player {text!r}: os-mcts-N needs a number of simulations, e.g. os-mcts-100")
        player = OpenSpielMCTSPlayer(game, int(n), seed, rollouts=int(options.get("rollouts", 1)),
                                     uct_c=float(options.get("uct", 2.0)), solve=bool(options.get("solve", 1)),
                                     kwargs=game_kwargs)
    elif head.startswith("mcts-"):
        unused(("rollouts",))
        n = head[len("mcts-"):]
        if not n.isdigit():
            raise ConfigError(f"player {text!r}: mcts-N needs a number of simulations, e.g. mcts-100")
        player = TrueModelPlayer(game, int(n), rollouts=int(options.get("rollouts", 1)), seed=seed,
                                 game_kwargs=game_kwargs)
    elif head.startswith("gtp:"):
        unused(("timeout",))
        player = GTPPlayer(game, head[len("gtp:"):], seed, game_kwargs, timeout_s=float(options.get("timeout", 60.0)))
    elif head.startswith("az:"):
        search_options = SearchOptions.take(text, options)
        unused(("sims",))
        run, _, checkpoint = head[len("az:"):].partition("@")
        from moozi.run_dir import is_trained, load_run_config

        if not is_trained(run):
            raise ConfigError(f"player {text!r}: {run!r} is not a run directory (no config.yaml) nor an agent file")

        sims = options.get("sims", load_run_config(run).test_planner.num_simulations)
        player = TrueModelPlayer(game, int(sims), run=run, checkpoint=checkpoint or "latest", seed=seed,
                                 options=search_options)
    else:
        prefix, head = run_of(head)
        mode = "prior" if prefix == "prior:" else "search"
        run, _, checkpoint = head.partition("@")
        from moozi.run_dir import is_trained, load_run_config

        if not is_trained(run):
            raise ConfigError(f"player {text!r}: not a built-in player ({', '.join(BUILTIN)}) and {run!r} is not a "
                              "run directory (no config.yaml) nor an agent file")

        search_options = SearchOptions.take(text, options)
        if mode == "search" and load_run_config(run).model.dynamics == "simulator":
            # A run trained in AlphaZero mode searches the way it was trained: the real simulator.
            unused(("sims",))
            sims = options.get("sims", load_run_config(run).test_planner.num_simulations)
            player = TrueModelPlayer(game, int(sims), run=run, checkpoint=checkpoint or "latest", seed=seed,
                                     options=search_options)
            if eps:
                player = EpsilonPlayer(player, float(eps), seed + 7919)
            return player
        unused(("sims", "temp", "ms") if mode == "search" else ("temp",))
        player = RunPlayer(run, checkpoint or "latest", mode, options.get("sims"), float(options.get("temp", 0.0)),
                           seed, budget_ms=options.get("ms"), options=search_options)
        if player.config.env.name != game:
            raise ConfigError(f"player {text!r} was trained on {player.config.env.name}, not {game}")
    if eps:
        player = EpsilonPlayer(player, float(eps), seed + 7919)
    return player
