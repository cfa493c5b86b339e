"""The committed mini figures drawn by scripts under docs/mini/: their numbers agree with the committed run's notebook
and with the pages they are copied from, and docs/mini.md shows the table the forest plot's script prints."""
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _script(name: str):
    "docs/mini/<name>.py as a module."
    spec = importlib.util.spec_from_file_location(name, REPO / "docs" / "mini" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_forest_table_is_the_scripts_and_its_runs_agree_with_their_pages():
    forest = _script("forest_plot")
    rows = forest.rows()            # checks each run's gains against the mean and standard error its page states
    first = rows[0]
    assert first["name"].startswith("data seed 0") and first["era"] == "240"
    assert [round(x, 1) for x in first["valid_unseen"][:2]] == [12.8, 2.2]       # the committed run's result line
    page = (REPO / "docs" / "mini.md").read_text()
    shown = page.split(forest.TABLE_START, 1)[1].split(forest.TABLE_END, 1)[0].strip()
    assert shown == forest.table(rows), "docs/mini.md's table is not what docs/mini/forest_plot.py prints"


def test_a_rate_that_is_no_count_of_its_episodes_is_refused():
    forest = _script("forest_plot")
    assert forest.count(41.7, 60) == 25 and forest.count(27.2, 180) == 49
    try: forest.count(41.0, 60)
    except ValueError as e: assert "no count of 60 episodes" in str(e)
    else: raise AssertionError("41.0% of 60 episodes was accepted")


def test_the_checkpoint_figure_uses_the_notebooks_means_and_errors(tmp_path):
    figure = _script("checkpoints_figure")
    means, errors = figure.summaries()
    assert [m.label for m in means] == ["base", "SFT", "PPO"]
    assert round(100 * means[2].value("valid_unseen", "success_rate"), 2) == 41.11
    assert {k: round(100 * v, 1) for k, v in errors["PPO"].items()} == {"valid_unseen": 3.7, "valid_seen": 3.6}
    from alfworld_rl.runs.analysis import plot_checkpoints, success_errors
    assert round(100 * success_errors(means[0], ["all"], errors["base"])[0], 2) == 3.57   # the splits' combined
    assert plot_checkpoints(means, tmp_path / "c.png", errors).stat().st_size > 10_000
