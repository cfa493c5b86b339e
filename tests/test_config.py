"""One configuration surface: every command's flags, checks and report parameters come from the setting definitions
(`alfworld_rl.settings`); flags -> config -> papermill parameters -> config is the identity for every command."""
import argparse, json
from dataclasses import asdict, fields

import pytest

from alfworld_rl.cli import OneLineParser, main
from alfworld_rl.core import UserError
from alfworld_rl.settings import flag, from_parameters, settings_of, to_parameters


def parser_of(command):
    "The real parser of `alfworld-rl COMMAND` (as `cli.main` builds it)."
    import importlib
    from alfworld_rl.cli import COMMANDS, _function
    mod = importlib.import_module(COMMANDS[command][0])
    p = OneLineParser(prog=f"alfworld-rl {command}")
    getattr(mod, f"{_function(command)}_parser")(p)
    return p


def config_class(command):
    from alfworld_rl.runs.train_config import TrainConfig
    from alfworld_rl.runs.sft import SFTConfig
    from alfworld_rl.runs.evaluate import EvalConfig
    return {"train": TrainConfig, "sft": SFTConfig, "eval": EvalConfig}[command]


def config_from(command, argv):
    "The configuration `alfworld-rl COMMAND ARGV` would run (before the resume rules)."
    from alfworld_rl.settings import config_from_flags
    return config_from_flags(config_class(command), parser_of(command).parse_args(argv))


def through_papermill(params: dict) -> dict:
    "`params` as a report kernel sees them: papermill's injected parameter cell, executed."
    from papermill.translators import translate_parameters
    code = translate_parameters("python3", "python", params, "Parameters")
    ns = {}
    exec(code, ns)
    return ns


