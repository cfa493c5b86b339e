"""Games/second of `generate_dataset` (planning + verification in the real engine), small and default rooms.

    uv run python benchmarks/generate_speed.py [--games N]
"""
import argparse, tempfile, time
from pathlib import Path

from alfworld_rl.env.generate import DEFAULT_ROOM, SMALL_ROOM, generate_dataset


def measure(label: str, n: int, room: dict) -> float:
    "Generate `n` train games with `room` knobs in a fresh folder; print and return games/second."
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        generate_dataset(Path(d) / "data", train=n, seed=0, **room)
        secs = time.perf_counter() - t0
    print(f"{label:>8}: {n} games in {secs:.1f} s = {n / secs:.2f} games/s")
    return n / secs


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--games", type=int, default=6, help="games per room size (default 6: one per task type)")
    a = ap.parse_args()
    small = measure("small", a.games, SMALL_ROOM)
    default = measure("default", a.games, DEFAULT_ROOM)
    print(f"small_games_per_s={small:.2f} default_games_per_s={default:.2f}")
