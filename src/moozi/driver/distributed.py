"""The Ray backend: the only module that imports Ray (``pip install 'moozi[ray]'``).

Each component (:mod:`moozi.hosts`) becomes one Ray actor in one
placement group reserved up front (a request the cluster cannot satisfy
fails within ``distributed.placement_timeout_s`` naming what is missing).
A worker's XLA threads are limited to the CPUs it reserved (by its CPU affinity,
which XLA sizes its thread pool from). Ray's own actor
restarts are off: the driver restarts a dead worker itself, with a new
incarnation (new random streams), see :mod:`moozi.driver.trainer`.

Without ``distributed.address`` moozi starts a private Ray on this machine:
bound to 127.0.0.1, no dashboard, a bounded object store, its temporary folder
under the run directory (or a short folder in /tmp when that path is too long
for Ray's sockets), and stops it on exit, on error and on Ctrl-C.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import ray

from moozi import compile_cache, xla_tuning
from moozi.driver.backend import DEFAULT_RESOURCES, Resources, WorkerDied
from moozi.observe.machine import cpu_description

log = logging.getLogger("moozi")

# Ray's unix socket paths (session folder + sockets/...) must stay under ~107 bytes.
_MAX_TEMP_DIR = 40


def _whole(cpus: float) -> int:
    """The cores (and threads) a CPU request stands for: at least one."""
    return max(int(cpus), 1)


def pinned_cores(cores: list[int], start: int, cpus: float, skip: int = 0) -> list[int] | None:
    """The cores a component keeps to (``None``: all of ``cores``, no pinning): ``cpus`` of them from
    position ``start`` (round-robin) of ``cores`` without its first ``skip`` (the cores components with
    ``own_cores`` hold on this node; when they hold all, nothing is skipped)."""
    pool = cores[skip:] if 0 < skip < len(cores) else list(cores)
    want = _whole(cpus)
    if want >= len(pool):
        return pool if len(pool) < len(cores) else None
    return sorted({pool[(start + i) % len(pool)] for i in range(want)})


def _pin(start: int, cpus: float, skip: int = 0) -> None:
    """Keep this process (and so XLA's thread pool, sized from the affinity mask) on its cores
    (:func:`pinned_cores`). XLA:CPU ignores thread-count flags in current JAX; its pool follows the affinity mask."""
    if not hasattr(os, "sched_setaffinity"):
        return
    cores = pinned_cores(sorted(os.sched_getaffinity(0)), start, cpus, skip)
    if cores is not None:
        os.sched_setaffinity(0, set(cores))


def core_plan(requests: dict[str, Resources], nodes: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Each component's ``(start, skip)`` for :func:`_pin`, node by node (``nodes``: component -> node id).

    Components with ``own_cores`` take the node's first cores in order; the
    others go round-robin, ``cpus`` at a time, over the cores left (all of the
    node's when nothing is left). So an async learner never shares its core
    with a tester or reanalyzer on a node with cores to spare, and in a sync
    run (no ``own_cores``) every component spreads over all cores.
    """
    plan: dict[str, tuple[int, int]] = {}
    held: dict[str, int] = {}
    for name, res in requests.items():
        if res.own_cores:
            node = nodes.get(name, "")
            plan[name] = (held.get(node, 0), 0)
            held[node] = held.get(node, 0) + _whole(res.cpus)
    ranks: dict[str, int] = {}
    for name, res in requests.items():
        if not res.own_cores:
            node = nodes.get(name, "")
            plan[name] = (ranks.get(node, 0), held.get(node, 0))
            ranks[node] = ranks.get(node, 0) + _whole(res.cpus)
    return plan


def keep_driver_on_host() -> None:
    """Keep the driver's JAX on the CPU (call before it first computes anything).

    The driver of a Ray run hands numpy between components; it reserves no
    accelerator, so it must not take one: JAX gives the first process to touch a
    GPU 75% of its memory, which would leave the learner, the component that
    asked for the GPU, the rest (and the driver's small computations would queue
    kernels beside the learner's). Tournaments and gating, which the driver runs
    itself, run on the CPU too. A ``JAX_PLATFORMS`` the user set is kept.
    """
    if os.environ.get("JAX_PLATFORMS"):
        return
    import jax

    jax.config.update("jax_platforms", "cpu")


def _log_to(path: str, name: str) -> None:
    """This component's log in the run directory (``RUN/logs/NAME.log``, appended to by a restarted one): the
    ``moozi`` logger from INFO and everything else from WARNING (Python warnings included); Ray's own session
    folder keeps the raw output as before."""
    import logging

    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path)
    except OSError:  # a node that cannot reach the run directory logs only to Ray's session folder
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    moozi = logging.getLogger("moozi")
    moozi.setLevel(logging.INFO)
    moozi.addHandler(handler)  # still propagates: its warnings reach Ray's output as before
    root = logging.getLogger()
    warnings_only = logging.FileHandler(path)
    warnings_only.setFormatter(handler.formatter)
    warnings_only.setLevel(logging.WARNING)
    warnings_only.addFilter(lambda record: not record.name.startswith("moozi"))  # those are in the file already
    root.addHandler(warnings_only)
    logging.captureWarnings(True)
    moozi.info("component %s started (pid %d)", name, os.getpid())


