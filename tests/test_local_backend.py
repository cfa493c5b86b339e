"""The embedded local backend on tiny-qwen3 (CPU): losses, updates, sampling, checkpoints, validation."""
import asyncio
import math

import pytest
import torch
from pytrio import AdamParams, Datum, ModelInput, SamplingParams
from pytrio.client.training_batch import plan_training_batch
from pytrio.errors.base import ValidationError
from pytrio.model.limits import TrainingLimits

from alfworld_rl.backends.service import make_service_client
from alfworld_rl.core import UserError
from alfworld_rl.rl.ppo import trajectory_datum
from alfworld_rl.backends.tiny_model import EXAMPLE_TOOL

CLIP = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    return make_service_client("local", device="cpu", checkpoint_root=tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def tok(svc):
    return svc.get_tokenizer("tiny-qwen3")


@pytest.fixture(scope="module")
def prompt(tok):
    msgs = [{"role": "system", "content": "You are a household robot."},
            {"role": "user", "content": "Your task is to: put a hot apple in fridge."}]
    text = tok.apply_chat_template(msgs, tools=[EXAMPLE_TOOL], add_generation_prompt=True, enable_thinking=False,
                                   tokenize=False)
    return tok.encode(text, add_special_tokens=False)


@pytest.fixture(scope="module")
def base_sampler(svc):
    return svc.create_sampling_client("tiny-qwen3")


def sample(sc, prompt, **kw):
    kw.setdefault("max_tokens", 12)
    return sc.sample(ModelInput.from_ints(prompt), sampling_params=SamplingParams(**kw)).result(timeout=120).sequences[0]


def policy_datum(prompt, seq, advantage, old=None):
    "A datum the project's way (`ppo.trajectory_datum`): prompt tokens masked, completion tokens carry A."
    tokens = prompt + seq.tokens
    lps = [0.0] * len(prompt) + list(seq.logprobs if old is None else old)
    mask = [False] * len(prompt) + [True] * len(seq.tokens)
    return trajectory_datum(tokens, lps, mask, advantage)


def lora_grads(tc):
    return [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in tc.params]


def test_ppo_loss_and_gradient_match_hand_computation(svc, base_sampler, prompt):
    """Loss value and LoRA gradients of `ppo` equal an independent computation, with clipping on both sides."""
    tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=1, lora_alpha=64)
    # make the adapter non-trivial so the gradients reach every LoRA matrix
    with torch.no_grad():
        for p in tc.params: p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    seq = sample(base_sampler, prompt, seed=5, max_tokens=8, stop=None)
    n = len(seq.tokens)
    probe = policy_datum(prompt, seq, 1.0)
    lp_now = torch.tensor(tc.forward([probe], "ppo").result(timeout=120).loss_fn_outputs[0]["logprobs"].tolist())[-n:]
    # choose old logprobs so that ratios fall below, inside and above the clip range, with A of both signs
    ratios = torch.tensor([0.5, 0.9, 1.1, 1.5] * n)[:n]
    adv = torch.tensor([1.0, -1.0, 2.0, -2.0, -1.0, 1.0, 1.0, -1.0] * n)[:n]
    old = (lp_now - torch.log(ratios)).tolist()
    datum = policy_datum(prompt, seq, 1.0, old=old)
    advs = datum.loss_fn_inputs["advantages"].tolist()
    advs[-n:] = adv.tolist()
    datum = Datum(model_input=datum.model_input, loss_fn_inputs={
        "target_tokens": datum.loss_fn_inputs["target_tokens"], "logprobs": datum.loss_fn_inputs["logprobs"],
        "advantages": torch.tensor(advs)})
    out = tc.forward_backward([datum], "ppo", CLIP).result(timeout=120)
    got_grads = lora_grads(tc)
    token_count = len(prompt) + n - 1
    # hand computation: per token -min(r A, clip(r) A), summed, over all active tokens of the call
    r = ratios
    hand = -torch.minimum(r * adv, r.clamp(0.8, 1.2) * adv)
    assert out.metrics["token_count"] == token_count
    assert math.isclose(out.metrics["loss_sum"], hand.sum().item(), rel_tol=1e-4, abs_tol=1e-5)
    assert math.isclose(out.metrics["loss_mean"], hand.sum().item() / token_count, rel_tol=1e-4, abs_tol=1e-6)
    # clipped tokens (r < 0.8 with A < 0, r > 1.2 with A > 0) must carry no gradient: check with autograd
    for p in tc.params: p.grad = None
    ids = torch.tensor([datum.model_input.to_ints()])
    logits = tc.peft(input_ids=ids).logits[0].float()
    tgt = torch.tensor(datum.loss_fn_inputs["target_tokens"].tolist())
    lp = logits.log_softmax(-1).gather(1, tgt[:, None])[:, 0][-n:]
    ratio = torch.exp(lp - torch.tensor(old))
    unclipped = ratio * adv
    clipped = torch.where(adv > 0, torch.minimum(ratio, torch.tensor(1.2)), torch.maximum(ratio, torch.tensor(0.8))) * adv
    loss = -torch.where(unclipped <= clipped, unclipped, clipped.detach()).sum() / token_count
    loss.backward()
    want = lora_grads(tc)
    assert sum(g.abs().sum() for g in want) > 0
    for g, w in zip(got_grads, want):
        torch.testing.assert_close(g, w, rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize("loss_fn", ["importance_sampling", "ppo"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_advantage_sign_moves_probability(svc, base_sampler, prompt, loss_fn, sign):
    """A positive advantage makes the sampled continuation more likely after one step; a negative one less."""
    tc = svc.create_lora_training_client("tiny-qwen3", rank=8, seed=0)
    seq = sample(base_sampler, prompt, seed=11, max_tokens=10)
    datum = policy_datum(prompt, seq, sign)
    before = sum(seq.logprobs)
    tc.forward_backward([datum], loss_fn, CLIP if loss_fn == "ppo" else None)
    tc.optim_step(AdamParams(learning_rate=5e-3)).result(timeout=120)
    after = sum(tc.forward([datum], loss_fn).result(timeout=120).loss_fn_outputs[0]["logprobs"].tolist()[-len(seq.tokens):])
    assert (after - before) * sign > 0.05, (before, after)


def test_sampled_logprobs_equal_forward_pass(svc, base_sampler, prompt):
    """Sampler logprobs match both the sampler's own prompt scoring and the trainer's forward pass."""
    tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=0)
    for seed in (1, 2):
        seq = sample(base_sampler, prompt, seed=seed, max_tokens=16, temperature=1.0)
        assert len(seq.logprobs) == len(seq.tokens) and all(lp <= 0 for lp in seq.logprobs)
        scored = base_sampler.compute_logprobs(ModelInput.from_ints(prompt + seq.tokens)).result(timeout=120)
        torch.testing.assert_close(torch.tensor(scored[-len(seq.tokens):]), torch.tensor(seq.logprobs), atol=1e-4, rtol=0)
        out = tc.forward([policy_datum(prompt, seq, 1.0)], "ppo").result(timeout=120)
        lps = out.loss_fn_outputs[0]["logprobs"].tolist()[-len(seq.tokens):]
        torch.testing.assert_close(torch.tensor(lps), torch.tensor(seq.logprobs), atol=1e-4, rtol=0)


def test_seeded_sampling_is_deterministic_and_batch_independent(svc, base_sampler, prompt):
    """Same seed + prompt -> same tokens, alone, repeated, or among concurrent requests of other lengths."""
    sp = SamplingParams(max_tokens=20, seed=123, temperature=1.0)
    first = base_sampler.sample(ModelInput.from_ints(prompt), 3, sp).result(timeout=120)
    again = base_sampler.sample(ModelInput.from_ints(prompt), 3, sp).result(timeout=120)
    assert [s.tokens for s in first.sequences] == [s.tokens for s in again.sequences]
    assert len({tuple(s.tokens) for s in first.sequences}) > 1        # the samples of one request differ

    async def crowd():
        others = [base_sampler.sample_async(ModelInput.from_ints(prompt[: 5 + 3 * i]),
                                            sampling_params=SamplingParams(max_tokens=3 + i, seed=i, top_p=0.9))
                  for i in range(12)]
        return await asyncio.gather(*others[:6], base_sampler.sample_async(ModelInput.from_ints(prompt), 3, sp),
                                    *others[6:])
    res = asyncio.run(crowd())
    assert [s.tokens for s in res[6].sequences] == [s.tokens for s in first.sequences]
    for i, r in enumerate(res[:6] + res[7:]):
        s = r.sequences[0]
        assert len(s.tokens) == 3 + i or (len(s.tokens) < 3 + i and s.stop_reason == "stop")
    other = base_sampler.sample(ModelInput.from_ints(prompt), 1, SamplingParams(max_tokens=20, seed=124)).result(timeout=120)
    assert other.sequences[0].tokens != first.sequences[0].tokens


def test_stop_conditions(svc, base_sampler, tok, prompt):
    """Stop strings and stop token ids end a completion ("stop"); max_tokens ends it with "length"."""
    long = sample(base_sampler, prompt, temperature=0, max_tokens=24)
    assert long.stop_reason == "length" and len(long.tokens) == 24
    text = long.text
    assert text == tok.decode(long.tokens)
    stop = text[12:15]
    cut = sample(base_sampler, prompt, temperature=0, max_tokens=24, stop=["@@never@@", stop])
    assert cut.stop_reason == "stop" and stop in cut.text and stop not in tok.decode(cut.tokens[:-1])
    assert long.tokens[: len(cut.tokens)] == cut.tokens
    by_id = sample(base_sampler, prompt, temperature=0, max_tokens=24, stop=[long.tokens[5]])
    assert by_id.stop_reason == "stop" and by_id.tokens == long.tokens[: long.tokens.index(long.tokens[5]) + 1]
    # the end-of-turn token always stops, and is the last token of the completion
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=0)
    target = prompt + [im_end]
    datum = Datum(model_input=ModelInput.from_ints(target[:-1]),
                  loss_fn_inputs={"target_tokens": torch.tensor(target[1:]),
                                  "weights": torch.tensor([0.0] * (len(target) - 2) + [1.0])})
    for _ in range(4):
        tc.forward_backward([datum], "cross_entropy")
        tc.optim_step(AdamParams(learning_rate=0.05))
    sc = tc.save_weights_and_get_sampling_client()
    ended = sample(sc, prompt, temperature=0, max_tokens=24)
    assert ended.tokens == [im_end] and ended.stop_reason == "stop"


def test_save_load_round_trip(svc, base_sampler, prompt):
    """save_state -> create_training_client_from_state_with_optimizer restores logprobs, optimizer and step."""
    tc = svc.create_lora_training_client("tiny-qwen3", rank=8, seed=3)
    seq = sample(base_sampler, prompt, seed=2, max_tokens=10)
    data = [policy_datum(prompt, seq, 1.0)]
    adam = AdamParams(learning_rate=1e-3, weight_decay=0.01, grad_clip_norm=1.0)
    for _ in range(2):
        tc.forward_backward(data, "ppo", CLIP)
        tc.optim_step(adam)
    saved = tc.save_state("step 2").result(timeout=120)
    assert saved.path.endswith("weights/step-2") and saved.size > 0
    with pytest.raises(ValidationError, match="only allowed before"):
        tc.load_state(saved.path).result(timeout=120)
    tc2 = svc.create_training_client_from_state_with_optimizer(saved.path)
    assert tc2.step == 2 and tc2.lora.rank == 8
    lp1 = tc.forward(data, "ppo").result(timeout=120).loss_fn_outputs[0]["logprobs"].tolist()
    lp2 = tc2.forward(data, "ppo").result(timeout=120).loss_fn_outputs[0]["logprobs"].tolist()
    assert lp1 == lp2
    s1, s2 = tc.optimizer.state_dict(), tc2.optimizer.state_dict()
    assert s1["state"].keys() == s2["state"].keys()
    for k in s1["state"]:
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(s1["state"][k][name], s2["state"][k][name])
    # one more identical step keeps them identical; a weights-only restore diverges (fresh moments)
    tc3 = svc.create_training_client_from_state(saved.path)
    for c in (tc, tc2, tc3):
        c.forward_backward(data, "ppo", CLIP)
        c.optim_step(adam).result(timeout=120)
    for p, q in zip(tc.params, tc2.params): assert torch.equal(p, q)
    assert any(not torch.equal(p, q) for p, q in zip(tc.params, tc3.params))
    # sampler weights: a new sampling client reproduces the trainer's logprobs
    sw = tc.save_weights_for_sampler("final").result(timeout=120)
    sc = svc.create_sampling_client("tiny-qwen3", model_path=sw.path)
    scored = sc.compute_logprobs(ModelInput.from_ints(prompt + seq.tokens)).result(timeout=120)
    now = tc.forward(data, "ppo").result(timeout=120).loss_fn_outputs[0]["logprobs"].tolist()
    torch.testing.assert_close(torch.tensor(scored[-len(seq.tokens):]), torch.tensor(now[-len(seq.tokens):]),
                               atol=1e-4, rtol=0)
    with pytest.raises(UserError, match="sampler checkpoint"):
        svc.create_training_client_from_state(sw.path)


def test_microbatching_does_not_change_the_call(svc, base_sampler, prompt):
    """The loss and gradients of a call are the same whatever the micro-batch token budget."""
    seqs = [sample(base_sampler, prompt[: 20 + 9 * i], seed=i, max_tokens=6 + i) for i in range(4)]
    data = [policy_datum(prompt[: 20 + 9 * i], s, a) for i, (s, a) in enumerate(zip(seqs, [1.0, -0.5, 0.25, -1.0]))]
    results = []
    for budget in (16, 100_000):
        tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=9, microbatch_tokens=budget)
        with torch.no_grad():
            for p in tc.params: p.add_(0.05)
        out = tc.forward_backward(data, "importance_sampling").result(timeout=120)
        results.append((out, lora_grads(tc)))
    (a, ga), (b, gb) = results
    assert a.metrics["token_count"] == b.metrics["token_count"] == sum(len(d.model_input) for d in data)
    assert math.isclose(a.metrics["loss_sum"], b.metrics["loss_sum"], rel_tol=1e-5, abs_tol=1e-6)
    for x, y in zip(ga, gb): torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-7)


