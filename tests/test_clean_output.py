"""What a person reads: every command's `--help` and a tiny run of each print no warning, traceback or stray error,
messages printed during a progress bar start their own line, and executed reports hold each bar once."""
import json, re, subprocess, sys, textwrap
from pathlib import Path

import pytest

from alfworld_rl.env.data import discover_games

# Output a person should never see from a successful command.
NOISE = [r"Traceback \(most recent call last\)", r"\b\w*Warning\b", r"\bWARNING\b", r"\bERROR\b",
         r"Unable to parse line", r"Passed unknown parameter"]

TINY_MODEL = ["--backend", "local", "--base-model", "tiny-qwen3", "--swanlab-mode", "disabled"]


def run_commands(commands, cwd, stdin=""):
    """Run `alfworld-rl ARGV` for each ARGV in `commands`, in order, in one fresh interpreter whose stdout and
    stderr go to one pipe (as `cmd > log 2>&1` would); returns the whole log and the exit statuses."""
    script = textwrap.dedent("""
        import json, sys
        from alfworld_rl.cli import main
        statuses = []
        for argv in json.loads(sys.argv[1]):
            print("=== alfworld-rl " + " ".join(argv), flush=True)
            try: status = main(argv)
            except SystemExit as e: status = e.code or 0      # --help
            sys.stdout.flush(); sys.stderr.flush()
            statuses.append(status)
        print("=== statuses " + json.dumps(statuses), flush=True)
    """)
    p = subprocess.run([sys.executable, "-c", script, json.dumps(commands)], cwd=cwd, input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    log = p.stdout
    m = re.search(r"^=== statuses (.*)$", log, re.M)
    assert p.returncode == 0 and m, log[-4000:]
    return log, json.loads(m.group(1))


def sections(log):
    "The log cut into {command line: its output}."
    parts = re.split(r"^=== (alfworld-rl .*)$", log, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def assert_clean(log):
    "No noise in any command's output (the failing command and line are named)."
    for cmd, out in sections(log).items():
        for pat in NOISE:
            hits = [l for l in out.splitlines() if re.search(pat, l)]
            assert not hits, f"{cmd} printed {pat!r}:\n" + "\n".join(hits[:5])


def assert_report_clean(path):
    "An executed report: no error outputs, no `ERROR` text, each stream output free of progress-bar refreshes."
    nb = json.loads(Path(path).read_text())
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            assert o["output_type"] != "error", o
            text = o.get("text") or o.get("data", {}).get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            assert "\r" not in text, f"{path}: a stream output holds progress-bar refreshes: {text[:300]!r}"
            for pat in NOISE: assert not re.search(pat, text), f"{path}: {pat!r} in {text[:300]!r}"
        bars = [o for o in cell.get("outputs", []) if o.get("name") == "stderr"]
        assert len(bars) <= 1, f"{path}: stderr split over {len(bars)} outputs in one cell"


def help_commands():
    from alfworld_rl.cli import available_commands
    return [["--help"]] + [[name, "--help"] for name in available_commands()]


def play_script(data_root):
    "A game id and the stdin that plays its walkthrough (after one out-of-range number)."
    game = discover_games(data_root, "train")[0]
    plan = json.loads(Path(game.game_file).read_text())["walkthrough"]
    return game.id, "0\n" + "\n".join(plan) + "\n"


TRAIN = ["train", *TINY_MODEL, "--max-steps", "2", "--games-per-batch", "1", "--group-size", "2", "--max-episode-steps", "2",
         "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096", "--save-every", "1"]
EVAL = ["eval", *TINY_MODEL, "--limit-per-split", "1", "--max-episode-steps", "2", "--max-assistant-tokens", "16",
        "--max-trajectory-tokens", "2048", "--output", "eval_results/tiny.jsonl"]
BARE_TRAIN = ["train", "--backend", "local", "--swanlab-mode", "disabled"]


def test_help_bare_train_and_a_training_log(small_data_root, tmp_path):
    "Every --help; a bare train (fails fast with advice); a tiny train into one log file, grepped for its saves."
    train = [*TRAIN, "--max-steps", "1", "--run-name", "clean", "--data-root", str(small_data_root), "--no-report"]
    commands = [*help_commands(), BARE_TRAIN, train]
    log, statuses = run_commands(commands, tmp_path)
    assert statuses == [0] * (len(commands) - 2) + [1, 0], log[-4000:]
    assert_clean(log)
    out = sections(log)
    # the default base model is the reference one (hosted): with no local copy, train stops before any work
    [line] = out["alfworld-rl " + " ".join(BARE_TRAIN)].strip().splitlines()
    assert "--backend trio" in line and "--base-model mini-base" in line
    assert not (tmp_path / "datasets").exists() and not (tmp_path / "runs" / "alfworld-agent-rl-qwen35-4b").exists()
    # messages printed while the training bar is drawn start their own line, so a log file can be grepped
    trained = out["alfworld-rl " + " ".join(train)]
    assert len(re.findall(r"^Saved state: .*$", trained, re.M)) == 1, trained[-3000:]
    assert len(re.findall(r"^Saved sampler weights: .*$", trained, re.M)) == 1
    for line in trained.splitlines():
        if "Saved state:" in line or "Saved sampler weights:" in line: assert line.startswith("Saved "), repr(line)


def test_report_parameters_are_declared(caplog):
    "Every parameter a command passes to its report template is declared there (papermill warns otherwise)."
    import papermill as pm
    from dataclasses import fields
    from alfworld_rl.runs.train import report_template
    from alfworld_rl.runs.train_config import TrainConfig
    from alfworld_rl.runs.sft import SFTConfig
    passed = {"train": {f.name for f in fields(TrainConfig)} | {"resume"},
              "sft": {f.name for f in fields(SFTConfig)} | {"resume"},
              "eval": {"eval_file"}, "analysis": {"files", "figure", "task_figure"}}
    for name, params in passed.items():
        declared = set(pm.inspect_notebook(str(report_template(name))))
        assert params <= declared, f"{name} template lacks {sorted(params - declared)}"
    assert "Unable to parse" not in caplog.text


@pytest.mark.slow
def test_generate_play_eval_analyze_are_clean(small_data_root, tmp_path):
    "generate, play (scripted stdin), eval (--no-report) and analyze print nothing but their results."
    data = str(small_data_root)
    game_id, stdin = play_script(small_data_root)
    play = ["play", "--data-root", data, "--game", game_id]
    commands = [["generate", "--out", "gen", "--train", "1", "--valid-seen", "0", "--valid-unseen", "0", "--seed", "3"],
                play, [*EVAL, "--data-root", data, "--no-report"],
                ["analyze", "a=eval_results/tiny.jsonl", "b=eval_results/tiny.jsonl", "--output", "images/a.png",
                 "--task-output", "images/b.png"]]
    log, statuses = run_commands(commands, tmp_path, stdin)
    assert statuses == [0] * len(commands), log[-4000:]
    assert_clean(log)
    assert "You won in" in sections(log)["alfworld-rl " + " ".join(play)]


@pytest.mark.slow
def test_report_runs_are_clean(small_data_root, tmp_path):
    "train, sft and eval with their reports, and analyze --report: clean terminal, clean executed notebooks."
    data = str(small_data_root)
    train = [*TRAIN, "--run-name", "clean-report", "--data-root", data]
    sft = ["sft", *TINY_MODEL, "--max-train-games", "1", "--games-per-batch", "1", "--max-steps", "1",
           "--max-episode-steps", "20", "--max-trajectory-tokens", "4096", "--run-name", "clean-sft", "--data-root", data]
    evaluate = [*EVAL, "--data-root", data]
    analyze = ["analyze", "a=eval_results/tiny.jsonl", "b=eval_results/tiny.jsonl", "--output", "images/a.png",
               "--task-output", "images/b.png", "--report", "runs/analysis.ipynb"]
    log, statuses = run_commands([train, sft, evaluate, analyze], tmp_path)
    assert statuses == [0, 0, 0, 0], log[-4000:]
    assert_clean(log)
    out = sections(log)["alfworld-rl " + " ".join(train)]
    assert "LocalSamplingClient" not in out and "datums from" not in out     # the report's cells stay in the report
    assert len(re.findall(r"^Saved state: .*$", out, re.M)) == 2
    for report in ("runs/clean-report/train.ipynb", "runs/clean-sft/sft.ipynb", "runs/tiny/eval.ipynb",
                   "runs/analysis.ipynb"):
        assert_report_clean(tmp_path / report)


def test_swanlab_local_without_its_dashboard_is_refused(tmp_path, capsys):
    "SwanLab's `local` mode without swanboard logs an ERROR and goes on; train refuses it up front instead."
    import importlib.util
    from alfworld_rl.cli import main
    if importlib.util.find_spec("swanboard") is not None: pytest.skip("swanboard is installed: local mode works")
    status = main(["train", "--backend", "local", "--base-model", "tiny-qwen3", "--swanlab-mode", "local",
                   "--output-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert status == 2 and "--swanlab-mode offline" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_sft_and_eval_tiny_runs_are_clean(small_data_root, tmp_path):
    "A tiny sft and a tiny eval (under both names of its concurrency flag) print no warning, traceback or stray error."
    data = str(small_data_root)
    sft = ["sft", *TINY_MODEL, "--max-train-games", "1", "--games-per-batch", "1", "--max-steps", "1",
           "--max-episode-steps", "20", "--max-trajectory-tokens", "4096", "--run-name", "clean-sft", "--data-root", data,
           "--no-report"]
    evaluate = [*EVAL, "--data-root", data, "--concurrency", "2", "--no-report"]
    again = [*EVAL, "--data-root", data, "--games-per-batch", "2", "--no-report", "--overwrite-output"]
    log, statuses = run_commands([sft, evaluate, again], tmp_path)
    assert statuses == [0, 0, 0], log[-4000:]
    assert_clean(log)
    out = sections(log)
    assert "Saved state:" in out["alfworld-rl " + " ".join(sft)]
    for cmd in (evaluate, again): assert "Saved evaluation: eval_results/tiny.jsonl" in out["alfworld-rl " + " ".join(cmd)]
