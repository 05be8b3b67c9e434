"""``moozi sweep``: strength against the search budget over a run's checkpoints (the thesis's Fig. 5.3).

Every checkpoint the run still holds (periodic, ``checkpoints/kept`` from ``output.keep_every_updates``, and
``best``), or those asked for, plays ``episodes`` test games at each simulation count (1: the prior alone, as
Gumbel MuZero's planner then takes the prior's best move), with the run's test settings (greedy moves, and the
random moves of ``testing.random_move_prob``) unless the options change them. A cell holds the mean return (one-player
games) or the score against the opponent (two-player: win 1, draw 0.5) with a 95% interval. The table is
written as JSON lines and Markdown, and, with matplotlib (the ``viz`` extra), as a plot against env steps.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import time
from pathlib import Path

import numpy as np

from moozi.config import ConfigError

log = logging.getLogger("moozi")


def cell(result: dict) -> dict:
    """One (checkpoint, simulations) cell from a :func:`moozi.eval.evaluate.evaluate` result: ``value`` with a
    95% interval (an arena opponent: its paired score interval; else a normal approximation, two-player scores
    from wins, draws and losses)."""
    if "score" in result:  # an arena opponent: the arena's own interval, from pairs of games
        return {k: float(result["score"][k]) for k in ("value", "low", "high")}
    if "return_mean" in result:
        return {"value": float(result["return_mean"]), "low": float(result["return_low"]),
                "high": float(result["return_high"])}
    else:
        n = max(int(result["wins"] + result["draws"] + result["losses"]), 1)
        scores = np.r_[np.ones(result["wins"]), np.full(result["draws"], 0.5), np.zeros(result["losses"])]
        value = float(scores.mean()) if scores.size else 0.0
        half = 1.96 * float(scores.std()) / math.sqrt(n)
    return {"value": value, "low": value - half, "high": value + half}


def sweep(run_dir, simulations: list[int], episodes: int = 30, seed: int = 0, checkpoints: list[int] | None = None,
          opponent: str = "random", settings=None) -> list[dict]:
    """The sweep's rows, one per (checkpoint, simulation count), checkpoints oldest first; ``settings``
    (:class:`moozi.eval.evaluate.TestSettings`, its simulations ignored) adds randomness to the games."""
    import dataclasses

    from moozi.eval.evaluate import TestSettings, check_simulations, evaluate
    from moozi.run_dir import kept_updates

    for n in simulations:
        check_simulations(n)
    held = kept_updates(run_dir)
    chosen = held if not checkpoints else sorted(set(checkpoints))
    missing = sorted(set(chosen) - set(held))
    if missing:
        raise ConfigError(f"--checkpoints {missing}: {run_dir} holds the update counts {held}")
    if not chosen:
        raise ConfigError(f"{run_dir} holds no checkpoint to sweep")
    rows = []
    for updates in chosen:
        for n in simulations:
            t = time.perf_counter()
            games = dataclasses.replace(settings or TestSettings(), simulations=n)
            r = evaluate(run_dir, opponent, episodes, seed, str(updates), settings=games)
            rows.append({"updates": updates, "env_steps": r["env_steps"], "simulations": n, "games": r["games"],
                         "two_player": "wins" in r, **cell(r), "seconds": time.perf_counter() - t,
                         "temperature": r.get("temperature"), "random_move_prob": r.get("random_move_prob"),
                         "random_moves": r.get("random_moves")})
            log.info("sweep: update %d, %d simulations: %.3f [%.3f, %.3f]", updates, n, rows[-1]["value"],
                     rows[-1]["low"], rows[-1]["high"])
    return rows


def markdown(rows: list[dict], what: str) -> str:
    """The table: a row per checkpoint, a column per simulation count, ``value [low, high]`` in each cell."""
    sims = sorted({r["simulations"] for r in rows})
    lines = [f"| updates | env steps | {' | '.join(f'{n} sim' + ('' if n == 1 else 's') for n in sims)} |",
             "| --- | --- | " + " | ".join("---" for _ in sims) + " |"]
    for updates in sorted({r["updates"] for r in rows}):
        mine = {r["simulations"]: r for r in rows if r["updates"] == updates}
        steps = next(iter(mine.values()))["env_steps"]
        cells = [f"{mine[n]['value']:.3g} [{mine[n]['low']:.3g}, {mine[n]['high']:.3g}]" if n in mine else "-"
                 for n in sims]
        lines.append(f"| {updates:,} | {steps:,} | {' | '.join(cells)} |")
    return f"{what}, 95% intervals\n\n" + "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path, title: str, what: str) -> Path | None:
    """Strength against env steps, one line per simulation count (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("no plot: matplotlib is missing (pip install 'moozi[viz]')")
        return None
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    try:
        for n in sorted({r["simulations"] for r in rows}):
            mine = sorted((r for r in rows if r["simulations"] == n), key=lambda r: r["env_steps"])
            xs = [r["env_steps"] for r in mine]
            ax.errorbar(xs, [r["value"] for r in mine], yerr=[[r["value"] - r["low"] for r in mine],
                                                            [r["high"] - r["value"] for r in mine]],
                        marker="o", ms=3, capsize=2, lw=1.2, label=f"{n} simulation{'' if n == 1 else 's'}")
        ax.set_xlabel("env steps")
        ax.set_ylabel(what)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        fig.savefig(path, dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def run_sweep(run_dir, simulations: list[int], episodes: int = 30, seed: int = 0,
              checkpoints: list[int] | None = None, opponent: str = "random", out_dir=None, settings=None) -> dict:
    """``moozi sweep``: the rows, written as ``sweep-STAMP.jsonl`` / ``.md`` / ``.png`` in ``out_dir``
    (default ``RUN/sweeps``); returns the paths and the rows."""
    from moozi.run_dir import load_run_config, views_dir

    config = load_run_config(run_dir)
    t = time.perf_counter()
    rows = sweep(run_dir, simulations, episodes, seed, checkpoints, opponent, settings)
    out_dir = Path(out_dir) if out_dir else views_dir(run_dir, "sweeps")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"sweep-{datetime.datetime.now(datetime.timezone.utc).strftime('%Y%m%d-%H%M%S')}"
    with open(stem.with_suffix(".jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    what = f"score against {opponent}" if rows[0]["two_player"] else "test return"
    first = rows[0]
    noise = [f"{k} {first[k]:g}" for k in ("temperature", "random_moves", "random_move_prob") if first.get(k)]
    title = f"{config.env.name}: {what} by search budget ({episodes} games per point{''.join(', ' + n for n in noise)})"
    stem.with_suffix(".md").write_text(f"# {title}\n\n" + markdown(rows, what))
    picture = plot(rows, stem.with_suffix(".png"), title, what)
    return {"jsonl": str(stem.with_suffix(".jsonl")), "markdown": str(stem.with_suffix(".md")),
            "plot": None if picture is None else str(picture), "cells": len(rows),
            "wall_s": time.perf_counter() - t, "rows": rows}

