"""A hosted run that breaks: `train` driven through the PyTRIO adapter (`TrioServiceClient`) over the real local
backend, whose training client fails the way pytrio's does after a network loss (pytrio's own `training.run_broken`
error, every later call on that client refused). The run recovers in-process from its last save, once per save."""
import pytest
import pytrio

from alfworld_rl.backends.service import make_service_client
from alfworld_rl.backends.trio import TrioServiceClient
from alfworld_rl.core import UserError, read_jsonl
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
