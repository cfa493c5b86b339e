"""The TextWorld Python 3.13 patch: a real PDDL game resets in this process and in a spawned worker."""
import multiprocessing as mp
import sys

from alfworld_rl.env.data import discover_games


def reset_pddl_game(game_file: str) -> str:
    "Reset a PDDL game in the real TextWorld engine and return the first observation."
    from alfworld_rl.core import patch_textworld
    patch_textworld()
    import textworld
    from textworld.envs.pddl import PddlEnv
    env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True))
    env.load(game_file)
    state = env.reset()
    return state.feedback


def test_python_version():
    assert sys.version_info[:2] >= (3, 13)


def test_pddl_reset_in_process(small_data_root):
    game = discover_games(small_data_root, "train")[0]
    obs = reset_pddl_game(game.game_file)
    assert "Your task is to" in obs


def test_pddl_reset_in_spawned_worker(small_data_root):
    game = discover_games(small_data_root, "train")[0]
    with mp.get_context("spawn").Pool(1) as pool:
        obs = pool.apply(reset_pddl_game, (game.game_file,))
    assert "Your task is to" in obs


def test_unpatched_engine_fails_on_313(small_data_root):
    "A fresh interpreter without the patch hits textworld's NameError (see `core.patch_textworld`), so the patch is what makes resets work."
    import subprocess
    game = discover_games(small_data_root, "train")[0]
    code = ("import textworld; from textworld.envs.pddl import PddlEnv; "
            "env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True)); "
            f"env.load({game.game_file!r}); env.reset()")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "NameError" in res.stderr
