"""The card tools of research/: card_archive adds run records to a card's compressed archive and keeps its
raw.json true; card_run_entry writes a long run's entry into a card's summary.json."""

import hashlib
import json

import pytest

from research.tests.helpers import load_script


def test_card_archive_adds_run_records_without_weights_and_keeps_the_record_true(tmp_path):
    card_archive = load_script("card_archive")

    card = tmp_path / "docs" / "results" / "demo" / "seed1"
    run = tmp_path / "runs" / "r0"
    (run / "checkpoints" / "100").mkdir(parents=True)
    (run / "tb").mkdir()
    (run / "ratings").mkdir()
    (run / "metrics.jsonl").write_text('{"env_steps": 5}\n')
    (run / "ratings" / "games.jsonl").write_text("{}\n")
    (run / "checkpoints" / "100" / "params.msgpack").write_bytes(b"weights")
    (run / "tb" / "events.out.tfevents.1").write_bytes(b"tb")
    (run / "plot.png").write_bytes(b"png")

    record = card_archive.add_runs(card, [run], root=tmp_path)
    (entry,) = record["archives"]
    assert entry["archive"] == "results-data/demo__seed1__r0.tar.xz"
    assert entry["files"] == ["r0/metrics.jsonl", "r0/ratings/games.jsonl"]
    assert entry["raw_bytes"] == len('{"env_steps": 5}\n') + 3
    data = (tmp_path / entry["archive"]).read_bytes()
    assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert json.loads((card / "raw.json").read_text()) == record
    assert card_archive.archive_bytes({"a": b"1", "b": b"2"}) == card_archive.archive_bytes({"b": b"2", "a": b"1"})

    # an archive is written once: the same run again is refused; a second run is a new file beside it
    with pytest.raises(SystemExit, match="written once"):
        card_archive.add_runs(card, [run], root=tmp_path)
    (run / "ratings" / "games.jsonl").unlink()
    record = card_archive.add_runs(card, [run], names=["r1"], root=tmp_path)
    assert [e["archive"] for e in record["archives"]] == ["results-data/demo__seed1__r0.tar.xz",
                                                          "results-data/demo__seed1__r1.tar.xz"]
    assert record["archives"][1]["files"] == ["r1/metrics.jsonl"]
    assert (tmp_path / "results-data/demo__seed1__r0.tar.xz").read_bytes() == data  # untouched

    # a card written before one archive per run keeps its archive as the first entry
    old = tmp_path / "docs" / "results" / "old"
    old.mkdir(parents=True)
    (old / "raw.json").write_text(json.dumps({"archive": entry["archive"], "files": entry["files"],
                                              "bytes": entry["bytes"], "sha256": entry["sha256"],
                                              "raw_bytes": entry["raw_bytes"]}))
    record = card_archive.add_runs(old, [run], names=["r2"], root=tmp_path)
    assert [e["archive"] for e in record["archives"]] == [entry["archive"], "results-data/old__r2.tar.xz"]

    # an archive that does not match its record is never overwritten, nor anything added beside it
    (tmp_path / entry["archive"]).write_bytes(b"broken")
    with pytest.raises(SystemExit, match="does not match"):
        card_archive.add_runs(card, [run], names=["r3"], root=tmp_path)
    assert (tmp_path / entry["archive"]).read_bytes() == b"broken"
    assert not (tmp_path / "results-data/demo__seed1__r3.tar.xz").exists()


