"""An SFT probe on the official games: the official run's SFT stage again with some settings changed, scored on valid_seen.

    uv run python docs/official/sft_probe.py runs/official --set max_detours=8 --out runs/probe-detours8

Reads the run's `settings.json` and its copied games (`<run>/data`), applies each `--set KEY=VALUE` (the mini's keys),
and runs seed 0's demonstrations and SFT under `--out`, then evaluates the final SFT checkpoint on valid_seen only, with
the run's evaluation settings (temperature, episodes per game, 50 steps). Settings are chosen on training-distribution
games, so this script has no way to evaluate valid_unseen. It prints the probe's valid_seen success (+- SE over games)
and admissible rate beside the run's own SFT on the same games, the refused commands of both by kind
(`lost_episodes.py --commands`) and how their refusals follow one another (`lost_episodes.py --streaks`). Stage times
go to `<out>/stages.jsonl`; an interrupted probe resumes.

`--continue` starts the probe's SFT from the run's own SFT run (copied under `--out`) when the only changes are the
number of steps and the learning-rate decay (`--set sft_steps=N`, `--set sft_lr_decay_steps=D`): the batches are one
fixed stream of shuffled passes and the rate is constant until a decay begins, so continuing from the run's newest save
taken before either run's decay trains the same steps as a fresh probe, without repeating the first ones (e.g.
`--set sft_lr_decay_steps=50 --continue`: the run's last 50 steps again, at a falling rate, from its step-250 save).
"""
import argparse, dataclasses, json, shutil, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import lost_episodes  # noqa: E402  (this folder's decomposition script)


def summary_metrics(path: Path) -> dict | None:
    "The metrics of an evaluation file's summary (the project's `load_summary`), or None while it has none."
    from alfworld_rl.core import UserError
    from alfworld_rl.runs.analysis import load_summary
    try: return load_summary(path).metrics
    except UserError: return None


def refused_table(files: dict) -> str:
    "Refused commands by kind, as a share of all steps, one column per labelled valid_seen evaluation file."
    counts, steps = {}, {}
    for label, path in files.items():
        c, n = lost_episodes.Counter(), 0
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            if r.get("type") != "trajectory" or r["split"] != "valid_seen": continue
            c.update(lost_episodes.refused_kinds(r)); n += len(r["steps"])
        counts[label], steps[label] = c, max(1, n)
    lines = ["| refused command (% of steps) | " + " | ".join(files) + " |", "|---" * (1 + len(files)) + "|"]
    for kind in lost_episodes.COMMAND_KINDS:
        lines.append(f"| {kind} | " + " | ".join(f"{100 * counts[k][kind] / steps[k]:.1f}" for k in files) + " |")
    lines.append("| all refused | " + " | ".join(f"{100 * sum(counts[k].values()) / steps[k]:.1f}" for k in files) + " |")
    return "\n".join(lines)


def streak_table(files: dict) -> str:
    "How refusals follow refusals on valid_seen (`lost_episodes.py --streaks`), one column per labelled evaluation file."
    rows = {"refused right after a refused command (%)": [], "lost episodes with a streak >= 10 (%)": [],
            "lost episodes ending in a streak >= 5 (%)": []}
    for path in files.values():
        episodes = [json.loads(line) for line in Path(path).read_text().splitlines()]
        xs = [(r["won"], lost_episodes.refusal_streaks(r)) for r in episodes
              if r.get("type") == "trajectory" and r["split"] == "valid_seen"]
        lost = [x for won, x in xs if not won]
        values = (100 * sum(x[1] for _, x in xs) / max(1, sum(x[0] for _, x in xs)),
                  100 * sum(x[2] >= 10 for x in lost) / max(1, len(lost)), 100 * sum(x[3] >= 5 for x in lost) / max(1, len(lost)))
        for row, v in zip(rows.values(), values): row.append(f"{v:.1f}")
    lines = ["| refusal streaks | " + " | ".join(files) + " |", "|---" * (1 + len(files)) + "|"]
    return "\n".join(lines + [f"| {name} | " + " | ".join(vs) + " |" for name, vs in rows.items()])