class _Host:
    """A component inside a Ray actor."""

    def __init__(self, pin, log_path, name, gpus, factory, *args):
        self.gpus = float(gpus)
        if log_path is not None:
            _log_to(log_path, name)
        if pin is not None:
            _pin(*pin)  # before the component imports JAX and XLA sizes its thread pool
        compile_cache.enable()  # this node's cache: the run's later processes load what the first compiled
        self.obj = factory(*args)

    def call(self, method: str, *args):
        return getattr(self.obj, method)(*args)

    def info(self) -> dict:
        import socket

        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        context = ray.get_runtime_context()
        out = {"pid": os.getpid(), "node": context.get_node_id(), "hostname": socket.gethostname(),
               "cores": cores, "cpu": cpu_description(), "gpus": self.gpus, "ray_worker": context.get_worker_id()}
        if self.gpus:
            try:
                out["gpu_ids"] = [str(g) for g in ray.get_runtime_context().get_accelerator_ids().get("GPU", [])]
            except AttributeError:  # an older Ray
                out["gpu_ids"] = ray.get_gpu_ids()
        if "jax" in sys.modules:  # where this component's computations run
            import jax

            out["jax_devices"] = [str(d) for d in jax.devices()]
        return out


class RayHandle:
    def __init__(self, name: str, actor, resources: Resources):
        self.name = name
        self.actor = actor
        self.resources = resources


def _thread_env(cpus: float, gpus: float) -> dict[str, str]:
    """Environment variables that keep a worker's BLAS threads within its CPUs (XLA's: :func:`_pin`)."""
    n = _whole(cpus)
    env = {"OMP_NUM_THREADS": str(n), "OPENBLAS_NUM_THREADS": str(n), "MKL_NUM_THREADS": str(n),
           **compile_cache.forward_env(), **xla_tuning.forward_env()}
    if gpus == 0:
        env["JAX_PLATFORMS"] = "cpu"
    elif gpus < 1:  # a share of one GPU: JAX takes memory as it needs it, up to that share (others share the card)
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{gpus:.3f}"
    return env


RAY_SESSIONS_KEPT = 3  # RUN/ray keeps the logs of this many earlier sittings' private Ray sessions


def prune_ray_sessions(folder: Path, keep: int = RAY_SESSIONS_KEPT) -> list[Path]:
    """Delete all but the newest ``keep`` of Ray's ``session_*`` folders in ``folder`` (each sitting of a run
    on a private Ray leaves one, with its logs); the folders deleted, oldest first."""
    sessions = sorted((p for p in folder.glob("session_*") if p.is_dir() and not p.is_symlink()),
                      key=lambda p: p.stat().st_mtime)
    gone = sessions[:-keep] if keep > 0 else sessions
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone


@contextlib.contextmanager
def own_process_group():
    """While ``ray.init`` starts a private Ray, its daemons (and so the workers the raylet forks) start in a
    process group of their own, as Ray does on Windows: a SIGTERM or SIGINT sent to the run's process group (a
    container runtime, Slurm, systemd, a terminal) then reaches only the driver, which stops the run cleanly
    (final checkpoint, exit 143) and shuts Ray down, instead of Ray dying under it. They still die with the
    driver (Ray's kernel fate sharing, ``PR_SET_PDEATHSIG``); without that support nothing is changed."""
    from ray._private import services, utils

    base = getattr(services, "ConsolePopen", None)
    if base is None or not sys.platform.startswith("linux") or not utils.detect_fate_sharing_support():
        yield
        return

    class Grouped(base):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("process_group", 0)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = Grouped
    try:
        yield
    finally:
        services.ConsolePopen = base


