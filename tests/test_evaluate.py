"""`alfworld-rl eval`: flag checks, the overwrite / resume rules, and real evaluations with the local tiny model."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from alfworld_rl.cli import main
from alfworld_rl.core import read_jsonl

CLI = str(Path(sys.executable).parent / "alfworld-rl")


@pytest.mark.parametrize("flags, message", [
    (["--split", "test"], "--split must be one of valid_seen, valid_unseen, all (got 'test')"),
    (["--games-per-batch", "0"], "--games-per-batch must be an integer >= 1 (got 0)"),
    (["--temperature", "-0.5"], "--temperature must be >= 0 (got -0.5)"),
    (["--top-p", "1.5"], "--top-p must be in (0, 1] (got 1.5)"),
    (["--seed", "-1"], "--seed must be an integer >= 0 (got -1)"),
    (["--limit-per-split", "0"], "--limit-per-split must be an integer >= 1 (got 0)"),
    (["--max-episode-steps", "0"], "--max-episode-steps must be an integer >= 1 (got 0)"),
    (["--max-trajectory-tokens", "0"], "--max-trajectory-tokens must be an integer >= 1 (got 0)"),
    (["--max-assistant-tokens", "500", "--max-trajectory-tokens", "100"], "--max-assistant-tokens must be <= --max-trajectory-tokens (100)"),
    (["--backend", "cloud"], "--backend must be one of local, trio (got 'cloud')"),
    (["--swanlab-mode", "cloud"], "--swanlab-mode must be one of online, local, offline, disabled (got 'cloud')"),
    (["--overwrite-output", "--resume"], "--overwrite-output and --resume exclude each other"),
])
def test_bad_flags(flags, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--output", "out.jsonl", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out.jsonl").exists()


def test_existing_output_is_refused_and_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "eval_results/base.jsonl"
    out.parent.mkdir()
    out.write_text('{"type": "summary", "base_model": "x", "model_path": null, "metrics": {}}\n')
    before = out.read_bytes()
    r = subprocess.run([CLI, "eval", "--output", str(out), "--data-root", str(tmp_path / "nowhere")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "already exists; pass --overwrite-output to replace it or --resume to continue it" in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert out.read_bytes() == before