# Every setting given a value other than its default, as a user would type it.
FLAGS = {
    "train": ["--backend", "trio", "--temperature", "0.9", "--top-p", "0.95", "--base-model", "mini-base", "--device", "cpu", "--sampler-device", "cuda:1", "--dtype", "float32", "--prefix-cache-gb", "2.5", "--gradient-checkpointing", "on",
              "--max-steps", "4", "--games-per-batch", "3", "--group-size", "6", "--max-episode-steps", "12",
              "--max-trajectory-tokens", "4096", "--max-assistant-tokens", "48", "--learning-rate", "5e-4",
              "--save-every", "2", "--run-name", "quickstart", "--swanlab-mode", "offline", "--swanlab-project", "p",
              "--data-root", "d", "--train-split", "valid_seen", "--max-train-games", "5",
              "--no-include-admissible-actions", "--lora-rank", "8", "--adam-beta1", "0.8", "--adam-beta2", "0.9",
              "--adam-eps", "1e-8", "--weight-decay", "0.1", "--grad-clip", "0.5", "--ppo-clip-low", "0.7",
              "--ppo-clip-high", "1.3", "--ppo-epochs", "2", "--ppo-minibatches", "3", "--seed", "3", "--output-dir", "r", "--max-requests-in-flight", "8",
              "--prefill-price-per-m", "0.1", "--sample-price-per-m", "0.2", "--train-price-per-m", "0.3",
              "--init-state", "s", "--context", "window", "--history-length", "3", "--visited-places", "--advantage", "gigpo",
              "--advantage-norm", "mean_std", "--gamma", "0.9", "--step-advantage-weight", "0.5", "--engine", "fast",
              "--win-reward", "10", "--invalid-penalty", "0.01", "--step-return", "all",
              "--refused-credit", "negative"],
    "sft": ["--backend", "trio", "--base-model", "mini-base", "--device", "cpu", "--sampler-device", "cuda:1", "--dtype", "float32", "--prefix-cache-gb", "0.5", "--gradient-checkpointing", "off",
            "--data-root", "d", "--train-split", "valid_seen", "--max-train-games", "5", "--max-steps", "3",
            "--games-per-batch", "2", "--learning-rate", "1e-3", "--lora-rank", "8", "--save-every", "0",
            "--run-name", "s1", "--output-dir", "r", "--seed", "4", "--swanlab-mode", "offline",
            "--swanlab-project", "p", "--max-episode-steps", "12", "--max-trajectory-tokens", "4096",
            "--no-include-admissible-actions", "--demos-per-game", "4", "--max-detours", "2", "--rename-objects", "--lr-decay-steps", "2", "--slip-rate", "0.1",
            "--adam-beta1", "0.8",
            "--adam-beta2", "0.9", "--adam-eps", "1e-8", "--weight-decay", "0.1", "--grad-clip", "0.5",
            "--context", "window", "--history-length", "1", "--visited-places", "--engine", "fast"],
    "eval": ["--backend", "trio", "--base-model", "mini-base", "--resume", "--model-path", "trio://r/sampler_weights/w",
             "--device", "cpu", "--sampler-device", "cuda:1", "--dtype", "float32", "--prefix-cache-gb", "3", "--gradient-checkpointing", "off", "--split", "valid_unseen", "--concurrency", "4",
             "--limit-per-split", "3", "--max-episode-steps", "12", "--max-trajectory-tokens", "4096",
             "--max-assistant-tokens", "48", "--temperature", "0.5", "--top-p", "0.9", "--seed", "7",
             "--no-include-admissible-actions", "--context", "window", "--history-length", "1", "--visited-places",
             "--engine", "fast",
             "--data-root", "d", "--swanlab-mode", "offline", "--swanlab-project", "p", "--output", "o.jsonl",
             "--overwrite-output", "--run-name", "e1", "--runs-dir", "rr", "--no-report", "--win-reward", "10",
             "--invalid-penalty", "0", "--episodes-per-game", "8"],
}


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_round_trip_flags_config_parameters_config(command):
    "flags -> config -> papermill parameters (injected and executed) -> config gives the same config."
    cls = config_class(command)
    c = config_from(command, FLAGS[command])
    defaults = cls()
    unchanged = [name for name in settings_of(cls) if getattr(c, name) == getattr(defaults, name)]
    assert unchanged == [], f"FLAGS[{command!r}] leaves {unchanged} at their defaults"
    params = to_parameters(c)
    if command != "eval": params["resume"] = False       # train's and sft's reports also take the command's --resume
    back = from_parameters(cls, through_papermill(params))
    assert back == c and asdict(back) == asdict(c)
    assert all(type(getattr(back, k)) is type(getattr(c, k)) for k in asdict(c))


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_no_flags_is_the_default_config(command):
    assert config_from(command, []) == config_class(command)()


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_every_setting_is_a_flag_with_its_help(command):
    "Each setting has its flag (named after the field) and a help line showing the command's default once (none for None)."
    cls, p = config_class(command), parser_of(command)
    by_flag = {s: a for a in p._actions for s in a.option_strings}
    defaults = cls()
    for name, setting in settings_of(cls).items():
        action, default = by_flag[flag(name)], getattr(defaults, name)
        assert action.dest == name and action.default is None
        assert setting.help in action.help and action.help.count("default:") <= 1 and "(default: None)" not in action.help
        if default is not None and "default:" not in setting.help: assert f"(default: {default})" in action.help


def test_one_flag_name_means_one_thing():
    """A flag shared by train, sft and eval sets the same setting in each; the one exception is eval's
    `--games-per-batch`, kept (documented in its help) as the reference commands' name of `--concurrency`."""
    dests = {}
    for command in ("train", "sft", "eval"):
        for a in parser_of(command)._actions:
            for s in a.option_strings: dests.setdefault(s, {})[command] = a.dest
    differ = {f: d for f, d in dests.items() if len(set(d.values())) > 1}
    assert differ.pop("--no-report") == {"train": "no_report", "sft": "no_report", "eval": "report"}   # the same switch
    assert differ == {"--games-per-batch": {"train": "games_per_batch", "sft": "games_per_batch", "eval": "concurrency"}}
    assert "--games-per-batch" in next(a.help for a in parser_of("eval")._actions if "--concurrency" in a.option_strings)


def words(s):
    "What setting `s` must be, or None."
    return s.rule.words() if s.rule else None


def test_shared_settings_share_their_definition():
    "A setting in several configurations is one definition: same type and rule (defaults, help, optional may differ)."
    from alfworld_rl.rl.rollout import RolloutConfig
    from alfworld_rl.mini.recipe import MiniSettings
    classes = [config_class(c) for c in ("train", "sft", "eval")] + [RolloutConfig, MiniSettings]
    seen = {}
    for cls in classes:
        for name, s in settings_of(cls).items():
            if name in seen and name != "group_size":      # training's own rule: >= 2 (the rollout engine takes 1)
                assert s.type == seen[name].type and words(s) == words(seen[name]), name
            seen.setdefault(name, s)


