"""A trace of one epoch of a run (``output.profile_epoch``, ``moozi train --profile``) and a picture of it.

On the local backend the JAX profiler records the epoch in this process, where every component runs: Python's
calls (the schedule's phases ``_act``, ``_learn``, ``_reanalyze``, ``test``), XLA's programs and their threads.
It writes ``RUN/profile/plugins/profile/<time>/perfetto_trace.json.gz`` (open it at ui.perfetto.dev or in
chrome://tracing) beside the profiler's own files (TensorBoard's profile plugin reads those). On Ray the
components are other processes: the epoch's tasks per worker come from Ray's timeline, written as
``RUN/profile/ray_timeline.json`` (the same viewers). Either way ``RUN/profile/timeline.png`` draws the trace:
the schedule's phases, then one lane per thread that did work, its outermost spans as boxes, the longest named.
"""

from __future__ import annotations

import gzip
import json
import logging
import time
from pathlib import Path

log = logging.getLogger("moozi")


class EpochProfile:
    """Traces one steady epoch of a run into ``run_dir/profile``: the ``nth`` (>= 1; 0: off) after the first epoch
    that learned (in which the learning step compiled; acting compiles in the run's first epoch).

    ``after_epoch(done, updates)`` is called after every epoch with the epochs done and the updates so far.
    ``backend``: one with ``timeline(path)`` (Ray) writes its timeline; with none, the JAX profiler traces this
    process."""

    def __init__(self, run_dir, nth: int, backend=None):
        self.dir, self.nth = Path(run_dir) / "profile", int(nth)
        self.timeline = getattr(backend, "timeline", None)
        self._on, self._learned_at = False, None
        self.epoch: int | None = None  # the epoch traced (the run's count)
        self.written: Path | None = None

    def after_epoch(self, done: int, updates: int) -> None:
        if not self.nth:
            return
        if self._learned_at is None and updates > 0:
            self._learned_at = done
            self.epoch = done + self.nth
        if not self._on and self.epoch is not None and done == self.epoch - 1 and self.written is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            if self.timeline is None:
                import jax

                jax.profiler.start_trace(str(self.dir), create_perfetto_trace=True)
            self._since_us = time.time() * 1e6  # Ray's timeline holds every task so far: the epoch's are kept
            self._on = True
        elif self._on and done >= self.epoch:
            self.stop()

    def stop(self) -> None:
        """End the trace (if one is under way), write it and its picture, and say where they are."""
        if not self._on:
            return
        self._on = False
        if self.timeline is None:
            import jax

            jax.profiler.stop_trace()
            found = sorted(self.dir.glob("plugins/profile/*/perfetto_trace.json.gz"))
            self.written = found[-1] if found else None
        else:
            self.written = self.dir / "ray_timeline.json"
            self.timeline(str(self.written))
            events = json.loads(self.written.read_text())
            names = _component_names(self.dir.parent)
            kept = [dict(e, tid=names.get(e.get("tid"), e.get("tid"))) for e in events
                    if e.get("ph") == "M" or float(e.get("ts", 0.0)) >= self._since_us]
            self.written.write_text(json.dumps(kept))
        if self.written is None:
            log.warning("the profiler wrote no trace in %s", self.dir)
            return
        picture = self.dir / "timeline.png"
        try:
            draw_timeline(read_trace(self.written), picture, f"epoch {self.epoch}")
        except ImportError:
            picture = "nothing (the picture needs matplotlib: pip install 'moozi[viz]')"
        log.info("profile of epoch %d: %s (open it at ui.perfetto.dev), drawn in %s", self.epoch, self.written,
                 picture)


def _component_names(run_dir) -> dict[str, str]:
    """Ray's lane ids (``worker:ID``) -> the run's component names (``workers.json``), e.g. ``learner``."""
    try:
        placed = json.loads((Path(run_dir) / "workers.json").read_text())
    except (OSError, ValueError):
        return {}
    return {f"worker:{v['ray_worker']}": f"{name} (pid {v.get('pid')})" for name, v in placed.items()
            if isinstance(v, dict) and v.get("ray_worker")}


