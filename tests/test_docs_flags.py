"""The flags the documents name exist on the command they name, and every command's `--help` is readable: flags under
their settings group's heading, one default per flag, and `--base-model` naming the shipped bases."""
import argparse
import functools
import importlib
import re
from pathlib import Path

import pytest

from alfworld_rl.cli import COMMANDS, OneLineParser, main

REPO = Path(__file__).resolve().parent.parent
INLINE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
FLAG = re.compile(r"^--[a-z][a-z0-9-]*$")
CALL_END = ("&&", "||", ";", "|", "#", ">", "2>")


def documents() -> list[Path]:
    "README.md and every markdown file under docs/."
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@functools.cache
def command_parser(name: str) -> argparse.ArgumentParser:
    "The parser of `alfworld-rl <name>`, built as `alfworld_rl.cli.main` builds it."
    module = importlib.import_module(COMMANDS[name][0])
    parser = OneLineParser(prog=f"alfworld-rl {name}", description=COMMANDS[name][1])
    getattr(module, "cli_" + name.replace("-", "_") + "_parser")(parser)
    return parser


def command_flags(name: str) -> set[str]:
    "Every option string of `alfworld-rl <name>` (`--no-x` too where a switch has one)."
    return set(command_parser(name)._option_string_actions)


def _flags_in(tokens) -> list[str]:
    "The `--flag` tokens among `tokens` (`--flag=value` counts as `--flag`); `--set KEY=VALUE` gives `--set KEY` too."
    flags = [t.split("=")[0] for t in tokens if FLAG.match(t.split("=")[0])]
    return flags + [f"--set {v.split('=')[0]}" for t, v in zip(tokens, tokens[1:]) if t == "--set"]


def set_keys(command: str) -> set[str]:
    "The keys `alfworld-rl <command> --set` takes (the mini's: every field of its settings)."
    from dataclasses import fields
    from alfworld_rl.mini.recipe import MiniSettings
    return {f.name for f in fields(MiniSettings)} if command == "mini" else set()


def _calls(code: str) -> list[tuple[int, str, list[str]]]:
    "(line, command, flags) of each `alfworld-rl <command> ...` in a piece of code (line 0: its first), up to the end of its shell command."
    out, logical = [], []                                   # logical: (first line, text) with `\\` continuations joined
    for n, line in enumerate(code.splitlines()):
        if logical and logical[-1][1].endswith("\\"): logical[-1] = (logical[-1][0], logical[-1][1][:-1] + " " + line)
        else: logical.append((n, line))
    for n, line in logical:
        tokens = line.split()
        for i, t in enumerate(tokens):
            if t != "alfworld-rl" or i + 1 == len(tokens): continue
            args = []
            for a in tokens[i + 2:]:
                if a in CALL_END or a.startswith("#"): break
                args.append(a)
            out.append((n, tokens[i + 1], _flags_in(args)))
    return out


def flag_mentions(text: str) -> list[tuple[int, str, str]]:
    """(line, command, flag) of every flag that `text` attributes to a command: in an `alfworld-rl <command> ...`
    example (inline or in a fenced block), in a `--flag` span followed by a list of commands in brackets
    (`` `--context` (`train`, `eval`) ``), and in a table row whose flag cell is followed by a cell of command names."""
    found = []
    line_of = lambda pos: text.count("\n", 0, pos) + 1     # positions in `text` and in `prose` give the same lines
    for m in FENCE.finditer(text):
        for n, command, flags in _calls(m.group(1)):
            found += [(line_of(m.start(1)) + n, command, f) for f in flags]
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)     # the same lines, without the fenced code
    line_of = lambda pos: prose.count("\n", 0, pos) + 1
    for m in INLINE.finditer(prose):
        for _, command, flags in _calls(m.group(1)):
            found += [(line_of(m.start()), command, f) for f in flags]
    bracketed = re.compile(r"`(--[^`]+)`\**\s*\(((?:`[a-z-]+`(?:,\s*)?)+)[;)]")    # (`train`, `sft`; ...)
    for m in bracketed.finditer(prose):
        commands = [c for c in INLINE.findall(m.group(2)) if c in COMMANDS]
        found += [(line_of(m.start()), c, f) for c in commands for f in _flags_in(m.group(1).split())]
    for n, line in enumerate(prose.splitlines(), 1):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))] if line.lstrip().startswith("|") else []
        for cell in cells[1:]:
            names = [w.strip(" `") for w in cell.split(",")]
            if names and all(w in COMMANDS for w in names):
                found += [(n, c, f) for c in names for code in INLINE.findall(cells[0]) for f in _flags_in(code.split())]
    return sorted(set(found))


