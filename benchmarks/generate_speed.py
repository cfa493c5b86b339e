"""Games/second of the generator, small and default rooms: the path before the worker pool (each candidate planned
and replayed on TextWorld, one slot after another in this process) against `generate_dataset` (one translation,
the fast engine, `--workers` processes under the candidate bounds). Both make the same slots; the script also
says how many of the games the two paths made are identical, and prints where the new path's seconds go.

    uv run python benchmarks/generate_speed.py [--games 6] [--new-games 60] [--workers 2] [--seed 2]

`--games` slots per room size go through both paths; `--new-games` (at least `--games`) through the new one only,
for a steadier rate. The old path has no bound: a candidate whose search runs for minutes stalls it (seed 0,
default rooms, train slot 11 searched for about six minutes), hence the small default count.
"""
import argparse, json, tempfile, time
from pathlib import Path

from alfworld_rl.env.generate import DEFAULT_ROOM, SMALL_ROOM, assign_slots, build_game, generate_dataset


def old_path(n: int, seed: int, room: dict) -> tuple[float, list]:
    "Seconds for the first `n` train slots built as before (TextWorld check, in process), and their games."
    games, t0 = [], time.perf_counter()
    for s in assign_slots(n, 0, 0, seed=seed):
        g, why = build_game(s.split, s.index, s.task_type, s.scene, seed=seed, **room)
        games.append(None if g is None else (g.traj, g.game))
    return time.perf_counter() - t0, games


def new_path(n: int, seed: int, room: dict, workers: int) -> tuple[float, list, dict]:
    "Seconds for `generate_dataset` of `n` train games, their games (slot order) and the dropped candidates."
    from alfworld_rl.env.generate import MANIFEST, GAME_FILE, TRAJ_FILE, dropped_candidates
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        root = generate_dataset(Path(d) / "data", train=n, seed=seed, workers=workers, **room)
        secs = time.perf_counter() - t0
        games = []
        for line in (root / MANIFEST).read_text().splitlines()[1:]:
            trial = root / json.loads(line)["path"]
            games.append((json.loads((trial / TRAJ_FILE).read_text()), json.loads((trial / GAME_FILE).read_text())))
        return secs, games, dropped_candidates(root)


def breakdown(n: int, seed: int, room: dict) -> dict:
    "Seconds per part of the new check (translate + search, fast-engine load, replay), over `n` first attempts."
    import random
    from alfworld_rl.env import generate_workers as W
    from alfworld_rl.env.fast_engine import FastEnv, FastGame
    from alfworld_rl.env.generate import alfred_logic_files, game_grammar, make_layout, pddl_problem, sample_game, task_description
    parts = dict(sample=0.0, search=0.0, engine=0.0, replay=0.0)
    for s in assign_slots(n, 0, 0, seed=seed):
        t = time.perf_counter()
        layout = make_layout(s.scene, seed=seed, min_receptacles=room["min_receptacles"], max_receptacles=room["max_receptacles"])
        rng = random.Random(f"game:{seed}:{s.split}:{s.index}:0")
        spec = sample_game(s.task_type, layout, rng, room["distractors"])
        data = {"pddl_domain": alfred_logic_files()[0].read_text(), "grammar": game_grammar(task_description(spec, rng)),
                "pddl_problem": pddl_problem(spec, "p")}
        t1 = time.perf_counter(); ops = W.search_plan(data)
        t2 = time.perf_counter(); game = FastGame(data); env = FastEnv(game); env.reset()
        t3 = time.perf_counter()
        for cmd in W.plan_commands(game, ops): env.step(cmd)
        t4 = time.perf_counter()
        for k, v in zip(parts, (t1 - t, t2 - t1, t3 - t2, t4 - t3)): parts[k] += v / n
    return parts


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=6, help="slots per room size for both paths (default 6: one per task type)")
    ap.add_argument("--new-games", type=int, default=60, help="slots per room size for the new path (default 60)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes of the new path (default 2)")
    ap.add_argument("--seed", type=int, default=2, help="generator seed (default 2)")
    a = ap.parse_args()
    for label, room in (("small", SMALL_ROOM), ("default", DEFAULT_ROOM)):
        t_old, old = old_path(a.games, a.seed, room)
        t_new, new, drops = new_path(max(a.new_games, a.games), a.seed, room, a.workers)
        same = sum(o == n for o, n in zip(old, new[:a.games]))
        per = {k: f"{v:.3f}" for k, v in breakdown(a.games, a.seed, room).items()}
        print(f"{label:>7}: old {a.games} games in {t_old:.1f} s = {a.games / t_old:.2f} games/s (1 core) | "
              f"new {len(new)} games in {t_new:.1f} s = {len(new) / t_new:.2f} games/s ({a.workers} workers) | "
              f"x{(len(new) / t_new) / (a.games / t_old):.1f} | same games {same}/{a.games} | dropped {drops or 0} | "
              f"new check, s per first attempt: {per}", flush=True)
