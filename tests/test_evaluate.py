"""`alfworld-rl eval`: flag checks, the overwrite / resume rules, and real evaluations with the local tiny model."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from alfworld_rl.cli import main
from alfworld_rl.core import read_jsonl

CLI = str(Path(sys.executable).parent / "alfworld-rl")


@pytest.mark.parametrize("flags, message", [
    (["--split", "test"], "--split must be one of valid_seen, valid_unseen, all (got 'test')"),
    (["--concurrency", "0"], "--concurrency must be an integer >= 1 (got 0)"),
    (["--games-per-batch", "0"], "--concurrency must be an integer >= 1 (got 0)"),     # eval's alias of --concurrency
    (["--temperature", "-0.5"], "--temperature must be >= 0 (got -0.5)"),
    (["--top-p", "1.5"], "--top-p must be in (0, 1] (got 1.5)"),
    (["--device", "tpu"], "--device must be auto, cpu, cuda or cuda:N (got 'tpu')"),
    (["--dtype", "fp8"], "--dtype must be one of auto, float32, bfloat16, float16"),
    (["--seed", "-1"], "--seed must be an integer >= 0 (got -1)"),
    (["--limit-per-split", "0"], "--limit-per-split must be an integer >= 1 (got 0)"),
    (["--max-episode-steps", "0"], "--max-episode-steps must be an integer >= 1 (got 0)"),
    (["--max-trajectory-tokens", "0"], "--max-trajectory-tokens must be an integer >= 1 (got 0)"),
    (["--max-assistant-tokens", "500", "--max-trajectory-tokens", "100"], "--max-assistant-tokens must be < --max-trajectory-tokens (100) (got 500)"),
    (["--backend", "cloud"], "--backend must be one of local, trio (got 'cloud')"),
    (["--swanlab-mode", "cloud"], "--swanlab-mode must be one of online, local, offline, disabled (got 'cloud')"),
    (["--overwrite-output", "--resume"], "--overwrite-output and --resume exclude each other"),
    (["--episodes-per-game", "0"], "--episodes-per-game must be an integer in [1, 1000] (got 0)"),
    (["--win-reward", "0"], "--win-reward must be a finite number > 0 (got 0.0)"),
    (["--win-reward", "inf"], "--win-reward must be a finite number (got inf)"),
    (["--invalid-penalty", "-0.1"], "--invalid-penalty must be a finite number >= 0 (got -0.1)"),
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


def test_disabled_swanlab_is_not_imported(tmp_path):
    code = ("import sys; from alfworld_rl.runs.evaluate import EvalConfig, log_to_swanlab; "
            f"log_to_swanlab(EvalConfig(output={str(tmp_path / 'x.jsonl')!r}), {{'eval/all/games': 1}}); "
            "assert 'swanlab' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---- real evaluations: generated games, the real engine, the local tiny model ----

TINY = ["--base-model", "tiny-qwen3", "--limit-per-split", "1", "--max-episode-steps", "2",
        "--max-assistant-tokens", "16", "--max-trajectory-tokens", "2048"]


def tiny_config(data_root, output, **kw):
    "An evaluation of the tiny model on one game per valid split, kept short."
    from alfworld_rl.runs.evaluate import EvalConfig
    return EvalConfig(base_model="tiny-qwen3", data_root=str(data_root), output=str(output), limit_per_split=1,
                      max_episode_steps=2, max_assistant_tokens=16, max_trajectory_tokens=2048, games_per_batch=2, **kw)


def trajectories_by_game(path):
    "Trajectory records of `path` keyed by game id, without the fields that differ between runs."
    return {r["game_id"]: r for r in read_jsonl(path) if r["type"] == "trajectory"}


@pytest.fixture(scope="module")
def tiny_eval(small_data_root, tmp_path_factory):
    "One uninterrupted tiny-model evaluation: (config, summary, sampling client, tokenizer)."
    from alfworld_rl.runs.evaluate import evaluate, make_sampling_client
    out = tmp_path_factory.mktemp("tiny_eval") / "full.jsonl"
    c = tiny_config(small_data_root, out)
    sc, tok = make_sampling_client(c)
    return c, evaluate(c, sc, tok, show_progress=False), sc, tok


def test_eval_tiny_model_on_generated_valid_splits(tiny_eval, small_data_root):
    from alfworld_rl.env.data import discover_games
    from alfworld_rl.runs.evaluate import summarize_records
    c, summary, _, _ = tiny_eval
    records = read_jsonl(c.output_path())
    assert [r["type"] for r in records] == ["trajectory", "trajectory", "summary"]
    expected = {discover_games(small_data_root, s)[0].id for s in ("valid_seen", "valid_unseen")}
    trajs = records[:2]
    assert {r["game_id"] for r in trajs} == expected
    for r in trajs:
        assert r["evaluation_split"] == "all" and r["split"] == r["game_id"].split(":")[0]
        assert Path(r["game_file"]).is_file() and r["task"].startswith("Your task is to:")
        assert 1 <= len(r["steps"]) <= 2 and r["stop_reason"] in ("won", "environment_done", "max_steps", "trajectory_too_long")
        assert r["reward"] == pytest.approx(float(r["won"]) - 0.1 * r["invalid_action_count"])
        assert r["messages"][0]["role"] == "system"
        for s in r["steps"]: assert {"action", "valid_format", "admissible", "observation"} <= set(s)
    m = summary["metrics"]
    assert records[-1] == json.loads(json.dumps(summary)) and summary["base_model"] == "tiny-qwen3"
    broken = {k: v for k, v in m.items() if k.endswith("/broken_games")}
    assert broken and all(v == 0 for v in broken.values())       # discovery found no broken game
    assert {k: v for k, v in m.items() if k not in broken} == summarize_records(trajs)
    assert m["eval/valid_seen/games"] == 1 and m["eval/valid_unseen/games"] == 1 and m["eval/all/games"] == 2
    for key in ("success_rate", "reward_mean", "steps_mean", "truncated_rate", "valid_tool_call_rate",
                "admissible_action_rate", "invalid_actions_mean"):
        assert f"eval/valid_seen/{key}" in m and f"eval/all/{key}" in m
    assert m["eval/all/steps_mean"] == pytest.approx(sum(len(r["steps"]) for r in trajs) / 2)


def test_resume_of_an_interrupted_file_equals_the_uninterrupted_run(tiny_eval, tmp_path):
    "A file cut after one finished game (and half a line) is completed by --resume to the same result."
    from alfworld_rl.runs.evaluate import evaluate, EvalConfig
    c, summary, sc, tok = tiny_eval
    lines = c.output_path().read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text(lines[0] + lines[1][: len(lines[1]) // 2])
    resumed_c = tiny_config(c.data_root, cut, resume=True)
    resumed = evaluate(resumed_c, sc, tok, show_progress=False)
    assert resumed["metrics"] == summary["metrics"]
    assert trajectories_by_game(cut) == trajectories_by_game(c.output_path())
    assert [r["type"] for r in read_jsonl(cut)] == ["trajectory", "trajectory", "summary"]
    # resuming a finished file does nothing; resuming with other settings is refused
    assert evaluate(resumed_c, sc, tok, show_progress=False) == resumed
    with pytest.raises(Exception, match=r"--seed 42 \(now 7\)"):
        evaluate(tiny_config(c.data_root, cut, resume=True, seed=7), sc, tok, show_progress=False)
    # extending a finished one-split file to both splits keeps a single summary, at the end, over every game
    part = tmp_path / "part.jsonl"
    evaluate(tiny_config(c.data_root, part, split="valid_seen"), sc, tok, show_progress=False)
    grown = evaluate(tiny_config(c.data_root, part, resume=True), sc, tok, show_progress=False)
    assert [r["type"] for r in read_jsonl(part)] == ["trajectory", "trajectory", "summary"]
    assert grown["metrics"] == summary["metrics"]


def test_eval_report_template(tiny_eval, tmp_path, monkeypatch):
    "The eval report notebook runs (papermill) on a real evaluation file and shows its numbers."
    from alfworld_rl.runs.evaluate import execute_report
    c, summary, _, _ = tiny_eval
    monkeypatch.chdir(tmp_path)
    nb = execute_report("eval", tmp_path / "runs/x/eval.ipynb", {"eval_file": str(c.output_path()), "transcripts": 2})
    text = json.dumps(json.loads(nb.read_text()))
    assert '"ename"' not in text and "image/png" in text
    assert f"| games | 1 | 1 | 2 |" in text
    assert "stop reason" in text and "format errors" in text and "task: Your task is to:" in text


def test_overwrite_keeps_the_old_file_when_the_model_cannot_load(small_data_root, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("old.jsonl").write_text('{"type": "summary", "base_model": "x", "model_path": null, "metrics": {}}\n')
    before = Path("old.jsonl").read_bytes()
    status = main(["eval", "--base-model", str(tmp_path / "no-such-model"), "--data-root", str(small_data_root),
                   "--output", "old.jsonl", "--overwrite-output", "--no-report", *TINY[2:]])
    assert status == 1 and "no-such-model" in capsys.readouterr().err
    assert Path("old.jsonl").read_bytes() == before


@pytest.mark.slow
def test_cli_eval_with_report_and_swanlab_offline(small_data_root, tmp_path):
    r = subprocess.run([CLI, "eval", *TINY, "--data-root", str(small_data_root), "--split", "valid_unseen",
                        "--output", "eval_results/tiny.jsonl", "--swanlab-mode", "offline"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "Saved evaluation: eval_results/tiny.jsonl"
    split_lines = [json.loads(l) for l in lines if l.startswith('{"split"')]
    assert [d["split"] for d in split_lines] == ["valid_unseen", "all"] and split_lines[0]["games"] == 1
    assert (tmp_path / "runs/tiny/eval.ipynb").is_file()
    assert any((tmp_path / "runs/tiny/swanlog").iterdir())


@pytest.mark.slow
def test_resume_after_kill_equals_uninterrupted_run(small_data_root, tmp_path):
    "Kill a running `alfworld-rl eval` after its first record, resume it, and compare with an uninterrupted run."
    args = [*TINY, "--limit-per-split", "2", "--games-per-batch", "1", "--data-root", str(small_data_root), "--no-report"]
    full = subprocess.run([CLI, "eval", *args, "--output", "full.jsonl"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900)
    assert full.returncode == 0, full.stderr[-3000:]
    out = tmp_path / "killed.jsonl"
    p = subprocess.Popen([CLI, "eval", *args, "--output", str(out)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline and p.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 1: break
        time.sleep(0.2)
    assert p.poll() is None, "the evaluation finished before it could be interrupted"
    os.killpg(p.pid, signal.SIGKILL); p.wait()
    n_before = len(read_jsonl(out))
    assert 1 <= n_before < 4 and all(r["type"] == "trajectory" for r in read_jsonl(out))
    refused = subprocess.run([CLI, "eval", *args, "--output", str(out)], cwd=tmp_path, capture_output=True, text=True)
    assert refused.returncode == 2
    resumed = subprocess.run([CLI, "eval", *args, "--output", str(out), "--resume"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = read_jsonl(tmp_path / "full.jsonl"), read_jsonl(out)
    assert a[-1]["metrics"] == b[-1]["metrics"] and a[-1]["metrics"]["eval/all/games"] == 4
    assert trajectories_by_game(tmp_path / "full.jsonl") == trajectories_by_game(out)


def test_episodes_per_game_and_reward_settings(tiny_eval, tmp_path):
    "K episodes per game: K records per game with distinct branches and seeds, games counted once, the error over games; the reward settings score them."
    import math
    from alfworld_rl.runs.evaluate import evaluate, summarize_records, success_standard_error
    c, _, sc, tok = tiny_eval
    out = tmp_path / "k3.jsonl"
    k3 = tiny_config(c.data_root, out, episodes_per_game=3, temperature=1.0, win_reward=10.0, invalid_penalty=0.5)
    summary = evaluate(k3, sc, tok, show_progress=False)
    trajs = [r for r in read_jsonl(out) if r["type"] == "trajectory"]
    by_game = {}
    for r in trajs: by_game.setdefault(r["game_id"], []).append(r)
    assert len(by_game) == 2 and all(sorted(r["branch"] for r in rs) == [0, 1, 2] for rs in by_game.values())
    # distinct sampling seeds: at temperature 1 the tiny model does not write the same replies in all episodes
    assert any(len({json.dumps([s["text"] for s in r["steps"]]) for r in rs}) > 1 for rs in by_game.values())
    m = summary["metrics"]
    assert (m["eval/all/games"], m["eval/all/episodes"], m["eval/valid_seen/games"], m["eval/valid_seen/episodes"]) == (2, 6, 1, 3)
    assert m["eval/all/success_rate"] == pytest.approx(sum(r["won"] for r in trajs) / 6)
    assert m["eval/all/success_rate_se"] == success_standard_error(trajs) and m["eval/valid_seen/success_rate_se"] == 0.0
    for r in trajs:       # the reward settings: the trajectory reward and its per-step parts
        assert r["reward"] == pytest.approx(10.0 * r["won"] - 0.5 * r["invalid_action_count"])
        assert round(math.fsum(s["reward"] for s in r["steps"]), 10) == r["reward"]
        assert r["eval_settings"]["win_reward"] == 10.0 and r["eval_settings"]["episodes_per_game"] == 3
    assert m["eval/all/reward_mean"] == pytest.approx(sum(r["reward"] for r in trajs) / 6)
    assert summary["config"]["invalid_penalty"] == 0.5
    # a game whose episodes were cut short is played again in full: no duplicate, no missing branch
    lines = out.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:4]))               # game 1 complete, game 2 with one of its three episodes
    again = evaluate(tiny_config(c.data_root, cut, episodes_per_game=3, temperature=1.0, win_reward=10.0,
                                 invalid_penalty=0.5, resume=True), sc, tok, show_progress=False)
    redone = [r for r in read_jsonl(cut) if r["type"] == "trajectory"]
    assert sorted((r["game_id"], r["branch"]) for r in redone) == sorted((r["game_id"], r["branch"]) for r in trajs)
    assert again["metrics"]["eval/all/episodes"] == 6 and again["metrics"] == summarize_records(redone) | {
        k: v for k, v in again["metrics"].items() if k.endswith("broken_games")}
    with pytest.raises(Exception, match=r"--episodes-per-game 3 \(now 2\)"):
        evaluate(tiny_config(c.data_root, cut, episodes_per_game=2, temperature=1.0, win_reward=10.0,
                             invalid_penalty=0.5, resume=True), sc, tok, show_progress=False)
