"""The prepared GPU check: one short command that any session with a lent GPU runs first (issue 89).

Two steps:

* here (the development machine, with network): ``python benchmarks/gpu_check.py wheels`` downloads into
  ``.whl/`` (git-ignored) the wheels of moozi's dependencies the GPU image lacks or holds at other versions,
  at the versions installed in ``.venv`` (pure-Python wheels; the image's own JAX with CUDA is used);
* there (no network): the device tool's ``run`` with ``carry=[".whl"]`` and the command that
  ``python benchmarks/gpu_check.py command`` prints, which installs the wheels, then runs
  ``gpu_check.py run --out $OUT``.

``run`` measures, writing ``$OUT/gpu_check.json`` after every step (a timeout keeps what was done), in the order
of :data:`ORDER` (breakout-gpu's row, the device schedule, bfloat16, the fused chunk, the acting sweep, the other
configurations):

1. the machine: GPU (``nvidia-smi -L``), JAX and its devices, the libraries' versions, CPU count;
2. ``benchmarks/device_throughput.py --json`` at acting batches 64, 1024 and 4096 (Breakout-MinAtar, the thesis
   network, PUCT 25 simulations): acting steps/s, the network-evaluation bound, learner samples/s;
3. for each of :data:`CONFIGS` (``breakout-gpu``, ``connect4-gpu``, ``thesis-minatar``, ``atari-pong``): the
   preset's own ``device_throughput.py --preset`` row (device games) and ``moozi train --preset P`` for
   ``--train-min`` minutes, reduced to ``configs[P]``: ``env_steps_per_s``, ``simulations_per_s``,
   ``updates_per_s``, ``samples_per_s``, ``replay_ratio``, ``device_busy_fraction`` (null on a CPU),
   ``peak_device_memory_bytes``, ``acting_vs_bound``, ``learner_vs_bound`` and ``projected_minutes_10m_frames``
   (:func:`figures`), beside the raw ``train`` and ``bound`` records;
4. ``device_throughput.py --preset breakout-gpu --fused`` (``fused``): acting, a device replay and learning
   fused into one compiled chunk, the candidate design of the device schedule, against its parts apart;
5. ``breakout-gpu`` trained with ``schedule.kind=device`` (``device_schedule``: the fused chunk as a training run,
   ``schedule.epochs_per_call`` 8, 1 in the smoke) for ``--train-min`` minutes, reduced as in 3, beside
   ``configs["breakout-gpu"]`` (the sync schedule);
6. ``breakout-gpu`` trained as in 3 with ``model.compute_dtype=bfloat16`` (``bf16``): what bfloat16 matrix
   products gain on the device, beside ``configs["breakout-gpu"]`` (their learning: docs/results/gpu-prep);
7. with ``--e2e-min M``: ``breakout-gpu`` for M minutes, its test returns by env frames (``e2e.curve``), to set
   beside the CPU preset's curve at the same frames (docs/results/minatar-60min).

``--cpu-smoke`` runs the same steps at tiny sizes by an env-step budget, so the script is checked on a CPU; CI
runs it for ``breakout-gpu`` (``--only breakout-gpu``), the extended tier for every step (``tests/test_gpu_check.py``).

    python benchmarks/gpu_check.py wheels && python benchmarks/gpu_check.py command
    python benchmarks/gpu_check.py run --out /tmp/gpu --cpu-smoke    # on a CPU: the script works
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WHEELS = ROOT / ".whl"
# What the GPU image (device tool, KINDS.md) lacks or may hold at other versions; jax, numpy, pyyaml, rich,
# msgpack, filelock, protobuf, absl-py, typing_extensions are there.
CARRIED = ["flax", "optax", "chex", "mctx", "gymnax", "pgx", "tensorboardX", "svgwrite", "treescope", "toolz", "gymnasium",
           "farama-notifications", "ale-py"]


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def wheels(args) -> int:
    """Download the carried packages' wheels at the versions installed here (``--no-deps``: the list is whole)."""
    WHEELS.mkdir(exist_ok=True)
    for old in WHEELS.glob("*.whl"):
        old.unlink()
    pins = [f"{n}=={_version(n)}" for n in CARRIED]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(WHEELS),
           "--python-version", args.python, "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
           *pins]  # ale-py ships manylinux_2_28 wheels only
    subprocess.run(cmd, check=True)
    size = sum(p.stat().st_size for p in WHEELS.glob("*.whl"))
    print(f"{len(list(WHEELS.glob('*.whl')))} wheels, {size / 1e6:.1f} MB in {WHEELS}: {' '.join(pins)}")
    return 0


