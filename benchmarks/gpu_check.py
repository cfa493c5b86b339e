"""A GPU check of the local backend at real size: two training updates with real rollouts on a random Qwen3.

On a CUDA machine this builds a real-size architecture from its config (Qwen3-1.7B by default; random weights,
no download) with the tiny tokenizer, then

1. generates a few ALFWorld games and runs `alfworld-rl train --backend local` for two updates (rollouts on the
   fast engine through the sampler, PPO updates, sampler snapshots): sampled tokens/s of real rollouts. A random
   model rarely wins or differs in reward, so its groups are usually degenerate and the trainer skips the step;
2. therefore also runs two PPO updates directly on the training client: a group of completions sampled from a long
   prompt (`--prompt-tokens`) by the current sampler, given alternating advantages, through `forward_backward("ppo")`
   + `optim_step`, then a new sampler: sampled and trained tokens/s and the sampler/learner agreement that
   `forward_backward` reports (`train/logprob_diff_abs_mean`, `train/ratio_mean`, `train/ratio_max`,
   `train/clip_fraction`; update 2 samples from the snapshot of update 1, so it checks exact weights after a step).

It prints peak GPU memory over everything. Without CUDA it says so and exits 0.

    uv run python benchmarks/gpu_check.py                         # Qwen3-1.7B architecture on cuda
    uv run python benchmarks/gpu_check.py --arch qwen3-4b --group-size 8
    uv run python benchmarks/gpu_check.py --arch small --device cpu   # the same pipeline, small, on the CPU

The last line is `rollout_sampled_tok_s=... sampled_tok_s=... trained_tok_s=... peak_gb=... logprob_diff_abs_mean=...
ratio_mean=... ratio_max=... clip_fraction=...` (the agreement of update 2).
"""
import argparse, json, sys, tempfile, time
from pathlib import Path

import torch

QWEN3 = dict(vocab_size=151_936, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
             max_position_embeddings=40_960, rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)
ARCHS = {   # the published Qwen3 configurations (config.json of each hub model), random weights here
    "qwen3-0.6b": dict(QWEN3, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28),
    "qwen3-1.7b": dict(QWEN3, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28),
    "qwen3-4b": dict(QWEN3, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32),
    "small": dict(QWEN3, hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=32),    # a self-check of this script on the CPU
}


def build_model(arch: str, out: Path, device: torch.device, dtype: torch.dtype) -> str:
    "A randomly initialized Qwen3 of architecture `arch` with the tiny tokenizer, saved to `out` in `dtype`."
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
    from alfworld_rl.backends.tiny_model import tiny_qwen3_path
    tok = AutoTokenizer.from_pretrained(tiny_qwen3_path())
    torch.manual_seed(0)
    config = Qwen3Config(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **ARCHS[arch])
    with torch.device(device): model = Qwen3ForCausalLM(config).to(dtype)   # initialized on the device: fast
    model.save_pretrained(out); tok.save_pretrained(out)
    n = sum(p.numel() for p in model.parameters())
    del model
    if device.type == "cuda": torch.cuda.empty_cache()
    print(f"built {arch}: {n / 1e9:.2f}B parameters in {dtype} at {out}", flush=True)
    return str(out)


AGREEMENT = ("train/logprob_diff_abs_mean", "train/ratio_mean", "train/ratio_max", "train/clip_fraction")


def long_prompt(tok, n_tokens: int) -> list[int]:
    "A chat prompt with the tool schema and a conversation of observations, about `n_tokens` long."
    from alfworld_rl.backends.tiny_model import EXAMPLE_TOOL
    obs = ("You arrive at countertop 1. On the countertop 1, you see a apple 1, a knife 2, and a mug 3. "
           "Admissible actions: go to cabinet 1, go to fridge 1, take apple 1 from countertop 1, examine countertop 1.")
    msgs = [{"role": "system", "content": "You are an agent in a household."}]
    while len(tok.apply_chat_template(msgs, tools=[EXAMPLE_TOOL], tokenize=False)) < 4 * n_tokens:
        msgs += [{"role": "user", "content": obs}, {"role": "assistant", "content": "go to countertop 1"}]
    text = tok.apply_chat_template(msgs + [{"role": "user", "content": obs}], tools=[EXAMPLE_TOOL],
                                   add_generation_prompt=True, enable_thinking=False, tokenize=False)
    return tok.encode(text, add_special_tokens=False)[-n_tokens:]


