"""Learning on tokens the model actually sampled: one PPO update from the shipped base moves each sampled reply's
logprob in the direction of its advantage (real engine, generated games, local backend, no scripted replies)."""
import numpy as np
import pytest

from alfworld_rl.env.data import discover_games
from alfworld_rl.rl.rollout import RolloutConfig, run_rollout


def reply_logprob(sampler, datum) -> float:
    "Summed logprob, under `sampler`, of the reply tokens of a window-context datum (its non-zero-advantage targets)."
    import pytrio
    ids = datum.model_input.to_ints() + [int(datum.loss_fn_inputs["target_tokens"].to_numpy()[-1])]
    adv = datum.loss_fn_inputs["advantages"].to_numpy()
    lps = sampler.compute_logprobs(pytrio.ModelInput.from_ints(ids)).result(timeout=300)
    return float(sum(lp for lp, a in zip(lps[1:], adv) if a != 0))


def test_one_ppo_update_from_the_shipped_base_follows_the_advantages(small_data_root, tmp_path):
    import pytrio
    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.rl.ppo import assign_advantages, build_datums
    svc = make_service_client("local", device="cpu", checkpoint_root=str(tmp_path / "ckpt"))
    tc = svc.create_lora_training_client("mini-base", rank=16, seed=0)
    tok = tc.get_tokenizer()
    sampler = tc.save_weights_and_get_sampling_client()
    games = discover_games(small_data_root, "train")[:3]
    config = RolloutConfig(group_size=4, max_episode_steps=4, max_assistant_tokens=48, max_trajectory_tokens=4096,
                           temperature=1.0, seed=3, context="window")
    batch = run_rollout(sampler, tok, games, config)
    steps = [s for t in batch.trajectories for s in t.steps]
    assert sum(s.valid_format for s in steps) / len(steps) > 0.8           # the base writes tool calls
    assign_advantages(batch.trajectories, "grpo")
    datums = build_datums(batch)
    advantages = [float(d.loss_fn_inputs["advantages"].to_numpy()[d.loss_fn_inputs["advantages"].to_numpy() != 0][0])
                  for d in datums]
    assert len(datums) >= 4 and min(advantages) < 0 < max(advantages), advantages   # real, mixed-sign advantages
    before = [reply_logprob(sampler, d) for d in datums]
    tc.forward_backward(datums, "ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}).result()
    tc.optim_step(pytrio.AdamParams(learning_rate=2e-3, beta1=0.9, beta2=0.95, eps=1e-8)).result()
    after_sampler = tc.save_weights_and_get_sampling_client()
    moved = np.array([reply_logprob(after_sampler, d) for d in datums]) - np.array(before)
    adv = np.array(advantages)
    assert float(adv @ moved) > 0, (adv, moved)                              # the objective went up
    # replies with a positive advantage gained more logprob than those with a negative one (all replies share the
    # tool-call format, so both sets can move the same way; what the update must do is separate them)
    assert moved[adv > 0].mean() > moved[adv < 0].mean() + 1e-3, (adv, moved)
    assert np.abs(moved).max() > 1e-3                                        # it did move


def test_several_ppo_steps_per_update_move_the_policy_within_the_update(small_data_root, tmp_path):
    """`ppo_epochs=2, ppo_minibatches=2`: four optimizer steps in one update of the real loop; the first step trains
    the sampler's own policy (ratio 1), the last one a policy the earlier steps have already moved."""
    from alfworld_rl.core import read_jsonl
    from alfworld_rl.runs.train import train
    from alfworld_rl.runs.train_config import TrainConfig
    c = TrainConfig(base_model="mini-base", backend="local", max_steps=1, games_per_batch=2, group_size=4,
                    max_episode_steps=4, max_trajectory_tokens=4096, max_assistant_tokens=48, learning_rate=2e-3,
                    save_every=0, run_name="epochs", swanlab_mode="disabled", data_root=str(small_data_root),
                    lora_rank=16, seed=3, output_dir=str(tmp_path), context="window", advantage="gigpo", engine="fast",
                    ppo_epochs=2, ppo_minibatches=2)
    train(c, progress=False)
    rec = read_jsonl(tmp_path / "epochs" / "metrics.jsonl")[-1]
    assert rec["train/datums"] >= 4 and rec["train/optimizer_steps"] == 4, rec
    assert rec["train/logprob_diff_abs_mean"] < 1e-3, rec                 # step 1: the learner is still the sampler
    assert rec["train/logprob_diff_abs_mean_last"] > 1e-3, rec            # step 4: three steps have moved it
