"""``moozi train``: a new run from a preset, or ``--resume`` of one."""

from __future__ import annotations

import argparse
import json
import sys

from moozi.cli.console import _check_interrupted, _log_console, _Progress, _signalled


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """``moozi train``'s arguments (also what ``moozi demo`` parses its training with)."""
    parser.add_argument("--preset", help="preset name (see `moozi presets`) or path to a preset YAML file")
    parser.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its newest good checkpoint")
    parser.add_argument("--run-dir", help="run directory (default runs/PRESET-TIMESTAMP)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop cleanly after M minutes, with a final checkpoint (default: no time limit)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (schedule.seed)")
    parser.add_argument("--stop-grace", type=float, default=25.0, metavar="S",
                        help="a SIGTERM's stop (final checkpoint included) ends the process within S seconds: a "
                             "phase that cannot be cut (compiling, a long learning phase) still running then is "
                             "left, and the run resumes from its newest checkpoint (default 25, under the 30 s "
                             "that Kubernetes and Slurm wait; 0: wait for the stop however long it takes)")
    parser.add_argument("--backend", choices=["local", "ray"], default=None,
                        help="where components run: local (default, one process) or ray (pip install 'moozi[ray]')")
    parser.add_argument("--address", default=None, metavar="HOST:PORT",
                        help="with --backend ray: an existing Ray cluster (default: start a private one)")
    parser.add_argument("--continue", dest="continue_run", action="store_true",
                        help="with --preset and --run-dir: resume the run when it already holds checkpoints (the "
                             "config must be the same), else start it; so one command runs a long budget "
                             "(schedule.max_env_steps) across sittings and says where it stands")
    parser.add_argument("--protocol", choices=["thesis", "gymnax"], default=None,
                        help="MinAtar games: follow a named protocol on the preset's package (thesis: no sticky "
                             "actions, the minimal action set, 7200-move episodes, 10M frames; gymnax: its port's "
                             "1000-move episodes, 10M frames; Freeway lasts 2500 moves in both); it adds overrides "
                             "and refuses one that contradicts it (docs/results/thesis-protocol)")
    parser.add_argument("--profile", action="store_true",
                        help="trace one steady epoch (the first after learning compiled; output.profile_epoch=1) into "
                             "RUN/profile: the JAX profiler's trace (Ray's timeline on Ray) for ui.perfetto.dev, and "
                             "timeline.png drawn from it")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="dotted overrides, e.g. schedule.batch_size=64")


def _with_backend(config, args: argparse.Namespace):
    """Apply --backend / --address (also on --resume: where a run executes is not part of what it is)."""
    import dataclasses

    if args.address and (args.backend or config.distributed.backend) != "ray":
        raise SystemExit("moozi train: --address needs --backend ray")
    changes = {}
    if args.backend:
        changes["backend"] = args.backend
    if args.address:
        changes["address"] = args.address
    if args.backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise SystemExit("moozi train: --backend ray needs Ray: pip install 'moozi[ray]'") from None
    return dataclasses.replace(config, distributed=dataclasses.replace(config.distributed, **changes)) if changes else config


