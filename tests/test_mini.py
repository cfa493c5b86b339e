"""The mini recipe end to end at its smallest settings (slow set), and its command-line checks."""
import importlib, json, sys
from pathlib import Path

import pytest

from alfworld_rl.cli import OneLineParser
from alfworld_rl.core import UserError, read_jsonl
from alfworld_rl.mini import recipe as mini


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


def test_bad_workers_are_refused_before_any_work(tmp_path):
    for bad in ("0", "-2"):
        with pytest.raises(UserError, match=f"--workers must be an integer >= 1 \\(got {bad}\\)") as e:
            mini.cli_mini(parse(["--settings", "smoke", "--workers", bad, "--out-dir", str(tmp_path / "x"), "--no-report"]))
        assert e.value.status == 2 and not (tmp_path / "x").exists()
    with pytest.raises(SystemExit): parse(["--workers", "two"])
    with pytest.raises(UserError, match="--workers"): mini.run_mini(mini.SMOKE, tmp_path / "y", workers=0)
    assert not (tmp_path / "y").exists()


def _diagnostic(name: str):
    "docs/diagnostics/<name>.py as a module."
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "docs" / "diagnostics" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seeds_in_worker_processes(tmp_path, capsys, monkeypatch):
    "Two smoke seeds at once, each in a spawned process: both finish every stage, and a rerun does no work."
    s = mini.settings_from("smoke", seeds=[0, 1])
    paths = mini.run_mini(s, tmp_path, progress=False, workers=2)
    stages = read_jsonl(paths.stages)
    for seed in (0, 1):
        assert {r["stage"] for r in stages if r["seed"] == seed} == {"sft", "ppo"}
        assert read_jsonl(paths.ppo_run(seed) / "checkpoints.jsonl")[-1]["step"] == s.ppo_steps
        for label in (f"sft-seed{seed}", f"ppo-seed{seed}"):
            assert read_jsonl(paths.eval_file(label))[-1]["metrics"]["eval/valid_unseen/games"] == s.valid_games
    runs = [r for r in stages if r["stage"] == "run"]
    assert len(runs) == 1 and runs[0]["workers"] == 2
    seconds = mini.stage_seconds(paths)
    assert seconds["wall"] == runs[0]["seconds"] and 0 < seconds["wall"]
    assert seconds["total"] == pytest.approx(sum(r["seconds"] for r in stages if r["stage"] != "run"))
    # docs/diagnostics/revisits.py on the real files: a row per checkpoint and task type; the expert never goes back
    revisits = _diagnostic("revisits")
    assert revisits.revisit_count([("go to a 1", True), ("go to b 1", True), ("go to a 1", False), ("go to a 1", True),
                                   ("open b 1", True), ("go to b 1", True)]) == (2, 4)
    for flags, rows in (([], 5 * 2), (["--demos"], 2)):
        monkeypatch.setattr(sys, "argv", ["revisits.py", str(tmp_path), *flags])
        revisits.main()
        table = [l for l in capsys.readouterr().out.splitlines() if l.startswith(f"| {tmp_path.name} |")]
        assert len(table) == rows, table
    assert all(l.endswith("| 0.0 | 0.0 |") for l in table)        # demonstrations: no lost episode, no revisit
    # PPO started from each seed's own SFT state
    for seed in (0, 1):
        config = json.loads((paths.ppo_run(seed) / "config.json").read_text())
        assert f"sft-seed{seed}" in config["init_state"]
    # docs/diagnostics/quarter_games.py: each seed's SFT on the games of its PPO's first and last quarter (here one update)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "docs" / "diagnostics"))
    quarter = importlib.import_module("quarter_games")           # importable by name: its workers are spawned processes
    monkeypatch.setattr(sys, "argv", ["quarter_games.py", str(tmp_path), "--episodes-per-game", "2"])
    quarter.main()
    assert len([l for l in capsys.readouterr().out.splitlines() if l.startswith(("| 0 |", "| 1 |"))]) == 2
    results = json.loads((tmp_path / "quarter_games" / "summary.json").read_text())
    for r in results:
        played = read_jsonl(paths.ppo_run(r["seed"]) / "metrics.jsonl")[0]["games"]
        assert quarter.quarter_games(paths.ppo_run(r["seed"]) / "metrics.jsonl") == (played, played)
        for q in ("first", "last"):
            assert (r[q]["games"], r[q]["episodes"]) == (len(played), 2 * len(played)) and 0 <= r[q]["success_rate"] <= 1
    monkeypatch.setattr(sys, "argv", ["quarter_games.py", str(tmp_path), "--episodes-per-game", "2", "--seeds", "1",
                                      "--threads", "1"])   # one seed: read back from its folder, not rerun
    quarter.main()
    assert [l.split("|")[1].strip() for l in capsys.readouterr().out.splitlines() if l.startswith("| 1 |")] == ["1"]
    monkeypatch.setattr(sys, "argv", ["quarter_games.py", str(tmp_path), "--seeds", "5"])
    with pytest.raises(SystemExit) as e: quarter.main()
    assert e.value.code == 2 and "--seeds must be seeds of the experiment (0, 1); got [5]" in capsys.readouterr().err
    mini.run_mini(s, tmp_path, progress=False, workers=2)         # the diagnostic added no stage either
    assert read_jsonl(paths.stages) == stages