def command(args) -> int:
    """The device tool's command line (carry ``.whl``)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    print("python3 -m pip install -q --no-index --no-deps .whl/*.whl && PYTHONPATH=src PYTHONUNBUFFERED=1 "
          f"XLA_PYTHON_CLIENT_PREALLOCATE=false python3 benchmarks/gpu_check.py run --out $OUT --commit {commit}")
    return 0


def _save(out: Path, result: dict) -> None:
    (out / "gpu_check.json").write_text(json.dumps(result, indent=1) + "\n")


def _machine() -> dict:
    import jax

    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True) if _has("nvidia-smi") else None
    return {"gpu": smi.stdout.strip() if smi is not None else None, "jax": jax.__version__,
            "devices": [str(d) for d in jax.devices()], "backend": jax.default_backend(),
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "versions": {n: _version(n) for n in CARRIED if n in ("flax", "optax", "chex", "mctx", "gymnax", "pgx")}}


def _has(program: str) -> bool:
    from shutil import which

    return which(program) is not None


CONFIGS = ("breakout-gpu", "connect4-gpu", "thesis-minatar", "atari-pong")
"""The configurations the check times (issue 89): the GPU presets, the thesis's Table 5.1, and Atari."""
SMOKE = ["env.num_envs=4", "env.num_workers=1", "env.kwargs.max_episode_steps=12", "acting.steps_per_epoch=4", "schedule.batch_size=8",
         "schedule.min_replay_steps=1", "schedule.max_env_steps=96", "testing.every=0", "output.log_every_epochs=1",
         "planner.num_simulations=2", "test_planner.num_simulations=2", "reanalyze_planner.num_simulations=2",
         "model.channels=4", "model.repr_blocks=1", "model.dyn_blocks=1", "model.head_hidden=8", "replay.capacity=2000"]
"""``--cpu-smoke``: every configuration at tiny sizes, by an env-step budget (the same code paths, on a CPU)."""
STEPS = (*CONFIGS, "fused", "device_schedule", "bf16", "throughput")
"""What ``--only`` may name: a configuration's rows, the fused chunk's, the device schedule's run, breakout-gpu's run
with bfloat16 matrix products (``model.compute_dtype``), the acting sweep (not in the smoke)."""


def _run_json(cmd: list[str]) -> tuple[dict | None, float, str]:
    """Run ``cmd``; its last stdout line as JSON (None on failure), the seconds, the last line of stderr."""
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = round(time.monotonic() - t0, 1)
    err = (done.stderr.strip().splitlines() or ["failed"])[-1]
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return None, wall, err
    return json.loads(lines[-1]), wall, err


def _throughput(batch: int | None, smoke: bool, preset: str | None = None, fused: bool = False) -> dict:
    """``device_throughput.py`` at an acting batch (the thesis network), or for a preset at its own sizes
    (``fused``: its fused chunk against its parts)."""
    cmd = [sys.executable, str(HERE / "device_throughput.py"), "--json"]
    cmd += ["--preset", preset] if preset else []
    cmd += ["--batch", str(batch)] if batch else []
    cmd += ["--fused"] if fused else []
    if smoke:
        cmd += ["--batch", "4", "--simulations", "2", "--steps", "2", "--repeats", "1", "--learner-batch", "8"]
        cmd += ["--epochs", "1", "replay.capacity=64", "schedule.min_replay_steps=8"] if fused else []
    row, wall, err = _run_json(cmd)
    return {"batch": batch, "error": err} if row is None else {"wall_s": wall, **row}