def test_saved_config_keys_are_unchanged():
    "Checkpoints' config.json and the eval summary keep their keys (eval's concurrency cap renamed from games_per_batch)."
    from alfworld_rl.runs.train_config import TrainConfig
    from alfworld_rl.runs.sft import SFTConfig
    from alfworld_rl.runs.evaluate import EvalConfig
    memory = {"prefix_cache_gb", "gradient_checkpointing", "sampler_device"}   # local-backend memory and device settings
    reward = {"win_reward", "invalid_penalty"}                                  # added with the reward settings
    places = {"visited_places"}                                                 # added with the places line
    train = memory | reward | places | {"step_return", "refused_credit"} | {"base_model", "backend", "device", "dtype", "max_steps", "games_per_batch", "group_size", "max_episode_steps",
             "max_trajectory_tokens", "max_assistant_tokens", "temperature", "top_p", "learning_rate", "save_every",
             "run_name", "swanlab_mode", "swanlab_project", "data_root", "train_split", "max_train_games",
             "include_admissible_actions", "lora_rank", "adam_beta1", "adam_beta2", "adam_eps", "weight_decay", "grad_clip",
             "ppo_clip_low", "ppo_clip_high", "ppo_epochs", "ppo_minibatches", "seed", "output_dir", "max_requests_in_flight", "prefill_price_per_m",
             "sample_price_per_m", "train_price_per_m", "init_state", "context", "history_length", "advantage",
             "advantage_norm", "gamma", "step_advantage_weight", "engine"}
    sft = memory | places | {"base_model", "backend", "device", "dtype", "data_root", "train_split", "max_train_games", "max_steps",
           "games_per_batch", "learning_rate", "lora_rank", "save_every", "run_name", "output_dir", "seed", "swanlab_mode",
           "swanlab_project", "max_episode_steps", "max_trajectory_tokens", "include_admissible_actions", "demos_per_game",
           "max_detours", "rename_objects", "adam_beta1", "adam_beta2", "adam_eps", "weight_decay", "grad_clip", "context",
           "history_length", "engine", "lr_decay_steps", "slip_rate"}   # the last two: the decaying SFT rate, the slips
    ev = memory | reward | places | {"episodes_per_game"} | {"base_model", "model_path", "split", "concurrency", "temperature", "top_p", "seed", "max_episode_steps",
          "max_trajectory_tokens", "max_assistant_tokens", "include_admissible_actions", "limit_per_split", "data_root",
          "backend", "device", "dtype", "output", "overwrite_output", "resume", "run_name", "runs_dir", "swanlab_mode",
          "swanlab_project", "report", "context", "history_length", "engine"}
    assert set(asdict(TrainConfig())) == train and set(asdict(SFTConfig())) == sft and set(asdict(EvalConfig())) == ev
    assert EvalConfig(games_per_batch=3).concurrency == 3          # code written before the rename still runs


def test_a_run_saved_before_the_reward_and_step_return_settings_resumes_with_its_own_rules(tmp_path):
    "An old config.json lacks win_reward, invalid_penalty and step_return: it loads with the rules it was trained with."
    from alfworld_rl.runs.train_config import TrainConfig, load_run_config, save_run_config
    c = TrainConfig(run_name="old", output_dir=str(tmp_path), advantage="gigpo")
    save_run_config(c)
    saved = json.loads((c.run_dir / "config.json").read_text())
    for k in ("win_reward", "invalid_penalty", "step_return"): del saved[k]
    (c.run_dir / "config.json").write_text(json.dumps(saved))
    old = load_run_config(c.run_dir)
    assert (old.win_reward, old.invalid_penalty, old.step_return) == (1.0, 0.1, "all")
    assert TrainConfig().step_return == "win"                         # while a new run gets the new default
    save_run_config(c)
    assert load_run_config(c.run_dir).step_return == "win"            # a saved value always wins


