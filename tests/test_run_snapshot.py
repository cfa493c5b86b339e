"""tools/run_snapshot.py: a run cut in PPO, saved into a folder, restored elsewhere, finishes as the uncut run did."""
import dataclasses, json, shutil, subprocess, sys
from pathlib import Path

import pytest

from alfworld_rl.core import read_jsonl
from alfworld_rl.mini import recipe as mini
from alfworld_rl.runs.resume import rewind_run

TOOL = Path(__file__).resolve().parents[1] / "tools" / "run_snapshot.py"


def snapshot(*args) -> subprocess.CompletedProcess:
    "Run the tool as a user does."
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True)


def cut_after_first_update(src: Path, dest: Path, s) -> None:
    "A copy of the finished run `src` as it stood when cut after PPO's first save: later saves, records and files gone."
    shutil.copytree(src, dest, symlinks=True)
    for p in dest.rglob("*.json*"):                      # the copy's records name its own folder, as a cut run's do
        p.write_text(p.read_text().replace(str(src.resolve()), str(dest.resolve())))
    ppo = mini.MiniPaths(dest).ppo_run(0)
    last = read_jsonl(ppo / "checkpoints.jsonl")[-1]
    for key in ("state_path", "sampler_path"): shutil.rmtree(last[key])
    rewind_run(ppo, 1)
    for label in ("ppo-seed0", "ppo-seed0-greedy"): mini.MiniPaths(dest).eval_file(label).unlink(missing_ok=True)
    stages = [r for r in read_jsonl(dest / "stages.jsonl") if r["stage"] not in ("ppo", "run") and r.get("seed") != "ppo-seed0"]
    (dest / "stages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stages))


def test_snapshot_carries_a_cut_run_to_another_folder(tmp_path):
    s = dataclasses.replace(mini.SMOKE, ppo_steps=2, save_every=1)
    whole = mini.run_mini(s, tmp_path / "whole", progress=False, workers=1)
    cut = tmp_path / "cut"
    cut_after_first_update(whole.root, cut, s)
    out = snapshot("save", cut, tmp_path / "snap")
    assert out.returncode == 0 and "saved" in out.stdout, out.stderr
    manifest = json.loads((tmp_path / "snap" / "snapshot.json").read_text())
    files = list(manifest["files"])
    assert not any(f.startswith("data/") for f in files)                    # the games are copied again by the rerun
    assert "eval/sft-seed0.jsonl" in files and "stages.jsonl" in files
    for run in ("sft-seed0", "ppo-seed0"):                                  # of each training run, the newest save only
        saves = {Path(f).parts[5] for f in files if f.startswith(f"runs/{run}/checkpoints/")}
        newest = Path(read_jsonl(cut / "runs" / run / "checkpoints.jsonl")[-1]["state_path"]).name
        assert saves == {newest}, saves
    # restore into another folder: paths rewritten, every file checked; then the run's own command finishes it
    moved = tmp_path / "elsewhere" / "run"
    out = snapshot("restore", tmp_path / "snap", moved)
    assert out.returncode == 0, out.stderr
    assert str(cut.resolve()) not in (moved / "runs" / "ppo-seed0" / "checkpoints.jsonl").read_text()
    mini.run_mini(s, moved, progress=False, workers=1)
    want = read_jsonl(whole.eval_file("ppo-seed0"))[-1]["metrics"]
    got = read_jsonl(mini.MiniPaths(moved).eval_file("ppo-seed0"))[-1]["metrics"]
    assert got == want                                                      # resumed from the snapshot: the same PPO
    updates = read_jsonl(moved / "runs" / "ppo-seed0" / "metrics.jsonl")
    assert [r["step"] for r in updates] == [1, 2]
    assert updates[0] == read_jsonl(cut / "runs" / "ppo-seed0" / "metrics.jsonl")[0]     # update 1 was not played again


def test_snapshot_refusals(tmp_path):
    assert "holds no mini run" in snapshot("save", tmp_path, tmp_path / "s").stderr
    assert "not a snapshot" in snapshot("restore", tmp_path, tmp_path / "r").stderr
    (tmp_path / "s").mkdir(); (tmp_path / "s" / "x").write_text("")
    (tmp_path / "run").mkdir(); (tmp_path / "run" / "settings.json").write_text("{}")
    assert "is not a snapshot" in snapshot("save", tmp_path / "run", tmp_path / "s").stderr      # never overwrites a folder
    assert (tmp_path / "s" / "x").exists()
    out = snapshot("save", tmp_path / "run", tmp_path / "snap")
    assert out.returncode == 0
    assert (tmp_path / "snap" / "settings.json.xz").is_file()                 # records are stored compressed
    (tmp_path / "snap" / "settings.json.xz").write_bytes(b"not xz")
    out = snapshot("restore", tmp_path / "snap", tmp_path / "back")
    assert out.returncode != 0 and "damaged" in out.stderr and not (tmp_path / "back").exists()
    assert "already holds a run" in snapshot("restore", tmp_path / "snap", tmp_path / "run").stderr
