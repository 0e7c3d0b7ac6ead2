#!/usr/bin/env bash
# The mount's cost per 4 KiB I/O: fio 3.33 at QD 1 on a mounted preset (see docs/mount.md).
#   scripts/bench_mount.sh DEVICE [SIZE]   (SIZE: what fio writes and reads in zone 0; at most its capacity)
#   scripts/bench_mount.sh null [SIZE]     (the same on a FUSE file system that answers at once, no device:
#                                           the FUSE round trip alone; needs cargo build --release --example null_fuse)
#   POLL=1 scripts/bench_mount.sh ...       (with the mount's poll option, or null_fuse --poll)
#   ASYNC_DIO=1 scripts/bench_mount.sh ...  (with the mount's async-dio option)
set -euo pipefail
Z=${ZONELAB:-target/release/zonelab}
preset=$1
size=${2:-64M}
dir=$(mktemp -d)
if [ "$preset" = null ]; then
    "$(dirname "$Z")/examples/null_fuse" "$dir" ${POLL:+--poll} 2>/dev/null </dev/null >/dev/null &
else
    options=$(IFS=,; echo "${POLL:+poll}${POLL:+${ASYNC_DIO:+,}}${ASYNC_DIO:+async-dio}")
    "$Z" mount "$preset" "$dir" ${options:+-o "$options"} 2>/dev/null </dev/null >/dev/null &
fi
pid=$!
trap 'fusermount3 -u "$dir" 2>/dev/null; wait $pid; rmdir "$dir"' EXIT
while [ ! -d "$dir/seq" ]; do sleep 0.05; done
common="--direct=1 --allow_file_create=0 --create_on_open=1 --unlink=0 --bs=4k --output-format=json"
lat() { python3 -c "import json,sys; j=json.load(sys.stdin)['jobs']; d=j[0]['$1']; print('%s: median clat %.1f us, mean %.1f us, IOPS %.0f' % ('$2', d['clat_ns']['percentile']['50.000000']/1000, d['clat_ns']['mean']/1000, sum(x['$1']['iops'] for x in j)))"; }
fio --name=w --filename="$dir/seq/0" $common --ioengine=psync --rw=write --file_append=1 --size=$size | lat write "QD1 4k write"
fio --name=r --filename="$dir/seq/0" $common --ioengine=psync --rw=randread --size=$size --runtime=3 --time_based | lat read "QD1 4k randread"
fio --name=r --filename="$dir/seq/0" $common --ioengine=libaio --iodepth=16 --numjobs=4 --group_reporting=0 --rw=randread --size=$size --runtime=3 --time_based | lat read "4 jobs x QD16 4k randread"

