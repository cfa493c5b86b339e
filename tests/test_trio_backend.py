"""The PyTRIO adapter: its calls checked against a stand-in made of pytrio's own types and validators, and the
missing-key and unreachable-service failures against the real SDK (no network needed)."""
import asyncio
import inspect
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import Future
from types import SimpleNamespace

import numpy as np
import pytest
import pytrio
from pytrio.client.builders.sampling import build_sample_request
from pytrio.client.builders.training import build_trainer_forward_payload, build_trainer_save_payload
from pytrio.client.training_batch import plan_training_batch
from pytrio.errors.base import ValidationError as TrioValidationError
from pytrio.errors.control import ControlAPIError
from pytrio.model.limits import TrainingLimits
from pytrio.types import (APIFuture, ForwardBackwardOutput, OptimStepResponse, SampleResponse, SampleSequence,
                          SaveWeightsForSamplerResponse, SaveWeightsResponse, TensorData)

from alfworld_rl.core import UserError
from alfworld_rl.rl.ppo import trajectory_datum
from alfworld_rl.backends.trio import (TrioSamplingClient, TrioServiceClient, TrioTrainingClient,
                                      make_trio_service_client)

VOCAB = 1000
LIMITS = TrainingLimits(max_batch_size=4, max_tokens_per_request=4096, max_seq_len=2048)
MODELS = ["Qwen/Qwen3.5-4B"]


# ---------------------------------------------------------------- the stand-in (pytrio 0.2.9's surface)

def failed(exc) -> APIFuture:
    "An APIFuture that fails with `exc`, as pytrio's do when a server event fails."
    f = Future(); f.set_exception(exc)
    return APIFuture(f)


class FakeTokenizer:
    "What pytrio needs of a tokenizer to validate ids: its length."
    def __len__(self): return VOCAB


class FakeSampling:
    "pytrio.SamplingClient stand-in: validates like pytrio, answers with deterministic tokens."
    def __init__(self, service, model_id, model_path):
        self.service, self.model_id, self.model_path = service, model_id, model_path

    def sample(self, prompt, num_samples=1, sampling_params=pytrio.SamplingParams(), include_prompt_logprobs=False,
               topk_prompt_logprobs=0, return_text=True):
        self.service.log("sample", prompt=prompt, num_samples=num_samples, sampling_params=sampling_params)
        if not isinstance(prompt, pytrio.ModelInput): raise TypeError("prompt must be a pytrio.ModelInput")
        if not isinstance(sampling_params, pytrio.SamplingParams): raise TypeError("sampling_params must be SamplingParams")
        if prompt.is_empty: raise TrioValidationError("prompt cannot be empty", code="validation.empty_prompt")
        if sampling_params.max_tokens is None or sampling_params.max_tokens <= 0:
            raise TrioValidationError("sampling_params.max_tokens must be greater than 0",
                                      code="validation.invalid_sampling_request")
        build_sample_request(prompt, num_samples=num_samples, sampling_params=sampling_params,       # the wire form
                             include_prompt_logprobs=include_prompt_logprobs,
                             topk_prompt_logprobs=topk_prompt_logprobs, return_text=return_text,
                             return_token_logprobs=True)
        n = min(3, sampling_params.max_tokens)
        seqs = [SampleSequence(tokens=[7 + i] * n, logprobs=[-0.5] * n, text="x" * n, stop_reason="length")
                for i in range(num_samples)]
        return APIFuture.completed(SampleResponse(sequences=seqs, prompt_logprobs=[], topk_prompt_logprobs=[],
                                                  input_tokens=len(prompt), output_tokens=n * num_samples))

    async def sample_async(self, prompt, num_samples=1, sampling_params=pytrio.SamplingParams(),
                           include_prompt_logprobs=False, topk_prompt_logprobs=0, return_text=True):
        return await self.sample(prompt, num_samples, sampling_params, include_prompt_logprobs,
                                 topk_prompt_logprobs, return_text)

    def get_tokenizer(self): return FakeTokenizer()