def test_card_run_entry_writes_a_long_runs_entry_from_its_folder(tmp_path):
    card_run_entry = load_script("card_run_entry")

    run = tmp_path / "runs" / "si"
    run.mkdir(parents=True)
    rows = [{"step": 100, "wall_s": 60.0, "env_steps": 100, "updates": 4, "perf/env_steps_per_s": 1.0},
            {"step": 100, "wall_s": 66.0, "test/return_mean": 12.345, "test/return_min": 3.0, "test/return_max": 20.0},
            {"step": 250, "wall_s": 150.0, "env_steps": 250, "updates": 10, "perf/env_steps_per_s": 1.0}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3')  # a cut line
    (run / "commands.txt").write_text("t0  moozi train A\n\nt1  moozi train A\n")
    (run / "eval.json").write_text('{"games": 64, "return_mean": 84.0}')
    card = tmp_path / "card"
    card.mkdir()
    old = {"run": "si", "overrides_why": "by hand", "status": "old"}
    (card / "summary.json").write_text(json.dumps({"budget_env_steps": 1000, "runs": [{"run": "other"}, old]}))

    entry = card_run_entry.write_entry(card, run, "sitting 2 done", {"code": "abc"}, {"eval_final": run / "eval.json"})
    assert (entry["env_steps"], entry["updates"], entry["minutes"], entry["share_of_budget"]) == (250, 10, 2.5, 0.25)
    assert entry["sittings"] == ["t0  moozi train A", "t1  moozi train A"]
    assert entry[card_run_entry.TESTS_KEY] == [[100, 4, 1.1, 12.35, 3.0, 20.0]]  # updates from the training row
    assert (entry["status"], entry["code"], entry["overrides_why"]) == ("sitting 2 done", "abc", "by hand")
    assert entry["eval_final"]["return_mean"] == 84.0
    summary = json.loads((card / "summary.json").read_text())
    assert [r["run"] for r in summary["runs"]] == ["other", "si"] and summary["runs"][1] == entry

    with pytest.raises(SystemExit, match="key=value"):
        card_run_entry.main([str(card), str(run), "--status", "x", "--set", "novalue"])
    with pytest.raises(SystemExit, match="no training records"):
        card_run_entry.run_entry(tmp_path)


def test_thesis_protocol_summary_merges_instead_of_replacing():
    """Folders do not outlive every session: a seed whose folder is gone keeps its entry; a PPO seed's folder replaces
    its entry; a moozi run started over (another identity in its folder's run.json, or fewer frames where an
    identity is missing) leaves the old entry marked lost, even once the restart has more frames; the aggregates are
    over the merged seeds (PPO finals 10, 20 and 60: mean 30)."""
    from research.thesis_protocol_summary import GAMES, LOST, merge

    def ppo(seed, final):
        return {"seed": seed, "final_mean": final}

    empty = {g: {"seeds": []} for g in GAMES}
    old = {**empty, "breakout": {"seeds": [{"seed": 0, "run": "tp-breakout-s0", "env_frames": 500, "status": "running"},
                                           {"seed": 1, "run": "tp-breakout-s1", "env_frames": 900, "status": "running"}]},
           "freeway": {"seeds": [{"seed": 0, "env_frames": 500, "status": "running", "run_id": "tp-freeway-s0-aaaaaa"},
                                 {"seed": 1, "env_frames": 500, "status": "running", "run_id": "tp-freeway-s1-bbbbbb"}]},
           "ppo": {g: {"seeds": []} for g in GAMES}, "ppo_gymnax_protocol": {g: {"seeds": []} for g in GAMES},
           "machine": "by hand"}
    old["ppo"]["breakout"] = {"seeds": [ppo(0, 10.0), ppo(1, 99.0)]}
    new = {**empty, "breakout": {"seeds": [{"seed": 0, "run": "tp-breakout-s0", "env_frames": 100,
                                            "status": "running"}]},
           "freeway": {"seeds": [{"seed": 0, "env_frames": 700, "status": "running", "run_id": "tp-freeway-s0-cccccc"},
                                 {"seed": 1, "env_frames": 400, "status": "running", "run_id": "tp-freeway-s1-bbbbbb"}]},
           "ppo": {g: {"seeds": []} for g in GAMES}, "ppo_gymnax_protocol": {g: {"seeds": []} for g in GAMES}}
    new["ppo"]["breakout"] = {"seeds": [ppo(1, 20.0), ppo(2, 60.0)]}
    out = merge(old, new)
    seeds = [(s["seed"], s["env_frames"], s["status"]) for s in out["breakout"]["seeds"]]
    assert seeds == [(0, 500, LOST), (0, 100, "running"), (1, 900, "running")]
    # freeway seed 0 restarted (another identity) and already past the lost run's frames; seed 1 is the same run
    # (its frames as the folder has them now, e.g. a summary written by hand ahead of the folder)
    seeds = [(s["seed"], s["env_frames"], s["status"]) for s in out["freeway"]["seeds"]]
    assert seeds == [(0, 700, "running"), (0, 500, LOST), (1, 400, "running")]
    assert [s["final_mean"] for s in out["ppo"]["breakout"]["seeds"]] == [10.0, 20.0, 60.0]
    assert out["ppo"]["breakout"]["mean"] == 30.0 and out["machine"] == "by hand"


def test_the_summary_is_packed_and_slimmed():
    """A curve is one line however long; short items share a line up to the width; an item too long for a line
    gets lines of its own; the text reads back as the same data. Slimming rounds moozi's curves to 2 decimals,
    drops ``run``, and leaves an archived PPO run's curve and port evaluation in its archive."""
    import json

    from research.thesis_protocol_summary import ROOT, packed_json, slimmed

    data = {"curve": [[307200, 4.5], [614400, -8.4375e-3]], "final_ci": [34.25, 41.65], "seeds": [{"seed": 0}],
            "x": [], "long": ["a" * 30, "b" * 30, "c" * 30]}
    text = packed_json(data, width=60)
    assert json.loads(text) == data
    assert text == ('{\n "curve": [[307200, 4.5], [614400, -0.0084375]],\n'  # 55 characters: no room for more
                    ' "final_ci": [34.25, 41.65], "seeds": [{"seed": 0}], "x": [],\n'
                    ' "long": [\n  "' + "a" * 30 + '",\n  "' + "b" * 30 + '",\n  "' + "c" * 30 + '"\n ]\n}')
    assert packed_json({"a": 1}) == '{"a": 1}'
    archived = (ROOT / "results-data/thesis-protocol__ppo-breakout-thesis-s2.tar.xz").exists()
    summary = {"breakout": {"seeds": [{"seed": 0, "run": "tp-breakout-s0", "curve": [[307200, 4.4375], [614400, 8.0]]}]},
               "ppo": {"breakout": {"seeds": [{"seed": 2, "curve": [[1, 2.0]], "final_port": {}, "wall_s": 2.6},
                                              {"seed": 7, "curve": [[1, 2.0]], "wall_s": 1.2}]}}}
    out = slimmed(summary)
    assert out["breakout"]["seeds"] == [{"seed": 0, "curve": [[307200, 4.44], [614400, 8.0]]}]
    assert archived and out["ppo"]["breakout"]["seeds"] == [{"seed": 2, "wall_s": 3},
                                                           {"seed": 7, "curve": [[1, 2.0]], "wall_s": 1}]
    assert out["ppo_curves_in"].startswith("results-data/thesis-protocol__ppo-GAME-PROTOCOL-sSEED.tar.xz")


def test_thesis_protocol_curves_read_the_summary_the_archives_and_the_thesis_log(tmp_path):
    """Each panel's seeds come from the summary (a PPO seed's curve from its archive when the summary leaves it
    out), the thesis's curve from its file; the figure is written."""
    import io
    import json
    import tarfile

    from research.thesis_protocol_curves import draw, panel_data

    archives = tmp_path / "results-data"
    archives.mkdir()
    with tarfile.open(archives / "thesis-protocol__ppo-freeway-thesis-s1.tar.xz", "w:xz") as tar:
        data = json.dumps({"curve": [[500000, 20.0], [1000000, 30.0]]}).encode()
        info = tarfile.TarInfo("ppo-freeway-thesis-s1/result.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    summary = {"freeway": {"thesis": 68.6, "seeds": [{"seed": 0, "curve": [[300000, 1.0]], "status": "running"}]},
               "ppo": {"freeway": {"seeds": [{"seed": 1, "status": "done", "final_mean": 58.0}]}}}
    thesis = {"freeway": {"curve": [[0, 0.2], [1321056, 17.9]], "label": "thesis"}}
    got = panel_data(summary, thesis, "freeway", archives)
    assert got["moozi"] == [{"seed": 0, "status": "running", "final": None, "curve": [[300000, 1.0]]}]
    assert got["ppo"][0]["curve"] == [[500000, 20.0], [1000000, 30.0]] and got["ppo"][0]["final"] == 58.0
    assert got["thesis_curve"] == [[0, 0.2], [1321056, 17.9]] and got["thesis_figure"] == 68.6
    assert panel_data(summary, thesis, "asterix", archives)["moozi"] == []
    card = tmp_path / "card"
    card.mkdir()
    (card / "summary.json").write_text(json.dumps(summary))
    (card / "thesis-curves.json").write_text(json.dumps(thesis))
    out = draw(card, card / "curves.png")
    assert (card / "curves.png").read_bytes()[:4] == b"\x89PNG" and out["games"]["freeway"]["thesis_points"] == 2


def test_thesis_protocol_sitting_picks_what_comes_next(tmp_path, capsys):
    """The card's order; a run below its budget is trained (the card's command, exactly resumable); one at its
    budget gets its two final evaluations; a run the summary holds as done is skipped even without a folder."""
    import json

    from research.thesis_protocol_sitting import command, done_in, main, next_step
    from research.thesis_protocol_summary import GAMES

    BUDGET = 10_000_000  # the thesis protocol's frames
    runs = tmp_path / "runs"

    def run(name, frames, *finals):
        folder = runs / name
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text(json.dumps({"env_steps": 1024}) + "\n"
                                              + json.dumps({"env_steps": frames, "x": 1}) + "\n")
        for final in finals:
            (folder / final).write_text("{}\n")

    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({**{g: {"seeds": []} for g in GAMES}, "breakout": {"seeds": [
        {"seed": 0, "status": "done", "final_mean": 339.2},
        {"seed": 1, "status": "running", "final_mean": None, "env_frames": 3_000_000}]}}))
    done = done_in(summary)
    assert done == {("breakout", 0)}
    assert next_step(runs, done) == ("train", runs / "tp-space_invaders-s0", "")  # breakout 0: done, no folder
    run("tp-space_invaders-s0", BUDGET + 384)
    assert next_step(runs, done) == ("eval", runs / "tp-space_invaders-s0", "final-minatar.json")
    assert command(next_step(runs, done), 30) == ["moozi", "eval", str(runs / "tp-space_invaders-s0"), "--games",
                                                 "64", "--package", "minatar"]
    (runs / "tp-space_invaders-s0" / "final-minatar.json").write_text("{}\n")
    step = next_step(runs, done)
    assert step[2] == "final-thesis-planner.json" and command(step, 30)[-2:] == ["--planner", "thesis"]
    (runs / "tp-space_invaders-s0" / "final-thesis-planner.json").write_text("{}\n")
    run("tp-freeway-s0", 5_000_000)
    step = next_step(runs, done)
    assert step == ("train", runs / "tp-freeway-s0", "")
    assert command(step, 42) == [
        "moozi", "train", "--preset", "freeway", "--protocol", "thesis", "--run-dir", str(runs / "tp-freeway-s0"),
        "--continue", "--minutes", "42", "--stop-grace", "900", "--seed", "0", "testing.every=300",
        "testing.episodes=16", "testing.envs=16", "output.keep_every_updates=5000", "learner.lr_schedule=cosine",
        "learner.lr_decay_over=budget", "learner.lr_decay_start=0.5", "learner.lr_final_fraction=0.1"]
    capsys.readouterr()
    assert main(["--minutes", "60", "--runs", str(runs), "--summary", str(summary), "--dry-run"]) == 0
    planned = json.loads(capsys.readouterr().out.splitlines()[-1])  # after the lost run's line (below)
    assert planned["command"].endswith("--minutes 59 --stop-grace 900 --seed 0 " + " ".join(command(step, 1)[15:]))
    assert main(["--minutes", "5", "--runs", str(runs), "--summary", str(summary)]) == 0  # too short to train
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # breakout seed 1: running in the summary, no folder here: said lost first (the card records it)
    assert lines[0] == {"lost": str(runs / "tp-breakout-s1"), "frames_in_summary": 3_000_000, "frames_here": 0}
    assert len(lines) == 2 and lines[1]["stopped"].endswith("minutes left")
    # nearest its end first (a folder may not outlive a session): a started run before a new one, the fewest
    # frames left first, whatever the card's order; a run at its budget is evaluated before any training
    run("tp-asterix-s1", 7_000_000)
    assert next_step(runs, done) == ("train", runs / "tp-asterix-s1", "")
    assert next_step(runs, done, busy={runs / "tp-asterix-s1"}) == ("train", runs / "tp-freeway-s0", "")
    run("tp-breakout-s2", BUDGET)
    assert next_step(runs, done) == ("eval", runs / "tp-breakout-s2", "final-minatar.json")


