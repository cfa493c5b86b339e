"""The window context and GiGPO advantages end to end: real engine, generated games, the local tiny-qwen3 backend."""
import json, math

import numpy as np
import pytest

from alfworld_rl.cli import main
from alfworld_rl.core import read_jsonl
from alfworld_rl.env.data import discover_games
from alfworld_rl.rl.rollout import RolloutConfig, run_rollout


@pytest.fixture(scope="module")
def tokenizer():
    from alfworld_rl.backends.local_models import load_tokenizer
    from alfworld_rl.backends.tiny_model import tiny_qwen3_path
    return load_tokenizer(str(tiny_qwen3_path()))


# --- bad values of every new flag: one line naming the flag, status 2, nothing written --------------------------

BAD = [
    (["--context", "half"], "--context must be one of full, window"),
    (["--history-length", "-1"], "--history-length must be an integer >= 0"),
    (["--advantage", "ppo"], "--advantage must be one of grpo, gigpo"),
    (["--advantage-norm", "std"], "--advantage-norm must be one of mean, mean_std"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
    (["--gamma", "nan"], "--gamma must be a finite number"),
    (["--step-advantage-weight", "-1"], "--step-advantage-weight must be a finite number >= 0"),
    (["--step-advantage-weight", "inf"], "--step-advantage-weight must be a finite number"),
]


@pytest.mark.parametrize("flags,message", BAD, ids=[" ".join(f) for f, _ in BAD])
def test_bad_train_flag(flags, message, tmp_path, capsys):
    status = main(["train", "--output-dir", str(tmp_path / "runs"), *flags])
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["sft", "eval"])
@pytest.mark.parametrize("flags,message", BAD[:2], ids=["context", "history"])
def test_bad_context_flag_sft_eval(command, flags, message, tmp_path, capsys):
    extra = ["--output-dir", str(tmp_path / "runs")] if command == "sft" else ["--output", str(tmp_path / "e.jsonl")]
    status = main([command, *extra, *flags])
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "e.jsonl").exists()


# --- window prompts of a recorded game ----------------------------------------------------------------------------

@pytest.mark.parametrize("history", [0, 1, 2])
def test_window_prompts_show_the_last_steps(small_data_root, tokenizer, history):
    from alfworld_rl.rl.policies import ExpertPolicy
    game = discover_games(small_data_root, "train")[0]
    config = RolloutConfig(group_size=1, max_episode_steps=10, max_assistant_tokens=64, temperature=0.0,
                           context="window", history_length=history)
    [traj] = run_rollout(ExpertPolicy(tokenizer), tokenizer, [game], config).trajectories
    assert traj.won and len(traj.steps) >= 3 and traj.context == "window" and traj.tokens == []
    first = traj.steps[0].anchor_observation.rsplit("\n\n", 1)[0]      # the key: observation, blank line, commands
    shown = [first] + [s.observation for s in traj.steps]
    for t, step in enumerate(traj.steps):
        text = tokenizer.decode(step.prompt_tokens)
        assert text.count("Task: ") == 1 and f"Step {t + 1} of 10" in text
        assert f"Observation:\n{shown[t].strip()}" in text                 # the current observation
        k = min(history, t)                                                  # pairs shown: the last k steps
        if k == 0: assert "Recent steps" not in text
        else:
            assert f"Recent steps (the last {k} of {t}):" in text
            for j in range(t - k, t):
                assert f"Step {j + 1} action: {traj.steps[j].action}" in text
            if t - k > 0: assert f"Step {t - k} action:" not in text         # older steps are gone
        assert step.prompt_length == len(step.prompt_tokens)
    # the prompt does not grow with the episode
    lengths = [len(s.prompt_tokens) for s in traj.steps]
    assert max(lengths) - min(lengths) < 200


# --- a datum per turn, whose logprobs are the sampler's ---------------------------------------------------------------