def _train(preset: str, minutes: float, overrides: list[str]) -> dict:
    """``moozi train --preset P`` for ``minutes``: its summary line and its rows' rates after the first row (start-up
    and compiling left out)."""
    from moozi.driver.ledger import simulations
    from moozi.observe.metrics import read_metrics
    from moozi.run_dir import load_run_config

    run = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "run"
    cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", preset, "--run-dir", str(run),
           "--minutes", str(minutes), *overrides]
    summary, wall, err = _run_json(cmd)
    rows = [r for r in read_metrics(run) if "perf/env_steps_per_s" in r] if run.exists() else []  # metrics rows
    out = {"wall_s": wall, "rows": len(rows), "summary": summary,
           "curve": [[r["env_steps"], r["test/return_mean"]] for r in rows if "test/return_mean" in r]}
    if summary is None:
        out["error"] = err
    if len(rows) >= 2:
        a, b, later = rows[0], rows[-1], rows[1:]
        dt = b["wall_time"] - a["wall_time"]
        learn_s = sum(r.get("time/learn_s", 0.0) for r in later)
        busy = [r["perf/device_busy_fraction"] for r in later if "perf/device_busy_fraction" in r]
        config = load_run_config(run)
        sims = [simulations({"env_steps": r["env_steps"], "reanalyzed_positions": r.get("reanalyze/positions_total", 0)},
                            config) for r in (a, b)]
        out.update(env_steps_per_s=(b["env_steps"] - a["env_steps"]) / dt if dt > 0 else None,
                   updates_per_s=(b["updates"] - a["updates"]) / dt if dt > 0 else None,
                   learn_updates_per_s=(b["updates"] - a["updates"]) / learn_s if learn_s > 0 else None,
                   simulations_per_s=(sims[1] - sims[0]) / dt if dt > 0 else None,
                   device_busy_fraction=sum(busy) / len(busy) if busy else None)
    return out


def _batch(preset: str) -> int:
    """The preset's learner batch."""
    from moozi.config import config_from_dict
    from moozi.presets import load_preset

    return config_from_dict(load_preset(preset)).schedule.batch_size


def figures(train: dict, bound: dict | None, batch_size: int) -> dict:
    """The issue's per-configuration figures from a timed run and its preset's device_throughput row (None for a
    host game): rates after the first metrics row; ``learner_vs_bound`` is the run's learner samples/s (updates per
    second of learning phase) over the bare update's at the same batch; ``projected_minutes_10m_frames`` at the
    run's env steps/s."""
    s, rate = train.get("summary") or {}, train.get("env_steps_per_s")
    updates, learn = train.get("updates_per_s"), train.get("learn_updates_per_s")
    bound_samples = (bound or {}).get("learner_samples_per_s")
    return {
        "env_steps_per_s": rate,
        "simulations_per_s": train.get("simulations_per_s"),
        "updates_per_s": updates,
        "samples_per_s": updates * batch_size if updates is not None else None,
        "replay_ratio": s.get("replay_ratio"),
        "device_busy_fraction": train.get("device_busy_fraction"),
        "peak_device_memory_bytes": s.get("peak_device_memory_bytes"),
        "acting_vs_bound": (bound or {}).get("acting_over_bound"),
        "learner_vs_bound": learn * batch_size / bound_samples if learn and bound_samples else None,
        "projected_minutes_10m_frames": 1e7 / rate / 60 if rate else None,
    }


ORDER = ("breakout-gpu", "device_schedule", "bf16", "fused", "throughput", "connect4-gpu", "thesis-minatar",
         "atari-pong")
"""The steps in the order they run: what decides the GPU design first (the GPU preset, the device schedule,
bfloat16, the fused chunk), then the acting sweep and the other configurations, so a call cut short by its
timeout keeps what matters most."""


