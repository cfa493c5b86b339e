"""Nothing lost, round three (issue 49, item 7): what would fail late is found before the first rollout, and train
never writes generated games into a folder that holds something else. Each case runs the real command."""
import subprocess, sys
from pathlib import Path

from alfworld_rl.core import read_jsonl

CLI = str(Path(sys.executable).parent / "alfworld-rl")
TINY_TRAIN = ["--backend", "local", "--base-model", "tiny-qwen3", "--games-per-batch", "1", "--group-size", "2",
              "--max-episode-steps", "2", "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096",
              "--swanlab-mode", "disabled", "--no-report"]


def cli(*args, cwd=None):
    "Run `alfworld-rl ARGS` to the end; returns the CompletedProcess (text)."
    return subprocess.run([CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_unwritable_checkpoints_are_found_before_the_first_rollout(small_data_root, tmp_path):
    run_dir = tmp_path / "runs" / "ro"
    run_dir.mkdir(parents=True)
    (run_dir / "checkpoints").symlink_to("/proc")        # a folder nobody can write to, root included
    r = cli("train", *TINY_TRAIN, "--max-steps", "2", "--save-every", "2", "--data-root", small_data_root,
            "--output-dir", tmp_path / "runs", "--run-name", "ro", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"alfworld-rl train: error: --output-dir: cannot write to {run_dir / 'checkpoints'} ("), r.stderr
    assert not (run_dir / "metrics.jsonl").exists() and not (run_dir / "config.json").exists()


def test_train_does_not_generate_games_into_a_folder_holding_other_files(tmp_path):
    root = tmp_path / "my-project"
    root.mkdir()
    (root / "notes.txt").write_text("not games\n")
    r = cli("train", *TINY_TRAIN, "--max-steps", "1", "--data-root", root, "--output-dir", tmp_path / "runs", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"alfworld-rl train: error: --data-root {root} holds no train games but other files") and "alfworld-rl generate --out" in line, r.stderr
    assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]


def test_train_still_generates_into_an_empty_folder_it_can_fill(tmp_path):
    from alfworld_rl.runs.train import load_training_games
    from alfworld_rl.runs.train_config import TrainConfig
    from alfworld_rl.env.generate import MANIFEST
    root = tmp_path / "fresh"
    root.mkdir()
    games = load_training_games(TrainConfig(backend="local", data_root=str(root), max_train_games=2))
    assert len(games) == 2 and (root / MANIFEST).is_file()
    again = load_training_games(TrainConfig(backend="local", data_root=str(root), max_train_games=2))   # generator-made: reused
    assert [g.id for g in again] == [g.id for g in games]
    assert len(read_jsonl(root / MANIFEST)) >= 1


def test_two_evaluations_never_share_one_report(small_data_root, tmp_path):
    "An eval whose report notebook already reports another output file is refused before any game, the report kept."
    import json
    report = tmp_path / "reports" / "base" / "eval.ipynb"
    report.parent.mkdir(parents=True)
    other = tmp_path / "first" / "base.jsonl"
    # the report of an earlier evaluation, as papermill writes its parameters
    report.write_text(json.dumps({"cells": [], "metadata": {"papermill": {"parameters": {"eval_file": str(other)}}},
                                  "nbformat": 4, "nbformat_minor": 5}))
    before = report.read_text()
    out = tmp_path / "second" / "base.jsonl"
    r = cli("eval", "--backend", "local", "--base-model", "tiny-qwen3", "--data-root", small_data_root, "--split",
            "valid_seen", "--limit-per-split", "1", "--max-episode-steps", "1", "--max-assistant-tokens", "16",
            "--output", out, "--runs-dir", tmp_path / "reports", "--swanlab-mode", "disabled", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"alfworld-rl eval: error: --runs-dir: {report} is the report of {other}"), r.stderr
    assert report.read_text() == before and not out.exists()
