"""Vectorised environment pools: B environments in lock-step behind one batched interface.

:class:`HostPool` steps ``B`` :class:`~moozi.envs.host.HostEnv` objects and
adds, once for every host bridge, the rest of the step contract
(docs/architecture.md §3): auto-reset (the step after a last step is the first
of the next episode and ignores its action), a reproducible seed for every
episode, the ``spec.max_episode_steps`` truncation cap, the empty legal mask
on last steps, float32 observations, and a clear :class:`IllegalActionError`
for an out-of-range or illegal action. With ``num_workers > 0`` the
environments live in that many worker processes (for slow games such as
Atari); the interface and the results are the same.

:class:`DevicePool` puts a :class:`~moozi.envs.device.DeviceEnv` behind the same
interface (numpy in, numpy out), so tests, evaluation and benchmarks can treat
every game alike. :func:`make_pool` picks the right one for a registered name.

Both return batched :class:`~moozi.envs.contract.TimeStep` objects whose
fields are numpy arrays with a leading ``[B]`` axis.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import multiprocessing as mp
import os
import signal
import sys
import threading
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from moozi.config import ConfigError
from moozi.envs.contract import EnvSpec, GameContractError, IllegalActionError, TimeStep
from moozi.envs.host import GameStep, HostEnv


@dataclass(frozen=True)
class EnvFactory:
    """A picklable recipe for one environment: import ``modules`` (user games register
    themselves on import), then ``make_env(name, **kwargs)``. Worker processes use it."""

    name: str
    kwargs: dict = field(default_factory=dict)
    modules: tuple[str, ...] = ()

    def __call__(self):
        import_modules(self.modules)
        from moozi.envs.registry import make_env

        return make_env(self.name, **dict(self.kwargs))


def import_modules(modules: Sequence[str]) -> None:
    """Import the user's game modules (they call ``moozi.envs.register``); the working
    directory is searched too, so ``my_game.py`` next to the user works like it does for ``python -m``.

    Raises ConfigError naming ``env.modules``, the working directory and the import error.
    """
    if not modules:
        return
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    for m in modules:
        try:
            module = importlib.import_module(m)
        except Exception as err:
            raise ConfigError(
                f"env.modules: cannot import {m!r} ({type(err).__name__}: {err}); the working directory "
                f"{os.getcwd()} is on the import path: run moozi from the folder that holds "
                f"{m.replace('.', '/')}.py, or install the module") from err
        if getattr(module, "__file__", None) is None:  # a folder without __init__.py took the name
            where = ", ".join(str(p) for p in getattr(module, "__path__", []))
            raise ConfigError(
                f"env.modules: {m!r} was found as the folder {where}, not as a module file: a folder of the "
                f"same name shadows it (working directory {os.getcwd()}); rename the folder or the module")


def module_origins(modules: Sequence[str]) -> str:
    """Where each imported module of ``modules`` came from (for error messages)."""
    return "; ".join(f"{m} from {getattr(sys.modules.get(m), '__file__', None) or 'nowhere'}" for m in modules)


_warned_turns = False


def _warn_turns(message: str) -> None:
    """Warn once per process that a two-player game did not alternate turns."""
    global _warned_turns
    _warned_turns = True
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def episode_seed(seed: int, env_index: int, episode: int) -> int:
    """The reset seed of episode ``episode`` of environment ``env_index`` in a pool seeded ``seed``."""
    return int(np.random.SeedSequence([seed, env_index, episode]).generate_state(1, np.uint32)[0])


def _check_action(spec: EnvSpec, index: int, is_last: bool, legal: np.ndarray, action) -> int:
    """Environment ``index``'s action as an int, or IllegalActionError (a last step accepts anything)."""
    if is_last:
        return 0
    n = spec.num_actions
    try:
        a = int(action)
        ok = a == action
    except (TypeError, ValueError):
        ok = False
    if not ok or not 0 <= a < n:
        raise IllegalActionError(
            f"{spec.name}: environment {index}: action {action!r} is out of range; allowed 0..{n - 1}"
        )
    if not legal[a]:
        raise IllegalActionError(
            f"{spec.name}: environment {index}: action {a} is not legal here; "
            f"legal actions: {np.flatnonzero(legal).tolist()}"
        )
    return a


