"""Nothing lost, round three (issue 49): SIGTERM ends a command and every process it started, a resume never
switches game sets. Each case runs the real command inside its temporary folder."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import psutil
import pytest

from alfworld_rl.core import read_jsonl

CLI = str(Path(sys.executable).parent / "alfworld-rl")


def cli(*args, cwd=None, timeout=600, **kw):
    "Run `alfworld-rl ARGS` to the end; returns the CompletedProcess (text)."
    return subprocess.run([CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)


def start(*args, cwd, ignore_sigint=False):
    "Start `alfworld-rl ARGS` in its own session; with `ignore_sigint`, as a background shell job would (SIGINT ignored)."
    pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else \
          (lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return subprocess.Popen([CLI, *map(str, args)], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=pre)


def wait_for(cond, proc, timeout=300, what=""):
    "Poll `cond()` until true; fail if `proc` ended first or `timeout` passed."
    t0 = time.time()
    while not cond():
        assert proc.poll() is None, f"the command ended before {what}: {proc.communicate()}"
        assert time.time() - t0 < timeout, f"no {what} after {timeout} s"
        time.sleep(0.3)


def tree(proc) -> list:
    "The process and every process it started, as psutil handles (taken while it runs)."
    p = psutil.Process(proc.pid)
    return [p, *p.children(recursive=True)]


def terminate_and_check(proc, procs_of, timeout=120) -> str:
    "SIGTERM the command only; it must exit 143 with one line on stderr and leave no process of its tree alive."
    procs = procs_of()
    os.kill(proc.pid, signal.SIGTERM)
    try: out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL); proc.communicate()
        raise AssertionError(f"still running {timeout} s after SIGTERM")
    _, alive = psutil.wait_procs(procs, timeout=5)
    leftover = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for p in leftover: p.kill()
    assert proc.returncode == 143, (proc.returncode, err[-3000:])
    assert not leftover, f"left running: {[(p.pid, p.name()) for p in leftover]}"
    last = [l for l in err.splitlines() if l.strip()][-1]
    assert last.startswith("alfworld-rl ") and "terminated" in last, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    return err


# ---- 1. SIGTERM to mini with seed workers ends every worker, and the run resumes ----------------------------------

@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["foreground", "background-job"])
def test_sigterm_to_mini_ends_its_seed_workers(ignore_sigint, tmp_path):
    out = tmp_path / "mini"
    proc = start("mini", "--settings", "smoke", "--seeds", "0", "1", "--workers", "2", "--no-report", "--out-dir", out,
                 cwd=tmp_path, ignore_sigint=ignore_sigint)
    wait_for(lambda: any(r["stage"] == "demonstrations" for r in read_jsonl(out / "stages.jsonl")), proc,
             what="the demonstrations stage")
    wait_for(lambda: len(psutil.Process(proc.pid).children()) >= 2, proc, what="the seed workers")
    terminate_and_check(proc, lambda: tree(proc))
    runs = [r for r in read_jsonl(out / "stages.jsonl") if r["stage"] == "run"]
    assert len(runs) == 1 and runs[0]["seconds"] > 0, runs        # the call cut short still counts in the run's time
    if not ignore_sigint:       # resumable as after Ctrl-C: the same command finishes the experiment
        r = cli("mini", "--settings", "smoke", "--seeds", "0", "1", "--workers", "2", "--no-report", "--out-dir", out,
                cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "mini result:" in r.stdout
        after = [r for r in read_jsonl(out / "stages.jsonl") if r["stage"] == "run"]
        assert len(after) == 1 and after[0]["seconds"] > runs[0]["seconds"], after   # both calls, one record


def test_sigterm_to_generate_with_workers_leaves_nothing(tmp_path):
    proc = start("generate", "--out", tmp_path / "games", "--train", "40", "--valid-seen", "2", "--valid-unseen", "2",
                 "--workers", "2", cwd=tmp_path)
    wait_for(lambda: len(psutil.Process(proc.pid).children(recursive=True)) >= 2, proc, what="the generator's workers")
    time.sleep(2)
    terminate_and_check(proc, lambda: tree(proc))


def test_sigterm_to_mini_in_report_mode_ends_kernel_and_workers(tmp_path):
    out = tmp_path / "mini"
    import tempfile
    from jupyter_core.paths import jupyter_runtime_dir
    kernel_files = lambda: set(Path(tempfile.gettempdir()).glob("alfworld-rl-kernel-*")) | set(Path(jupyter_runtime_dir()).glob("kernel-*.json"))
    before = kernel_files()
    proc = start("mini", "--settings", "smoke", "--seeds", "0", "1", "--workers", "2", "--out-dir", out, cwd=tmp_path)
    wait_for(lambda: any(r["stage"] == "demonstrations" for r in read_jsonl(out / "stages.jsonl")), proc, timeout=400,
             what="the demonstrations stage")
    wait_for(lambda: len(psutil.Process(proc.pid).children(recursive=True)) >= 3, proc, what="the kernel's seed workers")
    terminate_and_check(proc, lambda: tree(proc))
    assert kernel_files() <= before, kernel_files() - before     # the kernel's connection file (its HMAC key) is gone


# ---- 2. a resume never switches game sets, and never generates games ------------------------------------------

TINY_TRAIN = ["--backend", "local", "--base-model", "tiny-qwen3", "--games-per-batch", "1", "--group-size", "2",
              "--max-episode-steps", "2", "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096",
              "--swanlab-mode", "disabled", "--lora-rank", "4", "--no-report", "--save-every", "1"]


def env_without_data_root():
    return {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}


def test_train_resume_from_elsewhere_keeps_its_games(small_data_root, tmp_path):
    import shutil
    games = tmp_path / "games"; shutil.copytree(small_data_root, games)
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"; elsewhere.mkdir()
    first = cli("train", *TINY_TRAIN, "--max-steps", "1", "--output-dir", runs, "--run-name", "r", cwd=tmp_path,
                env={**env_without_data_root(), "ALFWORLD_DATA": str(games)})
    assert first.returncode == 0, first.stderr[-2000:]
    record = json.loads((runs / "r" / "games.json").read_text())
    assert record["data_root"] == str(games.resolve()) and record["games"] == 6
    # resumed from another folder without $ALFWORLD_DATA: the recorded games, nothing generated there
    again = cli("train", *TINY_TRAIN, "--max-steps", "2", "--output-dir", runs, "--run-name", "r", "--resume",
                cwd=elsewhere, env=env_without_data_root())
    assert again.returncode == 0, again.stderr[-2000:]
    assert not (elsewhere / "datasets").exists() and "generating" not in again.stdout + again.stderr
    played = {g for r in read_jsonl(runs / "r" / "metrics.jsonl") for g in r["games"]}
    ids = {p.parent.relative_to(games / "json_2.1.1" / "train").as_posix() for p in (games / "json_2.1.1" / "train").rglob("game.tw-pddl")}
    assert {g.split(":", 1)[1] for g in played} <= ids
    # the games gone: one line, status 2, nothing generated, the run's files as they were
    games.rename(tmp_path / "moved")
    before = (runs / "r" / "metrics.jsonl").read_text()
    refused = cli("train", *TINY_TRAIN, "--max-steps", "3", "--output-dir", runs, "--run-name", "r", "--resume",
                  cwd=elsewhere, env=env_without_data_root())
    assert refused.returncode == 2, refused.stderr[-2000:]
    lines = [l for l in refused.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "--resume: the run trained on 6 games under" in lines[0] and "--data-root" in lines[0], lines
    assert not (elsewhere / "datasets").exists()
    assert (runs / "r" / "metrics.jsonl").read_text() == before
    # --data-root naming the moved games: the same digest, so the run goes on
    moved = cli("train", *TINY_TRAIN, "--max-steps", "3", "--output-dir", runs, "--run-name", "r", "--resume",
                "--data-root", tmp_path / "moved", cwd=elsewhere, env=env_without_data_root())
    assert moved.returncode == 0, moved.stderr[-2000:]
    assert [r["step"] for r in read_jsonl(runs / "r" / "metrics.jsonl")] == [1, 2, 3]
    # other games under --data-root: refused
    other = tmp_path / "other"; shutil.copytree(tmp_path / "moved", other)
    victim = next((other / "json_2.1.1" / "train").rglob("game.tw-pddl")); victim.write_text(victim.read_text() + " ")
    switched = cli("train", *TINY_TRAIN, "--max-steps", "4", "--output-dir", runs, "--run-name", "r", "--resume",
                   "--data-root", other, cwd=elsewhere, env=env_without_data_root())
    assert switched.returncode == 2, switched.stderr[-2000:]
    assert "--resume: the run trained on 6 games under" in switched.stderr
    assert [r["step"] for r in read_jsonl(runs / "r" / "metrics.jsonl")] == [1, 2, 3]


# ---- 4. a budget smaller than the first prompt: one line naming the flag, nothing written ------------------------

TINY_EVAL = ["--backend", "local", "--base-model", "mini-base", "--max-episode-steps", "2", "--max-assistant-tokens", "16",
             "--games-per-batch", "1", "--no-report"]


def test_budget_below_the_first_prompt_is_refused(small_data_root, tmp_path):
    out = tmp_path / "e" / "eval.jsonl"
    r = cli("eval", *TINY_EVAL, "--max-trajectory-tokens", "100", "--data-root", small_data_root, "--output", out,
            cwd=tmp_path)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert "--max-trajectory-tokens must be >= " in lines[0] and "tokens) and one reply" in lines[0], lines
    assert not out.exists()
    t = cli("train", *TINY_TRAIN, "--max-trajectory-tokens", "100", "--max-steps", "1",
            "--data-root", small_data_root, "--output-dir", tmp_path / "runs", "--run-name", "r", cwd=tmp_path)
    lines = [l for l in t.stderr.splitlines() if l.strip()]
    assert t.returncode == 2 and len(lines) == 1 and "--max-trajectory-tokens must be >= " in lines[0], t.stderr[-2000:]
    assert not (tmp_path / "runs" / "r" / "config.json").exists()


# ---- 5. games whose `solvable` is missing or not a boolean: kept as ALFWorld keeps them, the rest listed ---------

def test_solvable_values_and_symlinked_folders_follow_alfworld(small_data_root, tmp_path, capsys):
    import shutil
    from alfworld_rl.env.data import discover_games
    root = tmp_path / "root"; shutil.copytree(small_data_root, root)
    split = root / "json_2.1.1" / "train"
    files = sorted(split.rglob("game.tw-pddl"))
    for f, value in zip(files, ["<missing>", "True", 1, False]):
        d = json.loads(f.read_text())
        if value == "<missing>": d.pop("solvable")
        else: d["solvable"] = value
        f.write_text(json.dumps(d))
    outside = tmp_path / "outside"; shutil.copytree(files[4].parent.parent, outside / files[4].parent.parent.name)
    shutil.rmtree(files[4].parent.parent)
    os.symlink(outside / files[4].parent.parent.name, files[4].parent.parent)   # a task folder that is a symlink
    broken = []
    games = discover_games(root, "train", broken=broken)
    kept = {Path(g.game_file).parent for g in games}
    assert files[1].parent in kept and files[2].parent in kept and files[4].parent in kept     # "True", 1, symlinked
    assert files[0].parent not in kept and files[3].parent not in kept
    assert [why for _, why in broken] == ["game.tw-pddl has no solvable key (ALFWorld skips it)",
                                          "unsolvable (solvable: False; ALFWorld skips it)"]
    err = capsys.readouterr().err
    assert "left out 2 broken game(s) of train" in err and "no solvable key" in err


# ---- 3. an output that vanishes mid-run is not recreated silently --------------------------------------------

def vanish(folder, tmp_path):
    "Take `folder` away from under a running process at once: a rename is atomic, where `rmtree` races the writer."
    import shutil
    gone = tmp_path / f"gone-{folder.name}"
    folder.rename(gone)
    shutil.rmtree(gone, ignore_errors=True)


def test_eval_whose_output_vanishes_reports_nothing_saved(small_data_root, tmp_path):
    out = tmp_path / "e" / "eval.jsonl"
    proc = start("eval", "--backend", "local", "--base-model", "tiny-qwen3", "--max-episode-steps", "6",
                 "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096", "--games-per-batch", "1",
                 "--episodes-per-game", "2", "--no-report", "--data-root", small_data_root, "--output", out, cwd=tmp_path)
    wait_for(lambda: out.exists() and len(read_jsonl(out)) >= 2, proc, what="two records")
    vanish(tmp_path / "e", tmp_path)
    _, err = proc.communicate(timeout=600)
    lines = [l for l in err.splitlines() if l.strip() and "it/s" not in l and "game/s" not in l]
    assert proc.returncode == 1, err[-2000:]
    assert "deleted or replaced during the run; no summary written" in lines[-1], lines
    assert not out.exists() or not any(r.get("type") == "summary" for r in read_jsonl(out))


def test_train_whose_run_directory_vanishes_stops(small_data_root, tmp_path):
    runs = tmp_path / "runs"
    proc = start("train", *TINY_TRAIN, "--max-steps", "40", "--data-root", small_data_root, "--output-dir", runs,
                 "--run-name", "r", cwd=tmp_path)
    wait_for(lambda: len(read_jsonl(runs / "r" / "metrics.jsonl")) >= 1, proc, what="the first update")
    vanish(runs / "r", tmp_path)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err[-2000:]
    assert "lost its config.json during the run" in [l for l in err.splitlines() if l.strip()][-1], err[-2000:]
    assert not (runs / "r" / "metrics.jsonl").exists()


# ---- 6. sft on games without a walkthrough: listed and left out; with none left, one line and nothing written -------

TINY_SFT = ["--backend", "local", "--base-model", "mini-base", "--games-per-batch", "1", "--max-steps", "1",
            "--max-episode-steps", "40", "--max-trajectory-tokens", "6000", "--context", "window", "--lora-rank", "4",
            "--swanlab-mode", "disabled", "--no-report"]


def set_walkthrough(game_file, value):
    "Write `value` as the game's walkthrough (None: remove the key)."
    d = json.loads(Path(game_file).read_text())
    if value is None: d.pop("walkthrough", None)
    else: d["walkthrough"] = value
    Path(game_file).write_text(json.dumps(d))


def game_id(game_file, split_dir) -> str:
    return f"train:{Path(game_file).parent.relative_to(split_dir).as_posix()}"


def test_sft_leaves_out_games_without_a_walkthrough(small_data_root, tmp_path):
    import shutil
    games = tmp_path / "games"; shutil.copytree(small_data_root, games)
    split = games / "json_2.1.1" / "train"
    files = sorted(split.rglob("game.tw-pddl"))
    set_walkthrough(files[0], None); set_walkthrough(files[1], [])
    runs = tmp_path / "runs"
    r = cli("sft", *TINY_SFT, "--data-root", games, "--output-dir", runs, "--run-name", "s", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert "left out 2 game(s) of train without a walkthrough" in r.stderr, r.stderr[-3000:]
    assert f"{game_id(files[0], split)}: game.tw-pddl has no walkthrough" in r.stderr
    demonstrated = {d["game_id"] for d in read_jsonl(runs / "s" / "demonstrations.jsonl")}
    assert demonstrated and not demonstrated & {game_id(f, split) for f in files[:2]}
    # none has one: one line naming the games and what is missing, status 2, no run files
    for f in files: set_walkthrough(f, None)
    r = cli("sft", *TINY_SFT, "--data-root", games, "--output-dir", runs, "--run-name", "t", cwd=tmp_path)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("alfworld-rl sft: error: no game of --train-split train has a walkthrough"), lines
    assert "(game.tw-pddl has no walkthrough)" in lines[0] and "and 3 more" in lines[0]
    assert sum(game_id(f, split) in lines[0] for f in files) == 3
    assert not (runs / "t" / "config.json").exists() and not (runs / "t" / "games.json").exists()


# ---- 7. a task folder whose name is not UTF-8: listed as skipped, the other games evaluated -------------------------

def test_eval_goes_on_past_a_folder_name_that_is_not_utf8(small_data_root, tmp_path):
    import shutil
    games = tmp_path / "games"; shutil.copytree(small_data_root, games)
    split = games / "json_2.1.1" / "valid_seen"
    tasks = sorted(p for p in split.iterdir() if p.is_dir())
    os.rename(os.fsencode(tasks[0]), os.fsencode(split) + b"/task_\xff")
    out = tmp_path / "e.jsonl"
    r = cli("eval", *TINY_EVAL, "--split", "valid_seen", "--data-root", games, "--output", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "left out 1 broken game(s) of valid_seen" in r.stderr
    assert "valid_seen:task_\\xff/" in r.stderr and "its folder name is not valid UTF-8" in r.stderr
    records = read_jsonl(out)
    trajs = [x for x in records if x["type"] == "trajectory"]
    assert len(trajs) == len(tasks) - 1 and records[-1]["type"] == "summary"
    assert records[-1]["metrics"]["eval/valid_seen/broken_games"] == 1


# ---- 8. a name longer than the file system takes: one line naming the flag, status 2, nothing written ---------------

LONG = "x" * 300

@pytest.mark.parametrize("args, flag", [
    (["train", "--no-report", "--output-dir", f"{LONG}/r"], "--output-dir"),
    (["sft", "--no-report", "--output-dir", LONG], "--output-dir"),
    (["eval", "--no-report", "--output", f"{LONG}/e.jsonl"], "--output"),
    (["eval", "--runs-dir", f"{LONG}/r", "--output", "e.jsonl"], "--runs-dir"),
    (["eval", "--no-report", "--output", "y" * 250], "--output"),           # its lock file's name would be too long
    (["mini", "--no-report", "--out-dir", LONG], "--out-dir"),
    (["generate", "--out", LONG, "--train", "1"], "--out"),
    (["agreement", "--output", f"{LONG}/a.json"], "--output"),
], ids=["train", "sft", "eval-output", "eval-runs-dir", "eval-lock", "mini", "generate", "agreement"])
def test_a_name_too_long_is_refused_up_front(args, flag, tmp_path):
    r = cli(*args, cwd=tmp_path, timeout=120)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith(f"alfworld-rl {args[0]}: error: {flag}: the name "), lines
    assert "bytes per file or folder name" in lines[0]
    assert os.listdir(tmp_path) == []


# ---- 9. evaluation records keep the absolute data root, also when it came from $ALFWORLD_DATA ---------------------

def test_eval_records_keep_the_absolute_data_root(small_data_root, tmp_path, monkeypatch):
    import shutil
    from alfworld_rl.runs.evaluate import EvalConfig, resolved_data_root
    shutil.copytree(small_data_root, tmp_path / "games")
    r = cli("eval", *TINY_EVAL, "--split", "valid_seen", "--limit-per-split", "1", "--output", "e.jsonl", cwd=tmp_path,
            env={**env_without_data_root(), "ALFWORLD_DATA": "games"})
    assert r.returncode == 0, r.stderr[-3000:]
    records = read_jsonl(tmp_path / "e.jsonl")
    assert records[-1]["config"]["data_root"] == str((tmp_path / "games").resolve())
    assert all(Path(x["game_file"]).is_absolute() for x in records if x["type"] == "trajectory")
    monkeypatch.chdir(tmp_path)                  # a relative --data-root is kept resolved too
    assert resolved_data_root(EvalConfig(data_root="games")) == str((tmp_path / "games").resolve())


# ---- 10. the parent of a report-mode command never imports torch ---------------------------------------------------

PARENT_PROBE = """
import shutil, sys
import papermill
ran = []
def report(template, output, **kw):
    ran.append(output); shutil.copyfile(template, output)      # the kernel's work, left out: only the parent runs
