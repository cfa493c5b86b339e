"""ALFWorld's official games (issue 47): discovery of the archive's reconstructed and of a full `traj_data.json`,
the reference rows script on a few games, the official preset's flags, installing from a local archive; the slow
set runs the official recipe at its smallest settings. Tests that need the games skip where they are absent."""
import json, os, shutil, subprocess, sys
from collections import Counter
from pathlib import Path

import pytest

from alfworld_rl.env.data import discover_games

CLI = str(Path(sys.executable).parent / "alfworld-rl")
REPO = Path(__file__).resolve().parent.parent


def cli(*args, cwd=None, timeout=900, env=None):
    return subprocess.run([CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def one_line(r, status: int) -> str:
    "The one stderr line of a refused command with `status`."
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == status and len(lines) == 1, (r.returncode, r.stderr[-2000:])
    return lines[0]


def test_discovers_the_official_games(official_root):
    counts = {s: len(discover_games(official_root, s)) for s in ("train", "valid_seen", "valid_unseen")}
    assert counts == {"train": 3553, "valid_seen": 140, "valid_unseen": 134}
    types = Counter(g.task_type for g in discover_games(official_root, "valid_unseen"))
    assert types == {"pick_clean_then_place_in_recep": 31, "pick_heat_then_place_in_recep": 23, "pick_and_place_simple": 24,
                     "pick_cool_then_place_in_recep": 21, "look_at_obj_in_light": 18, "pick_two_obj_and_place": 17}


# A real download's traj_data.json carries much more than the reconstructed one (annotations, the ALFRED plan, the
# scene's object poses); the fields below are the shape of ALFWorld's json_2.1.1 files, with short values.
FULL_TRAJ = {
    "images": [{"high_idx": 0, "image_name": "000000000.jpg", "low_idx": 0}],
    "plan": {"high_pddl": [{"discrete_action": {"action": "GotoLocation", "args": ["countertop"]}, "high_idx": 0}],
             "low_actions": [{"api_action": {"action": "MoveAhead"}, "high_idx": 0}]},
    "repeat_idx": 0,
    "scene": {"dirty_and_empty": False, "floor_plan": "FloorPlan10", "init_action": {"action": "TeleportFull"},
              "object_poses": [{"objectName": "Apple_1", "position": {"x": 0.1, "y": 0.9, "z": -1.2}}],
              "object_toggles": [], "random_seed": 1, "scene_num": 10},
    "task_id": "trial_T20190909_000000_000000",
    "turk_annotations": {"anns": [{"assignment_id": "A", "high_descs": ["Go to the counter."],
                                   "task_desc": "Put a clean apple in the fridge.", "votes": [1, 1, 1]}]},
}


def test_a_full_traj_data_json_is_read_and_played(official_root, tmp_path):
    from alfworld_rl.rl.policies import ExpertPolicy
    from alfworld_rl.rl.rollout import RolloutConfig, run_rollout
    from alfworld_rl.backends.local_models import load_tokenizer
    game = discover_games(official_root, "valid_unseen")[0]
    rel = game.id.split(":", 1)[1]
    dst = tmp_path / "root" / "json_2.1.1" / "valid_unseen" / rel
    shutil.copytree(Path(game.game_file).parent, dst)
    reconstructed = json.loads((dst / "traj_data.json").read_text())
    full = {**FULL_TRAJ, "task_type": reconstructed["task_type"], "pddl_params": reconstructed["pddl_params"]}
    (dst / "traj_data.json").write_text(json.dumps(full))
    [found] = discover_games(tmp_path / "root", "valid_unseen")
    assert (found.id, found.task_type) == (game.id, game.task_type)
    tok = load_tokenizer("mini-base")
    batch = run_rollout(ExpertPolicy(tok), tok, [found], RolloutConfig(group_size=1, max_episode_steps=50, context="window",
                        engine="fast", temperature=0.0, max_assistant_tokens=256, max_trajectory_tokens=12000).validate())
    assert batch.trajectories[0].won


def test_the_searching_expert_wins_where_receptacles_share_a_spot(official_root):
    "Room 304's desk and drawers share one spot: every branch still wins, with no refused command (24 demonstrations were lost)."
    from alfworld_rl.rl.policies import SearchingExpertPolicy
    from alfworld_rl.rl.rollout import RolloutConfig, run_rollout
    from alfworld_rl.backends.local_models import load_tokenizer
    ids = {"train:look_at_obj_in_light-Statue-None-DeskLamp-304/trial_T20190909_011855_674463",
           "train:look_at_obj_in_light-AlarmClock-None-DeskLamp-304/trial_T20190907_170557_255365",
           "train:pick_two_obj_and_place-CD-None-Drawer-304/trial_T20190907_230204_336041"}
    games = [g for g in discover_games(official_root, "train") if g.id in ids]
    assert len(games) == 3
    tok = load_tokenizer("mini-base")
    batch = run_rollout(SearchingExpertPolicy(tok, 2), tok, games, RolloutConfig(group_size=2, max_episode_steps=50,
                        context="window", engine="fast", temperature=0.0, max_assistant_tokens=256,
                        max_trajectory_tokens=6000).validate())
    assert [(t.won, t.invalid_action_count) for t in batch.trajectories] == [(True, 0)] * 6


def test_slipping_demonstrations_win_and_learn_only_the_experts_commands(official_root):
    "With --slip-rate, demonstrations on official games still all win; each refused turn is a slip (a `take`), and SFT's rows leave them out."
    from alfworld_rl.backends.local_models import load_tokenizer
    from alfworld_rl.runs.sft import SFTConfig, expert_trajectories, sft_rows
    games = discover_games(official_root, "train")[:24]
    tok = load_tokenizer("mini-base")
    config = lambda rate: SFTConfig(base_model="mini-base", demos_per_game=2, max_detours=2, slip_rate=rate, context="window",
                                    engine="fast", max_episode_steps=50, max_trajectory_tokens=6000)
    plain, slipping = (expert_trajectories(games, tok, config(rate), progress=False) for rate in (0.0, 0.3))
    assert len(plain) == len(slipping) == 48
    refused = [s for t in slipping for s in t.steps if not s.admissible]
    assert refused and all(s.action.startswith("take ") and s.observation == "Nothing happens." for s in refused)
    # the expert's own commands are the same with and without slips, and they are exactly what the rows teach
    admitted = lambda ts: [[s.action for s in t.steps if s.admissible] for t in ts]
    assert admitted(slipping) == admitted(plain)
    assert [len(sft_rows(t)) for t in slipping] == [len(a) for a in admitted(slipping)]


def test_reference_rows_on_a_few_official_games(official_root, tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "docs" / "official" / "reference_rows.py"), "--data-root", official_root,
                        "--games", "3", "--no-bases", "--random-episodes", "2", "--out-dir", tmp_path],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert rows["games"] == {"valid_seen": 3, "valid_unseen": 3}
    walk, expert = rows["rows"]["walkthrough"], rows["rows"]["searching expert (SFT's demonstrator)"]
    assert walk["all"]["success"] == 100.0 and walk["all"]["episodes"] == 6
    assert expert["all"]["success"] == 100.0
    random_row = rows["rows"]["random admissible (2 per game)"]
    assert random_row["all"]["episodes"] == 12 and random_row["all"]["success"] < 100.0
    assert (tmp_path / "rows.md").read_text().startswith("| player |")


# ---- the official preset's flags: one line, status 2, nothing written ------------------------------------------

@pytest.mark.parametrize("args, says", [
    (["--settings", "official", "--data-root", "{tmp}/nowhere"], "--data-root"),
    (["--preset", "officail"], "--settings"),
    (["--settings", "official", "--data-root", "{tmp}/empty"], "--data-root"),
    (["--settings", "official", "--train-games", "0"], "--train-games"),
    (["--settings", "official", "--episodes-per-game", "0"], "--episodes-per-game"),
])
def test_bad_official_flags_are_one_line(args, says, tmp_path):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out"
    r = cli("mini", *[a.format(tmp=tmp_path) for a in args], "--out-dir", out, "--no-report", cwd=tmp_path)
    assert says in one_line(r, 2)
    assert not out.exists()


def test_download_from_a_local_archive(tmp_path):
    import tarfile
    src = tmp_path / "src"
    trial = src / "json_2.1.1" / "valid_unseen" / "look_at_obj_in_light-Book-None-DeskLamp-308" / "trial_T1"
    trial.mkdir(parents=True)
    from alfworld_rl.env.scenes import alfred_logic_files
    (trial / "game.tw-pddl").write_text("{}")
    with tarfile.open(tmp_path / "games.tar.xz", "w:xz") as t: t.add(src / "json_2.1.1", arcname="json_2.1.1")
    bad = cli("download", "--data-dir", tmp_path / "root", "--archive", tmp_path / "missing.tar.xz")
    assert "--archive: no such file" in one_line(bad, 2) and not (tmp_path / "root").exists()
    junk = tmp_path / "junk.zip"; junk.write_text("not an archive")
    bad = cli("download", "--data-dir", tmp_path / "root", "--archive", junk)
    assert "neither a zip nor a tar archive" in one_line(bad, 2)
    cli("download", "--data-dir", tmp_path / "root", "--archive", tmp_path / "games.tar.xz")
    assert (tmp_path / "root" / "json_2.1.1" / "valid_unseen" / trial.relative_to(src / "json_2.1.1" / "valid_unseen") / "game.tw-pddl").is_file()
    assert all((tmp_path / "root" / "logic" / f.name).is_file() for f in alfred_logic_files())


def test_download_installs_the_official_archive(tmp_path):
    archive = next((p for p in (REPO.parent / "shared" / "alfworld", Path("/work/shared/alfworld"))
                    if (p / "alfworld-official-json_2.1.1.tar.xz").is_file()), None)
    if archive is None: pytest.skip("the official archive (../shared/alfworld) is absent")
    r = cli("download", "--data-dir", tmp_path / "root", "--archive", archive / "alfworld-official-json_2.1.1.tar.xz")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "train: 3553 games" in r.stdout and "valid_seen: 140 games" in r.stdout and "valid_unseen: 134 games" in r.stdout


# ---- the official recipe at its smallest settings (slow) --------------------------------------------------------

@pytest.mark.slow
def test_official_recipe_smallest(official_root, tmp_path):
    from alfworld_rl.core import read_jsonl
    from alfworld_rl.mini import recipe as mini
    s = mini.settings_from("official", data_root=str(official_root), train_games=8, valid_games=2, sft_steps=2,
                           sft_games_per_batch=4, ppo_steps=2, ppo_games_per_batch=2, group_size=2, max_episode_steps=20,
                           base_model="mini-base", ppo_minibatches=1)
    paths = mini.run_mini(s, tmp_path / "official", progress=False)
    manifest = json.loads((paths.data / "games.json").read_text())
    assert manifest["source"] == str(official_root) and len(manifest["ids"]["train"]) == 8
    assert not set(manifest["ids"]["train"]) & set(manifest["ids"]["valid_seen"] + manifest["ids"]["valid_unseen"])
    labels = {p.stem for p in (paths.root / "eval").glob("*.jsonl")}
    assert labels == {"base", "sft-seed0", "ppo-seed0", "sft-seed0-greedy", "ppo-seed0-greedy"}
    greedy = read_jsonl(paths.eval_file("ppo-seed0-greedy"))[-1]["metrics"]
    sampled = read_jsonl(paths.eval_file("ppo-seed0"))[-1]["metrics"]
    base = read_jsonl(paths.eval_file("base"))[-1]["metrics"]
    assert greedy["eval/all/episodes"] == 4 and sampled["eval/all/episodes"] == 8 and base["eval/all/episodes"] == 4
    settings = json.loads((paths.root / "settings.json").read_text())
    assert settings["data_root"] == str(official_root) and settings["max_episode_steps"] == 20
    assert len(read_jsonl(paths.ppo_run(0) / "checkpoints.jsonl")) == 1        # saved every 2 updates: at update 2
    again = mini.run_mini(s, tmp_path / "official", progress=False)            # finished: nothing redone
    assert [r["stage"] for r in read_jsonl(again.stages)].count("ppo") == 1
    r = subprocess.run([sys.executable, str(REPO / "docs" / "official" / "official_table.py"), paths.root, "--out",
                        tmp_path / "table"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "official result: base=" in r.stdout and "(valid_unseen success, 2 episodes per game, 1 seeds)" in r.stdout
    assert (tmp_path / "table" / "success.png").is_file() and (tmp_path / "table" / "table.md").is_file()
    table = [sys.executable, str(REPO / "docs" / "official" / "official_table.py"), paths.root]
    only = subprocess.run([*table, "--seeds", "0"], capture_output=True, text=True, timeout=300)   # a seed added later is left out
    assert only.returncode == 0 and only.stdout.splitlines()[-1] == r.stdout.splitlines()[-1], only.stderr[-2000:]
    bad = subprocess.run([*table, "--seeds", "3"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--seeds must be distinct seeds of the run (0); got [3]" in bad.stderr, bad.stderr


# ---- a checkpoint names a shipped base by its name -----------------------------------------------------------

def test_checkpoints_name_a_shipped_base_by_its_name(tmp_path):
    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.backends.tiny_model import shipped_model_path
    with make_service_client("local", device="cpu", checkpoint_root=tmp_path / "ckpt") as svc:
        tc = svc.create_lora_training_client(str(shipped_model_path("mini-base")), rank=4, seed=0)   # given by its directory
        paths = [tc.save_weights_for_sampler("s").result().path, tc.save_state("t").result().path]
    for path in paths:
        names = [f.name for f in Path(path).iterdir()]
        assert "README.md" not in names, names
        assert json.loads((Path(path) / "adapter_config.json").read_text())["base_model_name_or_path"] == "mini-base"
        meta = Path(path) / ("sampler.json" if "sampler.json" in names else "trainer_state.json")
        assert json.loads(meta.read_text())["base_model"] == "mini-base"
        assert str(tmp_path) not in (Path(path) / "adapter_config.json").read_text()


def test_the_shipped_official_checkpoints_name_their_base_and_load():
    "Every shipped official checkpoint is a sampler LoRA of `official-base-4layers`, named by name, no machine path inside."
    from alfworld_rl.backends.local_trainer import check_checkpoint
    shipped = sorted(p for p in (REPO / "models").glob("official-*-seed*") if p.is_dir())
    assert shipped, "no official checkpoint under models/"
    for ckpt in shipped:
        check_checkpoint(str(ckpt), "sampler", "--model-path", base_model="official-base-4layers")
        for name in ("sampler.json", "adapter_config.json"):
            text = (ckpt / name).read_text()
            assert "/work/" not in text and '"/' not in text, f"{ckpt.name}/{name} records a path"
        assert json.loads((ckpt / "sampler.json").read_text())["base_model"] == "official-base-4layers"
