"""`alfworld-rl train` end to end on the real engine, generated games and the local tiny-qwen3 backend."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from alfworld_rl.cli import main
from alfworld_rl.core import read_jsonl

REPO = Path(__file__).resolve().parent.parent

# Small but real: one game, two branches, short episodes and replies, so an update takes seconds on CPU.
TINY = ["--backend", "local", "--base-model", "tiny-qwen3", "--games-per-batch", "1", "--group-size", "2",
        "--max-episode-steps", "2", "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096",
        "--swanlab-mode", "disabled"]

# The reference 1-step check, verbatim (README full PyTRIO workflow step 3; docs/reference_recipe.md).
SEED_ONE_STEP = ["--max-steps", "1", "--games-per-batch", "1", "--group-size", "8", "--max-episode-steps", "10",
                 "--save-every", "0", "--run-name", "alfworld-smoke", "--swanlab-mode", "disabled"]

ROLLOUT_KEYS = ["rollout/reward_mean", "rollout/success_rate", "rollout/steps_mean", "rollout/truncated_rate",
                "rollout/stop_reason/won", "rollout/stop_reason/max_steps", "tokens/prompt_length_mean/turn_1",
                "rollout/valid_tool_call_rate", "rollout/admissible_action_rate", "rollout/valid_action_rate",
                "rollout/invalid_actions_mean", "rollout/advantage_std", "rollout/groups",
                "rollout/degenerate_group_rate"]
TRAIN_KEYS = ["train/skipped", "train/datums", "train/train_tokens", "train/loss_tokens", "train/loss",
              "tokens/prefill", "tokens/sampled", "tokens/trained", "tokens/prefill_total", "tokens/sampled_total",
              "tokens/trained_total", "time/update_s", "time/rollout_s", "time/sampler_s"]


def run_cli(args, capsys):
    "Run `alfworld-rl train ARGS` in this process; returns (status, stdout, stderr)."
    status = main(["train", *args])
    out = capsys.readouterr()
    return status, out.out, out.err


# --- bad flags: status 2, one line naming the flag and the range, and nothing written ------------------------

BAD_FLAGS = [
    (["--max-steps", "0"], "--max-steps must be an integer >= 1"),
    (["--games-per-batch", "0"], "--games-per-batch must be an integer >= 1"),
    (["--group-size", "1"], "--group-size must be an integer >= 2"),
    (["--max-episode-steps", "0"], "--max-episode-steps must be an integer >= 1"),
    (["--max-trajectory-tokens", "0"], "--max-trajectory-tokens must be an integer >= 1"),
    (["--max-assistant-tokens", "-5"], "--max-assistant-tokens must be an integer >= 1"),
    (["--max-assistant-tokens", "5000", "--max-trajectory-tokens", "4000"], "--max-assistant-tokens must be < --max-trajectory-tokens (4000)"),
    (["--max-assistant-tokens", "4000", "--max-trajectory-tokens", "4000"], "--max-assistant-tokens must be < --max-trajectory-tokens (4000)"),
    (["--save-every", "-1"], "--save-every must be an integer >= 0"),
    (["--max-train-games", "0"], "--max-train-games must be an integer >= 1"),
    (["--temperature", "-0.1"], "--temperature must be >= 0"),
    (["--temperature", "0.7"], "--temperature must be 1 for training on the local backend"),
    (["--top-p", "0.9"], "--top-p must be 1 for training on the local backend"),
    (["--top-p", "0"], "--top-p must be in (0, 1]"),
    (["--top-p", "1.5"], "--top-p must be in (0, 1]"),
    (["--device", "gpu0"], "--device must be auto, cpu, cuda or cuda:N"),
    (["--sampler-device", "gpu1"], "--sampler-device must be auto, cpu, cuda or cuda:N"),
    (["--dtype", "int8"], "--dtype must be one of auto, float32, bfloat16, float16"),
    (["--learning-rate", "0"], "--learning-rate must be > 0"),
    (["--learning-rate=-1e-6"], "--learning-rate must be > 0"),
    (["--ppo-clip-low", "0"], "--ppo-clip-low must be in (0, 1]"),
    (["--ppo-clip-low", "1.1"], "--ppo-clip-low must be in (0, 1]"),
    (["--ppo-clip-high", "0.9"], "--ppo-clip-high must be >= 1"),
    (["--lora-rank", "2"], "--lora-rank must be an integer in [4, 64]"),
    (["--adam-beta1", "1.0"], "--adam-beta1 must be in [0, 1)"),
    (["--adam-eps", "0"], "--adam-eps must be > 0"),
    (["--grad-clip", "-1"], "--grad-clip must be >= 0"),
    (["--weight-decay", "-0.1"], "--weight-decay must be >= 0"),
    (["--seed", "-1"], "--seed must be an integer >= 0"),
    (["--run-name", "a b"], "--run-name must be 1-100 letters"),
    (["--prefill-price-per-m", "-1"], "--prefill-price-per-m must be >= 0"),
    (["--backend", "trio", "--games-per-batch", "16", "--group-size", "16"],
     "--games-per-batch x --group-size must be <= 128 with --backend trio (got 16 x 16 = 256)"),
    (["--backend", "trio", "--max-trajectory-tokens", "16000"], "--max-trajectory-tokens must be <= 12000 with --backend trio"),
    (["--backend", "gpu"], "--backend must be one of local, trio (got 'gpu')"),      # choices: checked with every setting
    (["--swanlab-mode", "cloud"], "--swanlab-mode must be one of online, local, offline, disabled (got 'cloud')"),
    (["--max-steps", "two"], "argument --max-steps: invalid int value"),
    (["--win-reward", "-1"], "--win-reward must be a finite number > 0 (got -1.0)"),
    (["--invalid-penalty", "-0.01"], "--invalid-penalty must be a finite number >= 0 (got -0.01)"),
    (["--step-return", "late"], "--step-return must be one of win, all (got 'late')"),
]


@pytest.mark.parametrize("flags,message", BAD_FLAGS, ids=[" ".join(f) for f, _ in BAD_FLAGS])
def test_bad_flag(flags, message, tmp_path, capsys):
    try: status = main(["train", "--output-dir", str(tmp_path / "runs"), *flags])
    except SystemExit as e: status = e.code           # argparse's own errors (types, choices)
    err = capsys.readouterr().err
    assert status == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()          # validation happens before any work


# --- one update through the command line ----------------------------------------------------------------------

def check_checkpoints_loadable(run_dir, base_model="tiny-qwen3"):
    "Every listed checkpoint exists; the last state restores with its optimizer and the sampler weights sample."
    import pytrio
    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.runs.train import restore_training_client
    ckpts = read_jsonl(run_dir / "checkpoints.jsonl")
    assert ckpts
    for c in ckpts: assert Path(c["state_path"]).is_dir() and Path(c["sampler_path"]).is_dir()
    svc = make_service_client("local")
    tc = restore_training_client(svc, ckpts[-1]["state_path"])
    tok = tc.get_tokenizer()
    sc = svc.create_sampling_client(base_model, model_path=ckpts[-1]["sampler_path"])
    res = sc.sample(pytrio.ModelInput.from_ints(tok.encode("go to fridge 1")), 1,
                    pytrio.SamplingParams(max_tokens=4, temperature=1.0, seed=0)).result()
    assert len(res.sequences[0].tokens) >= 1
    return ckpts


def test_one_update_cli_no_report(small_data_root, tmp_path, capsys):
    runs = tmp_path / "runs"
    status, out, err = run_cli([*TINY, "--max-steps", "1", "--save-every", "0", "--run-name", "one",
                                "--data-root", str(small_data_root), "--output-dir", str(runs), "--no-report"], capsys)
    assert status == 0, err
    run_dir = runs / "one"
    ckpts = read_jsonl(run_dir / "checkpoints.jsonl")
    assert [c["step"] for c in ckpts] == [1]          # --save-every 0: only the final save
    assert f"Saved state: {ckpts[0]['state_path']}" in out + err
    assert f"Saved sampler weights: {ckpts[0]['sampler_path']}" in out + err
    [m] = read_jsonl(run_dir / "metrics.jsonl")
    assert m["step"] == 1 and len(m["games"]) == 1
    for key in ROLLOUT_KEYS + TRAIN_KEYS: assert key in m, key
    assert any(k.startswith("rollout/success_rate/") for k in m)
    assert m["rollout/groups"] == 1 and m["tokens/prefill"] > 0 and m["tokens/sampled"] > 0
    if m["train/skipped"]: assert m["train/datums"] == 0 and m["train/loss"] is None
    else: assert m["train/datums"] >= 1 and m["train/loss"] is not None
    config = json.loads((run_dir / "config.json").read_text())
    assert config["group_size"] == 2 and config["base_model"] == "tiny-qwen3"
    [sample] = read_jsonl(run_dir / "samples.jsonl")
    assert sample["step"] == 1 and sample["steps"]
    check_checkpoints_loadable(run_dir)
    # the run directory is now taken: a second fresh run is refused, resuming a finished run does nothing
    status, out, err = run_cli([*TINY, "--max-steps", "1", "--run-name", "one", "--data-root", str(small_data_root),
                                "--output-dir", str(runs), "--no-report"], capsys)
    assert status == 2 and "already holds a run; pass --resume" in err
    status, out, err = run_cli([*TINY, "--run-name", "one", "--output-dir", str(runs), "--resume",
                                "--learning-rate", "0.5", "--no-report"], capsys)
    assert status == 2 and "--learning-rate 0.5 (the run has 1e-06)" in err



def test_one_update_with_a_sampler_device(small_data_root, tmp_path, capsys):
    "`--sampler-device cpu` beside `--device cpu`: one update end to end; the run records the setting."
    runs = tmp_path / "runs"
    status, out, err = run_cli([*TINY, "--device", "cpu", "--sampler-device", "cpu", "--max-steps", "1",
                                "--save-every", "0", "--run-name", "sdev", "--data-root", str(small_data_root),
                                "--output-dir", str(runs), "--no-report"], capsys)
    assert status == 0, err
    assert json.loads((runs / "sdev" / "config.json").read_text())["sampler_device"] == "cpu"
    [m] = read_jsonl(runs / "sdev" / "metrics.jsonl")
    assert m["step"] == 1 and m["tokens/sampled"] > 0

# --- a real PPO step: scripted replies (expert on branch 0, malformed on branch 1) scored by the model ---------

class ScriptedTrainer:
    "Factory for a Trainer whose rollouts use scripted replies scored by the model being trained."
    @staticmethod
    def make(config):
        from alfworld_rl.runs.train import Trainer
        from alfworld_rl.rl.policies import ScoredPolicy
        from alfworld_rl.rl.policies import ExpertPolicy, MalformedPolicy, MixedPolicy

        class _Trainer(Trainer):
            def sampler(self):
                real = super().sampler()
                self.real_sampler = real
                return ScoredPolicy(MixedPolicy([ExpertPolicy(self.tokenizer), MalformedPolicy(self.tokenizer)]), real)
        return _Trainer(config, progress=False)


def test_ppo_update_changes_the_weights(small_data_root, tmp_path):
    import pytrio
    from alfworld_rl.runs.train_config import TrainConfig
    from alfworld_rl.backends.service import make_service_client
    config = TrainConfig(base_model="tiny-qwen3", max_steps=1, games_per_batch=1, group_size=2, max_episode_steps=3,
                         max_assistant_tokens=48, max_trajectory_tokens=4096, learning_rate=1e-2, save_every=0,
                         run_name="ppo", swanlab_mode="disabled", data_root=str(small_data_root),
                         output_dir=str(tmp_path / "runs"))
    trainer = ScriptedTrainer.make(config).open()
    trainer.run()
    [m] = read_jsonl(config.run_dir / "metrics.jsonl")
    assert m["rollout/degenerate_group_rate"] == 0.0       # expert and malformed branches differ in reward
    assert m["train/skipped"] is False and m["train/datums"] == 2
    assert m["train/loss"] is not None and m["train/loss_tokens"] > 0
    assert m["train/train_tokens"] == m["tokens/trained"] > m["train/loss_tokens"]
    # the saved sampler weights are not the base model's any more
    [ckpt] = read_jsonl(config.run_dir / "checkpoints.jsonl")
    svc = make_service_client("local")
    probe = pytrio.ModelInput.from_ints(trainer.tokenizer.encode("You are in the middle of a room. go to fridge 1"))
    before = svc.create_sampling_client("tiny-qwen3").compute_logprobs(probe).result()
    after = svc.create_sampling_client("tiny-qwen3", model_path=ckpt["sampler_path"]).compute_logprobs(probe).result()
    assert max(abs(a - b) for a, b in zip(before[1:], after[1:])) > 1e-6


# --- resume: same games, same numbering, metrics after the last save rewritten --------------------------------

def test_resume_continues_from_last_save(small_data_root, tmp_path, capsys):
    runs = tmp_path / "runs"
    base = [*TINY, "--run-name", "res", "--data-root", str(small_data_root), "--output-dir", str(runs), "--no-report"]
    status, out, err = run_cli([*base, "--max-steps", "2", "--save-every", "1"], capsys)
    assert status == 0, err
    run_dir = runs / "res"
    first = read_jsonl(run_dir / "metrics.jsonl")
    assert [m["step"] for m in first] == [1, 2]
    assert [c["step"] for c in read_jsonl(run_dir / "checkpoints.jsonl")] == [1, 2]
    # As if killed after update 2 wrote its metrics but before its checkpoint line, mid-way through a write.
    lines = (run_dir / "checkpoints.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "checkpoints.jsonl").write_text(lines[0])
    with open(run_dir / "metrics.jsonl", "a") as f: f.write('{"step": 3, "rollout/rew')
    status, out, err = run_cli(["--run-name", "res", "--output-dir", str(runs), "--resume", "--max-steps", "3",
                                "--no-report"], capsys)
    assert status == 0, err
    assert "Resumed res after update 1" in out + err
    again = read_jsonl(run_dir / "metrics.jsonl")
    assert [m["step"] for m in again] == [1, 2, 3]
    assert again[0] == first[0]                                   # kept as it was
    assert again[1]["games"] == first[1]["games"]                 # update 2 redone on the same games
    from alfworld_rl.env.data import GameBatches, discover_games
    games = discover_games(small_data_root, "train", seed=0)
    assert again[2]["games"] == [g.id for g in GameBatches(games, 1, seed=0)[2]]
    assert [c["step"] for c in read_jsonl(run_dir / "checkpoints.jsonl")] == [1, 2, 3]
    assert [s["step"] for s in read_jsonl(run_dir / "samples.jsonl")] == [1, 2, 3]
    assert (run_dir / "metrics.jsonl").read_text().endswith("\n")


# --- the report through papermill -----------------------------------------------------------------------------

def test_one_update_through_papermill(small_data_root, tmp_path, capsys):
    import nbformat
    runs = tmp_path / "runs"
    status, out, err = run_cli([*TINY, "--max-steps", "1", "--save-every", "0", "--run-name", "pm",
                                "--data-root", str(small_data_root), "--output-dir", str(runs)], capsys)
    assert status == 0, err
    run_dir = runs / "pm"
    [ckpt] = read_jsonl(run_dir / "checkpoints.jsonl")
    assert f"Saved sampler weights: {ckpt['sampler_path']}" in out + err
    assert [m["step"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1]
    nb = nbformat.read(run_dir / "train.ipynb", as_version=4)
    params = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert params and 'run_name = "pm"' in params[0].source
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs) + "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "task:" in text and "won:" in text                     # the sample transcript was rendered
    assert any("image/png" in o.get("data", {}) for o in outputs)  # curves / datum picture
    check_checkpoints_loadable(run_dir)


# --- slow: the seed's 1-step check verbatim, a kill, and Ctrl-C --------------------------------------------------

@pytest.mark.slow
def test_seed_one_step_flags_verbatim(small_data_root, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli([*SEED_ONE_STEP, "--backend", "local", "--base-model", "tiny-qwen3",
                                "--data-root", str(small_data_root)], capsys)
    assert status == 0, err
    run_dir = tmp_path / "runs" / "alfworld-smoke"
    [m] = read_jsonl(run_dir / "metrics.jsonl")
    assert m["rollout/trajectories"] == 8 and m["rollout/groups"] == 1
    assert [c["step"] for c in read_jsonl(run_dir / "checkpoints.jsonl")] == [1]
    assert (run_dir / "train.ipynb").exists()
    check_checkpoints_loadable(run_dir)


def _spawn_train(args, cwd):
    "Start `alfworld-rl train ARGS` as a subprocess of its own."
    code = "import sys; from alfworld_rl.cli import main; sys.exit(main())"
    return subprocess.Popen([sys.executable, "-c", code, "train", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_lines(path, n, proc, timeout=300):
    "Wait until `path` holds `n` complete records (or the process ends)."
    t0 = time.time()
    while time.time() - t0 < timeout:
        if len(read_jsonl(path)) >= n: return True
        if proc.poll() is not None: return False
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_resume_after_kill(small_data_root, tmp_path, capsys):
    runs = tmp_path / "runs"
    args = [*TINY, "--max-steps", "6", "--save-every", "2", "--run-name", "kill", "--data-root", str(small_data_root),
            "--output-dir", str(runs), "--no-report"]
    proc = _spawn_train(args, REPO)
    try: assert _wait_for_lines(runs / "kill" / "metrics.jsonl", 3, proc), proc.stdout.read()
    finally: proc.kill(); proc.wait()
    killed = read_jsonl(runs / "kill" / "metrics.jsonl")
    saved = read_jsonl(runs / "kill" / "checkpoints.jsonl")[-1]["step"]
    assert 2 <= saved < 6 and len(killed) >= saved
    status, out, err = run_cli(["--run-name", "kill", "--output-dir", str(runs), "--resume", "--no-report"], capsys)
    assert status == 0, err
    assert f"Resumed kill after update {saved}" in out + err
    metrics = read_jsonl(runs / "kill" / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5, 6]
    assert [m["games"] for m in metrics[:len(killed)]] == [m["games"] for m in killed]
    assert metrics[:saved] == killed[:saved]
    assert [c["step"] for c in read_jsonl(runs / "kill" / "checkpoints.jsonl")] == [2, 4, 6]


@pytest.mark.slow
def test_ctrl_c_stops_cleanly(small_data_root, tmp_path):
    runs = tmp_path / "runs"
    args = [*TINY, "--max-steps", "20", "--save-every", "1", "--run-name", "int", "--data-root", str(small_data_root),
            "--output-dir", str(runs), "--swanlab-mode", "offline"]
    proc = _spawn_train(args, REPO)
    try:
        assert _wait_for_lines(runs / "int" / "checkpoints.jsonl", 1, proc), proc.stdout.read()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
    assert proc.returncode == 130, out
    assert "interrupted" in out.lower() and "--resume" in out
    for name in ("metrics.jsonl", "checkpoints.jsonl", "samples.jsonl"):
        assert (runs / "int" / name).read_text().endswith("\n")   # only whole records
    assert len(read_jsonl(runs / "int" / "metrics.jsonl")) < 20


def test_init_state_starts_from_another_runs_weights(small_data_root, tmp_path, capsys):
    "`--init-state` loads a saved state's LoRA weights (e.g. from sft): the first sampler equals those weights."
    import pytrio
    import torch
    from alfworld_rl.backends.service import make_service_client
    svc = make_service_client("local", checkpoint_root=str(tmp_path / "ckpt"))
    tc = svc.create_lora_training_client("tiny-qwen3", rank=32, seed=0)
    tok = tc.get_tokenizer()
    tokens = tok.encode("go to fridge 1")
    for p in tc.peft.parameters():                      # move the LoRA away from its zero-initialised start
        if p.requires_grad:
            with torch.no_grad(): p.add_(0.05 * torch.randn_like(p))
    state = tc.save_state("init").result().path
    want = svc.create_sampling_client("tiny-qwen3", model_path=tc.save_weights_for_sampler("init").result().path)
    prompt = pytrio.ModelInput.from_ints(tokens)
    want_lp = want.compute_logprobs(prompt).result()
    base_lp = svc.create_sampling_client("tiny-qwen3").compute_logprobs(prompt).result()
    assert want_lp[1:] != pytest.approx(base_lp[1:], abs=1e-4)     # the init weights really differ from the base
    runs = tmp_path / "runs"
    status, out, err = run_cli([*TINY, "--max-steps", "1", "--learning-rate", "1e-12", "--run-name", "init",
                                "--init-state", state, "--data-root", str(small_data_root),
                                "--output-dir", str(runs), "--no-report"], capsys)
    assert status == 0, err
    assert f"from the weights of {state}" in out
    [ckpt] = read_jsonl(runs / "init" / "checkpoints.jsonl")
    got_lp = svc.create_sampling_client("tiny-qwen3", model_path=ckpt["sampler_path"]).compute_logprobs(prompt).result()
    assert got_lp[1:] == pytest.approx(want_lp[1:], abs=1e-4)
