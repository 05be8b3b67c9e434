"""The thesis-protocol card's ``summary.json`` from its run folders (docs/results/thesis-protocol).

Top-level keys: the four games, ``ppo`` and ``ppo_gymnax_protocol``. For each game it reads moozi's runs
``runs/tp-GAME-sSEED`` (``metrics.jsonl``: the tests by env frames; ``final-minatar.json``: the line ``moozi
eval RUN --games 64 --package minatar`` printed, the final evaluation on the original package; ``final-thesis-
planner.json``: the same with ``--planner thesis``) and the PPO baseline's ``runs/ppo-GAME-thesis-
sSEED/result.json`` (``moozi baseline ppo``), and writes, per game: ``protocol``, ``preset`` and ``overrides``
(what a user types), ``thesis`` (the thesis's figure), ``seeds`` (``{seed, env_frames, final_mean, final_ci,
games, curve, status, run_id}``, ``curve`` as ``[[env_frames, test_mean], ...]``), and over the seeds with a final
evaluation ``mean``, ``iqm`` and ``iqm_ci`` (rliable: the interquartile mean with a stratified-bootstrap 95%
interval); ``ppo`` keyed by game with the same fields, and ``ppo_gymnax_protocol`` (one seed per game on
gymnax's 1000-move protocol, beside gymnax's published figures). A run still under way has ``status`` "running"
and no final (it counts in no aggregate).

Run folders do not outlive every session, so the existing summary's entries are merged, not replaced
(:func:`merge`): a seed whose folder is gone keeps its entry, a PPO seed's folder replaces its entry, and a moozi
run's folder replaces the entry of the same run unless it holds another run (:func:`started_over`: the old entry is
kept, marked lost). Every aggregate is computed again over the merged seeds.

Usage: ``python research/thesis_protocol_summary.py [--runs runs] [--out docs/results/thesis-protocol/summary.json]
[--keep KEY ...]`` (``--keep``: top-level keys of the existing summary written by hand, kept as they are).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from moozi.envs.protocol import GAMES, named_protocol
from moozi.observe.metrics import read_metrics

ROOT = Path(__file__).resolve().parents[1]
THESIS = {"breakout": 100.0, "space_invaders": 300.0, "freeway": 68.6, "asterix": 33.0}
"""The thesis's figures (Figure 5.1; Breakout and Space Invaders as its plots cap them, Asterix read off its plot)."""
GYMNAX_PPO = {"breakout": 28.0, "space_invaders": 131.0, "freeway": 58.0, "asterix": 15.0}
"""gymnax's published PPO figures (10M steps, its 1000-move protocol)."""
PRESETS = {"breakout": "breakout", "space_invaders": "space_invaders", "freeway": "freeway", "asterix": "asterix"}
OVERRIDES = ["--protocol thesis", "testing.every=300", "testing.episodes=16", "testing.envs=16",
             "output.keep_every_updates=5000", "learner.lr_schedule=cosine", "learner.lr_decay_over=budget",
             "learner.lr_decay_start=0.5", "learner.lr_final_fraction=0.1"]
"""What a user types beside ``moozi train --preset GAME`` for these runs (docs/results/thesis-protocol)."""


def aggregate(finals: list[float], reps: int = 5000) -> dict:
    """``mean``, ``iqm`` and ``iqm_ci`` (95%, stratified bootstrap) of per-seed final scores, by rliable; {} for
    none."""
    if not finals:
        return {}
    from rliable import library as rly
    from rliable import metrics

    scores = np.asarray(finals, np.float64).reshape(-1, 1)  # [seeds, one task]
    point, ci = rly.get_interval_estimates({"x": scores}, lambda s: np.array([metrics.aggregate_iqm(s)]),
                                           reps=reps)
    return {"mean": float(scores.mean()), "iqm": float(point["x"][0]),
            "iqm_ci": [float(ci["x"][0][0]), float(ci["x"][1][0])], "seeds_counted": len(finals)}


