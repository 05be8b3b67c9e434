"""Play-time search options of a searching player (AlphaZero.jl's MCTS player options), set in a player string.

``RUN,sym=0.5,ptemp=1.5,pick=lcb,lcb=0.5`` (and ``az:RUN,...``); none of them changes training:

* ``sym=P``: at each move, with probability P, search the position seen through a random non-identity board
  symmetry of the game (``EnvSpec.symmetries``) and map the chosen move back (``flip_probability``);
* ``ptemp=T``: the prior's logits divided by T at every node of the search (``prior_temperature``);
* ``pick=policy|visits|value|lcb``: the move played (see :data:`moozi.planner.FINAL_MOVES`);
  ``lcb=C`` the bound's constant for ``pick=lcb`` (``Q - C / sqrt(N)``, default 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from moozi.config import ConfigError
from moozi.planner import FINAL_MOVES

KEYS = ("sym", "ptemp", "pick", "lcb")


@dataclass(frozen=True)
class SearchOptions:
    """``sym`` in [0, 1]; ``ptemp`` > 0 (1: the prior as trained); ``pick`` one of FINAL_MOVES; ``lcb`` >= 0."""

    sym: float = 0.0
    ptemp: float = 1.0
    pick: str = "policy"
    lcb: float = 1.0

    @classmethod
    def take(cls, text: str, options: dict) -> SearchOptions:
        """Pop this record's keys out of a player string's ``options`` and check them (one line naming the key)."""
        found = {k: options.pop(k) for k in KEYS if k in options}
        pick = found.get("pick", "policy")
        if pick not in FINAL_MOVES:
            raise ConfigError(f"player {text!r}: pick={pick!r}: allowed {', '.join(FINAL_MOVES)}")
        if "ptemp" in found and not found["ptemp"] > 0:
            raise ConfigError(f"player {text!r}: ptemp={found['ptemp']!r} is not a prior temperature: allowed a "
                              "number > 0")
        if "lcb" in found and pick != "lcb":
            raise ConfigError(f"player {text!r}: lcb= is the bound of pick=lcb: give pick=lcb with it")
        return cls(sym=float(found.get("sym", 0.0)), ptemp=float(found.get("ptemp", 1.0)), pick=pick,
                   lcb=float(found.get("lcb", 1.0)))

    def settings(self) -> tuple:
        """The options that differ from the defaults, as ``(key, value)`` pairs for a :class:`PlayerSpec`."""
        out = []
        if self.sym:
            out.append(("sym", self.sym))
        if self.ptemp != 1.0:
            out.append(("ptemp", self.ptemp))
        if self.pick != "policy":
            out.append(("pick", self.pick))
            if self.pick == "lcb":
                out.append(("lcb", self.lcb))
        return tuple(out)

    def check(self, text: str, symmetries: tuple, game: str, searching: bool, temperature: float = 0.0) -> None:
        """Refuse what cannot apply: a symmetry on a game without any, search options on a prior-only player,
        a move temperature with a pick that is not a distribution."""
        if self.sym and len(symmetries) < 2:
            raise ConfigError(f"player {text!r}: sym= needs a game with board symmetries; {game} declares none")
        if not searching and (self.ptemp != 1.0 or self.pick != "policy"):
            raise ConfigError(f"player {text!r}: ptemp= and pick= shape a search; a prior: player does not search")
        if temperature and self.pick in ("value", "lcb"):
            raise ConfigError(f"player {text!r}: temp= samples the search's policy; pick={self.pick} plays the best "
                              "move by its score: give one of them")


def symmetry_tables(options: SearchOptions, symmetries: tuple):
    """The gather tables of the game's symmetries when ``sym`` is on (None otherwise)."""
    if not options.sym:
        return None
    from moozi.envs.symmetry import augment_tables

    return augment_tables(symmetries)