def test_cross_entropy_ignores_minus_100(svc, prompt):
    """-100 targets are left out of the loss and the token count; their logprob output is 0."""
    tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=0)
    tgt = prompt[1:]
    masked = [-100] * 10 + tgt[10:]
    full = tc.forward([Datum(model_input=ModelInput.from_ints(prompt[:-1]),
                             loss_fn_inputs={"target_tokens": torch.tensor(tgt)})]).result(timeout=120)
    part = tc.forward([Datum(model_input=ModelInput.from_ints(prompt[:-1]),
                             loss_fn_inputs={"target_tokens": torch.tensor(masked)})]).result(timeout=120)
    assert part.metrics["token_count"] == len(tgt) - 10
    lp_full, lp_part = full.loss_fn_outputs[0]["logprobs"].tolist(), part.loss_fn_outputs[0]["logprobs"].tolist()
    assert lp_part[:10] == [0.0] * 10
    torch.testing.assert_close(torch.tensor(lp_part[10:]), torch.tensor(lp_full[10:]))
    assert math.isclose(part.metrics["loss_sum"], -sum(lp_full[10:]), rel_tol=1e-5)


def test_project_datums_pass_pytrio_validation(svc, base_sampler, tok, prompt):
    """Datums built by `ppo.trajectory_datum` from sampler output pass pytrio's own planner for `ppo`."""
    seq = sample(base_sampler, prompt, seed=4, max_tokens=8)
    datum = policy_datum(prompt, seq, 0.5)
    plan = plan_training_batch([datum], loss_fn="ppo", auto_shift=False,
                               limits=TrainingLimits(None, None, None), tokenizer_vocab_size=len(tok))
    assert plan.totals.total_active_tokens == len(prompt) + len(seq.tokens) - 1
    tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=0)
    bad = Datum(model_input=datum.model_input, loss_fn_inputs={"target_tokens": datum.loss_fn_inputs["target_tokens"]})
    with pytest.raises(ValueError, match="logprobs is required"):
        tc.forward_backward([bad], "ppo").result(timeout=120)
    with pytest.raises(ValueError, match="Unsupported loss"):
        tc.forward_backward([datum], "kl").result(timeout=120)