def read_trace(path) -> list[dict]:
    """The complete events (``ph == "X"``) of a Chrome-trace file (JSON, gzipped or not), with thread names
    attached as ``lane`` (``process / thread``)."""
    path = Path(path)
    raw = gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()
    data = json.loads(raw)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names: dict = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            names[(e["pid"], e.get("tid") if e["name"] == "thread_name" else None)] = e["args"]["name"]
    out = []
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            pid, tid = e.get("pid"), e.get("tid")
            lane = f"{names.get((pid, None), pid)} / {names.get((pid, tid), tid)}"
            out.append({"name": str(e.get("name", "")), "ts": float(e["ts"]), "dur": float(e["dur"]), "lane": lane})
    return out


PHASES = ("_act", "_learn", "_reanalyze", "test", "publish")
"""The schedule's phases (methods of SyncSchedule and RunContext), drawn as a lane of their own."""


def _label(name: str) -> str:
    """A short label: a Python call's function name (``$file.py:12 name``), else the name cut to 30 characters."""
    return name.rsplit(" ", 1)[-1] if name.startswith("$") else name[:30]


def outermost(events: list[dict]) -> list[dict]:
    """Per lane, the spans not inside another span of that lane (sorted by start)."""
    out, end = [], {}
    for e in sorted(events, key=lambda e: (e["lane"], e["ts"], -e["dur"])):
        if e["ts"] >= end.get(e["lane"], float("-inf")):
            out.append(e)
            end[e["lane"]] = e["ts"] + e["dur"]
    return out


def lanes_of(events: list[dict], max_lanes: int = 16) -> tuple[list[str], list[dict]]:
    """What the picture draws: a ``phases`` lane (the schedule's phases, where Python's calls were traced) and the
    ``max_lanes`` busiest lanes' outermost spans, inside the epoch's own span when there is one."""
    epoch = [e for e in events if e["name"].startswith("$") and _label(e["name"]) == "epoch"]
    if epoch:
        lo, hi = epoch[0]["ts"], epoch[0]["ts"] + epoch[0]["dur"]
        events = [e for e in events if e["ts"] >= lo and e["ts"] + e["dur"] <= hi]
    phases = [dict(e, lane="phases") for e in events if e["name"].startswith("$") and _label(e["name"]) in PHASES]
    top = outermost([e for e in events if not (e["name"].startswith("$") and epoch)] + phases)
    busy: dict[str, float] = {}
    for e in top:
        busy[e["lane"]] = busy.get(e["lane"], 0.0) + e["dur"]
    lanes = (["phases"] if phases else []) + sorted((k for k in busy if k != "phases"), key=lambda k: -busy[k])
    return lanes[:max_lanes], [e for e in top if e["lane"] in lanes[:max_lanes]]


def draw_timeline(events: list[dict], path, title: str, max_lanes: int = 16) -> None:
    """A PNG of the trace (:func:`lanes_of`), the longest spans labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lanes, top = lanes_of(events, max_lanes)
    t0 = min((e["ts"] for e in top), default=0.0)
    span_ms = max((max((x["ts"] + x["dur"] for x in top), default=t0) - t0) / 1e3, 1e-9)
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(lanes) + 1.5))
    colors = plt.get_cmap("tab20")
    kinds: dict[str, int] = {}
    boxes: dict[tuple[int, str], list] = {}  # one broken_barh per lane and kind: a trace holds 10^5 spans
    for e in top:
        y, key = lanes.index(e["lane"]), _label(e["name"])
        kinds.setdefault(key, len(kinds))
        boxes.setdefault((y, key), []).append(((e["ts"] - t0) / 1e3, e["dur"] / 1e3))
        if e["dur"] / 1e3 > 0.06 * span_ms:
            ax.text((e["ts"] - t0 + e["dur"] / 2) / 1e3, y, key, ha="center", va="center", fontsize=7, clip_on=True)
    for (y, key), spans in boxes.items():
        ax.broken_barh(spans, (y - 0.4, 0.8), color=colors(kinds[key] % 20), linewidth=0)
    names = [lane.split(" / ")[-1].split("/")[0][:40] for lane in lanes]
    ax.set_yticks(range(len(lanes)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title(f"{title}: the schedule's phases and the {len(lanes) - ('phases' in lanes)} busiest threads")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
