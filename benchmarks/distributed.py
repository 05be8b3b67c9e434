"""Distributed benchmarks: backends and schedules compared in one run, on this machine.

    python benchmarks/distributed.py throughput --preset breakout --minutes 4 --warmup 90
        local sync, Ray sync and Ray async runs of the same preset and seed, one after the
        other (`moozi train` subprocesses); env steps/s and updates/s after warm-up, the
        achieved replay ratio, and the ratios Ray sync / local and async / sync
        (``--only local-sync local-async``: both schedules in one process).
        Each run's CPU use is sampled from /proc/stat (the whole machine, so run
        it on an idle one): the busy share of all cores and the core-seconds per
        1,000 env steps after warm-up. async / sync splits into how much more of
        the machine async keeps busy times how much less CPU it spends per env
        step, and ``1 / sync busy share`` bounds what filling sync's idle cores
        alone can give.
    python benchmarks/distributed.py acting --preset breakout --seconds 60
        acting only (no learner): W=1 versus W=2 Ray training workers, one CPU each.
    python benchmarks/distributed.py startup
        a CartPole Ray run: seconds from the command to the first update (the
        compile cache off, cold, then warm), and Ray processes left after it exits.
    python benchmarks/distributed.py memory --run RUN --warmup-min 10 --span-min 30
        a finished run's memory curve from its metrics (`mem/*`, one value per
        metrics row): resident memory of the components and of Ray's daemons at
        the end of warm-up and ``span`` minutes later, its growth, and the
        object store's largest resident size after warm-up; a curve per minute.

Every mode prints JSON lines; ``--markdown`` adds a table of the throughput and acting rows for docs/results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from moozi.observe.machine import STAT, Sampler, cpu_sample, machine_info
from moozi.observe.metrics import read_metrics


def _train(preset: str, run: Path, minutes: float, overrides: list[str]) -> tuple[float, int]:
    t0 = time.time()
    cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", preset, "--run-dir", str(run),
           "--minutes", str(minutes), *overrides]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return t0, out.returncode


def busy_share(samples: list[tuple[float, int, int]], t0: float, t1: float) -> float | None:
    """The busy share of all cores from the first sample at or after ``t0`` to the last at or before
    ``t1``; samples are ``(wall time, busy ticks, total ticks)``. None with fewer than two there."""
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if len(inside) < 2 or inside[-1][2] == inside[0][2]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][2] - inside[0][2])


def cpu_sampler(every_s: float = 2.0, path: str | Path = STAT) -> Sampler:
    """``(time.time(), busy, total)`` of all cores every ``every_s`` seconds, at start and at exit; no
    samples where /proc/stat is missing (not Linux)."""
    return Sampler(lambda: cpu_sample(Path(path)), every_s)


def _window_errors(rows: list[dict], run: Path, t0: float, warmup: float, window: float = 60.0) -> list[float]:
    """|achieved / configured - 1| of the replay ratio over every 60 s window (row to row) after warm-up."""
    import yaml

    cfg = yaml.safe_load((run / "config.yaml").read_text())["schedule"]
    batch, ratio = cfg["batch_size"], cfg["samples_per_env_step"]
    rows = [r for r in rows if r["wall_time"] - t0 >= warmup and r.get("updates", 0) > 0]
    errors = []
    for i, a in enumerate(rows):
        b = next((r for r in rows[i:] if r["wall_time"] - a["wall_time"] >= window), None)
        if b is None:
            break
        steps = b["env_steps"] - a["env_steps"]
        if steps > 0:
            errors.append(abs((b["updates"] - a["updates"]) * batch / steps / ratio - 1.0))
    return errors


def _rates(run: Path, t0: float, warmup: float, cpu: list | None = None) -> dict:
    rows = [r for r in read_metrics(run) if "perf/env_steps_per_s" in r]
    windows = _window_errors(rows, run, t0, warmup)
    lag = [r["lag/segment_max"] for r in rows if "lag/segment_max" in r]
    first = next((r for r in rows if r["wall_time"] - t0 >= warmup), rows[0])
    last = rows[-1]
    dt = max(last["wall_time"] - first["wall_time"], 1e-9)
    ratio = [r["ratio/achieved"] for r in rows if "ratio/achieved" in r]
    errors = [abs(r["ratio/error"]) for r in rows if "ratio/error" in r and r["wall_time"] - t0 >= warmup]
    tests = [r["test/return_mean"] for r in rows if "test/return_mean" in r]
    busy = busy_share(cpu or [], first["wall_time"], last["wall_time"])
    steps = last["env_steps"] - first["env_steps"]
    cores = os.cpu_count() or 1
    return {"cpu_busy_share": busy,
            "cpu_core_s_per_1k_env_steps": busy * cores * dt / steps * 1000.0 if busy is not None and steps else None,
            "env_steps_per_s": steps / dt,
            "updates_per_s": (last["updates"] - first["updates"]) / dt,
            "measured_s": dt, "env_steps": last["env_steps"], "updates": last["updates"],
            "ratio_achieved": ratio[-1] if ratio else None,
            "ratio_abs_error_max_after_warmup": max(errors) if errors else None,
            "last_test": tests[-1] if tests else None,
            "ratio_window60_abs_error_max": max(windows) if windows else None,
            "ratio_windows": len(windows),
            "segment_lag_max": max(lag) if lag else None,
            "object_store_resident_mb_max": max((r.get("mem/object_store_resident_mb", 0.0) for r in rows), default=0.0)}


def throughput(args) -> list[dict]:
    base = Path(tempfile.mkdtemp(prefix="moozi-dist-"))
    common = [f"schedule.seed={args.seed}", "output.log_every_epochs=5", *args.overrides]
    ray_res = [f"distributed.learner_cpus={args.learner_cpus}", f"distributed.cpus_per_worker={args.worker_cpus}"]
    variants = [("local-sync", ["distributed.backend=local", "schedule.kind=sync"]),
                ("local-async", ["distributed.backend=local", "schedule.kind=async", *args.async_overrides]),
                ("ray-sync", ["distributed.backend=ray", "schedule.kind=sync", *ray_res]),
                ("ray-async", ["distributed.backend=ray", "schedule.kind=async", *ray_res, *args.async_overrides]),
                ("ray-async-slow-learner", ["distributed.backend=ray", "schedule.kind=async", *ray_res,
                                            *args.async_overrides, "distributed.slowdown_learner=3"]),
                ("ray-async-slow-workers", ["distributed.backend=ray", "schedule.kind=async", *ray_res,
                                            *args.async_overrides, "distributed.slowdown_workers=3"])]
    if not args.only:
        variants = [v for v in variants if v[0] in ("local-sync", "ray-sync", "ray-async")]
    out = []
    for name, extra in variants:
        if args.only and name not in args.only:
            continue
        run = base / name
        with cpu_sampler() as cpu:
            t0, _ = _train(args.preset, run, args.minutes, common + extra)
        r = {"mode": "throughput", "variant": name, "preset": args.preset,
             **_rates(run, t0, args.warmup, cpu.samples),
             "run_dir": str(run)}
        print(json.dumps(r), flush=True)
        out.append(r)
    by = {r["variant"]: r for r in out}
    if "local-sync" in by and "ray-sync" in by:
        summary = {"mode": "ratios",
                   "ray_sync_over_local_env_steps": by["ray-sync"]["env_steps_per_s"] / by["local-sync"]["env_steps_per_s"],
                   "ray_sync_over_local_updates": by["ray-sync"]["updates_per_s"] / by["local-sync"]["updates_per_s"]}
        if "ray-async" in by:
            summary["async_over_sync_env_steps"] = by["ray-async"]["env_steps_per_s"] / by["ray-sync"]["env_steps_per_s"]
        print(json.dumps(summary), flush=True)
        out.append(summary)
    for sync, asyn in (("ray-sync", "ray-async"), ("local-sync", "local-async")):
        if sync in by and asyn in by:
            out.append({**_cpu_split(by[sync], by[asyn]), "sync": sync, "async": asyn})
            print(json.dumps(out[-1]), flush=True)
    if "local-sync" in by and "local-async" in by:
        summary = {"mode": "ratios", "local_async_over_local_sync_env_steps":
                   by["local-async"]["env_steps_per_s"] / by["local-sync"]["env_steps_per_s"],
                   "local_async_over_local_sync_updates":
                   by["local-async"]["updates_per_s"] / by["local-sync"]["updates_per_s"]}
        print(json.dumps(summary), flush=True)
        out.append(summary)
    return out


def _cpu_split(sync: dict, asyn: dict) -> dict:
    """async / sync env steps/s = (busy share async / sync) x (CPU per env step sync / async), and the
    most that keeping sync's idle cores busy at sync's CPU per env step could give (1 / its busy share)."""
    if sync["cpu_busy_share"] is None or asyn["cpu_busy_share"] is None:
        return {"mode": "cpu_split", "note": "no /proc/stat samples"}
    return {"mode": "cpu_split", "sync_busy_share": sync["cpu_busy_share"], "async_busy_share": asyn["cpu_busy_share"],
            "busy_gain": asyn["cpu_busy_share"] / sync["cpu_busy_share"],
            "cpu_per_env_step_gain": sync["cpu_core_s_per_1k_env_steps"] / asyn["cpu_core_s_per_1k_env_steps"],
            "async_ceiling_at_sync_cpu_cost": 1.0 / sync["cpu_busy_share"]}


def acting(args) -> list[dict]:
    """W Ray training workers acting in parallel (no learner, fixed initial params)."""
    from moozi.config import apply_overrides, config_from_dict, to_dict
    from moozi.driver.backend import Resources
    from moozi.driver.distributed import RayBackend
    from moozi.hosts.acting import ActingHost
    from moozi.hosts.learner import LearnerHost
    from moozi.presets import load_preset

    config = config_from_dict(apply_overrides(load_preset(args.preset), list(args.overrides)))
    data = to_dict(config)
    out = []
    for workers in (1, 2):
        run = Path(tempfile.mkdtemp(prefix="moozi-act-"))
        backend = RayBackend(config.distributed, run)
        try:
            names = [f"actor_{w}" for w in range(workers)]
            backend.reserve({"learner": Resources(1.0), **{n: Resources(1.0) for n in names}})
            learner = backend.spawn("learner", LearnerHost, data, str(run), None, resources=Resources(1.0))
            actors = [backend.spawn(n, ActingHost, data, "train", w, 0, None, resources=Resources(1.0))
                      for w, n in enumerate(names)]
            backend.ready([learner, *actors])
            params = backend.call(learner, "params")
            for a in actors:  # compile
                backend.get(backend.call(a, "run", params))
            steps, t = 0, time.perf_counter()
            inflight = {backend.call(a, "run", params): a for a in actors}
            while time.perf_counter() - t < args.seconds:
                done, _ = backend.wait(list(inflight), num_returns=1)
                for fut in done:
                    a = inflight.pop(fut)
                    steps += backend.get(fut)[1]["acting/env_steps"]
                    inflight[backend.call(a, "run", params)] = a
            dt = time.perf_counter() - t
            for fut in list(inflight):
                backend.get(fut)
            r = {"mode": "acting", "preset": args.preset, "workers": workers, "env_steps_per_s": steps / dt}
            print(json.dumps(r), flush=True)
            out.append(r)
        finally:
            backend.shutdown()
    summary = {"mode": "acting_ratio", "w2_over_w1": out[1]["env_steps_per_s"] / out[0]["env_steps_per_s"]}
    print(json.dumps(summary), flush=True)
    return out + [summary]


def startup(args) -> list[dict]:
    """Seconds from the command to the first update: with the compile cache off, then cold (a new, empty
    cache folder) and warm (the runs after it, as every later run of a user)."""
    cache = Path(tempfile.mkdtemp(prefix="moozi-start-xla-"))
    results = []
    for label in ["off", "cold"] + ["warm"] * max(args.repeats - 1, 1):
        os.environ["MOOZI_COMPILE_CACHE"] = "off" if label == "off" else str(cache)
        os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
        run = Path(tempfile.mkdtemp(prefix="moozi-start-")) / "run"
        t0, _ = _train("cartpole", run, 0.5, ["--backend", "ray", "output.log_every_epochs=1",
                                              "schedule.min_replay_steps=256"])
        rows = read_metrics(run)
        first = next(r for r in rows if r.get("updates", 0) > 0)
        time.sleep(1.0)
        left = subprocess.run(["pgrep", "-f", str(run)], capture_output=True, text=True).stdout.split()
        r = {"mode": "startup", "compile_cache": label, "seconds_to_first_update": first["wall_time"] - t0,
             "ray_processes_left": len(left)}
        print(json.dumps(r), flush=True)
        results.append(r)
    return results


def memory(args) -> list[dict]:
    """Resident memory over a run (from ``mem/*`` in its metrics): growth over ``span`` minutes after warm-up."""
    rows = [r for r in read_metrics(args.run) if "mem/components_rss_mb" in r]
    if not rows:
        raise SystemExit(f"{args.run}: no mem/* metrics (memory is logged from moozi 0.2 on)")

    def total(r):
        return r["mem/components_rss_mb"] + r.get("mem/ray_daemons_rss_mb", 0.0)

    def at(minute):  # the last row at or before this minute of the run
        return [r for r in rows if r["wall_s"] <= 60.0 * minute][-1]

    start = at(args.warmup_min)
    end = at(args.warmup_min + args.span_min)
    if end["wall_s"] - start["wall_s"] < 60.0 * args.span_min - 120.0:
        raise SystemExit(f"{args.run}: the run is shorter than warm-up + span ({rows[-1]['wall_s'] / 60:.1f} min)")
    after = [r for r in rows if r["wall_s"] >= start["wall_s"]]
    curve = []
    for minute in range(int(rows[-1]["wall_s"] // 60) + 1):
        r = at(minute) if rows[0]["wall_s"] <= 60.0 * minute else None
        if r is not None:
            curve.append({"minute": minute, "rss_mb": round(total(r), 1),
                          "components_mb": round(r["mem/components_rss_mb"], 1),
                          "ray_daemons_mb": round(r.get("mem/ray_daemons_rss_mb", 0.0), 1),
                          "object_store_mb": round(r.get("mem/object_store_resident_mb", 0.0), 2),
                          "replay_fill": round(r.get("replay/fill_fraction", 0.0), 3)})
    out = {"mode": "memory", "run": str(args.run), "warmup_min": args.warmup_min, "span_min": args.span_min,
           "rss_mb_start": total(start), "rss_mb_end": total(end), "rss_growth": total(end) / total(start) - 1.0,
           "rss_mb_max_after_warmup": max(total(r) for r in after),
           "object_store_mb_max_after_warmup": max(r.get("mem/object_store_resident_mb", 0.0) for r in after),
           "replay_fill_at_start": start.get("replay/fill_fraction"), "curve": curve}
    print(json.dumps(out), flush=True)
    return [out]


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100.0 * v:.1f}%"


def markdown_table(results: list[dict]) -> str:
    """The throughput rows (and acting rows) of ``results`` as a markdown table; "" when there are none."""
    lines = []
    runs = [r for r in results if r.get("mode") == "throughput"]
    if runs:
        lines += ["| variant | env steps/s | updates/s | CPU busy share | core-s per 1k env steps "
                  "| worst 60 s ratio error | segment lag max |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in runs:
            cost, lag = r.get("cpu_core_s_per_1k_env_steps"), r.get("segment_lag_max")
            cost = "—" if cost is None else f"{cost:.2f}"
            lag = "—" if lag is None else f"{lag:g}"
            lines.append(f"| {r['variant']} | {r['env_steps_per_s']:,.1f} | {r['updates_per_s']:.2f} "
                         f"| {_pct(r.get('cpu_busy_share'))} | {cost} "
                         f"| {_pct(r.get('ratio_window60_abs_error_max'))} | {lag} |")
    acting_rows = [r for r in results if r.get("mode") == "acting"]
    if acting_rows:
        lines += [""] * bool(lines) + ["| training workers | env steps/s |", "| --- | --- |"]
        lines += [f"| {r['workers']} | {r['env_steps_per_s']:,.1f} |" for r in acting_rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["throughput", "acting", "startup", "memory"])
    p.add_argument("--run", type=Path, default=None, help="memory: the run directory to read")
    p.add_argument("--warmup-min", type=float, default=10.0, help="memory: minutes left out at the start")
    p.add_argument("--span-min", type=float, default=30.0, help="memory: minutes over which growth is measured")
    p.add_argument("--preset", default="breakout")
    p.add_argument("--minutes", type=float, default=4.0)
    p.add_argument("--warmup", type=float, default=90.0, help="seconds of each run left out (start-up, compiles)")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--repeats", type=int, default=3, help="startup: runs with the compile cache on (the first cold)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--learner-cpus", type=float, default=1.0)
    p.add_argument("--worker-cpus", type=float, default=1.0)
    p.add_argument("--only", nargs="*", default=None,
                   help="variants to run: local-sync local-async ray-sync ray-async ray-async-slow-learner "
                        "ray-async-slow-workers (default: local-sync ray-sync ray-async)")
    p.add_argument("--override", dest="overrides", action="append", default=[])
    p.add_argument("--async-override", dest="async_overrides", action="append", default=[])
    p.add_argument("--out", type=Path, default=None, help="also write the JSON lines here")
    p.add_argument("--markdown", action="store_true", help="also print the throughput / acting rows as a table")
    args = p.parse_args(argv)
    results = {"throughput": throughput, "acting": acting, "startup": startup, "memory": memory}[args.mode](args)
    if args.mode != "memory":  # rates are this machine's (memory reads a run, whose machines.jsonl says)
        results.insert(0, {"mode": "machine", **machine_info()})
        print(json.dumps(results[0]), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    if args.markdown:
        print(markdown_table(results) or f"(no table for {args.mode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