def test_bad_input_fails_clearly(svc, base_sampler, prompt):
    with pytest.raises(ValidationError, match=r"rank must be in \[4, 64\]"):
        svc.create_lora_training_client("tiny-qwen3", rank=3)
    with pytest.raises(ValidationError, match="max_tokens"):
        base_sampler.sample(ModelInput.from_ints(prompt), sampling_params=SamplingParams())
    with pytest.raises(UserError, match="--device"):
        make_service_client("local", device="mps")
    with pytest.raises(UserError, match="no such model directory"):
        svc.create_sampling_client("/nonexistent/model")
    with pytest.raises(UserError, match="not a local sampler checkpoint"):
        svc.create_sampling_client("tiny-qwen3", model_path="/nonexistent/ckpt")


def test_async_surface(svc, base_sampler, prompt):
    """TrainingClient `*_async` need a double await; `sample_async` a single one (as in the SDK)."""
    async def run():
        tc = await svc.create_lora_training_client_async("tiny-qwen3", rank=4, seed=0)
        seq = (await base_sampler.sample_async(ModelInput.from_ints(prompt),
                                               sampling_params=SamplingParams(max_tokens=4, seed=0))).sequences[0]
        fut = await tc.forward_backward_async([policy_datum(prompt, seq, 1.0)], "ppo", CLIP)
        out = await fut
        step = await (await tc.optim_step_async(AdamParams()))
        return out, step
    out, step = asyncio.run(run())
    assert out.metrics["token_count"] > 0 and step.metrics["step"] == 1.0