def unknown_flags(text: str) -> list[str]:
    "`line: alfworld-rl <command> --flag` for each flag `text` attributes to a command that lacks it (or to no command)."
    bad = []
    for line, command, f in flag_mentions(text):
        if command.startswith("<"): continue                  # `alfworld-rl <command> --help`
        if command not in COMMANDS: bad.append(f"{line}: no command {command!r} ({f})")
        elif f.startswith("--set "):
            if f.split()[1].replace("-", "_") not in set_keys(command): bad.append(f"{line}: alfworld-rl {command} {f}")
        elif f not in command_flags(command): bad.append(f"{line}: alfworld-rl {command} {f}")
    return bad


def test_mentions_are_found_and_a_missing_flag_fails():
    page = """Run `alfworld-rl mini --data-seed 3 --bogus-flag` or

```bash
uv run alfworld-rl train --preset quickstart \\
    --no-such-thing 2   # a comment --not-a-flag
```

**`--context full|window`** (`train`, `mini`; more). **`--made-up`** (`eval`). `--x` (in `train` it is y).

| flag | on |
|---|---|
| `--win-reward W` | train, eval |
| `--invented X\\|Y` | sft |

`alfworld-rl <command> --help` and `alfworld-rl frobnicate --x`
"""
    assert flag_mentions("`alfworld-rl mini --set sft_steps=3 --set sft-stepz=3`") == [
        (1, "mini", "--set"), (1, "mini", "--set sft-stepz"), (1, "mini", "--set sft_steps")]
    assert unknown_flags("`alfworld-rl mini --set sft_steps=3 --set sft-stepz=3`") == ["1: alfworld-rl mini --set sft-stepz"]
    assert flag_mentions(page) == sorted([
        (1, "mini", "--data-seed"), (1, "mini", "--bogus-flag"), (4, "train", "--preset"), (4, "train", "--no-such-thing"),
        (8, "train", "--context"), (8, "mini", "--context"), (8, "eval", "--made-up"),
        (12, "train", "--win-reward"), (12, "eval", "--win-reward"), (13, "sft", "--invented"),
        (15, "<command>", "--help"), (15, "frobnicate", "--x")])
    assert unknown_flags(page) == ["1: alfworld-rl mini --bogus-flag", "4: alfworld-rl train --no-such-thing",
                                   "8: alfworld-rl eval --made-up", "8: alfworld-rl mini --context",
                                   "13: alfworld-rl sft --invented", "15: no command 'frobnicate' (--x)"]


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_documented_flags_exist(path):
    assert unknown_flags(path.read_text()) == []


# ---- --help: groups, one default per flag, the named base models ---------------------------------------------------
SETTINGS_COMMANDS = {"train": ("alfworld_rl.runs.train_config", "TrainConfig"), "sft": ("alfworld_rl.runs.sft", "SFTConfig"),
                     "eval": ("alfworld_rl.runs.evaluate", "EvalConfig"), "mini": ("alfworld_rl.mini.recipe", "MiniSettings")}


def help_text(command: str, capsys) -> str:
    "What `alfworld-rl <command> --help` prints (through the console script's entry point)."
    with pytest.raises(SystemExit) as e: main([command, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", SETTINGS_COMMANDS)
def test_help_shows_the_settings_groups(command, capsys):
    "Every settings flag sits under the heading of the group its setting comes from, and --help prints the headings."
    from alfworld_rl.settings import flag, titles_of
    module, name = SETTINGS_COMMANDS[command]
    titles = titles_of(getattr(importlib.import_module(module), name))
    parser = command_parser(command)
    group_of = {a: g.title for g in parser._action_groups for a in g._group_actions}
    placed = {f: group_of[parser._option_string_actions[f]] for f in map(flag, titles) if f in parser._option_string_actions}
    assert len(placed) >= 5 and placed == {flag(n): t for n, t in titles.items() if flag(n) in placed}
    text = help_text(command, capsys)
    headings = set(re.findall(r"^(\S[^\n]*):$", text, re.M)) - {"options"}
    assert set(placed.values()) <= headings and len(headings) >= 3, headings


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_flag_states_at_most_one_default(command, capsys):
    parser = command_parser(command)
    twice = [a.option_strings[0] for a in parser._actions if a.help and a.help.count("default:") > 1]
    assert twice == [] and "(default: None)" not in help_text(command, capsys)


@pytest.mark.parametrize("command", SETTINGS_COMMANDS)
def test_base_model_help_names_the_shipped_bases(command, capsys):
    from alfworld_rl.backends.tiny_model import SHIPPED_MODELS, TINY_MODEL_NAME
    printed = re.sub(r"-\n\s+", "-", help_text(command, capsys))       # argparse may break a name after a hyphen
    printed = " ".join(printed.split())
    entry = printed[printed.rindex("--base-model BASE_MODEL"):][:600]          # its entry, after the usage line
    for name in (*SHIPPED_MODELS, TINY_MODEL_NAME):
        assert re.search(rf"\b{re.escape(name)}\b(?!-)", entry), (name, entry)
    if command == "mini":     # the mini's own default, and the official preset's
        assert "(default: mini-base-4layers; smoke: mini-base; official: official-base-4layers)" in entry
