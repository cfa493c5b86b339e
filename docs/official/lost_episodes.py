"""What the lost episodes of an evaluation did: how far each got, and how it spent its steps.

    uv run python docs/official/lost_episodes.py EVAL.jsonl [more evaluation files] [--split valid_seen]

Every lost episode gets the first of these stages it did not pass (from its admitted commands and observations, and
the task's object and receptacle in `traj_data.json`'s `pddl_params`):

    babbling       half or more of its commands were not admissible (malformed or not on the list)
    never saw      the task's object never appeared in an observation (the search failed)
    saw, no take   it saw the object but never took one
    no transform   clean / heat / cool tasks: took it but never cleaned / heated / cooled it
    no lamp        look tasks: held it but never used a desk lamp
    not placed     took it (and transformed it) but never put it in or on the task's receptacle
    placed, lost   put one where it belongs but still lost (the second object of a pick-two task, mostly)

and, over all its steps: the share of admitted `go to`s that went back to a place already visited (revisits), and
the share of steps that repeat the command of one or two steps before (loops). Use `--split` to keep one split; pass
several files (one per seed or checkpoint) to pool them.

`--commands` adds what the refused commands of every episode (won or lost) were, by kind:

    take: object not here      `take X from P` at the place P it stands at, X not in what it saw there
    take: hands full           `take X from P` where it stands and X is there (it already holds something)
    take: not at that place    `take X from P` while standing somewhere else
    go to: not in this room    a place the room's first description does not name
    go to: already there       the place it stands at
    put / move refused         a put or move the game refused (not holding it, not standing there)
    transform / use refused    clean, heat, cool or use refused
    open / close refused       an open or close refused
    not a command              a reply with no known verb, or no tool call at all

then splits the first kind by what was at the place: the task's object with none of its kind in sight, the task's
object with another one of its kind in sight (a wrong number), or some other object. Then what the agent tried, all
episodes: the share of steps spent on each verb (`go to`, `take`, `open`, ...), and the
share of steps on which that verb was admitted.

`--sight` asks whether the policy reads the room before it takes: over the steps with empty hands at a place (after an
admitted `go to`, before its first admitted `take`), split by whether one of the task's objects is in what it saw
there, the share of steps that tried to take the task's object, the share admitted, and the share refused for naming
a number not listed where it stands; once for the step right after arriving (an admitted `go to` or `open`), once for
every such step (refusal streaks included). A policy that reads the room takes far more often where the object is than
where it is not. A run's `demonstrations.jsonl` (what SFT imitated) reads as an evaluation file, all of its episodes
won.

`--streaks` adds how refusals follow one another: the share of refused commands that come right after another refused
command, and how many episodes (won and lost apart) hold a streak of at least 3 / 10 refused commands in a row, or end
in one of at least 5. A policy that cannot leave the state a refusal left it in spends its episode there.
"""
import argparse, json, re, sys
from collections import Counter, defaultdict
from pathlib import Path

STAGES = ("babbling", "never saw", "saw, no take", "no transform", "no lamp", "not placed", "placed, lost")
SHORT = {"pick_and_place_simple": "pick", "look_at_obj_in_light": "look", "pick_clean_then_place_in_recep": "clean",
         "pick_heat_then_place_in_recep": "heat", "pick_cool_then_place_in_recep": "cool", "pick_two_obj_and_place": "pick two"}
VERB = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "heat",
        "pick_cool_then_place_in_recep": "cool"}


def task_targets(game_file: str) -> tuple[str, str]:
    "The task's object and receptacle words as the game text writes them (`alarmclock`, `countertop`)."
    params = json.loads((Path(game_file).parent / "traj_data.json").read_text())["pddl_params"]
    return params["object_target"].lower(), params["parent_target"].lower()


