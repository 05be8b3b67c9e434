"""What the research tests share: a research script imported by name."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_script(name: str):
    """``research/NAME.py`` imported as a module (its functions tested with hand-computed answers)."""
    spec = importlib.util.spec_from_file_location(f"moozi_research_{name}", ROOT / "research" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
