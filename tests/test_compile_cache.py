"""The on-disk compile cache: where it lives, how it is turned off, that a command fills it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from moozi import compile_cache


def test_where_the_cache_lives():
    home = str(Path("~/.cache").expanduser())
    assert compile_cache.cache_dir({}) == f"{home}/moozi/xla"
    assert compile_cache.cache_dir({"XDG_CACHE_HOME": "/x"}) == "/x/moozi/xla"
    assert compile_cache.cache_dir({"MOOZI_COMPILE_CACHE": "/y/z", "XDG_CACHE_HOME": "/x"}) == "/y/z"
    assert compile_cache.cache_dir({"MOOZI_COMPILE_CACHE": "~/c"}) == str(Path("~/c").expanduser())
    for off in ("off", "OFF", "0", "", " none "):
        assert compile_cache.cache_dir({"MOOZI_COMPILE_CACHE": off}) is None
    env = {"MOOZI_COMPILE_CACHE": "/a", "JAX_COMPILATION_CACHE_DIR": "/b", "HOME": "/h"}
    assert compile_cache.forward_env(env) == {"MOOZI_COMPILE_CACHE": "/a", "JAX_COMPILATION_CACHE_DIR": "/b"}
    assert compile_cache.forward_env({}) == {}
    # a relative folder is the driver's: resolved before it travels to a worker with another cwd
    assert compile_cache.cache_dir({"MOOZI_COMPILE_CACHE": "rel"}) == str(Path.cwd() / "rel")
    assert compile_cache.forward_env({"MOOZI_COMPILE_CACHE": "rel"}) == {"MOOZI_COMPILE_CACHE": str(Path.cwd() / "rel")}
    assert compile_cache.forward_env({"MOOZI_COMPILE_CACHE": "off"}) == {"MOOZI_COMPILE_CACHE": "off"}


def _demo(env: dict) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "MOOZI_COMPILE_CACHE")}
    # cache every program, however fast it compiled, so the check does not depend on this machine's speed
    base["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    return subprocess.run([sys.executable, "-m", "moozi.cli", "demo", "--search", "--simulations", "4"],
                          env={**base, **env}, capture_output=True, text=True, timeout=300)


@pytest.mark.extended  # three moozi processes, two compiling from nothing (~50 s on a slow machine)
def test_a_command_fills_the_cache_and_off_turns_it_off(tmp_path):
    on = tmp_path / "cache"
    out = _demo({"MOOZI_COMPILE_CACHE": str(on)})
    assert out.returncode == 0, out.stderr
    entries = [p for p in on.iterdir() if p.name.endswith("-cache")]
    assert entries, sorted(p.name for p in on.iterdir())
    again = _demo({"MOOZI_COMPILE_CACHE": str(on)})  # loads what the first compiled: the same answers
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-8:] == out.stdout.splitlines()[-8:]
    assert len([p for p in on.iterdir() if p.name.endswith("-cache")]) == len(entries)  # nothing new to compile

    home = tmp_path / "home"  # off: neither the named folder nor the default one is written
    off = _demo({"MOOZI_COMPILE_CACHE": "off", "XDG_CACHE_HOME": str(home), "HOME": str(home)})
    assert off.returncode == 0, off.stderr
    assert not (home / "moozi").exists()
