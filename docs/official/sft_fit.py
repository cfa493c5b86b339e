"""Fit or generalisation: how well an SFT checkpoint reproduces the expert on games it trained on and on valid_seen.

    uv run python docs/official/sft_fit.py runs/official sft=<state_path> [more label=state] --out docs/official/fit

Teacher-forced agreement (`alfworld-rl agreement`) with the searching expert, per decision (search, take, carry,
place, open, use): the mean probability of the expert's whole reply and of its verb, on `--games` of the games the
run's SFT trained on (read from its `demonstrations.jsonl`, a seeded choice) and on as many `valid_seen` games. The
agreement command replays one demonstration per game by the same expert with the run's settings (object names as the
game writes them), so the first table is the fit, the second the generalisation. Writes `train.json` and `valid_seen.json`
(the agreement's own JSON) and `fit.md` under `--out`; `base=base` adds the base model.
"""
import argparse, json, random, shutil, sys, tempfile
from pathlib import Path


def trained_game_ids(run: Path, seed: int = 0) -> list[str]:
    "The training games of seed `seed`'s SFT, in the order its demonstrations were written."
    ids = []
    for line in (run / "runs" / f"sft-seed{seed}" / "demonstrations.jsonl").read_text().splitlines():
        gid = json.loads(line)["game_id"].split(":", 1)[1]
        if gid not in ids: ids.append(gid)
    return ids


def trained_root(run: Path, ids: list[str], into: Path) -> Path:
    "A data root under `into` holding copies of training games `ids` of the run and its PDDL logic."
    src = run / "data"
    for gid in ids:
        shutil.copytree(src / "json_2.1.1" / "train" / gid, into / "json_2.1.1" / "train" / gid)
    shutil.copytree(src / "logic", into / "logic")
    return into


def main(argv=None) -> int:
    from alfworld_rl.runs.agreement import agreement_table, cli_agreement, cli_agreement_parser
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="an official run's directory (with its copied games, <run>/data)")
    ap.add_argument("checkpoints", nargs="+", metavar="label=STATE", help="checkpoints: label=<state_path> or label=base")
    ap.add_argument("--games", type=int, default=40, help="games of each kind (default 40)")
    ap.add_argument("--out", required=True, help="directory for the JSON files and fit.md")
    a = ap.parse_args(argv)
    run, out = Path(a.run), Path(a.out)
    if a.games < 1: print(f"--games must be an integer >= 1 (got {a.games})", file=sys.stderr); return 2
    if not (run / "settings.json").is_file() or not (run / "data" / "logic").is_dir():
        print(f"{run} holds no official run with copied games (settings.json, data/)", file=sys.stderr); return 2
    settings = json.loads((run / "settings.json").read_text())
    ids = trained_game_ids(run)
    random.Random(0).shuffle(ids)
    out.mkdir(parents=True, exist_ok=True)
    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"train": trained_root(run, ids[:a.games], Path(tmp)), "valid_seen": run / "data"}
        for split, root in roots.items():
            p = argparse.ArgumentParser(); cli_agreement_parser(p)
            args = p.parse_args([*a.checkpoints, "--base-model", settings["base_model"], "--data-root", str(root),
                                 "--split", split, "--max-games", str(a.games), "--max-detours", str(settings["max_detours"]),
                                 "--max-episode-steps", str(settings["max_episode_steps"]),
                                 "--history-length", str(settings["history_length"]), "--output", str(out / f"{split}.json")])
            if cli_agreement(args): return 1
            r = json.loads((out / f"{split}.json").read_text())
            tables.append((split, r))
    lines = ["Teacher-forced agreement with the searching expert: mean P(expert's reply) and, in brackets, P(its verb)\n"]
    for split, r in tables:
        label = "games SFT trained on" if split == "train" else "valid_seen"
        lines += [f"**{label}** ({r['demonstrations']} demonstrations)\n", agreement_table(r["checkpoints"]), ""]
    (out / "fit.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
