"""EnvGroup / EnvPool on the real TextWorld/PDDL engine with generated games: starts, flags, wins, crashes."""
import asyncio, json, os, random, signal, time
from pathlib import Path

import psutil
import pytest

from alfworld_rl.core import UserError
from alfworld_rl.env.branches import EnvArgumentError, EnvError, EnvGroup, EnvPool, default_num_workers

TASK_TYPES = ["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place"]


@pytest.fixture(scope="module")
def games(small_data_root):
    "One generated train game per task type: {task_type: game file}."
    from alfworld_rl.env.data import discover_games
    found = {}
    for g in discover_games(small_data_root, "train"): found.setdefault(g.task_type, g)
    assert set(TASK_TYPES) <= set(found), f"missing task types: {set(TASK_TYPES) - set(found)}"
    return {t: g.game_file for t, g in found.items()}


@pytest.fixture(scope="module")
def pool():
    p = EnvPool(num_workers=2)
    yield p
    p.close()


def walkthrough(game_file):
    return json.loads(Path(game_file).read_text())["walkthrough"]


def test_workers_apply_the_textworld_patch(pool):
    infos = pool.info()
    assert [(i["patched"], i["parse_cache"], i["translation_cache"]) for i in infos] == [(True, True, True)] * 2
    assert sorted(i["pid"] for i in infos) == sorted(pool.worker_pids())
    assert os.getpid() not in pool.worker_pids()


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_walkthrough_wins_every_task_type(pool, games, task_type):
    plan = walkthrough(games[task_type])
    assert plan, "the generator stores a walkthrough"
    with EnvGroup(games[task_type], group_size=2, max_steps=len(plan) + 5, pool=pool) as g:
        starts = g.reset()
        assert starts[0].task.startswith("Your task is to: ")
        for n, cmd in enumerate(plan, 1):
            res = g.step([cmd, cmd])
            for r in res:
                assert r.error is None and r.admissible, (cmd, r)
                assert r.done == (n == len(plan)) and r.won == (n == len(plan))
        assert [(r.won, r.score, r.truncated) for r in res] == [(True, 1.0, False)] * 2


def test_starts_are_identical_and_branches_independent(pool, games):
    gf = games["pick_and_place_simple"]
    plan = walkthrough(gf)
    with EnvGroup(gf, group_size=3, max_steps=50, pool=pool) as g:
        starts = g.reset()
        assert len({(s.task, s.observation, tuple(s.admissible_commands), s.raw) for s in starts}) == 1
        assert "help" not in starts[0].admissible_commands
        res = g.step([plan[0], "look", None])
        assert res[2] is None and g.steps == [1, 1, 0]
        assert res[0].observation != res[1].observation
        # Branch 2 is still at the start: its first step matches branch 0's.
        assert g.step_branch(2, plan[0]).observation == res[0].observation


def test_admissible_flag_follows_the_list_before_the_step(pool, games):
    gf = games["pick_heat_then_place_in_recep"]
    rng = random.Random(1)
    with EnvGroup(gf, group_size=1, max_steps=200, pool=pool) as g:
        shown = g.reset()[0].admissible_commands
        bogus = ["eat apple 1", "help", "go to moon 1", "", "take the world"]
        for _ in range(40):
            cmd = rng.choice(shown) if rng.random() < 0.6 else rng.choice(bogus)
            r = g.step_branch(0, cmd)
            assert r.admissible == (cmd in shown), cmd
            if cmd in ("eat apple 1", "go to moon 1", "", "take the world"):
                assert r.observation == "Nothing happens."    # ALFWorld's engine answer, state unchanged
                assert r.admissible_commands == shown
            if r.done: break
            shown = r.admissible_commands


def test_actions_are_canonicalized(pool, games):
    gf = games["look_at_obj_in_light"]
    cmd = walkthrough(gf)[0]
    with EnvGroup(gf, group_size=2, max_steps=10, pool=pool) as g:
        g.reset()
        a, b = g.step([cmd, "  " + cmd.upper().replace(" ", " \t ")])
        assert b.action == cmd and b.admissible and a.observation == b.observation