def stage_of(r: dict) -> str:
    "The first stage a lost episode did not pass."
    steps = r["steps"]
    if not steps or sum(bool(s.get("admissible")) for s in steps) * 2 <= len(steps): return "babbling"
    obj, recep = task_targets(r["game_file"])
    ok = [s for s in steps if s.get("admissible")]
    said = lambda pattern: any(re.match(pattern, s["action"] or "") for s in ok)
    seen = any(re.search(rf"\b{obj} \d+", s.get("observation") or "") for s in steps)
    seen = seen or any(re.search(rf"\b{obj} \d+", m.get("content", "")) for m in r.get("messages", [])[:3]
                       if isinstance(m, dict) and isinstance(m.get("content"), str))
    if not said(rf"take {obj} \d+ from "):
        return "saw, no take" if seen else "never saw"
    verb = VERB.get(r["task_type"])
    if verb and not said(rf"{verb} {obj} \d+ with "): return "no transform"
    if r["task_type"] == "look_at_obj_in_light":
        return "no lamp" if not said(r"use desklamp \d+") else "placed, lost"
    if not said(rf"(put|move) {obj} \d+ (in|on|in/on|to) {recep} \d+"): return "not placed"
    return "placed, lost"


def habits(r: dict) -> tuple[int, int, int, int]:
    "Revisiting `go to`s, admitted `go to`s, steps repeating one of the two commands before, steps."
    seen_places, back, gotos, loops = set(), 0, 0, 0
    actions = [s.get("action") for s in r["steps"]]
    for i, s in enumerate(r["steps"]):
        a = s.get("action") or ""
        if i and a in actions[max(0, i - 2):i]: loops += 1
        if s.get("admissible") and a.startswith("go to "):
            gotos += 1
            if a in seen_places: back += 1
            seen_places.add(a)
    return back, gotos, loops, len(actions)


COMMAND_KINDS = ("take: object not here", "take: hands full", "take: not at that place", "go to: not in this room", "go to: already there",
                 "put / move refused", "transform / use refused", "open / close refused", "not a command")


def at_places(steps: list):
    "Each step with where the agent stands, what it saw there, and whether it just arrived (admitted `go to` / `open`)."
    here, here_text, arrived = None, "", False
    for s in steps:
        yield s, here, here_text, arrived
        a, arrived = s.get("action") or "", False
        if not s.get("admissible"): continue
        if a.startswith("go to "): here, here_text, arrived = a[len("go to "):], s.get("observation") or "", True
        elif a.startswith("open "): here_text, arrived = here_text + " " + (s.get("observation") or ""), True


def refused_kinds(r: dict) -> Counter:
    "The refused commands of one episode, by kind (see the module docstring)."
    out = Counter()
    for s, here, here_text, _ in at_places(r["steps"]):
        if s.get("admissible"): continue
        a = s.get("action") or ""
        take = re.fullmatch(r"take (.+) from (.+)", a)
        verb = a.split(" ")[0] if s.get("valid_format") else ""
        if take and take[2] != here: kind = "take: not at that place"
        elif take: kind = "take: object not here" if take[1] not in here_text else "take: hands full"
        elif a.startswith("go to "):                   # a place of this room other than here is always admitted
            kind = "go to: already there" if a[len("go to "):] == here else "go to: not in this room"
        elif verb in ("put", "move"): kind = "put / move refused"
        elif verb in ("clean", "heat", "cool", "use"): kind = "transform / use refused"
        elif verb in ("open", "close"): kind = "open / close refused"
        else: kind = "not a command"
        out[kind] += 1
    return out


MISSING_TAKES = ("task's object, none in sight", "task's object, another in sight", "another object")


def missing_takes(r: dict, obj: str) -> Counter:
    "The refused `take X from P` of one episode at the place it stands at, X not seen there, split by MISSING_TAKES."
    out = Counter()
    for s, here, here_text, _ in at_places(r["steps"]):
        if s.get("admissible"): continue
        take = re.fullmatch(r"take (.+) from (.+)", s.get("action") or "")
        if not take or take[2] != here or take[1] in here_text: continue
        if take[1].rsplit(" ", 1)[0] != obj: out["another object"] += 1
        elif re.search(rf"\b{re.escape(obj)} \d+", here_text): out["task's object, another in sight"] += 1
        else: out["task's object, none in sight"] += 1
    return out