def test_thesis_protocol_sitting_says_a_restarted_run_is_lost(tmp_path):
    """A run the summary holds as running is lost when its folder is gone, holds fewer frames, or holds another
    run (another identity in run.json) even with more frames; the same run ahead of the summary is not lost."""
    import json

    from research.thesis_protocol_sitting import lost_in
    from research.thesis_protocol_summary import GAMES

    runs = tmp_path / "runs"
    for name, frames, run_id in (("tp-breakout-s1", 6_000_000, "tp-breakout-s1-222222"),
                                 ("tp-freeway-s0", 6_000_000, "tp-freeway-s0-111111"),
                                 ("tp-asterix-s0", 1_000_000, None)):
        (runs / name).mkdir(parents=True)
        (runs / name / "metrics.jsonl").write_text(json.dumps({"env_steps": frames}) + "\n")
        if run_id:
            (runs / name / "run.json").write_text(json.dumps({"id": run_id}) + "\n")
    summary = tmp_path / "summary.json"

    def running(seed, frames, run_id=None):
        return {"seed": seed, "status": "running", "env_frames": frames, **({"run_id": run_id} if run_id else {})}

    summary.write_text(json.dumps({**{g: {"seeds": []} for g in GAMES},
                                   "breakout": {"seeds": [running(1, 5_000_000, "tp-breakout-s1-aaaaaa")]},
                                   "freeway": {"seeds": [running(0, 5_000_000, "tp-freeway-s0-111111")]},
                                   "asterix": {"seeds": [running(0, 2_000_000)]},
                                   "space_invaders": {"seeds": [running(0, 7_000_000, "tp-space_invaders-s0-x")]}}))
    lost = {line["lost"]: (line["frames_in_summary"], line["frames_here"]) for line in lost_in(summary, runs)}
    assert lost == {str(runs / "tp-breakout-s1"): (5_000_000, 6_000_000),  # another run, more frames
                    str(runs / "tp-space_invaders-s0"): (7_000_000, 0),  # gone
                    str(runs / "tp-asterix-s0"): (2_000_000, 1_000_000)}  # no identities: fewer frames