def test_text_matches_alfworlds_own_textworld_gym_env(pool, games):
    "Our branches show exactly what ALFWorld's registered textworld.gym env shows, step by step."
    import textworld, textworld.gym
    from alfworld_rl.env.branches import _import_alfworld
    tw = _import_alfworld("alfworld.agents.environment.alfred_tw_env")
    from textworld.envs.pddl import textgen
    import fast_downward
    assert not getattr(textgen._parse_and_convert, "_alfworld_rl_cached", False)   # the reference is unmodified
    assert not getattr(fast_downward.pddl2sas, "_alfworld_rl_cached", False)
    gf = games["pick_two_obj_and_place"]
    plan = walkthrough(gf)
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env_id = textworld.gym.register_games([gf], infos, batch_size=1, asynchronous=False, max_episode_steps=50,
                                          wrappers=[tw.AlfredDemangler(shuffle=False), tw.AlfredInfos])
    ref = textworld.gym.make(env_id)
    with EnvGroup(gf, group_size=1, max_steps=50, pool=pool) as g:
        for episode in range(2):                   # the second episode runs on the workers' caches
            obs, ref_infos = ref.reset()
            start = g.reset()[0]
            assert start.raw == obs[0]
            assert start.admissible_commands == [c for c in ref_infos["admissible_commands"][0] if c != "help"]
            for cmd in ["look", "eat apple 1"] + plan:
                r = g.step_branch(0, cmd)
                obs, scores, dones, ref_infos = ref.step([cmd])
                assert (r.observation, r.score, r.done, r.won) == (obs[0], scores[0], dones[0], ref_infos["won"][0])
                assert r.admissible_commands == [c for c in ref_infos["admissible_commands"][0] if c != "help"]
            assert r.won
    ref.close()


def test_max_steps_ends_branches(pool, games):
    with EnvGroup(games["pick_cool_then_place_in_recep"], group_size=2, max_steps=3, pool=pool) as g:
        g.reset()
        for n in range(3):
            res = g.step(["look", "inventory"])
        assert [(r.done, r.truncated, r.won) for r in res] == [(True, True, False)] * 2
        with pytest.raises(EnvError, match="done"): g.step_branch(0, "look")
        g.reset()                                   # a reset makes the group playable again
        assert g.step_branch(0, "look").done is False


def test_concurrent_groups_match_sequential_replay(pool, games):
    "Branches stepping at once in shared workers see exactly what branches replaying them one by one see."
    files = [games[t] for t in TASK_TYPES[:2]]

    async def run_group(gf, seed):
        g = EnvGroup(gf, group_size=3, max_steps=6, pool=pool)
        starts = await g.reset_async()
        async def branch(i):
            rng, shown, log = random.Random(seed * 10 + i), starts[i].admissible_commands, []
            while not g.done(i):
                cmd = rng.choice(shown)
                r = await g.step_branch_async(i, cmd)
                log.append((cmd, r.observation, r.done, r.won)); shown = r.admissible_commands
            return log
        logs = await asyncio.gather(*(branch(i) for i in range(3)))
        g.close()
        return logs

    async def main():
        return await asyncio.gather(*(run_group(gf, s) for s, gf in enumerate(files)))
    all_logs = asyncio.run(main())
    for gf, logs in zip(files, all_logs):
        assert len({tuple(log) for log in logs}) == 3              # the branches really diverged
        with EnvGroup(gf, group_size=3, max_steps=6, pool=pool) as solo:
            solo.reset()
            for i, log in enumerate(logs):
                assert log[-1][2] and (len(log) == 6 or log[-1][3])   # done: out of steps, or won by chance
                for cmd, obs, done, won in log:
                    r = solo.step_branch(i, cmd)
                    assert (r.observation, r.done, r.won) == (obs, done, won)


