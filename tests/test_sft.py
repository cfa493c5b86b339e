"""`alfworld-rl sft` end to end: expert demonstrations on the real engine, the local tiny-qwen3 backend, papermill."""
import dataclasses, json
from pathlib import Path

import pytest
import torch

from alfworld_rl.cli import main
from alfworld_rl.core import read_jsonl
from alfworld_rl.runs.sft import SFTConfig, SFTRun, expert_trajectories, sft_datum, sft_token_counts

SMALL = ["--base-model", "tiny-qwen3", "--backend", "local", "--max-train-games", "2", "--games-per-batch", "2",
         "--max-episode-steps", "20", "--max-trajectory-tokens", "4096", "--swanlab-mode", "disabled"]


@pytest.fixture(scope="module")
def demos(small_data_root):
    "Expert demonstrations of two training games, replayed through the rollout engine."
    from alfworld_rl.env.data import discover_games
    from alfworld_rl.backends.local_models import load_tokenizer
    games = discover_games(small_data_root, "train")[:2]
    config = SFTConfig(base_model="tiny-qwen3", data_root=str(small_data_root), max_episode_steps=20,
                       max_trajectory_tokens=4096)
    return expert_trajectories(games, load_tokenizer("tiny-qwen3"), config, progress=False)


def test_datum_weights_cover_exactly_the_assistant_tokens(demos):
    from alfworld_rl.backends.local_models import load_tokenizer
    tok = load_tokenizer("tiny-qwen3")
    for traj in demos:
        assert traj.won and traj.steps
        d = sft_datum(traj)
        weights = d.loss_fn_inputs["weights"].to_numpy()
        targets = d.loss_fn_inputs["target_tokens"].to_numpy().tolist()
        assert targets == traj.tokens[1:] and d.model_input.to_ints() == traj.tokens[:-1]
        assert weights.tolist() == [1.0 if m else 0.0 for m in traj.assistant_mask[1:]]
        trained = [t for t, w in zip(targets, weights) if w]
        assert trained == [t for s in traj.steps for t in s.completion_tokens]
        assert "<tool_call>" in tok.decode(trained) and "Admissible actions" not in tok.decode(trained)


def test_bad_demonstration_is_refused():
    from types import SimpleNamespace
    with pytest.raises(ValueError, match="no assistant tokens"):
        sft_datum(SimpleNamespace(tokens=[1, 2, 3], assistant_mask=[False] * 3))
    with pytest.raises(ValueError, match="same length|differ"):
        sft_datum(SimpleNamespace(tokens=[1, 2, 3], assistant_mask=[False, True]))


def test_loss_decreases_on_a_repeated_batch(demos, small_data_root, tmp_path):
    config = SFTConfig(base_model="tiny-qwen3", data_root=str(small_data_root), max_steps=3, games_per_batch=2,
                       learning_rate=3e-3, save_every=0, run_name="repeat", output_dir=str(tmp_path),
                       max_episode_steps=20, max_trajectory_tokens=4096)
    run = SFTRun(config, progress=False, demonstrations=demos).open()
    records = run.run()
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all(sorted(r["games"]) == sorted(t.game.id for t in demos) for r in records)   # the same batch each step
    losses = [r["train/loss"] for r in records]
    assert losses[2] < losses[1] < losses[0], losses
    assert records[0]["train/loss_tokens"] == sft_token_counts(run.all_datums)["loss_tokens"]
    assert records[0]["train/token_count"] == records[0]["train/loss_tokens"]


def test_cli_one_step_report_then_resume(small_data_root, tmp_path, capsys):
    out = tmp_path / "runs"
    args = ["sft", *SMALL, "--data-root", str(small_data_root), "--max-steps", "1", "--save-every", "1",
            "--learning-rate", "1e-3", "--output-dir", str(out), "--run-name", "sft-one"]
    assert main(args) == 0
    stdout = capsys.readouterr().out
    run_dir = out / "sft-one"
    assert "Saved state: " in stdout and "Saved sampler weights: " in stdout
    assert (run_dir / "sft.ipynb").is_file() and (run_dir / "config.json").is_file()
    nb = json.loads((run_dir / "sft.ipynb").read_text())
    assert not [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    saves = read_jsonl(run_dir / "checkpoints.jsonl")
    assert [s["step"] for s in saves] == [1]
    assert Path(saves[0]["state_path"]).is_dir() and Path(saves[0]["sampler_path"]).is_dir()
    demos = read_jsonl(run_dir / "demonstrations.jsonl")
    (m,) = read_jsonl(run_dir / "metrics.jsonl")
    assert m["train/loss_tokens"] == sum(d["num_assistant_tokens"] for d in demos if d["game_id"] in m["games"])
    assert m["train/loss"] > 0 and m["train/datums"] == 2

    # the same run name again is refused; --resume continues from the save with the next step number
    assert main(args) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*args[:-6], "--output-dir", str(out), "--run-name", "sft-one", "--max-steps", "2", "--resume",
                 "--no-report"]) == 0
    stdout = capsys.readouterr().out
    assert "Resumed sft-one after step 1" in stdout and "Saved sampler weights: " in stdout
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2]
    assert [s["step"] for s in read_jsonl(run_dir / "checkpoints.jsonl")] == [1, 2]

    # the sampler weights are a model path the local backend loads
    from alfworld_rl.backends.service import make_service_client
    sc = make_service_client("local").create_sampling_client("tiny-qwen3", model_path=read_jsonl(run_dir / "checkpoints.jsonl")[-1]["sampler_path"])
    assert sc.get_tokenizer() is not None