def _train(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from moozi.config import apply_overrides, config_from_dict
    from moozi.driver import Trainer, load_run_config
    from moozi.presets import load_preset, preset_names

    started = time.monotonic()
    if not args.stop_grace >= 0:
        print(f"moozi train: --stop-grace {args.stop_grace:g} is invalid: allowed a number of seconds >= 0",
              file=sys.stderr)
        return 2
    if args.minutes is not None and not args.minutes > 0:
        print(f"moozi train: --minutes {args.minutes:g} is invalid: allowed a number > 0 (leave it out to train "
              "until schedule.max_env_steps)", file=sys.stderr)
        return 2
    if args.resume:
        if args.preset or args.overrides or args.seed is not None or args.run_dir or args.protocol or args.profile:
            print("moozi train: --resume DIR takes only --minutes, --stop-grace, --backend and --address (the run's "
                  "config is reused)", file=sys.stderr)
            return 2
        run_dir = Path(args.resume)
        config = load_run_config(run_dir)
        resume = True
        config = _with_backend(config, args)
    else:
        if not args.preset:
            print("moozi train: give --preset NAME (one of " + ", ".join(preset_names()) + ") or --resume DIR", file=sys.stderr)
            return 2
        data = load_preset(args.preset)
        overrides = list(args.overrides)
        if args.protocol:
            from moozi.envs.protocol import merge_overrides, protocol_overrides

            env_name = apply_overrides(data, overrides).get("env", {}).get("name", "")
            overrides = merge_overrides(args.protocol, protocol_overrides(args.protocol, env_name), overrides)
        if args.seed is not None:
            overrides.append(f"schedule.seed={args.seed}")
        if args.profile:
            overrides.append("output.profile_epoch=1")
        config = _with_backend(config_from_dict(apply_overrides(data, overrides)), args)
        from moozi.run_dir import holds_run, new_run_dir

        if args.run_dir:
            run_dir = Path(args.run_dir)
        else:  # a new folder of its own, even for two runs started in the same second
            run_dir = new_run_dir(f"runs/{Path(args.preset).stem}-{time.strftime('%Y%m%d-%H%M%S')}")
        resume = (run_dir / "checkpoints").exists() and any((run_dir / "checkpoints").iterdir())
        if holds_run(run_dir) and not args.continue_run:
            what = "checkpoints" if resume else "a run (its config.yaml; no checkpoint yet)"
            print(f"moozi train: {run_dir} already holds {what}; use --resume {run_dir}, --continue (the same "
                  "command goes on) or another --run-dir", file=sys.stderr)
            return 2
        if holds_run(run_dir):  # --continue: the same command, the same run (checkpoints or not yet)
            _check_same_run(config, run_dir)
    if resume and (spent := _spent_budget(run_dir, config)) is not None:
        print(f"moozi: {_where_it_stands(run_dir, spent, config.schedule.max_env_steps, None)}; nothing to train",
              file=sys.stderr, flush=True)
        print(json.dumps(spent), flush=True)
        return 0
    progress = _Progress(f"moozi train {config.env.name} -> {run_dir}", args.minutes, started)
    _log_console(progress.console)
    trainer = None
    with progress:
        try:
            trainer = Trainer(config, run_dir, resume=resume, progress=progress)
            progress.stopping = lambda: trainer.budget.stop_requested
            progress.tested_against = f"{config.testing.opponent} player" if trainer.spec.two_player else None
            _record_command(run_dir, args.argv)
            _say_protocol(progress.console, config)
            if resume:
                c = trainer.counters
                progress.console.print(f"moozi: resuming {run_dir} at update {c['updates']:,} ({c['env_steps']:,} "
                                       f"env steps, {c['wall_s'] / 60:.1f} min trained)", soft_wrap=True)
            _check_interrupted()
            progress.status = "compiling the acting and learning steps (the first epoch)"
            counters = trainer.run(minutes=args.minutes, started=started, stop_grace_s=args.stop_grace or None,
                                   earlier_signal=_signalled)
            progress.status = f"stopped by {_by(trainer)}" if trainer.budget.stop_requested else "done"
        finally:
            if trainer is not None:
                trainer.close()
    sys.stderr.flush()
    interrupted = trainer.budget.stop_requested
    if interrupted:  # a clean stop: say where it is and how to go on
        print(f"moozi: stopped by {_by(trainer)} at update {counters['updates']:,}; the final checkpoint is "
              f"{trainer.last_checkpoint}; continue with: moozi train --resume {run_dir}", file=sys.stderr, flush=True)
    if config.schedule.max_env_steps and not interrupted:
        print(f"moozi: {_where_it_stands(run_dir, counters, config.schedule.max_env_steps, trainer.rows)}",
              file=sys.stderr, flush=True)
    from moozi.observe.machine import device_peak_memory_bytes

    summary = {"run_dir": str(run_dir), **counters, **trainer.rows.summary(),
               "peak_device_memory_bytes": device_peak_memory_bytes(), **trainer.ctx.last_test,
               "parameters": trainer.size["parameters"], "memory_mb": trainer.size["memory_mb"]}
    print(json.dumps(summary), flush=True)
    if interrupted:
        return 143 if trainer.budget.stop_signal == "SIGTERM" else 130
    return 0


def _by(trainer) -> str:
    """What stopped a run: ``SIGTERM``, ``Ctrl-C`` or a request (``Trainer.request_stop``)."""
    return {"SIGTERM": "SIGTERM", "SIGINT": "Ctrl-C"}.get(trainer.budget.stop_signal, "a stop request")


def _say_protocol(console, config) -> None:
    """One console line with the MinAtar protocol the run follows (nothing for other games)."""
    from moozi.envs.protocol import of_config, summary_line

    protocol = of_config(config)
    if protocol is not None:
        console.print(f"moozi: {summary_line(protocol)}", soft_wrap=True)


def _check_same_run(config, run_dir) -> None:
    """``--continue`` of an existing run: the preset and overrides must give the config it was started with
    (where it runs aside), else a ConfigError names the keys that differ."""
    from moozi.config import ConfigError, to_dict
    from moozi.driver import load_run_config

    def flat(d, prefix=""):
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
        return out

    saved, now = flat(to_dict(load_run_config(run_dir))), flat(to_dict(config))
    differ = sorted(k for k in saved.keys() | now.keys()
                    if saved.get(k) != now.get(k) and not k.startswith(("distributed.backend", "distributed.address")))
    if differ:
        shown = ", ".join(f"{k}: {saved.get(k)!r} there, {now.get(k)!r} now" for k in differ[:5])
        raise ConfigError(f"--continue {run_dir}: the run was started with another config ({shown}"
                          f"{', ...' if len(differ) > 5 else ''}); give the same preset and overrides, or --resume it")


def _spent_budget(run_dir, config) -> dict | None:
    """The run's summary line when its newest good checkpoint has spent its env-step budget
    (``schedule.max_env_steps``), else None: the same command once more after the end says so at once, without
    building the trainer, loading the replay buffer or adding to commands.txt (nothing is trained); its
    ``device_busy_fraction`` and ``peak_device_memory_bytes`` are None (nothing ran to sample)."""
    from pathlib import Path

    from moozi.checkpoint import CheckpointError, find_latest
    from moozi.driver.ledger import COUNTERS, run_rates

    budget = config.schedule.max_env_steps
    if not budget:
        return None
    try:  # the checkpoint the trainer's resume would take; rejected=[]: a corrupt one is its to report, not ours
        _, record = find_latest(Path(run_dir) / "checkpoints", parts=["learner"], rejected=[])
    except CheckpointError:
        return None
    meta = record["metadata"]  # the trainer's: counters, last_test and size (driver/trainer.py)
    if meta["counters"]["env_steps"] < budget:
        return None
    size = {"parameters": meta["size"]["parameters"], "memory_mb": meta["size"]["memory_mb"]} if "size" in meta else {}
    counters = {k: meta["counters"].get(k, 0) for k in COUNTERS}  # an older moozi's checkpoint may lack some
    return {"run_dir": str(run_dir), **meta["counters"], **run_rates(counters, config),
            "peak_device_memory_bytes": None, **meta["last_test"], **size}


def _where_it_stands(run_dir, counters: dict, budget: int, rows) -> str:
    """One line: the env-step budget done, and the time still needed at the rate of this invocation's last
    15 minutes (:meth:`~moozi.driver.rows.RowWriter.env_steps_per_s`), which says what it was measured over."""
    from moozi.driver.rows import RECENT_S

    done = counters["env_steps"]
    if done >= budget:
        return f"{run_dir} has reached its budget of {budget:,} env steps"
    rate, over_s = rows.env_steps_per_s()
    over = (f"its last {over_s / 60:.0f} minutes" if over_s >= RECENT_S
            else f"this sitting's {over_s / 60:.0f} minutes, compiling included")
    more = (f"; about {(budget - done) / rate / 3600:.1f} h more at {rate:,.0f} env steps/s ({over})"
            if rate > 0 else "")
    return (f"{run_dir} is at {done:,} of {budget:,} env steps ({done / budget:.0%}){more}: "
            "run the same command again to go on")


def _record_command(run_dir, argv: list[str]) -> None:
    """Append the command as typed to RUN/commands.txt (the report shows how a run was made and resumed)."""
    import datetime
    import shlex

    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with open(run_dir / "commands.txt", "a") as f:
        f.write(f"{stamp}  moozi {shlex.join(argv)}\n")
