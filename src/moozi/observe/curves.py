"""``moozi curves``: learning curves of runs over seeds beside published reference scores, as one PNG.

Runs are grouped by game (``env.name``); each game gets one row of two panels: the test return against env
steps (one MinAtar step is one frame) and against wall clock in hours. Each run is a thin line; where a
game's runs differ only in their seed (and testing/output settings), their mean is a thick one (up to the
env steps all of them reached); every reference score known for the game (:data:`REFERENCES`) is a dashed
horizontal line with its source in the legend.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from moozi.config import ConfigError

TEST_KEY = "test/return_mean"
RUN_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#17becf", "#bcbd22", "#7f7f7f", "#e377c2")
REF_COLOURS = ("#d62728", "#9467bd", "#8c564b")  # never a run's colour


@dataclass(frozen=True)
class Reference:
    """A published score: ``label`` (who, how long), ``value`` (the return)."""

    label: str
    value: float


# Scores quoted by issue 44 (MooZi thesis §5.2-5.4; gymnax's PPO after 10M steps; the MinAtar paper, sticky
# actions 0.1, 5M frames, read off its curves). The MinAtar paper's numbers are for sticky actions even
# where drawn beside a gymnax (non-sticky) game: the closest published baseline, not the same rules.
REFERENCES: dict[str, tuple[Reference, ...]] = {
    "gymnax:Breakout-MinAtar": (Reference("thesis (<=10M frames, capped at 100)", 100.0),
                                Reference("gymnax PPO, 10M steps", 28.0),
                                Reference("MinAtar DQN, 5M, sticky", 17.5)),
    "gymnax:SpaceInvaders-MinAtar": (Reference("thesis (<=10M frames, capped at 300)", 300.0),
                                     Reference("gymnax PPO, 10M steps", 131.0),
                                     Reference("MinAtar AC, 5M, sticky", 185.0)),
    "gymnax:Freeway-MinAtar": (Reference("thesis (~5.3M frames)", 68.6),
                               Reference("gymnax PPO, 10M steps", 58.0),
                               Reference("MinAtar DQN, 5M, sticky", 50.0)),
    "gymnax:Asterix-MinAtar": (Reference("thesis (about 2x PPO)", 33.0),
                               Reference("gymnax PPO, 10M steps", 15.0),
                               Reference("MinAtar AC, 5M, sticky", 20.5)),
    "minatar:breakout": (Reference("MinAtar DQN, 5M, sticky", 17.5),
                         Reference("MinAtar AC, 5M, sticky", 15.0)),
}


def references_for(env_name: str) -> tuple[Reference, ...]:
    """The reference scores of a game (none for games without published MinAtar numbers)."""
    return REFERENCES.get(env_name, ())


def test_series(rows: list[dict], x: str) -> tuple[np.ndarray, np.ndarray]:
    """``(xs, returns)`` of the metrics rows that hold a test, ``x`` being ``env_steps`` or ``wall_s``."""
    pts = [(float(r[x]), float(r[TEST_KEY])) for r in rows
           if isinstance(r.get(TEST_KEY), (int, float)) and math.isfinite(r[TEST_KEY]) and x in r]
    if not pts:
        return np.zeros(0), np.zeros(0)
    xs, ys = np.array(pts).T
    return xs, ys


def mean_curve(series: list[tuple[np.ndarray, np.ndarray]], points: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """The mean of several ``(xs, ys)`` curves, each interpolated on a common grid that ends where the shortest
    ends (a mean past it would silently drop seeds). Empty when fewer than two curves have points."""
    series = [(xs, ys) for xs, ys in series if xs.size]
    if len(series) < 2:
        return np.zeros(0), np.zeros(0)
    lo = max(xs[0] for xs, _ in series)
    hi = min(xs[-1] for xs, _ in series)
    if hi <= lo:
        return np.zeros(0), np.zeros(0)
    grid = np.linspace(lo, hi, points)
    return grid, np.mean([np.interp(grid, xs, ys) for xs, ys in series], axis=0)


def load_runs(run_dirs: list[Path | str]) -> dict[str, list[tuple[str, list[dict], str]]]:
    """``{env name: [(label, metrics rows, recipe), ...]}`` in the order given; a run without tests is an
    error."""
    from moozi.observe.metrics import read_metrics
    from moozi.run_dir import load_run_config

    games: dict[str, list[tuple[str, list[dict], str]]] = {}
    for run in map(Path, run_dirs):
        if not (run / "config.yaml").exists():
            raise ConfigError(f"{run} is not a run directory (no config.yaml); give directories written by "
                              "`moozi train`")
        rows = read_metrics(run)
        if not test_series(rows, "env_steps")[0].size:
            raise ConfigError(f"{run} has no test in its metrics yet (testing.every); nothing to draw")
        config = load_run_config(run)
        label = f"{run.name} (seed {config.schedule.seed})"
        games.setdefault(config.env.name, []).append((label, rows, recipe(config)))
    return games


def recipe(config) -> str:
    """What makes runs seeds of one another: the config without its seed, its testing and its output (testing
    and output do not change what is learnt)."""
    from moozi.config import to_dict

    d = to_dict(config)
    d["schedule"] = {k: v for k, v in d["schedule"].items() if k not in ("seed", "max_env_steps")}
    for section in ("testing", "output"):
        d.pop(section, None)
    return json.dumps(d, sort_keys=True, default=str)


def draw_curves(run_dirs: list[Path | str], out: Path | str, title: str | None = None) -> dict:
    """Write the figure to ``out`` (PNG); returns what it drew: per game the runs, their last test and
    the references."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    games = load_runs(run_dirs)
    out = Path(out)
    fig, axes = plt.subplots(len(games), 2, figsize=(10.5, 3.2 * len(games)), squeeze=False)
    drawn = {}
    try:
        for row, (game, runs) in enumerate(games.items()):
            refs = references_for(game)
            for col, (x, scale, xlabel) in enumerate((("env_steps", 1e6, "env steps (millions)"),
                                                      ("wall_s", 3600.0, "wall clock (hours, this machine)"))):
                ax = axes[row][col]
                series = [test_series(rows, x) for _, rows, _ in runs]
                for i, ((label, _, _), (xs, ys)) in enumerate(zip(runs, series)):
                    ax.plot(xs / scale, ys, lw=0.9, alpha=0.6, color=RUN_COLOURS[i % len(RUN_COLOURS)], label=label)
                mx, my = mean_curve(series) if len({r for _, _, r in runs}) == 1 else (np.zeros(0), np.zeros(0))
                if mx.size:  # only seeds of one recipe are averaged
                    ax.plot(mx / scale, my, lw=2.2, color="black", label=f"mean of {len(runs)} seeds")
                for i, ref in enumerate(refs):
                    ax.axhline(ref.value, ls=(0, (4, 2 + i)), lw=1.1, color=REF_COLOURS[i % len(REF_COLOURS)],
                               label=ref.label)
                ax.set_xlabel(xlabel, fontsize=8)
                ax.set_ylabel("test return", fontsize=8)
                ax.set_title(game, fontsize=9)
                ax.tick_params(labelsize=7)
                ax.grid(alpha=0.3)
                if col == 1:
                    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
            drawn[game] = {"runs": [{"run": label, "last_test": float(test_series(rows, "env_steps")[1][-1]),
                                     "env_steps": float(test_series(rows, "env_steps")[0][-1])}
                                    for label, rows, _ in runs],
                           "seeds_of_one_recipe": len({r for _, _, r in runs}) == 1,
                           "references": {r.label: r.value for r in refs}}
        if title:
            fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)
    return {"png": str(out), "games": drawn}
