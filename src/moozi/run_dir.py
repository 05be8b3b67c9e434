"""What a run directory holds: ``config.yaml``, ``checkpoints/``, metrics and logs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
from pathlib import Path
from typing import Any

from moozi.checkpoint import CheckpointError, checkpoint_name, list_checkpoints, load_checkpoint, load_latest
from moozi.checkpoint.policy import BEST_DIR, KEPT_DIR
from moozi.config import Config, ConfigError, config_from_dict
from moozi.config.loading import load_yaml

IDENTITY = "run.json"  # the run's identity, written when it starts: {"id": ...}


LOCK = ".lock"  # held (flock) by the one process that writes the run; its text names that process


class RunLock:
    """The one writer of a run folder: an exclusive ``flock`` on ``RUN/.lock``, held while the run trains and
    released by the OS when the process ends however it ends (``kill -9`` included), so a stale lock never
    blocks a resume. The file's text names the holder (pid, host, start time) for the refusal a second writer
    gets. Readers (``eval``, ``play``, ``watch``, ``report``) never take it: they read committed checkpoints.
    """

    def __init__(self, run_dir: Path | str):
        import datetime
        import fcntl
        import os
        import socket

        from moozi.errors import RunError

        path = Path(run_dir) / LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 400, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise RunError(f"{run_dir} is being written by {holder}: one process writes a run folder at a "
                           "time; wait for it to end (or stop it), then resume") from None
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        text = f"pid {os.getpid()} on {socket.gethostname()} (since {stamp})\n".encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
        self._fd = fd

    def release(self) -> None:
        import os

        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def new_run_dir(base: str) -> Path:
    """A new, empty run folder ``base`` (or ``base-2``, ``base-3``, ... when taken), created atomically so two
    runs started in the same second get two folders."""
    n = 1
    while True:
        path = Path(base if n == 1 else f"{base}-{n}")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1


def holds_run(run_dir: Path | str) -> bool:
    """Whether a folder already holds a run: its config or any checkpoint."""
    run_dir = Path(run_dir)
    ckpts = run_dir / "checkpoints"
    return (run_dir / "config.yaml").exists() or (ckpts.is_dir() and any(ckpts.iterdir()))


def new_identity(run_dir: Path | str) -> str:
    """Give a new run its identity (its folder's name at creation and 6 random hex digits) in ``run.json``;
    the id stays when the folder is moved or renamed, and does not depend on how its path is typed."""
    run_dir = Path(run_dir)
    run_id = f"{run_dir.resolve().name}-{secrets.token_hex(3)}"
    (run_dir / IDENTITY).write_text(json.dumps({"id": run_id}) + "\n")
    return run_id


def run_identity(run_dir: Path | str) -> str:
    """A run's identity (see :func:`new_identity`). A run written before identities existed is named by its
    config (``run-`` and the first 8 hex digits of config.yaml's sha256), which is as stable. An agent file
    carries the identity of the run it was exported from."""
    from moozi.agent_file import is_agent_file, read_agent
    from moozi.zoo import resolve

    run_dir = resolve(run_dir)
    if is_agent_file(run_dir):
        header = read_agent(run_dir)[0]
        return str((header.get("card") or {}).get("run_id") or "agent-" + header["params"]["sha256"][:8])
    try:
        return str(json.loads((run_dir / IDENTITY).read_text())["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return "run-" + hashlib.sha256((run_dir / "config.yaml").read_bytes()).hexdigest()[:8]


def views_dir(source: Path | str, kind: str) -> Path:
    """Where a view (``gifs``, ``trees``, ``embed``, ``sweeps``) of ``source`` goes by default: inside a run
    directory, ``RUN/KIND``; for an agent file or ``zoo:NAME`` (a file, not a folder to write into),
    ``NAME-KIND`` in the working directory."""
    if is_run_dir(source):
        return Path(source) / kind
    from moozi.zoo import PREFIX

    text = str(source)
    name = text[len(PREFIX):] if text.startswith(PREFIX) else Path(text).stem
    return Path(f"{name}-{kind}")


def is_run_dir(path: Path | str) -> bool:
    return (Path(path) / "config.yaml").is_file()


def is_trained(path: Path | str) -> bool:
    """Whether ``path`` is something to play with: a run directory, an agent file (``moozi export``) or a shipped
    agent (``zoo:NAME``)."""
    from moozi.agent_file import is_agent_file
    from moozi.zoo import PREFIX

    return str(path).startswith(PREFIX) or is_run_dir(path) or is_agent_file(path)


def kept_updates(run_dir: Path | str) -> list[int]:
    """Every update count a run can still be opened at (periodic, kept and best checkpoints), oldest first."""
    root = Path(run_dir) / "checkpoints"
    return sorted({c.step for folder in (root, root / KEPT_DIR, root / BEST_DIR) for c in list_checkpoints(folder)})


def load_run_config(run_dir: Path | str) -> Config:
    """The resolved config saved in a run directory (or in an agent file, or a shipped agent's)."""
    from moozi.agent_file import is_agent_file, read_agent
    from moozi.zoo import resolve

    run_dir = resolve(run_dir)
    if is_agent_file(run_dir):
        try:
            return config_from_dict(read_agent(run_dir)[0]["config"])
        except ConfigError as err:
            raise ConfigError(f"{run_dir}: {err} (an agent file made by an older moozi)") from err
    path = Path(run_dir) / "config.yaml"
    if Path(run_dir).is_file():
        raise CheckpointError(f"{run_dir} is a file but not a moozi agent file (`moozi export RUN --to NAME.moozi` "
                              "makes one), nor a run directory")
    if not path.exists():
        raise CheckpointError(f"{run_dir} is not a moozi run directory: {path} is missing")
    try:
        return config_from_dict(load_yaml(path.read_text()))
    except ConfigError as err:
        raise ConfigError(f"{path}: {err} (a run written by an older moozi cannot be resumed or evaluated "
                          "by this one)") from err


def find_checkpoint(run_dir: Path | str, which: str = "latest") -> Path | None:
    """The checkpoint folder ``which`` names: ``"latest"`` (None: the newest good one, found by
    :func:`load_latest`), ``"best"`` (``checkpoints/best``) or an update count (``step_...`` of it)."""
    root = Path(run_dir) / "checkpoints"
    if which == "latest":
        return None
    if which == "best":
        found = list_checkpoints(root / BEST_DIR)
        if not found:
            raise CheckpointError(f"{run_dir} has no best checkpoint ({root / BEST_DIR} is empty): it is kept "
                                  "once the run has testing.best_window tests with testing.keep_best = true, or at its first "
                                  "checkpoint with gating.every_checkpoints > 0")
        return root / BEST_DIR / checkpoint_name(found[-1].step)
    steps = {}
    for folder in (root / KEPT_DIR, root / BEST_DIR, root):  # the periodic checkpoint first, else a kept copy
        steps.update({c.step: c.path for c in list_checkpoints(folder)})
    if not str(which).isdigit() or int(which) not in steps:
        raise CheckpointError(f"--checkpoint {which}: allowed latest, best or one of the kept update counts "
                              f"{sorted(steps)} (in {root})")
    return steps[int(which)]


def load_params(run_dir: Path | str, model, env_name: str | None = None,
                checkpoint: str = "latest") -> tuple[object, dict]:
    """Published params (numpy) and metadata of a run's checkpoint (see :func:`find_checkpoint`).

    With ``env_name`` (the game of the run's config.yaml), a checkpoint written
    for another game, or params of another model, raise CheckpointError saying so.
    The metadata gains ``"path"``, the checkpoint folder read.
    """
    chosen = find_checkpoint(run_dir, checkpoint)
    if chosen is None:
        parts, meta, path = load_latest(Path(run_dir) / "checkpoints", parts=["learner"])
    else:
        parts, meta = load_checkpoint(chosen, parts=["learner"])
        path = chosen
    meta = {**meta, "path": str(path)}
    saved = ((meta.get("config") or {}).get("env") or {}).get("name")
    if env_name is not None and saved is not None and saved != env_name:
        raise CheckpointError(f"{path} was written by a run of {saved}, but {run_dir}/config.yaml is for "
                              f"{env_name}: evaluate the run directory that trained it")
    params = parts["learner"]["published"]
    try:
        model.check_params(params)
    except ValueError as err:
        raise CheckpointError(f"{path} does not fit the model of {run_dir}/config.yaml: {err}") from err
    return params, meta


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    """A trained run opened for use (by players, views and evaluation; never by training).

    run_dir: the run directory.
    config: its resolved config (or the one passed to :func:`open_run`).
    spec: the game's :class:`~moozi.envs.EnvSpec` (the environment itself is closed).
    model: the network the config describes.
    params: the published params of the checkpoint (numpy).
    meta: the checkpoint's metadata (``counters``, ``path``, ...).
    env: the game, still open, when :func:`open_run` was asked to keep it (the caller closes it); else None.
    """

    run_dir: Path
    config: Config
    spec: Any
    model: Any
    params: Any
    meta: dict
    env: Any = None

    @property
    def updates(self) -> int:
        """The update count of the checkpoint opened."""
        return int(self.meta["counters"]["updates"])


def open_run(run_dir: Path | str, checkpoint: str = "latest", config: Config | None = None,
             keep_env: bool = False) -> TrainedRun:
    """Open a trained run at ``checkpoint`` (``latest``, ``best`` or an update count; see :func:`find_checkpoint`).

    ``config`` replaces the run's own (a view that changes, say, the test planner's simulations, or plays the
    game on another package); the params must still fit its model, and the checkpoint must be of the run's own
    game (its config.yaml's). ``keep_env``: leave the game open in ``TrainedRun.env`` (a caller that plays it).
    """
    from moozi.agent_file import is_agent_file
    from moozi.zoo import resolve

    if is_agent_file(resolve(run_dir)):
        return _open_agent(resolve(run_dir), checkpoint, config, keep_env)
    from moozi.parts import build_parts

    own = load_run_config(run_dir)
    config = own if config is None else config
    env, model = build_parts(config)
    try:
        params, meta = load_params(run_dir, model, env_name=own.env.name, checkpoint=checkpoint)
    except BaseException:
        env.close()
        raise
    if not keep_env:
        env.close()
    return TrainedRun(Path(run_dir), config, env.spec, model, params, meta, env if keep_env else None)


def _open_agent(path: Path, checkpoint: str, config: Config | None, keep_env: bool) -> TrainedRun:
    """:func:`open_run` of an agent file: its one set of params (``checkpoint`` must be ``latest``)."""
    from moozi.agent_file import read_agent
    from moozi.parts import build_parts

    if checkpoint not in ("latest", None):
        raise CheckpointError(f"{path} is an agent file: it holds one set of params (no --checkpoint {checkpoint})")
    header, params = read_agent(path)
    own = config_from_dict(header["config"])
    config = own if config is None else config
    env, model = build_parts(config)
    try:
        try:
            model.check_params(params)
        except ValueError as err:
            raise CheckpointError(f"{path} does not fit the model of its own config: {err}") from err
    except BaseException:
        env.close()
        raise
    if not keep_env:
        env.close()
    card = header.get("card") or {}
    meta = {"counters": {"updates": int(card.get("updates", 0)), "env_steps": int(card.get("env_steps", 0))},
            "path": str(path), "agent": card,
            "config": header["config"]}
    return TrainedRun(path, config, env.spec, model, params, meta, env if keep_env else None)
