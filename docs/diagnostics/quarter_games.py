"""Are the last quarter's games easier? The SFT checkpoint of each seed replayed on the games of PPO's first and last quarter.

    uv run python docs/diagnostics/quarter_games.py runs/mini [--episodes-per-game 4] [--out DIR]

The mini's climb (rollout success of the last quarter of PPO updates minus the first's) compares different games when
every update draws fresh ones. This script separates how hard those games are from what PPO learned: for each seed it
takes the training games its PPO played in updates 1-3 and in the last three updates (from the run's
`metrics.jsonl`), and evaluates that seed's SFT checkpoint, which never changes, on both sets with the experiment's
own evaluation settings (the first set as `valid_seen`, the last as `valid_unseen`, `--episodes-per-game` episodes
each). If SFT wins as often on both sets, the climb is PPO's; the difference SFT shows is the part of the climb the
games explain. Each seed runs in its own process; results go under `<out>/seed<N>/`, and a seed already evaluated is
read back, not rerun.
"""
import argparse, dataclasses, json, multiprocessing, os, statistics
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def quarter_games(metrics_file: Path) -> tuple[list, list]:
    "The game ids PPO played in its first and in its last quarter of updates (the quarters of `rollout_quarters`)."
    from alfworld_rl.core import read_jsonl
    rows = [r for r in read_jsonl(metrics_file) if r.get("games")]
    q = max(1, len(rows) // 4)
    return [g for r in rows[:q] for g in r["games"]], [g for r in rows[-q:] for g in r["games"]]


def link_games(data: Path, ids: list, split: str, root: Path) -> None:
    "Link the files of the training games `ids` into `root`'s `split` directory, keeping their relative paths."
    from alfworld_rl.env.data import split_dir
    for game_id in dict.fromkeys(ids):
        rel = game_id.split(":", 1)[1]
        source, dest = split_dir(data, "train") / rel, split_dir(root, split) / rel
        dest.mkdir(parents=True, exist_ok=True)        # a directory of links: the game finder does not follow linked folders
        for f in source.iterdir():
            if not (dest / f.name).exists(): (dest / f.name).symlink_to(f.resolve())


def evaluate_seed(exp: str, out: str, seed: int, episodes: int, threads: int, games: int | None = None) -> dict:
    "SFT of `seed` on its first- and last-quarter games: the evaluation's games, episodes, success rate and its standard error per set."
    import torch
    torch.set_num_threads(threads)
    from alfworld_rl.core import read_jsonl
    from alfworld_rl.mini import recipe as mini
    from alfworld_rl.runs.evaluate import evaluate
    exp, root = Path(exp), Path(out) / f"seed{seed}"
    s, paths = mini.settings_from("mini", **json.loads((exp / "settings.json").read_text())), mini.MiniPaths(exp)
    first, last = quarter_games(paths.ppo_run(seed) / "metrics.jsonl")
    if games: first, last = first[:games], last[:games]
    link_games(paths.data, first, "valid_seen", root / "data")
    link_games(paths.data, last, "valid_unseen", root / "data")
    sft_save = mini.run_sft_stage(s, paths, seed, progress=False)     # PPO ran from it, so this only reads its record
    output = root / "sft.jsonl"
    c = dataclasses.replace(mini.eval_config(s, paths, f"sft-seed{seed}", sft_save["sampler_path"]), data_root=str(root / "data"),
                            output=str(output), episodes_per_game=episodes, resume=output.exists())
    records = read_jsonl(output)
    if not (records and records[-1].get("type") == "summary"):
        evaluate(c, show_progress=False)
        records = read_jsonl(output)
    m = records[-1]["metrics"]
    keys = ("games", "episodes", "success_rate", "success_rate_se")
    return dict(seed=seed, first={k: m[f"eval/valid_seen/{k}"] for k in keys}, last={k: m[f"eval/valid_unseen/{k}"] for k in keys})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("experiment", help="a finished mini experiment directory (runs/mini)")
    ap.add_argument("--episodes-per-game", type=int, default=4)
    ap.add_argument("--out", default=None, help="working directory (default: <experiment>/quarter_games)")
    ap.add_argument("--games", type=int, default=None, help="only the first N games of each quarter (a quick check)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="only these of the experiment's seeds (default: all; e.g. those whose PPO has finished)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads per seed (default: the cores shared out)")
    args = ap.parse_args()
    exp = Path(args.experiment)
    seeds = json.loads((exp / "settings.json").read_text())["seeds"]
    if args.seeds is not None:
        if not args.seeds or set(args.seeds) - set(seeds):
            ap.error(f"--seeds must be seeds of the experiment ({', '.join(map(str, seeds))}); got {args.seeds}")
        seeds = sorted(set(args.seeds))
    if args.threads is not None and args.threads < 1: ap.error(f"--threads must be >= 1 (got {args.threads})")
    out = Path(args.out or exp / "quarter_games")
    threads = args.threads or max(1, os.process_cpu_count() // len(seeds))
    with ProcessPoolExecutor(len(seeds), mp_context=multiprocessing.get_context("spawn")) as pool:
        jobs = [pool.submit(evaluate_seed, str(exp), str(out), seed, args.episodes_per_game, threads, args.games) for seed in seeds]
        results = [job.result() for job in jobs]
    print("| seed | first-quarter games | SFT on them | last-quarter games | SFT on them | difference (points) |")
    print("|---|---|---|---|---|---|")
    cell = lambda q: f"{100 * q['success_rate']:.1f} +- {100 * q['success_rate_se']:.1f}%"
    for r in results:
        f, l = r["first"], r["last"]
        print(f"| {r['seed']} | {f['games']} ({f['episodes']} episodes) | {cell(f)} | {l['games']} ({l['episodes']} episodes) | "
              f"{cell(l)} | {100 * (l['success_rate'] - f['success_rate']):+.1f} |")
    first = statistics.fmean(r["first"]["success_rate"] for r in results)
    last = statistics.fmean(r["last"]["success_rate"] for r in results)
    print(f"| mean | | {100 * first:.1f}% | | {100 * last:.1f}% | {100 * (last - first):+.1f} |")
    (out / "summary.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
