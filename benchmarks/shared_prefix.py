"""Training on window-context datums with and without the shared-prefix forward of the local trainer.

Every window-context datum starts with the same system prompt and tool description. `local_trainer.
backbone_hidden` runs a prefix that every row of a microbatch shares once and only the suffixes on top; this
script measures one `forward_backward` of the local backend on the same datums both ways, in
one run, and checks that the two losses agree.

    uv run python benchmarks/shared_prefix.py [--base-model mini-base] [--games 4] [--group-size 8] [--repeats 3]

The datums come from a real window-context rollout of the base model (temperature 1, the fast engine) on
small generated games (made once into the user cache).
"""
import argparse, time


def window_arguments(doc: str) -> argparse.ArgumentParser:
    "The flags of the window-datum benchmarks: base model, games, group size, repeats."
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--base-model", default="mini-base")
    ap.add_argument("--games", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    return ap


def window_datums(base_model: str, n_games: int, group_size: int, rank: int = 32):
    "A local service, a LoRA training client on `base_model`, and the datums of a real window-context rollout (every turn trained)."
    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.core import user_cache_dir
    from alfworld_rl.env.data import discover_games
    from alfworld_rl.env.generate import generate_dataset, SMALL_ROOM
    from alfworld_rl.rl.ppo import trajectory_datums
    from alfworld_rl.rl.rollout import RolloutConfig, run_rollout
    root = user_cache_dir() / f"bench_shared_prefix_games-{n_games}"
    generate_dataset(root, train=n_games, seed=21, progress=False, **SMALL_ROOM)
    games = discover_games(root, "train")[:n_games]
    svc = make_service_client("local", device="cpu")
    tc = svc.create_lora_training_client(base_model, rank=rank, seed=0)
    batch = run_rollout(tc.save_weights_and_get_sampling_client(), tc.get_tokenizer(), games, RolloutConfig(
        group_size=group_size, max_episode_steps=8, max_assistant_tokens=48, max_trajectory_tokens=6000,
        temperature=1.0, seed=0, context="window", engine="fast"))
    datums = []
    for t in batch.trajectories:
        t.advantage, t.step_advantages = 0.5, None                   # train on every turn
        datums += trajectory_datums(t)
    return svc, tc, datums


def main():
    args = window_arguments(__doc__).parse_args()
    import alfworld_rl.backends.local_trainer as LT
    svc, tc, datums = window_datums(args.base_model, args.games, args.group_size)
    tokens = sum(len(d.model_input) for d in datums)
    shared = LT.common_prefix_length([d.model_input.to_ints() for d in datums])
    print(f"{len(datums)} datums, {tokens:,} tokens ({tokens / len(datums):.0f} per datum, "
          f"{shared} shared by all), microbatch budget {tc.microbatch_tokens:,} tokens")
    plain_backbone = LT.backbone_hidden
    results = {}
    for mode in ("shared", "plain"):
        LT.backbone_hidden = (plain_backbone if mode == "shared" else
                              (lambda bb, inputs, pad_id=0, min_shared=64: plain_backbone(bb, inputs, pad_id, 10**9)))
        seconds, losses = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = tc.forward_backward(datums, "ppo").result()
            seconds.append(time.perf_counter() - t0)
            losses.append(out.metrics["loss_sum"])
        results[mode] = (min(seconds), losses[0])
        print(f"{mode}: forward_backward of all datums {min(seconds):.2f} s (best of {args.repeats}), loss_sum {losses[0]:.6f}")
    LT.backbone_hidden = plain_backbone
    tc.close() if hasattr(tc, "close") else None
    (s, ls), (p, lp) = results["shared"], results["plain"]
    print(f"shared_s={s:.2f} plain_s={p:.2f} speedup={p / s:.2f} loss_rel_diff={abs(ls - lp) / max(abs(lp), 1e-12):.2e}")


if __name__ == "__main__":
    main()
