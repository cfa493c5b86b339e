"""Shared pytest configuration: the opt-in `slow` set and common fixtures."""
import os
import pytest


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run slow tests and notebook cells flagged `#|slow`")


def run_slow(config) -> bool:
    "True when the slow set was asked for (`--slow` or ALFWORLD_RL_SLOW=1)."
    return config.getoption("--slow") or os.environ.get("ALFWORLD_RL_SLOW") == "1"


def pytest_collection_modifyitems(config, items):
    if run_slow(config): return
    skip = pytest.mark.skip(reason="slow: opt in with --slow or ALFWORLD_RL_SLOW=1")
    for item in items:
        if "slow" in item.keywords: item.add_marker(skip)


# ---------------------------------------------------------------------------------------------------------
# Generated games (owner: data/generate). `make_small_data_root(path)` writes a small ALFWorld data root with
# at least one train game per task type plus a few valid_seen / valid_unseen games, in small rooms.
# The fixture builds it once per session; a copy keyed by the generator's source is kept in the user cache
# so later sessions only copy it (delete $ALFWORLD_RL_CACHE/small_data_root-* to force a rebuild).
SMALL_DATA_ARGS = dict(train=6, valid_seen=3, valid_unseen=3, seed=0, min_receptacles=4, max_receptacles=6,
                       distractors=3, max_plan_steps=30)


def make_small_data_root(path):
    "Generate the small test data root at `path` (real games, verified in the engine); returns its Path."
    from alfworld_rl.env.generate import generate_dataset
    return generate_dataset(path, **SMALL_DATA_ARGS)


def _small_data_key() -> str:
    "Hash of everything the small data root depends on: generator sources, alfworld's logic files, arguments."
    import hashlib, json
    from pathlib import Path
    import alfworld_rl.env.generate as gen, alfworld_rl.env.scenes as scenes, alfworld_rl.env.data as data
    h = hashlib.sha256(json.dumps(SMALL_DATA_ARGS, sort_keys=True).encode())
    for f in [Path(m.__file__) for m in (gen, scenes, data)] + list(scenes.alfred_logic_files()):
        h.update(Path(f).read_bytes())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def small_data_root(tmp_path_factory):
    "A small generated ALFWorld data root (train / valid_seen / valid_unseen), built once per test session."
    import shutil
    from alfworld_rl.core import user_cache_dir
    cached = user_cache_dir() / f"small_data_root-{_small_data_key()}"
    if not (cached / "json_2.1.1").is_dir():
        tmp = tmp_path_factory.mktemp("small_data_build") / "data"
        make_small_data_root(tmp)
        cached.parent.mkdir(parents=True, exist_ok=True)
        try: shutil.copytree(tmp, cached)
        except FileExistsError: pass          # another session filled the cache first
    root = tmp_path_factory.mktemp("small_data") / "alfworld"
    shutil.copytree(cached, root)
    return root