@pytest.mark.slow
def test_long_datum_trains(svc, tok):
    """A 12,000-token datum goes through forward_backward on the CPU (micro-batch budget smaller than it)."""
    tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=0, microbatch_tokens=4096)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, len(tok), (12_001,), generator=g).tolist()
    d = trajectory_datum(tokens, [0.0] * 11_000 + [-5.0] * 1001, [False] * 11_000 + [True] * 1001, 1.0)
    out = tc.forward_backward([d, d], "ppo", CLIP).result(timeout=600)
    assert out.metrics["token_count"] == 24_000


def test_unstackable_cache_falls_back_to_row_by_row(svc, prompt, monkeypatch):
    """Models whose caches cannot be stacked are decoded one row at a time, with the same seeded tokens."""
    import alfworld_rl.backends.local_sampler as ls
    sc = svc.create_sampling_client("tiny-qwen3")
    reqs = [(prompt, SamplingParams(max_tokens=10, seed=1)), (prompt[:30], SamplingParams(max_tokens=6, seed=2))]

    async def both():
        return await asyncio.gather(*[sc.sample_async(ModelInput.from_ints(p), sampling_params=sp) for p, sp in reqs])
    stacked = [r.sequences[0] for r in asyncio.run(both())]
    monkeypatch.setattr(ls, "_stackable", lambda cache: False)
    rowwise = [r.sequences[0] for r in asyncio.run(both())]
    assert [s.tokens for s in stacked] == [s.tokens for s in rowwise]
    for a, b in zip(stacked, rowwise): torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)


def test_unstackable_cache_gives_every_sample_its_own_cache(svc, prompt, monkeypatch):
    """With `num_samples=K` on the row-by-row path (e.g. Qwen3.5's linear-attention caches), each sample starts from
    the prompt alone: its logprobs equal a forward pass over prompt + its own tokens."""
    import alfworld_rl.backends.local_sampler as ls
    monkeypatch.setattr(ls, "_stackable", lambda cache: False)
    sc = svc.create_sampling_client("tiny-qwen3")
    res = sc.sample(ModelInput.from_ints(prompt), 3, SamplingParams(max_tokens=8, seed=5, temperature=1.0)).result()
    assert len(res.sequences) == 3
    for s in res.sequences:
        full = sc.compute_logprobs(ModelInput.from_ints(prompt + s.tokens)).result()
        torch.testing.assert_close(torch.tensor(s.logprobs), torch.tensor(full[len(prompt):]), atol=1e-4, rtol=0)


