"""The mini's speed against its arithmetic: PPO and evaluation episodes per second, tokens per second, and the share
of this machine's measured matmul peak that each path reaches, paths measured side by side in one run.

Paths:
- `ppo_update`: whole PPO updates of the mini recipe's settings (mini-base, window context, GiGPO, fast engine,
  12 steps, 48 reply tokens, --games-per-batch x --group-size), from the same seed, once with the training client
  reporting every position's logprob (`all_logprobs=True`, the head over every prompt position: the old path)
  and once with the head only where a loss or a sampler logprob is (the default). Both paths do the same updates:
  the same games, samples, loss and gradients.
- `train_pass`: one `forward_backward` + `optim_step` on the datums of a real window-context rollout, both ways
  (best of --repeats, alternated).
- `eval`: `alfworld-rl eval`'s evaluation of mini-base on --eval-games games per validation split.

The FLOP counts are estimates from the model's shape (2 x multiply-adds; the backward pass twice the forward):
per token, the decoder's linear layers, attention over the datum's positions and, where it runs, the output head.

    uv run python benchmarks/mini_speed.py [--updates 2] [--games-per-batch 4] [--group-size 8] [--eval-games 10]
"""
import argparse, json, tempfile, time
from pathlib import Path


def matmul_peak(n: int = 1024, repeats: int = 20) -> float:
    "FLOP/s of a float32 n x n matmul on this machine's torch threads (best of `repeats`)."
    import torch
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n ** 3 / best


def _timed(fn) -> float:
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0


