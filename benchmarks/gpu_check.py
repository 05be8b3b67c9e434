"""The prepared GPU check: one short command that any session with a lent GPU runs first (issue 89).

Two steps:

* here (the development machine, with network): ``python benchmarks/gpu_check.py wheels`` downloads into
  ``.whl/`` (git-ignored) the wheels of moozi's dependencies the GPU image lacks or holds at other versions,
  at the versions installed in ``.venv`` (pure-Python wheels; the image's own JAX with CUDA is used);
* there (no network): the device tool's ``run`` with ``carry=[".whl"]`` and the command that
  ``python benchmarks/gpu_check.py command`` prints, which installs the wheels, then runs
  ``gpu_check.py run --out $OUT``.

``run`` measures, writing ``$OUT/gpu_check.json`` after every step (a timeout keeps what was done):

1. the machine: GPU (``nvidia-smi -L``), JAX and its devices, the libraries' versions, CPU count;
2. ``benchmarks/device_throughput.py --json`` at acting batches 64, 1024 and 4096 (Breakout-MinAtar, the thesis
   network, PUCT 25 simulations): acting steps/s, the network-evaluation bound, learner samples/s;
3. ``moozi train --preset breakout`` for ``--train-min`` minutes as shipped (64 envs) and with 1024 envs:
   env steps/s and updates/s after its first row, from its metrics.

``--quick`` shrinks everything (batch 8, 0.4-minute runs) so the script itself is checked on a CPU.

    python benchmarks/gpu_check.py wheels && python benchmarks/gpu_check.py command
    python benchmarks/gpu_check.py run --out /tmp/gpu --quick        # on a CPU: the script works
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
           "farama-notifications"]


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
           "--python-version", args.python, "--platform", "manylinux2014_x86_64", *pins]
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


def _throughput(batch: int, quick: bool) -> dict:
    cmd = [sys.executable, str(HERE / "device_throughput.py"), "--json", "--batch", str(batch)]
    if quick:
        cmd += ["--simulations", "2", "--steps", "2", "--repeats", "1", "--learner-batch", "8"]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return {"batch": batch, "error": done.stderr.strip().splitlines()[-1:] or ["failed"]}
    row = json.loads(done.stdout.strip().splitlines()[-1])
    return {"batch": batch, "wall_s": round(time.monotonic() - t0, 1), **row}


def _train(minutes: float, overrides: list[str]) -> dict:
    from moozi.observe.metrics import read_metrics

    run = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "run"
    cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", "breakout", "--run-dir", str(run),
           "--minutes", str(minutes), *overrides]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    rows = [r for r in read_metrics(run) if "updates" in r and "env_steps" in r] if run.exists() else []
    out = {"overrides": overrides, "exit": done.returncode, "wall_s": round(time.monotonic() - t0, 1),
           "rows": len(rows)}
    if done.returncode != 0:
        out["error"] = done.stderr.strip().splitlines()[-1:] or ["failed"]
    if len(rows) >= 2:  # rates after the first row (compiles and start-up left out)
        a, b = rows[0], rows[-1]
        dt = b["wall_time"] - a["wall_time"]
        out.update(env_steps=b["env_steps"], updates=b["updates"], measured_s=round(dt, 1),
                   env_steps_per_s=round((b["env_steps"] - a["env_steps"]) / dt, 1) if dt > 0 else None,
                   updates_per_s=round((b["updates"] - a["updates"]) / dt, 2) if dt > 0 else None)
        for k in ("time/act_s", "time/learn_s"):
            vals = [r[k] for r in rows if k in r]
            if vals:
                out[k] = round(sum(vals) / len(vals), 3)
    return out


def run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    result = {"commit": args.commit, "quick": args.quick, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
              "machine": _machine()}
    _save(out, result)
    batches = [8] if args.quick else [64, 1024, 4096]
    result["throughput"] = []
    for b in batches:
        result["throughput"].append(_throughput(b, args.quick))
        _save(out, result)
    minutes = 0.4 if args.quick else args.train_min
    quick = ["model.channels=8", "schedule.batch_size=16"] if args.quick else []
    result["train"] = []
    for envs in ([64] if args.quick else [64, 1024]):
        result["train"].append(_train(minutes, [f"env.num_envs={envs}", *quick]))
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
    r.add_argument("--train-min", type=float, default=2.0)
    r.add_argument("--quick", action="store_true", help="tiny sizes: check the script on a CPU")
    args = p.parse_args()
    return {"wheels": wheels, "command": command, "run": run}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
