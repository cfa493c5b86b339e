"""`alfworld-rl analyze` on hand-written evaluation files: tables match the inputs, figures exist, bad input is refused."""
import json, subprocess, sys
from pathlib import Path

import pytest

from alfworld_rl.runs.analysis import write_summary_file, DEFAULT_EVAL_FILES, load_summaries, parse_eval_files
from alfworld_rl.cli import main

CLI = str(Path(sys.executable).parent / "alfworld-rl")
TASKS = ["look_at_obj_in_light", "pick_and_place_simple", "pick_clean_then_place_in_recep",
         "pick_cool_then_place_in_recep", "pick_heat_then_place_in_recep", "pick_two_obj_and_place"]

# The published reference results (docs/reference_recipe.md) as wins out of 140 seen / 134 unseen games, and mean invalid actions.
REFERENCE = {"base": (74, 71, 5.41, 5.41), "step 40": (76, 74, 5.2, 5.0), "step 80": (77, 79, 4.9, 4.72)}


def metrics(seen_won, unseen_won, seen_invalid, unseen_invalid, games=(140, 134), task_offset=0.0):
    "Per-split summary metrics of the reference shape."
    m = {}
    for split, n, won, inv in (("valid_seen", games[0], seen_won, seen_invalid), ("valid_unseen", games[1], unseen_won, unseen_invalid)):
        m[f"eval/{split}/games"] = n
        m[f"eval/{split}/success_rate"] = won / n
        m[f"eval/{split}/invalid_actions_mean"] = inv
        for i, t in enumerate(TASKS): m[f"eval/{split}/success_rate/{t}"] = round(0.3 + 0.08 * i + task_offset, 4)
    return m


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    "A working directory holding the three default evaluation files with the reference numbers."
    for k, (label, path) in enumerate(DEFAULT_EVAL_FILES.items()):
        write_summary_file(tmp_path / path, "Qwen/Qwen3.5-4B", None if label == "base" else f"trio://run/sampler_weights/{label}",
                           metrics(*REFERENCE[label], task_offset=0.01 * k))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def table_rows(stdout):
    "The data rows of the first markdown table in `stdout`, as lists of cells."
    rows = []
    for line in stdout.splitlines():
        if not line.startswith("|"):
            if rows: break
            continue
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows[2:]


