"""Discovery on generated games: filters, ids, data-root precedence, seeds, caps, batches, clear errors;
and `alfworld-rl download` failing fast offline."""
import json, os, shutil, socket, time
from pathlib import Path

import pytest

from alfworld_rl.cli import main
from alfworld_rl.core import UserError
from alfworld_rl.env.data import GAMES_DIR, SPLITS, Game, GameBatches, discover_games, download


def test_discovery_ids_and_files(small_data_root):
    games = discover_games(small_data_root, "train")
    assert len(games) == 6 and [g.id for g in games] == sorted(g.id for g in games)
    for g in games:
        assert isinstance(g, Game) and g.split == "train"
        rel = Path(g.game_file).parent.relative_to(small_data_root / GAMES_DIR / "train").as_posix()
        assert g.id == f"train:{rel}" and Path(g.game_file).name == "game.tw-pddl"
        assert g.task_type == json.loads((Path(g.game_file).parent / "traj_data.json").read_text())["task_type"]


def test_filters_like_alfworld(small_data_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(small_data_root, root)
    split = root / GAMES_DIR / "train"
    folders = sorted(p for p in split.iterdir())
    shutil.copytree(folders[0], split / (folders[0].name.replace("-None-", "-Sliced-")))
    shutil.copytree(folders[1], split / ("movable_" + folders[1].name))
    unsolvable = split / (folders[2].name + "-copy")
    shutil.copytree(folders[2], unsolvable)
    gf = next(unsolvable.glob("*/game.tw-pddl")); d = json.loads(gf.read_text()); d["solvable"] = False
    gf.write_text(json.dumps(d))
    other = split / (folders[3].name + "-other")
    shutil.copytree(folders[3], other)
    tf = next(other.glob("*/traj_data.json")); t = json.loads(tf.read_text())
    t["task_type"] = "pick_and_place_with_movable_recep"; tf.write_text(json.dumps(t))
    nogame = split / (folders[4].name + "-nogame")
    shutil.copytree(folders[4], nogame); next(nogame.glob("*/game.tw-pddl")).unlink()
    assert discover_games(root, "train") == [
        g.__class__(g.id, g.split, g.game_file.replace(str(small_data_root), str(root)), g.task_type)
        for g in discover_games(small_data_root, "train")]


def test_data_root_precedence(small_data_root, tmp_path, monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="datasets/alfworld"): discover_games(None, "train")
    (tmp_path / "datasets").mkdir()
    shutil.copytree(small_data_root, tmp_path / "datasets" / "alfworld")
    assert len(discover_games(None, "train")) == 6                     # default: ./datasets/alfworld
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "empty"))
    with pytest.raises(UserError, match="empty"): discover_games(None, "train")      # env var beats the default
    assert len(discover_games(small_data_root, "valid_seen")) == 3    # explicit root beats the env var


def test_seed_shuffle_and_cap(small_data_root):
    base = discover_games(small_data_root, "train")
    a = discover_games(small_data_root, "train", seed=1)
    assert a == discover_games(small_data_root, "train", seed=1) and sorted(a, key=lambda g: g.id) == base
    assert any(discover_games(small_data_root, "train", seed=s) != base for s in range(5))
    assert discover_games(small_data_root, "train", seed=1, max_games=2) == a[:2]
    with pytest.raises(UserError, match="max_games"): discover_games(small_data_root, "train", max_games=0)


def test_missing_empty_and_unknown_splits(tmp_path):
    for split in SPLITS:
        with pytest.raises(UserError) as e: discover_games(tmp_path, split)
        msg = str(e.value)
        assert str(tmp_path / GAMES_DIR / split) in msg and "alfworld-rl download" in msg and "alfworld-rl generate" in msg
    (tmp_path / GAMES_DIR / "train").mkdir(parents=True)
    with pytest.raises(UserError, match="no solvable"): discover_games(tmp_path, "train")
    with pytest.raises(UserError) as e: discover_games(tmp_path, "valid")
    assert e.value.status == 2 and "train, valid_seen, valid_unseen" in str(e.value)


def test_batches_are_cyclic_and_resumable(small_data_root):
    games = discover_games(small_data_root, "train")
    b = GameBatches(games, batch_size=4, seed=0)
    first = [b[k] for k in range(6)]                       # 24 slots = 4 passes over 6 games
    flat = sum(first, [])
    assert sorted(flat[:6], key=lambda g: g.id) == games    # the first pass covers every game once
    for batch in first: assert len({g.id for g in batch}) == len(batch)   # never a game twice in one batch
    counts = [sum(g.id == x.id for x in flat) for g in games]
    assert max(counts) - min(counts) <= 1                   # passes stay fair when a batch straddles two
    assert GameBatches(games, 4, seed=0)[5] == first[5]    # resume at batch k without replaying 0..k-1
    assert [next(iter(GameBatches(games, 4, seed=0)))] == first[:1]
    assert any(GameBatches(games, 4, seed=s)[0] != first[0] for s in range(1, 6))   # the seed matters
    with pytest.raises(UserError): GameBatches(games, 0)
    with pytest.raises(UserError, match="--games-per-batch"): GameBatches(games, len(games) + 1)


def _github_reachable() -> bool:
    try:
        with socket.create_connection(("github.com", 443), timeout=3): return True
    except OSError: return False


def test_download_fails_fast_offline(tmp_path, capsys):
    t0 = time.time()
    with pytest.raises(UserError) as e:
        download(tmp_path / "a", urls=("http://127.0.0.1:9/json_2.1.1_json.zip",), connect_timeout=2)
    assert time.time() - t0 < 10 and "alfworld-rl generate" in str(e.value)
    assert not (tmp_path / "a").exists()
    if _github_reachable(): pytest.skip("github.com is reachable: not downloading ~1 GB in a test")
    t0 = time.time()
    rc = main(["download", "--data-dir", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert rc == 1 and time.time() - t0 < 15 and "alfworld-rl generate" in err and len(err.strip().splitlines()) == 1
    assert main(["download", "--connect-timeout", "0"]) == 2
