"""Rollout engine on real generated games, the real environment and the tiny-qwen3 tokenizer, driven by the
scripted policies: stop reasons, rewards and advantages, token bookkeeping, determinism."""
import asyncio, json

import pytest

from alfworld_rl.rl import protocol as P
from alfworld_rl.core import UserError
from alfworld_rl.env.data import discover_games, TASK_TYPES
from alfworld_rl.env.branches import EnvGroup
from alfworld_rl.rl.policies import ExpertPolicy, MalformedPolicy, MixedPolicy, RandomAdmissiblePolicy, load_walkthrough
from alfworld_rl.rl.rollout import RolloutConfig, run_rollout, rollout_games, trajectory_reward
from alfworld_rl.rl.ppo import assign_advantages


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer
    from alfworld_rl.backends.tiny_model import tiny_qwen3_path
    return AutoTokenizer.from_pretrained(tiny_qwen3_path())


@pytest.fixture(scope="module")
def games(small_data_root):
    return discover_games(small_data_root, "train")


@pytest.fixture(scope="module")
def short_game(games):
    "The train game with the shortest walkthrough."
    return min(games, key=lambda g: len(load_walkthrough(g)))


class RecordingEnv:
    "The real `EnvGroup`, remembered so a test can inspect it after the rollout (and optionally failing)."
    made = []
    def __init__(self, game, group_size, max_steps, fail_branch=None, fail_at_step=None):
        self.inner = EnvGroup(game, group_size, max_steps)
        self.fail_branch, self.fail_at_step, self.calls = fail_branch, fail_at_step, [0] * group_size
        RecordingEnv.made.append(self)
    def __enter__(self): self.inner.__enter__(); return self
    def __exit__(self, *exc): return self.inner.__exit__(*exc)
    async def reset_async(self): return await self.inner.reset_async()
    async def step_branch_async(self, i, action):
        self.calls[i] += 1
        if i == self.fail_branch and self.calls[i] == self.fail_at_step:
            raise ConnectionError("worker went away")           # fault injected at the boundary
        return await self.inner.step_branch_async(i, action)


def check_token_bookkeeping(traj, tt):
    "tokens/logprobs/mask line up: assistant tokens are exactly the completions, each prompt is a prefix."
    assert len(traj.tokens) == len(traj.logprobs) == len(traj.assistant_mask)
    sampled = [t for t, m in zip(traj.tokens, traj.assistant_mask) if m]
    assert sampled == [t for s in traj.steps for t in s.completion_tokens]
    lps = [lp for lp, m in zip(traj.logprobs, traj.assistant_mask) if m]
    assert lps == [lp for s in traj.steps for lp in s.logprobs]
    assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.assistant_mask) if not m)
    for s in traj.steps:
        assert traj.tokens[s.prompt_length:s.prompt_length + len(s.completion_tokens)] == s.completion_tokens
    assert traj.tokens[-len(tt.closing):] == tt.closing            # the last turn is closed


def test_expert_wins_without_stop_token(tokenizer, short_game):
    cfg = RolloutConfig(group_size=2, max_episode_steps=12, max_trajectory_tokens=6000, max_assistant_tokens=128, seed=3)
    policy = ExpertPolicy(tokenizer, include_stop_token=False)
    seen = []
    batch = run_rollout(policy, tokenizer, [short_game], cfg, progress=lambda done, total: seen.append((done, total)))
    tt = P.turn_template(tokenizer)
    walk = load_walkthrough(short_game)
    assert seen == [(1, 2), (2, 2)]
    assert all(t.advantage is None for t in batch.trajectories)     # the rollout scores; advantages come after it
    assign_advantages(batch.trajectories)
    for t in batch.trajectories:
        assert (t.won, t.stop_reason, t.truncated, t.invalid_action_count, t.reward, t.advantage) == (True, "won", False, 0, 1.0, 0.0)
        assert [s.action for s in t.steps] == walk
        assert all(s.valid_format and s.admissible for s in t.steps)
        check_token_bookkeeping(t, tt)
        # without the stop token, every closing is appended off-policy (mask False)
        for s in t.steps:
            end = s.prompt_length + len(s.completion_tokens)
            assert t.tokens[end:end + len(tt.closing)] == tt.closing and not any(t.assistant_mask[end:end + len(tt.closing)])
        json.dumps(t.to_record())
        rec = t.to_record()
        assert rec["won"] and rec["stop_reason"] == "won" and rec["steps"][0]["action"] == walk[0]
        assert rec["messages"][0]["role"] == "system" and rec["messages"][-1]["content"].startswith("Status: task completed")
    assert batch.degenerate_groups == 1 and batch.groups == [[0, 1]]
    # one shared first request with num_samples=K, then one request per branch and turn
    assert policy.requests[0]["num_samples"] == 2 and all(r["num_samples"] == 1 for r in policy.requests[1:])
    assert len(policy.requests) == 1 + 2 * (len(walk) - 1)
    assert batch.prefill_tokens == sum(r["prompt_length"] for r in policy.requests)
    assert batch.sampled_tokens == sum(len(s.completion_tokens) for t in batch.trajectories for s in t.steps)
    assert batch.prompt_lengths_by_turn[0] == [batch.trajectories[0].steps[0].prompt_length] * 2


