"""`moozi train --profile`: one steady epoch traced and drawn; the trace's arithmetic golden."""

from __future__ import annotations

import gzip
import json

from moozi.cli.main import main
from moozi.observe.profile import lanes_of, outermost, read_trace
from tests.helpers import TINY


def _trace(path):
    events = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
              {"ph": "M", "pid": 1, "tid": 7, "name": "thread_name", "args": {"name": "moozi"}},
              {"ph": "M", "pid": 1, "tid": 8, "name": "thread_name", "args": {"name": "tf_XLAEigen/123"}},
              {"ph": "X", "pid": 1, "tid": 7, "ts": 0, "dur": 100, "name": "$sync_schedule.py:21 epoch"},
              {"ph": "X", "pid": 1, "tid": 7, "ts": 1, "dur": 60, "name": "$sync_schedule.py:46 _act"},
              {"ph": "X", "pid": 1, "tid": 7, "ts": 62, "dur": 30, "name": "$sync_schedule.py:66 _learn"},
              {"ph": "X", "pid": 1, "tid": 8, "ts": 5, "dur": 50, "name": "ThunkExecutor::Execute"},
              {"ph": "X", "pid": 1, "tid": 8, "ts": 10, "dur": 5, "name": "fusion.1"},  # inside the one above
              {"ph": "X", "pid": 1, "tid": 8, "ts": 70, "dur": 10, "name": "ThunkExecutor::Execute"},
              {"ph": "X", "pid": 1, "tid": 8, "ts": 150, "dur": 10, "name": "after the epoch"}]
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def test_the_trace_is_read_and_cut_into_lanes(tmp_path):
    _trace(tmp_path / "t.json.gz")
    events = read_trace(tmp_path / "t.json.gz")
    assert len(events) == 7 and events[0]["lane"] == "/host:CPU / moozi"
    top = outermost(events)
    assert [e["name"] for e in top if e["lane"].endswith("XLAEigen/123")] == ["ThunkExecutor::Execute"] * 2 + [
        "after the epoch"]
    lanes, drawn = lanes_of(events)
    assert lanes == ["phases", "/host:CPU / tf_XLAEigen/123"]  # Python's own calls are the phases lane
    assert [(e["lane"], e["ts"], e["dur"]) for e in drawn if e["lane"] == "phases"] == [("phases", 1, 60),
                                                                                         ("phases", 62, 30)]
    assert not any(e["name"] == "after the epoch" for e in drawn)  # inside the epoch's own span only


def test_train_profile_traces_a_steady_epoch(tmp_path, capsys):
    run = tmp_path / "r"
    overrides = [o for o in TINY if not o.startswith("schedule.max_env_steps")] + ["schedule.max_env_steps=160"]
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), "--profile", *overrides]) == 0
    trace = sorted((run / "profile").glob("plugins/profile/*/perfetto_trace.json.gz"))
    assert len(trace) == 1 and (run / "profile" / "timeline.png").stat().st_size > 1000
    lanes, drawn = lanes_of(read_trace(trace[0]))
    assert lanes[0] == "phases" and {"_act", "_learn"} <= {e["name"].rsplit(" ", 1)[-1] for e in drawn
                                                           if e["lane"] == "phases"}
    log = (run / "train.log").read_text()
    assert "profile of epoch " in log and "ui.perfetto.dev" in log
    assert main(["train", "--resume", str(run), "--profile"]) == 2  # a resumed run is the same run: no new switch
