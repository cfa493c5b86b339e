"""A sampler with its LoRA merged into the weights against the same sampler unmerged, side by side in one run.

Both evaluate the same checkpoint on the same official games (window context, 50 steps, T = 1, 2 episodes per
game, the recipe's settings), after one warm-up round, alternating round by round so that the machine's load falls on both alike. It prints
the seconds of each evaluation, their ratio, the largest difference of one logprob between the two models on one
prompt, and the success of each (at T = 1 the two draw the same random numbers, so they play the same episodes
until a rounding difference changes one token).

    uv run python benchmarks/merged_sampler.py --data-root datasets/alfworld [--games 4] [--rounds 2] [--threads 1]
"""
import argparse, time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-root", required=True, help="ALFWorld data root with the official games")
    ap.add_argument("--model-path", default=str(REPO / "models" / "official-sft-seed0"), help="sampler checkpoint")
    ap.add_argument("--base-model", default="official-base-4layers")
    ap.add_argument("--games", type=int, default=4, help="valid_seen games per evaluation (>= 1)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (unmerged, merged) (>= 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (>= 1)")
    a = ap.parse_args()
    for flag, v in (("--games", a.games), ("--rounds", a.rounds), ("--threads", a.threads)):
        if v < 1: ap.error(f"{flag} must be >= 1 (got {v})")
    if not (Path(a.data_root) / "json_2.1.1" / "valid_seen").is_dir(): ap.error(f"--data-root {a.data_root}: no official games there")
    torch.set_num_threads(a.threads)

    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.runs.evaluate import EvalConfig, evaluate
    services = {"unmerged": make_service_client("local", device="cpu", merge_sampler_lora="off"),
                "merged": make_service_client("local", device="cpu", merge_sampler_lora="on")}
    clients = {k: svc.create_sampling_client(a.base_model, model_path=a.model_path) for k, svc in services.items()}
    tok = clients["merged"].get_tokenizer()
    ids = tok.encode("Your task is to: put a clean cloth in drawer.\nAdmissible actions:\n- go to drawer 1\n- take cloth 1 from drawer 1")
    with torch.no_grad():
        lps = {k: torch.log_softmax(c._engine.model(torch.tensor([ids])).logits.float(), -1) for k, c in clients.items()}
    print(f"largest |logprob difference| over the vocabulary at {len(ids)} positions: "
          f"{(lps['merged'] - lps['unmerged']).abs().max().item():.2e}")

    seconds = {k: [] for k in clients}
    for r in range(-1, a.rounds):                                   # round 0: a warm-up (games parsed, caches filled), not counted
        for k, sc in clients.items():
            c = EvalConfig(base_model=a.base_model, model_path=a.model_path, data_root=a.data_root, split="valid_seen",
                           limit_per_split=a.games, max_episode_steps=50, max_trajectory_tokens=6000, max_assistant_tokens=48,
                           context="window", history_length=2, engine="fast", invalid_penalty=0.0, temperature=1.0,
                           episodes_per_game=2, concurrency=30, seed=42, report=False,
                           output=f"/tmp/merged_sampler_{k}.jsonl", overwrite_output=True)
            t = time.perf_counter()
            s = evaluate(c, sampling_client=sc, tokenizer=tok, show_progress=False)
            if r < 0: continue
            seconds[k].append(time.perf_counter() - t)
            metrics = s["metrics"]
            print(f"round {r + 1} {k:>8}: {seconds[k][-1]:6.1f} s, success {metrics["eval/all/success_rate"]:.3f}, "
                  f"admissible {metrics["eval/all/admissible_action_rate"]:.3f}", flush=True)
    u, m = sum(seconds["unmerged"]), sum(seconds["merged"])
    print(f"unmerged {u:.1f} s, merged {m:.1f} s over {a.rounds} rounds: merged is {u / m:.2f}x as fast")
    for svc in services.values(): svc.close()


if __name__ == "__main__":
    main()