class _Slot:
    """One host environment plus the contract bookkeeping the pool adds."""

    def __init__(self, env: HostEnv, index: int, seed: int):
        self.env = env
        self.spec: EnvSpec = env.spec
        self.index = index
        self.seed = seed
        self.episode = 0
        self.episode_step = 0
        self.is_last = True
        self.legal = np.zeros((self.spec.num_actions,), bool)
        self.to_play = -1

    def _broken(self, first: bool, what: str) -> GameContractError:
        method = "reset" if first else "step"
        return GameContractError(f"{self.spec.name} ({type(self.env).__name__}.{method}): {what}")

    def _timestep(self, g: GameStep, first: bool) -> dict:
        spec = self.spec
        if not isinstance(g, GameStep):
            raise self._broken(first, f"returned a {type(g).__name__}; it must return a moozi.envs.host.GameStep")
        obs = np.asarray(g.observation)
        if obs.shape != spec.observation_shape:
            if obs.size != int(np.prod(spec.observation_shape)):
                raise self._broken(first, f"returned an observation of shape {obs.shape}; its spec declares "
                                          f"observation_shape = {spec.observation_shape}")
            obs = obs.reshape(spec.observation_shape)
        legal = np.asarray(g.legal_actions, bool).reshape(-1)
        if legal.shape != (spec.num_actions,):
            raise self._broken(first, f"legal_actions has shape {legal.shape}; expected ({spec.num_actions},) "
                                      "(spec.num_actions)")
        if not math.isfinite(g.reward):
            raise self._broken(first, f"returned reward = {g.reward!r}; rewards must be finite numbers")
        terminated = bool(g.terminated) and not first
        truncated = (bool(g.truncated) and not first) or (
            not terminated and spec.max_episode_steps is not None and self.episode_step >= spec.max_episode_steps
        )
        last = terminated or truncated
        if not last and not legal.any():
            raise self._broken(first, "no legal action on a step that does not end the episode")
        to_play = int(g.to_play)
        if spec.num_players == 2 and not first and not last and to_play == self.to_play and not _warned_turns:
            _warn_turns(f"{spec.name} ({type(self.env).__name__}.step): player {to_play} moved twice in a row; "
                        "the planner and the n-step targets assume two-player games alternate turns "
                        "(docs/custom-game.md), so values are learned for the wrong player after such moves")
        self.to_play = to_play
        self.is_last = last
        self.legal = np.zeros_like(legal) if last else legal
        return dict(
            observation=obs,
            reward=np.float32(0.0 if first else g.reward),
            is_first=first,
            is_last=last,
            is_terminal=terminated,
            legal_actions=self.legal,
            to_play=np.int32(to_play),
        )

    def reset(self) -> dict:
        g = self.env.reset(episode_seed(self.seed, self.index, self.episode))
        self.episode += 1
        self.episode_step = 0
        return self._timestep(g, first=True)

    def check(self, action) -> int:
        """The action as an int, or IllegalActionError (last steps accept anything)."""
        return _check_action(self.spec, self.index, self.is_last, self.legal, action)

    def step(self, action: int) -> dict:
        if self.is_last:
            return self.reset()
        g = self.env.step(action)
        self.episode_step += 1
        return self._timestep(g, first=False)


def _stack(steps: list[dict]) -> TimeStep:
    return TimeStep(
        observation=np.stack([s["observation"] for s in steps]).astype(np.float32),
        reward=np.array([s["reward"] for s in steps], np.float32),
        is_first=np.array([s["is_first"] for s in steps], bool),
        is_last=np.array([s["is_last"] for s in steps], bool),
        is_terminal=np.array([s["is_terminal"] for s in steps], bool),
        legal_actions=np.stack([s["legal_actions"] for s in steps]).astype(bool),
        to_play=np.array([s["to_play"] for s in steps], np.int32),
    )


