"""Processes that use the local backend end with their own exit status, whichever way they leave.

The sampling client serves requests from a thread that runs torch. Left open at exit (or open when an error
ends a command), that thread used to be killed mid-step and the process aborted with `terminate called without
an active exception` (status 134). The abort is intermittent, so every case runs several times.
"""
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pytrio import ModelInput, SamplingParams

from alfworld_rl.backends.service import make_service_client
from alfworld_rl.backends.local_sampler import SamplerClosed

CLI = str(Path(sys.executable).parent / "alfworld-rl")
REPEATS = 3

SCRIPT = """
import asyncio, sys
from pytrio import ModelInput, SamplingParams
from alfworld_rl.backends.service import make_service_client
svc = make_service_client("local", device="cpu", checkpoint_root=sys.argv[2])
tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=0)
sc = tc.save_weights_and_get_sampling_client()
base = svc.create_sampling_client("tiny-qwen3")
prompt = ModelInput.from_ints(list(range(5, 60)))
print(len(sc.sample(prompt, sampling_params=SamplingParams(max_tokens=4, seed=1)).result().sequences[0].tokens), flush=True)
# requests still decoding when the process leaves, on both clients
pending = [c.sample(prompt, num_samples=4, sampling_params=SamplingParams(max_tokens=500, seed=2)) for c in (sc, base)]
if sys.argv[1] == "raise":
    async def command():
        tasks = [asyncio.create_task(sc.sample_async(prompt, sampling_params=SamplingParams(max_tokens=500, seed=i)))
                 for i in range(8)]
        await asyncio.sleep(0.2)
        raise RuntimeError("the command failed")
    asyncio.run(command())
"""

ABORT_SIGNS = ("terminate called", "Exception in thread", "Fatal Python error", "no running event loop",
               "Event loop is closed")


def run_script(tmp_path, case):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, str(script), case, str(tmp_path / "ckpt")], capture_output=True, text=True,
                          timeout=900)


def assert_no_abort(r):
    assert r.returncode in (0, 1), (r.returncode, r.stderr[-3000:])
    for sign in ABORT_SIGNS: assert sign not in r.stderr, r.stderr[-3000:]


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_clients_left_open_exit_cleanly(tmp_path, repeat):
    r = run_script(tmp_path, "open")
    assert_no_abort(r)
    assert r.returncode == 0 and r.stdout.strip() == "4"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_error_inside_a_command_exits_with_its_own_status(tmp_path, repeat):
    r = run_script(tmp_path, "raise")
    assert_no_abort(r)
    assert r.returncode == 1
    assert r.stderr.count("Traceback") == 1 and r.stderr.rstrip().endswith("RuntimeError: the command failed"), \
        r.stderr[-3000:]


@pytest.mark.parametrize("repeat", range(2))
def test_eval_failing_after_loading_the_model_does_not_abort(small_data_root, tmp_path, repeat):
    "`--output` under a regular file: refused up front (status 2, one line) since outputs are checked first; never an abort."
    (tmp_path / "regular").write_text("")
    r = subprocess.run([CLI, "eval", "--base-model", "tiny-qwen3", "--data-root", str(small_data_root),
                        "--limit-per-split", "1", "--max-episode-steps", "3", "--no-report",
                        "--output", "regular/x.jsonl"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert r.returncode == 2 and "cannot write to regular" in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr[-2000:]


def test_close_and_context_managers(tmp_path):
    "Closing stops the worker threads; pending requests fail with SamplerClosed; later calls are refused."
    prompt = ModelInput.from_ints(list(range(5, 40)))
    before = {t.ident for t in threading.enumerate()}
    with make_service_client("local", device="cpu", checkpoint_root=tmp_path) as svc:
        with svc.create_sampling_client("tiny-qwen3") as sc:
            assert len(sc.sample(prompt, sampling_params=SamplingParams(max_tokens=3, seed=0)).result(60).sequences[0].tokens) == 3
            long = sc.sample(prompt, num_samples=2, sampling_params=SamplingParams(max_tokens=2000, seed=0, stop=[]))
        with pytest.raises(SamplerClosed): long.result(60)
        with pytest.raises(SamplerClosed): sc.sample(prompt, sampling_params=SamplingParams(max_tokens=3))
        tc = svc.create_lora_training_client("tiny-qwen3", rank=4, seed=0)
        sc2 = tc.save_weights_and_get_sampling_client()
    with pytest.raises(SamplerClosed): sc2.sample(prompt, sampling_params=SamplingParams(max_tokens=3))
    with pytest.raises(RuntimeError): tc.optim_step(None)          # the trainer's worker has stopped too
    left = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("local-")]
    assert not left, left
