"""`alfworld-rl mini --set KEY=VALUE`: any mini setting from the command line, parsed to its type and checked by its
rule; a bad key or value is one line with exit status 2 and writes nothing; a good one reaches settings.json and the
stage it belongs to."""
import json
import os
import subprocess
import sys

import pytest

from alfworld_rl.cli import main
from alfworld_rl.mini import recipe as mini


def run_cli(argv, capsys) -> tuple[int, str]:
    "(exit status, stderr) of `alfworld-rl mini <argv>`, run in this process."
    status = main(["mini", *argv])
    return status, capsys.readouterr().err


def test_an_unknown_key_is_one_line_status_2_and_nothing_written(tmp_path):
    "Through the console script itself: the key is named, with the nearest real one."
    out = tmp_path / "x"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    entry = "import sys; from alfworld_rl.cli import main; sys.exit(main())"     # what the console script runs
    r = subprocess.run([sys.executable, "-c", entry, "mini", "--set", "sft_step=3", "--out-dir", str(out), "--no-report"],
                       capture_output=True, text=True, env=env)
    assert (r.returncode, r.stderr) == (2, "alfworld-rl mini: error: --set sft_step: no such mini setting (did you mean sft_steps?)\n")
    assert not out.exists()


@pytest.mark.parametrize("given, says", [
    ("colour=red", "--set colour: no such mini setting"),
    ("sft_steps", "--set takes KEY=VALUE (got 'sft_steps')"),
    ("sft_steps=three", "--set sft_steps must be an integer (got 'three')"),
    ("ppo_learning_rate=fast", "--set ppo_learning_rate must be a number (got 'fast')"),
    ("greedy_eval=maybe", "--set greedy_eval must be true or false (got 'maybe')"),
    ("sft_steps=0", "mini setting sft_steps must be an integer >= 1 (got 0)"),            # the setting's own rule
    ("lora_rank=128", "mini setting lora_rank must be an integer in [4, 64] (got 128)"),
    ("context=sideways", "mini setting context must be one of full, window (got 'sideways')"),
    ("ppo_learning_rate=nan", "mini setting ppo_learning_rate must be > 0 (got nan)"),
    ("train_games=0", "--train-games must be an integer >= 1 (got 0)"),                  # a setting with a flag: named so
    ("seeds=1,1", "--seeds must be distinct integers >= 0, at least one (got (1, 1))"),
    ("task_types=cook", "mini setting task_types must be distinct names among"),
    ("max_assistant_tokens=9000", "mini setting max_assistant_tokens must be < max_trajectory_tokens (6000)"),
    ("slip_rate=1", "mini setting slip_rate must be in [0, 1) (got 1.0)"),
    ("slip_rate=-0.5", "mini setting slip_rate must be in [0, 1) (got -0.5)"),
    ("refused_credit=none", "mini setting refused_credit must be one of all, negative (got 'none')"),
])
def test_a_bad_key_or_value_is_one_line_status_2_and_nothing_written(given, says, tmp_path, capsys):
    out = tmp_path / "x"
    status, err = run_cli(["--set", given, "--out-dir", str(out), "--no-report"], capsys)
    assert status == 2 and err.startswith(f"alfworld-rl mini: error: {says}") and err.count("\n") == 1, err
    assert not out.exists()


def test_a_setting_given_twice_is_refused(tmp_path, capsys):
    out = tmp_path / "x"
    for argv, says in ((["--set", "gamma=0.9", "--set", "gamma=0.8"], "--set gamma: already given as --set gamma"),
                       (["--data-seed", "3", "--set", "data-seed=4"], "--set data_seed: already given as --data-seed")):
        status, err = run_cli([*argv, "--out-dir", str(out), "--no-report"], capsys)
        assert status == 2 and err.startswith(f"alfworld-rl mini: error: {says}") and not out.exists()


class Stop(Exception):
    "Raised in place of the games stage: the settings are written by then, and no work is done."