class FakeTraining:
    "pytrio.TrainingClient stand-in: runs pytrio's own planner and payload builders on every call."
    def __init__(self, service, model_id, rank, seed, step=0, optimizer_steps=0):
        self.service, self.model_id, self.model_alias, self.rank, self.seed = service, model_id, model_id, rank, seed
        self.training_run_cuid = f"run_fake{len(service.runs):08d}"
        self.step, self.optimizer_steps, self.started, self.pending_grads = step, optimizer_steps, False, 0
        service.runs.append(self)

    def _submit(self, name):
        if self.service.broken: raise pytrio.PyTrioError("training run is broken", code="training.run_broken")
        self.started = True

    def forward_backward(self, data, loss_fn="cross_entropy", loss_fn_config=None, auto_shift=False):
        self.service.log("forward_backward", data=data, loss_fn=loss_fn, loss_fn_config=loss_fn_config,
                         auto_shift=auto_shift)
        plan = plan_training_batch(data, loss_fn=loss_fn, auto_shift=auto_shift, limits=LIMITS,
                                   tokenizer_vocab_size=VOCAB)
        for chunk in plan.chunks: build_trainer_forward_payload(chunk, loss_fn_config, auto_shift, plan.totals)
        self._submit("forward_backward")
        if self.service.fail_next_event: return failed(self.service.fail_next_event)
        outs, loss_sum = [], 0.0
        for d in data:   # on-policy: the learner's logprobs equal the rollout's, so every ratio is 1
            old = d.loss_fn_inputs["logprobs"].to_numpy()
            loss_sum += float(-(d.loss_fn_inputs["advantages"].to_numpy()).sum())
            outs.append({"logprobs": TensorData.from_numpy(old.astype(np.float32))})
        n = plan.totals.total_active_tokens
        self.pending_grads += 1
        return APIFuture.completed(ForwardBackwardOutput(loss_fn_outputs=outs, metrics={
            "loss_sum": loss_sum, "loss_mean": loss_sum / n, "token_count": float(n)}))

    async def forward_backward_async(self, data, loss_fn="cross_entropy", loss_fn_config=None, auto_shift=False):
        return self.forward_backward(data, loss_fn, loss_fn_config, auto_shift)

    def optim_step(self, adam_params):
        self.service.log("optim_step", adam_params=adam_params)
        if not isinstance(adam_params, pytrio.AdamParams): raise TypeError("adam_params must be pytrio.AdamParams")
        self._submit("optim_step")
        self.step += 1; self.optimizer_steps += 1; self.pending_grads = 0
        return APIFuture.completed(OptimStepResponse(metrics={"step": float(self.step)}))

    def save_state(self, name, ttl_seconds=None, overwrite=False):
        payload = build_trainer_save_payload(name, ttl_seconds, overwrite=overwrite)
        self.service.log("save_state", name=payload.name)
        self._submit("save_state")
        path = f"trio://{self.training_run_cuid}/weights/{payload.name}"
        self.service.states[path] = dict(model=self.model_id, rank=self.rank, seed=self.seed, step=self.step,
                                         optimizer_steps=self.optimizer_steps)
        return APIFuture.completed(SaveWeightsResponse(path=path, model=self.model_id, size=1234))

    def save_weights_for_sampler(self, name, ttl_seconds=None):
        payload = build_trainer_save_payload(name, ttl_seconds)
        self.service.log("save_weights_for_sampler", name=payload.name)
        self._submit("save_weights_for_sampler")
        path = f"trio://{self.training_run_cuid}/sampler_weights/{payload.name}"
        self.service.samplers.add(path)
        return APIFuture.completed(SaveWeightsForSamplerResponse(path=path, model=self.model_id, size=99))

    def save_weights_and_get_sampling_client(self):
        path = self.save_weights_for_sampler(f"temp-sampling-{self.step}").result().path
        return FakeSampling(self.service, self.model_id, path)

    def create_sampling_client(self, model_path):
        return self.service.create_sampling_client(self.model_alias, model_path)

    def load_state(self, path):
        return self._load(path, optimizer=False)

    def load_state_with_optimizer(self, path):
        return self._load(path, optimizer=True)

    def _load(self, path, optimizer):
        if self.started:
            raise TrioValidationError("load_state cannot be called after training has started. "
                                      "Call load_state before the first training operation.",
                                      code="validation.already_initialized")
        state = self.service.states[path]
        self.step = state["step"]
        if optimizer: self.optimizer_steps = state["optimizer_steps"]
        return APIFuture.completed({"path": path})

    def get_tokenizer(self): return FakeTokenizer()


