"""Protocol: tool-call parsing table and the token-level prefix invariant on the Qwen3 and tiny-qwen3 templates."""
import json
from pathlib import Path

import pytest

from alfworld_rl.rl import protocol as P

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def qwen_like_tokenizer(chat_template: str):
    "A small byte-level BPE tokenizer with Qwen's special and tool tokens, carrying `chat_template`."
    from tokenizers import Tokenizer, models, trainers, pre_tokenizers, decoders, AddedToken
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    corpus = [P.SYSTEM_PROMPT, P.format_tool_call("go to countertop 1"), "You arrive at fridge 1. On the fridge 1, you see"]
    tok.train_from_iterator(corpus * 5, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in
                    ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]])
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = chat_template
    return hf


@pytest.fixture(scope="module")
def qwen3_tokenizer():
    return qwen_like_tokenizer((FIXTURES / "qwen3_chat_template.jinja").read_text())


@pytest.fixture(scope="module")
def tiny_tokenizer():
    from transformers import AutoTokenizer
    from alfworld_rl.backends.tiny_model import tiny_qwen3_path
    return AutoTokenizer.from_pretrained(tiny_qwen3_path())


# ---- parser ------------------------------------------------------------------------------------------------
ACTION = "go to fridge 1"
J = lambda obj: "<tool_call>\n" + json.dumps(obj) + "\n</tool_call>"
X = lambda inner, name=P.TOOL_NAME: f"<tool_call>\n<function={name}>\n{inner}</function>\n</tool_call>"
PARAM = lambda k, v: f"<parameter={k}>\n{v}\n</parameter>\n"

TABLE = [
    ("xml", P.format_tool_call(ACTION, "xml"), ACTION),
    ("json", P.format_tool_call(ACTION, "json"), ACTION),
    ("empty think prefix", "<think>\n\n</think>\n\n" + P.format_tool_call(ACTION, "xml"), ACTION),
    ("reasoning before", "The fridge is closed.\n" + P.format_tool_call("OPEN   Fridge 1"), "open fridge 1"),
    ("trailing whitespace", P.format_tool_call(ACTION) + " \n\n", ACTION),
    ("arguments as JSON string", J({"name": P.TOOL_NAME, "arguments": json.dumps({"action": ACTION})}), ACTION),
    ("compact xml", f"<tool_call><function={P.TOOL_NAME}><parameter=action>{ACTION}</parameter></function></tool_call>", ACTION),
    ("no call", "go to fridge 1", None),
    ("two calls", P.format_tool_call(ACTION) + "\n" + P.format_tool_call("look"), None),
    ("trailing text", P.format_tool_call(ACTION) + "\nOK", None),
    ("newline in action xml", X(PARAM("action", "go to\nfridge 1")), None),
    ("newline in action json", J({"name": P.TOOL_NAME, "arguments": {"action": "go\nto fridge 1"}}), None),
    ("wrong tool xml", X(PARAM("action", ACTION), name="alfworld"), None),
    ("wrong tool json", J({"name": "python", "arguments": {"action": ACTION}}), None),
    ("missing parameter xml", X(""), None),
    ("extra parameter xml", X(PARAM("action", ACTION) + PARAM("reason", "x")), None),
    ("wrong parameter name", X(PARAM("command", ACTION)), None),
    ("missing arguments json", J({"name": P.TOOL_NAME}), None),
    ("extra parameter json", J({"name": P.TOOL_NAME, "arguments": {"action": ACTION, "n": 1}}), None),
    ("extra key json", J({"name": P.TOOL_NAME, "arguments": {"action": ACTION}, "id": 3}), None),
    ("empty action", X(PARAM("action", "  ")), None),
    ("non-string action", J({"name": P.TOOL_NAME, "arguments": {"action": ["look"]}}), None),
    ("broken json", "<tool_call>\n{\"name\": \"alfworld_step\", \"arguments\": {\"action\": \"look\"}\n</tool_call>", None),
    ("unclosed", "<tool_call>\n" + json.dumps({"name": P.TOOL_NAME, "arguments": {"action": ACTION}}), None),
    ("plain body", "<tool_call>\ngo to fridge 1\n</tool_call>", None),
    ("close before open", "</tool_call>" + "<tool_call>", None),
]


