"""The thesis-protocol card's curves: every seed's tests by env frames beside the thesis's own curves.

Reads the card's ``summary.json`` (each moozi seed's ``curve``, lost runs included, and PPO's) and
``thesis-curves.json`` (the thesis author's evaluation logs as far as the author's repository holds them, with
how each was read), and draws one panel per game: moozi's seeds (solid; a lost run thin and grey-dashed),
PPO's seeds measured here (dotted), the thesis's curve (black, dashed, with markers) and the thesis's figure
(a horizontal line where no curve survives). Everything comes from committed files, so the figure can be
drawn again when a run folder is gone.

Usage: ``python research/thesis_protocol_curves.py [--card docs/results/thesis-protocol] [--out FILE.png]``;
prints one JSON line (what was drawn: per game the seeds and their last test).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GAMES = ("breakout", "space_invaders", "freeway", "asterix")
TITLES = {"breakout": "Breakout", "space_invaders": "Space Invaders", "freeway": "Freeway", "asterix": "Asterix"}
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c")


def archived_curve(archives: Path, game: str, seed: int) -> list:
    """A PPO seed's curve from its archived ``result.json`` (kept out of ``summary.json`` for its size cap); []
    where there is no archive."""
    import tarfile

    path = archives / f"thesis-protocol__ppo-{game}-thesis-s{seed}.tar.xz"
    if not path.exists():
        return []
    with tarfile.open(path, "r:xz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/result.json"))
        return json.load(tar.extractfile(member)).get("curve", [])


def panel_data(summary: dict, thesis: dict, game: str, archives: Path) -> dict:
    """What one game's panel draws: ``moozi`` and ``ppo`` seeds (``seed``, ``curve``, ``status``, ``final``) and
    the thesis's ``curve`` and ``figure``."""
    entry = summary.get(game, {})

    def seeds(items, ppo=False):
        return [{"seed": s["seed"], "status": s.get("status", ""), "final": s.get("final_mean"),
                 "curve": s.get("curve") or (archived_curve(archives, game, s["seed"]) if ppo else [])} for s in items]

    return {"moozi": seeds(entry.get("seeds", [])),
            "ppo": seeds(summary.get("ppo", {}).get(game, {}).get("seeds", []), ppo=True),
            "thesis_curve": thesis.get(game, {}).get("curve", []), "thesis_figure": entry.get("thesis"),
            "thesis_label": thesis.get(game, {}).get("label", "thesis")}


def draw(card: Path, out: Path) -> dict:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    summary = json.loads((card / "summary.json").read_text())
    thesis = json.loads((card / "thesis-curves.json").read_text())
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.2))
    drawn = {}
    try:
        for ax, game in zip(axes.flat, GAMES):
            data = panel_data(summary, thesis, game, ROOT / "results-data")
            for s in data["moozi"]:
                if not s["curve"]:
                    continue
                xs, ys = zip(*s["curve"])
                lost = s["status"].startswith("lost")
                final = "" if s["final"] is None else f", final {s['final']:.1f}"
                ax.plot([x / 1e6 for x in xs], ys, lw=0.8 if lost else 1.6, ls="--" if lost else "-",
                        color="#999999" if lost else COLOURS[s["seed"] % 3],
                        label=f"moozi seed {s['seed']}" + (" (lost run)" if lost else final))
            for s in data["ppo"]:
                if s["curve"]:
                    xs, ys = zip(*s["curve"])
                    ax.plot([x / 1e6 for x in xs], ys, lw=1.0, ls=":", color=COLOURS[s["seed"] % 3],
                            label=f"PPO here, seed {s['seed']}")
            if data["thesis_curve"]:
                xs, ys = zip(*data["thesis_curve"])
                ax.plot([x / 1e6 for x in xs], ys, lw=1.4, ls="--", marker="o", ms=2.5, color="black",
                        label=data["thesis_label"])
            elif data["thesis_figure"] is not None:
                ax.axhline(data["thesis_figure"], lw=1.2, ls="--", color="black", label=data["thesis_label"])
            ax.set_title(TITLES[game], fontsize=10)
            ax.set_xlabel("env frames (millions)", fontsize=8)
            ax.set_ylabel("test return (up to 7200 moves)", fontsize=8)
            ax.set_xlim(0, 10.2)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6, loc="upper left", frameon=False)
            drawn[game] = {"moozi": [{"seed": s["seed"], "tests": len(s["curve"]), "status": s["status"][:20],
                                      "last_test": s["curve"][-1] if s["curve"] else None} for s in data["moozi"]],
                           "ppo_seeds": [s["seed"] for s in data["ppo"] if s["curve"]],
                           "thesis_points": len(data["thesis_curve"])}
        fig.suptitle("MinAtar on the thesis's protocol (original package, no sticky actions, 7200-move episodes): "
                     "tests by env frames", fontsize=10)
        fig.tight_layout()
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=72)
    finally:
        plt.close(fig)
    from PIL import Image

    with Image.open(out) as im:  # a palette of 48 colours: the card's folder has a size cap
        small = im.convert("RGB").quantize(colors=48, method=Image.Quantize.FASTOCTREE)
    small.save(out, optimize=True)
    return {"png": str(out), "games": drawn}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--card", type=Path, default=ROOT / "docs/results/thesis-protocol")
    parser.add_argument("--out", type=Path, default=None, help="default: CARD/curves.png")
    args = parser.parse_args()
    print(json.dumps(draw(args.card, args.out or args.card / "curves.png")))


if __name__ == "__main__":
    main()
