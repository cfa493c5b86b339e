"""`alfworld-rl play` end to end: a scripted player wins through the real console script; clear errors."""
import json, subprocess, sys
from pathlib import Path

import pytest

from alfworld_rl.cli import main
from alfworld_rl.env.data import discover_games


def cli_command():
    "The installed `alfworld-rl` console script next to this Python."
    exe = Path(sys.executable).parent / "alfworld-rl"
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "import sys; from alfworld_rl.cli import main; sys.exit(main())"]


def test_scripted_player_wins_by_walkthrough(small_data_root):
    game = next(g for g in discover_games(small_data_root, "train") if g.task_type == "pick_two_obj_and_place")
    plan = json.loads(Path(game.game_file).read_text())["walkthrough"]
    script = "0\nnot a real command\n" + "\n".join(plan) + "\n"
    p = subprocess.run(cli_command() + ["play", "--data-root", str(small_data_root), "--game", game.id],
                       input=script, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.count("Your task is to:") == 1 and "Admissible actions:" in out and "   1. " in out
    assert "No action 0: choose 1.." in out
    assert "[1] not a real command  (not in the admissible list)\nNothing happens." in out
    assert f"You won in {len(plan) + 1} steps!" in out


@pytest.mark.slow
def test_quit_and_numbers(small_data_root):
    game = discover_games(small_data_root, "valid_seen")[0]
    p = subprocess.run(cli_command() + ["play", "--data-root", str(small_data_root), "--split", "valid_seen",
                                        "--game", str(Path(game.game_file).parent)],
                       input="1\nquit\n", capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "[1] " in p.stdout and p.stdout.rstrip().endswith("Bye.")


@pytest.mark.parametrize("argv, status, message", [
    (["--max-steps", "0"], 2, "--max-steps must be >= 1"),
    (["--game", "train:no/such-game"], 1, "no game with id 'train:no/such-game'"),
    (["--game", "gibberish"], 2, "neither a game file, a trial folder nor a game id"),
    (["--game", "moon:x/y"], 2, "unknown split 'moon'"),
])
def test_bad_input_is_one_clear_line(small_data_root, capsys, argv, status, message):
    assert main(["play", "--data-root", str(small_data_root)] + argv) == status
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_data_root_names_the_fix(tmp_path, capsys):
    assert main(["play", "--data-root", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err
    assert "generate" in err and "download" in err and "Traceback" not in err
