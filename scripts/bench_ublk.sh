#!/usr/bin/env bash
# The cost of the ublk path (docs/kernel.md): 4 KiB random reads at QD 1 (psync) and QD 32 (io_uring) on a
# zonelab block device of the `instant` preset and on null_blk's zoned, memory-backed device of the same shape,
# in the same kernel, and on rublk's null target where rublk is at hand, with the ratios; then the same reads on
# `zn540` with the server's pacing report.
#   scripts/bench_ublk.sh           on this machine's kernel (root, ublk_drv and null_blk loadable)
#   scripts/bench_ublk.sh --guest   in the Linux 6.12 guest of docs/kernel.md (TCG; ZONELAB_GUEST_KVM=1 for KVM)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${ZONELAB_BIN:-$here/target/release}
if [ "${1:-}" = --guest ]; then
    kernel=$(ls /boot/vmlinuz-6.* | sort -V | tail -1)
    accel=--disable-kvm
    [ "${ZONELAB_GUEST_KVM:-0}" = 1 ] && accel=
    echo "guest: $kernel, $([ -n "$accel" ] && echo TCG || echo KVM), $(nproc) host cores"
    # The figures come back through a file in a directory the guest may write (its console may drop lines).
    out=$(mktemp -d)
    vng -r "$kernel" $accel --memory 2G --cpus 2 --rwdir "$out" -- \
        "ZONELAB_BIN=$bin RUBLK=${RUBLK:-$(command -v rublk || true)} BENCH_OUT=$out/figures bash $here/scripts/bench_ublk.sh" > "$out/console" 2>&1 || true
    cat "$out/figures" 2> /dev/null || { tail -20 "$out/console"; exit 1; }
    rm -rf "$out"
    exit 0
fi
modprobe ublk_drv
modprobe null_blk nr_devices=0
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
work=$(mktemp -d)
# Every figure goes to standard output and, in the guest, to the file the host reads.
exec > >(tee -a "${BENCH_OUT:-/dev/null}") 2>&1

iops() { # device, label, fio arguments
    local dev=$1 label=$2
    shift 2
    fio --name=r --filename="$dev" --direct=1 --rw=randread --bs=4k --size=32M --runtime=5 --time_based \
        --output-format=json "$@" | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['read']; print('%.0f' % j['iops'])" \
        | tee -a "$work/$label"
}
measure() { # device, label: writes 32 MiB at zone 0, then reads at QD 1 and QD 32
    fio --name=w --filename="$1" --direct=1 --rw=write --bs=128k --size=2z --io_size=32M --zonemode=zbd --output-format=terse > /dev/null
    echo "$2 QD1 $(iops "$1" "$2-qd1" --ioengine=psync) IOPS"
    echo "$2 QD32 $(iops "$1" "$2-qd32" --ioengine=io_uring --iodepth=32) IOPS"
}
serve() {
    "$bin/zonelab" ublk serve "$1" > "$work/served" 2> "$work/server.log" &
    server=$!
    while ! grep -q ublkb "$work/served" 2> /dev/null; do sleep 0.1; done
    dev=$(sed -n 's/.*(zoned): \(\/dev\/ublkb[0-9]*\),.*/\1/p' "$work/served")
    udevadm settle 2> /dev/null || sleep 1
}

# instant: 16 zones of 16 MiB; null_blk the same (zone_size in MiB, memory backed, 4 KiB blocks).
serve preset:instant
measure "$dev" zonelab-instant
kill -TERM $server; wait $server
nb=/sys/kernel/config/nullb/bench
mkdir $nb
echo 4096 > $nb/blocksize; echo 256 > $nb/size; echo 1 > $nb/memory_backed; echo 1 > $nb/zoned
echo 16 > $nb/zone_size; echo 1 > $nb/power
# Linux 6.12 names a configfs null_blk disk after its directory; older kernels nullbINDEX.
nullb=/dev/bench
[ -b $nullb ] || nullb="/dev/nullb$(cat $nb/index)"
measure "$nullb" null_blk
echo 0 > $nb/power; rmdir $nb
# ublk's own cost: rublk's null target (ublk-org's server, no device behind it), where RUBLK names its binary or
# it is on PATH (`cargo install rublk`).
rublk=${RUBLK:-$(command -v rublk || true)}
if [ -n "$rublk" ]; then
    "$rublk" add null -n 9 --quiet
    udevadm settle 2> /dev/null || sleep 1
    echo "rublk-null QD1 $(iops /dev/ublkb9 rublk-null-qd1 --ioengine=psync) IOPS"
    echo "rublk-null QD32 $(iops /dev/ublkb9 rublk-null-qd32 --ioengine=io_uring --iodepth=32) IOPS"
    "$rublk" del -n 9
fi
for qd in qd1 qd32; do
    for base in null_blk rublk-null; do
        [ -f "$work/$base-$qd" ] || continue
        python3 -c "print('ratio at ${qd^^}: zonelab instant / $base = %.3f' % ($(cat "$work/zonelab-instant-$qd") / $(cat "$work/$base-$qd")))"
    done
done

# zn540: the same QD 1 reads, and how well the device kept the model's pace.
serve preset:zn540,zones=8
measure "$dev" zonelab-zn540
kill -TERM $server; wait $server
grep "pacing\|late" "$work/server.log" || true
rm -rf "$work"
