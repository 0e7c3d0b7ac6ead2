#!/usr/bin/env bash
# ZWAL on real RocksDB, in real time (seed 001, "ZWAL: Rethinking Write-ahead Logs for ZNS SSDs with Zone
# Appends"): the WAL through zonedfs's WAL library, ZWAL (zone appends, QD 32) against the conventional WAL
# (ZenFS's: one write in flight), on the confzns-zwal preset through io_uring passthrough (which carries zone
# appends; the paper's SZD used it too).
#   1. Figure 4 at application level: db_bench fillrandom, 16-byte keys and 3980-byte values (one PUT is one
#      4 KiB WAL record), a 1 GiB memtable so nothing flushes, over WAL buffer sizes.
#   2. Figure 6a: zonelab_ycsb load and workloads A, B, D, E with 4 KiB records, 8 KiB WAL buffers, each
#      workload on a fresh device after its own load phase (as the paper reformatted before each), with a
#      memtable a tenth of the data (the paper's 2 GiB memtable against 20 GiB loaded).
# The two designs alternate within each round, so what they share (this machine's load) cancels in the
# ratios. See docs/rocksdb.md.
#   scripts/zwal_rocksdb.sh [SECONDS] [ROUNDS] [RECORDS] [OPERATIONS]   (defaults 5, 2, 20000, 100000)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=${1:-5}
rounds=${2:-2}
records=${3:-20000}
operations=${4:-100000}
plugin=$("$root/rocksdb/build.sh" 2>/dev/null)
ycsb="$(dirname "$plugin")/zonelab_ycsb"
uri() { echo "zonelab://preset:confzns-zwal?host=io_uring_cmd&wal=$1&wal_buffer_bytes=$2&wal_queue_depth=32&wal_barrier_bytes=0"; }

echo "1. db_bench fillrandom, 4 KiB PUTs, ops/s (mean of $rounds rounds of ${seconds} s)"
declare -A fill
for round in $(seq "$rounds"); do
    for kib in 4 16 64 256 1024; do
        for design in zwal conventional; do
            ops=$(LD_PRELOAD="$plugin" db_bench --fs_uri="$(uri "$design" $((kib * 1024)))" \
                --benchmarks=fillrandom --num=100000000 --duration="$seconds" --key_size=16 --value_size=3980 \
                --write_buffer_size=1073741824 --compression_type=none --seed="$round" 2>&1 |
                awk '$1 == "fillrandom" { for (i = 1; i <= NF; i++) if ($(i+1) == "ops/sec") print $i }')
            fill[$kib,$design]=$(( ${fill[$kib,$design]:-0} + ops ))
        done
    done
done
printf "%10s %12s %14s %8s\n" "buffer" "ZWAL" "conventional" "ratio"
for kib in 4 16 64 256 1024; do
    awk -v k="$kib" -v z="${fill[$kib,zwal]}" -v c="${fill[$kib,conventional]}" -v r="$rounds" \
        'BEGIN { printf "%7d KiB %12.0f %14.0f %7.2fx\n", k, z / r, c / r, z / c }'
done
echo "the paper (Figure 4, db_bench on ConfZNS): 13.94x at 4 KiB, 1.92x at 256 KiB; ZenFS's peak 48.71 KIOPS at 1 MiB"

echo
echo "2. YCSB, 4 KiB records, 8 KiB WAL buffers: $records records, $operations operations, ops/s (mean of $rounds rounds)"
memtable=$(( records * 4096 / 10 ))
declare -A phase
for round in $(seq "$rounds"); do
    for workload in a b d e; do
        for design in zwal conventional; do
            read -r load run < <("$ycsb" --db=/ycsb --fs_uri="$(uri "$design" 8192)" --workload="$workload" \
                --phase=both --records="$records" --operations="$operations" --value_bytes=4096 \
                --write_buffer_bytes="$memtable" --seed="$round" |
                python3 -c 'import json, sys
jobs = {job["jobname"]: job["ops_per_s"] for job in json.load(sys.stdin)["jobs"]}
print(round(jobs["load"]), round(jobs["run"]))')
            phase[load,$design]=$(( ${phase[load,$design]:-0} + load ))
            phase[$workload,$design]=$(( ${phase[$workload,$design]:-0} + run ))
        done
    done
done
printf "%10s %12s %14s %8s\n" "phase" "ZWAL" "conventional" "ratio"
for name in load a b d e; do
    # Every workload has its own load phase: the load row is the mean over the four.
    runs=$rounds
    [ "$name" = load ] && runs=$(( rounds * 4 ))
    awk -v n="$name" -v z="${phase[$name,zwal]}" -v c="${phase[$name,conventional]}" -v r="$runs" \
        'BEGIN { printf "%10s %12.0f %14.0f %7.2fx\n", n, z / r, c / r, z / c }'
done
echo "the paper (Figure 6a, ConfZNS, 20 GiB loaded, 1 million operations): load 8.56x, run phases up to 2.96x (D)"