class FakeService:
    "pytrio.ServiceClient stand-in; `fail[name]` makes the named call raise that pytrio error."
    def __init__(self):
        self.calls, self.runs, self.states, self.samplers, self.fail = [], [], {}, set(), {}
        self.broken, self.fail_next_event = False, None

    def log(self, call, **kw): self.calls.append((call, kw))

    def _maybe_fail(self, name):
        if name in self.fail: raise self.fail[name]

    def get_supported_models(self): return list(MODELS)

    def create_lora_training_client(self, base_model, rank=32, seed=None, train_mlp=True, train_attn=True,
                                    train_unembed=True):
        self.log("create_lora_training_client", base_model=base_model, rank=rank, seed=seed)
        self._maybe_fail("create_lora_training_client")
        if rank not in range(4, 65):
            raise TrioValidationError(f"rank must be in [4, 64]. Got {rank}", code="validation.invalid_lora_rank")
        if base_model not in MODELS:
            raise ControlAPIError("model not found", status_code=404, code="model_not_found")
        return FakeTraining(self, base_model, rank, seed)

    def create_sampling_client(self, base_model, model_path=None):
        self.log("create_sampling_client", base_model=base_model, model_path=model_path)
        self._maybe_fail("create_sampling_client")
        if base_model not in MODELS:
            raise ControlAPIError("model not found", status_code=404, code="model_not_found")
        if model_path is not None and model_path not in self.samplers:
            raise ControlAPIError("checkpoint not found", status_code=404, code="checkpoint_not_found")
        return FakeSampling(self, base_model, model_path)

    def _from_state(self, path, optimizer):
        self.log("create_training_client_from_state", path=path, optimizer=optimizer)
        if path not in self.states:
            raise ControlAPIError("checkpoint not found", status_code=404, code="checkpoint_not_found")
        s = self.states[path]
        return FakeTraining(self, s["model"], s["rank"], s["seed"], step=s["step"],
                            optimizer_steps=s["optimizer_steps"] if optimizer else 0)

    def create_training_client_from_state(self, path): return self._from_state(path, optimizer=False)
    def create_training_client_from_state_with_optimizer(self, path): return self._from_state(path, optimizer=True)


def _params(fn):
    "Parameter names, kinds and defaults of `fn` (annotations left out)."
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


# ---------------------------------------------------------------- the stand-in and the adapter match pytrio

PAIRS = [(FakeService, pytrio.ServiceClient, TrioServiceClient),
         (FakeTraining, pytrio.TrainingClient, TrioTrainingClient),
         (FakeSampling, pytrio.SamplingClient, TrioSamplingClient)]


@pytest.mark.parametrize("fake,real,adapter", PAIRS, ids=lambda c: c.__name__)
def test_signatures_match_pytrio(fake, real, adapter):
    for name, fn in vars(fake).items():
        if name.startswith("_") or name == "log" or not callable(fn): continue
        assert _params(fn) == _params(getattr(real, name)), f"stand-in {fake.__name__}.{name} differs from pytrio"
    for name, fn in inspect.getmembers(adapter, callable):
        if name.startswith("_") or name == "close": continue       # close(): a documented no-op pytrio lacks
        assert hasattr(real, name), f"{adapter.__name__}.{name} is not a pytrio {real.__name__} method"
        ours, theirs = _params(fn), _params(getattr(real, name))
        if name in ("save_weights_and_get_sampling_client", "save_weights_and_get_sampling_client_async"):
            ours = [p for p in ours if p[0] != "name"]               # the accepted-and-ignored old `name`
        if adapter is TrioServiceClient and name == "create_sampling_client":
            ours = [(n, k, inspect.Parameter.empty if n == "base_model" else d) for n, k, d in ours]
        assert ours == theirs, f"{adapter.__name__}.{name}{ours} != pytrio {theirs}"


