"""Throughput of the embedded local backend: batched vs one-at-a-time sampling, continuous vs static batching
under staggered arrivals, and training tokens/s.

Sampling: N concurrent multi-turn trajectories (each turn samples a completion, then appends it and an
observation to its prompt, as the rollout does) served together through `sample_async`, against the same
trajectories served one at a time. Training: `forward_backward("ppo")` + `optim_step` on datums of a fixed length.

Staggered arrivals (`--staggered`): the trajectories start at spaced times and wait a random "environment step"
between turns, with completions of different lengths, so requests reach the sampler at scattered times as an
asynchronous rollout issues them. The same workload runs on one model (a random Qwen3 with Qwen's 151,936-token
vocabulary, built from a config, no download) through a continuous-batching client and a static one
(`continuous=False`: a batch decodes to completion before the next is admitted, prompts prefilled one at a time).

    uv run python benchmarks/local_backend.py                      # tiny-qwen3 on the CPU
    uv run python benchmarks/local_backend.py --model mid --device cuda   # a mid-size random Qwen3 on a GPU
    uv run python benchmarks/local_backend.py --staggered          # only the staggered-arrival comparison

The last line is `batched_tok_s=<x> sequential_tok_s=<y> speedup=<x/y> train_tok_s=<z>`, or with `--staggered`
`continuous_tok_s=<x> static_tok_s=<y> continuous_speedup=<x/y>` (each mode's best of `--rounds` interleaved rounds,
every round printed: on a shared machine the best round is the one least disturbed by other load).
"""
import argparse, asyncio, random, statistics, sys, tempfile, time
from pathlib import Path

import torch
from pytrio import AdamParams, Datum, ModelInput, SamplingParams

from alfworld_rl.backends.service import make_service_client
from alfworld_rl.backends.tiny_model import EXAMPLE_TOOL, tiny_qwen3_path

OBSERVATION = ("Result: valid action.\nObservation: You arrive at countertop 1. On the countertop 1, you see a apple 1, "
               "a knife 2, and a mug 3.\nAdmissible actions: go to cabinet 1, go to fridge 1, take apple 1 from "
               "countertop 1, take mug 3 from countertop 1, examine countertop 1, inventory, look")

QWEN_VOCAB = 151_936
STAGGER_CONFIG = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=64, max_position_embeddings=32768, tie_word_embeddings=True)
MID_CONFIG = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=64, max_position_embeddings=32768, tie_word_embeddings=True)


def build_mid_model(out: Path) -> str:
    "A randomly initialized mid-size Qwen3 (about 150M parameters) with the tiny tokenizer, saved to `out`."
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
    tok = AutoTokenizer.from_pretrained(tiny_qwen3_path())
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=len(tok), eos_token_id=tok.eos_token_id,
                                         pad_token_id=tok.pad_token_id, **MID_CONFIG))
    model.save_pretrained(out); tok.save_pretrained(out)
    return str(out)


def build_qwen_vocab_model(out: Path, config: dict = STAGGER_CONFIG) -> str:
    "A randomly initialized small Qwen3 with Qwen's 151,936-token vocabulary and the tiny tokenizer, saved to `out`."
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
    tok = AutoTokenizer.from_pretrained(tiny_qwen3_path())
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=QWEN_VOCAB, eos_token_id=tok.eos_token_id,
                                         pad_token_id=tok.pad_token_id, **config))
    model.save_pretrained(out); tok.save_pretrained(out)
    return str(out)


def first_prompt(tok) -> list[int]:
    "The first prompt of a trajectory: system + tool schema + task."
    msgs = [{"role": "system", "content": "You are an agent in a household."},
            {"role": "user", "content": "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. "
             "Your task is to: put a clean mug in coffeemachine."}]
    text = tok.apply_chat_template(msgs, tools=[EXAMPLE_TOOL], add_generation_prompt=True, enable_thinking=False,
                                   tokenize=False)
    return tok.encode(text, add_special_tokens=False)


async def trajectory(sc, prompt, obs, turns, max_tokens, seed) -> int:
    "Play `turns` turns of one synthetic trajectory; the number of sampled tokens."
    total = 0
    for t in range(turns):
        sp = SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=seed * 1000 + t, stop=[])
        seq = (await sc.sample_async(ModelInput.from_ints(prompt), sampling_params=sp)).sequences[0]
        total += len(seq.tokens)
        prompt = prompt + seq.tokens + obs
    return total