def run_id_of(run: Path) -> str | None:
    """The identity ``moozi train`` gave the run in ``run.json`` when it started (a restart in the same folder gets
    a new one); None without one."""
    try:
        return str(json.loads((run / "run.json").read_text())["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def started_over(entry: dict, run_id: str | None, frames: int) -> bool:
    """Whether the summary's ``entry`` of a moozi run still running is another run than the folder's (``run_id``,
    ``frames``; a folder that is gone: None, 0): lost with its folder. The identities decide where both are
    known (a restart is lost-and-new even once it has more frames than the lost run had); otherwise the frames
    do (fewer frames in the folder than the summary holds)."""
    if entry.get("status") != "running":
        return False
    if entry.get("run_id") and run_id:
        return entry["run_id"] != run_id
    return entry["env_frames"] > frames


def moozi_seed(run: Path, budget: int) -> dict:
    """One moozi run's entry: its tests by env frames, and its final evaluation on the original package."""
    rows = read_metrics(run)
    curve = [[int(r["env_steps"]), float(r["test/return_mean"])] for r in rows if "test/return_mean" in r]  # slimmed rounds
    frames = max((int(r["env_steps"]) for r in rows if "env_steps" in r), default=0)
    entry = {"seed": int(run.name.rsplit("-s", 1)[1]), "env_frames": frames, "curve": curve,
             "status": "done" if frames >= budget else "running", "final_mean": None, "final_ci": None,
             "games": None, "run_id": run_id_of(run)}
    final = run / "final-minatar.json"
    if final.exists() and entry["status"] == "done":
        f = json.loads(final.read_text())
        entry.update(final_mean=f["return_mean"], final_ci=[f["return_low"], f["return_high"]], games=f["games"],
                     final_package=f["protocol"]["package"])
    thesis_planner = run / "final-thesis-planner.json"
    if thesis_planner.exists() and entry["status"] == "done":
        f = json.loads(thesis_planner.read_text())
        entry["final_thesis_planner"] = {"mean": f["return_mean"], "ci": [f["return_low"], f["return_high"]],
                                         "games": f["games"]}
    return entry


def ppo_seed(result: dict) -> dict:
    """One PPO run's entry; its curve stays in its archive (:data:`PPO_CURVES_IN`), its full evaluations too."""
    f = result["final"]
    return {"seed": result["seed"], "env_frames": result["env_frames"], "final_mean": f["mean"], "final_ci": f["ci"],
            "games": f["games"], "final_package": f["package"], "wall_s": round(result["wall_s"]), "status": "done"}


PPO_CURVES_IN = ("results-data/thesis-protocol__ppo-GAME-PROTOCOL-sSEED.tar.xz (result.json: tests every 0.5M frames, "
                 "the final evaluation's games, min and max, and the same agent's 64 games on gymnax's port)")


def slimmed(summary: dict) -> dict:
    """The summary as this script writes it now, older entries included: moozi's curves to 2 decimals (16-game
    means; the exact ones are in each run's archived metrics) and no ``run`` (it is ``tp-GAME-sSEED``); each PPO
    entry as :func:`ppo_seed` writes it, its curve left in its archive where one exists (named once by
    ``ppo_curves_in``). The card's summary stays under the results' 20 KB cap with twelve runs' curves."""
    for game in GAMES:
        for seed in summary.get(game, {}).get("seeds", []):
            seed.pop("run", None)
            seed["curve"] = [[int(f), round(float(v), 2)] for f, v in seed.get("curve", [])]
    for key, protocol in (("ppo", "thesis"), ("ppo_gymnax_protocol", "gymnax")):
        for game, entry in summary.get(key, {}).items():
            for seed in entry.get("seeds", []):
                archive = f"results-data/thesis-protocol__ppo-{game}-{protocol}-s{seed['seed']}.tar.xz"
                if (ROOT / archive).exists():
                    seed.pop("curve", None)
                    seed.pop("curve_in", None)
                    seed.pop("final_port", None)
                if "wall_s" in seed:
                    seed["wall_s"] = round(seed["wall_s"])
    summary["ppo_curves_in"] = PPO_CURVES_IN
    return summary


def summarize(runs: Path) -> dict:
    out: dict = {"ppo": {}, "ppo_gymnax_protocol": {}}
    for game in GAMES:
        rules = named_protocol("thesis", game)
        seeds = [moozi_seed(r, rules.max_env_frames) for r in sorted(runs.glob(f"tp-{game}-s[0-9]*")) if r.is_dir()]
        finals = [s["final_mean"] for s in seeds if s["final_mean"] is not None]
        out[game] = {"protocol": rules.as_dict(), "preset": PRESETS[game], "overrides": OVERRIDES,
                              "thesis": THESIS[game], "seeds": seeds, **aggregate(finals)}
        ppo = [ppo_seed(json.loads(p.read_text())) for p in sorted(runs.glob(f"ppo-{game}-thesis-s*/result.json"))]
        out["ppo"][game] = {"protocol": rules.as_dict(), "seeds": ppo, **aggregate([s["final_mean"] for s in ppo])}
        gx = [json.loads(p.read_text()) for p in sorted(runs.glob(f"ppo-{game}-gymnax-s*/result.json"))]
        out["ppo_gymnax_protocol"][game] = {"published": GYMNAX_PPO[game], "seeds": [ppo_seed(r) for r in gx]}
    return out


LOST = "lost (its folder did not outlive its session); started over, never spliced"


def _merged_seeds(old: list[dict], new: list[dict], moozi: bool) -> list[dict]:
    """``new`` entries (from folders) over ``old`` ones (the summary's): see :func:`merge`."""
    out = list(new)
    for entry in old:
        same = [e for e in new if e["seed"] == entry["seed"]]  # a game's runs are tp-GAME-sSEED, one per seed
        if not same:
            out.append(entry)
        elif moozi and started_over(entry, same[0].get("run_id"), same[0]["env_frames"]):
            out.append({**entry, "status": LOST})  # the folder holds a restart
        elif moozi and entry.get("status", "").startswith("lost"):
            out.append(entry)
    return sorted(out, key=lambda e: (e["seed"], -e.get("env_frames", 0)))


def merge(old: dict, new: dict) -> dict:
    """``new`` (from the run folders) merged into ``old`` (the existing summary), aggregates recomputed."""
    out = {**old, **{k: v for k, v in new.items() if k not in ("ppo", "ppo_gymnax_protocol")}}
    for game in GAMES:
        seeds = _merged_seeds(old.get(game, {}).get("seeds", []), new[game]["seeds"], moozi=True)
        out[game] = {**{k: v for k, v in new[game].items() if k != "seeds"}, "seeds": seeds,
                     **aggregate([s["final_mean"] for s in seeds if s.get("final_mean") is not None])}
        for key in ("ppo", "ppo_gymnax_protocol"):
            before = old.get(key, {}).get(game, {})
            entry = {**before, **{k: v for k, v in new[key][game].items() if k != "seeds"}}
            entry["seeds"] = _merged_seeds(before.get("seeds", []), new[key][game]["seeds"], moozi=False)
            if key == "ppo":
                for k in ("mean", "iqm", "iqm_ci", "seeds_counted"):
                    entry.pop(k, None)
                entry.update(aggregate([s["final_mean"] for s in entry["seeds"]]))
            out.setdefault(key, {})[game] = entry
    return out


def packed_json(value, width: int = 160, indent: int = 1, _level: int = 0) -> str:
    """JSON packed into lines of at most ``width`` characters where it can: a value that fits is one line; an
    object's or list's items are packed several to a line, and an item longer than a line gets lines of its own
    (a list of numbers or of ``[frames, score]`` pairs, a curve, is always one line). ``json.loads`` reads back the
    same data, in about half the bytes of one value per line (the card's summary stays under 20 KB)."""
    flat = json.dumps(value)
    numbers = isinstance(value, list) and all(
        isinstance(v, (int, float)) or (isinstance(v, list) and all(isinstance(x, (int, float)) for x in v))
        for v in value)
    if not isinstance(value, (dict, list)) or not value or numbers or indent * _level + len(flat) <= width:
        return flat
    pad = " " * (indent * (_level + 1))
    items = ([f"{json.dumps(k)}: {packed_json(v, width, indent, _level + 1)}" for k, v in value.items()]
             if isinstance(value, dict) else [packed_json(v, width, indent, _level + 1) for v in value])
    lines: list[str] = []
    for item in items:
        if lines and "\n" not in item and "\n" not in lines[-1] and len(lines[-1]) + 2 + len(item) <= width:
            lines[-1] += ", " + item
        else:
            lines.append(pad + item)
    close = " " * (indent * _level) + ("}" if isinstance(value, dict) else "]")
    return ("{" if isinstance(value, dict) else "[") + "\n" + ",\n".join(lines) + "\n" + close


def rounded(value, digits: int = 4):
    """``value`` with every float rounded to ``digits`` decimals (intervals and means; frames are integers)."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="runs")
    parser.add_argument("--out", default=str(ROOT / "docs/results/thesis-protocol/summary.json"))
    parser.add_argument("--keep", nargs="*", default=[], help="top-level keys of the existing summary to keep")
    args = parser.parse_args()
    out = Path(args.out)
    summary = summarize(Path(args.runs))
    if out.exists():
        old = json.loads(out.read_text())
        summary = merge(old, summary)
        summary.update({k: old[k] for k in args.keep if k in old})
    out.write_text(packed_json(rounded(slimmed(summary))) + "\n")
    print(json.dumps({g: {k: v for k, v in summary[g].items() if k in ("mean", "iqm", "iqm_ci")}
                      | {"seeds": len(summary[g]["seeds"]), "ppo_seeds": len(summary["ppo"][g]["seeds"])}
                      for g in GAMES}))


if __name__ == "__main__":
    main()