SIGHT = ("in sight", "not in sight")


def takes_by_sight(r: dict, obj: str) -> dict:
    "Empty-handed steps at a place by (arrival or any step, object in sight or not): [steps, took it, admitted, wrong number]."
    out = {(when, k): [0, 0, 0, 0] for when in ("on arrival", "any step") for k in SIGHT}
    for s, here, here_text, arrived in at_places(r["steps"]):
        a = s.get("action") or ""
        if here is not None:
            k = "in sight" if re.search(rf"\b{re.escape(obj)} \d+", here_text) else "not in sight"
            take = re.fullmatch(rf"take ({re.escape(obj)} \d+) from (.+)", a)
            wrong = bool(take and not s.get("admissible") and take[2] == here and take[1] not in here_text)
            for when in ("on arrival", "any step") if arrived else ("any step",):
                row = out[when, k]; row[0] += 1; row[1] += bool(take); row[2] += bool(take and s.get("admissible"))
                row[3] += wrong
        if s.get("admissible") and a.startswith("take "): break     # hands full from here on
    return out


VERBS = ("go to", "take", "put / move", "open / close", "clean / heat / cool", "use", "other")


def verb_of(s: dict) -> str:
    "The verb of one step's command, as VERBS names it (`other`: no known verb, or no tool call)."
    a = (s.get("action") or "") if s.get("valid_format", True) else ""
    first = a.split(" ")[0]
    if a.startswith("go to "): return "go to"
    for verb in VERBS[1:-1]:
        if first in verb.split(" / "): return verb
    return "other"


def refusal_streaks(r: dict) -> tuple[int, int, int, int]:
    "An episode's refused commands, those right after another refused one, its longest streak and the streak it ends in."
    refused = after = longest = run = 0
    for st in r["steps"]:
        if st.get("admissible"): run = 0; continue
        refused += 1; after += run > 0; run += 1; longest = max(longest, run)
    return refused, after, longest, run


