"""Error types users see. Each message names what was wrong and what is allowed."""

from __future__ import annotations

__all__ = ["ConfigError", "ReplayError"]


class ConfigError(ValueError):
    """A configuration field has a bad value, or an unknown key was given."""


class ReplayError(ValueError):
    """Bad input to the replay buffer, or an operation it cannot do yet."""