papermill.execute_notebook = report
from alfworld_rl.cli import main
try: main(sys.argv[1:])
except BaseException as e: print("ended with", repr(e))
print("PROBE", bool(ran), "torch" in sys.modules)
"""

@pytest.mark.parametrize("args", [
    ["train", "--backend", "local", "--base-model", "mini-base", "--max-steps", "1", "--output-dir", "runs"],
    ["sft", "--backend", "local", "--base-model", "mini-base", "--max-steps", "1", "--output-dir", "runs"],
    ["mini", "--settings", "smoke", "--seeds", "0", "--out-dir", "mini"],
], ids=["train", "sft", "mini"])
def test_report_mode_parent_does_not_import_torch(args, small_data_root, tmp_path):
    extra = ["--data-root", str(small_data_root)] if args[0] != "mini" else []
    r = subprocess.run([sys.executable, "-c", PARENT_PROBE, *args, *extra], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env=env_without_data_root())
    assert "PROBE True False" in r.stdout, (r.stdout[-2000:], r.stderr[-3000:])


# ---------------------------------------------------------------- found before the first rollout (item 7)

TINY_TRAIN_NR = ["--backend", "local", "--base-model", "tiny-qwen3", "--games-per-batch", "1", "--group-size", "2",
                 "--max-episode-steps", "2", "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096",
                 "--swanlab-mode", "disabled", "--no-report"]


def test_unwritable_checkpoints_are_found_before_the_first_rollout(small_data_root, tmp_path):
    run_dir = tmp_path / "runs" / "ro"
    run_dir.mkdir(parents=True)
    (run_dir / "checkpoints").symlink_to("/proc")        # a folder nobody can write to, root included
    r = cli("train", *TINY_TRAIN_NR, "--max-steps", "2", "--save-every", "2", "--data-root", small_data_root,
            "--output-dir", tmp_path / "runs", "--run-name", "ro", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"alfworld-rl train: error: --output-dir: cannot write to {run_dir / 'checkpoints'} ("), r.stderr
    assert not (run_dir / "metrics.jsonl").exists() and not (run_dir / "config.json").exists()


def test_train_does_not_generate_games_into_a_folder_holding_other_files(tmp_path):
    root = tmp_path / "my-project"
    root.mkdir()
    (root / "notes.txt").write_text("not games\n")
    r = cli("train", *TINY_TRAIN_NR, "--max-steps", "1", "--data-root", root, "--output-dir", tmp_path / "runs", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"alfworld-rl train: error: --data-root {root} holds no train games but other files") and "alfworld-rl generate --out" in line, r.stderr
    assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]


def test_train_still_generates_into_an_empty_folder_it_can_fill(tmp_path):
    from alfworld_rl.runs.train import load_training_games
    from alfworld_rl.runs.train_config import TrainConfig
    from alfworld_rl.env.generate import MANIFEST
    root = tmp_path / "fresh"
    root.mkdir()
    games = load_training_games(TrainConfig(backend="local", data_root=str(root), max_train_games=2))
    assert len(games) == 2 and (root / MANIFEST).is_file()
    again = load_training_games(TrainConfig(backend="local", data_root=str(root), max_train_games=2))   # generator-made: reused
    assert [g.id for g in again] == [g.id for g in games]
    assert len(read_jsonl(root / MANIFEST)) >= 1


def test_two_evaluations_never_share_one_report(small_data_root, tmp_path):
    "An eval whose report notebook already reports another output file is refused before any game, the report kept."
    import json
    report = tmp_path / "reports" / "base" / "eval.ipynb"
    report.parent.mkdir(parents=True)
    other = tmp_path / "first" / "base.jsonl"
    # the report of an earlier evaluation, as papermill writes its parameters
    report.write_text(json.dumps({"cells": [], "metadata": {"papermill": {"parameters": {"eval_file": str(other)}}},
                                  "nbformat": 4, "nbformat_minor": 5}))
    before = report.read_text()
    out = tmp_path / "second" / "base.jsonl"
    r = cli("eval", "--backend", "local", "--base-model", "tiny-qwen3", "--data-root", small_data_root, "--split",
            "valid_seen", "--limit-per-split", "1", "--max-episode-steps", "1", "--max-assistant-tokens", "16",
            "--output", out, "--runs-dir", tmp_path / "reports", "--swanlab-mode", "disabled", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"alfworld-rl eval: error: --runs-dir: {report} is the report of {other}"), r.stderr
    assert report.read_text() == before and not out.exists()


# ---------------------------------------------------------------- the hosted run that breaks (item 6)
# `train` driven through the PyTRIO adapter over the real local backend, whose training client fails as pytrio's does
# after a network loss (pytrio's own `training.run_broken`, every later call on that client refused).

import pytrio

from alfworld_rl.backends.service import make_service_client
from alfworld_rl.backends.trio import TrioServiceClient
from alfworld_rl.core import UserError
from alfworld_rl.runs.train import broken_run, train
from alfworld_rl.runs.train_config import TrainConfig


def run_broken_error():
    "The error pytrio raises once its training-run coordinator is broken."
    return pytrio.PyTrioError("a forward_backward chunk failed after its retries", code="training.run_broken")


class BreakingTraining:
    "A training client that breaks at the start of the service's chosen updates (counted over all its clients) and stays broken, as pytrio's does."
    def __init__(self, service, client): self.service, self.client, self.broken = service, client, False

    def __getattr__(self, name):
        attr = getattr(self.client, name)
        if name not in ("forward_backward", "forward_backward_async", "optim_step", "optim_step_async", "save_state",
                        "save_weights_for_sampler", "save_weights_and_get_sampling_client",
                        "save_weights_and_get_sampling_client_async"):
            return attr
        def call(*args, **kwargs):
            if self.broken: raise run_broken_error()
            if name.startswith("save_weights_and_get_sampling_client"):   # once per update, at its start
                self.service.updates += 1
                if self.service.updates in self.service.break_at: self.broken = True; raise run_broken_error()
            return attr(*args, **kwargs)
        return call


class BreakingService:
    "The local backend's service client, handing out training clients that break at the updates `break_at` (1-based)."
    def __init__(self, inner, break_at): self.inner, self.break_at, self.updates, self.calls = inner, set(break_at), 0, []

    def __getattr__(self, name): return getattr(self.inner, name)

    def create_lora_training_client(self, *args, **kwargs):
        self.calls.append("create_lora_training_client")
        return BreakingTraining(self, self.inner.create_lora_training_client(*args, **kwargs))

    def create_training_client_from_state_with_optimizer(self, path):
        self.calls.append(("from_state_with_optimizer", path))
        return BreakingTraining(self, self.inner.create_training_client_from_state_with_optimizer(path))


def tiny_config(root, out, **kw):
    return TrainConfig(base_model="tiny-qwen3", backend="local", games_per_batch=1, group_size=2, max_episode_steps=2,
                       max_assistant_tokens=16, max_trajectory_tokens=4096, swanlab_mode="disabled", data_root=str(root),
                       output_dir=str(out), run_name="hosted", save_every=1, ppo_minibatches=1, **kw)


def test_broken_run_is_recognised_wrapped_or_grouped():
    wrapped = UserError("The PyTRIO training run is broken")
    wrapped.__cause__ = run_broken_error()
    assert broken_run(run_broken_error()) and broken_run(wrapped)
    assert broken_run(ExceptionGroup("rollout", [wrapped]))
    assert not broken_run(UserError("something else")) and not broken_run(pytrio.PyTrioError("x", code="training.run_closed"))


def test_train_recovers_in_process_from_the_last_save(small_data_root, tmp_path, capfd):
    with make_service_client("local", device="cpu", checkpoint_root=str(tmp_path / "ckpt")) as inner:
        fake = BreakingService(inner, break_at={3})       # update 3 breaks the run at its start
        run = train(tiny_config(small_data_root, tmp_path, max_steps=4), service_client=TrioServiceClient(fake),
                    progress=False)
    err = capfd.readouterr().err
    assert "the PyTRIO training run broke during update 3; recovering in-process from the save at update 2" in err, err
    steps = [r["step"] for r in read_jsonl(tmp_path / "hosted" / "metrics.jsonl")]
    assert steps == [1, 2, 3, 4], steps                   # update 3 redone once, no record twice
    saves = read_jsonl(tmp_path / "hosted" / "checkpoints.jsonl")
    assert [s["step"] for s in saves] == [1, 2, 3, 4]
    assert fake.calls == ["create_lora_training_client", ("from_state_with_optimizer", saves[1]["state_path"])]
    assert run.step == 4 and fake.updates == 5


def test_a_run_that_breaks_again_before_a_new_save_stops_naming_the_save(small_data_root, tmp_path, capfd):
    with make_service_client("local", device="cpu", checkpoint_root=str(tmp_path / "ckpt")) as inner:
        fake = BreakingService(inner, break_at={2, 3})   # update 2 breaks, and breaks again after the recovery
        with pytest.raises(UserError) as e:
            train(tiny_config(small_data_root, tmp_path, max_steps=3), service_client=TrioServiceClient(fake),
                  progress=False)
    msg = str(e.value)
    assert "broke again after the recovery from update 1" in msg and "last save: update 1" in msg, msg
    assert msg.endswith("Continue with: alfworld-rl train --run-name hosted --output-dir " + str(tmp_path) + " --resume"), msg
    assert "\n" not in msg
    assert [r["step"] for r in read_jsonl(tmp_path / "hosted" / "metrics.jsonl")] == [1]


def test_a_run_that_breaks_before_any_save_says_so(small_data_root, tmp_path):
    with make_service_client("local", device="cpu", checkpoint_root=str(tmp_path / "ckpt")) as inner:
        fake = BreakingService(inner, break_at={1})
        with pytest.raises(UserError, match="broke during update 1 and nothing was saved yet; no save to resume from"):
            train(tiny_config(small_data_root, tmp_path, max_steps=2), service_client=TrioServiceClient(fake),
                  progress=False)
