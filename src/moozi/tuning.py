"""Hyperparameter sweeps and population-based training on Ray Tune (``moozi tune``).

Every trial is an ordinary run directory (``OUT/trials/TRIAL``: config,
metrics, checkpoints, ``train.log``), trained by the same :class:`Trainer` as
``moozi train`` (its components in the trial's process, the local backend)
in chunks of ``chunk_minutes``; after each chunk the trial reports the test
return of its last test and the counters to Tune, with a Tune checkpoint
that only points at the run's newest moozi checkpoint. So a trial can be
resumed, reported (``moozi report OUT/trials/*``) and evaluated like any run.

Search spaces are given as ``KEY=FORM`` (:func:`parse_param`), any config key:
``choice(a, b, ...)``, ``grid(a, b, ...)`` (every value, ``--trials`` times),
``uniform(lo, hi)``, ``loguniform(lo, hi)``, ``randint(lo, hi)`` (hi
excluded). With ``scheduler="pbt"`` (Tune's PopulationBasedTraining, one
perturbation per chunk), a trial in the bottom quantile *exploits* one in the
top by copying that trial's newest checkpoint into its own run directory
(logged in its ``train.log`` and ``OUT/pbt.jsonl``) and *explores* by
perturbing the copied values (Tune's resample / x1.2 / x0.8), then resumes
with its new config: PBT's keys must leave the model's shapes alone
(learning rates, coefficients, ratios, simulations).

Ray is imported only here and only when a sweep runs; the Ray cluster is
private to the sweep (``cpus`` CPUs, ``cpus_per_trial`` each).
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from moozi.config import ConfigError

log = logging.getLogger("moozi")

FORMS = ("choice", "grid", "uniform", "loguniform", "randint")
METRIC = "test_return"


@dataclass(frozen=True)
class Param:
    """One searched key: ``key`` (``section.name``), ``form`` (one of :data:`FORMS`) and its ``args``."""

    key: str
    form: str
    args: tuple


def parse_param(text: str) -> Param:
    """``"learner.learning_rate=loguniform(1e-4, 1e-2)"`` -> :class:`Param`; a ConfigError names what is wrong."""
    m = re.fullmatch(r"\s*([A-Za-z_]\w*\.[A-Za-z_]\w*)\s*=\s*([a-z]+)\((.*)\)\s*", str(text))
    if not m:
        raise ConfigError(f"--param {text!r}: allowed SECTION.KEY=FORM(ARGS) with FORM one of {', '.join(FORMS)}, "
                          "e.g. learner.learning_rate=loguniform(1e-4, 1e-2)")
    key, form, raw = m.groups()
    if form not in FORMS:
        raise ConfigError(f"--param {text!r}: unknown form {form!r}; allowed {', '.join(FORMS)}")
    try:
        args = ast.literal_eval(f"({raw},)") if raw.strip() else ()
    except (ValueError, SyntaxError) as err:
        raise ConfigError(f"--param {text!r}: its arguments are not Python literals ({err})") from err
    if form in ("choice", "grid") and not args:
        raise ConfigError(f"--param {text!r}: {form} needs at least one value")
    if form in ("uniform", "loguniform", "randint"):
        if len(args) != 2 or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args) \
                or not args[0] < args[1] or (form == "loguniform" and args[0] <= 0):
            raise ConfigError(f"--param {text!r}: {form} needs two numbers lo < hi"
                              + (" with lo > 0" if form == "loguniform" else ""))
    return Param(key, form, tuple(args))


def check_params(params: list[Param], base: dict) -> None:
    """Every searched key must be a config key, and every value of a choice or grid a valid one (checked by
    building the config with it), so a typo fails before Ray starts."""
    from moozi.config import apply_overrides, config_from_dict

    keys = [p.key for p in params]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"--param: a key is searched twice ({', '.join(sorted(k for k in keys if keys.count(k) > 1))})")
    for p in params:
        values = p.args if p.form in ("choice", "grid") else p.args[:1]
        for v in values:
            config_from_dict(apply_overrides(base, [f"{p.key}={json.dumps(v)}"]))


def tune_space(params: list[Param]) -> dict:
    """Tune's ``param_space`` (flat keys ``section.name``)."""
    from ray import tune

    make = {"choice": lambda a: tune.choice(list(a)), "grid": lambda a: tune.grid_search(list(a)),
            "uniform": lambda a: tune.uniform(*a), "loguniform": lambda a: tune.loguniform(*a),
            "randint": lambda a: tune.randint(*a)}
    return {p.key: make[p.form](p.args) for p in params}