class RayBackend:
    """Components as Ray actors (see the module doc)."""

    name = "ray"

    def __init__(self, config, run_dir):
        self.config = config
        self.run_dir = Path(run_dir).resolve()
        self._started = False
        self._temp = None
        self._pg = None
        self._bundles: dict[str, int] = {}
        self._cores: dict[str, tuple[int, int]] = {}
        self._daemons = None  # (when found, pids of Ray's daemons on this machine)
        self._names: dict[str, str] = {}  # actor id (hex) -> component name, to tell who died
        if ray.is_initialized():
            raise RuntimeError("Ray is already initialised in this process; moozi starts (or connects to) its own")
        if config.address:
            if os.environ.get("RAY_AUTH_MODE", "disabled") != "token":
                logging.getLogger("moozi").warning(
                    "RAY_AUTH_MODE is not 'token' here: the cluster at %s is likely running without "
                    "authentication, open to anyone who reaches its ports; start its nodes with "
                    "RAY_AUTH_MODE=token (docs/distributed.md, A cluster)", config.address)
            ray.init(address=config.address, include_dashboard=False, log_to_driver=True,
                     runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
        else:
            self._temp = self._temp_dir()
            with warnings.catch_warnings(), own_process_group():  # Ray forks+execs its daemons at once: JAX's
                warnings.simplefilter("ignore", RuntimeWarning)  # fork warning does not apply
                ray.init(num_cpus=config.num_cpus or 64, include_dashboard=False, _temp_dir=str(self._temp),
                         object_store_memory=config.object_store_mb * 1024 * 1024, _node_ip_address="127.0.0.1",
                         log_to_driver=False, configure_logging=False)
            self._started = True
        atexit.register(self.shutdown)

    def _temp_dir(self) -> Path:
        wanted = self.run_dir / "ray"
        if len(str(wanted)) <= _MAX_TEMP_DIR:
            wanted.mkdir(parents=True, exist_ok=True)
            prune_ray_sessions(wanted)
            return wanted
        short = Path(tempfile.mkdtemp(prefix="moozi-ray-"))
        try:  # a pointer from the run directory, so the user finds Ray's logs
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "ray-temp-dir.txt").write_text(f"{short}\n")
        except OSError:
            pass
        return short

    # --- resources --------------------------------------------------------------------

    def reserve(self, requests: dict[str, Resources]) -> None:
        """Reserve one bundle per component in one placement group; fail clearly if the cluster cannot."""
        from ray.util.placement_group import placement_group

        bundles = []
        for i, (name, res) in enumerate(requests.items()):
            bundle = {"CPU": float(res.cpus)}
            if res.gpus:
                bundle["GPU"] = float(res.gpus)
            bundles.append(bundle)
            self._bundles[name] = i
        self._pg = placement_group(bundles, strategy="SPREAD")
        ready, _ = ray.wait([self._pg.ready()], timeout=self.config.placement_timeout_s)
        if not ready:
            need_cpu = sum(b["CPU"] for b in bundles)
            need_gpu = sum(b.get("GPU", 0.0) for b in bundles)
            have = ray.cluster_resources()
            missing = []
            if need_cpu > have.get("CPU", 0.0):
                missing.append(f"{need_cpu:g} CPUs requested, the cluster has {have.get('CPU', 0.0):g}")
            if need_gpu > have.get("GPU", 0.0):
                missing.append(f"{need_gpu:g} GPUs requested, the cluster has {have.get('GPU', 0.0):g}")
            if not missing:
                missing.append("no node can hold one of the bundles " + str(bundles))
            raise RuntimeError("the Ray cluster cannot place this run within "
                               f"{self.config.placement_timeout_s:g} s: " + "; ".join(missing)
                               + " (reduce distributed.train_workers / reanalyze_workers / cpus_per_worker or "
                               "the *_gpus keys, or add nodes)")
        try:  # which node holds each bundle, so components on one node share its cores sensibly (_pin)
            from ray.util import placement_group_table

            by_index = {int(i): n for i, n in placement_group_table(self._pg)["bundles_to_node_id"].items()}
            nodes = {name: by_index.get(i, "") for name, i in self._bundles.items()}
        except Exception:  # not known: as on one node (moozi's own Ray always is)
            nodes = {}
        self._cores = core_plan(requests, nodes)

    # --- the backend interface --------------------------------------------------------

    def spawn(self, name: str, factory, *args, resources: Resources = DEFAULT_RESOURCES) -> RayHandle:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        options = {"num_cpus": resources.cpus, "num_gpus": resources.gpus, "max_restarts": 0,
                   "max_concurrency": 1, "name": None,
                   "runtime_env": {"env_vars": _thread_env(resources.cpus, resources.gpus)}}
        if self._pg is not None and name in self._bundles:
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=self._pg, placement_group_bundle_index=self._bundles[name])
        start, skip = self._cores.get(name, (0, 0))
        pin = (start, resources.cpus, skip)
        log_path = str(self.run_dir / "logs" / f"{name}.log")
        actor = ray.remote(_Host).options(**options).remote(pin, log_path, name, resources.gpus, factory, *args)
        self._names[actor._actor_id.hex()] = name
        return RayHandle(name, actor, resources)

    def ready(self, handles) -> dict[str, dict]:
        """Wait until components are built; their pid / node. A failed build raises its own error."""
        refs = [h.actor.info.remote() for h in handles]
        out = {}
        for h, ref in zip(handles, refs):
            try:
                out[h.name] = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                raise RuntimeError(f"{h.name} could not start: {_cause(e)}") from None
        return out

    def info(self, handle: RayHandle):
        """A future of the component's pid / node (ready once it is built)."""
        return _Ref(handle.actor.info.remote(), handle.name)

    def call(self, handle: RayHandle, method: str, *args):
        # A future passed as an argument goes as the bare ObjectRef: Ray hands the callee its value
        # (read from the object store, where it was written once).
        ref = handle.actor.call.remote(method, *[a.ref if isinstance(a, _Ref) else a for a in args])
        return _Ref(ref, handle.name)

    def wait(self, futures, num_returns: int = 1, timeout: float | None = None):
        by_ref = {f.ref: f for f in futures}
        ready, pending = ray.wait(list(by_ref), num_returns=min(num_returns, len(by_ref)), timeout=timeout)
        return [by_ref[r] for r in ready], [by_ref[r] for r in pending]

    def get(self, future):
        if isinstance(future, _Ref):
            try:
                return ray.get(future.ref)
            except (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError,
                    ray.exceptions.RayActorError) as e:
                # Name the component that died: a call whose argument was another's pending result (a
                # reanalyze batch, params from the learner) fails with that component's death, not its own.
                raise WorkerDied(self._names.get(e.actor_id, future.name), _cause(e)) from None
            except ray.exceptions.RayTaskError as e:
                raise e.as_instanceof_cause() from None
        return ray.get(future)

    def stats(self, pids: dict[str, int]) -> dict[str, float]:
        """Memory of this machine's part of the run: the components' and Ray's daemons' resident memory, and
        the object store's resident pages (the raylet's shared memory), in MB."""
        from moozi.observe.memory import pids_with, rss_mb, shared_mb

        now = time.monotonic()
        if self._daemons is None or now - self._daemons[0] > 60.0:  # a /proc scan: not at every row
            self._daemons = (now, pids_with(str(self._temp)) if self._temp is not None else [])
        daemons = self._daemons[1]
        store = max((shared_mb(p) for p in daemons), default=0.0)
        return {"mem/components_rss_mb": sum(rss_mb(p) for p in pids.values()) + rss_mb(),
                "mem/ray_daemons_rss_mb": sum(rss_mb(p) for p in daemons),
                "mem/object_store_resident_mb": store}

    def put(self, value):
        return _Ref(ray.put(value), "driver")

    def kill(self, handle: RayHandle) -> None:
        ray.kill(handle.actor, no_restart=True)

    def timeline(self, path: str) -> None:
        """Ray's timeline of the tasks so far (Chrome-trace JSON) to ``path`` (``output.profile_epoch``)."""
        ray.timeline(filename=path)

    def shutdown(self) -> None:
        if not ray.is_initialized():
            return
        try:
            if self._pg is not None:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(self._pg)
        except Exception:
            pass
        ray.shutdown()
        if self._started and self._temp is not None and not str(self._temp).startswith(str(self.run_dir)):
            shutil.rmtree(self._temp, ignore_errors=True)


class _Ref:
    """An ObjectRef with the name of the component that produces it (for error messages)."""

    __slots__ = ("ref", "name")

    def __init__(self, ref, name: str):
        self.ref = ref
        self.name = name


def _cause(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[-1][:300] if text else type(e).__name__
