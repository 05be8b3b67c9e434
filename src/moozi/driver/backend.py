"""Where components run: the backend interface the schedules are written against, and the local backend.

A backend hosts components (plain classes from :mod:`moozi.hosts`,
built from plain data: a config dict and integers, never code or JAX arrays)
and calls their methods:

* ``spawn(name, factory, *args, resources=Resources())`` -> a handle;
* ``call(handle, method, *args)`` -> a future (arguments may be futures: the
  callee receives their values, so a published parameter set travels by
  reference, once per version);
* ``wait(futures, num_returns=1, timeout=None)`` -> ``(ready, pending)``;
* ``get(future)`` -> the value, or :class:`WorkerDied` if the component's
  process died (any other error in the component is raised as itself);
* ``put(value)`` -> a future holding ``value``;
* ``kill(handle)``, ``shutdown()``.

:class:`LocalBackend` (the default) runs everything in this process, eagerly
and deterministically, and never imports Ray; :mod:`moozi.driver.distributed`
holds the Ray backend (the only module that imports Ray).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence


class WorkerDied(RuntimeError):
    """A component's process died (killed, out of memory, its node lost); the handle is unusable."""

    def __init__(self, name: str, detail: str = ""):
        super().__init__(f"worker {name} died" + (f": {detail}" if detail else ""))
        self.name = name


@dataclass(frozen=True)
class Resources:
    """What one component needs: CPUs (also its XLA thread count) and GPUs.

    ``own_cores``: the component runs while the others do (the async
    learner) and keeps its cores to itself where its node has cores to spare
    (Ray's core pinning; the local backend ignores it)."""

    cpus: float = 1.0
    gpus: float = 0.0
    own_cores: bool = False


DEFAULT_RESOURCES = Resources()


class Backend(Protocol):
    name: str

    def spawn(self, name: str, factory: Callable, *args, resources: Resources = DEFAULT_RESOURCES) -> Any: ...

    def call(self, handle, method: str, *args) -> Any: ...

    def wait(self, futures: Sequence, num_returns: int = 1, timeout: float | None = None) -> tuple[list, list]: ...

    def get(self, future) -> Any: ...

    def put(self, value) -> Any: ...

    def kill(self, handle) -> None: ...

    def reserve(self, requests: dict[str, Resources]) -> None: ...

    def ready(self, handles) -> dict[str, dict]: ...

    def info(self, handle) -> Any: ...

    def shutdown(self) -> None: ...


class LocalFuture:
    """A call already made: its value or its error."""

    __slots__ = ("value", "error")

    def __init__(self, value=None, error: BaseException | None = None):
        self.value = value
        self.error = error


@dataclass
class LocalHandle:
    name: str
    instance: Any
    alive: bool = True


class LocalBackend:
    """Every component an object in this process; a call runs at once (deterministic order)."""

    name = "local"

    def spawn(self, name: str, factory: Callable, *args, resources: Resources = DEFAULT_RESOURCES) -> LocalHandle:
        return LocalHandle(name, factory(*[_value(a) for a in args]))

    def call(self, handle: LocalHandle, method: str, *args) -> LocalFuture:
        if not handle.alive:
            return LocalFuture(error=WorkerDied(handle.name, "it was killed"))
        try:
            return LocalFuture(getattr(handle.instance, method)(*[_value(a) for a in args]))
        except Exception as e:  # handed to whoever gets the future, like a remote error
            return LocalFuture(error=e)

    def wait(self, futures: Sequence[LocalFuture], num_returns: int = 1, timeout: float | None = None):
        futures = list(futures)
        return futures, []

    def get(self, future: LocalFuture):
        if future.error is not None:
            raise future.error
        return future.value

    def put(self, value) -> LocalFuture:
        return LocalFuture(value)

    def kill(self, handle: LocalHandle) -> None:
        if handle.alive:
            handle.alive = False
            close = getattr(handle.instance, "close", None)
            if close is not None:
                close()

    def reserve(self, requests: dict) -> None:
        """Nothing to reserve in one process."""

    def ready(self, handles) -> dict:
        from moozi.observe.machine import cpu_description

        cpu = cpu_description()
        return {h.name: {"pid": os.getpid(), "node": "local", "cpu": cpu} for h in handles}

    def stats(self, pids: dict[str, int]) -> dict[str, float]:
        from moozi.observe.memory import rss_mb

        return {"mem/components_rss_mb": rss_mb()}

    def info(self, handle: LocalHandle) -> LocalFuture:
        return LocalFuture(self.ready([handle])[handle.name])

    def instance(self, handle: LocalHandle):
        """The component object itself (local backend only: tests and tools look inside)."""
        return handle.instance

    def shutdown(self) -> None:
        pass


def _value(x):
    if isinstance(x, LocalFuture):
        if x.error is not None:
            raise x.error
        return x.value
    return x