def trial_config(base: dict, values: dict):
    """The trial's :class:`~moozi.config.Config`: ``base`` (plain data) with the sampled ``values`` (flat keys);
    numpy scalars become Python numbers, and a float drawn for an integer key (PBT's x1.2) is rounded."""
    from moozi.config import apply_overrides, config_from_dict

    overrides = [f"{key}={json.dumps(_coerce(key, v))}" for key, v in sorted(values.items())]
    return config_from_dict(apply_overrides(base, overrides))


def _coerce(key: str, value):
    import typing

    from moozi.config.loading import section_type

    value = value.item() if hasattr(value, "item") else value
    section, name = key.split(".", 1)
    cls = section_type(section)
    hint = typing.get_type_hints(cls).get(name) if cls is not None else None
    if isinstance(value, float) and hint is not None and (hint is int or int in typing.get_args(hint)) \
            and float not in typing.get_args(hint):
        return round(value)
    return value


def _adopt(run_dir: Path, source: dict) -> None:
    """PBT's exploit: the source trial's newest checkpoint becomes this run's only one (its own are set aside in
    ``checkpoints/replaced``); the resume that follows continues from it."""
    ckpts = run_dir / "checkpoints"
    aside = ckpts / "replaced" / time.strftime("%Y%m%d-%H%M%S")
    aside.mkdir(parents=True, exist_ok=True)
    for step in ckpts.glob("step_*"):
        shutil.move(str(step), str(aside / step.name))
    shutil.copytree(source["checkpoint"], ckpts / Path(source["checkpoint"]).name)


