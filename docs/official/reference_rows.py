"""Reference rows on ALFWorld's official validation games: what the scripted players and the shipped bases win.

    uv run python docs/official/reference_rows.py [--data-root DIR] [--out-dir docs/official/reference]
                                                  [--random-episodes 4] [--bases mini-base mini-base-4layers]
                                                  [--games N] [--no-bases]

Rows, per split (valid_seen, valid_unseen, both) and per task type, 50 steps per episode, window context, fast engine:
- `walkthrough`: the game's stored expert walkthrough (an upper bound: it knows where everything is);
- `searching expert`: the SFT demonstrator (`SearchingExpertPolicy`, up to 2 detours to receptacles the walkthrough
  does not use, then the walkthrough), one episode per game and detour draw;
- `random admissible`: a command drawn uniformly from the admissible list at every step, `--random-episodes` per game;
- each shipped base (`--bases`): `alfworld-rl eval` at temperature 1, one episode per game (its evaluation file is
  kept under `--out-dir` and resumed, so a cut run goes on where it stopped).

Writes `rows.json` (after every row: a cut run keeps its finished rows and a rerun with the same games skips them) and
`rows.md` under `--out-dir`, and prints the table. `--games N` takes the first N games of each split (for a quick
check); the committed table uses every game.
"""
import argparse, json, sys, time
from pathlib import Path

SPLITS = ("valid_seen", "valid_unseen")
STEPS = 50


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-root", default=None, help="ALFWorld data root (default: $ALFWORLD_DATA or datasets/alfworld)")
    ap.add_argument("--out-dir", default="docs/official/reference", help="where rows.json, rows.md and the bases' evaluations go")
    ap.add_argument("--random-episodes", type=int, default=4, help="episodes per game of the random player (>= 1)")
    ap.add_argument("--bases", nargs="*", default=["mini-base", "mini-base-4layers"], help="shipped bases to evaluate")
    ap.add_argument("--no-bases", action="store_true", help="only the scripted players")
    ap.add_argument("--games", type=int, default=None, help="at most this many games per split (>= 1; default: all)")
    a = ap.parse_args(argv)
    if a.random_episodes < 1: ap.error(f"--random-episodes must be an integer >= 1 (got {a.random_episodes})")
    if a.games is not None and a.games < 1: ap.error(f"--games must be an integer >= 1 (got {a.games})")
    return a


def rates(pairs) -> dict:
    "Success in percent overall and per task type, from (task_type, won) pairs; with the episode counts."
    out = {"episodes": len(pairs), "success": 100 * sum(w for _, w in pairs) / max(1, len(pairs)), "by_type": {}}
    for t in sorted({t for t, _ in pairs}):
        won = [w for tt, w in pairs if tt == t]
        out["by_type"][t] = 100 * sum(won) / len(won)
    return out


def scripted_row(policy, tokenizer, games: dict, episodes: int) -> dict:
    "The row of one scripted player: per split and for both splits together."
    from alfworld_rl.rl.rollout import RolloutConfig, run_rollout
    c = RolloutConfig(group_size=episodes, max_episode_steps=STEPS, context="window", engine="fast", temperature=0.0,
                      max_assistant_tokens=256, max_trajectory_tokens=12000).validate()
    row, every = {}, []
    for split, gs in games.items():
        batch = run_rollout(policy, tokenizer, gs, c)
        pairs = [(t.game.task_type, bool(t.won)) for t in batch.trajectories]
        row[split] = rates(pairs); every += pairs
    row["all"] = rates(every)
    return row


