#!/usr/bin/env bash
# Publish an official run: its table and figures, what its lost episodes did, and (with --ship) its sampler weights.
#
#     bash docs/official/publish_run.sh runs/official docs/official/run4-seed0 [--readme] [--ship] [--seeds=0,1]
#
# Writes OUT/table.md, results.json, success.png, rollout.png (docs/official/official_table.py) and OUT/lost_episodes.md
# (docs/official/lost_episodes.py --commands --streaks, SFT and PPO at T = 1 of each seed in --seeds, default 0, one
# section per seed and split).
# --readme also rewrites the README's official table; --ship copies seed 0's final SFT and PPO sampler weights (the
# portable adapter_config.json, adapter_model.safetensors and sampler.json) into models/official-{sft,ppo}-seed0.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: publish_run.sh RUN OUT [--readme] [--ship]" >&2; exit 2; fi
run=$1; out=$2; shift 2
readme=(); ship=0; seeds=(); lost_seeds=(0)
for flag in "$@"; do
  case $flag in
    --readme) readme=(--readme README.md) ;;
    --ship) ship=1 ;;
    --seeds=*) IFS=, read -ra list <<< "${flag#--seeds=}"; seeds=(--seeds "${list[@]}"); lost_seeds=("${list[@]}") ;;   # the table's seeds only
    *) echo "publish_run.sh: unknown flag $flag (allowed: --readme, --ship, --seeds=A,B)" >&2; exit 2 ;;
  esac
done
[ -d "$run/eval" ] || { echo "publish_run.sh: $run holds no evaluations (eval/)" >&2; exit 2; }
finished() { tail -n 1 "$run/eval/$1-seed${2:-0}.jsonl" 2>/dev/null | grep -q '"type": "summary"'; }   # its summary is written
if [ $ship = 1 ]; then                # only weights whose evaluation finished: the final save, the figures published
  for stage in sft ppo; do
    finished $stage || { echo "publish_run.sh: --ship needs $run/eval/$stage-seed0.jsonl finished" >&2; exit 2; }
  done
fi

uv run python docs/official/official_table.py "$run" --out "$out" "${readme[@]}" "${seeds[@]}"
lost=$out/lost_episodes.md; : > "$lost.tmp"
for seed in "${lost_seeds[@]}"; do
  for stage in sft ppo; do
    file=$run/eval/$stage-seed$seed.jsonl
    finished $stage "$seed" || { echo "skipping $file (not finished)"; continue; }
    for split in valid_seen valid_unseen; do
      { echo "## ${stage^^} seed $seed, $split ($file)"; echo
        uv run python docs/official/lost_episodes.py "$file" --split "$split" --commands --streaks; echo; } >> "$lost.tmp"
    done
  done
done
mv "$lost.tmp" "$lost"

if [ $ship = 1 ]; then
  for stage in sft ppo; do
    src=$(tail -n 1 "$run/runs/$stage-seed0/checkpoints.jsonl" | python3 -c "import json, sys; print(json.load(sys.stdin)['sampler_path'])")
    mkdir -p "models/official-$stage-seed0"
    for f in adapter_config.json adapter_model.safetensors sampler.json; do cp "$src/$f" "models/official-$stage-seed0/$f"; done
    echo "shipped $src -> models/official-$stage-seed0"
  done
fi