def train_trial(values: dict, *, base: dict, out_dir: str, minutes: float, chunk_minutes: float) -> None:
    """One Tune trial (a function trainable): train in chunks, report after each (see the module doc)."""
    import tempfile

    import yaml
    from ray import tune

    from moozi import compile_cache
    from moozi.config import to_dict
    from moozi.driver import Trainer

    compile_cache.enable()
    name = tune.get_context().get_trial_name()
    run_dir = Path(out_dir) / "trials" / name
    config = trial_config(base, values)
    resume = (run_dir / "config.yaml").exists()
    checkpoint = tune.get_checkpoint()
    spent = 0.0  # minutes trained so far (a restored trial goes on from its checkpoint's, not from 0)
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            source = json.loads((Path(d) / "source.json").read_text())
        spent = float(source.get("spent_minutes", 0.0))
        if Path(source["run_dir"]).resolve() != run_dir.resolve():
            _adopt(run_dir, source)
            with open(Path(out_dir) / "pbt.jsonl", "a") as f:
                f.write(json.dumps({"trial": name, "exploited": Path(source["run_dir"]).name,
                                    "checkpoint": Path(source["checkpoint"]).name, "config": values,
                                    "time": time.time()}, default=str) + "\n")
            resume = True
    if resume:  # the config may have changed (PBT's explore): the run's own file says what it trains with now
        (run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
    first = True
    while spent < minutes - 1e-9:
        chunk = min(chunk_minutes, minutes - spent)
        trainer = Trainer(config, run_dir, resume=resume)
        try:
            if checkpoint is not None and first:
                log.info("tune: trial %s continues from %s with %s", name, trainer.last_checkpoint or "its checkpoint",
                         values)
            counters = trainer.run(minutes=chunk)
            last = dict(trainer.ctx.last_test or {})
            saved = trainer.last_checkpoint
        finally:
            trainer.close()
        spent += chunk
        resume, first = True, False
        metrics = {METRIC: float(last.get("test/return_mean", float("nan"))),
                   **{k: float(counters[k]) for k in ("env_steps", "updates", "wall_s")}}
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "source.json").write_text(json.dumps({"run_dir": str(run_dir), "checkpoint": str(saved),
                                                             "spent_minutes": spent}))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def run_tune(preset: str, overrides: list[str], params: list[str], trials: int,
             minutes: float, chunk_minutes: float, out_dir: str, scheduler: str = "random", cpus: int | None = None,
             cpus_per_trial: float = 1.0, seed: int = 0) -> dict:
    """``moozi tune``: the sweep (or population), then ``OUT/summary.json`` and ``OUT/summary.md``: one row per
    trial with its values and last reported metrics, best first."""
    import os

    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    from moozi.config import apply_overrides
    from moozi.presets import load_preset

    if trials < 1 or not minutes > 0 or not chunk_minutes > 0:
        raise ConfigError("--trials must be >= 1, --minutes and --chunk-minutes > 0")
    if scheduler not in ("random", "pbt"):
        raise ConfigError(f"--scheduler {scheduler!r}: allowed random, pbt")
    parsed = [parse_param(p) for p in params]
    if not parsed:
        raise ConfigError("give at least one --param KEY=FORM(ARGS) to search")
    if scheduler == "pbt" and any(p.form == "grid" for p in parsed):
        raise ConfigError("--scheduler pbt perturbs values: grid(...) is for random search; use choice(...)")
    base = apply_overrides(load_preset(preset), list(overrides) + [f"schedule.seed={seed}"])
    check_params(parsed, base)
    out = Path(out_dir).resolve()
    if (out / "summary.json").exists():
        raise ConfigError(f"{out} holds a finished sweep (summary.json); choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps({"preset": preset, "overrides": overrides,
                                                "params": params, "trials": trials, "minutes": minutes,
                                                "chunk_minutes": chunk_minutes, "scheduler": scheduler,
                                                "seed": seed}, indent=1))
    space = tune_space(parsed)
    sched = None
    if scheduler == "pbt":
        sched = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=1,
                                        hyperparam_mutations=space, quantile_fraction=0.5, synch=True)
    trainable = tune.with_resources(
        tune.with_parameters(train_trial, base=base, out_dir=str(out), minutes=minutes, chunk_minutes=chunk_minutes),
        {"cpu": cpus_per_trial})
    ray.init(num_cpus=cpus or os.cpu_count(), include_dashboard=False, log_to_driver=False,
             configure_logging=False, runtime_env={"env_vars": {"JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
                                                                "PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
    try:
        tuner = tune.Tuner(trainable, param_space=space,
                           tune_config=tune.TuneConfig(metric=METRIC, mode="max", num_samples=trials, scheduler=sched,
                                                       search_alg=None),
                           # a trial reports once per chunk: this bounds it even if it were restarted from scratch
                           run_config=tune.RunConfig(name="ray", storage_path=str(out), verbose=0,
                                                     stop={"training_iteration": math.ceil(minutes / chunk_minutes - 1e-9)}))
        grid = tuner.fit()
    finally:
        ray.shutdown()
    rows = []
    for r in grid:
        name = Path(r.path).name if r.path else "?"
        metrics = r.metrics or {}
        rows.append({"trial": metrics.get("trial_id", name), "run_dir": _run_dir_of(out, metrics),
                     "config": {k: v for k, v in (r.config or {}).items()},
                     METRIC: metrics.get(METRIC), "env_steps": metrics.get("env_steps"),
                     "updates": metrics.get("updates"), "error": str(r.error) if r.error else None})
    rows.sort(key=lambda x: -(x[METRIC] if isinstance(x[METRIC], (int, float)) and x[METRIC] == x[METRIC]
                              else float("-inf")))
    exploits = (out / "pbt.jsonl").read_text().count("\n") if (out / "pbt.jsonl").exists() else 0
    summary = {"out": str(out), "scheduler": scheduler, "trials": rows, "exploits": exploits,
               "params": params, "minutes": minutes}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    (out / "summary.md").write_text(summary_table(summary))
    return summary


def _run_dir_of(out: Path, metrics: dict) -> str | None:
    trial = metrics.get("trial_id")
    if not trial:
        return None
    found = sorted((out / "trials").glob(f"*{trial}*"))
    return str(found[0]) if found else None


def summary_table(summary: dict) -> str:
    """The sweep's table (Markdown), best test return first."""
    keys = sorted({k for r in summary["trials"] for k in r["config"]})
    lines = [f"| trial | {' | '.join(keys)} | test return | env steps | updates |",
             "| --- |" + " --- |" * (len(keys) + 3)]
    for r in summary["trials"]:
        values = [_fmt(r["config"].get(k)) for k in keys]
        lines.append(f"| {Path(r['run_dir']).name if r['run_dir'] else r['trial']} | {' | '.join(values)} | "
                     f"{_fmt(r[METRIC])} | {_fmt(r['env_steps'])} | {_fmt(r['updates'])} |"
                     + (f" error: {r['error'][:80]}" if r["error"] else ""))
    if summary["scheduler"] == "pbt":
        lines.append(f"\nPBT exploits: {summary['exploits']} (OUT/pbt.jsonl)")
    return "\n".join(lines) + "\n"


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)