def play_staggered(sc, starts, obs, turns=2, gap_s=0.004):
    """Trajectories as an asynchronous rollout issues them: task i starts i * `gap_s` after the first; each turn
    extends its prompt with the completion and `obs`. Per trajectory, the list of (tokens, logprobs) per turn."""
    async def trajectory(i, prompt):
        await asyncio.sleep(i * gap_s)
        out = []
        for t in range(turns):
            sp = SamplingParams(max_tokens=5 + 3 * ((i + t) % 4), seed=100 * i + t, temperature=1.0,
                                top_p=(1.0, 0.9)[i % 2], top_k=(0, 0, 20)[i % 3], stop=[])
            res = await sc.sample_async(ModelInput.from_ints(prompt), num_samples=1 + (i % 3 == 0), sampling_params=sp)
            out.append([(s.tokens, s.logprobs) for s in res.sequences])
            prompt = prompt + res.sequences[0].tokens + obs
        return out

    async def everyone():
        return await asyncio.gather(*[trajectory(i, p) for i, p in enumerate(starts)])
    return asyncio.run(everyone())


def test_continuous_batching_equals_one_at_a_time(svc, tok, prompt):
    """Staggered requests decoded in one running batch (joining it mid-decode, prefilled together, second turns
    from the prefix cache) give exactly the tokens of one-at-a-time sampling with the same seeds (float32)."""
    from alfworld_rl.backends.local_sampler import LocalSamplingClient
    model = svc._base_model("tiny-qwen3")
    obs = tok.encode("<|im_end|>\n<|im_start|>user\nNothing happens.<|im_end|>\n<|im_start|>assistant\n",
                     add_special_tokens=False)
    starts = [prompt[: 25 + 11 * i] for i in range(10)]
    with LocalSamplingClient(model, tok, "tiny-qwen3", prefix_cache_bytes=0, max_batch_rows=1) as alone:
        want = play_staggered(alone, starts, obs, gap_s=0.0)        # max_batch_rows=1: one row at a time
    for continuous in (True, False):
        with LocalSamplingClient(model, tok, "tiny-qwen3", continuous=continuous) as sc:
            got = play_staggered(sc, starts, obs)
            engine = sc._engine
            assert engine.prefix_hits > 0                            # second turns reused the first turns' caches
            assert engine.joined_running > 0 if continuous else engine.joined_running == 0
        for traj_got, traj_want in zip(got, want):
            for turn_got, turn_want in zip(traj_got, traj_want):
                assert [t for t, _ in turn_got] == [t for t, _ in turn_want]
                for (_, a), (_, b) in zip(turn_got, turn_want):
                    torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-4, rtol=0)


def test_batched_prefill_equals_single_prefill(svc, tok, prompt):
    """Prompts prefilled together (different lengths, after stored prefixes taken whole or in part, so rows have
    gaps) give the next-token logits of each prompt prefilled alone."""
    from alfworld_rl.backends.local_sampler import LocalSamplingClient
    model = svc._base_model("tiny-qwen3")
    with LocalSamplingClient(model, tok, "tiny-qwen3") as sc, torch.inference_mode():
        engine = sc._engine
        prompts = [prompt[: 20 + 17 * i] for i in range(5)]
        singles = [engine._prefill(p, False)[1] for p in prompts]
        engine.prefix_cache.clear()
        for n in (18, 40, 60):        # stored sequences: taken whole when a prefix, lent in part when sharing >= 32 tokens
            cache = engine._prefill(prompt[:n], True)[0]                 # True: no prefix reuse
            engine._store_prefix(prompt[:n], [(l.keys, l.values) for l in cache.layers])
        found = [engine._take_prefix(p) for p in prompts]
        assert [n for _, n in found] == [18, 36, 53, 60, 40]          # whole, part of 40, part of 60, whole, whole
        assert list(engine.prefix_cache) == []
        cache, mask, pos, hidden = engine._prefill_batch(prompts, found)
        assert pos.tolist() == [len(p) for p in prompts]
        assert mask.sum(1).tolist() == [len(p) for p in prompts]
        torch.testing.assert_close(engine._logits(hidden), engine._logits(torch.stack(singles)), atol=1e-4, rtol=0)