# ---------------------------------------------------------------- one training update through the adapter

def make_datums(n=3, adv=(1.0, -0.5, 0.25)):
    "PPO datums from hand-made multi-turn trajectories, as the ppo module builds them."
    out = []
    for i in range(n):
        tokens = [1, 2, 3, 40 + i, 41, 42, 5, 6, 43, 44]
        mask = [False] * 3 + [True] * 3 + [False] * 2 + [True] * 2
        lps = [0.0 if not m else -0.3 for m in mask]
        out.append(trajectory_datum(tokens, lps, mask, adv[i % len(adv)]))
    return out


def test_one_update_through_the_adapter():
    fake = FakeService()
    svc = TrioServiceClient(fake, base_model="Qwen/Qwen3.5-4B")
    tc = svc.create_lora_training_client("Qwen/Qwen3.5-4B", rank=32, seed=7)
    assert isinstance(tc, TrioTrainingClient) and len(tc.get_tokenizer()) == VOCAB
    assert tc.training_run_cuid.startswith("run_")                      # attributes pass through
    sc = tc.save_weights_and_get_sampling_client()
    assert isinstance(sc, TrioSamplingClient)
    sp = pytrio.SamplingParams(max_tokens=16, temperature=1.0, top_p=1.0, stop=["<|im_end|>"])
    resp = sc.sample(pytrio.ModelInput.from_ints([1, 2, 3]), num_samples=4, sampling_params=sp).result()
    assert len(resp.sequences) == 4 and resp.sequences[0].logprobs == [-0.5] * 3
    datums = make_datums()
    fb = tc.forward_backward(datums, "ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2})
    opt = tc.optim_step(pytrio.AdamParams(learning_rate=1e-6, beta1=0.9, beta2=0.95, grad_clip_norm=1.0))
    out, o = fb.result(), opt.result()
    assert [len(x["logprobs"].tolist()) for x in out.loss_fn_outputs] == [9, 9, 9]
    assert out.metrics["token_count"] == 27 and o.metrics["step"] == 1.0
    state = tc.save_state("demo-step-000001").result().path
    sampler = tc.save_weights_for_sampler("demo-step-000001").result().path
    assert state.startswith("trio://run_") and "/sampler_weights/" in sampler
    sc2 = svc.create_sampling_client("Qwen/Qwen3.5-4B", model_path=sampler)
    assert sc2.model_path == sampler
    names = [c[0] for c in fake.calls]
    assert names == ["create_lora_training_client", "save_weights_for_sampler", "sample", "forward_backward",
                     "optim_step", "save_state", "save_weights_for_sampler", "create_sampling_client"]
    fb_call = fake.calls[3][1]
    assert fb_call["loss_fn"] == "ppo" and fb_call["loss_fn_config"] == {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
    assert all(isinstance(d, pytrio.Datum) for d in fb_call["data"])
    assert fake.calls[0][1] == {"base_model": "Qwen/Qwen3.5-4B", "rank": 32, "seed": 7}
    tc.close()                                                            # accepted, does nothing


def test_async_twins_keep_pytrio_await_semantics():
    svc = TrioServiceClient(FakeService())
    tc = svc.create_lora_training_client("Qwen/Qwen3.5-4B")
    sc = svc.create_sampling_client("Qwen/Qwen3.5-4B")

    async def go():
        fut = await tc.forward_backward_async(make_datums(), "ppo")      # first await: submitted
        out = await fut                                                  # second await: the result
        resp = await sc.sample_async(pytrio.ModelInput.from_ints([1, 2]), 2, pytrio.SamplingParams(max_tokens=2))
        return out, resp

    out, resp = asyncio.run(go())
    assert len(out.loss_fn_outputs) == 3 and len(resp.sequences) == 2


def test_resume_from_state_with_optimizer():
    fake = FakeService()
    svc = TrioServiceClient(fake)
    tc = svc.create_lora_training_client("Qwen/Qwen3.5-4B", rank=16, seed=3)
    for _ in range(2):
        tc.forward_backward(make_datums(), "ppo").result(); tc.optim_step(pytrio.AdamParams(learning_rate=1e-6)).result()
    path = tc.save_state("run-step-000002").result().path
    resumed = svc.create_training_client_from_state_with_optimizer(path)
    assert isinstance(resumed, TrioTrainingClient)
    assert (resumed.step, resumed.optimizer_steps, resumed.rank, resumed.seed) == (2, 2, 16, 3)
    fresh_opt = svc.create_training_client_from_state(path)
    assert (fresh_opt.step, fresh_opt.optimizer_steps) == (2, 0)
    # load_state is only allowed before the first training call, as in pytrio
    tc2 = svc.create_lora_training_client("Qwen/Qwen3.5-4B", rank=16)
    tc2.load_state_with_optimizer(path).result()
    assert tc2.optimizer_steps == 2
    tc2.forward_backward(make_datums(), "ppo").result()
    with pytest.raises(UserError, match="validation.already_initialized"):
        tc2.load_state(path)
    with pytest.raises(UserError, match="checkpoint_not_found"):
        svc.create_training_client_from_state_with_optimizer("trio://run_nope/weights/x")


def test_bad_calls_are_refused_by_pytrio_validators():
    svc = TrioServiceClient(FakeService())
    tc = svc.create_lora_training_client("Qwen/Qwen3.5-4B")
    bad = pytrio.Datum(model_input=pytrio.ModelInput.from_ints([1, 2, 3]),
                       loss_fn_inputs={"target_tokens": [2.0, 3.0, 4.0], "logprobs": [0.0] * 3, "advantages": [1.0] * 3})
    with pytest.raises(ValueError, match="target_tokens must have dtype int64"):
        tc.forward_backward([bad], "ppo")
    with pytest.raises(ValueError, match="Unsupported loss function type"):
        tc.forward_backward(make_datums(), "grpo")
    with pytest.raises(UserError, match="token ID is outside the tokenizer vocabulary"):
        tc.forward_backward([trajectory_datum([1, 2, VOCAB + 5], [0, -1.0, -1.0], [False, True, True], 1.0)], "ppo")
    with pytest.raises(UserError, match="max_tokens must be greater than 0"):
        svc.create_sampling_client("Qwen/Qwen3.5-4B").sample(pytrio.ModelInput.from_ints([1]), 1, pytrio.SamplingParams())
    with pytest.raises(UserError, match="checkpoint name must match"):
        tc.save_state("step/1")
    with pytest.raises(Exception, match="Extra inputs are not permitted"):
        pytrio.AdamParams(learning_rate=1e-6, betas=(0.9, 0.95))


# ---------------------------------------------------------------- pytrio error codes become readable messages

def test_error_codes_become_user_errors():
    fake = FakeService()
    svc = TrioServiceClient(fake, base_model="Qwen/Qwen3.5-4B")
    with pytest.raises(UserError, match=r"does not serve the model 'Qwen/Nope-1B'.*supported models: Qwen/Qwen3.5-4B") as e:
        svc.create_lora_training_client("Qwen/Nope-1B")
    assert e.value.status == 1 and isinstance(e.value.__cause__, ControlAPIError)
    with pytest.raises(UserError, match=r"--lora-rank must be an integer in \[4, 64\]") as e:
        svc.create_lora_training_client("Qwen/Qwen3.5-4B", rank=2)
    assert e.value.status == 2
    fake.fail["create_lora_training_client"] = ControlAPIError("insufficient balance", status_code=402,
                                                               code="billing_insufficient_balance")
    with pytest.raises(UserError, match="workspace balance is insufficient"):
        svc.create_lora_training_client("Qwen/Qwen3.5-4B")
    fake.fail["create_sampling_client"] = ControlAPIError("key expired", status_code=401, code="api_key_expired")
    with pytest.raises(UserError, match=r"API key has expired.*trio login --relogin"):
        svc.create_sampling_client(model_path=None)
    del fake.fail["create_lora_training_client"]
    tc = svc.create_lora_training_client("Qwen/Qwen3.5-4B")
    # a server-side failure that surfaces only at .result()
    fake.fail_next_event = pytrio.PyTrioError("training run is broken", code="training.run_broken")
    fut = tc.forward_backward(make_datums(), "ppo")
    with pytest.raises(UserError, match=r"training run is broken.*--resume"):
        fut.result()
    fake.fail_next_event = None
    # and a run pytrio has marked broken refuses every later call
    fake.broken = True
    with pytest.raises(UserError, match="--resume"):
        tc.optim_step(pytrio.AdamParams(learning_rate=1e-6))

    async def awaited():
        return await (await tc.forward_backward_async(make_datums(), "ppo"))
    with pytest.raises(UserError, match="--resume"):
        asyncio.run(awaited())


def test_sampling_without_a_base_model_is_a_flag_error():
    with pytest.raises(UserError, match="--base-model is required") as e:
        TrioServiceClient(FakeService()).create_sampling_client()
    assert e.value.status == 2


# ---------------------------------------------------------------- the real SDK: no key, no service

PROBE = """
import json, sys, time
from alfworld_rl.core import UserError
from alfworld_rl.backends.trio import make_trio_service_client
t = time.perf_counter()
try:
    make_trio_service_client(**json.loads(sys.argv[1]))
    out = {"error": None}
except UserError as e:
    out = {"error": str(e), "status": e.status}
out["elapsed"] = time.perf_counter() - t
print(json.dumps(out))
"""


def probe(tmp_path, env_extra: dict, kwargs: dict | None = None, timeout: float = 120) -> dict:
    "Run `make_trio_service_client(**kwargs)` in a fresh process with an empty home and `env_extra`."
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTRIO_", "ALFWORLD_RL_TRIO_"))}
    env.update(HOME=str(tmp_path), **env_extra)
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(kwargs or {})], env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def test_missing_key_says_run_trio_login(tmp_path):
    out = probe(tmp_path, {})
    assert out["error"] == ("No PyTRIO API key found: run `trio login` (or set PYTRIO_API_KEY), "
                            "or train offline with `--backend local`.")
    assert out["elapsed"] < 5


def test_unreachable_service_fails_fast_via_environment(tmp_path):
    port = closed_port()
    out = probe(tmp_path, {"PYTRIO_API_KEY": "sk-not-a-real-key", "PYTRIO_BASE_URL": f"http://127.0.0.1:{port}",
                           "ALFWORLD_RL_TRIO_RETRY_TIMEOUT": "2"})
    assert out["error"].startswith(f"Cannot reach the PyTRIO service at http://127.0.0.1:{port}")
    assert "retrying for 2 s" in out["error"] and "ALFWORLD_RL_TRIO_RETRY_TIMEOUT" in out["error"]
    assert 1.5 < out["elapsed"] < 20


def test_bad_timeout_setting_is_a_flag_error(monkeypatch):
    from pytrio.config.config import configuration
    before = configuration.model_dump()
    monkeypatch.setenv("ALFWORLD_RL_TRIO_RETRY_TIMEOUT", "-3")
    with pytest.raises(UserError, match=r"^\$ALFWORLD_RL_TRIO_RETRY_TIMEOUT must be a number of seconds > 0 \(got '-3'\)$") as e:
        make_trio_service_client(api_key="sk-unused")
    assert e.value.status == 2 and configuration.model_dump() == before     # refused before changing anything


@pytest.mark.slow
def test_unreachable_service_with_default_timeouts_fails_within_30s(tmp_path):
    port = closed_port()
    out = probe(tmp_path, {}, {"api_key": "sk-not-a-real-key", "base_url": f"http://127.0.0.1:{port}"})
    assert out["error"].startswith("Cannot reach the PyTRIO service") and "retrying for 15 s" in out["error"]
    assert out["elapsed"] < 30