def test_malformed_is_invalid_and_does_not_move_env(tokenizer, short_game):
    RecordingEnv.made.clear()
    cfg = RolloutConfig(group_size=2, max_episode_steps=3, max_trajectory_tokens=6000, max_assistant_tokens=128)
    batch = run_rollout(MalformedPolicy(tokenizer), tokenizer, [short_game], cfg, env_factory=RecordingEnv)
    env = RecordingEnv.made[-1]
    assert env.inner.steps == [0, 0] and env.calls == [0, 0]           # the environment never moved
    assign_advantages(batch.trajectories)
    for t in batch.trajectories:
        assert (t.stop_reason, t.truncated, t.won, len(t.steps), t.invalid_action_count) == ("max_steps", True, False, 3, 3)
        assert t.reward == pytest.approx(-0.3) and t.advantage == pytest.approx(0.0)
        assert all(not s.valid_format and s.format_error and s.status == P.STATUS_INVALID_FORMAT for s in t.steps)
        assert all(m["content"].startswith("Status: invalid tool-call format") for m in t.messages if m["role"] == "tool")
    check_token_bookkeeping(batch.trajectories[0], P.turn_template(tokenizer))


def test_rewards_and_group_advantages(tokenizer, short_game):
    walk = load_walkthrough(short_game)
    cfg = RolloutConfig(group_size=3, max_episode_steps=len(walk) + 1, max_trajectory_tokens=6000, max_assistant_tokens=128)
    mixed = MixedPolicy([ExpertPolicy(tokenizer), MalformedPolicy(tokenizer), ExpertPolicy(tokenizer)])
    batch = run_rollout(mixed, tokenizer, [short_game], cfg)
    a, b, c = batch.trajectories
    assert batch.degenerate_groups == 0
    assign_advantages(batch.trajectories)
    assert (a.won, a.reward, c.won, c.reward) == (True, 1.0, True, 1.0)
    assert (b.won, b.stop_reason, b.invalid_action_count) == (False, "max_steps", len(walk) + 1)
    assert b.reward == pytest.approx(trajectory_reward(False, len(walk) + 1)) == pytest.approx(-0.1 * (len(walk) + 1))
    mean = (2.0 + b.reward) / 3
    for t in (a, b, c): assert t.advantage == pytest.approx(t.reward - mean)
    assert sum(t.advantage for t in batch.trajectories) == pytest.approx(0.0)
    assert batch.degenerate_groups == 0


def test_trajectory_too_long_and_determinism(tokenizer, short_game):
    tt = P.turn_template(tokenizer)
    probe = run_rollout(RandomAdmissiblePolicy(tokenizer), tokenizer, [short_game],
                        RolloutConfig(group_size=1, max_episode_steps=1, max_assistant_tokens=64, max_trajectory_tokens=8000))
    p0 = probe.trajectories[0].steps[0].prompt_length
    # room for the first turn and a few more, far fewer than max_episode_steps
    cfg = RolloutConfig(group_size=2, max_episode_steps=40, max_assistant_tokens=64, seed=11,
                        max_trajectory_tokens=p0 + 64 + len(tt.closing) + 300)
    runs = [run_rollout(RandomAdmissiblePolicy(tokenizer), tokenizer, [short_game], cfg) for _ in range(2)]
    for t in runs[0].trajectories:
        if t.won: continue
        assert t.stop_reason == "trajectory_too_long" and t.truncated and len(t.steps) >= 1
        assert len(t.tokens) <= cfg.max_trajectory_tokens
        assert all(s.prompt_length + 64 + len(tt.closing) <= cfg.max_trajectory_tokens for s in t.steps)
        # the turn that was not started: the prompt that would have been sent leaves no room for it
        next_prompt = len(t.tokens) + len(tt.observation_tokens(t.messages[-1]["content"]))
        assert next_prompt + 64 + len(tt.closing) > cfg.max_trajectory_tokens
        assert t.tokens[-len(tt.closing):] == tt.closing
    # a seeded sampler gives the same rollout twice
    for x, y in zip(*[r.trajectories for r in runs]):
        assert (x.tokens, x.logprobs, [s.action for s in x.steps], x.stop_reason) == \
               (y.tokens, y.logprobs, [s.action for s in y.steps], y.stop_reason)
    # a budget the first prompt cannot meet stops every branch before sampling
    policy = RandomAdmissiblePolicy(tokenizer)
    b = run_rollout(policy, tokenizer, [short_game],
                    RolloutConfig(group_size=2, max_episode_steps=5, max_assistant_tokens=64, max_trajectory_tokens=p0 + 10))
    assert [t.stop_reason for t in b.trajectories] == ["trajectory_too_long"] * 2 and policy.requests == []
    assert all(t.steps == [] and t.reward == 0.0 for t in b.trajectories)