def test_thesis_protocol_sitting_writes_a_final_whole_or_not_at_all(tmp_path, capsys):
    import json

    from research.thesis_protocol_sitting import main

    BUDGET = 10_000_000  # the thesis protocol's frames
    runs, summary = tmp_path / "runs", tmp_path / "none.json"
    folder = runs / "tp-breakout-s0"
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text(json.dumps({"env_steps": BUDGET}) + "\n")
    failing, working = tmp_path / "failing", tmp_path / "working"
    failing.write_text("#!/bin/sh\necho '{\"half\": '\nexit 3\n")
    working.write_text("#!/bin/sh\necho \"{\\\"args\\\": \\\"$*\\\"}\"\n")
    failing.chmod(0o755)
    working.chmod(0o755)
    args = ["--minutes", "60", "--runs", str(runs), "--summary", str(summary), "--eval-minutes", "1", "--poll-s", "0.05"]
    assert main([*args, "--moozi", str(failing)]) == 3
    assert not (folder / "final-minatar.json").exists()  # a failed evaluation leaves no final
    capsys.readouterr()
    main([*args, "--moozi", str(working)])  # both evaluations, then breakout seed 1 trains (the fake exits 0)
    assert json.loads((folder / "final-minatar.json").read_text())["args"].endswith("--games 64 --package minatar")
    assert json.loads((folder / "final-thesis-planner.json").read_text())["args"].endswith("--planner thesis")
    did = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["did"] for d in did] == ["eval", "eval", "train"] and did[2]["command"].split()[3] == "space_invaders"