class _Envs:
    """A slice of a pool's slots in this process (what a worker runs)."""

    def __init__(self, factory: Callable[[], HostEnv], indices: Sequence[int], seed: int):
        self.slots = [_Slot(factory(), i, seed) for i in indices]

    def reset(self, seed: int | None = None) -> list[dict]:
        for s in self.slots:
            s.episode = 0
            s.seed = s.seed if seed is None else int(seed)
        return [s.reset() for s in self.slots]

    def step(self, actions) -> list[dict]:
        checked = [s.check(a) for s, a in zip(self.slots, actions)]  # all checked before any steps
        return [s.step(a) for s, a in zip(self.slots, checked)]

    def spec(self) -> EnvSpec:
        return self.slots[0].spec

    def episode_steps(self) -> list[int]:
        return [s.episode_step for s in self.slots]

    def call(self, method: str, *args) -> list:
        return [getattr(s.env, method)(*args) for s in self.slots]

    def close(self) -> None:
        for s in self.slots:
            s.env.close()


def _worker(conn, factory, indices, seed) -> None:
    # The parent stops the run on Ctrl-C or SIGTERM (sent to the whole process group by Docker, Slurm,
    # systemd) and closes us: our pipe's end is how we learn it (EOFError below).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        envs = _Envs(factory, indices, seed)
        conn.send(("ok", None))
    except BaseException as err:  # report construction errors to the parent
        conn.send(("error", (err, traceback.format_exc())))
        conn.close()
        return
    while True:
        try:
            cmd, args = conn.recv()
        except EOFError:
            break
        if cmd == "close":
            envs.close()
            conn.send(("ok", None))
            break
        try:
            conn.send(("ok", getattr(envs, cmd)(*args)))
        except BaseException as err:
            conn.send(("error", (err, traceback.format_exc())))
    conn.close()


