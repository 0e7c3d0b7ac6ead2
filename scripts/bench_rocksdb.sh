#!/usr/bin/env bash
# What zonedfs and the RocksDB plugin cost: db_bench fillrandom and readrandom through the plugin on a device
# that takes no flash time (the instant preset, data in memory), against RocksDB's default file system on a
# tmpfs directory, alternating, in one run (see docs/rocksdb.md).
#   scripts/bench_rocksdb.sh [NUM] [ROUNDS]   (NUM keys of 16 bytes with 400-byte values; default 500000, 3)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
num=${1:-500000}
rounds=${2:-3}
plugin=$("$root/rocksdb/build.sh" 2>/dev/null)
tmpfs=$(mktemp -d -p /dev/shm zonelab-bench-XXXXXX)
trap 'rm -rf "$tmpfs"' EXIT
# 256 zones of 64 MiB: room for the database and its compactions. A small block cache, so reads reach the device.
device="preset:instant,namespace.zones=256,namespace.zone-size=\"64MiB\",namespace.zone-cap=\"64MiB\""
common=(--benchmarks=fillrandom,readrandom --num="$num" --reads="$((num / 5))" --value_size=400
        --compression_type=none --cache_size=8388608 --threads=1 --seed=1)
rate() { awk -v name="$1" '$1 == name { for (i = 1; i <= NF; i++) if ($(i+1) == "ops/sec") print $i }'; }
for round in $(seq "$rounds"); do
    rm -rf "${tmpfs:?}"/*
    out_fs=$(LD_PRELOAD="$plugin" db_bench --fs_uri="zonelab://$device" "${common[@]}" 2>/dev/null)
    out_tmpfs=$(db_bench --db="$tmpfs/db" "${common[@]}" 2>/dev/null)
    for bench in fillrandom readrandom; do
        z=$(echo "$out_fs" | rate "$bench")
        t=$(echo "$out_tmpfs" | rate "$bench")
        awk -v r="$round" -v b="$bench" -v z="$z" -v t="$t" \
            'BEGIN { printf "round %d %-10s zonelab %8d ops/s  tmpfs %8d ops/s  ratio %.2f\n", r, b, z, t, z / t }'
    done
done
