"""Generated games: every task type, solvable by the stored walkthrough in the real engine (ALFWorld's own
wrappers), ALFRED's rules, seen/unseen layout separation, byte-identical output, resume, CLI and bad flags,
and conformance with alfworld's own `AlfredTWEnv` loader."""
import json, os, re, subprocess, sys, textwrap, time
from pathlib import Path

import pytest

from alfworld_rl.cli import main
from alfworld_rl.env.data import TASK_TYPES, discover_games
from alfworld_rl.env.generate import SMALL_ROOM, MANIFEST, generate_dataset, import_alfworld
from alfworld_rl.env.scenes import ROOMS, alfred_constants, can_hold, room_kind_of_scene

REPO = Path(__file__).resolve().parent.parent


def _play_with_alfworld_wrappers(game_file: str, commands: list[str]):
    "Replay `commands` in TextWorld's PDDL env wrapped by ALFWorld's AlfredDemangler; final state."
    import textworld
    from alfworld_rl.core import patch_textworld
    patch_textworld()
    tw_env = import_alfworld("alfworld.agents.environment.alfred_tw_env")
    infos = textworld.EnvInfos(won=True, admissible_commands=True)
    env = textworld.start(game_file, infos, wrappers=[tw_env.AlfredDemangler(), tw_env.AlfredInfos])
    state = env.reset()
    assert not state["won"], "the goal must not hold at the start"
    for i, cmd in enumerate(commands):
        assert cmd in state["admissible_commands"], (cmd, state["admissible_commands"])
        state, _, _ = env.step(cmd)
        assert i == len(commands) - 1 or not state["won"], "won before the walkthrough's last step"
    return state


def _scene(game) -> int:
    return int(Path(game.game_file).parent.parent.name.rsplit("-", 1)[1])


def test_every_task_type_is_won_by_its_walkthrough(small_data_root):
    train = discover_games(small_data_root, "train")
    assert {g.task_type for g in train} == set(TASK_TYPES)
    for split in ("train", "valid_seen", "valid_unseen"):
        for g in discover_games(small_data_root, split):
            data = json.loads(Path(g.game_file).read_text())
            assert data["solvable"] is True and 1 <= len(data["walkthrough"]) <= 30
            assert "UNKNOWN GOAL" not in data["grammar"]
            state = _play_with_alfworld_wrappers(g.game_file, data["walkthrough"])
            assert state["won"], g.id     # and not before the last step (checked while replaying)


def test_layout_and_names_follow_alfworld(small_data_root):
    for g in discover_games(small_data_root, "train"):
        trial = Path(g.game_file).parent
        task, obj, mrecep, recep, scene = trial.parent.name.split("-")
        traj = json.loads((trial / "traj_data.json").read_text())
        assert task == traj["task_type"] == g.task_type and mrecep == "None"
        assert obj == traj["pddl_params"]["object_target"]
        assert recep == (traj["pddl_params"]["toggle_target"] or traj["pddl_params"]["parent_target"])
        assert room_kind_of_scene(int(scene)) in alfred_constants().GOALS_VALID[task]
        assert re.fullmatch(r"trial_T\d{8}_\d{6}_\d{6}", trial.name)
        problem = json.loads(Path(g.game_file).read_text())["pddl_problem"]
        # ALFRED's placement rule holds for every object that starts in a receptacle
        types = dict(re.findall(r"\((?:objectType|receptacleType) (\S+) (\w+)Type\)", problem))
        for o, r in re.findall(r"\(inReceptacle (\S+) (\S+)\)", problem):
            lamp = types[o] in ("DeskLamp", "FloorLamp")
            assert lamp or can_hold(types[r], types[o]), (types[o], types[r])
            assert types[o] in ROOMS[room_kind_of_scene(int(scene))].objects + ROOMS[room_kind_of_scene(int(scene))].lamps
        # ALFRED-style ids, which ALFWorld's demangler renders as "apple 1"
        ids = re.findall(r"^\s*([A-Za-z]\S*) - (?:object|receptacle)$", problem, re.M)
        assert ids and all(re.fullmatch(r"[A-Za-z]+(_bar__(plus|minus)_\d\d_dot_\d\d){3}(_bar_\w+Basin)?", i) for i in ids)
        state = _play_with_alfworld_wrappers(g.game_file, [])
        for cmd in state["admissible_commands"]:
            if cmd.startswith("go to "): assert re.fullmatch(r"go to [a-z]+ \d+", cmd), cmd