def test_gradient_checkpointing_gives_the_same_loss_and_gradients(svc, base_sampler, prompt):
    """Checkpointing the backbone recomputes each decoder layer in the backward pass and changes nothing else:
    the same loss, logprobs and LoRA gradients as without it (three datums sharing an 80-token prefix: without checkpointing, computed once)."""
    seqs = [sample(base_sampler, prompt[: n], seed=i, max_tokens=8) for i, n in enumerate((len(prompt), len(prompt), 80))]
    data = [policy_datum(prompt[: n], s, a) for n, s, a in zip((len(prompt), len(prompt), 80), seqs, (1.0, -0.5, 0.7))]
    results = []
    for checkpointing in (False, True):
        tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=2, gradient_checkpointing=checkpointing)
        with torch.no_grad():
            for p in tc.params: p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
        mlp = tc.peft.get_base_model().model.layers[0].mlp
        calls, forward = [], mlp.forward
        mlp.forward = lambda x: calls.append(x.shape[1]) or forward(x)       # sees recomputations too (hooks do not)
        out = tc.forward_backward(data, "ppo", CLIP).result(timeout=120)
        del mlp.forward
        results.append((out, lora_grads(tc), calls))
    (a, ga, na), (b, gb, nb) = results
    L = max(len(d.model_input) for d in data)
    assert len(na) == 2 and na[0] < L               # without: the shared prefix once, then the rest of every datum
    assert nb == [L, L]                             # with: the whole batch, then its recomputation in the backward pass
    assert math.isclose(a.metrics["loss_sum"], b.metrics["loss_sum"], rel_tol=1e-5, abs_tol=1e-6)
    for x, y in zip(a.loss_fn_outputs, b.loss_fn_outputs):
        torch.testing.assert_close(torch.tensor(x["logprobs"].tolist()), torch.tensor(y["logprobs"].tolist()), atol=1e-5, rtol=0)
    assert sum(g.abs().sum() for g in ga) > 0
    for x, y in zip(ga, gb): torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-7)


def test_head_only_where_used_gives_the_same_loss_gradients_and_reported_logprobs(svc, base_sampler, prompt):
    """By default the client computes the head only at positions with a loss or a sampler logprob: the same loss,
    agreement metrics, LoRA gradients and logprobs there as `all_logprobs=True`, and 0 at the prompt positions."""
    seqs = [sample(base_sampler, prompt[: n], seed=i, max_tokens=8) for i, n in enumerate((len(prompt), len(prompt), 80))]
    data = [policy_datum(prompt[: n], s, a) for n, s, a in zip((len(prompt), len(prompt), 80), seqs, (1.0, 0.0, 0.7))]
    results = []
    for every in (True, False):
        tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=3, all_logprobs=every)
        with torch.no_grad():
            for p in tc.params: p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
        results.append((tc.forward_backward(data, "ppo", CLIP).result(timeout=120), lora_grads(tc)))
    (a, ga), (b, gb) = results
    for key in ("loss_sum", "train/logprob_diff_abs_mean", "train/clip_fraction", "train/sampled_tokens"):
        assert math.isclose(a.metrics[key], b.metrics[key], rel_tol=1e-5, abs_tol=1e-6), key
    for d, x, y in zip(data, a.loss_fn_outputs, b.loss_fn_outputs):
        full, part = torch.tensor(x["logprobs"].tolist()), torch.tensor(y["logprobs"].tolist())
        sampled = torch.tensor(d.loss_fn_inputs["logprobs"].tolist()) != 0     # the reply (datum 2's advantage is 0)
        torch.testing.assert_close(part[sampled], full[sampled], atol=1e-5, rtol=0)
        assert (part[~sampled] == 0).all() and (full[~sampled][1:] != 0).all()
    assert sum(g.abs().sum() for g in ga) > 0
    for x, y in zip(ga, gb): torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-7)


def test_memory_settings(tmp_path):
    """--prefix-cache-gb sets the sampler's prefix-cache budget (1 GiB on the CPU by default); --gradient-checkpointing
    auto is off on the CPU; both are settings of train and eval with their rules."""
    from alfworld_rl.settings import check_settings
    from alfworld_rl.runs.train_config import TrainConfig
    from alfworld_rl.runs.evaluate import EvalConfig
    with make_service_client("local", device="cpu", checkpoint_root=tmp_path) as default, \
            make_service_client("local", device="cpu", checkpoint_root=tmp_path, prefix_cache_gb=0.25,
                                gradient_checkpointing="on") as set_:
        assert default.create_sampling_client("tiny-qwen3")._engine.prefix_cache_bytes == 2**30
        assert set_.create_sampling_client("tiny-qwen3")._engine.prefix_cache_bytes == 2**28
        assert default.gradient_checkpointing is False and set_.gradient_checkpointing is True
        assert set_.create_lora_training_client("tiny-qwen3", rank=4).gradient_checkpointing is True
    with pytest.raises(UserError, match="--gradient-checkpointing must be one of auto, on, off"):
        make_service_client("local", device="cpu", gradient_checkpointing="yes")
    for cls in (TrainConfig, EvalConfig):
        assert cls().prefix_cache_gb is None and cls().gradient_checkpointing == "auto"
        with pytest.raises(UserError, match=r"--prefix-cache-gb must be >= 0 \(got -1\)"):
            check_settings(cls(prefix_cache_gb=-1))
        with pytest.raises(UserError, match="--gradient-checkpointing must be"):
            check_settings(cls(gradient_checkpointing="sometimes"))