@contextlib.contextmanager
def _sigint_ignored():
    """Ignore SIGINT and SIGTERM while a child process is started (it inherits the dispositions; main thread
    only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Remote:
    """A worker process holding a slice of the pool."""

    def __init__(self, ctx, factory, indices, seed):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, factory, list(indices), seed), daemon=True)
        with _sigint_ignored():  # a Ctrl-C while the child starts up must not print its traceback
            self.proc.start()
        child.close()
        self._receive()

    def send(self, cmd, *args) -> None:
        self.conn.send((cmd, args))

    def _receive(self):
        try:
            status, value = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"environment worker {self.proc.pid} died (exit code {self.proc.exitcode})") from None
        if status == "error":
            err, tb = value
            try:
                err.add_note(f"in environment worker {self.proc.pid}:\n{tb}")
            except AttributeError:
                pass
            raise err
        return value

    def close(self) -> None:
        if self.proc.is_alive():
            try:
                self.send("close")
                self._receive()
            except (OSError, EOFError, RuntimeError):
                pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()


class HostPool:
    """``num_envs`` host environments in lock-step, in this process or in ``num_workers`` processes.

    Args:
      factory: builds one :class:`HostEnv` (a picklable :class:`EnvFactory` when
        ``num_workers > 0``).
      num_envs: B.
      seed: episode ``k`` of environment ``b`` resets with ``episode_seed(seed, b, k)``.
      num_workers: 0 steps every environment here; N > 0 spreads them over N
        processes (spawned, so safe next to JAX's threads).
    """

    def __init__(self, factory: Callable[[], HostEnv], num_envs: int, seed: int = 0, num_workers: int = 0):
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs = {num_envs!r} is invalid: allowed an integer >= 1")
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers = {num_workers!r} is invalid: allowed an integer >= 0")
        self.num_envs = num_envs
        self.seed = int(seed)
        self.num_workers = min(num_workers, num_envs)
        self._local: _Envs | None = None
        self._remotes: list[_Remote] = []
        if self.num_workers == 0:
            self._local = _Envs(factory, range(num_envs), self.seed)
            self.spec = self._local.slots[0].spec
        else:
            ctx = mp.get_context("spawn")
            chunks = np.array_split(np.arange(num_envs), self.num_workers)
            try:
                for chunk in chunks:
                    self._remotes.append(_Remote(ctx, factory, chunk.tolist(), self.seed))
            except BaseException:
                self.close()
                raise
            self._remotes[0].send("spec")
            self.spec = self._remotes[0]._receive()
            self._chunks = [len(c) for c in chunks]
        if self.spec.path != "host":
            raise ValueError(f"{self.spec.name} is a {self.spec.path} environment; use DevicePool for it")
        # The workers' current is_last / legal masks, kept here so that step() checks every action
        # before any worker steps (as _Envs.step does in-process): a bad action leaves the pool unchanged.
        self._is_last = np.ones((num_envs,), bool)
        self._legal = np.zeros((num_envs, self.spec.num_actions), bool)

    def _seen(self, ts: TimeStep) -> TimeStep:
        self._is_last, self._legal = ts.is_last, ts.legal_actions
        return ts

    def _all(self, cmd: str, per_worker_args=None) -> list:
        if self._local is not None:
            return getattr(self._local, cmd)(*(per_worker_args[0] if per_worker_args else ()))
        for i, r in enumerate(self._remotes):
            r.send(cmd, *(per_worker_args[i] if per_worker_args else ()))
        out, error = [], None
        for r in self._remotes:
            try:
                out.extend(r._receive())
            except BaseException as err:  # drain every worker before raising
                error = error or err
        if error is not None:
            raise error
        return out

    def reset(self, seed: int | None = None) -> TimeStep:
        """Start every environment's episode sequence again (``[B]`` first steps), from
        ``seed`` when given (it then replaces the pool's seed)."""
        if seed is not None:
            self.seed = int(seed)
        return self._seen(_stack(self._all("reset", [(seed,)] * max(len(self._remotes), 1))))

    def step(self, actions) -> TimeStep:
        """Step every environment with ``actions [B]`` (environment indices; ignored on last steps)."""
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,):
            raise IllegalActionError(f"{self.spec.name}: actions has shape {actions.shape}; expected ({self.num_envs},)")
        if self._local is not None:
            return _stack(self._local.step(actions.tolist()))
        for b, a in enumerate(actions.tolist()):  # all checked before any worker steps
            _check_action(self.spec, b, self._is_last[b], self._legal[b], a)
        parts, lo = [], 0
        for n in self._chunks:
            parts.append((actions[lo : lo + n].tolist(),))
            lo += n
        return self._seen(_stack(self._all("step", parts)))

    @property
    def episode_step(self) -> np.ndarray:
        """``[B]`` int32 actions taken so far in each environment's current episode."""
        return np.asarray(self._all("episode_steps"), np.int32)

    def call(self, method: str, *args) -> list:
        """Call ``method(*args)`` on every environment (e.g. ``"render"``); results in env order."""
        return self._all("call", [(method, *args)] * max(len(self._remotes), 1))

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
        for r in self._remotes:
            r.close()
        self._remotes = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            for r in self._remotes:
                if r.proc.is_alive():
                    r.proc.kill()
        except Exception:
            pass


class DevicePool:
    """A :class:`~moozi.envs.device.DeviceEnv` behind the :class:`HostPool` interface (numpy in and out).

    Actions are checked like the host pool's (``checked_step``); seeds are
    ``jax.random.key(seed)`` split per environment.
    """

    def __init__(self, env, num_envs: int, seed: int = 0):
        import jax

        from moozi.envs.device import reset_batch

        self.env = env
        self.spec = env.spec
        self.num_envs = num_envs
        self.seed = int(seed)
        self._reset = jax.jit(lambda keys: reset_batch(env, keys))
        self._state = None

    def _np(self, ts) -> TimeStep:
        import jax

        return jax.tree_util.tree_map(np.asarray, ts)

    def reset(self, seed: int | None = None) -> TimeStep:
        import jax

        if seed is not None:
            self.seed = int(seed)
        self._state, ts = self._reset(jax.random.split(jax.random.key(self.seed), self.num_envs))
        return self._np(ts)

    def step(self, actions) -> TimeStep:
        from moozi.envs.device import checked_step

        self._state, ts = checked_step(self.env, self._state, np.asarray(actions))
        return self._np(ts)

    @property
    def episode_step(self) -> np.ndarray:
        return np.asarray(self._state.episode_step, np.int32)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def make_pool(name: str, num_envs: int, seed: int = 0, num_workers: int = 0, modules: Sequence[str] = (),
              **kwargs: Any):
    """A pool of ``num_envs`` copies of the registered environment ``name`` (host or device)."""
    factory = EnvFactory(name, dict(kwargs), tuple(modules))
    env = factory()
    if env.spec.path == "device":
        return DevicePool(env, num_envs, seed)
    if num_workers:
        env.close()
        return HostPool(factory, num_envs, seed, num_workers)
    first = [env]
    return HostPool(lambda: first.pop() if first else factory(), num_envs, seed, 0)