def base_row(name: str, root: Path, out_dir: Path, limit) -> dict:
    "The row of one shipped base: `alfworld-rl eval` at temperature 1, one episode per game (resumed when cut)."
    from alfworld_rl.runs.evaluate import EvalConfig, evaluate
    out = out_dir / f"base-{name}.jsonl"
    records = [json.loads(l) for l in out.read_text().splitlines()] if out.exists() else []
    if not (records and records[-1].get("type") == "summary"):
        c = EvalConfig(base_model=name, split="all", temperature=1.0, max_episode_steps=STEPS, context="window",
                       engine="fast", max_assistant_tokens=48, max_trajectory_tokens=6000, data_root=str(root),
                       output=str(out), resume=out.exists(), report=False, limit_per_split=limit, concurrency=30)
        evaluate(c, show_progress=True)
        records = [json.loads(l) for l in out.read_text().splitlines()]
    trajs = [r for r in records if r.get("type") == "trajectory"]
    row, every = {}, []
    for split in SPLITS:
        pairs = [(r["task_type"], bool(r["won"])) for r in trajs if r["split"] == split]
        row[split] = rates(pairs); every += pairs
    row["all"] = rates(every)
    admitted = [s.get("admissible") in (True, "True") for r in trajs for s in r["steps"]]
    row["admissible_rate"] = 100 * sum(admitted) / max(1, len(admitted))
    return row


def table(rows: dict) -> str:
    "Markdown: one line per player, success per split and per task type (both splits)."
    types = sorted({t for r in rows.values() for t in r["all"]["by_type"]})
    short = {"pick_and_place_simple": "pick", "look_at_obj_in_light": "look", "pick_clean_then_place_in_recep": "clean",
             "pick_heat_then_place_in_recep": "heat", "pick_cool_then_place_in_recep": "cool", "pick_two_obj_and_place": "pick two"}
    head = "| player | valid_seen % | valid_unseen % | both splits % | " + " | ".join(short.get(t, t) for t in types) + " |"
    lines = [head, "|" + "---|" * (4 + len(types))]
    for name, r in rows.items():
        cells = [f"{r[s]['success']:.1f}" for s in (*SPLITS, "all")] + [f"{r['all']['by_type'].get(t, 0):.1f}" for t in types]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    a = parse_args(argv)
    from alfworld_rl.core import resolve_data_root
    from alfworld_rl.env.data import discover_games
    from alfworld_rl.backends.local_models import load_tokenizer
    from alfworld_rl.rl.policies import ExpertPolicy, SearchingExpertPolicy, RandomAdmissiblePolicy
    root = resolve_data_root(a.data_root).resolve()
    games = {s: discover_games(root, s, max_games=a.games) for s in SPLITS}
    out_dir = Path(a.out_dir); out_dir.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer("mini-base")
    ids = {s: [g.id for g in gs] for s, gs in games.items()}
    saved = out_dir / "rows.json"
    old = json.loads(saved.read_text()) if saved.exists() else {}
    rows, seconds = (old["rows"], old["seconds"]) if old.get("ids") == ids else ({}, {})
    def save():
        saved.write_text(json.dumps({"data_root": str(root), "games": {s: len(g) for s, g in games.items()}, "ids": ids,
                                     "steps": STEPS, "rows": rows, "seconds": seconds}, indent=1) + "\n")
    jobs = [("walkthrough", lambda: scripted_row(ExpertPolicy(tok), tok, games, 1)),
            ("searching expert (SFT's demonstrator)", lambda: scripted_row(SearchingExpertPolicy(tok, 2), tok, games, 1)),
            (f"random admissible ({a.random_episodes} per game)",
             lambda: scripted_row(RandomAdmissiblePolicy(tok), tok, games, a.random_episodes))]
    jobs += [(f"{base} (T = 1)", lambda base=base: base_row(base, root, out_dir, a.games)) for base in ([] if a.no_bases else a.bases)]
    for name, job in jobs:
        if name in rows: continue                      # finished by an earlier call on the same games
        t0 = time.perf_counter(); rows[name] = job(); seconds[name] = round(time.perf_counter() - t0, 1)
        save()
        print(f"{name}: {rows[name]['all']['success']:.1f}% of {rows[name]['all']['episodes']} episodes", flush=True)
    md = table(rows)
    (out_dir / "rows.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
