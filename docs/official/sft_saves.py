"""How much an SFT run's end point swings: every save of one or more official runs' SFT, scored on valid_seen.

    uv run python docs/official/sft_saves.py run4=runs/official run5=runs/official-run5 --steps 200 250 300 \
        --episodes-per-game 1 --out docs/official/sft_saves

For each `label=run` and each step in `--steps`, reads the save from `<run>/runs/sft-seed0/checkpoints.jsonl` and
evaluates it on valid_seen with the run's own evaluation settings (50 steps, its temperature and context) and one
shared sampling seed, so every save meets the same random numbers. Settings are chosen on training-distribution games:
this script cannot evaluate valid_unseen. Each evaluation is written to `<out>/<label>-step-NNNNNN.jsonl` as it runs
and resumes when interrupted. Prints and writes `saves.md` (success +- SE over games, admissible rate, per save; with
two runs or more, each later run against the first at each step, paired by game as `paired_gain.py` pairs them),
`saves.json` and `saves.png` (success against SFT step, one line per run).
"""
import argparse, dataclasses, json, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import paired_gain  # noqa: E402  (this folder's paired comparison)
from sft_probe import summary_metrics  # noqa: E402  (an evaluation file's summary, None while it has none)


def save_records(run: Path, seed: int = 0) -> dict[int, dict]:
    "The SFT saves of a run by step (its `checkpoints.jsonl`; none when it is missing)."
    from alfworld_rl.core import read_jsonl
    return {r["step"]: r for r in read_jsonl(run / "runs" / f"sft-seed{seed}" / "checkpoints.jsonl")}


def run_settings(run: Path):
    "The run's `MiniSettings` (from its `settings.json`)."
    from alfworld_rl.mini.recipe import MiniSettings
    saved = json.loads((run / "settings.json").read_text())
    for name in ("seeds", "task_types"): saved[name] = tuple(saved[name])
    return MiniSettings(**saved)


def evaluate_save(run: Path, sampler_path: str, output: Path, episodes: int) -> dict:
    "Evaluate one SFT save on valid_seen with the run's settings into `output` (resumed when partial); its metrics."
    from alfworld_rl.mini.recipe import MiniPaths, eval_config
    from alfworld_rl.runs.evaluate import evaluate
    done = summary_metrics(output)
    if done is not None: return done
    c = eval_config(run_settings(run), MiniPaths(run), "unused", sampler_path, episodes=episodes)
    evaluate(dataclasses.replace(c, split="valid_seen", output=str(output), resume=output.exists()), show_progress=True)
    return summary_metrics(output)


def table(rows: list[dict]) -> str:
    "The markdown table of the evaluated saves."
    lines = ["| run | SFT step | valid_seen won (%) | +- SE | admissible (%) | episodes |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['step']} | {r['success']:.1f} | {r['se']:.1f} | {r['admissible']:.1f} | "
                     f"{r['episodes']} |")
    return "\n".join(lines)


def paired_table(out: Path, labels: list[str], steps: list[int]) -> str:
    "Each later run against the first at each step: valid_seen success paired by game (the same games and seed)."
    lines = [f"| step | run - {labels[0]} (points) | games up | games down |", "|---|---|---|---|"]
    for label in labels[1:]:
        for step in sorted(steps):
            first, other = (paired_gain.per_game(out / f"{x}-step-{step:06d}.jsonl")["valid_seen"] for x in (labels[0], label))
            r = paired_gain.paired(first, other)
            lines.append(f"| {step} | {label}: {100 * r['gain']:+.1f} +- {100 * r['se']:.1f} | {r['up']} | {r['down']} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    "Success against SFT step, one line per run, with +- SE bars."
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label in dict.fromkeys(r["label"] for r in rows):
        rs = sorted((r for r in rows if r["label"] == label), key=lambda r: r["step"])
        ax.errorbar([r["step"] for r in rs], [r["success"] for r in rs], yerr=[r["se"] for r in rs], marker="o",
                    capsize=3, label=label)
    ax.set_xlabel("SFT step"); ax.set_ylabel("valid_seen won (%)"); ax.set_ylim(bottom=0); ax.legend()
    ax.set_title("SFT saves on valid_seen (each run's evaluation settings, one seed)")
    fig.tight_layout(); fig.savefig(path, dpi=120); plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="LABEL=RUN", help="a label and an official run's directory")
    ap.add_argument("--steps", nargs="+", type=int, required=True, help="SFT steps whose saves to evaluate")
    ap.add_argument("--episodes-per-game", type=int, default=1, help="episodes per valid_seen game (>= 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (>= 1)")
    ap.add_argument("--out", required=True, help="directory for the evaluation files, saves.md and saves.png")
    a = ap.parse_args(argv)
    for flag, v in (("--episodes-per-game", a.episodes_per_game), ("--threads", a.threads)):
        if v < 1: ap.error(f"{flag} must be >= 1 (got {v})")
    runs = {}
    for item in a.runs:
        label, sep, path = item.partition("=")
        if not sep or not label or not path: ap.error(f"{item!r}: write each run as LABEL=RUN")
        if not (Path(path) / "settings.json").is_file(): ap.error(f"{item!r}: {path} holds no official run (settings.json)")
        saves = save_records(Path(path))
        if not saves: ap.error(f"{item!r}: no SFT saves ({path}/runs/sft-seed0/checkpoints.jsonl)")
        missing = [s for s in a.steps if s not in saves]
        if missing: ap.error(f"{item!r}: no SFT save at step(s) {missing}; it has {sorted(saves)}")
        runs[label] = (Path(path), saves)
    import torch
    torch.set_num_threads(a.threads)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    rows = []
    for step in a.steps:                                  # step-major: both runs' saves at one step before the next
        for label, (run, saves) in runs.items():
            t0 = time.perf_counter()
            m = evaluate_save(run, saves[step]["sampler_path"], out / f"{label}-step-{step:06d}.jsonl", a.episodes_per_game)
            rows.append({"label": label, "step": step, "success": 100 * m["eval/valid_seen/success_rate"],
                         "se": 100 * m.get("eval/valid_seen/success_rate_se", 0.0),
                         "admissible": 100 * m.get("eval/valid_seen/admissible_action_rate",
                                                   m.get("eval/all/admissible_action_rate", 0.0)),
                         "episodes": int(m.get("eval/valid_seen/episodes", m.get("eval/all/episodes", 0)))})
            print(f"{label} step {step}: {rows[-1]['success']:.1f} +- {rows[-1]['se']:.1f}% won, "
                  f"{rows[-1]['admissible']:.1f}% admissible ({time.perf_counter() - t0:.0f} s)", flush=True)
    rows.sort(key=lambda r: (r["label"], r["step"]))
    text = table(rows) + ("\n\n" + paired_table(out, list(runs), a.steps) if len(runs) > 1 else "")
    (out / "saves.md").write_text(text + "\n")
    (out / "saves.json").write_text(json.dumps(rows, indent=1) + "\n")
    plot(rows, out / "saves.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