def test_worker_crash_becomes_branch_errors_and_close_leaves_no_children(games):
    gf = games["pick_clean_then_place_in_recep"]
    plan = walkthrough(gf)
    me = psutil.Process()

    def children():
        "Our child processes, except multiprocessing's interpreter-wide resource tracker (spawn starts it once)."
        out = set()
        for p in me.children(recursive=True):
            try:
                if not any("resource_tracker" in part for part in p.cmdline()): out.add(p.pid)
            except psutil.Error: pass
        return out
    before = children()
    pool = EnvPool(num_workers=2)
    g = EnvGroup(gf, group_size=4, max_steps=50, pool=pool)
    g.reset()
    pids = g.worker_pids()
    assert len(set(pids)) == 2 and set(pids) <= children()         # spread over both workers
    victim = pids[0]

    async def kill_then_step_all():
        os.kill(victim, signal.SIGKILL)                  # dies while the steps are queued or in flight
        return await asyncio.gather(*(g.step_branch_async(i, plan[0]) for i in range(4)))
    res = asyncio.run(kill_then_step_all())
    for pid, r in zip(pids, res):
        if pid == victim:
            assert r.error and "died" in r.error and r.done and not r.won and r.observation == ""
        else:
            assert r.error is None and r.admissible and not r.done
    lost = [i for i, pid in enumerate(pids) if pid == victim]
    alive = [i for i, pid in enumerate(pids) if pid != victim]
    with pytest.raises(EnvError, match="done"): g.step_branch(lost[0], plan[1])
    assert all(r.error is None for r in g.step([None if i in lost else plan[1] for i in range(4)]) if r)
    # The pool replaced the dead worker and reaped it (no zombie) ...
    deadline = time.time() + 60
    while pool.restarts < 1 and time.time() < deadline: time.sleep(0.05)
    assert pool.restarts == 1 and victim not in pool.worker_pids()
    assert not psutil.pid_exists(victim) or psutil.Process(victim).status() != psutil.STATUS_ZOMBIE
    # ... and a reset puts the lost branches back on live workers.
    g.reset()
    assert all(p is not None and p != victim for p in g.worker_pids())
    assert all(r.error is None and r.admissible for r in g.step([plan[0]] * 4))
    g.close()
    # Later groups run normally on the replacement workers.
    with EnvGroup(gf, group_size=2, max_steps=50, pool=pool) as g2:
        g2.reset()
        for cmd in plan: res = g2.step([cmd, cmd])
        assert all(r.won for r in res)
        workers = set(pool.worker_pids())
    pool.close()
    pool.close()                                                   # idempotent
    after = children()
    assert after <= before and not (workers & after)
    with pytest.raises(EnvError, match="closed"): EnvGroup(gf, 1, 5, pool=pool).reset()


@pytest.mark.parametrize("k", [0, -1, 1.5, "2", True, None])
def test_bad_group_size_is_a_clear_error(pool, games, k):
    with pytest.raises(ValueError, match="group_size must be an integer >= 1"):
        EnvGroup(games["pick_and_place_simple"], k, 10, pool=pool)


def test_other_bad_input_is_a_clear_error(pool, games, tmp_path, monkeypatch):
    gf = games["pick_and_place_simple"]
    with pytest.raises(EnvArgumentError, match="max_steps must be an integer >= 1") as e:
        EnvGroup(gf, 2, 0, pool=pool)
    assert isinstance(e.value, UserError) and e.value.status == 2
    with pytest.raises(EnvError, match="game file not found"): EnvGroup(tmp_path / "nope.tw-pddl", 2, 5, pool=pool)
    with EnvGroup(gf, 2, 5, pool=pool) as g:
        with pytest.raises(EnvError, match="reset"): g.step(["look", "look"])
        g.reset()
        with pytest.raises(ValueError, match="takes 2 actions"): g.step(["look"])
        with pytest.raises(ValueError, match="branch index must be in 0..1"): g.step_branch(2, "look")
        with pytest.raises(ValueError, match="action must be a string"): g.step_branch(0, 3)
        assert g.steps == [0, 0]                   # nothing was sent
    with pytest.raises(ValueError, match="num_workers"): EnvPool(num_workers=0)
    monkeypatch.setenv("ALFWORLD_RL_ENV_WORKERS", "zero")
    with pytest.raises(UserError, match="ALFWORLD_RL_ENV_WORKERS"): default_num_workers()
    monkeypatch.setenv("ALFWORLD_RL_ENV_WORKERS", "3")
    assert default_num_workers() == 3