def flops_per_token(config, context: int, head: bool) -> float:
    "Estimated forward FLOPs of one token at `context` positions (2 x multiply-adds), with or without the output head."
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    kv = config.num_key_value_heads * getattr(config, "head_dim", h // config.num_attention_heads)
    per_layer = h * h + 2 * h * kv + h * h + 3 * h * i + 2 * context * h     # q, k and v, o, MLP, scores and mix
    return 2 * (layers * per_layer + (h * config.vocab_size if head else 0))


def computed_positions(datums, budget: int) -> int:
    "Positions the local trainer's backbone runs for `datums`: per microbatch, a shared prefix once and the padded rest."
    from alfworld_rl.backends.local_trainer import _microbatches, common_prefix_length
    rows = [d.model_input.to_ints() for d in datums]
    total = 0
    for group in _microbatches([len(r) for r in rows], budget):
        batch = [rows[i] for i in group]
        longest = max(len(r) for r in batch)
        shared = min(common_prefix_length(batch), min(len(r) for r in batch) - 1) if len(batch) > 1 else 0
        shared = shared if shared >= 64 else 0
        total += shared + len(batch) * (longest - shared)
    return total


def games_for(root: Path, train: int, valid: int, seed: int = 0) -> Path:
    "Mini-style games (the recipe's task types and rooms) under `root`."
    from alfworld_rl.mini import recipe as mini
    s = mini.settings_from("mini", train_games=train, valid_games=valid, data_seed=seed)
    mini.mini_data(s, mini.MiniPaths(root), progress=False)
    return root / "data"


def ppo_updates(data_root: Path, out: Path, all_logprobs: bool, args) -> dict:
    "Run `args.updates` recipe updates with the training client reporting every position or not; their metrics."
    from alfworld_rl.runs.train import Trainer
    from alfworld_rl.runs.train_config import TrainConfig
    c = TrainConfig(base_model="mini-base", backend="local", engine="fast", context="window", advantage="gigpo",
                    max_steps=args.updates, games_per_batch=args.games_per_batch, group_size=args.group_size,
                    max_episode_steps=12, max_assistant_tokens=48, max_trajectory_tokens=6000, learning_rate=5e-4,
                    lora_rank=64, save_every=0, run_name=f"all-{all_logprobs}", output_dir=str(out),
                    data_root=str(data_root), swanlab_mode="disabled")
    trainer = Trainer(c, progress=False).open()
    trainer.tc.all_logprobs = all_logprobs
    try: trainer.run()
    finally: trainer.close()
    return [json.loads(line) for line in (c.run_dir / "metrics.jsonl").read_text().splitlines()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--games-per-batch", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--eval-games", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import torch
    from alfworld_rl.backends.local_models import resolve_model_path
    from transformers import AutoConfig
    config = AutoConfig.from_pretrained(resolve_model_path("mini-base"))
    peak = matmul_peak()
    print(f"machine: {torch.get_num_threads()} torch threads, float32 matmul peak {peak / 1e9:.1f} GFLOP/s")
    work = Path(tempfile.mkdtemp(prefix="mini_speed-"))
    data_root = games_for(work / "games", train=args.games_per_batch * args.updates, valid=args.eval_games)

    # the training pass alone, both ways, on the datums of one real rollout
    from shared_prefix import window_datums
    import pytrio
    svc, tc, datums = window_datums("mini-base", args.games_per_batch, args.group_size)
    tokens = sum(len(d.model_input) for d in datums)
    reply = sum(int((d.loss_fn_inputs["logprobs"].to_numpy() != 0).sum()) for d in datums)
    best = {True: float("inf"), False: float("inf")}
    for _ in range(args.repeats):
        for every in (True, False):
            tc.all_logprobs = every
            best[every] = min(best[every], _timed(lambda: (tc.forward_backward(datums, "ppo").result(),
                                                           tc.optim_step(pytrio.AdamParams(learning_rate=1e-6)).result())))
    positions = computed_positions(datums, tc.microbatch_tokens)
    ctx = tokens / len(datums) / 2                             # mean attention span of a position
    print(f"the backbone computes {positions:,} positions for these {tokens:,} tokens (shared prefixes once, padding included)")
    for every in (True, False):
        head_positions = positions if every else reply
        flops = 3 * (positions * flops_per_token(config, ctx, False)
                     + head_positions * (flops_per_token(config, 0, True) - flops_per_token(config, 0, False)))
        name = "all positions" if every else "loss and sampled positions"
        print(f"train_pass[head at {name}]: {len(datums)} datums, {tokens:,} tokens in {best[every]:.2f} s: "
              f"{tokens / best[every]:,.0f} tokens/s, ~{flops / best[every] / 1e9:.1f} GFLOP/s "
              f"({100 * flops / best[every] / peak:.0f}% of peak)")
    print(f"train_pass speedup: {best[True] / best[False]:.2f}x")

    # whole PPO updates, both ways
    rates = {}
    for every in (True, False):
        metrics = ppo_updates(data_root, work / "runs", every, args)
        episodes = sum(m["rollout/trajectories"] for m in metrics)
        seconds = sum(m["time/update_s"] for m in metrics)
        rollout = sum(m["time/rollout_s"] for m in metrics); train = sum(m["time/train_s"] for m in metrics)
        prefill = sum(m["tokens/prefill"] for m in metrics); trained = sum(m["tokens/trained"] for m in metrics)
        rates[every] = episodes / seconds
        print(f"ppo_update[{'all_logprobs' if every else 'head where used'}]: {episodes:.0f} episodes in {seconds:.1f} s: "
              f"{rates[every]:.3f} episodes/s (rollout {rollout:.1f} s, {prefill / rollout:,.0f} prefill tokens/s; "
              f"training {train:.1f} s, {trained / train:,.0f} trained tokens/s); success "
              f"{[round(m['rollout/success_rate'], 3) for m in metrics]}")
    print(f"ppo_update speedup: {rates[False] / rates[True]:.2f}x episodes/s")

    # evaluation of the base on the validation games
    from alfworld_rl.runs.evaluate import EvalConfig, evaluate
    c = EvalConfig(base_model="mini-base", data_root=str(data_root), output=str(work / "eval.jsonl"), temperature=1.0,
                   max_episode_steps=12, max_assistant_tokens=48, max_trajectory_tokens=6000, context="window",
                   engine="fast", concurrency=30, report=False)
    seconds = _timed(lambda: evaluate(c, show_progress=False))
    records = [json.loads(l) for l in Path(c.output).read_text().splitlines()][:-1]
    print(f"eval: {len(records)} episodes in {seconds:.1f} s: {len(records) / seconds:.3f} episodes/s")


if __name__ == "__main__":
    main()
