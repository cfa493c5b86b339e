"""Shared pytest configuration: the opt-in `slow` set and common fixtures."""
import os
import pytest


# Official games (issue 47): tests that need ALFWorld's official games take them from `--data-root DIR` or
# $ALFWORLD_DATA (CI unpacks ../shared/alfworld's archive and sets it) and skip with one line where they are absent.
# The variable is read here once and removed, so no other test's default data root changes with it; notebook
# examples find the games through ALFWORLD_RL_OFFICIAL_DATA.
OFFICIAL_DATA = os.environ.pop("ALFWORLD_DATA", None)
if OFFICIAL_DATA: os.environ["ALFWORLD_RL_OFFICIAL_DATA"] = OFFICIAL_DATA


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run slow tests and notebook cells flagged `#|slow`")
    parser.addoption("--data-root", default=None,
                     help="ALFWorld data root with the official games (default: $ALFWORLD_DATA, else datasets/alfworld)")


def official_games_at(root) -> bool:
    "Whether `root` holds ALFWorld's official validation games (at least 100 valid_unseen game files)."
    from pathlib import Path
    d = Path(root) / "json_2.1.1" / "valid_unseen"
    return d.is_dir() and sum(1 for _ in d.rglob("game.tw-pddl")) >= 100


@pytest.fixture(scope="session")
def official_root(request):
    "The data root of ALFWorld's official games; the test is skipped (one line) where there is none."
    from pathlib import Path
    given = request.config.getoption("--data-root") or OFFICIAL_DATA
    root = Path(given) if given else Path(__file__).resolve().parent.parent / "datasets" / "alfworld"
    if not official_games_at(root):
        pytest.skip(f"official games absent at {root}: unpack ../shared/alfworld's archive and set $ALFWORLD_DATA "
                    f"(or pass --data-root)")
    return root.resolve()


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