async def batched(sc, prompt, obs, n, turns, max_tokens) -> int:
    "All `n` trajectories concurrently."
    return sum(await asyncio.gather(*[trajectory(sc, prompt, obs, turns, max_tokens, i) for i in range(n)]))


async def sequential(sc, prompt, obs, n, turns, max_tokens) -> int:
    "The same trajectories one after another."
    total = 0
    for i in range(n): total += await trajectory(sc, prompt, obs, turns, max_tokens, i)
    return total


async def staggered_trajectory(sc, prompt, obs, index, turns, gap_s, env_s, max_tokens) -> int:
    """Trajectory `index`: starts `index * gap_s` in, samples `turns` completions of seeded random lengths up to
    `max_tokens`, waiting a random environment step (mean `env_s`) between them; the number of sampled tokens."""
    rng = random.Random(index)
    await asyncio.sleep(index * gap_s)
    total = 0
    for t in range(turns):
        sp = SamplingParams(max_tokens=rng.randint(max(1, max_tokens // 6), max_tokens), temperature=1.0,
                            seed=index * 1000 + t, stop=[])
        seq = (await sc.sample_async(ModelInput.from_ints(prompt), sampling_params=sp, return_text=False)).sequences[0]
        total += len(seq.tokens)
        prompt = prompt + seq.tokens + obs
        await asyncio.sleep(rng.uniform(0, 2 * env_s))
    return total


async def staggered(sc, prompt, obs, n, turns, gap_s, env_s, max_tokens) -> int:
    "`n` staggered trajectories played concurrently; the number of sampled tokens."
    return sum(await asyncio.gather(*[staggered_trajectory(sc, prompt, obs, i, turns, gap_s, env_s, max_tokens)
                                      for i in range(n)]))


def staggered_comparison(args, svc, tmp: Path) -> tuple[float, float]:
    "Sampled tokens/s of the continuous and the static client on the same staggered workload (Qwen-sized vocabulary)."
    from alfworld_rl.backends.local_sampler import LocalSamplingClient
    path = build_qwen_vocab_model(tmp / "qwen-vocab")
    tok, model = svc.get_tokenizer(path), svc._base_model(path)
    prompt, obs = first_prompt(tok), observation_tokens(tok)
    print(f"staggered: vocab={QWEN_VOCAB} hidden={STAGGER_CONFIG['hidden_size']} layers={STAGGER_CONFIG['num_hidden_layers']} "
          f"device={svc.device} dtype={svc.dtype} trajectories={args.trajectories} turns={args.turns} "
          f"max_tokens={args.max_tokens} gap_ms={args.gap_ms} env_ms={args.env_ms} prompt={len(prompt)}", flush=True)
    clients = {"continuous": LocalSamplingClient(model, tok, path, continuous=True),
               "static": LocalSamplingClient(model, tok, path, continuous=False)}
    run = lambda sc: asyncio.run(staggered(sc, prompt, obs, args.trajectories, args.turns, args.gap_ms / 1000,
                                           args.env_ms / 1000, args.max_tokens))
    best = {name: 0.0 for name in clients}
    try:
        for sc in clients.values(): run(sc)                                   # warm-up (and a warm prefix cache)
        for r in range(args.rounds):                                          # interleaved: load drifts hit both
            for name, sc in clients.items():
                seconds, tokens = timed(lambda: run(sc))
                best[name] = max(best[name], tokens / seconds)
                print(f"round {r} {name + ':':11} {tokens} tokens in {seconds:.2f}s = {tokens / seconds:.1f} tok/s", flush=True)
    finally:
        for sc in clients.values(): sc.close()
    rates = best                                                              # best round of each: least disturbed by load
    return rates["continuous"], rates["static"]


def observation_tokens(tok) -> list[int]:
    "The tokens appended after a completion: end of turn, a tool observation, the next generation prompt."
    return tok.encode("<|im_end|>\n<|im_start|>user\n<tool_response>\n" + OBSERVATION +
                      "\n</tool_response><|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)


def timed(fn) -> tuple[float, int]:
    "Seconds and result of `fn()`."
    t0 = time.perf_counter(); out = fn(); return time.perf_counter() - t0, out


def train_throughput(svc, base_model, vocab, n_datums, length, repeats) -> float:
    "Trained tokens per second of forward_backward('ppo') + optim_step on `n_datums` datums of `length` tokens."
    tc = svc.create_lora_training_client(base_model, rank=32, seed=0)
    g = torch.Generator().manual_seed(0)
    data = []
    for _ in range(n_datums):
        toks = torch.randint(0, vocab, (length + 1,), generator=g)
        adv = torch.zeros(length); adv[length // 2:] = 1.0
        data.append(Datum(model_input=ModelInput.from_ints(toks[:-1].tolist()), loss_fn_inputs={
            "target_tokens": toks[1:], "logprobs": torch.full((length,), -7.0) * (adv != 0), "advantages": adv}))
    cfg = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
    def step():
        tc.forward_backward(data, "ppo", cfg); tc.optim_step(AdamParams(learning_rate=1e-6, grad_clip_norm=1.0)).result()
    step()                                                                   # warm-up
    times = [timed(step)[0] for _ in range(repeats)]
    return n_datums * length / statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="tiny (tiny-qwen3), mid (random ~150M Qwen3), or a model directory")
    ap.add_argument("--device", default=None, help="auto (default), cpu, cuda")
    ap.add_argument("--trajectories", type=int, default=16)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--train-datums", type=int, default=8)
    ap.add_argument("--train-length", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--staggered", action="store_true", help="only the staggered-arrival continuous vs static run")
    ap.add_argument("--gap-ms", type=float, default=15.0, help="staggered: time between trajectory starts")
    ap.add_argument("--env-ms", type=float, default=10.0, help="staggered: mean environment step between turns")
    ap.add_argument("--rounds", type=int, default=3, help="staggered: timed runs of each mode, interleaved; the best counts")
    args = ap.parse_args(argv)
    if min(args.trajectories, args.turns, args.max_tokens, args.train_datums, args.train_length, args.repeats, args.rounds) < 1:
        ap.error("all counts must be >= 1")
    if min(args.gap_ms, args.env_ms) < 0: ap.error("--gap-ms and --env-ms must be >= 0")
    with tempfile.TemporaryDirectory() as tmp, \
            make_service_client("local", device=args.device, checkpoint_root=Path(tmp) / "ckpt") as svc:
        if args.staggered:
            cont, static = staggered_comparison(args, svc, Path(tmp))
            print(f"continuous_tok_s={cont:.1f} static_tok_s={static:.1f} continuous_speedup={cont / static:.2f}")
            return 0
        return run_all(args, svc, Path(tmp))


def run_all(args, svc, tmp: Path) -> int:
    "Run the sampling and training measurements with `svc`; every client is closed with `svc`."
    base_model = {"tiny": "tiny-qwen3", "mid": None}.get(args.model, args.model)
    if base_model is None: base_model = build_mid_model(tmp / "mid")
    tok = svc.get_tokenizer(base_model)
    sc = svc.create_sampling_client(base_model)
    prompt, obs = first_prompt(tok), observation_tokens(tok)
    print(f"model={args.model} device={svc.device} dtype={svc.dtype} threads={torch.get_num_threads()} "
          f"trajectories={args.trajectories} turns={args.turns} max_tokens={args.max_tokens} prompt={len(prompt)}", flush=True)
    run = lambda coro_fn: timed(lambda: asyncio.run(coro_fn(sc, prompt, obs, args.trajectories, args.turns, args.max_tokens)))
    run(batched)                                                              # warm-up
    tb, nb = run(batched)
    print(f"batched:    {nb} tokens in {tb:.2f}s = {nb / tb:.1f} tok/s", flush=True)
    ts, ns = run(sequential)
    print(f"sequential: {ns} tokens in {ts:.2f}s = {ns / ts:.1f} tok/s", flush=True)
    train = train_throughput(svc, base_model, len(tok), args.train_datums, args.train_length, args.repeats)
    print(f"training:   {args.train_datums} x {args.train_length} tokens per step, {train:.1f} tok/s", flush=True)
    print(f"batched_tok_s={nb / tb:.1f} sequential_tok_s={ns / ts:.1f} speedup={(nb / tb) / (ns / ts):.2f} "
          f"train_tok_s={train:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
