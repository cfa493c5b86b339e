"""The analysis scripts under docs/: the refused-command breakdown of lost_episodes.py, the flag checks of the SFT probe
and of the publishing script, the ablation table, which must be what its script makes of the committed rows, and
ppo_signal's split of the advantages."""
import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _script(rel: str):
    "docs/<rel>.py as a module."
    path = REPO / "docs" / f"{rel}.py"
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _step(action, admissible, observation="Nothing happens.", valid_format=True):
    return {"action": action, "admissible": admissible, "observation": observation, "valid_format": valid_format}


def test_refused_commands_are_told_apart_by_where_the_agent_stands():
    lost = _script("official/lost_episodes")
    r = {"steps": [
        _step("go to desk 1", True, "You arrive at desk 1. On the desk 1, you see a pen 1, and a book 2."),
        _step("take laptop 1 from desk 1", False),        # at the desk, no laptop seen there
        _step("take book 2 from desk 1", False),          # seen there: refused because the hands are full
        _step("take book 2 from shelf 3", False),         # not standing at shelf 3
        _step("go to desk 1", False),                     # already there
        _step("go to dresser 1", False),                  # a place other than here that was refused: not in the room
        _step("go to shelf 1", True, "You arrive at shelf 1. The shelf 1 is closed."),
        _step("open shelf 1", True, "You open the shelf 1. The shelf 1 is open. In it, you see a mug 2."),
        _step("take mug 2 from shelf 1", False),          # seen inside after opening
        _step("heat mug 2 with shelf 1", False),
        _step("move mug 2 to desk 1", False),
        _step("close drawer 9", False),
        _step("takeal>", False), _step("", False, valid_format=False)]}
    got = lost.refused_kinds(r)
    assert got == {"take: object not here": 1, "take: hands full": 2, "take: not at that place": 1,
                   "go to: already there": 1, "go to: not in this room": 1, "transform / use refused": 1,
                   "put / move refused": 1, "open / close refused": 1, "not a command": 2}
    assert set(got) <= set(lost.COMMAND_KINDS)


def test_takes_of_an_object_not_there_are_split_by_what_was_there():
    lost = _script("official/lost_episodes")
    r = {"steps": [
        _step("go to desk 1", True, "You arrive at desk 1. On the desk 1, you see a pen 1, and a mug 2."),
        _step("take mug 1 from desk 1", False),           # the task's object: another mug in sight
        _step("take apple 1 from desk 1", False),         # another object
        _step("take pen 1 from desk 1", False),           # there: not a missing take
        _step("go to shelf 1", True, "You arrive at shelf 1. On the shelf 1, you see nothing."),
        _step("take mug 3 from shelf 1", False),          # the task's object, none in sight
        _step("take mug 3 from desk 1", False),           # not standing there: another kind of refusal
        _step("go to cabinet 1", True, "You arrive at cabinet 1. The cabinet 1 is closed."),
        _step("open cabinet 1", True, "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 4."),
        _step("take mug 5 from cabinet 1", False)]}      # seen after opening: another in sight
    got = lost.missing_takes(r, "mug")
    assert got == {"task's object, another in sight": 2, "another object": 1, "task's object, none in sight": 1}
    assert sum(got.values()) == lost.refused_kinds(r)["take: object not here"]
    assert set(got) <= set(lost.MISSING_TAKES)


