"""PPO datums and the reference loss, used from the installed module the way the training loop uses them."""
import math
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from pytrio.client.builders.training import build_trainer_forward_payload
from pytrio.client.training_batch import plan_training_batch
from pytrio.model.limits import TrainingLimits

from alfworld_rl.rl.ppo import (assign_advantages, build_datums, datum_token_counts,
                             importance_sampling_loss, plot_datum, ppo_loss, rollout_metrics, trajectory_datum,
                             trajectory_reward, validate_datums)

VOCAB = 500


def random_conversation(rng: random.Random, turns: int):
    "A multi-turn token sequence: prompt, then (assistant turn, observation) pairs, with per-token logprobs."
    tokens, mask, logprobs = [], [], []
    for _ in range(rng.randint(3, 12)):                      # system prompt + task
        tokens.append(rng.randrange(VOCAB)); mask.append(False); logprobs.append(0.0)
    for _ in range(turns):
        for _ in range(rng.randint(1, 10)):                  # assistant tokens, sampled
            tokens.append(rng.randrange(VOCAB)); mask.append(True); logprobs.append(-rng.random() * 5)
        for _ in range(rng.randint(2, 15)):                  # end-of-turn + tool observation
            tokens.append(rng.randrange(VOCAB)); mask.append(False); logprobs.append(0.0)
    return SimpleNamespace(tokens=tokens, assistant_mask=mask, logprobs=logprobs, advantage=None,
                           reward=None, group_id=None)


def test_datum_alignment_on_random_multiturn_trajectories():
    rng = random.Random(0)
    for trial in range(20):
        traj = random_conversation(rng, turns=rng.randint(1, 6))
        traj.advantage = rng.choice([-1.0, -0.35, 0.25, 0.9])
        d = trajectory_datum(traj)
        n = len(traj.tokens)
        inp = d.model_input.to_ints()
        tgt = d.loss_fn_inputs["target_tokens"].tolist()
        lp = d.loss_fn_inputs["logprobs"].tolist()
        adv = d.loss_fn_inputs["advantages"].tolist()
        assert inp == traj.tokens[:-1] and tgt == traj.tokens[1:]
        assert len(lp) == len(adv) == n - 1
        for i in range(n - 1):
            if traj.assistant_mask[i + 1]:
                # the position that predicts assistant token i+1 carries its sampled logprob and A
                assert lp[i] == pytest.approx(traj.logprobs[i + 1], abs=1e-6)
                assert adv[i] == pytest.approx(traj.advantage)
            else:
                assert lp[i] == 0.0 and adv[i] == 0.0
        assert sum(1 for a in adv if a != 0) == sum(traj.assistant_mask)


def test_datums_pass_pytrio_validation_and_encode_to_the_wire_payload():
    rng = random.Random(1)
    trajs = [random_conversation(rng, turns=3) for _ in range(6)]
    for i, (t, r) in enumerate(zip(trajs, [1.0, 0.0, -0.1, 1.0, 1.0, 1.0])):
        t.reward, t.group_id = r, ("g0" if i < 3 else "g1")
    groups = assign_advantages(trajs)
    assert [len(g) for g in groups] == [3, 3]
    assert [t.advantage for t in groups[1]] == [0.0, 0.0, 0.0]      # degenerate group
    datums = build_datums(trajs)
    assert len(datums) == 3
    totals = validate_datums(datums, "ppo", vocab_size=VOCAB)
    counts = datum_token_counts(datums)
    assert totals.total_samples == 3
    assert totals.total_active_tokens == counts["train_tokens"]
    assert totals.total_advantage_tokens == counts["loss_tokens"] == sum(sum(t.assistant_mask) for t in trajs[:3])
    # what pytrio would put on the wire for these datums
    plan = plan_training_batch(datums, loss_fn="ppo", auto_shift=False,
                               limits=TrainingLimits(None, None, None), tokenizer_vocab_size=VOCAB)
    payload = build_trainer_forward_payload(plan.chunks[0], {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2},
                                            False, plan.totals)
    wire = payload.data[0]
    assert list(wire.target_ids) == trajs[0].tokens[1:]
    assert len(wire.logprobs) == len(wire.advantages) == len(trajs[0].tokens) - 1
    assert payload.loss.type == "ppo"