def test_result_line():
    line = mini.result_line({"base": 0.05, "sft": 0.25, "ppo": 0.4, "ppo_minus_sft_points": 15.0, "gain_se_points": 4.25},
                            (0, 1, 2))
    assert line == "mini result: base=5.0 sft=25.0 ppo=40.0 gain=+15.0 (+-4.2) (valid_unseen success, mean over 3 seeds)"


@pytest.mark.parametrize("flags, message", [
    (["--win-reward", "0"], "--win-reward must be a finite number > 0 (got 0.0)"),
    (["--invalid-penalty", "-1"], "--invalid-penalty must be a finite number >= 0 (got -1.0)"),
    (["--episodes-per-game", "0"], "--episodes-per-game must be an integer in [1, 1000] (got 0)"),
    (["--train-games", "8"], "--train-games must be >= the games of one SFT step or PPO update (16) (got 8)"),
])
def test_bad_reward_and_episode_flags_are_refused_before_any_work(flags, message, tmp_path):
    with pytest.raises(UserError) as e:
        mini.cli_mini(parse([*flags, "--out-dir", str(tmp_path / "x"), "--no-report"]))
    assert e.value.status == 2 and str(e.value) == message and not (tmp_path / "x").exists()


def test_base_model_flag(tmp_path):
    "--base-model names the base of every stage; one that is not there is refused (status 2) before anything is written."
    s = mini.settings_from("mini", **mini.mini_overrides(parse(["--base-model", "tiny-qwen3"])))
    paths = mini.MiniPaths(tmp_path)
    for config in (mini.sft_config(s, paths, 0), mini.ppo_config(s, paths, 0, init_state="x"), mini.eval_config(s, paths, "base", None)):
        assert config.base_model == str(mini.base_model_path(s)) and "tiny" in config.base_model
    with pytest.raises(UserError) as e:
        mini.cli_mini(parse(["--base-model", str(tmp_path / "nope"), "--out-dir", str(tmp_path / "x"), "--no-report"]))
    assert e.value.status == 2 and str(e.value).startswith("--base-model: ") and not (tmp_path / "x").exists()


def test_reward_and_episode_flags_reach_every_stage(tmp_path):
    "--win-reward, --invalid-penalty and --episodes-per-game become settings, the PPO run's config and each evaluation's."
    args = parse(["--win-reward", "10", "--invalid-penalty", "0.05", "--episodes-per-game", "4"])
    s = mini.settings_from("mini", **mini.mini_overrides(args))
    assert (s.win_reward, s.invalid_penalty, s.episodes_per_game) == (10.0, 0.05, 4)
    paths = mini.MiniPaths(tmp_path)
    ppo = mini.ppo_config(s, paths, 0, init_state="x")
    ev = mini.eval_config(s, paths, "base", None)
    assert (ppo.win_reward, ppo.invalid_penalty, ppo.step_return) == (10.0, 0.05, "all")
    assert (ev.win_reward, ev.invalid_penalty, ev.episodes_per_game) == (10.0, 0.05, 4)
    assert (mini.MINI.win_reward, mini.MINI.invalid_penalty, mini.MINI.episodes_per_game) == (1.0, 0.01, 1)


def test_visited_places_flag_reaches_every_stage(tmp_path):
    "--visited-places turns the places line on in SFT's demonstrations, PPO's rollouts and every evaluation; off by default."
    paths = mini.MiniPaths(tmp_path)
    for flags, on in (([], False), (["--visited-places"], True), (["--no-visited-places"], False)):
        overrides = mini.mini_overrides(parse(flags))
        assert overrides == ({"visited_places": on} if flags else {})
        s = mini.settings_from("mini", **overrides)
        configs = (mini.sft_config(s, paths, 0), mini.ppo_config(s, paths, 0, init_state="x"), mini.eval_config(s, paths, "base", None))
        assert [c.visited_places for c in configs] == [on] * 3


