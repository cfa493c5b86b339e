"""The mini recipe end to end at its smallest settings (slow set), and its command-line checks."""
import json
from pathlib import Path

import pytest

from alfworld_rl.cli import OneLineParser
from alfworld_rl.core import UserError, read_jsonl
from alfworld_rl import mini


def parse(argv):
    "Parse `alfworld-rl mini` arguments."
    return mini.cli_mini_parser(OneLineParser(prog="alfworld-rl mini")).parse_args(argv)


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(SystemExit) as e: parse(["--settings", "huge"])
    assert e.value.code == 2
    with pytest.raises(UserError, match="seeds") as e:
        mini.cli_mini(parse(["--seeds", "1", "1", "--out-dir", str(tmp_path / "x"), "--no-report"]))
    assert e.value.status == 2 and not (tmp_path / "x").exists()


def test_data_seed_flag(tmp_path):
    assert parse(["--data-seed", "7"]).data_seed == 7
    with pytest.raises(UserError, match="--data-seed must be an integer >= 0") as e:
        mini.cli_mini(parse(["--data-seed", "-3", "--out-dir", str(tmp_path / "x"), "--no-report"]))
    assert e.value.status == 2 and not (tmp_path / "x").exists()
    assert mini.settings_from("mini", data_seed=7).data_seed == 7


def test_result_line():
    line = mini.result_line({"base": 0.05, "sft": 0.25, "ppo": 0.4, "ppo_minus_sft_points": 15.0}, (0, 1, 2))
    assert line == "mini result: base=5.0 sft=25.0 ppo=40.0 gain=+15.0 (valid_unseen success, mean over 3 seeds)"


def test_other_settings_in_the_same_directory_are_refused(tmp_path):
    (tmp_path / "settings.json").write_text(json.dumps({**json.loads(json.dumps(mini.asdict(mini.SMOKE))), "train_games": 99}))
    with pytest.raises(UserError, match="other settings"):
        mini.run_mini(mini.SMOKE, tmp_path, progress=False)


@pytest.mark.slow
def test_smoke_recipe_end_to_end_through_the_notebook(tmp_path, capsys):
    out = tmp_path / "mini"
    assert mini.cli_mini(parse(["--settings", "smoke", "--out-dir", str(out)])) == 0
    printed = capsys.readouterr().out
    assert "Saved report:" in printed
    assert printed.strip().splitlines()[-1].startswith("mini result: base=")
    assert printed.strip().splitlines()[-1].endswith("(valid_unseen success, mean over 1 seeds)")
    nb = json.loads((out / "mini.ipynb").read_text())
    assert not [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    paths = mini.MiniPaths(out)
    for label in ("base", "sft-seed0", "ppo-seed0"):
        records = read_jsonl(paths.eval_file(label))
        assert records[-1]["type"] == "summary"
        assert records[-1]["metrics"]["eval/valid_unseen/games"] == mini.SMOKE.valid_games
    assert read_jsonl(paths.ppo_run(0) / "checkpoints.jsonl")[-1]["step"] == mini.SMOKE.ppo_steps
    assert read_jsonl(paths.sft_run(0) / "checkpoints.jsonl")[-1]["step"] == mini.SMOKE.sft_steps
    for name in ("mini_curves.png", "mini_checkpoints.png", "mini_task_types.png"):
        assert paths.image(name).stat().st_size > 0
    stages = {r["stage"] for r in read_jsonl(paths.stages)}
    assert {"sft", "ppo", "eval", "demonstrations"} <= stages
    assert "games" in stages and "base model" not in stages          # the base model is shipped, not built here
    # a second run finds every stage done, does no work and logs no stage
    n = len(read_jsonl(paths.stages))
    mini.run_mini(mini.SMOKE, out, progress=False)
    assert read_jsonl(paths.stages)[n:] == []
