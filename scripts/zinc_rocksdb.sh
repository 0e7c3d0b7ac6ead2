#!/usr/bin/env bash
# ZINC's workload-level table on real RocksDB, in real time: db_bench fillrandom with synced puts through the
# plugin on the zn540 preset, with no resets and with a reset load of 32 full-zone resets a second (about 50 %
# of the rate a ZN540 sustains, our reading of the slides' "50% Reset"), under mq-deadline and ZINC. The four
# runs alternate round by round, so what they share (this machine's load) cancels in the ratios. See
# docs/rocksdb.md.
#   scripts/zinc_rocksdb.sh [SECONDS] [ROUNDS] [THREADS] [SYNC]   (defaults 5, 3, 4, 1: --sync=SYNC)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=${1:-5}
rounds=${2:-3}
threads=${3:-4}
sync=${4:-1}
plugin=$("$root/rocksdb/build.sh" 2>/dev/null)
# The last 800 of the ZN540's 904 zones are the reset load's pool: 25 s of resets at 32/s.
run() {
    ZONELAB_STATS=1 LD_PRELOAD="$plugin" db_bench \
        --fs_uri="zonelab://preset:zn540?scheduler=$1&reset_load=$2&reset_pool=800" \
        --benchmarks=fillrandom --num=100000000 --duration="$seconds" --value_size=400 --sync="$sync" \
        --threads="$threads" --seed=1 2>&1 |
        awk '$1 == "fillrandom" { for (i = 1; i <= NF; i++) if ($(i+1) == "ops/sec") ops = $i }
             /zonelab stats/ { match($0, /"resets":[0-9]+/); resets = substr($0, RSTART + 9, RLENGTH - 9) }
             END { printf "%s %s\n", ops, resets }'
}
declare -A total
for round in $(seq "$rounds"); do
    for scheduler in mq-deadline zinc; do
        for rate in 0 32; do
            read -r ops resets < <(run "$scheduler" "$rate")
            printf "round %d %-11s %2s resets/s: %7d ops/s (%d resets done)\n" "$round" "$scheduler" "$rate" "$ops" "$resets"
            total[$scheduler,$rate]=$(( ${total[$scheduler,$rate]:-0} + ops ))
        done
    done
done
for scheduler in mq-deadline zinc; do
    awk -v s="$scheduler" -v a="${total[$scheduler,0]}" -v b="${total[$scheduler,32]}" -v r="$rounds" \
        'BEGIN { printf "%-11s mean %7.0f -> %7.0f ops/s with 32 resets/s: %+.1f %%\n", s, a / r, b / r, (b - a) * 100 / a }'
done
echo "the slides: mq-deadline 78.9 -> 72.1 KIOPS (-8.7 %), ZINC 78.2 -> 80.0 KIOPS (+2.3 %)"
