"""Where the CPU of default-room generation goes, and what a lower `--candidate-seconds` saves and changes.

Draws `--slots` of the full-size command's train slots (`generate --train 3553 --valid-seen 140 --valid-unseen 134
--seed S`) and makes them with the generator's own pool (`make_games`, the real candidate job, `--workers`
processes) at the highest of `--bounds`, recording every candidate's CPU seconds as the pool measures them. It prints
the CPU per game written, split into accepted and dropped candidates, per task type, the accepted candidates' costs,
and how often the attempt after a drop is dropped again. For each lower bound only the slots that had a candidate
over it are made again: a slot's attempts run in order and each is decided by its own cost, so a slot whose
candidates all stayed under the lower bound makes the same game at it. That gives each bound's CPU per game and
how many games it changes.

    uv run python benchmarks/candidate_costs.py [--slots 200] [--seed 0] [--bounds 5,3,2] [--workers 1]

CPU seconds, not wall time, so the figures hold on a machine that other jobs share. One worker keeps the
measurement off the other core; the games do not depend on the number of workers.
"""
import argparse, collections, random, statistics, time

from alfworld_rl.env.generate import DEFAULT_ROOM, assign_slots, check_candidate
from alfworld_rl.env.generate_workers import make_games


def make(slots: list, room: dict, bound: float, workers: int) -> tuple[dict, dict]:
    "The games of `slots` at CPU bound `bound` by slot, and each slot's candidates as (cpu seconds, dropped) in order."
    log, games = [], {}
    for s, g, _ in make_games(slots, room, job=check_candidate, workers=workers, seconds=bound, log=log):
        games[s] = (g.traj, g.game)
    candidates = collections.defaultdict(list)
    for o in sorted(log, key=lambda o: o.attempt): candidates[o.slot].append((o.cpu, bool(o.dropped)))
    return games, candidates


def costs_table(slots: list, candidates: dict, bound: float) -> None:
    "Print where the CPU went at `bound`: accepted and dropped candidates, per task type, the accepted costs."
    n = len(slots)
    kept = [c for s in slots for c, d in candidates[s] if not d]
    dropped = [c for s in slots for c, d in candidates[s] if d]
    total = sum(kept) + sum(dropped)
    print(f"bound {bound:g} s: {n} games, {len(kept) + len(dropped)} candidates, {total / n:.2f} CPU s per game")
    print(f"  accepted {len(kept)}: {sum(kept) / n:.2f} CPU s per game ({sum(kept) / total:.0%}); "
          f"dropped {len(dropped)}: {sum(dropped) / n:.2f} ({sum(dropped) / total:.0%})")
    cuts = [0, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, float("inf")]
    hist = [sum(lo <= c < hi for c in kept) for lo, hi in zip(cuts, cuts[1:])]
    print("  accepted candidates by CPU s: " + ", ".join(f"{lo:g}-{hi:g}: {h}" for lo, hi, h in zip(cuts, cuts[1:], hist) if h))
    print(f"  accepted: median {statistics.median(kept):.2f} s, 90th percentile {statistics.quantiles(kept, n=10)[-1]:.2f} s, "
          f"max {max(kept):.2f} s")
    after = [d for s in slots for (_, prev), (_, d) in zip(candidates[s], candidates[s][1:]) if prev]
    if after: print(f"  attempts after a drop: {len(after)}, dropped again {sum(after) / len(after):.0%}")
    print("  | task type | games | CPU s per game | share of CPU | drops |")
    for t in sorted({s.task_type for s in slots}):
        mine = [s for s in slots if s.task_type == t]
        cpu = sum(c for s in mine for c, _ in candidates[s])
        print(f"  | {t} | {len(mine)} | {cpu / len(mine):.2f} | {cpu / total:.0%} | {sum(d for s in mine for _, d in candidates[s])} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slots", type=int, default=200, help="train slots drawn from the full-size command's 3,553")
    ap.add_argument("--seed", type=int, default=0, help="the generator's seed")
    ap.add_argument("--bounds", default="5,3,2", help="CPU-second bounds to compare, comma-separated")
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    bounds = sorted({float(b) for b in a.bounds.split(",")}, reverse=True)
    train = [s for s in assign_slots(3553, 140, 134, seed=a.seed) if s.split == "train"]
    slots = sorted(random.Random(f"sample:{a.seed}").sample(train, a.slots), key=lambda s: s.index)
    room = dict(seed=a.seed, **DEFAULT_ROOM)
    t0 = time.perf_counter()
    games, candidates = make(slots, room, bounds[0], a.workers)
    costs_table(slots, candidates, bounds[0])
    base_cpu = sum(c for s in slots for c, _ in candidates[s])
    print(f"\n| bound | CPU s per game | against {bounds[0]:g} s | games that change | drops |\n|---|---|---|---|---|")
    print(f"| {bounds[0]:g} s | {base_cpu / len(slots):.2f} | | | {sum(d for s in slots for _, d in candidates[s])} |")
    for b in bounds[1:]:
        again = [s for s in slots if any(c > b for c, _ in candidates[s])]
        games_b, cands_b = make(again, room, b, a.workers)
        merged = {s: cands_b[s] if s in cands_b else candidates[s] for s in slots}
        cpu = sum(c for s in slots for c, _ in merged[s])
        changed = sum(games_b[s] != games[s] for s in again)
        print(f"| {b:g} s | {cpu / len(slots):.2f} | x{cpu / base_cpu:.2f} | {changed} of {len(slots)} "
              f"({len(again)} slots made again) | {sum(d for s in slots for _, d in merged[s])} |")
    print(f"\n({time.perf_counter() - t0:.0f} s of wall clock)")


if __name__ == "__main__":
    main()