def main(argv=None) -> int:
    from alfworld_rl.core import UserError, read_jsonl
    from alfworld_rl.runs.resume import rewind_run
    from alfworld_rl.mini.recipe import (MiniPaths, MiniSettings, eval_config, mini_demonstrations, parse_setting,
                                         run_sft_stage, validate_settings, _log_stage)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="an official run's directory (alfworld-rl mini --settings official --out-dir ...)")
    ap.add_argument("--set", dest="set", action="append", default=[], metavar="KEY=VALUE", help="a mini setting to change")
    ap.add_argument("--out", required=True, help="directory of the probe (its SFT run, evaluation and stage times)")
    ap.add_argument("--continue", dest="cont", action="store_true",
                    help="continue the run's own SFT run (only with --set sft_steps=N above the run's)")
    a = ap.parse_args(argv)
    run, out = Path(a.run), Path(a.out)
    if not (run / "settings.json").is_file() or not (run / "data" / "games.json").is_file():
        sys.exit(f"{run} holds no official run with copied games (settings.json, data/games.json)")
    try:
        overrides = dict(parse_setting(t) for t in a.set)
        saved = json.loads((run / "settings.json").read_text())
        for name in ("seeds", "task_types"): saved[name] = tuple(saved[name])
        s = validate_settings(dataclasses.replace(MiniSettings(**saved), seeds=(0,), **overrides))
    except UserError as e:
        print(e, file=sys.stderr); return 2
    start = None
    if a.cont:
        if not overrides or set(overrides) - {"sft_steps", "sft_lr_decay_steps"}:
            print("--continue needs --set sft_steps=N and/or --set sft_lr_decay_steps=D, and no other --set", file=sys.stderr); return 2
        constant = min(saved["sft_steps"] - saved.get("sft_lr_decay_steps", 0), s.sft_steps - s.sft_lr_decay_steps)
        steps = [r["step"] for r in read_jsonl(MiniPaths(run).sft_run(0) / "checkpoints.jsonl") if r["step"] <= constant]
        if not steps:
            print(f"--continue: the run has no SFT save at or before step {constant}, where the two learning-rate "
                  "schedules part", file=sys.stderr); return 2
        start = max(steps)
    paths = MiniPaths(out)
    out.mkdir(parents=True, exist_ok=True)
    probe_settings = out / "settings.json"
    if probe_settings.exists() and json.loads(probe_settings.read_text()) != json.loads(json.dumps(dataclasses.asdict(s))):
        sys.exit(f"{out} holds a probe with other settings; use another --out")
    probe_settings.write_text(json.dumps(dataclasses.asdict(s), indent=1) + "\n")
    if not paths.data.exists(): paths.data.symlink_to((run / "data").resolve(), target_is_directory=True)
    if a.cont and not paths.sft_run(0).exists():       # the run's SFT up to `start`, continued by run_sft_stage's resume
        shutil.copytree(MiniPaths(run).sft_run(0), paths.sft_run(0), symlinks=True)
        rewind_run(paths.sft_run(0), start)
        print(f"continuing the run's SFT from its step-{start} save", flush=True)
    demos = None if (paths.sft_run(0) / "config.json").exists() else mini_demonstrations(s, paths)
    save = run_sft_stage(s, paths, 0, demos)
    c = dataclasses.replace(eval_config(s, paths, "sft-seed0", save["sampler_path"]), split="valid_seen")
    if summary_metrics(c.output_path()) is None:
        from alfworld_rl.runs.evaluate import evaluate
        t0 = time.perf_counter()
        evaluate(c, show_progress=True)
        _log_stage(paths, "eval valid_seen", "sft-seed0", time.perf_counter() - t0)
    files = {"run's SFT": run / "eval" / "sft-seed0.jsonl", "probe's SFT": c.output_path()}
    print(f"probe: {', '.join(a.set) or '(no change)'}")
    for label, path in files.items():
        m = summary_metrics(Path(path))
        if m is None: print(f"{label}: not evaluated ({path})"); continue
        print(f"{label}: valid_seen {100 * m['eval/valid_seen/success_rate']:.1f} +- "
              f"{100 * m.get('eval/valid_seen/success_rate_se', 0):.1f}% won, admissible "
              f"{100 * m.get('eval/valid_seen/admissible_action_rate', m.get('eval/all/admissible_action_rate', 0)):.1f}%")
    present = {k: v for k, v in files.items() if Path(v).is_file()}
    print(refused_table(present))
    print(streak_table(present))
    return 0


if __name__ == "__main__":
    sys.exit(main())
