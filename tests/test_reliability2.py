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
