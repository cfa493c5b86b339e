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
