"""``moozi report``: one static HTML page for one run or several (their curves overlaid).

The page needs no server and no network: every chart is a PNG drawn with
matplotlib and embedded as a data URI, and so are the run's newest GIFs and
search-tree views (``RUN/gifs/*.gif``, ``RUN/trees/*.svg``), so the single
file can be mailed or attached to an issue. Sections: a summary table per run
(game, env steps, updates, wall clock, throughput, last and best test), the
learning curves against env steps and against wall clock, losses by term,
learning rate and gradient norm, throughput, replay ratio and policy lag where
the run logged them, the pictures, and each run's config and exact commands.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path

import yaml

from moozi.observe.metrics import read_metrics, training_rows

# Chart panels: (title, metric keys; a key ending in "/*" takes every key with that prefix).
PANELS = [
    ("Test return", ["test/return_mean"]),
    ("Mistakes against perfect play (grade)", ["grade/begin", "grade/middle", "grade/end-easy", "grade/all"]),
    ("Score against the anchors (tournament)", ["rating/score_vs/*"]),
    ("Rating (tournament)", ["rating/latest"]),
    ("Gate score (newest against best)", ["gate/score"]),
    ("Training episode return", ["train/episode_return"]),
    ("Loss by term", ["loss/*"]),
    ("Learning rate", ["train/learning_rate"]),
    ("Gradient norm", ["train/grad_norm"]),
    ("Throughput (env steps/s)", ["perf/env_steps_per_s"]),
    ("Updates/s", ["perf/updates_per_s"]),
    ("Search: root value and entropy", ["acting/root_value", "acting/policy_entropy"]),
    ("Replay ratio (samples per env step)", ["ratio/achieved", "ratio/window", "ratio/per_env_step"]),
    ("Policy lag at sampling (versions)", ["lag/sampled_mean", "lag/sampled_p95"]),
    ("Replay size (steps)", ["replay/size_steps"]),
    ("Reanalyze |dv*|", ["reanalyze/abs_dv"]),
]
MAX_PICTURES = 4


def _expand(keys: list[str], rows: list[dict]) -> list[str]:
    present = sorted({k for r in rows for k in r})
    out = []
    for key in keys:
        if key.endswith("/*"):
            out += [k for k in present if k.startswith(key[:-1]) and k != "loss/total"]
        elif key in present:
            out.append(key)
    return out


def _series(rows: list[dict], key: str, x: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in rows:
        v = r.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v) and x in r:
            xs.append(float(r[x]) / (60.0 if x == "wall_s" else 1.0))
            ys.append(float(v))
    return xs, ys


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def chart(runs: dict[str, list[dict]], title: str, keys: list[str], x: str) -> str | None:
    """One panel as a PNG data URI: ``keys`` of every run against ``x`` (env_steps or wall_s); None if empty."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    lines = [(label, key, *_series(rows, key, x)) for label, rows in runs.items() for key in _expand(keys, rows)]
    lines = [line for line in lines if line[2]]
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    try:
        for label, key, xs, ys in lines:
            name = key if len(runs) == 1 else f"{label}: {key}"
            ax.plot(xs, ys, lw=1.2, label=name, marker="." if len(xs) < 30 else None)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("env steps" if x == "env_steps" else "wall clock (minutes)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if len(lines) > 1:
            ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)  # beside the curves
        if title.startswith("Loss") and all(min(ys) > 0 for _, _, _, ys in lines):
            ax.set_yscale("log")
        return _png(fig)
    finally:
        plt.close(fig)


def _data_uri(path: Path) -> str:
    kind = {"gif": "image/gif", "svg": "image/svg+xml", "png": "image/png"}[path.suffix[1:].lower()]
    return f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode()


def _pictures(run: Path) -> list[tuple[str, Path]]:
    found = []
    for folder, pattern in (("gifs", "*.gif"), ("trees", "*.svg"), ("embed", "*.png")):
        files = sorted((run / folder).glob(pattern), key=lambda p: p.stat().st_mtime)
        found += [(folder, p) for p in files[-MAX_PICTURES:]]
    return found


def _summary(run: Path, rows: list[dict]) -> dict:
    config = yaml.safe_load((run / "config.yaml").read_text()) if (run / "config.yaml").exists() else {}
    trained = training_rows(rows)
    last = trained[-1] if trained else {}
    tests = [r["test/return_mean"] for r in rows if "test/return_mean" in r]
    wall = float(last.get("wall_s", 0.0))
    return {
        "game": (config.get("env") or {}).get("name", "?"),
        "env steps": f"{int(last.get('env_steps', 0)):,}",
        "updates": f"{int(last.get('updates', 0)):,}",
        "wall clock": f"{wall / 60:.1f} min",
        "env steps/s": f"{last.get('env_steps', 0) / wall:,.0f}" if wall > 0 else "-",
        "tests": str(len(tests)),
        "last test": f"{tests[-1]:.4g}" if tests else "-",
        "best test": f"{max(tests):.4g}" if tests else "-",
    }


