"""Rollout success per PPO update of the capacity probe: the shipped 2-layer base against a 4-layer one.

    uv run python docs/diagnostics/capacity.py        # writes docs/diagnostics/capacity.png and prints the table

Each probe is the mini recipe for training seed 1 on data seed 0 with the PPO settings of issue 30's first run of the
fixes (16 games x 8 branches per update, 4 minibatches, invalid penalty 0.01, learning rate 5e-4, GiGPO with
`--step-return all`, 12 updates); `metrics.jsonl` of each PPO run is copied under docs/diagnostics/capacity/<probe>/.
Every update samples the same games with the same seeds in both probes, so the curves differ only by the base. The
2-layer run here was stopped after 3 updates, which reproduce issue 30's run of the same settings to the digit; that
run's 12 updates are drawn from the numbers quoted in the issue (ISSUE_30_CURVE).
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ISSUE_30_CURVE = [29, 47, 31, 47, 22, 27, 26, 33, 35, 31, 34, 34]   # 2-layer mini-base, rollout success % per update


def curve(name: str) -> list[float]:
    "Rollout success (%) per update of probe `name` (docs/diagnostics/capacity/<name>/metrics.jsonl)."
    path = HERE / "capacity" / name / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [100 * r["rollout/success_rate"] for r in sorted(rows, key=lambda r: r["step"])]


def quarters(ys: list[float]) -> str:
    "Mean of the first and of the last quarter of the updates."
    q = max(1, len(ys) // 4)
    return f"first quarter {sum(ys[:q]) / q:.1f}, last quarter {sum(ys[-q:]) / q:.1f}"


def main() -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    base2, base4 = curve("base2"), curve("base4")
    assert [round(y) for y in base2] == ISSUE_30_CURVE[:len(base2)], "the 2-layer rerun no longer matches issue 30's run"
    rows = [("2 layers (shipped mini-base), issue 30's run", ISSUE_30_CURVE), ("2 layers, rerun here", base2),
            ("4 layers (build-base --layers 4)", base4)]
    for label, ys in rows:
        print(f"{label:45} {', '.join(f'{y:.0f}' for y in ys)}; {quarters(ys)}")
    n = min(len(ISSUE_30_CURVE), len(base4))
    diff = [b - a for a, b in zip(ISSUE_30_CURVE, base4)]
    print(f"{'4 layers - 2 layers (points, same games)':45} {', '.join(f'{d:+.0f}' for d in diff[:n])}; {quarters(diff[:n])}")
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.plot(range(1, len(ISSUE_30_CURVE) + 1), ISSUE_30_CURVE, marker="o", label=rows[0][0])
    ax.plot(range(1, len(base2) + 1), base2, marker="x", linestyle="none", color="k", label=rows[1][0])
    ax.plot(range(1, len(base4) + 1), base4, marker="s", label=rows[2][0])
    ax.set_xlabel("PPO update (16 games x 8 branches, the same games for both bases)")
    ax.set_ylabel("rollout success (%)")
    ax.set_ylim(0, 70)
    ax.set_title("Capacity probe, training seed 1 from each base's SFT state")
    ax.grid(alpha=0.3); ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "capacity.png", dpi=120)
    print(f"wrote {HERE / 'capacity.png'}")


if __name__ == "__main__":
    main()