def test_env_error_stops_only_that_branch(tokenizer, short_game):
    cfg = RolloutConfig(group_size=2, max_episode_steps=12, max_trajectory_tokens=6000, max_assistant_tokens=128)
    factory = lambda g, k, m: RecordingEnv(g, k, m, fail_branch=1, fail_at_step=2)
    batch = run_rollout(ExpertPolicy(tokenizer), tokenizer, [short_game], cfg, env_factory=factory)
    ok, bad = batch.trajectories
    assert ok.stop_reason == "won" and ok.won
    assert bad.stop_reason == "env_error" and "worker went away" in bad.error and len(bad.steps) == 2 and not bad.won
    assert bad.reward == 0.0 and ok.reward == 1.0
    # the failed branch is neither trained on nor part of the mean its sibling is compared with
    assert batch.degenerate_groups == 1                                # one scored branch: nothing to compare
    assign_advantages(batch.trajectories)
    assert bad.advantage == 0.0 and ok.advantage == 0.0
    assert json.loads(json.dumps(bad.to_record()))["stop_reason"] == "env_error"


def test_in_flight_limit(tokenizer, short_game):
    cfg = RolloutConfig(group_size=3, max_episode_steps=3, max_trajectory_tokens=6000, max_assistant_tokens=64,
                        max_requests_in_flight=1)
    policy = RandomAdmissiblePolicy(tokenizer, latency=lambda rng: 0.02)
    live, peak = [0], [0]
    inner = policy.sample_async
    async def counting(*a, **k):
        live[0] += 1; peak[0] = max(peak[0], live[0])
        try: return await inner(*a, **k)
        finally: live[0] -= 1
    policy.sample_async = counting
    run_rollout(policy, tokenizer, [short_game], cfg)
    assert peak[0] == 1 and len(policy.requests) >= 3


def test_bad_config_is_a_user_error(tokenizer, short_game):
    for kw, flag in [(dict(group_size=0), "--group-size"), (dict(max_requests_in_flight=0), "--max-requests-in-flight"),
                     (dict(temperature=-1.0), "--temperature"), (dict(top_p=1.5), "--top-p"),
                     (dict(max_assistant_tokens=9000, max_trajectory_tokens=8000), "--max-assistant-tokens")]:
        with pytest.raises(UserError, match=flag) as e:
            run_rollout(ExpertPolicy(tokenizer), tokenizer, [short_game], RolloutConfig(**kw))
        assert e.value.status == 2


@pytest.mark.slow
def test_policies_on_all_six_task_types(tokenizer, games):
    assert sorted({g.task_type for g in games}) == sorted(TASK_TYPES)
    cfg = RolloutConfig(group_size=2, max_episode_steps=30, max_trajectory_tokens=12000, max_assistant_tokens=128)
    tt = P.turn_template(tokenizer)
    expert = run_rollout(ExpertPolicy(tokenizer, style="json"), tokenizer, games, cfg)
    assert all(t.won and t.invalid_action_count == 0 and t.reward == 1.0 for t in expert.trajectories)
    rnd = run_rollout(RandomAdmissiblePolicy(tokenizer), tokenizer, games, RolloutConfig(group_size=2, max_episode_steps=8,
                      max_trajectory_tokens=12000, max_assistant_tokens=128))
    assert all(s.valid_format and s.admissible for t in rnd.trajectories for s in t.steps)
    bad = run_rollout(MalformedPolicy(tokenizer), tokenizer, games, RolloutConfig(group_size=2, max_episode_steps=4,
                      max_trajectory_tokens=12000, max_assistant_tokens=128))
    assert all(t.invalid_action_count == 4 and t.stop_reason == "max_steps" for t in bad.trajectories)
    for b in (expert, rnd, bad):
        assert len(b.groups) == 6
        for t in b.trajectories: check_token_bookkeeping(t, tt)
