"""Error types users see. Each message names what was wrong and what is allowed."""

from __future__ import annotations

__all__ = ["ConfigError", "NonFiniteError", "ReplayError", "RunError"]


class ConfigError(ValueError):
    """A configuration field has a bad value, or an unknown key was given."""


class ReplayError(ValueError):
    """Bad input to the replay buffer, or an operation it cannot do yet."""


class RunError(RuntimeError):
    """A run cannot go on, and nothing is wrong with its configuration: its folder is held by another process,
    or its training became non-finite. The message says what happened and what to do."""


class NonFiniteError(RunError):
    """Training produced a non-finite loss or gradient (``update``: the learner's update count where it did);
    the run stops without saving that state."""

    def __init__(self, message: str, update: int):
        super().__init__(message)
        self.update = update

    def __reduce__(self):  # crosses a process boundary (Ray) with its update
        return (type(self), (self.args[0], self.update))
