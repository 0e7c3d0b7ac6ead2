#!/usr/bin/env bash
# ReZNS's YCSB experiment (Figures 7, 8 and 14) on real RocksDB, in real time: zonelab_ycsb loads and runs
# workloads A, B and F through the plugin on the nvmevirt-rezns preset (64 MiB zones, the paper's Table 1),
# under the static baseline and under ReZNS, alternating, in one run. Per run: the run phase's operations per
# second, the zone resets zonedfs issued, the blocks the device erased, and the device's flash energy.
#   scripts/rezns_ycsb.sh [RECORDS] [OPERATIONS] [THREADS]   (defaults 200000, 200000, 4)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
records=${1:-200000}
operations=${2:-200000}
threads=${3:-4}
plugin=$("$root/rocksdb/build.sh" 2>/dev/null)
ycsb="$(dirname "$plugin")/zonelab_ycsb"
printf "%-8s %-18s %10s %8s %12s %10s\n" workload policy "run ops/s" resets "blocks erased" "energy J"
for workload in a b f; do
    for policy in static-full-erase rezns; do
        out=$(mktemp)
        ZONELAB_STATS=1 "$ycsb" --db=/ycsb \
            --fs_uri="zonelab://preset:nvmevirt-rezns,media.mapping.policy=$policy" \
            --workload="$workload" --phase=both --records="$records" --operations="$operations" \
            --threads="$threads" --seed=1 >"$out" 2>"$out.err"
        python3 - "$out" "$out.err" "$workload" "$policy" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
run = [job for job in result["jobs"] if job["jobname"] == "run"][0]
stats = json.loads(open(sys.argv[2]).read().split(": ", 1)[1])
device = stats["device"]
erased = sum(device["flash"]["block_erases"])
print("%-8s %-18s %10.0f %8d %12d %10.2f" % (sys.argv[3], sys.argv[4], run["ops_per_s"],
      stats["fs"]["zone_resets"], erased, device["energy_j_total"]))
PY
        rm -f "$out" "$out.err"
    done
done
echo "the paper (F2FS on NVMeVirt, 64 MiB zones): ReZNS +35 %, +19 %, +16 % throughput and -52 %, -61 %, -54 % zone resets for A, B, F"