def _label(run: Path, taken: set[str]) -> str:
    label = run.name or str(run)
    while label in taken:
        label = f"{run.parent.name}/{label}"
    taken.add(label)
    return label


def build_report(run_dirs: list[Path | str]) -> str:
    """The HTML page for ``run_dirs`` (every asset embedded)."""
    runs: dict[str, list[dict]] = {}
    paths: dict[str, Path] = {}
    taken: set[str] = set()
    for d in run_dirs:
        d = Path(d)
        if not (d / "config.yaml").exists():
            raise FileNotFoundError(f"{d} is not a moozi run directory: {d / 'config.yaml'} is missing")
        label = _label(d, taken)
        runs[label], paths[label] = read_metrics(d), d
    esc = html.escape
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
             f"<title>moozi report: {esc(', '.join(runs))}</title>",
             "<style>body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px;color:#222}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
             "th:first-child,td:first-child{text-align:left}.grid{display:flex;flex-wrap:wrap;gap:8px}"
             ".grid img{border:1px solid #ddd;max-width:100%;height:auto}pre{background:#f6f6f6;padding:8px;font-size:12px;overflow:auto}"
             "figure{margin:0}figcaption{font-size:12px;color:#555}</style></head><body>",
             f"<h1>moozi report</h1><p>{len(runs)} run(s): {esc(', '.join(str(p) for p in paths.values()))}</p>"]
    summaries = {label: _summary(paths[label], rows) for label, rows in runs.items()}
    cols = list(next(iter(summaries.values())))
    parts.append("<h2>Summary</h2><table><tr><th>run</th>" + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr>")
    for label, s in summaries.items():
        parts.append(f"<tr><td>{esc(label)}</td>" + "".join(f"<td>{esc(s[c])}</td>" for c in cols) + "</tr>")
    parts.append("</table>")
    for x, heading in (("env_steps", "Against env steps"), ("wall_s", "Against wall clock")):
        images = [(title, chart(runs, title, keys, x)) for title, keys in PANELS]
        images = [(t, uri) for t, uri in images if uri]
        parts.append(f"<h2>{heading}</h2><div class='grid'>")
        parts += [f"<img alt='{esc(t)}' src='{uri}'>" for t, uri in images]
        parts.append("</div>")
    for label, run in paths.items():
        pictures = _pictures(run)
        if pictures:
            parts.append(f"<h2>Pictures: {esc(label)}</h2><div class='grid'>")
            parts += [f"<figure><img alt='{esc(p.name)}' src='{_data_uri(p)}'><figcaption>{esc(folder)}/"
                      f"{esc(p.name)}</figcaption></figure>" for folder, p in pictures]
            parts.append("</div>")
    for label, run in paths.items():
        parts.append(f"<h2>Run {esc(label)}</h2>")
        commands = run / "commands.txt"
        if commands.exists():
            parts.append(f"<h3>Commands</h3><pre>{esc(commands.read_text())}</pre>")
        machines = _machines(run)
        if machines:
            parts.append(f"<h3>Machines</h3><pre>{esc(chr(10).join(machines))}</pre>")
        parts.append(f"<h3>Config</h3><pre>{esc((run / 'config.yaml').read_text())}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _machines(run: Path) -> list[str]:
    """One line per invocation of the run from ``machines.jsonl``: when, and on what (a run's minutes depend on it)."""
    from moozi.observe.machine import machine_line

    path = run / "machines.jsonl"
    if not path.exists():
        return []
    lines = []
    for text in path.read_text().splitlines():
        try:
            info = json.loads(text)
            lines.append(f"{info.get('time', '?')}  {machine_line(info)}")
        except (ValueError, KeyError, TypeError):  # a line cut short by a killed run: show it as it is
            lines.append(text)
    return lines


def write_report(run_dirs: list[Path | str], out: Path | str) -> Path:
    """Write :func:`build_report` to ``out`` (atomically); returns the path."""
    out = Path(out)
    html = build_report(run_dirs)  # before anything is written: a mistyped run leaves no folder behind
    from moozi.files import write_atomic

    out.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(out, lambda tmp: tmp.write_text(html), "the report")
