"""Going back to a place already visited: how often a mini experiment's episodes do it, by checkpoint and task type.

    uv run python docs/diagnostics/revisits.py runs/mini [more experiment directories]
    uv run python docs/diagnostics/revisits.py --demos runs/mini     # the SFT demonstrations of that experiment

For each evaluation file under `<dir>/eval/` (base, sft-seedN, ppo-seedN) and task type: episodes, success, the share of
lost episodes with at least one admitted `go to` to a place reached before in the same episode, and such revisits as a
share of all admitted `go to`s. `--demos` replays the experiment's expert demonstrations (its settings.json, its
training games) and counts the same in them.
"""
import argparse, json, sys
from pathlib import Path

TYPES = ("pick_and_place_simple", "look_at_obj_in_light")


def revisit_count(actions) -> tuple[int, int]:
    "Admitted `go to`s of one episode that return to a place reached before, and all its admitted `go to`s; `actions` are (action, admitted)."
    from alfworld_rl.rl.protocol import visited_places      # the places line's own rule of what was reached
    places = []
    for action, admitted in actions: places = visited_places(places, action, admitted)
    gotos = sum(1 for action, admitted in actions if admitted and action and action.startswith("go to "))
    return gotos - len(places), gotos


def summary(episodes) -> dict:
    "Success, lost episodes with a revisit, and revisits per admitted `go to`, over `episodes` (won, actions) pairs."
    counts = [(won, *revisit_count(a)) for won, a in episodes]
    lost = [back for won, back, _ in counts if not won]
    return dict(n=len(episodes), success=100 * sum(won for won, _, _ in counts) / max(1, len(episodes)),
                lost_with_revisit=100 * sum(back > 0 for back in lost) / max(1, len(lost)),
                revisits_per_goto=100 * sum(b for _, b, _ in counts) / max(1, sum(g for _, _, g in counts)))


def eval_episodes(path: Path) -> dict:
    "The (won, actions) pairs of an evaluation file, by task type."
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("type") != "trajectory": continue
        actions = [(s.get("action"), s.get("admissible") in (True, "True")) for s in r["steps"]]
        out.setdefault(r["task_type"], []).append((bool(r["won"]), actions))
    return out


def demo_episodes(root: Path) -> dict:
    "The (won, actions) pairs of the experiment's SFT demonstrations, by task type."
    from alfworld_rl.mini import recipe as mini
    from alfworld_rl.backends.local_models import load_tokenizer
    from alfworld_rl.runs.sft import expert_trajectories
    from alfworld_rl.env.data import discover_games
    s = mini.settings_from("mini", **json.loads((root / "settings.json").read_text()))
    c = mini.sft_config(s, mini.MiniPaths(root), 0)
    trajs = expert_trajectories(discover_games(c.data_root, "train"), load_tokenizer(str(mini.base_model_path(s))), c,
                                progress=False)
    out = {}
    for t in trajs:
        out.setdefault(t.game.task_type, []).append((t.won, [(st.action, st.admissible) for st in t.steps]))
    return out


def row(name: str, label: str, task: str, st: dict) -> str:
    "One table row of `summary`'s figures."
    return (f"| {name} | {label} | {task} | {st['n']} | {st['success']:.1f} | {st['lost_with_revisit']:.1f} | "
            f"{st['revisits_per_goto']:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="mini experiment directories")
    ap.add_argument("--demos", action="store_true", help="count in the SFT demonstrations instead of the evaluations")
    args = ap.parse_args()
    print("| experiment | checkpoint | task type | episodes | success % | lost episodes with a revisit % | revisits per admitted go to % |")
    print("|---|---|---|---|---|---|---|")
    for root in args.dirs:
        files = [("demonstrations", None)] if args.demos else \
                [(f.stem, f) for f in sorted((root / "eval").glob("*.jsonl"), key=lambda f: (f.stem != "base", f.stem))]
        if not files: sys.exit(f"no evaluation files under {root / 'eval'}")
        for label, f in files:
            by_type = demo_episodes(root) if f is None else eval_episodes(f)
            for task in TYPES:
                if task in by_type: print(row(root.name, label, task, summary(by_type[task])))


if __name__ == "__main__":
    main()