def test_sampler_device(tmp_path, tok, prompt):
    """--sampler-device: flag errors name it; sampling clients hold their models on it (the trainer's snapshots and the
    base model) while the trainer stays on --device; a snapshot copied to another device (the path a separate sampler
    device takes, here to the CPU again) samples exactly the tokens of the shared one."""
    from alfworld_rl.settings import check_settings
    from alfworld_rl.runs.train_config import TrainConfig
    from alfworld_rl.runs.evaluate import EvalConfig
    from alfworld_rl.runs.sft import SFTConfig
    from alfworld_rl.backends.local_sampler import LocalSamplingClient
    from alfworld_rl.backends.local_trainer import _moved_snapshot
    with pytest.raises(UserError, match="--sampler-device: 'mps' is not supported; use auto, cpu, cuda or cuda:N"):
        make_service_client("local", device="cpu", sampler_device="mps")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="--sampler-device cuda:1: no CUDA device is available here; use --sampler-device cpu"):
            make_service_client("local", device="cpu", sampler_device="cuda:1")
    for cls in (TrainConfig, EvalConfig, SFTConfig):
        assert cls().sampler_device is None
        check_settings(cls(sampler_device="cuda:1"))
        with pytest.raises(UserError, match=r"--sampler-device must be auto, cpu, cuda or cuda:N \(got 'gpu1'\)"):
            check_settings(cls(sampler_device="gpu1"))
    # the snapshot's sharing is what is tested: samplers keep the adapter unmerged (merging: the next test)
    with make_service_client("local", device="cpu", sampler_device="cpu", checkpoint_root=tmp_path, merge_sampler_lora="off") as svc:
        assert svc.sampler_device == torch.device("cpu")
        tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=0)
        base = svc.create_sampling_client("tiny-qwen3")
        seq = base.sample(ModelInput.from_ints(prompt), 1, SamplingParams(max_tokens=8, seed=1)).result().sequences[0]
        n = len(prompt)
        datum = trajectory_datum(prompt + seq.tokens, [0.0] * n + seq.logprobs, [False] * n + [True] * len(seq.tokens), 1.0)
        tc.forward_backward([datum], "ppo", CLIP).result(); tc.optim_step(AdamParams(learning_rate=1e-2)).result()
        shared = tc.save_weights_and_get_sampling_client()
        assert {p.device.type for p in shared._engine.model.parameters()} == {"cpu"}
        copied = _moved_snapshot(tc.peft, torch.device("cpu"), {})
        trainer = {p.data_ptr() for p in tc.peft.parameters()}
        assert not trainer & {p.data_ptr() for p in copied.parameters()}          # nothing shared with the trainer
        sp = SamplingParams(max_tokens=12, seed=3, temperature=1.0)
        with LocalSamplingClient(copied, tok, "tiny-qwen3") as sc:
            a, b = (c.sample(ModelInput.from_ints(prompt), 2, sp).result().sequences for c in (shared, sc))
        assert [s.tokens for s in a] == [s.tokens for s in b] and [s.logprobs for s in a] == [s.logprobs for s in b]
        # the service puts its samplers on its sampler device: `meta` stands for a second device on a CPU-only machine
        svc.sampler_device = torch.device("meta")
        svc._base_models.clear()                                                    # loaded on the CPU above
        first, second = tc.save_weights_and_get_sampling_client(), tc.save_weights_and_get_sampling_client()
        for sc in (first, second, svc.create_sampling_client("tiny-qwen3")):
            model = sc._engine.model
            assert {t.device.type for t in [*model.parameters(), *model.buffers()]} == {"meta"}
            sc.close()
        assert {p.device.type for p in tc.peft.parameters()} == {"cpu"}           # the trainer stays on --device
        lora = [n for n, _ in first._engine.model.named_parameters() if "lora_" in n]
        assert lora and all((dict(first._engine.model.named_parameters())[n] is dict(second._engine.model.named_parameters())[n])
                            == ("lora_" not in n) for n, _ in first._engine.model.named_parameters())