def test_validation_catches_out_of_vocabulary_tokens():
    traj = random_conversation(random.Random(2), turns=2)
    traj.advantage = 1.0
    with pytest.raises(Exception, match="outside the tokenizer vocabulary"):
        validate_datums([trajectory_datum(traj)], vocab_size=10)


def _loop_ppo(new, old, adv, lo, hi):
    "PPO loss written as an explicit loop over tokens (the definition, for comparison)."
    total = 0.0
    for n_, o_, a_ in zip(new, old, adv):
        r = torch.exp(n_ - o_)
        total = total - torch.minimum(r * a_, torch.clamp(r, lo, hi) * a_)
    return total / len(new)


def test_ppo_loss_value_and_gradient_match_the_per_token_definition():
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(200, generator=g) * 3
    new0 = old + (torch.rand(200, generator=g) - 0.5) * 1.5      # ratios from ~0.47 to ~2.1
    adv = torch.randn(200, generator=g)
    adv[::7] = 0.0
    ratio = torch.exp(new0 - old)
    assert ((ratio > 1.2) & (adv > 0)).any() and ((ratio < 0.8) & (adv < 0)).any()   # both clips engaged
    a = new0.clone().requires_grad_(); b = new0.clone().requires_grad_()
    la, lb = ppo_loss(a, old, adv), _loop_ppo(b, old, adv, 0.8, 1.2)
    la.backward(); lb.backward()
    assert la.item() == pytest.approx(lb.item(), rel=1e-5)
    assert torch.allclose(a.grad, b.grad, atol=1e-7)
    clipped = ((ratio > 1.2) & (adv > 0)) | ((ratio < 0.8) & (adv < 0))
    assert (a.grad[clipped] == 0).all() and (a.grad[~clipped & (adv != 0)] != 0).all()
    # without clipping PPO equals importance sampling
    assert ppo_loss(new0, old, adv, 1e-9, 1e9).item() == pytest.approx(importance_sampling_loss(new0, old, adv).item())


def test_rewards_advantages_and_metrics_for_a_batch():
    assert trajectory_reward(True, 3) == 0.7 and trajectory_reward(False, 0) == 0.0
    from alfworld_rl.rl.advantages import grpo
    assert grpo([0.7, 0.7]) == [0.0, 0.0]                   # identical rewards: exact zeros (one rule, rl.advantages)
    step = lambda ok, adm: SimpleNamespace(valid_format=ok, admissible=adm)
    batch = []
    for gid, (won, steps) in enumerate([(True, [step(True, True)] * 4), (False, [step(False, False)] * 2)] * 2):
        inv = sum(1 for s in steps if not s.admissible)
        batch.append(SimpleNamespace(game=SimpleNamespace(id="same-game", task_type="pick_clean_then_place_in_recep"),
                                     group_id=gid // 2, won=won, steps=steps, truncated=not won,
                                     invalid_action_count=inv, reward=trajectory_reward(won, inv), advantage=None))
    assign_advantages(batch)
    m = rollout_metrics(batch)
    assert m["groups"] == 2 and m["degenerate_group_rate"] == 0.0     # group_id wins over the shared game id
    assert m["success_rate"] == 0.5 and m["success_rate/pick_clean_then_place_in_recep"] == 0.5
    assert m["valid_tool_call_rate"] == pytest.approx(8 / 12) and m["admissible_action_rate"] == 1.0
    assert m["valid_action_rate"] == pytest.approx(8 / 12)
    assert m["advantage_std"] == pytest.approx(0.6)
    assert all(isinstance(v, float) and math.isfinite(v) for v in m.values())


def test_plot_datum_writes_an_image(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    traj = random_conversation(random.Random(3), turns=2)
    traj.advantage = -0.5
    tok = SimpleNamespace(decode=lambda ids: f"t{ids[0]}")
    fig = plot_datum(trajectory_datum(traj), tokenizer=tok)
    out = tmp_path / "datum.png"
    fig.savefig(out)
    assert out.stat().st_size > 1000
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == [f"t{x}" for x in traj.tokens[1:]]
