"""Public validation helpers: every config and boundary check fails the same way.

Each helper raises :class:`moozi.errors.ConfigError` whose message names the
field as ``owner.name``, the bad value and what is allowed, e.g.
``replay.capacity = 0 is invalid: allowed an integer >= 1``.
"""

from __future__ import annotations

from typing import Any

from moozi.errors import ConfigError

__all__ = ["fail", "positive_int", "nonneg_int", "number_in", "choice", "boolean"]


def fail(owner: str, name: str, value: Any, allowed: str) -> None:
    """Raise ``ConfigError('owner.name = value is invalid: allowed ...')``."""
    raise ConfigError(f"{owner}.{name} = {value!r} is invalid: allowed {allowed}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(owner: str, name: str, value: Any) -> None:
    if not _is_int(value) or value < 1:
        fail(owner, name, value, "an integer >= 1")


def nonneg_int(owner: str, name: str, value: Any) -> None:
    if not _is_int(value) or value < 0:
        fail(owner, name, value, "an integer >= 0")


def number_in(owner: str, name: str, value: Any, lo: float, hi: float, lo_open: bool = False,
              hi_open: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        ok = (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
    if not ok:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        fail(owner, name, value, f"a number in {lb}{lo}, {hi}{rb}")


def choice(owner: str, name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        fail(owner, name, value, "one of " + ", ".join(repr(c) for c in choices))


def boolean(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        fail(owner, name, value, "true or false")