def test_seen_and_unseen_layouts(small_data_root):
    train = {_scene(g) for g in discover_games(small_data_root, "train")}
    seen = {_scene(g) for g in discover_games(small_data_root, "valid_seen")}
    unseen = {_scene(g) for g in discover_games(small_data_root, "valid_unseen")}
    assert seen and unseen and seen <= train and not unseen & train
    # the same scene number means the same room: identical receptacle declarations
    def receptacles(g):
        p = json.loads(Path(g.game_file).read_text())["pddl_problem"]
        return sorted(re.findall(r"^\s*([A-Za-z]\S*) - receptacle$", p, re.M))
    by_scene = {}
    for split in ("train", "valid_seen"):
        for g in discover_games(small_data_root, split): by_scene.setdefault(_scene(g), []).append(receptacles(g))
    for rooms in by_scene.values(): assert all(r == rooms[0] for r in rooms)


def _tree(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_arguments_give_identical_bytes_and_resume(tmp_path):
    args = dict(train=1, valid_unseen=1, seed=7, **SMALL_ROOM)
    a = generate_dataset(tmp_path / "a", **args)
    # a second run in a fresh interpreter with another hash seed (set order must not leak into the output)
    code = (f"from alfworld_rl.env.generate import generate_dataset, SMALL_ROOM; "
            f"generate_dataset({str(tmp_path / 'b')!r}, train=1, valid_unseen=1, seed=7, **SMALL_ROOM)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONHASHSEED": "123"})
    assert _tree(a) == _tree(tmp_path / "b")
    assert _tree(a) != _tree(generate_dataset(tmp_path / "c", **{**args, "seed": 8}))
    # resume after an interruption: the last game and its manifest line are lost, the rerun restores them
    full = _tree(a)
    manifest = a / MANIFEST
    lines = manifest.read_text().splitlines(keepends=True)
    last = json.loads(lines[-1])
    manifest.write_text("".join(lines[:-1]) + lines[-1][:10])      # a half-written line
    import shutil; shutil.rmtree(a / last["path"])
    generate_dataset(a, **args)
    assert _tree(a) == full


def test_cli_generate_and_bad_flags(tmp_path, capsys):
    out = tmp_path / "g"
    rc = main(["generate", "--out", str(out), "--train", "1", "--valid-unseen", "1", "--task-types",
               "pick_heat_then_place_in_recep", "--min-receptacles", "4", "--max-receptacles", "5",
               "--distractors", "2"])
    assert rc == 0
    assert re.search(r"wrote 2 games to .* \([\d.]+ games/s, \d+ candidates, [\d.]+ CPU s per game\)", capsys.readouterr().out)
    games = discover_games(out, "train") + discover_games(out, "valid_unseen")
    assert {g.task_type for g in games} == {"pick_heat_then_place_in_recep"}
    bad = [(["--train", "-1"], "--train"), (["--train", "1", "--min-receptacles", "2"], "--min-receptacles"),
           (["--train", "1", "--max-receptacles", "3"], "--max-receptacles"),
           (["--train", "1", "--distractors", "500"], "--distractors"), (["--valid-seen", "2"], "--valid-seen"),
           (["--train", "1", "--task-types", "cook_dinner"], "--task-types"), ([], "nothing to generate"),
           (["--train", "1", "--workers", "0"], "--workers must be an integer in 1..64"),
           (["--train", "1", "--workers", "65"], "--workers must be an integer in 1..64"),
           (["--train", "1", "--candidate-seconds", "0"], "--candidate-seconds must be a number in (0, 3600]"),
           (["--train", "1", "--candidate-seconds", "4000"], "--candidate-seconds must be a number in (0, 3600]"),
           (["--train", "1", "--candidate-memory-mb", "8"], "--candidate-memory-mb must be an integer in 16..1048576")]
    for flags, name in bad:
        rc = main(["generate", "--out", str(tmp_path / "bad")] + flags)
        err = capsys.readouterr().err
        assert rc == 2 and name in err and len(err.strip().splitlines()) == 1, (flags, err)
    assert not (tmp_path / "bad").exists()      # bad input writes nothing
    rc = main(["generate", "--out", str(out), "--train", "3"])     # other arguments on a used folder
    assert rc == 1 and "other arguments" in capsys.readouterr().err