def _config_step(name: str, smoke: bool, minutes: float) -> dict:
    """A configuration's row: its preset's bound (device games) and a timed run, reduced by :func:`figures`."""
    from moozi.config import config_from_dict
    from moozi.presets import load_preset

    config = config_from_dict(load_preset(name))
    batch = 8 if smoke else config.schedule.batch_size
    device_game = not config.env.name.startswith(("ale:", "gym:", "openspiel:", "minatar:"))
    bound = _throughput(None, smoke, name) if device_game else None
    train = _train(name, minutes, SMOKE if smoke else [])
    return {**figures(train, bound, batch), "train": train, "bound": bound}


def _variant_step(overrides: list[str], smoke: bool, minutes: float, smoke_more: tuple = ()) -> dict:
    """``breakout-gpu`` trained with ``overrides`` (the device schedule, bfloat16), reduced as a configuration."""
    train = _train("breakout-gpu", minutes, [*(SMOKE if smoke else []), *overrides, *(smoke_more if smoke else ())])
    return {**figures(train, None, 8 if smoke else _batch("breakout-gpu")), "overrides": overrides, "train": train}


def run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    smoke = args.cpu_smoke
    t0 = time.monotonic()
    machine = _machine()
    result = {"commit": args.commit, "cpu_smoke": smoke, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
              "device": machine["gpu"] or ", ".join(machine["devices"]), "machine": machine, "configs": {}}
    _save(out, result)
    minutes = 5.0 if smoke else args.train_min  # smoke: the env-step budget ends it
    device = ["schedule.kind=device", f"schedule.epochs_per_call={1 if smoke else 8}"]
    for step in ORDER:
        if args.only and step not in args.only:
            continue
        if step in CONFIGS:
            result["configs"][step] = _config_step(step, smoke, minutes)
        elif step == "device_schedule":  # the smoke's budget runs past the ring's filling (windows of 20 steps)
            result["device_schedule"] = _variant_step(device, smoke, minutes, ("schedule.max_env_steps=160",))
        elif step == "bf16":  # the same run as breakout-gpu's row, multiplying in bfloat16
            result["bf16"] = _variant_step(["model.compute_dtype=bfloat16"], smoke, minutes)
        elif step == "fused":
            result["fused"] = _throughput(None, smoke, "breakout-gpu", fused=True)
        elif not smoke:  # the acting sweep (the smoke's preset rows run the same script)
            result["throughput"] = [_throughput(b, smoke) for b in (64, 1024, 4096)]
        _save(out, result)
    if args.e2e_min > 0:  # breakout-gpu end to end: its tests by env frames, for the card beside the CPU preset's
        train = _train("breakout-gpu", args.e2e_min, SMOKE if smoke else [])
        result["e2e"] = {"preset": "breakout-gpu", "minutes": args.e2e_min, **train, "curve": train.pop("curve", [])}
        _save(out, result)
    result["wall_s"] = round(time.monotonic() - t0, 1)
    _save(out, result)
    print(json.dumps(result))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    w = sub.add_parser("wheels", help="download the carried wheels into .whl/ (here, with network)")
    w.add_argument("--python", default="3.12", help="the GPU image's Python (KINDS.md: 3.12.3)")
    sub.add_parser("command", help="print the device tool's command")
    r = sub.add_parser("run", help="measure (on the GPU machine)")
    r.add_argument("--out", required=True)
    r.add_argument("--commit", default=None)
    r.add_argument("--train-min", type=float, default=0.75, help="minutes of each configuration's training")
    r.add_argument("--e2e-min", type=float, default=0.0,
                   help="then breakout-gpu for this many minutes, its tests by env frames (0: skip; 5 when time allows)")
    r.add_argument("--cpu-smoke", "--quick", dest="cpu_smoke", action="store_true",
                   help="tiny sizes by an env-step budget: check the script on a CPU (CI runs it)")
    r.add_argument("--only", type=lambda v: [c for c in v.split(",") if c], default=None, metavar="NAME[,NAME]",
                   help=f"run only these steps (of {', '.join(STEPS)}; default: all)")
    args = p.parse_args()
    unknown = sorted(set(getattr(args, "only", None) or ()) - set(STEPS))
    if unknown:
        p.error(f"--only: {', '.join(unknown)} is not a step of the check; choose from {', '.join(STEPS)}")
    return {"wheels": wheels, "command": command, "run": run}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