def test_a_merged_sampler_samples_the_trainers_weights(tmp_path, tok, prompt):
    """On the CPU in float32 samplers fold the LoRA into their weights (`merge_sampler_lora` auto): the same tokens and
    logprobs to rounding as the unmerged snapshot, no LoRA layer left, and the trainer's weights unchanged (only its
    frozen base weights shared)."""
    from alfworld_rl.backends.local_trainer import sampling_snapshot
    from alfworld_rl.backends.local_sampler import LocalSamplingClient
    with pytest.raises(UserError, match="merge_sampler_lora must be one of auto, on, off"):
        make_service_client("local", device="cpu", merge_sampler_lora="sometimes")
    with make_service_client("local", device="cpu", dtype="bfloat16", checkpoint_root=tmp_path) as svc:
        assert svc.merge_sampler_lora is False                  # bfloat16 would round a small update away
    with make_service_client("local", device="cpu", checkpoint_root=tmp_path) as svc:
        assert svc.merge_sampler_lora is True
        tc = svc.create_lora_training_client("tiny-qwen3", rank=8, seed=0)
        base = svc.create_sampling_client("tiny-qwen3")
        seq = base.sample(ModelInput.from_ints(prompt), 1, SamplingParams(max_tokens=8, seed=1)).result().sequences[0]
        n = len(prompt)
        datum = trajectory_datum(prompt + seq.tokens, [0.0] * n + seq.logprobs, [False] * n + [True] * len(seq.tokens), 1.0)
        for _ in range(3):
            tc.forward_backward([datum], "ppo", CLIP).result(); tc.optim_step(AdamParams(learning_rate=1e-2)).result()
        before = {k: v.detach().clone() for k, v in tc.peft.state_dict().items()}
        merged = tc.save_weights_and_get_sampling_client()
        model = merged._engine.model
        assert not [n for n, _ in model.named_parameters() if "lora_" in n]
        shared = {p.data_ptr() for p in model.parameters()}               # what it shares are the frozen base weights only
        assert all(not p.requires_grad for p in tc.peft.parameters() if p.data_ptr() in shared)
        assert all(torch.equal(before[k], v) for k, v in tc.peft.state_dict().items())
        sp = SamplingParams(max_tokens=12, seed=3, temperature=1.0)
        with LocalSamplingClient(sampling_snapshot(tc.peft), tok, "tiny-qwen3") as unmerged:
            a, b = (c.sample(ModelInput.from_ints(prompt), 4, sp).result().sequences for c in (merged, unmerged))
        assert [s.tokens for s in a] == [s.tokens for s in b]
        diff = max(abs(x - y) for s, t in zip(a, b) for x, y in zip(s.logprobs, t.logprobs))
        assert diff < 1e-4, diff
        # the update moved the sampler: the base model gives other logprobs to the same tokens
        moved = base.compute_logprobs(ModelInput.from_ints(prompt + a[0].tokens)).result()
        assert max(abs(x - y) for x, y in zip(moved[n:], a[0].logprobs)) > 1e-3


def test_a_sampler_leaves_other_threads_their_thread_count(svc):
    """The sampler's worker decodes on one CPU thread; training that starts in another thread afterwards (the
    trainer's, the notebook's) must still get the process's count (torch.set_num_threads also sets the count a
    thread begins with)."""
    import threading

    def count_of_a_new_thread() -> int:
        out = []
        t = threading.Thread(target=lambda: out.append(torch.get_num_threads()))
        t.start(); t.join()
        return out[0]

    original = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert count_of_a_new_thread() == 2
        svc.create_sampling_client("tiny-qwen3")        # starts a worker that sets its own count to 1
        assert count_of_a_new_thread() == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(original)


@pytest.mark.parametrize("family", ["llama", "qwen3.5"])
def test_sampler_logprobs_match_the_model_on_other_families(tok, prompt, family):
    """The engine runs the decoder stack and the head as two calls; for Llama (stacked batch cache) and Qwen3.5
    (linear-attention layers: each request served alone) the sampled tokens' logprobs, with two rows sharing a prompt
    and a late request joining them, equal those of one full forward pass of the model over prompt + completion."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3_5ForCausalLM, Qwen3_5TextConfig
    from alfworld_rl.backends.local_sampler import LocalSamplingClient
    size = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16)
    torch.manual_seed(0)
    model = (LlamaForCausalLM(LlamaConfig(**size)) if family == "llama" else
             Qwen3_5ForCausalLM(Qwen3_5TextConfig(**size, layer_types=["linear_attention", "full_attention"]))).eval()

    async def both(sc):
        first = sc.sample_async(ModelInput.from_ints(prompt), 2, SamplingParams(max_tokens=8, seed=1, stop=[]))
        await asyncio.sleep(0.01)
        late = sc.sample_async(ModelInput.from_ints(prompt[:30]), 1, SamplingParams(max_tokens=8, seed=2, stop=[]))
        return await asyncio.gather(first, late)
    with LocalSamplingClient(model, tok, family) as sc:
        responses = asyncio.run(both(sc))
    for p, res in zip((prompt, prompt[:30]), responses):
        for s in res.sequences:
            assert len(s.tokens) == 8
            with torch.no_grad(): ref = model(torch.tensor([p + s.tokens])).logits[0, len(p) - 1:-1].float().log_softmax(-1)
            want = ref.gather(1, torch.tensor(s.tokens)[:, None])[:, 0]
            torch.testing.assert_close(torch.tensor(s.logprobs), want, atol=1e-4, rtol=0)


def test_backend_refuses_a_model_that_changes_its_logits_after_the_head(svc, tok, tmp_path):
    """Gemma 2 caps its logits after the head; the sampler and the trainer, which apply the head themselves, say they
    cannot serve it before any work (the trainer when its client is created, not at its first update)."""
    from transformers import Gemma2Config, Gemma2ForCausalLM
    from alfworld_rl.backends.local_sampler import LocalSamplingClient
    model = Gemma2ForCausalLM(Gemma2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                           num_attention_heads=2, num_key_value_heads=1, head_dim=16))
    assert model.config.final_logit_softcapping is not None
    with pytest.raises(UserError, match="final_logit_softcapping"): LocalSamplingClient(model, tok, "gemma2")
    model.save_pretrained(tmp_path / "gemma2"); tok.save_pretrained(tmp_path / "gemma2")
    with pytest.raises(UserError, match="final_logit_softcapping"):
        svc.create_lora_training_client(str(tmp_path / "gemma2"), rank=4, seed=0)
