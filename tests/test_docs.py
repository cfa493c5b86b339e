"""The reader's documents: every relative link and file reference resolves inside the repository, the README stays
short, and its quick-start command is the preset it names."""
import dataclasses
import json
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOP = ("nbs", "docs", "tests", "benchmarks", "alfworld_rl", "models", "tools", ".ci")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")


def documents() -> list[tuple[Path, str]]:
    "(path, prose) of the README, CONTRIBUTING, every page in docs/ and the markdown cells of every notebook."
    docs = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
    out = [(p, p.read_text()) for p in docs]
    for nb in sorted((REPO / "nbs").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts: continue
        cells = json.loads(nb.read_text())["cells"]
        text = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                         for c in cells if c["cell_type"] == "markdown")
        out.append((nb, text))
    return out


def broken_references(path: Path, text: str) -> list[str]:
    "The links (relative to `path`) and repository paths in backticks (relative to the root) that name nothing."
    bad = []
    for target in LINK.findall(text):
        if re.match(r"^(https?:|mailto:|#)", target): continue
        if not (path.parent / target.split("#")[0]).resolve().exists(): bad.append(f"link {target}")
    for token in CODE.findall(text):
        name = token.rstrip(".,:;)")
        if not name.startswith(tuple(f"{t}/" for t in TOP)) or any(c in name for c in "<>*{}|") or "..." in name: continue
        name = name.split("::")[0].split(":")[0]                      # tests/x.py::test_y, file.py:123
        if not (REPO / name).exists(): bad.append(f"file {name}")
    return bad


@pytest.mark.parametrize("path, text", documents(), ids=lambda x: str(x.relative_to(REPO)) if isinstance(x, Path) else "")
def test_references_resolve(path, text):
    assert broken_references(path, text) == []


def test_a_broken_reference_is_found(tmp_path):
    page = tmp_path / "page.md"
    assert broken_references(page, "[x](missing.md) and `nbs/no_such.ipynb` and `runs/<name>/x`") == \
        ["link missing.md", "file nbs/no_such.ipynb"]


def test_readme_is_short_and_says_what_and_status_first():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:25])
    assert "ALFWorld" in first_screen and "**Status.**" in first_screen
    first_40 = "\n".join(lines[:40])
    assert "## Install" in first_40 and "uv run alfworld-rl train --preset quickstart" in first_40
    status = next(i for i, l in enumerate(lines) if l.startswith("**Status.**"))
    assert "" in lines[status + 1:status + 4], "the status is at most three lines"


def test_the_quick_start_is_the_preset_it_names():
    "The README's quick-start line names a preset of `train`, and the flags the README says it stands for are that preset."
    from alfworld_rl.runs.train_config import TRAIN_PRESETS, add_train_arguments, given_settings
    import argparse
    readme = (REPO / "README.md").read_text()
    [preset] = re.findall(r"^uv run alfworld-rl train --preset (\w+)\b", readme, re.M)
    assert preset in TRAIN_PRESETS
    stands_for = re.search(rf"`--preset {preset}` stands for `([^`]+)`", readme, re.S).group(1)
    parser = add_train_arguments(argparse.ArgumentParser())
    assert given_settings(parser.parse_args(shlex.split(stands_for))) == TRAIN_PRESETS[preset]
    assert given_settings(parser.parse_args(["--preset", preset])) == TRAIN_PRESETS[preset]


def _status(readme: str) -> str:
    "The README's status paragraph, joined into one line."
    para = readme.split("**Status.**", 1)[1].split("\n\n", 1)[0]
    return " ".join(para.split())


def _readme_block(text: str, start: str, end: str) -> str:
    "What lies between the README's `start` and `end` markers."
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def test_the_readme_official_table_is_the_committed_run():
    "The README's official table is what docs/official/official_table.py makes of the committed run's results."
    import importlib.util
    spec = importlib.util.spec_from_file_location("official_table", REPO / "docs/official/official_table.py")
    table = importlib.util.module_from_spec(spec); spec.loader.exec_module(table)
    results = json.loads((REPO / "docs/official/run6/results.json").read_text())   # run 6: the recipe as the preset has it
    readme = (REPO / "README.md").read_text()
    assert _readme_block(readme, table.README_START, table.README_END) == table.readme_table(results["rows"], results["settings"])
    status = _status(readme)
    sft = results["rows"]["SFT seed 0 (T = 1)"]["eval/valid_unseen/success_rate"]
    assert f"{100 * sft:.1f}% of `valid_unseen`" in status, status
    ppo = results["rows"]["PPO seed 0 (T = 1)"]["eval/valid_unseen/success_rate"]
    assert f"{100 * ppo:.1f}% after PPO" in status, status
    assert f"`{table.result_line(results['headline'])}`" in readme, "the README's result line is not the run's"
    from alfworld_rl.mini.recipe import OFFICIAL, MiniSettings
    preset, default = (json.loads(json.dumps(dataclasses.asdict(s))) for s in (OFFICIAL, MiniSettings()))
    ran = results["settings"]
    differ = [k for k, v in preset.items() if k not in ("seeds", "data_root", "eval_beside") and ran.get(k, default[k]) != v]
    assert differ == [], f"the README's run is not the official preset's: {differ}"   # a setting newer than the run: its default


def test_the_readme_mini_figures_are_the_committed_run():
    "The Mini-ALFWorld figures in the README are the result line of the committed run (docs/mini/mini.ipynb)."
    cells = json.loads((REPO / "docs/mini/mini.ipynb").read_text())["cells"]
    text = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))
    m = re.search(r"mini result: base=([\d.]+) sft=([\d.]+) ppo=([\d.]+) gain=([+-][\d.]+) \(\+-([\d.]+)\)", text)
    base, sft, ppo, gain, se = m.groups()
    readme = (REPO / "README.md").read_text()
    flat = " ".join(readme.split())
    assert f"**{gain} +- {se}**" in flat and f"base {base}, SFT {sft}, PPO {ppo}%" in flat
    status = _status(readme)
    assert f"{gain} +- {se}" in status, status