def test_defaults_table_matches_inputs_and_figures_exist(workdir):
    r = subprocess.run([CLI, "analyze"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {row[0]: row for row in table_rows(r.stdout)}
    assert list(rows) == ["base", "step 40", "step 80"]
    for label, (sw, uw, si, ui) in REFERENCE.items():
        row = rows[label]
        assert row[1] == f"{100 * sw / 140:.2f}" and row[2] == f"{100 * uw / 134:.2f}"
        assert row[3] == f"{100 * (sw + uw) / 274:.2f}"
        assert row[4] == f"{(140 * si + 134 * ui) / 274:.2f}"
        assert row[5] == "274"
    # the reference write-up's overall numbers
    assert rows["base"][3] == "52.92" and rows["step 40"][3] == "54.74" and rows["step 80"][3] == "56.93"
    assert rows["step 80"][1:3] == ["55.00", "58.96"]
    # per-task tables (one per split: the files carry no eval/all per-task metrics)
    assert "| pick_two_obj_and_place | 70.00 | 71.00 | 72.00 |" in r.stdout
    for fig in ("images/alfworld_checkpoint_evaluation.png", "images/alfworld_task_types.png"):
        data = (workdir / fig).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
        assert f"Saved figure: {fig}" in r.stdout


def test_label_path_pairs_any_number(workdir, capsys):
    two = [f"first={DEFAULT_EVAL_FILES['base']}", f"last={DEFAULT_EVAL_FILES['step 80']}"]
    assert main(["analyze", *two, "--output", "out/a.png", "--task-output", "out/t.png"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert [r[0] for r in rows] == ["first", "last"]
    assert rows[1][3] == "56.93"
    assert (workdir / "out/a.png").is_file() and (workdir / "out/t.png").is_file()


def test_eval_all_metrics_take_precedence(workdir, capsys):
    "Files that carry eval/all metrics (ours do) are shown with them, per task type over all games."
    m = metrics(74, 71, 5.41, 5.41)
    m.update({"eval/all/games": 274, "eval/all/success_rate": 0.5, "eval/all/invalid_actions_mean": 3.0})
    m.update({f"eval/all/success_rate/{t}": 0.25 for t in TASKS})
    write_summary_file("x.jsonl", "Qwen/Qwen3.5-4B", None, m)
    assert main(["analyze", "x=x.jsonl"]) == 0
    out = capsys.readouterr().out
    assert table_rows(out)[0] == ["x", "52.86", "52.99", "50.00", "3.00", "274"]
    assert "| task type (all) | x |" in out and "| pick_two_obj_and_place | 25.00 |" in out


def test_mismatched_base_model_is_refused(workdir, capsys):
    write_summary_file("other.jsonl", "Qwen/Qwen3-8B", None, metrics(*REFERENCE["base"]))
    r = subprocess.run([CLI, "analyze", f"base={DEFAULT_EVAL_FILES['base']}", "other=other.jsonl", "--output", "no.png"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert "disagree on the base model" in r.stderr and "Qwen/Qwen3-8B" in r.stderr
    assert not (workdir / "no.png").exists()


def test_mismatched_game_counts_are_refused(workdir, capsys):
    write_summary_file("partial.jsonl", "Qwen/Qwen3.5-4B", None, metrics(70, 60, 5, 5, games=(140, 120)))
    assert main(["analyze", f"base={DEFAULT_EVAL_FILES['base']}", "partial=partial.jsonl"]) == 1
    err = capsys.readouterr().err
    assert "disagree on the games evaluated" in err and "'valid_unseen': 120" in err


def test_missing_files_and_bad_labels(workdir, capsys):
    (workdir / DEFAULT_EVAL_FILES["step 40"]).unlink()
    assert main(["analyze"]) == 1
    assert "checkpoint-40steps.jsonl" in capsys.readouterr().err
    assert main(["analyze", "a=x.jsonl", "a=y.jsonl"]) == 2
    assert "given twice" in capsys.readouterr().err
    Path("unfinished.jsonl").write_text(json.dumps({"type": "trajectory", "won": True}) + "\n")
    assert main(["analyze", "u=unfinished.jsonl", f"base={DEFAULT_EVAL_FILES['base']}"]) == 1
    assert "no summary record" in capsys.readouterr().err


def _trajectory(gid, split, won, steps):
    "A hand-written trajectory record with `steps` given as (valid_format, admissible) pairs."
    inv = sum((not v) or (not a) for v, a in steps)
    return {"type": "trajectory", "game_id": gid, "split": split, "task_type": "pick_and_place_simple", "won": won,
            "truncated": not won, "stop_reason": "won" if won else "max_steps", "invalid_action_count": inv,
            "reward": float(won) - 0.1 * inv,
            "steps": [{"action": "look", "valid_format": v, "admissible": a, "observation": "ok"} for v, a in steps]}


@pytest.mark.slow
def test_report_notebook_with_trajectory_records(tmp_path, monkeypatch):
    "`analyze --report` executes the analysis template (papermill) over files with trajectory records."
    from alfworld_rl.runs.evaluate import summarize_records
    monkeypatch.chdir(tmp_path)
    files = []
    for label, wins in (("base", (True, False)), ("trained", (True, True))):
        recs = [_trajectory("valid_seen:a", "valid_seen", wins[0], [(True, True), (False, False)]),
                _trajectory("valid_unseen:b", "valid_unseen", wins[1], [(True, False), (True, True), (True, True)])]
        path = tmp_path / f"{label}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs)
                        + json.dumps({"type": "summary", "base_model": "tiny-qwen3", "model_path": None,
                                      "metrics": summarize_records(recs)}) + "\n")
        files.append(f"{label}={path}")
    r = subprocess.run([CLI, "analyze", *files, "--report", "runs/analysis/analysis.ipynb"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = table_rows(r.stdout)
    assert rows[0] == ["base", "100.00", "0.00", "50.00", "1.00", "2"]
    assert rows[1] == ["trained", "100.00", "100.00", "100.00", "1.00", "2"]
    nb = json.loads((tmp_path / "runs/analysis/analysis.ipynb").read_text())
    text = json.dumps(nb)
    assert "| trained | 0 | 2 |" in text          # stop reasons per checkpoint: max_steps 0, won 2
    assert "image/png" in text and '"ename"' not in text
