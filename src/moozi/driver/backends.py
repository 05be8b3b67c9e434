"""The backend a run's config names: local (in-process, never imports Ray) or Ray (imported only then)."""

from __future__ import annotations

from moozi.driver.backend import Backend, LocalBackend


def make_backend(config, run_dir) -> Backend:
    """The backend ``config.distributed.backend`` names (Ray imported only for ``"ray"``)."""
    if config.distributed.backend == "local":
        return LocalBackend()
    from moozi.driver.distributed import RayBackend

    return RayBackend(config.distributed, run_dir)