@pytest.mark.parametrize("name,reply,expected", TABLE, ids=[t[0] for t in TABLE])
def test_parse_table(name, reply, expected):
    call = P.parse_tool_call(reply)
    assert call.valid == (expected is not None), (name, call)
    assert call.action == expected
    assert (call.error is None) == call.valid


def test_table_size():
    assert len(TABLE) >= 15 and sum(e is None for _, _, e in TABLE) >= 10


# ---- prefix invariant --------------------------------------------------------------------------------------
def _ten_turns(tokenizer, with_stop: bool):
    "Extend a prompt over 10 turns; returns the final tokens and every intermediate prompt."
    tt = P.turn_template(tokenizer)
    msgs = P.initial_messages("put a clean apple in fridge 1.", "You are in the middle of a room.",
                              ["go to fridge 1", "go to countertop 1", "look"], max_steps=10)
    prompt = P.render_prompt(tokenizer, msgs)
    prompts, replies = [prompt], []
    for turn in range(10):
        reply = P.format_tool_call(f"go to countertop {turn + 1}", "xml" if turn % 2 else "json")
        completion = P.encode(tokenizer, reply) + (tt.stop_token_ids if with_stop else [])
        content = P.tool_message(P.STATUS_EXECUTED, f"You arrive at countertop {turn + 1}.",
                                 ["look", f"take apple {turn} from countertop 1"], step=turn + 2, max_steps=10)
        msgs += [{"role": "assistant", "content": reply}, {"role": "tool", "content": content}]
        replies.append(reply)
        prompt = tt.extend(prompt, completion, content)
        prompts.append(prompt)
    return tt, msgs, prompts, replies


@pytest.mark.parametrize("which", ["qwen3", "tiny"])
def test_prefix_invariant_ten_turns(which, qwen3_tokenizer, tiny_tokenizer):
    tok = qwen3_tokenizer if which == "qwen3" else tiny_tokenizer
    tt, msgs, prompts, replies = _ten_turns(tok, with_stop=True)
    for a, b in zip(prompts, prompts[1:]):
        assert b[:len(a)] == a                     # every prompt extends the previous one
    final = prompts[-1]
    # with or without the stop token in the sampled tokens, the prompts are the same
    assert _ten_turns(tok, with_stop=False)[2] == prompts
    # the closing is derived from the template: ChatML's <|im_end|> then a newline
    assert tok.convert_ids_to_tokens(tt.closing) == ["<|im_end|>", tok.convert_ids_to_tokens(P.encode(tok, "\n"))[0]]
    # the extended prompt equals the template's own rendering, apart from the header the template drops
    # from earlier assistant turns (Qwen3: the empty think block)
    rendered = P.render_text(tok, msgs, add_generation_prompt=True)
    text = tok.decode(final)
    if tt.dropped_header:
        assert which == "qwen3" and tt.dropped_header == "<think>\n\n</think>\n\n"
        assert text.count(tt.dropped_header) == 11 and rendered.count(tt.dropped_header) == 1
        text = text.replace(tt.dropped_header, "", 10)
    assert text == rendered
    for r in replies: assert r in text


def test_tiny_template_rewrites_nothing(tiny_tokenizer):
    assert P.turn_template(tiny_tokenizer).dropped_header == ""


def test_history_rewriting_template_is_refused(qwen3_tokenizer):
    bad = qwen_like_tokenizer("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                              "{% if loop.last %} (latest){% endif %}<|im_end|>\n{% endfor %}"
                              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    with pytest.raises(P.ChatTemplateError, match="rewrites history"):
        P.TurnTemplate(bad)
    with pytest.raises(P.ChatTemplateError, match="no chat template"):
        P.TurnTemplate(qwen_like_tokenizer(""))


def test_tool_message_and_first_message():
    m = P.first_user_message("put a pencil on desk 1.", "You see a desk 1.", ["go to desk 1", "help"], 1, 50)
    assert "Task: put a pencil on desk 1." in m and "Step 1 of 50" in m and "help" not in m
    assert "Admissible" not in P.first_user_message("t", "o", ["look"], include_admissible=False)
    for status in P.STATUSES:
        msg = P.tool_message(status, "obs", ["look", "help"], step=2, done=status in (P.STATUS_COMPLETED, P.STATUS_FAILED))
        assert msg.startswith(f"Status: {status}") and "help" not in msg
        assert ("- look" in msg) == (status not in (P.STATUS_COMPLETED, P.STATUS_FAILED))