def streak_lines(streaks: dict) -> list[str]:
    "The `--streaks` table: per outcome, episodes with long refusal streaks (from `refusal_streaks` tuples)."
    every = [x for xs in streaks.values() for x in xs]
    refused, after = sum(x[0] for x in every), sum(x[1] for x in every)
    lines = [f"\nRefusal streaks: {after} of {refused} refused commands ({100 * after / max(1, refused):.1f}%) came right "
             "after another refused command\n", "| episodes | count | a streak >= 3 | a streak >= 10 | end in a streak >= 5 |",
             "|---|---|---|---|---|"]
    for outcome in ("won", "lost"):
        xs = streaks[outcome]
        pct = lambda k: f"{sum(k(x) for x in xs)} ({100 * sum(k(x) for x in xs) / max(1, len(xs)):.0f}%)"
        lines.append(f"| {outcome} | {len(xs)} | {pct(lambda x: x[2] >= 3)} | {pct(lambda x: x[2] >= 10)} | {pct(lambda x: x[3] >= 5)} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="evaluation JSONL files")
    ap.add_argument("--split", default=None, help="keep one split (valid_seen or valid_unseen)")
    ap.add_argument("--commands", action="store_true", help="also break the refused commands down by kind")
    ap.add_argument("--sight", action="store_true", help="also compare taking where the task's object is and is not in sight")
    ap.add_argument("--streaks", action="store_true", help="also count refusals that follow refusals, and long streaks of them")
    a = ap.parse_args(argv)
    per_type, won, n, refused = defaultdict(Counter), Counter(), Counter(), Counter()
    tried, admitted, missing = Counter(), Counter(), Counter()
    all_steps, streaks, sight = 0, {"won": [], "lost": []}, defaultdict(lambda: [0, 0, 0, 0])
    back = gotos = loops = steps = lost = 0
    for f in a.files:
        for line in Path(f).read_text().splitlines():
            r = json.loads(line)
            if r.get("type", "trajectory") != "trajectory" or (a.split and r["split"] != a.split): continue
            t = r["task_type"]; n[t] += 1
            refused.update(refused_kinds(r)); all_steps += len(r["steps"])
            if a.commands: missing.update(missing_takes(r, task_targets(r["game_file"])[0]))
            streaks["won" if r["won"] else "lost"].append(refusal_streaks(r))
            if a.sight:
                for k, row in takes_by_sight(r, task_targets(r["game_file"])[0]).items():
                    sight[k] = [x + y for x, y in zip(sight[k], row)]
            for st in r["steps"]:
                verb = verb_of(st); tried[verb] += 1; admitted[verb] += bool(st.get("admissible"))
            if r["won"]: won[t] += 1; continue
            lost += 1; per_type[t][stage_of(r)] += 1
            b, g, l, s = habits(r); back += b; gotos += g; loops += l; steps += s
    if not sum(n.values()): sys.exit("no trajectories in " + ", ".join(a.files))
    print("| task type | episodes | won % | " + " | ".join(STAGES) + " |")
    print("|" + "---|" * (3 + len(STAGES)))
    total = Counter()
    for t in sorted(n):
        total.update(per_type[t])
        lost_t = max(1, n[t] - won[t])
        print(f"| {SHORT.get(t, t)} | {n[t]} | {100 * won[t] / n[t]:.1f} | " +
              " | ".join(f"{100 * per_type[t][s] / lost_t:.0f}" for s in STAGES) + " |")
    print(f"| all | {sum(n.values())} | {100 * sum(won.values()) / sum(n.values()):.1f} | " +
          " | ".join(f"{100 * total[s] / max(1, lost):.0f}" for s in STAGES) + " |")
    print(f"\n(stage columns: % of the lost episodes) lost episodes: {lost}; their admitted go-tos that revisit a place: "
          f"{100 * back / max(1, gotos):.0f}% of {gotos}; their steps repeating one of the two commands before: "
          f"{100 * loops / max(1, steps):.0f}% of {steps}")
    if a.commands:
        total_refused = sum(refused.values())
        print(f"\nRefused commands, all episodes: {total_refused} of {all_steps} steps "
              f"({100 * total_refused / max(1, all_steps):.1f}%)\n\n| kind | commands | % of refused |\n|---|---|---|")
        for kind in COMMAND_KINDS:
            print(f"| {kind} | {refused[kind]} | {100 * refused[kind] / max(1, total_refused):.1f} |")
        print(f"\nThe {refused[COMMAND_KINDS[0]]} `{COMMAND_KINDS[0]}`, by what was there\n\n| take | commands | % |\n|---|---|---|")
        for kind in MISSING_TAKES:
            print(f"| {kind} | {missing[kind]} | {100 * missing[kind] / max(1, refused[COMMAND_KINDS[0]]):.1f} |")
        print("\nWhat it tried, all episodes (% of steps)\n\n| verb | tried | admitted |\n|---|---|---|")
        for verb in VERBS:
            print(f"| {verb} | {100 * tried[verb] / max(1, all_steps):.1f} | {100 * admitted[verb] / max(1, all_steps):.1f} |")
    if a.sight:
        print("\nEmpty-handed steps at a place, all episodes, by whether the task's object is in sight there\n\n"
              "| steps | the task's object | count | tried to take it % | admitted % | a number not there % |\n"
              "|---|---|---|---|---|---|")
        for when in ("on arrival", "any step"):
            for k in SIGHT:
                n_k, took, ok, wrong = sight[when, k]
                print(f"| {when} | {k} | {n_k} | {100 * took / max(1, n_k):.1f} | {100 * ok / max(1, n_k):.1f} | "
                      f"{100 * wrong / max(1, n_k):.1f} |")
    if a.streaks: print("\n".join(streak_lines(streaks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
