"""The parts of the README's memory estimate for Qwen3-1.7B at 12K tokens that can be measured on the CPU.

    export MALLOC_MMAP_THRESHOLD_=65536                          # see below
    uv run python benchmarks/memory_12k.py count              # parameters and bytes: base model, default LoRA, KV per token
    uv run python benchmarks/memory_12k.py logits 1000        # peak of the trainer's head over 1000 loss positions
    uv run python benchmarks/memory_12k.py layer 1000         # one real-size decoder layer + LoRA, forward + backward

`count` builds Qwen3-1.7B from its published config (`gpu_check.ARCHS`) on the meta device (no memory, no download)
and adds the LoRA the trainer adds by default (rank 32 on every attention and MLP linear and on `lm_head`).
`logits N` runs `local_trainer.target_logprobs` with its gradient over N loss positions of a 2-layer Qwen3 with the
real 151,936-token vocabulary in bfloat16 (LoRA in float32, as on CUDA) and prints the peak resident memory per
N x V. `layer T` runs one decoder layer of the real size (hidden 2048, intermediate 6144, 16/8 heads) with its LoRA,
forward and backward over T tokens with the flash attention kernel (O(T) memory, like CUDA's): what gradient
checkpointing recomputes per layer in the backward pass. Peaks are the process's resident high-water mark
(`/proc/self/status` VmHWM, reset just before), so run one measurement per process, as here, and with
`MALLOC_MMAP_THRESHOLD_=65536` in the environment: freed tensors then leave the resident set at once (without it
glibc keeps freed heap memory and the peaks read 30-50% high).
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check import ARCHS


def status(key: str) -> int:
    "Bytes of `key` (VmRSS, VmHWM) in this process's /proc status."
    return int(Path("/proc/self/status").read_text().split(key + ":")[1].split()[0]) * 1024


def reset_peak() -> int:
    "Reset the resident high-water mark; the resident bytes now."
    Path("/proc/self/clear_refs").write_text("5")
    return status("VmRSS")


def count() -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from alfworld_rl.backends.local_trainer import add_lora, lora_targets
    cfg = Qwen3Config(**ARCHS["qwen3-1.7b"])
    with torch.device("meta"):
        model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
        n = sum(p.numel() for p in model.parameters())
        b = sum(p.numel() * p.element_size() for p in model.parameters())
        targets = lora_targets(model)
        peft = add_lora(model, 32, 32.0, targets, 0)
    lora = [(name, p) for name, p in peft.named_parameters() if p.requires_grad]
    nl, bl = sum(p.numel() for _, p in lora), sum(p.numel() * p.element_size() for _, p in lora)
    head = sum(p.numel() for name, p in lora if "lm_head" in name)
    kv = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * 2
    print(f"base: {n:,} parameters, {b:,} bytes in bfloat16 (tied embeddings: counted once)")
    print(f"LoRA rank 32 on {targets}: {nl:,} parameters ({head:,} on lm_head), {bl:,} bytes in "
          f"{sorted({str(p.dtype) for _, p in lora})}")
    print(f"KV cache: {kv:,} bytes per token in bfloat16")


def logits(n_loss: int) -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from alfworld_rl.backends.local_trainer import add_lora, lora_targets, target_logprobs
    torch.set_num_threads(1)
    cfg = Qwen3Config(**ARCHS["small"])
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    peft = add_lora(model, 32, 32.0, lora_targets(model), 0).train()
    V, length = cfg.vocab_size, n_loss + 200
    ids = torch.randint(0, V, (length,)).tolist()
    tgt = torch.tensor(ids[1:] + [-100])
    need = torch.zeros(length, dtype=torch.bool)
    need[length - n_loss - 1:length - 1] = True
    base = reset_peak()
    lp = target_logprobs(peft, [ids], [tgt], needed=[need])[0]
    held = status("VmRSS") - base
    (-(lp * need).sum()).backward()
    peak, nv = status("VmHWM") - base, n_loss * V
    print(f"{n_loss} loss positions x {V:,}: held after the forward {held / 1e9:.2f} GB ({held / nv:.1f} B per "
          f"position x vocabulary), peak through the backward {peak / 1e9:.2f} GB ({peak / nv:.1f} B)")


def layer(T: int) -> None:
    from torch.nn.attention import sdpa_kernel, SDPBackend
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from alfworld_rl.backends.local_trainer import add_lora, lora_targets
    torch.set_num_threads(1)
    cfg = Qwen3Config(**dict(ARCHS["qwen3-1.7b"], num_hidden_layers=1, vocab_size=1024))
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    peft = add_lora(model, 32, 32.0, lora_targets(model), 0).train()
    backbone = peft.get_base_model().model
    x = backbone.embed_tokens(torch.randint(0, 1024, (1, T))).detach().requires_grad_(True)  # a layer input with a gradient
    base = reset_peak()
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = backbone(inputs_embeds=x).last_hidden_state
        held = status("VmRSS") - base
        out.float().sum().backward()
    peak = status("VmHWM") - base
    print(f"one layer, {T} tokens: held after the forward {held / 1e9:.3f} GB ({held / T / 1e3:.0f} KB per token), "
          f"peak through the backward {peak / 1e9:.3f} GB ({peak / T / 1e3:.0f} KB per token)")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "count"
    if what == "count": count()
    elif what == "logits": logits(int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
    elif what == "layer": layer(int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
    else: sys.exit(f"unknown measurement {what!r}: use count, logits N or layer T")