def test_mini_defaults_are_the_measured_recipe(tmp_path):
    "The mini's PPO is the capacity probe's: the 4-layer base, 16 games x 8 branches, 4 Adam steps, 12 updates, penalty 0.01; every draw a fresh game."
    s, paths = mini.MINI, mini.MiniPaths(tmp_path)
    assert s.train_games == 240 and mini.replayed_draws(s) == 0    # the rollout curve is on games never played before
    ppo = mini.ppo_config(s, paths, 0, init_state="x")
    assert (ppo.games_per_batch, ppo.group_size, ppo.ppo_minibatches, ppo.max_steps) == (16, 8, 4, 12)
    assert (ppo.invalid_penalty, ppo.win_reward, ppo.advantage, ppo.step_return) == (0.01, 1.0, "gigpo", "all")
    base = json.loads((mini.base_model_path(s) / "config.json").read_text())
    assert s.base_model == "mini-base-4layers" and base["num_hidden_layers"] == 4
    assert mini.SMOKE.base_model == "mini-base"          # the tests' smoke run keeps the small, fast base


def test_evaluations_beside_the_training(tmp_path):
    """`eval_beside`: SFT's evaluations run in a second process beside PPO, PPO's greedy one beside its sampled one;
    every file is complete, each stage recorded once, the figures those of the same recipe run in one process, and a
    rerun without the setting (where evaluations run is free to change) does no work."""
    s = mini.settings_from("smoke", greedy_eval=True, eval_beside=True)
    paths = mini.run_mini(s, tmp_path / "beside", progress=False)
    stages = read_jsonl(paths.stages)
    labels = ["sft-seed0", "sft-seed0-greedy", "ppo-seed0", "ppo-seed0-greedy"]
    assert sorted(r["seed"] for r in stages if r["stage"] == "eval") == sorted(["base", *labels])
    alone = mini.run_mini(mini.settings_from("smoke", greedy_eval=True), tmp_path / "alone", progress=False)
    for label in labels:
        a, b = (read_jsonl(p.eval_file(label))[-1]["metrics"] for p in (paths, alone))
        assert a["eval/valid_unseen/games"] == s.valid_games
        assert {k: v for k, v in a.items() if "time" not in k} == {k: v for k, v in b.items() if "time" not in k}, label
    mini.run_mini(mini.settings_from("smoke", greedy_eval=True), tmp_path / "beside", progress=False)
    assert [r for r in read_jsonl(paths.stages) if r["stage"] != "run"] == [r for r in stages if r["stage"] != "run"]


def test_other_settings_in_the_same_directory_are_refused(tmp_path):
    (tmp_path / "settings.json").write_text(json.dumps({**json.loads(json.dumps(mini.asdict(mini.SMOKE))), "train_games": 99}))
    with pytest.raises(UserError, match=r"other settings: train_games=99 \(now 6\) .*--set KEY=VALUE"):
        mini.run_mini(mini.SMOKE, tmp_path, progress=False)
    assert json.loads((tmp_path / "settings.json").read_text())["train_games"] == 99        # the file is left as it was


def test_an_official_run_from_before_the_slips_is_told_how_to_resume(tmp_path):
    "Runs 1-5 had no slipping demonstrations; the preset has them now, and resuming one names the setting to give."
    before = {**json.loads(json.dumps(mini.asdict(mini.OFFICIAL))), "slip_rate": 0.0, "removed_setting": 1}
    (tmp_path / "settings.json").write_text(json.dumps(before))
    with pytest.raises(UserError) as e:
        mini.run_mini(mini.OFFICIAL, tmp_path, progress=False)
    assert "slip_rate=0.0 (now 0.2)" in str(e.value) and "removed_setting=1 (now no such setting)" in str(e.value)
    assert e.value.status == 2 and json.loads((tmp_path / "settings.json").read_text()) == before


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


@pytest.mark.parametrize("report", sorted((Path(__file__).parent.parent / "nbs" / "reports").glob("*.ipynb")), ids=lambda p: p.stem)
def test_report_notebooks_import_what_exists(report):
    "Every name a report notebook imports from alfworld_rl exists (a moved name fails here, not only in a slow run)."
    import ast, importlib, importlib.util
    names = []
    for cell in json.loads(report.read_text())["cells"]:
        if cell["cell_type"] != "code": continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("alfworld_rl"):
                names += [(node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                names += [(a.name, None) for a in node.names if a.name.startswith("alfworld_rl")]
    assert names, f"{report.name} imports nothing from alfworld_rl"
    for module, name in names:
        m = importlib.import_module(module)
        assert name is None or hasattr(m, name) or importlib.util.find_spec(f"{module}.{name}"), f"{report.name}: {module}.{name}"
