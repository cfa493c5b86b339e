"""tiny-qwen3: the cached build, the chat template's prefix property at token level, concurrent builds."""
import json
import subprocess
import sys

import pytest

from alfworld_rl.backends.tiny_model import (EXAMPLE_TOOL, SPECIAL_TOKENS, TINY_RECIPE, TOOL_TOKENS, load_tiny_qwen3,
                                    render_chat, tiny_qwen3_path, tool_call_message)


@pytest.fixture(scope="module")
def tiny():
    return load_tiny_qwen3()


def conversation(turns: int) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a household robot."},
            {"role": "user", "content": "Your task is to: put two cd in safe.\nYou see a safe 1 and a desk 2."}]
    for i in range(turns):
        msgs += [tool_call_message(f"go to desk {i + 1}", content="" if i % 2 else "Let me look."),
                 {"role": "tool", "content": f"Result: valid action.\nObservation: You arrive at desk {i + 1}. 你好"}]
    return msgs


@pytest.mark.parametrize("thinking", [False, None])
def test_token_level_prefix_extension(tiny, thinking):
    """Every shorter conversation encodes to a token prefix of the longer one (no earlier turn is rewritten)."""
    _, tok = tiny
    msgs = conversation(4)
    kw = {} if thinking is None else {"enable_thinking": thinking}
    full = tok.apply_chat_template(msgs, tools=[EXAMPLE_TOOL], tokenize=False, **kw)
    full_ids = tok.encode(full, add_special_tokens=False)
    for k in range(2, len(msgs)):
        part = tok.apply_chat_template(msgs[:k], tools=[EXAMPLE_TOOL], tokenize=False, **kw)
        ids = tok.encode(part, add_special_tokens=False)
        assert full_ids[: len(ids)] == ids, k
        if msgs[k]["role"] == "assistant":      # generation prompt + completion + <|im_end|>\n == next rendering
            gen = tok.apply_chat_template(msgs[:k], tools=[EXAMPLE_TOOL], tokenize=False, add_generation_prompt=True, **kw)
            nxt = tok.apply_chat_template(msgs[: k + 1], tools=[EXAMPLE_TOOL], tokenize=False, **kw)
            assert nxt.startswith(gen) and nxt.endswith("</tool_call><|im_end|>\n")
    assert full == render_chat(msgs, tools=[EXAMPLE_TOOL], enable_thinking=thinking)


def test_tool_call_format_and_tokens(tiny):
    _, tok = tiny
    text = tok.apply_chat_template(conversation(1)[:3], tokenize=False, enable_thinking=False)
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nLet me look.\n<tool_call>\n<function=alfworld_step>\n"
                         "<parameter=action>\ngo to desk 1\n</parameter>\n</function>\n</tool_call><|im_end|>\n")
    for t in SPECIAL_TOKENS + TOOL_TOKENS:
        assert len(tok.encode(t, add_special_tokens=False)) == 1
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


def test_cache_holds_current_recipe(tiny):
    model, tok = tiny
    info = json.loads((tiny_qwen3_path() / "tiny_qwen3.json").read_text())
    assert info["recipe"] == TINY_RECIPE and info["vocab_size"] == len(tok) == model.config.vocab_size
    assert model.config.model_type == "qwen3" and model.config.eos_token_id == tok.eos_token_id


@pytest.mark.slow
def test_concurrent_builds_agree(tmp_path):
    """Two processes building into an empty cache at once both succeed and leave one complete build."""
    env = {"ALFWORLD_RL_CACHE": str(tmp_path)}
    code = "from alfworld_rl.backends.tiny_model import tiny_qwen3_path; print(tiny_qwen3_path())"
    import os
    procs = [subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env}, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1] == str(tmp_path / "tiny-qwen3")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["tiny-qwen3"]      # no temporary directories left
    assert (tmp_path / "tiny-qwen3" / "model.safetensors").read_bytes() == (tiny_qwen3_path() / "model.safetensors").read_bytes()