def test_reference_flags_parse_to_their_values():
    "The README's reference commands parse to what they say (flag names and defaults unchanged)."
    c = config_from("eval", ["--backend", "trio", "--base-model", "Qwen/Qwen3.5-4B", "--split", "all",
                             "--games-per-batch", "16", "--temperature", "0.01", "--seed", "42",
                             "--output", "eval_results/base-qwen35-4b-eval.jsonl", "--swanlab-mode", "disabled"])
    assert (c.concurrency, c.temperature, c.seed, c.split) == (16, 0.01, 42, "all")
    t = config_from("train", ["--backend", "trio", "--base-model", "Qwen/Qwen3.5-4B", "--max-steps", "80",
                              "--games-per-batch", "8", "--group-size", "8", "--max-episode-steps", "50",
                              "--max-trajectory-tokens", "12000", "--max-assistant-tokens", "2048", "--temperature", "1.0",
                              "--top-p", "1.0", "--learning-rate", "1e-6", "--save-every", "20",
                              "--run-name", "alfworld-agent-rl-qwen35-4b", "--swanlab-mode", "online"])
    from alfworld_rl.runs.train_config import TrainConfig, validate_config
    assert validate_config(t) == TrainConfig(backend="trio", run_name="alfworld-agent-rl-qwen35-4b")


# One message per bad value, the same in every command that has the setting (it names the flag and the range).
SHARED_BAD = [(["--learning-rate", "-1"], "--learning-rate must be > 0 (got -1.0)"),
              (["--lora-rank", "65"], "--lora-rank must be an integer in [4, 64] (got 65)"),
              (["--context", "half"], "--context must be one of full, window (got 'half')"),
              (["--engine", "tw"], "--engine must be one of textworld, fast (got 'tw')"),
              (["--backend", "gpu"], "--backend must be one of local, trio (got 'gpu')"),
              (["--swanlab-mode", "cloud"], "--swanlab-mode must be one of online, local, offline, disabled (got 'cloud')"),
              (["--max-episode-steps", "0"], "--max-episode-steps must be an integer >= 1 (got 0)"),
              (["--seed", "-1"], "--seed must be an integer >= 0 (got -1)"),
              (["--history-length", "-2"], "--history-length must be an integer >= 0 (got -2)"),
              (["--temperature", "inf"], "--temperature must be a finite number (got inf)"),
              (["--run-name", "a b"], "--run-name must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit (got 'a b')")]


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
@pytest.mark.parametrize("flags, message", SHARED_BAD, ids=[f[0] for f, _ in SHARED_BAD])
def test_same_message_in_every_command(command, flags, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if not any(a.option_strings and flags[0] in a.option_strings for a in parser_of(command)._actions):
        pytest.skip(f"{command} has no {flags[0]}")
    status = main([command, "--base-model", "tiny-qwen3", *flags])
    err = capsys.readouterr().err
    assert status == 2 and message in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []                      # refused before any work


def test_rollout_config_uses_the_same_rules():
    from alfworld_rl.rl.rollout import RolloutConfig
    with pytest.raises(UserError, match=r"--top-p must be in \(0, 1\] \(got 0\)"): RolloutConfig(top_p=0).validate()
    with pytest.raises(UserError, match=r"--max-assistant-tokens must be < --max-trajectory-tokens \(400\) \(got 500\)"):
        RolloutConfig(max_assistant_tokens=500, max_trajectory_tokens=400).validate()


@pytest.mark.parametrize("command", ["train", "sft"])
def test_report_template_declares_exactly_the_settings(command):
    "The report's parameters cell declares one parameter per setting (and `resume`): none missing, none stale."
    import papermill as pm
    from alfworld_rl.runs.train import report_template
    declared = set(pm.inspect_notebook(str(report_template(command))))
    assert declared == set(settings_of(config_class(command))) | {"resume"}


def test_mini_round_trip_flags_overrides_parameters_settings():
    "alfworld-rl mini: flags -> overrides -> the report's JSON parameters -> the settings the report runs with."
    import json
    from alfworld_rl.mini import recipe as mini
    from alfworld_rl.cli import OneLineParser
    args = mini.cli_mini_parser(OneLineParser(prog="alfworld-rl mini")).parse_args(
        ["--settings", "smoke", "--seeds", "4", "5", "--data-seed", "7", "--engine", "textworld"])
    overrides = mini.mini_overrides(args)
    assert overrides == {"seeds": [4, 5], "data_seed": 7, "engine": "textworld"}
    params = json.loads(json.dumps({"preset": args.settings, "overrides": overrides}))     # as papermill stores them
    s = mini.settings_from(params["preset"], **params["overrides"])
    assert s == mini.dataclasses.replace(mini.SMOKE, seeds=(4, 5), data_seed=7, engine="textworld")
    assert mini.mini_overrides(mini.cli_mini_parser(OneLineParser(prog="alfworld-rl mini")).parse_args([])) == {}