def test_window_datums_carry_the_sampled_tokens_and_logprobs(small_data_root, tokenizer):
    import pytrio
    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.rl.ppo import assign_advantages, build_datums
    svc = make_service_client("local", device="cpu")
    sampler = svc.create_sampling_client("tiny-qwen3")
    games = discover_games(small_data_root, "train")[:2]
    config = RolloutConfig(group_size=3, max_episode_steps=3, max_assistant_tokens=24, temperature=1.0, seed=5,
                           context="window")
    batch = run_rollout(sampler, tokenizer, games, config)
    for t in batch.trajectories: t.advantage, t.step_advantages = None, None
    assign_advantages(batch.trajectories, "gigpo")
    for t in batch.trajectories:                      # force every step to be trained on, so every turn is checked
        t.step_advantages = [0.5 + i for i in range(len(t.steps))]
    datums = build_datums(batch.trajectories)
    steps = [s for t in batch.trajectories for s in t.steps]
    assert len(datums) == len(steps) > 0
    for d, (t_index, s) in zip(datums, [(i, s) for t in batch.trajectories for i, s in enumerate(t.steps)]):
        ids = d.model_input.to_ints() + [int(d.loss_fn_inputs["target_tokens"].to_numpy()[-1])]
        assert ids == list(s.prompt_tokens) + list(s.completion_tokens)      # exactly what was sampled, no re-tokenising
        adv = d.loss_fn_inputs["advantages"].to_numpy()
        lps = d.loss_fn_inputs["logprobs"].to_numpy()
        n_prompt = len(s.prompt_tokens)
        assert (adv[:n_prompt - 1] == 0).all() and np.allclose(adv[n_prompt - 1:], 0.5 + t_index)
        np.testing.assert_allclose(lps[n_prompt - 1:], np.float32(s.logprobs), rtol=0, atol=1e-6)
        # and the sampler's logprobs are what the model gives those tokens in that prompt
        again = sampler.compute_logprobs(pytrio.ModelInput.from_ints(ids)).result(timeout=120)[n_prompt:]
        np.testing.assert_allclose(again, s.logprobs, atol=2e-4)


def test_full_context_gigpo_datum_varies_per_turn(small_data_root, tokenizer):
    from alfworld_rl.rl.policies import ExpertPolicy
    from alfworld_rl.rl.ppo import build_datums
    game = discover_games(small_data_root, "train")[0]
    [traj] = run_rollout(ExpertPolicy(tokenizer), tokenizer, [game],
                         RolloutConfig(group_size=1, max_episode_steps=10, max_assistant_tokens=64, temperature=0.0)).trajectories
    traj.advantage, traj.step_advantages = 0.3, [0.1 * (i + 1) for i in range(len(traj.steps))]
    [d] = build_datums([traj])
    adv = d.loss_fn_inputs["advantages"].to_numpy()
    for i, s in enumerate(traj.steps):     # position j predicts token j + 1
        span = adv[s.prompt_length - 1:s.prompt_length - 1 + len(s.completion_tokens)]
        assert np.allclose(span, 0.1 * (i + 1))
    assert np.count_nonzero(adv) == sum(len(s.completion_tokens) for s in traj.steps)


# --- gigpo on real trajectories: shared first state, env-error branch out of every mean --------------------------------

def test_gigpo_on_real_trajectories(small_data_root, tokenizer):
    from alfworld_rl.rl.policies import ExpertPolicy, MalformedPolicy, MixedPolicy
    from alfworld_rl.rl.ppo import assign_advantages, advantage_metrics
    game = discover_games(small_data_root, "train")[0]
    policy = MixedPolicy([ExpertPolicy(tokenizer), MalformedPolicy(tokenizer), ExpertPolicy(tokenizer)])
    batch = run_rollout(policy, tokenizer, [game], RolloutConfig(group_size=3, max_episode_steps=4, max_assistant_tokens=64,
                                                                  temperature=0.0, context="window"))
    a, b, c = batch.trajectories
    assign_advantages(batch.trajectories, "gigpo", gamma=1.0)
    assert a.steps[0].anchor_observation == b.steps[0].anchor_observation == c.steps[0].anchor_observation
    # branches 0 and 2 play the same walkthrough: same returns at shared states, so they get the same advantages
    assert a.step_advantages == c.step_advantages
    assert a.advantage > 0 > b.advantage and math.isclose(a.advantage + b.advantage + c.advantage, 0, abs_tol=1e-9)
    # the malformed branch never left the first state: every step shares the anchor of step 0
    assert all(s.anchor_observation == b.steps[0].anchor_observation for s in b.steps)
    m = advantage_metrics(batch.trajectories, gigpo=True)
    assert m["gigpo/anchor_groups"] >= 1 and 0 <= m["gigpo/singleton_rate"] < 1
    # an env-error branch: advantage 0 everywhere and out of the means (the others are unchanged)
    before = [list(t.step_advantages) for t in (a, b)]
    c.stop_reason = "env_error"
    assign_advantages(batch.trajectories, "gigpo", gamma=1.0)
    assert c.advantage == 0.0 and c.step_advantages is None
    assert a.advantage > 0 and a.step_advantages != before[0]           # the group is now two branches


