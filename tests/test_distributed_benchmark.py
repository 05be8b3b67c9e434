"""benchmarks/distributed.py: its CPU accounting (hand-computed) on made-up /proc/stat text and run files
(the /proc/stat reading and sampler are moozi.observe.machine's)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from moozi.observe.machine import cpu_times

# loaded under its own name: "distributed" alone could be another package's
_SPEC = importlib.util.spec_from_file_location(
    "moozi_bench_distributed", Path(__file__).resolve().parents[1] / "benchmarks" / "distributed.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

# user nice system idle iowait irq softirq steal guest guest_nice
STAT = "cpu  100 5 50 800 40 3 2 30 7 0\ncpu0 50 2 25 400 20 1 1 15 3 0\n"


def test_cpu_times_golden():
    # busy = 100 + 5 + 50 + 3 + 2 = 160 (guest 7 is already in user), idle 800 + iowait 40; steal 30 is neither
    assert cpu_times(STAT) == (160, 1000)
    with pytest.raises(ValueError, match="first line"):
        cpu_times("cpu0 1 2 3\n")


def test_busy_share_golden():
    samples = [(0.0, 160, 1000), (2.0, 260, 1200), (4.0, 300, 1400), (6.0, 500, 1600)]
    assert bench.busy_share(samples, 1.0, 5.0) == pytest.approx(40 / 200)  # the samples at 2 s and 4 s
    assert bench.busy_share(samples, 0.0, 6.0) == pytest.approx(340 / 600)
    assert bench.busy_share(samples, 1.0, 3.0) is None  # one sample inside
    assert bench.busy_share([], 0.0, 6.0) is None


def test_cpu_sampler_reads_the_file_and_tolerates_its_absence(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    with bench.cpu_sampler(every_s=60.0, path=str(stat)) as cpu:
        pass
    assert len(cpu.samples) == 2 and all(s[1:] == (160, 1000) for s in cpu.samples)  # at start and at exit
    with bench.cpu_sampler(every_s=60.0, path=str(tmp_path / "missing")) as none:
        pass
    assert none.samples == []


def test_rates_cpu_columns_golden(tmp_path, monkeypatch):
    (tmp_path / "config.yaml").write_text("schedule: {batch_size: 4, samples_per_env_step: 1.0}\n")
    t0 = 1000.0
    rows = [{"wall_time": t0 + 50, "env_steps": 200, "updates": 50, "perf/env_steps_per_s": 1.0},
            {"wall_time": t0 + 100, "env_steps": 1000, "updates": 250, "perf/env_steps_per_s": 1.0},
            {"wall_time": t0 + 160, "env_steps": 4000, "updates": 1000, "perf/env_steps_per_s": 1.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cpu = [(t0 + 50, 0, 0), (t0 + 100, 1000, 4000), (t0 + 160, 10000, 16000)]
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 2)
    r = bench._rates(tmp_path, t0, warmup=90.0, cpu=cpu)
    # measured from the row at 100 s to the one at 160 s: 3,000 env steps in 60 s
    assert r["env_steps_per_s"] == pytest.approx(50.0)
    assert r["cpu_busy_share"] == pytest.approx(9000 / 12000)
    # 0.75 x 2 cores x 60 s = 90 core-seconds for 3,000 env steps
    assert r["cpu_core_s_per_1k_env_steps"] == pytest.approx(30.0)
    assert bench._rates(tmp_path, t0, warmup=90.0)["cpu_busy_share"] is None


def test_cpu_split_golden():
    sync = {"cpu_busy_share": 0.8, "cpu_core_s_per_1k_env_steps": 2.0}
    asyn = {"cpu_busy_share": 0.96, "cpu_core_s_per_1k_env_steps": 1.6}
    r = bench._cpu_split(sync, asyn)
    # env steps/s go as busy share / CPU per env step: 0.4 -> 0.6, 1.5x = 1.2 (busier) x 1.25 (cheaper)
    assert r["busy_gain"] == pytest.approx(1.2) and r["cpu_per_env_step_gain"] == pytest.approx(1.25)
    assert r["async_ceiling_at_sync_cpu_cost"] == pytest.approx(1.25)
    assert bench._cpu_split({"cpu_busy_share": None}, asyn)["note"] == "no /proc/stat samples"


def test_markdown_table_golden():
    # the seed-1 breakout pair of docs/results/distributed/cpu-split, rounded as the table rounds
    rows = [{"mode": "machine"},
            {"mode": "throughput", "variant": "ray-sync", "env_steps_per_s": 518.0868, "updates_per_s": 4.0476,
             "cpu_busy_share": 0.8995, "cpu_core_s_per_1k_env_steps": 3.4725, "ratio_window60_abs_error_max": 0.0,
             "segment_lag_max": 0.0},
            {"mode": "throughput", "variant": "ray-async", "env_steps_per_s": 1548.3481, "updates_per_s": 4.3633,
             "cpu_busy_share": None, "cpu_core_s_per_1k_env_steps": None, "ratio_window60_abs_error_max": 0.046875,
             "segment_lag_max": None}]
    assert bench.markdown_table(rows).splitlines()[2:] == [
        "| ray-sync | 518.1 | 4.05 | 90.0% | 3.47 | 0.0% | 0 |",
        "| ray-async | 1,548.3 | 4.36 | — | — | 4.7% | — |"]
    acting = bench.markdown_table([{"mode": "acting", "workers": 2, "env_steps_per_s": 8452.0}])
    assert acting.splitlines() == ["| training workers | env steps/s |", "| --- | --- |", "| 2 | 8,452.0 |"]
    assert bench.markdown_table([{"mode": "memory"}]) == ""


def test_memory_mode_prints_a_note_for_markdown(tmp_path, capsys):
    rows = [{"wall_time": 1.0, "wall_s": 60.0 * m, "mem/components_rss_mb": 100.0 + m} for m in range(0, 42)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert bench.main(["memory", "--run", str(tmp_path), "--warmup-min", "10", "--span-min", "30", "--markdown"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[0])["rss_growth"] == pytest.approx(140.0 / 110.0 - 1.0)
    assert out[-1] == "(no table for memory)"