def direct_updates(model_dir: str, args, ckpt: Path) -> list[dict]:
    "Two PPO updates on the training client from completions of the current sampler; per update, rates and agreement."
    from pytrio import AdamParams, ModelInput, SamplingParams
    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.rl.ppo import trajectory_datum
    out = []
    with make_service_client("local", device=args.device, checkpoint_root=ckpt,
                             gradient_checkpointing=args.gradient_checkpointing) as svc:
        tok = svc.get_tokenizer(model_dir)
        tc = svc.create_lora_training_client(model_dir, rank=32, seed=0)
        prompt = long_prompt(tok, args.prompt_tokens)
        for update in (1, 2):
            sc = tc.save_weights_and_get_sampling_client()
            sp = SamplingParams(max_tokens=args.max_assistant_tokens, temperature=1.0, seed=update, stop=[])
            t0 = time.perf_counter()
            seqs = sc.sample(ModelInput.from_ints(prompt), args.group_size * args.games_per_batch, sp).result().sequences
            sampled_s = time.perf_counter() - t0
            data = [trajectory_datum(prompt + s.tokens, [0.0] * len(prompt) + list(s.logprobs),
                                     [False] * len(prompt) + [True] * len(s.tokens), (-1.0) ** i) for i, s in enumerate(seqs)]
            t0 = time.perf_counter()
            fb = tc.forward_backward(data, "ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}).result()
            tc.optim_step(AdamParams(learning_rate=1e-5, grad_clip_norm=1.0)).result()
            trained_s = time.perf_counter() - t0
            sampled = sum(len(s.tokens) for s in seqs)
            out.append({"update": update, "sampled_tok_s": sampled / sampled_s,
                        "trained_tok_s": sum(len(d.model_input) for d in data) / trained_s,
                        **{k.split("/", 1)[1]: fb.metrics.get(k, float("nan")) for k in AGREEMENT}})
            print(json.dumps(out[-1]), flush=True)
            sc.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="qwen3-1.7b", choices=sorted(ARCHS))
    ap.add_argument("--device", default="cuda", help="cuda or cuda:N (cpu only for the small self-check)")
    ap.add_argument("--games-per-batch", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-episode-steps", type=int, default=6)
    ap.add_argument("--max-assistant-tokens", type=int, default=128)
    ap.add_argument("--gradient-checkpointing", default="auto", choices=("auto", "on", "off"))
    ap.add_argument("--prompt-tokens", type=int, default=4096, help="prompt length of the direct updates")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; nothing to check (run it on a machine with a GPU)")
        return 0
    from alfworld_rl.cli import main as cli
    from alfworld_rl.core import read_jsonl
    from alfworld_rl.env.generate import generate_dataset
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model_dir = build_model(args.arch, tmp / args.arch, device, dtype)
        data = generate_dataset(tmp / "data", train=max(4, args.games_per_batch), valid_seen=1, valid_unseen=1, seed=0,
                                min_receptacles=4, max_receptacles=6, distractors=3, max_plan_steps=30)
        if device.type == "cuda": torch.cuda.reset_peak_memory_stats(device)
        t0 = time.perf_counter()
        status = cli(["train", "--no-report", "--backend", "local", "--base-model", model_dir, "--device", args.device,
                      "--dtype", str(dtype).removeprefix("torch."), "--data-root", str(data), "--engine", "fast",
                      "--max-steps", "2", "--save-every", "0", "--games-per-batch", str(args.games_per_batch),
                      "--group-size", str(args.group_size), "--max-episode-steps", str(args.max_episode_steps),
                      "--max-assistant-tokens", str(args.max_assistant_tokens), "--max-trajectory-tokens", "12000",
                      "--gradient-checkpointing", args.gradient_checkpointing, "--swanlab-mode", "disabled",
                      "--output-dir", str(tmp / "runs"), "--run-name", "gpu-check"])
        wall = time.perf_counter() - t0
        if status != 0:
            print(f"gpu_check: train exited with status {status}")
            return status
        metrics = list(read_jsonl(tmp / "runs" / "gpu-check" / "metrics.jsonl"))
        print(f"train: arch={args.arch} device={device} dtype={dtype} updates={len(metrics)} wall_s={wall:.1f} "
              f"gradient_checkpointing={args.gradient_checkpointing} "
              f"skipped={sum(bool(r.get('train/skipped')) for r in metrics)}", flush=True)
        for r in metrics:
            print(json.dumps({k: r[k] for k in sorted(r) if k.startswith(("tokens/", "time/", "train/"))}), flush=True)
        total = lambda k: sum(r.get(k, 0) or 0 for r in metrics)
        rollout_tok_s = total("tokens/sampled") / max(total("time/rollout_s"), 1e-9)
        updates = direct_updates(model_dir, args, tmp / "ckpt")
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    last = updates[-1]
    print(f"rollout_sampled_tok_s={rollout_tok_s:.1f} sampled_tok_s={last['sampled_tok_s']:.1f} "
          f"trained_tok_s={last['trained_tok_s']:.1f} peak_gb={peak:.1f} "
          f"logprob_diff_abs_mean={last['logprob_diff_abs_mean']:.3g} ratio_mean={last['ratio_mean']:.4f} "
          f"ratio_max={last['ratio_max']:.4f} clip_fraction={last['clip_fraction']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