def test_anchor_is_the_state_not_the_text(small_data_root, tokenizer):
    from alfworld_rl.rl import protocol as P
    from alfworld_rl.rl.policies import ExpertPolicy, MixedPolicy
    from alfworld_rl.rl.rollout import anchor_state

    class InadmissibleFirst(ExpertPolicy):
        "One command outside the admissible list, then the walkthrough."
        def reply(self, prompt_text, context, rng):
            if context[2] == 0: return P.format_tool_call("dance with the fridge 1", self.style)
            return super().reply(prompt_text, context, rng)

    game = discover_games(small_data_root, "train")[0]
    policy = MixedPolicy([ExpertPolicy(tokenizer), InadmissibleFirst(tokenizer)])
    a, b = run_rollout(policy, tokenizer, [game], RolloutConfig(group_size=2, max_episode_steps=4, max_assistant_tokens=64,
                                                               temperature=0.0, context="window")).trajectories
    assert not b.steps[0].admissible and b.steps[1].admissible and a.steps[0].action == b.steps[1].action
    # the inadmissible command left the state as it was: b's second step is taken in the first state, and after
    # the same walkthrough action both branches are in the same state again
    assert a.steps[0].anchor_observation == b.steps[0].anchor_observation == b.steps[1].anchor_observation
    assert a.steps[1].anchor_observation == b.steps[2].anchor_observation != a.steps[0].anchor_observation
    # the key holds the text of the state and its admissible commands (any order)
    text, commands = a.steps[1].anchor_observation.rsplit("\n\n", 1)
    assert text == a.steps[0].observation and a.steps[1].anchor_observation == anchor_state(text, commands.split("\n")[::-1])


# --- one update of train --context window --advantage gigpo on the tiny model ------------------------------------------

def test_train_window_gigpo_one_update(small_data_root, tmp_path, capsys):
    runs = tmp_path / "runs"
    status = main(["train", "--backend", "local", "--base-model", "tiny-qwen3", "--games-per-batch", "1",
                   "--group-size", "3", "--max-episode-steps", "3", "--max-assistant-tokens", "16",
                   "--max-trajectory-tokens", "2048", "--swanlab-mode", "disabled", "--max-steps", "1",
                   "--save-every", "0", "--run-name", "win", "--data-root", str(small_data_root),
                   "--output-dir", str(runs), "--no-report", "--context", "window", "--advantage", "gigpo",
                   "--advantage-norm", "mean_std", "--history-length", "1",
                   "--win-reward", "10", "--invalid-penalty", "0.5", "--step-return", "all"])
    out = capsys.readouterr()
    assert status == 0, out.err
    [m] = read_jsonl(runs / "win" / "metrics.jsonl")
    for key in ("gigpo/anchor_groups", "gigpo/singleton_rate", "gigpo/step_adv_abs_mean",
                "advantage/zero_trajectory_rate", "advantage/zero_step_rate"):
        assert key in m, key
    assert m["tokens/prompt_length_mean/turn_0"] > 0
    [sample] = read_jsonl(runs / "win" / "samples.jsonl")
    assert sample["context"] == "window" and all("advantage" in s for s in sample["steps"])
    # the reward settings score the stored trajectory and are the run's configuration
    assert sample["reward"] == pytest.approx(10.0 * sample["won"] - 0.5 * sample["invalid_action_count"])
    assert sum(s["reward"] for s in sample["steps"]) == pytest.approx(sample["reward"])
    config = json.loads((runs / "win" / "config.json").read_text())
    assert (config["win_reward"], config["invalid_penalty"], config["step_return"]) == (10.0, 0.5, "all")
    if not m["train/skipped"]: assert m["train/datums"] >= 1 and m["train/loss"] is not None


# --- the places line (--visited-places) ----------------------------------------------------------------------------

@pytest.mark.parametrize("on", [False, True])
def test_visited_places_line_lists_the_places_gone_to(small_data_root, tokenizer, on):
    "With the setting each prompt lists the places admitted `go to`s reached before it, first visit first; without it, no line."
    from alfworld_rl.rl.policies import RandomAdmissiblePolicy
    games = discover_games(small_data_root, "train")[:2]
    config = RolloutConfig(group_size=2, max_episode_steps=10, max_assistant_tokens=64, temperature=1.0, seed=3,
                           context="window", visited_places=on)
    trajs = run_rollout(RandomAdmissiblePolicy(tokenizer), tokenizer, games, config).trajectories
    gone = 0
    for traj in trajs:
        places = []
        for step in traj.steps:
            text = tokenizer.decode(step.prompt_tokens)
            if not on: assert "Places visited" not in text; continue
            assert text.count("Places visited: ") == 1
            assert f"\n\nPlaces visited: {', '.join(places) or 'none'}\n\n" in text
            if step.admissible and step.action.startswith("go to ") and step.action[6:] not in places:
                places.append(step.action[6:])
        gone += len(places)
    assert not on or gone >= 2          # random play goes places, so the line was exercised with real names