ALFRED_TW_ENV_CHECK = textwrap.dedent("""
    import json, os, sys
    from alfworld_rl.core import patch_textworld
    patch_textworld()
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv
    root = os.environ["ALFWORLD_DATA"]
    config = {"dataset": {"data_path": root + "/json_2.1.1/train", "eval_id_data_path": root + "/json_2.1.1/valid_seen",
                          "eval_ood_data_path": root + "/json_2.1.1/valid_unseen", "num_train_games": -1, "num_eval_games": -1},
              "logic": {"domain": root + "/logic/alfred.pddl", "grammar": root + "/logic/alfred.twl2"},
              "env": {"type": "AlfredTWEnv", "goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6],
                      "domain_randomization": False, "expert_type": "handcoded"},
              "general": {"training_method": "dagger"}, "dagger": {"training": {"max_nb_steps_per_episode": 50}}}
    for split in ("train", "eval_in_distribution", "eval_out_of_distribution"):
        tw = AlfredTWEnv(config, train_eval=split)
        if tw.num_games == 0: sys.exit(f"no games for {split}")   # init_env would spin forever on none
        print(split, tw.num_games)
    tw = AlfredTWEnv(config, train_eval="eval_out_of_distribution")
    env = tw.init_env(batch_size=1)
    obs, infos = env.reset()
    game = json.load(open(infos["extra.gamefile"][0]))
    assert "Your task is to: " in obs[0] and "UNKNOWN GOAL" not in obs[0], obs[0]
    for cmd in game["walkthrough"]:
        assert cmd in infos["admissible_commands"][0], (cmd, infos["admissible_commands"][0])
        obs, scores, dones, infos = env.step([cmd])
    assert infos["won"][0], obs
    env.close()
    print("WON", len(game["walkthrough"]))
""")


