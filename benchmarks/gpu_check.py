"""A GPU check of the local backend at real size: two training updates with real rollouts on a random Qwen3.

On a CUDA machine this builds a real-size architecture from its config (Qwen3-1.7B by default; random weights,
no download) with the tiny tokenizer, generates a few ALFWorld games, and runs `alfworld-rl train --backend local`
for two updates (rollouts on the fast engine, PPO updates, sampler snapshots). It prints sampled tokens/s (during
rollouts), trained tokens/s (forward_backward + optim_step), peak GPU memory and the sampler/learner agreement
that `forward_backward` reports (`train/logprob_diff_abs_mean`, `train/ratio_mean`, `train/ratio_max`,
`train/clip_fraction`). Without CUDA it says so and exits 0.

    uv run python benchmarks/gpu_check.py                         # Qwen3-1.7B architecture on cuda
    uv run python benchmarks/gpu_check.py --arch qwen3-4b --group-size 8
    uv run python benchmarks/gpu_check.py --arch small --device cpu   # the same pipeline, small, on the CPU

The last line is `sampled_tok_s=... trained_tok_s=... peak_gb=... logprob_diff_abs_mean=... ratio_mean=... ratio_max=...`.
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
    from alfworld_rl.tiny_model import tiny_qwen3_path
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


def summarize(metrics: list[dict]) -> dict:
    "Throughput and agreement over the updates' metric records."
    total = lambda k: sum(r.get(k, 0) or 0 for r in metrics)
    last = next((r for r in reversed(metrics) if "train/ratio_mean" in r), {})
    return {"sampled_tok_s": total("tokens/sampled") / max(total("time/rollout_s"), 1e-9),
            "trained_tok_s": total("tokens/trained") / max(total("time/train_s"), 1e-9),
            **{k.split("/", 1)[1]: last.get(k, float("nan")) for k in
               ("train/logprob_diff_abs_mean", "train/ratio_mean", "train/ratio_max", "train/clip_fraction")}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="qwen3-1.7b", choices=sorted(ARCHS))
    ap.add_argument("--device", default="cuda", help="cuda or cuda:N (cpu only for the small self-check)")
    ap.add_argument("--games-per-batch", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-episode-steps", type=int, default=6)
    ap.add_argument("--max-assistant-tokens", type=int, default=128)
    ap.add_argument("--gradient-checkpointing", default="auto", choices=("auto", "on", "off"))
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; nothing to check (run it on a machine with a GPU)")
        return 0
    from alfworld_rl.cli import main as cli
    from alfworld_rl.core import read_jsonl
    from alfworld_rl.generate import generate_dataset
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
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    s = summarize(metrics)
    print(f"arch={args.arch} device={device} dtype={dtype} updates={len(metrics)} wall_s={wall:.1f} "
          f"gradient_checkpointing={args.gradient_checkpointing}")
    for r in metrics:
        print(json.dumps({k: r[k] for k in sorted(r) if k.startswith(("tokens/", "time/", "train/ratio", "train/logprob"))}))
    print(f"sampled_tok_s={s['sampled_tok_s']:.1f} trained_tok_s={s['trained_tok_s']:.1f} peak_gb={peak:.1f} "
          f"logprob_diff_abs_mean={s['logprob_diff_abs_mean']:.3g} ratio_mean={s['ratio_mean']:.4f} "
          f"ratio_max={s['ratio_max']:.4f} clip_fraction={s['clip_fraction']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