def test_thesis_protocol_sitting_runs_two_runs_at_once(tmp_path, capsys):
    """``--jobs 2``: Breakout seed 0's evaluation and Space Invaders seed 0's training start together (never two
    commands on one run); the freed slot takes Breakout's second evaluation, then Freeway seed 0's training; a
    training that ends below its budget starts nothing more, and the sitting waits for the other."""
    import json

    from research.thesis_protocol_sitting import main

    runs, summary = tmp_path / "runs", tmp_path / "none.json"
    folder = runs / "tp-breakout-s0"
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text(json.dumps({"env_steps": 10_000_000}) + "\n")
    log = tmp_path / "log"
    fake = tmp_path / "moozi"
    fake.write_text(f"#!/bin/sh\necho \"start $2\" >> {log}\nif [ $1 = train ]; then sleep 4; else sleep 1; fi\n"
                    f"echo \"end $2\" >> {log}\necho '{{}}'\n")  # trains for 4 s, evaluates for 1
    fake.chmod(0o755)
    args = ["--minutes", "60", "--runs", str(runs), "--summary", str(summary), "--moozi", str(fake), "--poll-s", "0.05"]
    assert main([*args, "--jobs", "2"]) == 0
    lines = log.read_text().splitlines()
    assert sorted(lines[:2]) == ["start --preset", f"start {folder}"]  # both started before either ended
    did = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["did"], d["command"].split()[2]) for d in did] == [
        ("eval", str(folder)), ("eval", str(folder)), ("train", "--preset"), ("train", "--preset")]
    assert [d["command"].split()[3] for d in did[2:]] == ["space_invaders", "freeway"]  # then nothing more
    assert (runs / "tp-space_invaders-s0.log").read_text() == "{}\n"  # a training's output: its run's own log
    assert (folder / "final-minatar.json").exists() and (folder / "final-thesis-planner.json").exists()
    assert main([*args, "--jobs", "2", "--dry-run"]) == 0
    nexts = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(n["next"], n["run"].rsplit("/", 1)[1]) for n in nexts] == [("train", "tp-space_invaders-s0"),
                                                                         ("train", "tp-freeway-s0")]
    with pytest.raises(SystemExit):
        main([*args, "--jobs", "0"])
