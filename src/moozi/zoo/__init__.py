"""The zoo: trained agents shipped with moozi (``moozi zoo``; ``zoo:NAME`` wherever a run is taken).

Each agent is an agent file (:mod:`moozi.agent_file`) in this folder, listed in ``zoo.json`` with its game,
its measured strength, the card that measured it, its size and sha256. Shipped files are immutable: a better
agent is a new name or a new version (``tictactoe-v2``), never a rewrite.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

PREFIX = "zoo:"
HERE = Path(__file__).resolve().parent


def index() -> dict[str, dict]:
    """``{name: entry}`` of ``zoo.json`` (entry: file, game, strength, card, bytes, sha256)."""
    path = HERE / "zoo.json"
    return json.loads(path.read_text()) if path.exists() else {}


def resolve(source) -> Path:
    """``zoo:NAME`` -> the shipped agent file's path (checked against its recorded size and sha256); any other
    ``source`` as a path."""
    text = str(source)
    if not text.startswith(PREFIX):
        return Path(source)
    from moozi.checkpoint import CheckpointError

    name = text[len(PREFIX):]
    agents = index()
    if name not in agents:
        raise CheckpointError(f"{text}: no such agent in the zoo; allowed: "
                              + ", ".join(PREFIX + n for n in sorted(agents)) + " (moozi zoo lists them)")
    entry = agents[name]
    path = HERE / entry["file"]
    data = path.read_bytes() if path.is_file() else b""
    if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise CheckpointError(f"{text}: the shipped file {path} is missing or altered (size or sha256 differ "
                              "from zoo.json); reinstall moozi")
    return path
