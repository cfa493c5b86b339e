"""Nothing lost, round two (issue 34): outputs only to regular files, damaged checkpoints named in one line with a
fall back to the newest one that loads, full disks cleaned up after, duplicates dropped, refused commands change
nothing. Each case runs the real command on generated games with the tiny model, inside its temporary folder."""
import json, os, shutil, signal, subprocess, sys, time
from pathlib import Path

import pytest

from alfworld_rl.core import read_jsonl

CLI = str(Path(sys.executable).parent / "alfworld-rl")
TINY_TRAIN = ["--backend", "local", "--base-model", "tiny-qwen3", "--games-per-batch", "1", "--group-size", "2",
              "--max-episode-steps", "2", "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096",
              "--swanlab-mode", "disabled", "--lora-rank", "4"]
TINY_SFT = ["--backend", "local", "--base-model", "tiny-qwen3", "--games-per-batch", "1", "--max-train-games", "2",
            "--max-trajectory-tokens", "4096", "--swanlab-mode", "disabled"]
TINY_EVAL = ["--backend", "local", "--base-model", "tiny-qwen3", "--max-episode-steps", "2",
             "--max-assistant-tokens", "16", "--max-trajectory-tokens", "4096", "--games-per-batch", "1", "--no-report"]


def cli(*args, cwd=None, timeout=600, **kw):
    "Run `alfworld-rl ARGS` to the end; returns the CompletedProcess (text)."
    return subprocess.run([CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)


# ENOSPC is simulated in a child process that replaces `open` in the module named first (its writes of files whose
# name ends with the second argument fail half-way, after `after` good writes), then runs the CLI with the rest.
FULL_DISK = r'''
import builtins, errno, io, os, sys, importlib
module, suffix, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
state = {"writes": 0}
class Full(io.FileIO):
    def write(self, b):
        b = b.encode() if isinstance(b, str) else bytes(b)
        state["writes"] += 1
        if state["writes"] <= after: return super().write(b)
        super().write(b[: len(b) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
def fake_open(path, mode="r", *a, **kw):
    if str(path).endswith(suffix) and ("a" in mode or "w" in mode):
        return Full(path, mode.replace("b", "").replace("t", ""))
    return builtins.open(path, mode, *a, **kw)
mod = importlib.import_module(module)
mod.open = fake_open
import pathlib
real_write_text = pathlib.Path.write_text
def write_text(self, data, *a, **kw):          # Path.write_text does not go through a module's `open`
    if str(self).endswith(suffix):
        with fake_open(self, "w") as f: f.write(data)
        return len(data)
    return real_write_text(self, data, *a, **kw)
pathlib.Path.write_text = write_text
from alfworld_rl.cli import main
sys.exit(main(sys.argv[4:]))
'''


def cli_full_disk(module, suffix, after, *args, cwd=None):
    "Run `alfworld-rl ARGS` with a disk that fills up in writes of `suffix` files through `module`'s `open`."
    return subprocess.run([sys.executable, "-c", FULL_DISK, module, suffix, str(after), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def one_line_error(r, status):
    "Assert `r` failed with `status` and exactly one line on stderr, no traceback; returns that line."
    assert r.returncode == status, (r.returncode, r.stdout[-2000:], r.stderr[-4000:])
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr.strip()


def files_of(folder):
    "Every regular file under `folder` (but lock files) with its bytes: to show that a refused command changed nothing."
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*"))
            if p.is_file() and not p.name.endswith(".lock") and p.name != ".lock"}


def truncate(path):
    "Cut file `path` to half its size (an interrupted copy, a full disk)."
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# ---- a finished three-update run, copied by each test that damages it ----------------------------------------------

@pytest.fixture(scope="module")
def three_updates(small_data_root, tmp_path_factory):
    "A finished train run of 3 updates, saved after each (copied by each test)."
    runs = tmp_path_factory.mktemp("three") / "runs"
    r = cli("train", *TINY_TRAIN, "--max-steps", "3", "--save-every", "1", "--run-name", "r3", "--data-root",
            small_data_root, "--output-dir", runs, "--no-report")
    assert r.returncode == 0, r.stderr
    return runs / "r3"


def copy_run(run, tmp_path):
    "A copy of run directory `run` under `tmp_path/runs` (its checkpoint paths pointed at the copy); returns the runs folder."
    runs = tmp_path / "runs"
    shutil.copytree(run, runs / run.name)
    index = runs / run.name / "checkpoints.jsonl"
    index.write_text(index.read_text().replace(str(run.resolve()), str((runs / run.name).resolve())))
    return runs


def resume(runs, max_steps, cwd):
    "`train --resume` of the copied run to `max_steps` updates."
    return cli("train", "--run-name", "r3", "--output-dir", runs, "--max-steps", max_steps, "--resume", "--no-report",
               cwd=cwd)


def saves(runs):
    "The checkpoint records of the copied run."
    return read_jsonl(runs / "r3" / "checkpoints.jsonl")


def steps(runs, name="metrics.jsonl"):
    return [r["step"] for r in read_jsonl(runs / "r3" / name)]


# ---- 2. resume without its index rebuilds it; never a silent restart --------------------------------------------

def test_resume_rebuilds_a_deleted_index(three_updates, tmp_path):
    runs = copy_run(three_updates, tmp_path)
    before = read_jsonl(runs / "r3" / "metrics.jsonl")
    (runs / "r3" / "checkpoints.jsonl").unlink()
    r = resume(runs, 4, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "checkpoints.jsonl is missing; rebuilt it from the 3 checkpoint folders" in r.stdout, r.stdout
    assert "Resumed r3 after update 3" in r.stdout, r.stdout
    assert read_jsonl(runs / "r3" / "metrics.jsonl")[:3] == before          # updates 1-3 kept, not redone
    assert steps(runs) == [1, 2, 3, 4] and [s["step"] for s in saves(runs)] == [1, 2, 3, 4]


# ---- 3. damaged checkpoints: the newest one that loads, said; all damaged: one line ----------------------------

@pytest.mark.parametrize("name", ["adapter_model.safetensors", "optimizer.pt"])
def test_resume_passes_over_a_truncated_checkpoint(name, three_updates, tmp_path):
    runs = copy_run(three_updates, tmp_path)
    newest = Path(saves(runs)[-1]["state_path"])
    truncate(newest / name)
    r = resume(runs, 4, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert f"passing over the checkpoint of update 3 ({newest}): {newest / name} is damaged" in r.stdout, r.stdout
    assert "Resumed r3 after update 2" in r.stdout, r.stdout
    assert steps(runs) == [1, 2, 3, 4] and steps(runs, "samples.jsonl") == [1, 2, 3, 4]
    assert [s["step"] for s in saves(runs)] == [1, 2, 3, 4] and Path(saves(runs)[2]["state_path"]) != newest


def test_resume_with_every_checkpoint_damaged_is_one_line(three_updates, tmp_path):
    runs = copy_run(three_updates, tmp_path)
    for s in saves(runs): truncate(Path(s["state_path"]) / "adapter_model.safetensors")
    before = files_of(runs)
    line = one_line_error(resume(runs, 4, tmp_path), 1)
    assert "--resume: no checkpoint of" in line and "adapter_model.safetensors is damaged" in line, line
    assert files_of(runs) == before


def test_resume_after_a_cut_metrics_line_redoes_that_update(three_updates, tmp_path):
    runs = copy_run(three_updates, tmp_path)
    metrics = runs / "r3" / "metrics.jsonl"
    text = metrics.read_text()
    metrics.write_text(text[: text.rindex('{"step": 3') + 40])                # update 3's line cut mid-write
    r = resume(runs, 4, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "passing over the checkpoint of update 3" in r.stdout and "metrics record is missing" in r.stdout, r.stdout
    assert steps(runs) == [1, 2, 3, 4] and steps(runs, "samples.jsonl") == [1, 2, 3, 4]


# ---- 6. a refused resume changes no file ----------------------------------------------------------------------

def test_refused_resume_leaves_config_as_it_was(three_updates, tmp_path):
    runs = copy_run(three_updates, tmp_path)
    before = files_of(runs)
    line = one_line_error(resume(runs, 1, tmp_path), 2)
    assert "--max-steps 1 is below the 3 updates" in line, line
    assert files_of(runs) == before                      # config.json still says max_steps 3


# ---- 3. --init-state at a damaged or foreign state: one line before any work ------------------------------------

def _foreign(state):
    info = json.loads((state / "trainer_state.json").read_text())
    (state / "trainer_state.json").write_text(json.dumps({**info, "base_model": "mini-base"}))


@pytest.mark.parametrize("damage,status,says", [
    (lambda s: truncate(s / "adapter_model.safetensors"), 1, "adapter_model.safetensors is damaged"),
    (lambda s: (s / "trainer_state.json").write_text("{not json"), 1, "trainer_state.json is damaged: not valid JSON"),
    (lambda s: (s / "trainer_state.json").write_text(""), 1, "trainer_state.json is damaged: not valid JSON"),
    (lambda s: (s / "adapter_model.safetensors").unlink(), 1, "adapter_model.safetensors is missing"),
    (_foreign, 2, "holds weights for base model 'mini-base', not 'tiny-qwen3'"),
], ids=["truncated-adapter", "garbage-state", "empty-state", "missing-adapter", "other-base-model"])
def test_init_state_damaged_is_one_line(damage, status, says, three_updates, small_data_root, tmp_path):
    runs = copy_run(three_updates, tmp_path)
    state = Path(saves(runs)[-1]["state_path"])
    damage(state)
    r = cli("train", *TINY_TRAIN, "--max-steps", "1", "--run-name", "new", "--data-root", small_data_root,
            "--output-dir", runs, "--init-state", state, "--no-report", cwd=tmp_path)
    line = one_line_error(r, status)
    assert line.startswith("alfworld-rl train: error: --init-state: ") and says in line, line
    assert not (runs / "new" / "config.json").exists() and not (runs / "new" / "metrics.jsonl").exists()


def test_eval_and_agreement_at_a_damaged_checkpoint_are_one_line(three_updates, small_data_root, tmp_path):
    runs = copy_run(three_updates, tmp_path)
    last = saves(runs)[-1]
    truncate(Path(last["sampler_path"]) / "adapter_model.safetensors")
    out = tmp_path / "eval.jsonl"
    line = one_line_error(cli("eval", *TINY_EVAL, "--data-root", small_data_root, "--model-path", last["sampler_path"],
                              "--output", out, cwd=tmp_path), 1)
    assert "--model-path: " in line and "adapter_model.safetensors is damaged" in line, line
    assert not out.exists()
    state = Path(last["state_path"])
    truncate(state / "adapter_model.safetensors")
    line = one_line_error(cli("agreement", f"a={state}", "--base-model", "tiny-qwen3", "--data-root", small_data_root,
                              "--max-games", "1", cwd=tmp_path), 1)
    assert "adapter_model.safetensors is damaged" in line, line
    (state / "trainer_state.json").write_text("garbage")
    line = one_line_error(cli("agreement", f"a={state}", "--base-model", "tiny-qwen3", "--data-root", small_data_root,
                              "--max-games", "1", cwd=tmp_path), 1)
    assert "trainer_state.json is damaged" in line, line


# ---- 1. outputs only to regular files or new paths -------------------------------------------------------------

def _special(tmp_path, kind):
    "A path in `tmp_path` holding something that is not a regular file: a FIFO, a symlink, a directory or a device."
    p = tmp_path / f"out-{kind}.jsonl"
    if kind == "fifo": os.mkfifo(p)
    elif kind == "symlink": (tmp_path / "target.jsonl").write_text("keep me\n"); os.symlink(tmp_path / "target.jsonl", p)
    elif kind == "directory": p.mkdir()
    else:
        import stat
        try: os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 7))       # the device number of /dev/full
        except PermissionError: pytest.skip("creating a device node needs CAP_MKNOD")
    return p


@pytest.mark.parametrize("kind,says", [("fifo", "is a FIFO"), ("symlink", "is a symbolic link"),
                                       ("directory", "is a directory"), ("device", "is a device")])
def test_eval_output_that_is_not_a_regular_file_is_refused(kind, says, small_data_root, tmp_path):
    out = _special(tmp_path, kind)
    before = os.lstat(out)
    r = cli("eval", *TINY_EVAL, "--data-root", small_data_root, "--output", out, "--overwrite-output", cwd=tmp_path)
    line = one_line_error(r, 2)
    assert f"--output: {out} {says}, not a regular file" in line, line
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)      # not replaced
    if kind == "symlink": assert (tmp_path / "target.jsonl").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []     # no lock file left either


def test_other_outputs_that_are_not_regular_files_are_refused(small_data_root, tmp_path):
    from alfworld_rl.runs.analysis import write_summary_file
    a = write_summary_file(tmp_path / "a.jsonl", "tiny-qwen3", None, {"eval/valid_seen/games": 2, "eval/valid_seen/success_rate": 0.5})
    link = _special(tmp_path, "symlink")
    line = one_line_error(cli("analyze", f"a={a}", "--output", link, "--task-output", tmp_path / "t.png", cwd=tmp_path), 2)
    assert "--output: " in line and "is a symbolic link" in line, line
    fifo = _special(tmp_path, "fifo")
    line = one_line_error(cli("agreement", "a=base", "--base-model", "tiny-qwen3", "--data-root", small_data_root,
                              "--output", fifo, cwd=tmp_path), 2)
    assert f"--output: {fifo} is a FIFO" in line, line
    assert (tmp_path / "target.jsonl").read_text() == "keep me\n" and link.is_symlink()


# ---- 6. empty paths are refused ----------------------------------------------------------------------------------

@pytest.mark.parametrize("args,says", [
    (["eval", "--base-model", "tiny-qwen3", "--output", ""], "--output must be a non-empty string"),
    (["generate", "--out", "", "--train", "1"], "--out: the path is empty"),
    (["train", *TINY_TRAIN, "--output-dir", "", "--no-report"], "--output-dir must be a non-empty string"),
], ids=["eval", "generate", "train"])
def test_empty_paths_are_refused(args, says, tmp_path):
    line = one_line_error(cli(*args, cwd=tmp_path), 2)
    assert says in line, line
    assert list(tmp_path.iterdir()) == []


# ---- 4. a full disk: one line, the partial record gone, --resume continues ---------------------------------------

def _error_lines(r):
    "The error lines on stderr (progress bars may also be there); asserts no traceback."
    assert "Traceback" not in r.stderr, r.stderr
    return [l for l in r.stderr.splitlines() if ": error: " in l]


def test_eval_on_a_full_disk(small_data_root, tmp_path):
    out = tmp_path / "eval.jsonl"
    args = ["eval", *TINY_EVAL, "--data-root", small_data_root, "--limit-per-split", "1", "--output", out]
    r = cli_full_disk("alfworld_rl.core", "eval.jsonl", 1, *args, cwd=tmp_path)  # the second record meets a full disk
    assert r.returncode == 1, r.stderr
    [line] = _error_lines(r)
    assert line == f"alfworld-rl eval: error: cannot write {out}: No space left on device; free space or fix the " \
                   "location, then run the command again (with --resume where it has one)", line
    assert out.read_text().endswith("\n") and len(read_jsonl(out)) == 1       # the whole first record, no half of the second
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".eval.jsonl.lock") == ["eval.jsonl"]   # no .tmp
    r = cli(*args, "--resume", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    records = read_jsonl(out)
    assert [r["type"] for r in records] == ["trajectory", "trajectory", "summary"]
    assert records[-1]["metrics"]["eval/all/games"] == 2


def test_generate_on_a_full_disk(tmp_path):
    out = tmp_path / "data"
    args = ["generate", "--out", out, "--train", "2", "--min-receptacles", "4", "--max-receptacles", "5",
            "--task-types", "pick_and_place_simple"]
    r = cli_full_disk("alfworld_rl.env.generate", "traj_data.json", 1, *args, cwd=tmp_path)   # the second game's files
    assert r.returncode == 1, r.stderr
    [line] = _error_lines(r)
    assert line.startswith("alfworld-rl generate: error: cannot write ") and "No space left on device" in line, line
    assert [p for p in out.rglob("*") if p.name.endswith(".tmp")] == []
    r = cli(*args, cwd=tmp_path)
    assert r.returncode == 0 and "wrote 1 games" in r.stdout, (r.stdout, r.stderr)
    assert len(list(out.rglob("traj_data.json"))) == 2


# ---- 5. eval resume drops repeated records; summaries count games ----------------------------------------------

def test_eval_resume_drops_repeated_records(small_data_root, tmp_path):
    out = tmp_path / "eval.jsonl"
    args = ["eval", *TINY_EVAL, "--data-root", small_data_root, "--limit-per-split", "2", "--output", out]
    r = cli(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trajs = [r for r in read_jsonl(out) if r["type"] == "trajectory"]
    assert len(trajs) == 4
    out.write_text("".join(json.dumps(t) + "\n" for t in trajs + [trajs[0]]))       # one game twice, no summary
    r = cli(*args, "--resume", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"{out} held 1 repeated trajectory records (games {trajs[0]['game_id']}); kept the first of each" in r.stderr
    records = read_jsonl(out)
    assert [r["game_id"] for r in records if r["type"] == "trajectory"] == [t["game_id"] for t in trajs]
    assert records[-1]["metrics"]["eval/all/games"] == 4
    r = cli("analyze", f"a={out}", "--output", tmp_path / "f.png", "--task-output", tmp_path / "t.png", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "5" not in [w for l in r.stdout.splitlines() if "games" in l.lower() for w in l.split()], r.stdout


# ---- 6. Ctrl-C during eval prints the command that continues it ------------------------------------------------

def test_interrupted_eval_prints_a_working_resume_command(small_data_root, tmp_path):
    import shlex
    out = tmp_path / "my eval.jsonl"
    proc = subprocess.Popen([CLI, "eval", *TINY_EVAL, "--data-root", str(small_data_root), "--limit-per-split", "1",
                             "--max-episode-steps", "8", "--output", str(out)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # a background CI shell ignores SIGINT
    t0 = time.time()
    while not read_jsonl(out) and time.time() - t0 < 300:
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    text = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, text
    hint = text.split("Continue with: ")[1].splitlines()[0]
    parts = shlex.split(hint)
    assert parts[:2] == ["alfworld-rl", "eval"] and parts[-1] == "--resume" and str(out) in parts, hint
    r = subprocess.run([CLI, *parts[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    records = read_jsonl(out)
    ids = [r["game_id"] for r in records if r["type"] == "trajectory"]
    assert len(ids) == len(set(ids)) == 2 and records[-1]["type"] == "summary"


# ---- 6. every hint names a flag of the command that printed it --------------------------------------------------

def _official_like_root(small_data_root, tmp_path):
    "A data root with validation games but no train split and no generator manifest (like a partial download)."
    root = tmp_path / "data"
    shutil.copytree(small_data_root / "json_2.1.1" / "valid_seen", root / "json_2.1.1" / "valid_seen")
    return root


@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_data_root_without_train_games_names_data_root(command, small_data_root, tmp_path):
    root = _official_like_root(small_data_root, tmp_path)
    tiny = TINY_TRAIN if command == "train" else TINY_SFT
    r = cli(command, *tiny, "--max-steps", "1", "--data-root", root, "--output-dir", tmp_path / "runs", "--no-report",
            cwd=tmp_path)
    [line] = _error_lines(r)
    assert r.returncode == 1 and "use another --data-root" in line and "--out " not in line + " ", line


def test_agreement_names_its_own_split_flag(small_data_root, tmp_path):
    r = cli("agreement", "a=base", "--base-model", "tiny-qwen3", "--data-root", small_data_root, "--split", "valid_seen",
            "--max-games", "1", "--max-episode-steps", "1", cwd=tmp_path)
    [line] = _error_lines(r)
    assert "of --split valid_seen" in line and "--train-split" not in line, line


def test_analyze_a_folder_says_it_is_a_folder(tmp_path):
    (tmp_path / "evals").mkdir()
    line = one_line_error(cli("analyze", f"a={tmp_path / 'evals'}", cwd=tmp_path), 2)
    assert f"{tmp_path / 'evals'}: a directory, not an evaluation file" in line and "missing" not in line, line


def test_second_mini_on_one_folder_names_out_dir(tmp_path):
    out = tmp_path / "mini"
    first = subprocess.Popen([CLI, "mini", "--settings", "smoke", "--out-dir", str(out), "--no-report"], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        t0 = time.time()
        while not ((out / ".lock").is_file() and (out / ".lock").read_text().strip()) and time.time() - t0 < 120:
            assert first.poll() is None
            time.sleep(0.2)
        line = one_line_error(cli("mini", "--settings", "smoke", "--out-dir", out, "--no-report", cwd=tmp_path), 2)
        assert line.startswith(f"alfworld-rl mini: error: --out-dir: the run directory {out} is in use by process"), line
        assert "--run-name" not in line and line.endswith("or choose another --out-dir"), line
    finally:
        os.killpg(first.pid, signal.SIGKILL); first.wait()


# ---- 6. a rerun of mini writes one record per stage -------------------------------------------------------------

def test_mini_rerun_logs_demonstrations_once(tmp_path):
    from alfworld_rl.mini import recipe as mini
    s = mini.settings_from("smoke")
    paths = mini.MiniPaths(tmp_path / "mini")
    mini.mini_data(s, paths, progress=False)
    mini.mini_demonstrations(s, paths, progress=False)      # the first call, then interrupted before SFT finished
    first = read_jsonl(paths.stages)
    mini.mini_demonstrations(s, paths, progress=False)      # the rerun redoes them
    stages = read_jsonl(paths.stages)
    assert [r["stage"] for r in stages] == ["demonstrations"]
    assert stages[0]["seconds"] > first[0]["seconds"]       # both calls' time, in one record


# ---- 4. a full disk during training: one line, whole records only, --resume continues ---------------------------

def test_train_on_a_full_disk(small_data_root, tmp_path):
    runs = tmp_path / "runs"
    args = ["train", *TINY_TRAIN, "--max-steps", "2", "--save-every", "1", "--run-name", "full", "--data-root",
            small_data_root, "--output-dir", runs, "--no-report"]
    r = cli_full_disk("alfworld_rl.core", "metrics.jsonl", 1, *args, cwd=tmp_path)   # update 2's record meets a full disk
    assert r.returncode == 1, r.stderr
    [line] = _error_lines(r)
    assert line.startswith(f"alfworld-rl train: error: cannot write {runs / 'full' / 'metrics.jsonl'}: No space left"), line
    metrics = runs / "full" / "metrics.jsonl"
    assert metrics.read_text().endswith("\n") and [m["step"] for m in read_jsonl(metrics)] == [1]
    r = cli("train", "--run-name", "full", "--output-dir", runs, "--resume", "--no-report", cwd=tmp_path)
    assert r.returncode == 0 and "Resumed full after update 1" in r.stdout, r.stderr
    assert [m["step"] for m in read_jsonl(metrics)] == [1, 2]


# ---- 6. a refused eval resume changes no file ------------------------------------------------------------------

def test_refused_eval_resume_leaves_the_file_as_it_was(tmp_path):
    out = tmp_path / "eval.jsonl"
    rec = {"type": "trajectory", "game_id": "valid_seen:a/trial_1", "eval_settings": {"seed": 42}}
    out.write_text(json.dumps(rec) + "\n" + json.dumps(rec) + '\n{"type": "traj')      # a repeat and a cut last line
    before = out.read_bytes()
    line = one_line_error(cli("eval", "--base-model", "tiny-qwen3", "--output", out, "--resume", "--seed", "7",
                              "--no-report", cwd=tmp_path), 2)
    assert "--seed 42 (now 7)" in line, line
    assert out.read_bytes() == before