BAD_FLAGS = [
    (["--max-steps", "0"], "--max-steps must be an integer >= 1"),
    (["--games-per-batch", "0"], "--games-per-batch must be an integer >= 1"),
    (["--learning-rate", "0"], "--learning-rate must be > 0"),
    (["--lora-rank", "2"], "--lora-rank must be an integer in [4, 64]"),
    (["--save-every", "-1"], "--save-every must be an integer >= 0"),
    (["--max-train-games", "0"], "--max-train-games must be an integer >= 1"),
    (["--seed", "-1"], "--seed must be an integer >= 0"),
    (["--run-name", "a b"], "--run-name must be 1-100 letters"),
    (["--adam-beta2", "1"], "--adam-beta2 must be in [0, 1)"),
    (["--grad-clip", "-1"], "--grad-clip must be >= 0"),
    (["--backend", "gpu"], "--backend must be one of local, trio (got 'gpu')"),      # choices: checked with every setting
    (["--max-steps", "two"], "argument --max-steps: invalid int value"),
]


@pytest.mark.parametrize("flags,message", BAD_FLAGS, ids=[" ".join(f) for f, _ in BAD_FLAGS])
def test_bad_flag(flags, message, tmp_path, capsys):
    try: status = main(["sft", "--output-dir", str(tmp_path / "runs"), *flags])
    except SystemExit as e: status = e.code
    err = capsys.readouterr().err
    assert status == 2 and message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_resume_without_a_run_is_refused(tmp_path, capsys):
    assert main(["sft", "--output-dir", str(tmp_path), "--run-name", "nothing", "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().err


def _adapter(record: dict) -> dict:
    "The LoRA tensors of a checkpoint record's sampler weights."
    from safetensors.torch import load_file
    return load_file(str(Path(record["sampler_path"]) / "adapter_model.safetensors"))


def test_a_decay_continued_from_a_constant_runs_save_is_a_fresh_decayed_run(demos, small_data_root, tmp_path):
    "What `sft_probe.py --continue` relies on: the steps before a decay are a constant run's steps."
    import shutil
    from alfworld_rl.runs.resume import rewind_run
    from alfworld_rl.runs.train import read_checkpoints
    base = SFTConfig(base_model="tiny-qwen3", data_root=str(small_data_root), max_steps=4, games_per_batch=1,
                     learning_rate=3e-3, save_every=2, output_dir=str(tmp_path), max_episode_steps=20,
                     max_trajectory_tokens=4096)
    SFTRun(dataclasses.replace(base, run_name="constant"), progress=False, demonstrations=demos).open().run()
    decayed = SFTRun(dataclasses.replace(base, run_name="decayed", lr_decay_steps=2), progress=False,
                     demonstrations=demos).open().run()
    assert [r["optim/learning_rate"] for r in decayed] == pytest.approx([3e-3, 3e-3, 2e-3, 1e-3])
    shutil.copytree(tmp_path / "constant", tmp_path / "continued")
    rewind_run(tmp_path / "continued", 2)                    # the constant run's save before the decay begins
    SFTRun(dataclasses.replace(base, run_name="continued", lr_decay_steps=2), resume=True, progress=False,
           demonstrations=demos).open().run()
    final = {name: _adapter(read_checkpoints(tmp_path / name)[-1]) for name in ("constant", "decayed", "continued")}
    assert final["decayed"].keys() == final["continued"].keys()
    assert all(torch.equal(final["decayed"][k], final["continued"][k]) for k in final["decayed"])
    assert any(not torch.equal(final["decayed"][k], final["constant"][k]) for k in final["decayed"])
