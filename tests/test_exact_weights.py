"""The sampler of update k computes with exactly the trainer's weights, in float32 and in bfloat16.

The old sampler merged the LoRA into a copy of the base weights in the run's dtype; in bfloat16 most of a
small-learning-rate delta fell below the weights' resolution and was rounded away, so rollouts kept coming
from (nearly) the base model. Here a one-layer 1024-wide Qwen3 with random weights is trained in bfloat16
with PPO at a small learning rate to raise one continuation; the sampler's logprobs of that continuation must
move with the learner's.
"""
import pytest
import torch
from pytrio import AdamParams, Datum, ModelInput

from alfworld_rl.backends.service import make_service_client
from alfworld_rl.backends.tiny_model import tiny_qwen3_path

CLIP = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}


@pytest.fixture(scope="module")
def wide_model(tmp_path_factory):
    "A one-layer, 1024-wide Qwen3 with random weights and the tiny tokenizer, saved as a model directory."
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
    out = tmp_path_factory.mktemp("wide")
    tok = AutoTokenizer.from_pretrained(tiny_qwen3_path())
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=1024, intermediate_size=2048, num_hidden_layers=1,
                      num_attention_heads=8, num_key_value_heads=4, head_dim=128, tie_word_embeddings=False,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    Qwen3ForCausalLM(cfg).save_pretrained(out); tok.save_pretrained(out)
    return str(out)


def datum(prompt, continuation, old, advantage=1.0):
    tokens = prompt + continuation
    n = len(prompt) - 1
    return Datum(model_input=ModelInput.from_ints(tokens[:-1]), loss_fn_inputs={
        "target_tokens": torch.tensor(tokens[1:]), "logprobs": torch.tensor([0.0] * n + list(old)),
        "advantages": torch.tensor([0.0] * n + [advantage] * len(continuation))})


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_sampler_logprobs_move_with_the_learner(wide_model, tmp_path, dtype):
    with make_service_client("local", device="cpu", dtype=dtype, checkpoint_root=tmp_path) as svc:
        tc = svc.create_lora_training_client(wide_model, rank=32, seed=0)
        prompt, cont = list(range(10, 40)), list(range(200, 216))
        full = ModelInput.from_ints(prompt + cont)

        def sampler_lp():
            with tc.save_weights_and_get_sampling_client() as sc:
                return sc.compute_logprobs(full).result(120)[-len(cont):]

        start = sampler_lp()
        learner = []
        for _ in range(12):
            old = sampler_lp()                   # the rollout's logprobs come from the sampler of this update
            out = tc.forward_backward([datum(prompt, cont, old)], "ppo", CLIP).result(120)
            learner.append(out.loss_fn_outputs[0]["logprobs"].tolist()[-len(cont):])
            m = out.metrics
            # the training pass sees what the sampler saw: the ratio starts at 1 on every sampled token
            assert m["train/sampled_tokens"] == len(cont)
            assert m["train/logprob_diff_abs_mean"] < 0.02, m
            assert abs(m["train/ratio_mean"] - 1) < 0.02 and m["train/clip_fraction"] == 0.0, m
            tc.optim_step(AdamParams(learning_rate=2e-5, beta1=0.9, beta2=0.95, grad_clip_norm=1.0)).result(120)
        end = sampler_lp()
        learner_end = tc.forward([datum(prompt, cont, end)], "ppo", CLIP).result(120)
        learner_end = learner_end.loss_fn_outputs[0]["logprobs"].tolist()[-len(cont):]
    learner_gain, sampler_gain = sum(learner_end) - sum(learner[0]), sum(end) - sum(start)
    assert learner_gain > 0.5, learner_gain                                  # the update did something
    assert abs(sampler_gain - learner_gain) < 0.15 * learner_gain, (sampler_gain, learner_gain)


def merged_in_run_dtype(tc):
    "What the sampler used to serve: a copy of the model with the LoRA merged into the base weights in the run's dtype."
    import copy
    with torch.no_grad(): return copy.deepcopy(tc.peft).merge_and_unload().eval()


def test_small_lora_delta_reaches_the_sampler_in_bfloat16(wide_model, tmp_path):
    "A LoRA delta below bfloat16's resolution of the base weights: the sampler sees it, a bf16 merge would not."
    with make_service_client("local", device="cpu", dtype="bfloat16", checkpoint_root=tmp_path) as svc:
        tc = svc.create_lora_training_client(wide_model, rank=32, seed=0)
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():                      # what a few updates at a small learning rate leave in B
            for name, p in tc.peft.named_parameters():
                if "lora_B" in name: p.copy_(1e-4 * torch.randn(p.shape, generator=g))
        prompt, cont = list(range(10, 40)), list(range(200, 216))
        d = datum(prompt, cont, [0.0] * len(cont))
        learner = torch.tensor(tc.forward([d], "ppo", CLIP).result(120).loss_fn_outputs[0]["logprobs"].tolist()[-len(cont):])
        with tc.save_weights_and_get_sampling_client() as sc:
            sampler = torch.tensor(sc.compute_logprobs(ModelInput.from_ints(prompt + cont)).result(120)[-len(cont):])
        with svc.create_sampling_client(wide_model) as base_sc:
            base = torch.tensor(base_sc.compute_logprobs(ModelInput.from_ints(prompt + cont)).result(120)[-len(cont):])
        merged = merged_in_run_dtype(tc)
        with torch.no_grad():
            lp = merged(input_ids=torch.tensor([prompt + cont])).logits[0, :-1].float().log_softmax(-1)
        old_way = lp.gather(1, torch.tensor(prompt + cont)[1:, None])[-len(cont):, 0]
    effect = (learner - base).abs().mean()
    assert effect > 0.002, effect                                  # the delta matters to the learner
    assert (sampler - learner).abs().mean() < 0.2 * effect, ((sampler - learner).abs().mean(), effect)
    assert (old_way - learner).abs().mean() > 0.5 * effect, ((old_way - learner).abs().mean(), effect)   # the old sampler lagged
