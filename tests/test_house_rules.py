"""The size rules of issue 46, read from the source: no room in ``src/moozi`` over 600 lines, the Trainer keeps
wiring and ``run()`` (its file at most 300 lines, at most 15 methods), no driver function over 60 lines, only the
fleet and the learner client call components by method name, and no test reaches into the Trainer's privates."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "moozi"
CALLERS = {"fleet.py", "learner_client.py", "distributed.py", "backend.py"}  # who may write backend.call(


def test_no_file_over_600_lines():
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > 600}
    assert not long, long


def test_the_trainer_keeps_wiring_and_run():
    path = SRC / "driver" / "trainer.py"
    assert len(path.read_text().splitlines()) <= 300
    trainer = next(n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef) and n.name == "Trainer")
    methods = [n.name for n in trainer.body if isinstance(n, ast.FunctionDef)]
    assert len(methods) <= 15, methods


def test_no_driver_function_over_60_lines():
    long = {}
    for path in (SRC / "driver").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long[f"{path.name}:{node.name}"] = node.end_lineno - node.lineno + 1
    assert not long, long


def test_only_the_fleet_and_the_learner_client_name_component_methods():
    found = [p.name for p in (SRC / "driver").glob("*.py") if "backend.call(" in p.read_text() and p.name not in CALLERS]
    assert not found, found


def test_no_test_touches_a_private_member_of_the_trainer():
    private = re.compile(r"\btrainer\._[a-z]")
    found = [f"{p.name}:{i}" for p in (ROOT / "tests").glob("*.py") if p.name != Path(__file__).name
             for i, line in enumerate(p.read_text().splitlines(), 1) if private.search(line)]
    assert not found, found


def test_no_test_module_imports_another():
    """Shared test helpers live in tests/helpers.py (or conftest.py), never in another test module (issue 90)."""
    found = []
    for p in (ROOT / "tests").glob("test_*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{p.name}: {n}" for n in names if n.startswith("tests.test_")]
    assert not found, found


def test_benchmarks_hold_only_what_a_user_runs():
    """benchmarks/ keeps at most 12 scripts a user runs; the lab (diagnosis, card tools) is research/, which the
    wheel does not package (issue 90)."""
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))
    assert len(scripts) <= 12, scripts
    assert (ROOT / "research" / "card_archive.py").is_file()
    assert 'where = ["src"]' in (ROOT / "pyproject.toml").read_text()  # only src/ goes into the wheel


def test_no_function_in_src_over_100_lines():
    """A function longer than a screenful and a half is split (issue 90: build_parser was 343 lines)."""
    long = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 100:
                long[f"{path.relative_to(SRC)}:{node.name}"] = node.end_lineno - node.lineno + 1
    assert not long, long


def test_preset_comments_are_a_header_and_a_link():
    """A preset's comments: at most three lines, then the link to why each setting (docs/presets.md) and its
    card; the measurement sagas live in docs/presets.md, one section per preset (issue 90)."""
    guide = (ROOT / "docs" / "presets.md").read_text()
    for path in sorted((SRC / "presets").glob("*.yaml")):
        comments = [line for line in path.read_text().splitlines() if line.lstrip().startswith("#")]
        assert len(comments) <= 4 and comments[-1].startswith(f"# Why each setting: docs/presets.md#{path.stem}"), path.name
        assert f"\n## {path.stem}\n" in guide, path.name


def test_the_schedules_catch_no_death():
    """A worker's or the learner's death is sorted out in one place (RunContext.collect, over a Pending record);
    the schedules hold no ``except WorkerDied`` (issue 90)."""
    found = [p.name for p in (SRC / "driver").glob("*_schedule.py") if "except WorkerDied" in p.read_text()]
    assert sorted(p.name for p in (SRC / "driver").glob("*_schedule.py")) == ["async_schedule.py", "device_schedule.py",
                                                                              "sync_schedule.py"]
    assert not found, found


def test_the_metrics_row_is_a_type():
    """The schedules gather a row through Gathered's methods, never a dict of lists with side-channel keys
    (issue 90: 14 setdefault writes and two "_lag" keys before)."""
    found = [f"{p.name}:{i}" for p in (SRC / "driver").glob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if "row.setdefault(" in line or '"_lag' in line or '"_segment' in line]
    assert not found, found
