"""The fast engine against TextWorld, the reference: every field of every step on generated games."""
import json, random
from pathlib import Path

import pytest

from alfworld_rl.env.data import discover_games
from alfworld_rl.env.branches import BranchEnv, EnvGroup, FastBranchEnv, compare_engines
from alfworld_rl.env.fast_engine import EngineUnsupported, FastEnv, FastGame, load_game
from alfworld_rl.env.generate import TASK_TYPES, generate_dataset


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):
    "One small game of every task type (rooms of 4-8 receptacles)."
    root = tmp_path_factory.mktemp("fast_engine_games")
    return generate_dataset(root, train=len(TASK_TYPES), seed=11, task_types=list(TASK_TYPES),
                            min_receptacles=4, max_receptacles=8, distractors=4)


def test_every_task_type_matches_textworld(small_root):
    games = discover_games(small_root, "train")
    assert sorted({g.task_type for g in games}) == sorted(TASK_TYPES)
    total = 0
    for i, g in enumerate(games):
        played, mismatches = compare_engines(g.game_file, steps=25, seed=i)
        assert mismatches == []
        total += played
    assert total == 25 * len(games)


def test_walkthrough_wins_in_both(small_root):
    for g in discover_games(small_root, "train"):
        walk = json.loads(Path(g.game_file).read_text())["walkthrough"]
        ref, fast = BranchEnv(), FastBranchEnv()
        assert ref.reset(g.game_file, 100) == fast.reset(g.game_file, 100)
        for cmd in walk:
            a, b = ref.step(cmd), fast.step(cmd)
            assert a == b
        assert b[3] is True and b[1] == 1.0


def test_envgroup_fast_engine_matches_textworld(small_root):
    game = discover_games(small_root, "train")[0]
    walk = json.loads(Path(game.game_file).read_text())["walkthrough"]
    results = {}
    for engine in ("textworld", "fast"):
        with EnvGroup(game, group_size=2, max_steps=len(walk) + 2, engine=engine) as g:
            starts = g.reset()
            out = [(s.task, s.observation, s.admissible_commands) for s in starts]
            for cmd in walk: out.append([(r.observation, r.score, r.done, r.won, r.admissible, r.admissible_commands, r.truncated)
                                         for r in g.step([cmd, "look"])])
            results[engine] = out
    assert results["fast"] == results["textworld"]


def test_bad_engine_name(small_root):
    game = discover_games(small_root, "train")[0]
    with pytest.raises(ValueError, match="engine must be one of textworld, fast"):
        EnvGroup(game, 1, 5, engine="quick")


def test_refuses_unsupported_constructs(small_root):
    data = json.loads(Path(discover_games(small_root, "train")[0].game_file).read_text())
    bad = dict(data, pddl_domain=data["pddl_domain"].replace("(:requirements", "(:requirements :numeric-fluents", 1))
    with pytest.raises(EngineUnsupported, match="unsupported requirement"):
        FastGame(bad)
    bad = dict(data, pddl_domain=data["pddl_domain"].replace("(atLocation ?a ?l)\n        )", "(forall (?x - object) (pickupable ?x)))", 1))
    with pytest.raises(EngineUnsupported, match="universal quantification"):
        FastGame(bad)
    bad = dict(data, grammar=data["grammar"] + '\nrule foo { x :: "y"; }\n')
    with pytest.raises(EngineUnsupported, match="unsupported construct 'rule'"):
        FastGame(bad)
    bad = dict(data, grammar=data["grammar"].replace("#look.feedback#\\n\\n#task#", "#look.feedback#\\n\\n#nosuchrule#"))
    env = FastEnv(FastGame(bad))
    with pytest.raises(EngineUnsupported, match="unknown symbol '#nosuchrule#'"):
        env.reset()


def test_engine_failure_is_an_env_error(small_root, tmp_path):
    data = json.loads(Path(discover_games(small_root, "train")[0].game_file).read_text())
    data["grammar"] = data["grammar"].replace("#look.feedback#\\n\\n#task#", "#nosuchrule#")
    f = tmp_path / "game.tw-pddl"; f.write_text(json.dumps(data))
    from alfworld_rl.env.branches import EnvError
    with pytest.raises(EnvError, match="nosuchrule"):
        EnvGroup(str(f), 1, 5, engine="fast").reset()


@pytest.mark.slow
def test_larger_rooms_match_textworld(tmp_path):
    root = generate_dataset(tmp_path, train=12, seed=5, min_receptacles=30, max_receptacles=60, distractors=40)
    for i, g in enumerate(discover_games(root, "train")):
        played, mismatches = compare_engines(g.game_file, steps=60, seed=100 + i)
        assert mismatches == []


def test_play_with_the_fast_engine(small_data_root):
    import subprocess, sys
    game = next(g for g in discover_games(small_data_root, "train") if g.task_type == "pick_two_obj_and_place")
    plan = json.loads(Path(game.game_file).read_text())["walkthrough"]
    exe = Path(sys.executable).parent / "alfworld-rl"
    p = subprocess.run([str(exe), "play", "--engine", "fast", "--data-root", str(small_data_root), "--game", game.id],
                       input="not a real command\n" + "\n".join(plan) + "\n", capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "[1] not a real command  (not in the admissible list)\nNothing happens." in p.stdout
    assert f"You won in {len(plan) + 1} steps!" in p.stdout


def test_eval_records_match_across_engines(small_data_root, tmp_path):
    from alfworld_rl.core import read_jsonl
    from alfworld_rl.runs.evaluate import EvalConfig, evaluate, make_sampling_client
    records = {}
    for engine in ("textworld", "fast"):
        c = EvalConfig(base_model="tiny-qwen3", data_root=str(small_data_root), output=str(tmp_path / f"{engine}.jsonl"),
                       limit_per_split=1, max_episode_steps=3, max_assistant_tokens=16, max_trajectory_tokens=2048,
                       games_per_batch=2, engine=engine, report=False)
        sc, tok = make_sampling_client(c)
        evaluate(c, sc, tok, show_progress=False)
        rows = read_jsonl(c.output_path())
        assert all(r["engine"] == engine for r in rows if r["type"] == "trajectory")
        assert rows[-1]["config"]["engine"] == engine
        trajs = [{k: v for k, v in r.items() if k != "engine"} for r in rows if r["type"] == "trajectory"]
        records[engine] = sorted(trajs, key=lambda r: (r["split"], r["game_id"]))   # rows are written in completion order
    assert records["fast"] == records["textworld"] and len(records["fast"]) == 2
