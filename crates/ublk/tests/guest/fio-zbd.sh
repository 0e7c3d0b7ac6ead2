#!/bin/bash
# fio's own zoned block device suite (t/zbd/test-zbd-support, from the source of the installed fio) run as fio
# ships it against a zonelab zoned block device, inside the Linux guest. The script is copied unchanged beside a
# link to the installed fio, where it looks for its binary ($(dirname "$0")/../../fio). Prints the suite's
# output; its exit status is the suite's.
#
# Usage: fio-zbd.sh ZONELAB_BINARY_DIR WORK_DIR FIO_SOURCE_DIR
set -u
bin=$1
work=$2
fio_src=$3
mkdir -p "$work/fio/t" "$work/zbd-memory"
cp -r "$fio_src/t/zbd" "$work/fio/t/zbd"
ln -sf "$(command -v fio)" "$work/fio/fio"
mountpoint -q "$work/zbd-memory" || mount -t tmpfs -o size=1200M tmpfs "$work/zbd-memory"
img="$work/zbd-memory/img"
# The shape of fio's own null_blk section with a zone capacity below the zone size and an open limit
# (run-tests-against-nullb's section 9: 4 MiB zones, 3 MiB writable, 1 GiB), the ZN540's 14 open zones, no
# latency: the suite checks the zone rules, not the flash. No active limit, as in every section of fio's: fio
# 3.33 knows only the open limit, and with the ZN540's 14 active zones nine cases (25, 33, 37, 46, 48, 54, 55,
# 57, 58) fail alike on zonelab and on null_blk with zone_max_active=14 (docs/kernel.md).
"$bin/zonelab" create "$img" --preset instant --zones 256 --zone-size 4MiB --zone-cap 3MiB --max-open 14 \
    --max-active 0 > "$work/zbd-create" 2>&1 || { cat "$work/zbd-create"; exit 1; }
"$bin/zonelab" ublk serve "$img" > "$work/zbd-served" 2> "$work/zbd-server.log" &
server=$!
for _ in $(seq 1 200); do
    grep -q ublkb "$work/zbd-served" 2> /dev/null && break
    sleep 0.1
done
dev=$(sed -n 's/.*(zoned): \(\/dev\/ublkb[0-9]*\),.*/\1/p' "$work/zbd-served")
udevadm settle 2> /dev/null
[ -b "$dev" ] || { echo "no block device: $(cat "$work/zbd-server.log")"; exit 1; }
bash "$work/fio/t/zbd/test-zbd-support" "$dev"
status=$?
kill -TERM "$server"
wait "$server"
cat "$work/zbd-server.log"
exit $status