def test_the_sft_probe_refuses_bad_settings_before_writing(tmp_path):
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    (run / "data" / "games.json").write_text("{}")
    from alfworld_rl.mini.recipe import PRESETS
    import dataclasses
    (run / "settings.json").write_text(json.dumps(dataclasses.asdict(PRESETS["official"])))
    for bad, says in (("bogus=1", "--set bogus: no such mini setting"), ("max_detours=-1", "max_detours"),
                      ("max_detours", "--set takes KEY=VALUE")):
        out = tmp_path / "probe"
        p = subprocess.run([sys.executable, str(REPO / "docs/official/sft_probe.py"), str(run), "--set", bad,
                            "--out", str(out)], capture_output=True, text=True)
        assert p.returncode == 2, p.stderr
        assert says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert not out.exists()
    p = subprocess.run([sys.executable, str(REPO / "docs/official/sft_probe.py"), str(tmp_path / "nothing"),
                        "--out", str(tmp_path / "probe")], capture_output=True, text=True)
    assert p.returncode != 0 and "holds no official run" in p.stderr and not (tmp_path / "probe").exists()
    only = "--continue needs --set sft_steps=N and/or"
    for sets, says in ((["--set", "max_detours=4"], only), ([], only), (["--set", "sft_steps=300", "--set", "max_detours=4"], only),
                       (["--set", "sft_lr_decay_steps=50"], "no SFT save at or before step 250"),
                       (["--set", "sft_lr_decay_steps=400"], "sft_lr_decay_steps must be <= sft_steps (300)")):
        p = subprocess.run([sys.executable, str(REPO / "docs/official/sft_probe.py"), str(run), "--continue", *sets,
                            "--out", str(tmp_path / "probe")], capture_output=True, text=True)
        assert p.returncode == 2 and says in p.stderr, p.stderr
        assert not (tmp_path / "probe").exists()


