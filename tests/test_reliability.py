"""Nothing lost, nothing silent (issue 16): one writer per run directory, early output checks, broken games,
clean interrupts, resume hints and input edge cases, each shown with real commands on generated games."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from alfworld_rl.core import read_jsonl

REPO = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "alfworld-rl")
TINY_TRAIN = ["--backend", "local", "--base-model", "tiny-qwen3", "--games-per-batch", "1", "--group-size", "2",
              "--max-episode-steps", "2", "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096",
              "--swanlab-mode", "disabled"]
TINY_SFT = ["--backend", "local", "--base-model", "tiny-qwen3", "--games-per-batch", "1", "--max-train-games", "2",
            "--max-trajectory-tokens", "4096", "--swanlab-mode", "disabled"]
TINY_EVAL = ["--backend", "local", "--base-model", "tiny-qwen3", "--max-episode-steps", "2",
             "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096", "--games-per-batch", "1"]


def cli(*args, cwd=None, timeout=600, **kw):
    "Run `alfworld-rl ARGS` to the end; returns the CompletedProcess (text)."
    return subprocess.run([CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)


def spawn(*args, cwd=None):
    "Start `alfworld-rl ARGS` in its own session (so a signal reaches only it and its children)."
    return subprocess.Popen([CLI, *map(str, args)], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def wait_for(predicate, proc, timeout=300):
    "Wait until `predicate()` holds; fail if `proc` ends first."
    t0 = time.time()
    while time.time() - t0 < timeout:
        if predicate(): return
        if proc.poll() is not None: raise AssertionError(f"ended early ({proc.returncode}): {proc.stdout.read()}")
        time.sleep(0.2)
    raise AssertionError("timed out")


def stop(proc):
    "Interrupt `proc` (Ctrl-C to its process group), then kill it if it lingers; returns its output."
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try: return proc.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired: os.killpg(proc.pid, signal.SIGKILL)
    return proc.communicate()[0]


def one_line_error(r, status=2):
    "Assert `r` failed with `status` and exactly one line on stderr, no traceback; returns that line."
    assert r.returncode == status, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr.strip()


# ---- 1. one writer per run directory / output file -------------------------------------------------------------

def _locked(path):
    "Whether the lock file `path` names its holder (it is written right after the lock is taken)."
    return path.is_file() and path.read_text().strip() != ""


@pytest.mark.parametrize("report", [False, True], ids=["no-report", "report"])
def test_second_train_on_one_run_is_refused(small_data_root, tmp_path, report):
    runs = tmp_path / "runs"
    args = ["train", *TINY_TRAIN, "--max-steps", "50", "--save-every", "1", "--run-name", "one",
            "--data-root", small_data_root, "--output-dir", runs, *(["--no-report"] if not report else [])]
    first = spawn(*args, "--seed", "1", cwd=tmp_path)
    try:
        wait_for(lambda: len(read_jsonl(runs / "one" / "metrics.jsonl")) >= 1, first)
        for extra in ([], ["--resume"]):           # a fresh start and a resume are both refused while it runs
            second = cli(*args, "--seed", "2", *extra, cwd=tmp_path)
            line = one_line_error(second)
            assert "--run-name: the run directory" in line and "in use by process" in line, line
    finally: out = stop(first)
    steps = [m["step"] for m in read_jsonl(runs / "one" / "metrics.jsonl")]
    assert steps == list(range(1, len(steps) + 1)), (steps, out)
    assert [c["step"] for c in read_jsonl(runs / "one" / "checkpoints.jsonl")] == list(range(1, len(steps) + 1))
    assert json.loads((runs / "one" / "config.json").read_text())["seed"] == 1
    # the lock goes with its process: the run resumes at once (Ctrl-C or kill -9 leave nothing to clean up)
    r = cli(*args, "--seed", "1", "--max-steps", str(len(steps) + 1), "--resume", "--no-report", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_second_sft_on_one_run_is_refused(small_data_root, tmp_path):
    runs = tmp_path / "runs"
    args = ["sft", *TINY_SFT, "--max-steps", "200", "--save-every", "0", "--run-name", "one",
            "--data-root", small_data_root, "--output-dir", runs, "--no-report"]
    first = spawn(*args, "--seed", "1", cwd=tmp_path)
    try:
        wait_for(lambda: (runs / "one" / "config.json").is_file(), first)
        line = one_line_error(cli(*args, "--seed", "2", cwd=tmp_path))
        assert "--run-name: the run directory" in line and "in use by process" in line, line
    finally: stop(first)
    assert json.loads((runs / "one" / "config.json").read_text())["seed"] == 1


def test_second_eval_on_one_output_is_refused(small_data_root, tmp_path):
    out = tmp_path / "eval.jsonl"
    args = ["eval", *TINY_EVAL, "--data-root", small_data_root, "--output", out, "--no-report", "--max-episode-steps", "50"]
    first = spawn(*args, cwd=tmp_path)
    try:
        wait_for(lambda: _locked(tmp_path / ".eval.jsonl.lock"), first)
        for extra in ([], ["--resume"], ["--overwrite-output"]):
            line = one_line_error(cli(*args, *extra, cwd=tmp_path))
            assert "--output: the output file" in line and "in use by process" in line, line
    finally: stop(first)
    ids = [r["game_id"] for r in read_jsonl(out) if r.get("type") == "trajectory"]
    assert len(ids) == len(set(ids))


# ---- 3. unwritable outputs are found before any work, with one line ---------------------------------------------

@pytest.fixture
def a_file(tmp_path):
    "A regular file: every path under it is unwritable (the test runs as root, so read-only modes would not stop it)."
    f = tmp_path / "afile"
    f.write_text("x")
    return f


def _summary_file(path):
    "A finished evaluation file holding only a summary."
    from alfworld_rl.runs.analysis import write_summary_file
    return write_summary_file(path, "tiny-qwen3", None, {"eval/valid_seen/games": 2, "eval/valid_seen/success_rate": 0.5})


@pytest.mark.parametrize("command,flag", [
    (["eval", "--base-model", "tiny-qwen3", "--output", "{f}/out.jsonl"], "--output"),
    (["eval", "--base-model", "tiny-qwen3", "--output", "{tmp}/out.jsonl", "--runs-dir", "{f}/runs"], "--runs-dir"),
    (["generate", "--out", "{f}/data", "--train", "1"], "--out"),
    (["train", *TINY_TRAIN, "--max-steps", "1", "--output-dir", "{f}/runs"], "--output-dir"),
    (["train", *TINY_TRAIN, "--max-steps", "1", "--output-dir", "{f}/runs", "--no-report"], "--output-dir"),
    (["sft", *TINY_SFT, "--max-steps", "1", "--output-dir", "{f}/runs"], "--output-dir"),
    (["mini", "--settings", "smoke", "--out-dir", "{f}/mini"], "--out-dir"),
    (["analyze", "a={tmp}/a.jsonl", "--output", "{f}/fig.png"], "--output"),
    (["analyze", "a={tmp}/a.jsonl", "--output", "{tmp}/fig.png", "--task-output", "{f}/t.png"], "--task-output"),
    (["analyze", "a={tmp}/a.jsonl", "--output", "{tmp}/fig.png", "--task-output", "{tmp}/t.png", "--report", "{f}/r.ipynb"], "--report"),
], ids=lambda v: v if isinstance(v, str) else v[0] + " " + v[-1].split("/")[-1])
def test_unwritable_output_fails_first_with_one_line(command, flag, a_file, small_data_root, tmp_path):
    _summary_file(tmp_path / "a.jsonl")
    args = [a.format(f=a_file, tmp=tmp_path) for a in command]
    if args[0] in ("eval", "train", "sft"): args += ["--data-root", str(small_data_root)]
    t0 = time.time()
    r = cli(*args, cwd=tmp_path, timeout=120)
    line = one_line_error(r)
    assert line.startswith(f"alfworld-rl {args[0]}: error: {flag}: cannot write to ") and "is a file, not a directory" in line, line
    assert r.stdout == ""                                    # nothing ran: no model, no game, no progress
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock"))   # an output's lock file may stay
    assert left == sorted(["afile", "a.jsonl"]), left


# ---- 4. the split name is checked first --------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["train", "sft"])
@pytest.mark.parametrize("root", ["empty", "generated"])
def test_wrong_train_split_is_refused_before_anything(command, root, small_data_root, tmp_path):
    data = tmp_path / "nothing-here" if root == "empty" else small_data_root
    before = sorted(p.relative_to(data) for p in data.rglob("*")) if data.exists() else None
    r = cli(command, "--base-model", "tiny-qwen3", "--train-split", "trian", "--data-root", data,
            "--output-dir", tmp_path / "runs", "--no-report", cwd=tmp_path, timeout=120)
    line = one_line_error(r)
    assert "--train-split must be one of train, valid_seen, valid_unseen (got 'trian')" in line
    assert not (tmp_path / "runs").exists() and r.stdout == ""
    assert (sorted(p.relative_to(data) for p in data.rglob("*")) if data.exists() else None) == before   # nothing generated


# ---- 7. the same error gives the same status with and without the report ----------------------------------------

@pytest.mark.parametrize("command", ["train", "sft"])
def test_flag_error_found_in_the_report_keeps_status_2(command, small_data_root, tmp_path):
    "--games-per-batch larger than the training set is only known once the games are found (inside the report)."
    tiny = TINY_TRAIN if command == "train" else TINY_SFT
    lines = {}
    for mode in ("report", "no-report"):
        r = cli(command, *tiny, "--games-per-batch", "50", "--max-steps", "1", "--data-root", small_data_root,
                "--output-dir", tmp_path / mode, *(["--no-report"] if mode == "no-report" else []), cwd=tmp_path)
        assert r.returncode == 2, (mode, r.stdout, r.stderr)
        lines[mode] = r.stderr.strip().splitlines()[-1]
        assert "--games-per-batch must be <= the number of games" in lines[mode], (mode, r.stderr)
        assert "UserError" not in lines[mode] and "failed:" not in lines[mode]
    assert lines["report"] == lines["no-report"]


# ---- 6. the resume hint works as printed; corrupt run files get one line ----------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("command", ["train", "sft"])
def test_printed_resume_hint_works_as_printed(command, small_data_root, tmp_path):
    runs = tmp_path / "elsewhere" / "my runs"               # not the default, and with a space
    tiny = TINY_TRAIN if command == "train" else TINY_SFT
    proc = spawn(command, *tiny, "--max-steps", "200", "--save-every", "1", "--run-name", "hint", "--data-root",
                 small_data_root, "--output-dir", runs, "--no-report", cwd=tmp_path)
    try: wait_for(lambda: len(read_jsonl(runs / "hint" / "checkpoints.jsonl")) >= 1, proc)
    finally: out = stop(proc)
    assert proc.returncode == 130, out
    hint = out.split("Continue with: ")[1].splitlines()[0]
    assert hint.startswith(f"alfworld-rl {command} --run-name hint --output-dir ") and hint.endswith("--resume"), hint
    import shlex
    done = len(read_jsonl(runs / "hint" / "metrics.jsonl"))
    r = subprocess.run(shlex.split(hint)[1:] and [CLI, *shlex.split(hint)[1:], "--max-steps", str(done + 1), "--no-report"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    steps = [m["step"] for m in read_jsonl(runs / "hint" / "metrics.jsonl")]
    assert steps == list(range(1, done + 2)) or steps[-1] == done + 1, steps


@pytest.fixture(scope="module")
def finished_run(small_data_root, tmp_path_factory):
    "A finished one-update train run (copied by each test that damages it)."
    runs = tmp_path_factory.mktemp("finished") / "runs"
    r = cli("train", *TINY_TRAIN, "--max-steps", "2", "--save-every", "1", "--run-name", "done", "--data-root",
            small_data_root, "--output-dir", runs, "--no-report")
    assert r.returncode == 0, r.stderr
    return runs / "done"


def _copy_run(run, tmp_path):
    import shutil
    runs = tmp_path / "runs"
    shutil.copytree(run, runs / "done")
    return runs


@pytest.mark.parametrize("damage,message", [
    (("config.json", lambda t: t[: len(t) // 2]), "config.json: line "),
    (("metrics.jsonl", lambda t: "not json\n" + t), "metrics.jsonl: line 1 is not valid JSON"),
    (("checkpoints.jsonl", lambda t: t + "[1, 2]\n"), "checkpoints.jsonl: line 3 is not a JSON object"),
], ids=["config.json", "metrics.jsonl", "checkpoints.jsonl"])
def test_corrupt_run_file_on_resume_is_one_line(damage, message, finished_run, tmp_path):
    runs = _copy_run(finished_run, tmp_path)
    name, change = damage
    path = runs / "done" / name
    path.write_text(change(path.read_text()))
    before = {p.name: p.read_bytes() for p in (runs / "done").iterdir() if p.is_file() and p.name != ".lock"}
    r = cli("train", "--run-name", "done", "--output-dir", runs, "--max-steps", "3", "--resume", "--no-report",
            cwd=tmp_path, timeout=300)
    line = one_line_error(r, status=1)
    assert message in line, line
    assert {p.name: p.read_bytes() for p in (runs / "done").iterdir() if p.is_file() and p.name in before} == before


# ---- 8. input edge cases -----------------------------------------------------------------------------------------

def test_resume_with_fewer_steps_than_done_says_so(finished_run, tmp_path):
    runs = _copy_run(finished_run, tmp_path)
    r = cli("train", "--run-name", "done", "--output-dir", runs, "--max-steps", "1", "--resume", "--no-report", cwd=tmp_path)
    line = one_line_error(r)
    assert "--max-steps 1 is below the 2 updates" in line and "--max-steps 3 or more" in line, line
    r = cli("train", "--run-name", "done", "--output-dir", runs, "--max-steps", "2", "--resume", "--no-report", cwd=tmp_path)
    assert r.returncode == 0 and "already has its 2 updates" in r.stderr and "nothing to do" in r.stderr, r.stderr
    assert [m["step"] for m in read_jsonl(runs / "done" / "metrics.jsonl")] == [1, 2]


# ---- 2. broken games are reported, never silent -----------------------------------------------------------------

def _break_games(root, split, how, n=None):
    "Damage the first `n` (default all) games of `split`: 'truncate' cuts game.tw-pddl, 'pddl' keeps valid JSON with PDDL the engine rejects."
    files = sorted((root / "json_2.1.1" / split).rglob("game.tw-pddl"))[:n]
    for f in files:
        if how == "truncate": f.write_text(f.read_text()[:3000])
        else:
            g = json.loads(f.read_text()); g["pddl_problem"] = g["pddl_problem"].replace("(:objects", "(:objectz", 1)
            f.write_text(json.dumps(g))
    return files


@pytest.fixture
def damaged_root(small_data_root, tmp_path):
    import shutil
    root = tmp_path / "data"
    shutil.copytree(small_data_root, root)
    return root


def test_eval_reports_broken_games_and_env_errors(damaged_root, tmp_path):
    _break_games(damaged_root, "valid_seen", "truncate", n=1)
    _break_games(damaged_root, "valid_unseen", "pddl", n=1)
    r = cli("eval", *TINY_EVAL, "--data-root", damaged_root, "--output", tmp_path / "e.jsonl", "--no-report", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "left out 1 broken game(s) of valid_seen" in r.stderr and "not valid JSON" in r.stderr, r.stderr
    assert "environment error" in r.stderr and "valid_unseen 1 of 3" in r.stderr, r.stderr
    m = read_jsonl(tmp_path / "e.jsonl")[-1]["metrics"]
    assert (m["eval/valid_seen/broken_games"], m["eval/valid_seen/games"]) == (1, 2)
    assert (m["eval/valid_unseen/env_errors"], m["eval/valid_unseen/games"]) == (1, 3)
    assert (m["eval/all/broken_games"], m["eval/all/env_errors"]) == (1, 1)


def test_eval_where_every_game_fails_is_an_error(damaged_root, tmp_path):
    _break_games(damaged_root, "valid_unseen", "pddl")
    r = cli("eval", *TINY_EVAL, "--data-root", damaged_root, "--split", "valid_unseen", "--output", tmp_path / "e.jsonl",
            "--no-report", cwd=tmp_path)
    assert r.returncode == 1 and "every one of the 3 games failed in the environment" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_train_where_every_game_fails_stops(damaged_root, tmp_path):
    _break_games(damaged_root, "train", "pddl")
    r = cli("train", *TINY_TRAIN, "--max-steps", "2", "--data-root", damaged_root, "--output-dir", tmp_path / "runs",
            "--no-report", cwd=tmp_path)
    assert r.returncode == 1 and "update 1: every trajectory failed in the environment" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert read_jsonl(tmp_path / "runs" / "alfworld-agent-rl" / "metrics.jsonl") == []


def test_training_set_of_only_broken_games_names_them(damaged_root, tmp_path):
    _break_games(damaged_root, "train", "truncate")
    r = cli("train", *TINY_TRAIN, "--max-steps", "1", "--data-root", damaged_root, "--output-dir", tmp_path / "runs",
            "--no-report", cwd=tmp_path)
    assert r.returncode == 1 and "left out 6 broken game(s) of train" in r.stderr and "no solvable ALFWorld games" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("flags,message", [
    (["train", "--temperature", "inf"], "--temperature must be a finite number (got inf)"),
    (["train", "--learning-rate", "nan"], "--learning-rate must be a finite number (got nan)"),
    (["sft", "--learning-rate", "inf"], "--learning-rate must be a finite number (got inf)"),
    (["eval", "--temperature", "inf"], "--temperature must be a finite number (got inf)"),
    (["eval", "--top-p", "nan"], "--top-p must be a finite number (got nan)"),
    (["download", "--connect-timeout", "nan"], "--connect-timeout must be a finite number > 0, got nan"),
])
def test_non_finite_numbers_are_refused(flags, message, tmp_path):
    extra = {"train": ["--output-dir", tmp_path / "runs"], "sft": ["--output-dir", tmp_path / "runs"],
             "eval": ["--output", tmp_path / "e.jsonl"], "download": ["--data-dir", tmp_path / "d"]}[flags[0]]
    line = one_line_error(cli(*flags, *extra, cwd=tmp_path, timeout=120))
    assert message in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("typed,shown", [("²\nquit\n", "[1] ²"), ("-1\nquit\n", "No action -1: choose 1..")])
def test_play_odd_input(typed, shown, small_data_root, tmp_path):
    r = subprocess.run([CLI, "play", "--data-root", str(small_data_root), "--seed", "0"], input=typed,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert shown in r.stdout and "[1] -1" not in r.stdout, r.stdout


@pytest.mark.parametrize("content", ['{"pddl_problem": "(define (problem', "not a game", ""])
def test_play_refuses_a_corrupt_game_file(content, tmp_path):
    f = tmp_path / "game.tw-pddl"
    f.write_text(content)
    line = one_line_error(subprocess.run([CLI, "play", "--game", str(f)], capture_output=True, text=True, timeout=120))
    assert "--game" in line and "not a playable game" in line, line


def test_generate_rerun_says_it_wrote_nothing(small_data_root, tmp_path):
    import shutil
    root = tmp_path / "data"
    shutil.copytree(small_data_root, root)
    from tests.conftest import SMALL_DATA_ARGS as A
    r = cli("generate", "--out", root, "--train", A["train"], "--valid-seen", A["valid_seen"], "--valid-unseen",
            A["valid_unseen"], "--seed", A["seed"], "--min-receptacles", A["min_receptacles"], "--max-receptacles",
            A["max_receptacles"], "--distractors", A["distractors"], "--max-plan-steps", A["max_plan_steps"], timeout=300)
    assert r.returncode == 0, r.stderr
    assert "already holds these 12 games; nothing to write" in r.stdout and "wrote" not in r.stdout, r.stdout


def test_analyze_names_a_non_numeric_count(tmp_path):
    from alfworld_rl.runs.analysis import write_summary_file
    write_summary_file(tmp_path / "a.jsonl", "m", None, {"eval/valid_seen/games": "ten", "eval/valid_seen/success_rate": 0.5})
    line = one_line_error(cli("analyze", f"a={tmp_path / 'a.jsonl'}", "--output", tmp_path / "f.png",
                              "--task-output", tmp_path / "t.png", cwd=tmp_path, timeout=120), status=1)
    assert "the summary metric 'eval/valid_seen/games' is not a number (got 'ten')" in line, line


# ---- 5. interrupts end with one clean line and status 130 -------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("report", [False, True], ids=["no-report", "report"])
def test_ctrl_c_prints_no_traceback(report, small_data_root, tmp_path):
    runs = tmp_path / "runs"
    proc = spawn("train", *TINY_TRAIN, "--max-steps", "50", "--save-every", "1", "--run-name", "c",
                 "--data-root", small_data_root, "--output-dir", runs, *([] if report else ["--no-report"]), cwd=tmp_path)
    try:
        wait_for(lambda: len(read_jsonl(runs / "c" / "metrics.jsonl")) >= 1, proc)
        os.killpg(proc.pid, signal.SIGINT)
        out = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None: os.killpg(proc.pid, signal.SIGKILL); proc.wait()
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "InvalidStateError" not in out and "Exception in thread" not in out, out
    assert "Continue with: alfworld-rl train --run-name c --output-dir" in out, out


@pytest.mark.slow
def test_second_ctrl_c_in_report_mode_is_one_line(small_data_root, tmp_path):
    runs = tmp_path / "runs"
    proc = spawn("train", *TINY_TRAIN, "--max-steps", "50", "--save-every", "1", "--run-name", "c2",
                 "--data-root", small_data_root, "--output-dir", runs, cwd=tmp_path)
    try:
        wait_for(lambda: len(read_jsonl(runs / "c2" / "metrics.jsonl")) >= 1, proc)
        os.kill(proc.pid, signal.SIGINT)              # to the command only, as a terminal's second Ctrl-C reaches it
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGINT)
        out = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None: os.killpg(proc.pid, signal.SIGKILL); proc.wait()
    assert proc.returncode == 130, out
    assert "Traceback" not in out and out.strip().splitlines()[-1] == "alfworld-rl train: interrupted (forced); continue with --resume", out
    r = cli("train", "--run-name", "c2", "--output-dir", runs, "--resume", "--no-report", "--max-steps",
            str(len(read_jsonl(runs / "c2" / "metrics.jsonl")) + 1), cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stderr
