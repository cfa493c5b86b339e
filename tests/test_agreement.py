"""`alfworld-rl agreement` end to end: expert states on real generated games, the shipped base and an SFT state."""
import json

import pytest

from alfworld_rl.cli import main
from alfworld_rl.core import read_jsonl

COMMON = ["--base-model", "mini-base", "--max-episode-steps", "40"]


def test_base_and_a_trained_state(small_data_root, tmp_path, capsys):
    "The base and a state of a short SFT run on the same (training) games: two rows; cloning raises the expert's probability."
    runs = tmp_path / "runs"
    assert main(["sft", "--base-model", "mini-base", "--data-root", str(small_data_root), "--games-per-batch", "3",
                 "--max-steps", "20", "--learning-rate", "3e-3", "--context", "window",
                 "--max-episode-steps", "40", "--max-trajectory-tokens", "6000", "--max-detours", "2",
                 "--engine", "fast", "--swanlab-mode", "disabled", "--output-dir", str(runs), "--run-name", "sft-a",
                 "--no-report"]) == 0
    state = read_jsonl(runs / "sft-a" / "checkpoints.jsonl")[-1]["state_path"]
    capsys.readouterr()
    out = tmp_path / "agreement.json"
    assert main(["agreement", "base=base", f"sft={state}", "--data-root", str(small_data_root), "--split", "train",
                 *COMMON, "--output", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "| base |" in stdout and "| sft |" in stdout and "take (n=" in stdout
    saved = json.loads(out.read_text())
    assert saved["split"] == "train" and saved["demonstrations"] >= 1
    base, sft = saved["checkpoints"]["base"], saved["checkpoints"]["sft"]
    assert set(base) == set(sft) and sum(v["states"] for v in base.values()) >= 4
    for kinds in (base, sft):
        assert all(0 <= v["p_reply"] <= v["p_verb"] <= 1 for v in kinds.values())
    # twenty steps of cloning on these very games (all six) must make the expert's replies likelier on average
    mean = lambda r: sum(v["p_reply"] * v["states"] for v in r.values()) / sum(v["states"] for v in r.values())
    assert mean(sft) > mean(base) + 0.05, (mean(base), mean(sft))


BAD = [
    (["--split", "test"], "--split must be one of train, valid_seen, valid_unseen"),
    (["--max-games", "0"], "--max-games must be an integer >= 1"),
    (["--max-detours", "-1"], "--max-detours must be an integer >= 0"),
    (["--history-length", "-2"], "--history-length must be an integer >= 0"),
    (["a=base", "a=base"], "label 'a' is given twice"),
    (["sft=/no/such/state"], "is not a saved training state"),
]


@pytest.mark.parametrize("flags,message", BAD, ids=[" ".join(f) for f, _ in BAD])
def test_bad_input_is_one_line(flags, message, tmp_path, capsys):
    try: status = main(["agreement", "--data-root", str(tmp_path / "none"), *flags])
    except SystemExit as e: status = e.code
    err = capsys.readouterr().err
    assert status == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1