def test_output_loads_in_alfworlds_own_env(small_data_root):
    env = {**os.environ, "ALFWORLD_DATA": str(small_data_root)}
    r = subprocess.run([sys.executable, "-c", ALFRED_TW_ENV_CHECK], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "train 6" in r.stdout and "eval_in_distribution 3" in r.stdout and "WON" in r.stdout


@pytest.mark.slow
def test_default_rooms_resemble_alfworld(tmp_path):
    root = generate_dataset(tmp_path / "d", train=6, valid_unseen=2, seed=3)
    for split in ("train", "valid_unseen"):
        for g in discover_games(root, split):
            data = json.loads(Path(g.game_file).read_text())
            n = len(re.findall(r"^\s*[A-Za-z]\S* - receptacle$", data["pddl_problem"], re.M))
            assert 15 <= n <= 40 and 1 <= len(data["walkthrough"]) <= 30
            assert _play_with_alfworld_wrappers(g.game_file, data["walkthrough"])["won"]


# --- workers and candidate bounds (alfworld_rl.env.generate_workers) -----------------------------------------------

def test_worker_count_does_not_change_the_files(tmp_path):
    args = dict(train=6, valid_seen=2, valid_unseen=2, seed=13, **SMALL_ROOM)
    one = generate_dataset(tmp_path / "one", workers=1, **args)
    two = generate_dataset(tmp_path / "two", workers=2, **args)
    assert _tree(one) == _tree(two)
    # and they are the games the TextWorld check makes, one slot after another in this process
    from alfworld_rl.env.generate import assign_slots, build_game
    for s in assign_slots(6, 2, 2, seed=13):
        g, why = build_game(s.split, s.index, s.task_type, s.scene, seed=13, **SMALL_ROOM)
        trial = one / "json_2.1.1" / s.split / g.folder / g.trial
        assert json.loads((trial / "game.tw-pddl").read_text()) == g.game
        assert json.loads((trial / "traj_data.json").read_text()) == g.traj


def test_candidate_over_the_time_bound_is_dropped_and_reported(tmp_path, capsys):
    out = tmp_path / "g"
    rc = main(["generate", "--out", str(out), "--train", "2", "--min-receptacles", "4", "--max-receptacles", "5",
               "--distractors", "2", "--workers", "2", "--candidate-seconds", "0.001"])
    err = capsys.readouterr().err.strip().splitlines()[-1]       # after the progress bar
    assert rc == 1 and err.startswith("alfworld-rl generate: error: could not make game 0 of train"), err
    assert "25 candidates dropped (25 over --candidate-seconds 0.001, 0 over --candidate-memory-mb 2048" in err
    # nothing was written for the slot; the folder resumes with a workable bound
    assert [json.loads(l)["type"] for l in (out / MANIFEST).read_text().splitlines()] == ["config"]
    rc = main(["generate", "--out", str(out), "--train", "2", "--min-receptacles", "4", "--max-receptacles", "5",
               "--distractors", "2", "--workers", "2"])
    assert rc == 0 and "dropped 0 candidates" in capsys.readouterr().out


def test_candidate_over_the_memory_bound_is_dropped(tmp_path):
    from alfworld_rl.core import UserError
    with pytest.raises(UserError, match=r"25 candidates dropped \(0 over --candidate-seconds 3, 25 over --candidate-memory-mb 16"):
        generate_dataset(tmp_path / "m", train=1, seed=0, workers=1, candidate_memory_mb=16, **SMALL_ROOM)


def _game_lines(root: Path) -> list[dict]:
    return [json.loads(l) for l in (root / MANIFEST).read_text().splitlines() if '"game"' in l]


def test_interrupt_and_resume_with_workers(tmp_path):
    import signal
    flags = ["--train", "30", "--valid-unseen", "6", "--seed", "4", "--min-receptacles", "4", "--max-receptacles", "6",
             "--distractors", "3"]
    whole = tmp_path / "whole"
    assert main(["generate", "--out", str(whole), "--workers", "1"] + flags) == 0
    part = tmp_path / "part"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from alfworld_rl.cli import main; sys.exit(main(sys.argv[1:]))",
                             "generate", "--out", str(part), "--workers", "2"]
                            + flags, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # even when launched with SIGINT ignored
    t0 = time.time()
    while time.time() - t0 < 240:
        if (part / MANIFEST).exists() and len(_game_lines(part)) >= 5: break
        if proc.poll() is not None: break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err          # interrupted mid-run: the manifest holds a prefix of the games
    written = _game_lines(part)
    assert 5 <= len(written) < 36
    assert main(["generate", "--out", str(part), "--workers", "2"] + flags) == 0
    lines = _game_lines(part)
    assert len(lines) == len({(r["split"], r["index"]) for r in lines}) == 36     # nothing lost, nothing twice
    assert _tree(part) == _tree(whole)


@pytest.mark.slow
def test_a_slow_default_room_candidate_gives_way(tmp_path, capsys):
    "Seed 2, train slot 11 (pick_two_obj_and_place): its first candidate searches for 10-16 s, far over a 4 s bound."
    out = tmp_path / "d"
    assert main(["generate", "--out", str(out), "--train", "12", "--seed", "2", "--candidate-seconds", "4"]) == 0
    assert re.search(r"dropped [1-9]\d* candidates over the bounds in this run; in all [1-9]\d* over --candidate-seconds",
                     capsys.readouterr().out)
    rec = next(r for r in _game_lines(out) if r["index"] == 11)
    assert {"attempt": 0, "why": "time"} in rec["dropped"]
    traj = json.loads((out / rec["path"] / "traj_data.json").read_text())
    assert traj["generator"]["attempt"] == len(rec["dropped"]) > 0
    data = json.loads((out / rec["path"] / "game.tw-pddl").read_text())
    objects = re.findall(r"^\s*[A-Za-z]\S* - object$", data["pddl_problem"], re.M)
    assert len(objects) <= 3 + (20 >> len(rec["dropped"]))      # after a drop, half the distractors
    assert _play_with_alfworld_wrappers(str(out / rec["path"] / "game.tw-pddl"), data["walkthrough"])["won"]