def test_good_values_reach_settings_json_and_their_stages(tmp_path, monkeypatch):
    "The smoke preset with --set values: settings.json records them (typed), and each stage's configuration has them."
    def stop(*args, **kwargs): raise Stop
    monkeypatch.setattr(mini, "mini_data", stop)             # called right after settings.json is written
    out = tmp_path / "x"
    given = ["sft_steps=3", "context=full", "step-return=win", "eval_temperature=0.5", "rename_objects=off",
             "seeds=2,5", "base_episodes=2", "ppo_learning_rate=1e-3"]
    with pytest.raises(Stop):
        main(["mini", "--settings", "smoke", "--no-report", "--out-dir", str(out), *[a for g in given for a in ("--set", g)]])
    saved = json.loads((out / "settings.json").read_text())
    assert {k: saved[k] for k in ("sft_steps", "context", "step_return", "eval_temperature", "rename_objects", "seeds",
                                  "base_episodes", "ppo_learning_rate")} == \
        {"sft_steps": 3, "context": "full", "step_return": "win", "eval_temperature": 0.5, "rename_objects": False,
         "seeds": [2, 5], "base_episodes": 2, "ppo_learning_rate": 1e-3}
    assert {k: v for k, v in saved.items() if k not in ("sft_steps", "context", "step_return", "eval_temperature",
            "rename_objects", "seeds", "base_episodes", "ppo_learning_rate")} == \
        {k: v for k, v in json.loads(json.dumps(mini.asdict(mini.SMOKE))).items() if k in saved and k not in (
            "sft_steps", "context", "step_return", "eval_temperature", "rename_objects", "seeds", "base_episodes",
            "ppo_learning_rate")}                              # everything else is the preset's
    s = mini.MiniSettings(**{**saved, "seeds": tuple(saved["seeds"]), "task_types": tuple(saved["task_types"])})
    paths = mini.MiniPaths(out)
    sft, ppo = mini.sft_config(s, paths, 2), mini.ppo_config(s, paths, 2, init_state="x")
    ev = mini.eval_config(s, paths, "ppo-seed2", "y")
    assert (sft.max_steps, sft.context, sft.rename_objects) == (3, "full", False)
    assert (ppo.step_return, ppo.learning_rate, ppo.context) == ("win", 1e-3, "full")
    assert (ev.temperature, ev.context) == (0.5, "full")


def test_set_values_survive_the_report_parameters():
    "The report gets the overrides as JSON parameters and rebuilds the same settings from them."
    from alfworld_rl.cli import OneLineParser
    args = mini.cli_mini_parser(OneLineParser(prog="alfworld-rl mini")).parse_args(
        ["--settings", "smoke", "--set", "seeds=3,4", "--set", "task_types=pick_and_place_simple", "--set", "gamma=0.5",
         "--set", "greedy_eval=true", "--set", "base_episodes=none"])
    overrides = mini.mini_overrides(args)
    params = json.loads(json.dumps({"preset": args.settings, "overrides": overrides}))
    assert mini.settings_from(params["preset"], **params["overrides"]) == mini.dataclasses.replace(
        mini.SMOKE, seeds=(3, 4), task_types=("pick_and_place_simple",), gamma=0.5, greedy_eval=True, base_episodes=None)


def test_smoke_run_with_set_values_in_every_stage(tmp_path, capsys):
    "The whole smoke recipe (about 10 s on one core): the SFT run, the PPO run and every evaluation ran with the --set values."
    out = tmp_path / "smoke"
    status = main(["mini", "--settings", "smoke", "--no-report", "--out-dir", str(out), "--set", "sft_steps=1",
                   "--set", "step_return=win", "--set", "eval_temperature=0.7"])
    assert status == 0 and "mini result:" in capsys.readouterr().out
    assert json.loads((out / "runs" / "sft-seed0" / "config.json").read_text())["max_steps"] == 1
    assert json.loads((out / "runs" / "ppo-seed0" / "config.json").read_text())["step_return"] == "win"
    for label in ("base", "sft-seed0", "ppo-seed0"):
        summary = json.loads((out / "eval" / f"{label}.jsonl").read_text().splitlines()[-1])
        assert summary["type"] == "summary" and summary["config"]["temperature"] == 0.7