def test_the_fit_script_refuses_bad_input_before_writing(tmp_path):
    fit = [sys.executable, str(REPO / "docs/official/sft_fit.py")]
    p = subprocess.run([*fit, str(tmp_path / "nothing"), "sft=base", "--out", str(tmp_path / "fit")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "holds no official run" in p.stderr and not (tmp_path / "fit").exists()
    p = subprocess.run([*fit, str(tmp_path), "sft=base", "--games", "0", "--out", str(tmp_path / "fit")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--games must be an integer >= 1 (got 0)" in p.stderr and not (tmp_path / "fit").exists()


def test_publishing_a_run_refuses_bad_input_before_writing(tmp_path):
    publish = ["bash", str(REPO / "docs/official/publish_run.sh")]
    run, out = tmp_path / "run", tmp_path / "out"
    (run / "eval").mkdir(parents=True)
    (run / "eval" / "sft-seed0.jsonl").write_text('{"type": "summary", "metrics": {}}\n')
    (run / "eval" / "ppo-seed0.jsonl").write_text('{"type": "trajectory"}\n')     # PPO's evaluation not finished
    for target, args, line in (
            (run, ["--bogus"], "publish_run.sh: unknown flag --bogus (allowed: --readme, --ship, --seeds=A,B)"),
            (run, ["--ship"], f"publish_run.sh: --ship needs {run}/eval/ppo-seed0.jsonl finished"),
            (tmp_path / "nothing", [], f"publish_run.sh: {tmp_path / 'nothing'} holds no evaluations (eval/)")):
        p = subprocess.run([*publish, str(target), str(out), *args], capture_output=True, text=True, cwd=REPO)
        assert (p.returncode, p.stderr) == (2, line + "\n") and not out.exists()


def test_the_ablation_table_is_the_scripts_and_the_recipe_rows_are_the_committed_runs():
    ablation = _script("ablation/ablation")
    recipes = ablation.recipe_rows()
    g0, se0, _ = ablation.gains(recipes[0], "valid_unseen")
    g4, se4, _ = ablation.gains(recipes[4], "valid_unseen")
    assert [round(g0, 1), round(se0, 1), round(g4, 1), round(se4, 1)] == [12.8, 2.2, 9.4, 2.4]
    rows = [json.loads(p.read_text()) for p in sorted((REPO / "docs/ablation/rows").glob("*.json"))]
    shown = (REPO / "docs/ablation/table.md").read_text().strip()
    assert shown == ablation.table(rows, recipes), "docs/ablation/table.md is not what docs/ablation/ablation.py prints"
    page = (REPO / "docs/ablation.md").read_text()
    assert page.split(ablation.TABLE_START, 1)[1].split(ablation.TABLE_END, 1)[0].strip() == shown, "docs/ablation.md's table"
    for row in rows:
        assert ablation.label(row) in page, f"docs/ablation.md does not discuss {ablation.label(row)}"


def test_ablation_verdicts_need_two_standard_errors():
    ablation = _script("ablation/ablation")
    assert ablation.verdict(5.0, 2.0) == "helps" and ablation.verdict(-5.0, 2.0) == "hurts"
    assert ablation.verdict(3.9, 2.0) == "cannot be told apart" and ablation.verdict(1.0, float("nan")) == "too few seeds to tell"


def test_ablation_collect_reads_a_runs_finished_seeds(tmp_path):
    ablation = _script("ablation/ablation")
    from alfworld_rl.mini.recipe import PRESETS
    import dataclasses
    settings = dataclasses.asdict(dataclasses.replace(PRESETS["mini"], advantage="grpo"))
    (tmp_path / "eval").mkdir()
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    def summary(name, seen, unseen):
        m = {"eval/valid_seen/success_rate": seen, "eval/valid_unseen/success_rate": unseen,
             "eval/valid_seen/episodes": 60, "eval/valid_unseen/episodes": 60,
             "eval/valid_seen/games": 30, "eval/valid_unseen/games": 30}
        (tmp_path / "eval" / f"{name}.jsonl").write_text(json.dumps({"type": "trajectory"}) + "\n" +
                                                        json.dumps({"type": "summary", "metrics": m}) + "\n")
    summary("sft-seed0", 0.3, 0.25); summary("ppo-seed0", 0.4, 0.35); summary("sft-seed1", 0.2, 0.2)   # seed 1: no PPO yet
    metrics = tmp_path / "runs" / "ppo-seed0" / "metrics.jsonl"
    metrics.parent.mkdir(parents=True)
    metrics.write_text("".join(json.dumps({"step": i + 1, "rollout/success_rate": r}) + "\n"
                               for i, r in enumerate([0.1, 0.2, 0.2, 0.3])))
    row = ablation.collect(tmp_path, "grpo")
    assert row["changed"] == {"advantage": "grpo"} and list(row["seeds"]) == ["0"] and not row["complete"]
    s = row["seeds"]["0"]
    assert round(s["ppo"]["valid_unseen"] - s["sft"]["valid_unseen"], 6) == 10.0 and round(s["climb"], 6) == 20.0


def _trajectory(game, branch, steps, won_at=None, penalty=0.01):
    "A real rollout Trajectory: `steps` (observation, admissible) pairs, won on step `won_at`."
    from alfworld_rl.rl.rollout import StepRecord, Trajectory, step_reward
    recs = []
    for k, (obs, ok) in enumerate(steps):
        won = k == won_at
        recs.append(StepRecord(turn=k, prompt_length=1, completion_tokens=[1], logprobs=[0.0], text="", sampler_stop_reason="stop",
                               action="go to desk 1", valid_format=True, format_error=None, admissible=ok, status="ok",
                               observation=obs, done=won, won=won, anchor_observation=obs,
                               reward=step_reward(won, not ok, 1.0, penalty)))
    return Trajectory(game=game, branch=branch, steps=recs, won=won_at is not None, stop_reason="won" if won_at is not None else "max_steps",
                      reward=round(sum(r.reward for r in recs), 10), context="window")


def test_ppo_signal_splits_the_trainers_advantages_into_the_wins_and_the_penaltys_parts():
    import dataclasses
    from types import SimpleNamespace
    from alfworld_rl.mini.recipe import PRESETS
    from alfworld_rl.rl.ppo import assign_advantages
    signal = _script("official/ppo_signal")
    game = SimpleNamespace(id="g")
    group = [_trajectory(game, 0, [("a", True), ("b", False), ("c", True)], won_at=2),
             _trajectory(game, 1, [("a", False), ("a", True), ("b", False)]),
             _trajectory(game, 2, [("a", True), ("b", True), ("d", True)])]
    for rule in ("gigpo", "grpo"):
        s = dataclasses.replace(PRESETS["official"], advantage=rule)
        parts = signal.group_parts(group, s)
        assign_advantages(group, rule, s.advantage_norm, s.gamma, 1.0, s.step_return)
        trained = signal.trained_advantages(group)
        assert trained == [t.step_advantages if rule == "gigpo" else [t.advantage] * len(t.steps) for t in group]
        for win, pen, want in zip(parts["win"], parts["penalty"], trained):
            assert [w + p for w, p in zip(win, pen)] == pytest.approx(want)     # the parts add up to the trainer's
        assert any(w != 0 for w in parts["win"][0]) and any(p != 0 for p in parts["penalty"][1])
    lost = [_trajectory(game, b, [("a", b == 0), ("b", True)]) for b in range(3)]   # no branch wins
    parts = signal.group_parts(lost, PRESETS["official"])
    assert all(w == 0 for ws in parts["win"] for w in ws) and any(p != 0 for ps in parts["penalty"] for p in ps)



def test_ppo_signal_sums_the_advantages_of_refused_commands_apart():
    from types import SimpleNamespace
    from alfworld_rl.rl.ppo import assign_advantages
    signal = _script("official/ppo_signal")
    game = SimpleNamespace(id="g")
    group = [_trajectory(game, 0, [("a", False), ("b", True)], won_at=1, penalty=0.0),   # won, one refused command
             _trajectory(game, 1, [("a", True), ("c", False)], penalty=0.0)]             # lost, one refused command
    assign_advantages(group, "grpo", "mean", 0.95, 1.0, "all")                           # +0.5 and -0.5 on every step
    kinds = signal.by_admission([group])
    assert kinds["refused"] == {"turns": 2, "net": 0.0, "positive": 0.5, "negative": -0.5, "in_won": 1}
    assert kinds["admitted"] == {"turns": 2, "net": 0.0, "positive": 0.5, "negative": -0.5, "in_won": 1}
    won_refuses = [_trajectory(game, 0, [("a", False), ("a", False), ("b", True)], won_at=2, penalty=0.0), group[1]]
    assign_advantages(won_refuses, "grpo", "mean", 0.95, 1.0, "all")
    assert signal.by_admission([won_refuses])["refused"]["net"] == pytest.approx(0.5)  # two pushed up, one down

def test_ablation_pairs_seeds_only_when_they_start_from_the_recipes_sft():
    ablation = _script("ablation/ablation")
    def row(sft, ppo): return {"seeds": {str(i): {"sft": {s: a for s in ablation.SPLITS}, "ppo": {s: b for s in ablation.SPLITS}}
                                         for i, (a, b) in enumerate(zip(sft, ppo))}}
    recipe = row([30.0, 20.0, 25.0], [40.0, 35.0, 30.0])                  # gains 10, 15, 5
    d, se, how = ablation.difference(row([30.0, 20.0, 25.0], [38.0, 34.0, 27.0]), recipe, "valid_unseen")
    assert how == "paired" and round(d, 6) == round(-2.0, 6) and round(se, 6) == round(((1 / 3) ** 0.5) * 1.0, 6)
    d, se, how = ablation.difference(row([31.7, 20.0, 25.0], [38.0, 34.0, 27.0]), recipe, "valid_unseen")
    assert how == "unpaired" and round(d, 6) == round(-2.0 - 1.7 / 3, 6) and se > 2.5   # another SFT: errors in quadrature


def test_lost_episodes_names_the_verb_of_every_step():
    lost = _script("official/lost_episodes")
    steps = [_step("go to desk 1", True), _step("take pen 1 from desk 1", False), _step("move pen 1 to shelf 2", True),
             _step("put pen 1 in/on shelf 2", False), _step("close drawer 1", True), _step("heat mug 2 with microwave 1", False),
             _step("use desklamp 1", True), _step("inventory", True), _step("go to desk 1", False, valid_format=False)]
    assert [lost.verb_of(s) for s in steps] == ["go to", "take", "put / move", "put / move", "open / close",
                                                "clean / heat / cool", "use", "other", "other"]


def test_lost_episodes_counts_refusal_streaks():
    lost = _script("official/lost_episodes")
    ok, no = _step("go to desk 1", True), _step("take pen 3 from desk 1", False)
    assert lost.refusal_streaks({"steps": [ok, no, no, no, ok, no, no]}) == (5, 3, 3, 2)   # 5 refused, 3 right after one
    assert lost.refusal_streaks({"steps": [ok, ok]}) == (0, 0, 0, 0)
    lines = lost.streak_lines({"won": [(0, 0, 0, 0)], "lost": [(12, 11, 12, 12), (5, 3, 3, 2)]})
    assert "14 of 17 refused commands (82.4%)" in lines[0]
    assert lines[-1] == "| lost | 2 | 2 (100%) | 1 (50%) | 1 (50%) |" and lines[-2] == "| won | 1 | 0 (0%) | 0 (0%) | 0 (0%) |"


def test_the_sft_probe_tables_refusal_streaks_of_valid_seen_only(tmp_path):
    probe = _script("official/sft_probe")
    ok, no = _step("go to desk 1", True), _step("take pen 3 from desk 1", False)
    episodes = [{"type": "trajectory", "split": "valid_seen", "won": False, "steps": [ok] + [no] * 10},
                {"type": "trajectory", "split": "valid_seen", "won": True, "steps": [ok, no, ok]},
                {"type": "trajectory", "split": "valid_unseen", "won": False, "steps": [no] * 30},
                {"type": "summary"}]
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    table = probe.streak_table({"a": path}).splitlines()
    assert table[2:] == ["| refused right after a refused command (%) | 81.8 |",       # 9 of 11, valid_unseen left out
                         "| lost episodes with a streak >= 10 (%) | 100.0 |", "| lost episodes ending in a streak >= 5 (%) | 100.0 |"]


def test_the_readme_and_the_ablation_page_quote_the_tables_differences():
    ablation = _script("ablation/ablation")
    recipes = ablation.recipe_rows()
    readme = " ".join((REPO / "README.md").read_text().split())
    page = " ".join((REPO / "docs/ablation.md").read_text().split("<!-- end of ablation table -->")[1].split())
    for path in sorted((REPO / "docs/ablation/rows").glob("*.json")):
        row = json.loads(path.read_text())
        if not row["complete"]: continue
        d, se, _ = ablation.difference(row, recipes[row["data_seed"]], "valid_unseen")
        quoted = f"{d:+.1f} +- {se:.1f}"
        assert quoted in page, f"docs/ablation.md does not give {row['name']}'s difference {quoted}"
        if row["data_seed"] == 0: assert quoted in readme, f"the README does not give {row['name']}'s difference {quoted}"


def test_the_paired_gain_is_taken_over_the_games_both_played(tmp_path, capsys):
    "paired_gain.py: the mean and standard error of the per-game differences; files with other games are refused."
    pg = _script("official/paired_gain")
    def write(name, wins):
        rows = [{"type": "trajectory", "split": "valid_unseen", "game_id": g, "branch": i, "won": w}
                for g, ws in wins.items() for i, w in enumerate(ws)]
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows) + json.dumps({"type": "summary"}) + "\n")
        return str(tmp_path / name)
    sft = write("sft.jsonl", {"a": [0, 0], "b": [1, 0], "c": [0, 0], "d": [1, 1]})
    ppo = write("ppo.jsonl", {"a": [1, 0], "b": [1, 1], "c": [0, 0], "d": [0, 1]})
    assert pg.main([sft, ppo]) == 0
    row = [l for l in capsys.readouterr().out.splitlines() if l.startswith("| valid_unseen")][0]
    # differences 0.5, 0.5, 0, -0.5: mean 0.125, sample sd 0.4787, se 0.2394
    assert row == "| valid_unseen | 4 | +12.5 +- 23.9 | 2 | 1 |"
    other = write("other.jsonl", {"a": [1], "b": [0], "e": [1]})
    assert pg.main([sft, other]) == 2
    assert "different games" in capsys.readouterr().err
    ppo2 = write("ppo2.jsonl", {"a": [0, 0], "b": [1, 0], "c": [1, 1], "d": [1, 1]})      # a second run: 0, 0, +1, 0
    assert pg.main([sft, ppo, sft, ppo2]) == 0
    rows = [l for l in capsys.readouterr().out.splitlines() if l.startswith("| valid_unseen")]
    # run 2: differences 0, 0, 1, 0: mean 0.25, se 0.25; pooled mean 0.1875, se sqrt(0.2394^2 + 0.25^2) / 2 = 0.1731
    assert rows == ["| valid_unseen | 1 | 4 | +12.5 +- 23.9 | 2 | 1 |", "| valid_unseen | 2 | 4 | +25.0 +- 25.0 | 1 | 0 |",
                    "| valid_unseen | pooled (2 runs; runs +12.5 to +25.0) | 8 | +18.8 +- 17.3 | 3 | 1 |"]
    with pytest.raises(SystemExit) as e: pg.main([sft, ppo, sft])
    assert e.value.code == 2 and "pairs" in capsys.readouterr().err


def test_the_sft_saves_script_refuses_bad_input_before_writing(tmp_path):
    saves = [sys.executable, str(REPO / "docs/official/sft_saves.py")]
    run = tmp_path / "run"
    (run / "runs" / "sft-seed0").mkdir(parents=True)
    (run / "settings.json").write_text("{}")
    (run / "runs" / "sft-seed0" / "checkpoints.jsonl").write_text(json.dumps({"step": 50, "sampler_path": "x"}) + "\n")
    bare = tmp_path / "bare"                                  # a run folder whose SFT has saved nothing
    bare.mkdir()
    (bare / "settings.json").write_text("{}")
    out = tmp_path / "out"
    for args, says in (([str(run), "--steps", "50"], "write each run as LABEL=RUN"),
                       ([f"a={tmp_path / 'nothing'}", "--steps", "50"], "holds no official run"),
                       ([f"a={bare}", "--steps", "50"], "no SFT saves"),
                       ([f"a={run}", "--steps", "100"], "no SFT save at step(s) [100]; it has [50]"),
                       ([f"a={run}", "--steps", "50", "--episodes-per-game", "0"], "--episodes-per-game must be >= 1")):
        p = subprocess.run([*saves, *args, "--out", str(out)], capture_output=True, text=True)
        assert p.returncode == 2 and says in p.stderr, p.stderr
        assert not out.exists()


def test_the_readme_table_names_each_seeds_rows_when_a_run_has_several():
    table = _script("official/official_table")
    m = {"eval/valid_seen/success_rate": 0.1, "eval/valid_seen/success_rate_se": 0.02,
         "eval/valid_unseen/success_rate": 0.05, "eval/valid_unseen/success_rate_se": 0.01}
    rows = {"base (T = 1, once)": m, "SFT seed 0 (T = 1)": m, "SFT seed 1 (T = 1)": m, "PPO seed 1 (T = 0.01)": m,
            "PPO seed 0 (T = 1)": None}                                           # not finished: left out
    settings = {"base_model": "official-base-4layers", "episodes_per_game": 2}
    two = table.readme_table(rows, {**settings, "seeds": [0, 1]}).splitlines()
    assert "| this repository: base | 0.97M, `official-base-4layers` | T = 1, once | 10.0 +- 2.0 | 5.0 +- 1.0 |" in two
    assert "| this repository: SFT | 0.97M, `official-base-4layers` | T = 1, 2 per game, seed 1 | 10.0 +- 2.0 | 5.0 +- 1.0 |" in two
    assert any("| this repository: SFT + PPO |" in l and "| T = 0.01, once, seed 1 |" in l for l in two)
    assert not any("PPO" in l and "T = 1, 2 per game" in l for l in two)
    means = [l for l in two if "mean of" in l]             # SFT at T = 1 has both seeds; PPO and greedy SFT do not
    assert len(means) == 1 and "| **this repository: SFT** |" in means[0] and "T = 1, 2 per game, mean of 2 seeds" in means[0]
    both = {**rows, "SFT seed 1 (T = 1)": {**m, "eval/valid_unseen/success_rate": 0.15}}
    lines = table.readme_table(both, {**settings, "seeds": [0, 1]}).splitlines()
    mean = "| **this repository: SFT** | 0.97M, `official-base-4layers` | T = 1, 2 per game, mean of 2 seeds |"
    assert f"{mean} **10.0 +- 1.4** | **10.0 +- 0.7** |" in lines               # SE: sqrt(0.02^2 + 0.02^2) / 2
    assert lines.index(f"{mean} **10.0 +- 1.4** | **10.0 +- 0.7** |") == 3          # right under the base's row
    one = table.readme_table({"SFT seed 0 (T = 1)": m}, {**settings, "seeds": [0]})
    assert "| T = 1, 2 per game | 10.0 +- 2.0 |" in one and "seed 0" not in one   # one seed: as before


def test_a_ppo_probe_may_set_a_setting_newer_than_the_run_and_refuses_bad_ones(tmp_path):
    step = _script("diagnostics/ppo_step")
    saved = {"ppo_learning_rate": 5e-4, "step_return": "all", "seeds": [0]}      # a run saved before refused_credit
    probe = step.probe_settings(saved, {"refused_credit": "negative", "ppo_learning_rate": "1e-3"})
    assert probe["refused_credit"] == "negative" and probe["ppo_learning_rate"] == 1e-3 and saved["ppo_learning_rate"] == 5e-4
    with pytest.raises(SystemExit, match="--set sft_steps: not one of"):
        step.probe_settings(saved, {"sft_steps": "3"})
    src = tmp_path / "run"; src.mkdir()
    from alfworld_rl.mini.recipe import OFFICIAL
    (src / "settings.json").write_text(json.dumps({k: v for k, v in json.loads(json.dumps(dataclasses.asdict(OFFICIAL))).items()
                                                   if k != "refused_credit"}))
    with pytest.raises(SystemExit, match="refused_credit must be one of all, negative"):
        step.run(src, tmp_path / "out", {"refused_credit": "sometimes"})
    assert not (tmp_path / "out").exists()
    two = {**saved, "seeds": [0, 1]}
    assert step.probe_settings(two, {}, [1])["seeds"] == [1]                  # a subset of the run's seeds
    with pytest.raises(SystemExit, match=r"--seeds: 2 is not one of the run's seeds \[0, 1\]"):
        step.probe_settings(two, {}, [2])
    other = tmp_path / "other"; other.mkdir(); (other / "settings.json").write_text(json.dumps({"seeds": [0]}))
    with pytest.raises(SystemExit, match="exists and holds another probe"):       # rerun to resume, but never over another probe
        step.run(src, other, {"refused_credit": "negative"})
    assert json.loads((other / "settings.json").read_text()) == {"seeds": [0]}
    with pytest.raises(SystemExit, match="no PPO metrics of seed 3"):
        step.compare(src, other, 3)


def test_takes_are_split_by_whether_the_object_is_in_sight():
    lost = _script("official/lost_episodes")
    r = {"steps": [
        _step("take mug 1 from desk 1", False),           # before any place: not counted
        _step("go to desk 1", True, "You arrive at desk 1. On the desk 1, you see a pen 1."),
        _step("take mug 1 from desk 1", False),           # on arrival, no mug in sight: tried, refused
        _step("take mug 1 from desk 1", False),           # again: any step only
        _step("go to cabinet 1", True, "You arrive at cabinet 1. The cabinet 1 is closed."),
        _step("open cabinet 1", True, "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 4."),
        _step("take mug 7 from cabinet 1", False),        # on arrival (after open), mug 4 in sight: a number not there
        _step("take mug 4 from cabinet 1", True, "You pick up the mug 4 from the cabinet 1."),
        _step("go to desk 1", True, "You arrive at desk 1. On the desk 1, you see a mug 2."),
        _step("take mug 2 from desk 1", False)]}          # hands full: not counted
    got = lost.takes_by_sight(r, "mug")
    assert got[("on arrival", "not in sight")] == [2, 1, 0, 1]   # after go to desk 1, after go to cabinet 1 (closed)
    assert got[("any step", "not in sight")] == [4, 2, 0, 2]     # the two takes, the go to cabinet 1, the open
    assert got[("on arrival", "in sight")] == [1, 1, 0, 1]
    assert got[("any step", "in sight")] == [2, 2, 1, 1]
