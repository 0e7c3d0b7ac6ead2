#!/bin/bash
# The kernel's own zoned stack on zonelab's block devices, run inside a Linux guest (crates/ublk/tests/guest.rs
# boots it): sysfs and blkzone against zonelab's report, fio on the block device, F2FS as the ZNS study set it up
# (kill -9 of the server included), btrfs in zoned mode, ext4 with discard on the conventional namespace, libzbd,
# dm-linear and dm-flakey, null_blk's zoned device as the kernel's reference for the errors, and fio's own t/zbd
# suite. Every case prints "CASE name: ok" or "CASE name: FAIL why"; the test asserts that every case ran and none
# failed.
#
# Usage: kernel-stack.sh ZONELAB_BINARY_DIR WORK_DIR FIO_SOURCE_DIR
set -u
bin=$1
work=$2
fio_src=${3:-}
zonelab="$bin/zonelab"
# The image lives in the guest's memory (tmpfs): the host directory shared with the guest cannot punch holes, so a
# discard there would write its zeros.
mkdir -p "$work/memory" && mount -t tmpfs -o size=2500M tmpfs "$work/memory"
img="$work/memory/img"
log="$work/server.log"
server=

# Each case's line goes to standard output and to $work/cases, which the test reads (the guest's console may
# drop lines).
pass() { echo "CASE $1: ok (${SECONDS} s)" | tee -a "$work/cases"; }
fail() { echo "CASE $1: FAIL $2 (${SECONDS} s)" | tee -a "$work/cases"; }

# Serves $img, or $spec when set (with `serve`'s options, if any); sets $server, $cnv and $zns (the conventional and zoned block
# devices).
serve() {
    "$zonelab" ublk serve "${spec:-$img}" "$@" > "$work/served" 2>> "$log" &
    server=$!
    for _ in $(seq 1 200); do
        [ "$(grep -c ublkb "$work/served" 2> /dev/null)" = 2 ] && break
        sleep 0.1
    done
    cnv=$(sed -n 's/.*(conventional): \(\/dev\/ublkb[0-9]*\),.*/\1/p' "$work/served")
    zns=$(sed -n 's/.*(zoned): \(\/dev\/ublkb[0-9]*\),.*/\1/p' "$work/served")
    udevadm settle 2> /dev/null
    [ -b "$zns" ] && [ -b "$cnv" ]
}

stop() {
    kill -TERM "$server" 2> /dev/null
    wait "$server" 2> /dev/null
}

modprobe ublk_drv || { fail setup "no ublk_drv"; exit 1; }
modprobe null_blk nr_devices=0 || fail setup "no null_blk"
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
# The ZN540 preset (its flash, 14 open/active zones, ZASL, MDTS and 4 GiB conventional namespace) with 64 zones of
# 128 MiB (96 MiB writable): F2FS formatted over the study's 50 zones of 2 GiB zeroes about 1 GB of metadata,
# which takes many minutes under TCG.
zs=262144 # sectors a zone
"$zonelab" create "$img" --preset zn540 --zones 64 --zone-size 128MiB --zone-cap 96MiB > "$work/create" 2>&1 \
    || { fail setup "zonelab create: $(cat "$work/create")"; exit 1; }
serve || { fail setup "the block devices did not appear: $(cat "$log")"; exit 1; }
z=$(basename "$zns")
c=$(basename "$cnv")

# 1. sysfs as on a real ZNS drive.
q=/sys/block/$z/queue
got="$(cat $q/zoned) $(cat $q/chunk_sectors) $(cat $q/nr_zones) $(cat $q/max_open_zones) $(cat $q/max_active_zones) $(cat $q/logical_block_size) $(cat $q/zone_append_max_bytes) $(cat $q/max_hw_sectors_kb)"
want="host-managed 262144 64 14 14 4096 131072 256"
[ "$got" = "$want" ] && pass sysfs-zoned || fail sysfs-zoned "got '$got', want '$want'"
q=/sys/block/$c/queue
got="$(cat $q/zoned) $(cat $q/logical_block_size) $(($(cat /sys/block/$c/size) * 512))"
[ "$got" = "none 4096 4294967296" ] && [ "$(cat $q/discard_max_bytes)" -gt 0 ] && pass sysfs-conventional \
    || fail sysfs-conventional "got '$got', discard_max_bytes $(cat $q/discard_max_bytes)"

# 2. blkzone's commands reach the device, and its report is zonelab's.
head -c 1M /dev/urandom > "$work/one"
dd if="$work/one" of="$zns" bs=64k oflag=direct status=none \
    && dd if="$work/one" of="$zns" bs=64k seek=$(($zs * 512 / 65536)) count=3 oflag=direct status=none \
    && blkzone finish -o $((2 * $zs)) -c 1 "$zns" \
    && blkzone open -o $((3 * $zs)) -c 1 "$zns" \
    && blkzone close -o $(($zs)) -c 1 "$zns" \
    && dd if="$work/one" of="$zns" bs=64k seek=$((5 * $zs * 512 / 65536)) count=1 oflag=direct status=none \
    && blkzone reset -o $((5 * $zs)) -c 1 "$zns" \
    && pass blkzone-commands || fail blkzone-commands "a command failed"
# Debian's blkzone (util-linux 2.38) prints a full zone's write pointer as the zone's length, from the
# kernel's wp = start + len; newer ones and zonelab print N/A (docs/semantics.md).
blkzone report "$zns" | sed -E '/zcond:14\(fu\)/ s/wptr 0x[0-9a-f]+/wptr N\/A/' > "$work/kernel-report"
cmp -s "$work/one" <(dd if="$zns" bs=1M count=1 iflag=direct status=none) && pass read-back \
    || fail read-back "zone 0 does not read back what was written"
dd if="$work/one" of="$zns" bs=64k seek=100 count=1 oflag=direct status=none 2> "$work/offwp" \
    && fail write-off-the-write-pointer "accepted" \
    || { grep -q "Input/output error" "$work/offwp" && pass write-off-the-write-pointer \
        || fail write-off-the-write-pointer "$(cat "$work/offwp")"; }
stop
"$zonelab" report "$img" --format blkzone > "$work/zonelab-report"
diff "$work/kernel-report" "$work/zonelab-report" > "$work/report-diff" && pass blkzone-report \
    || fail blkzone-report "$(head -5 "$work/report-diff")"

# 3. fio on the block device itself, verified.
serve || { fail setup "the restarted server did not serve"; exit 1; }
blkzone reset "$zns"
for engine in psync libaio io_uring; do
    fio --name="$engine" --filename="$zns" --zonemode=zbd --direct=1 --ioengine=$engine --iodepth=4 \
        --rw=write --bs=64k --size=1z --io_size=8M --offset=$((6 * $zs * 512)) --verify=crc32c --output-format=terse \
        > "$work/fio-$engine" 2>&1 && pass "fio-zbd-$engine" || fail "fio-zbd-$engine" "$(tail -3 "$work/fio-$engine")"
done
# A deep queue reaches the device: 32 random reads at once on the zoned namespace (the ZN540's reads take the
# model's tens of microseconds, so they wait on the device together); the server says at exit how many waited at
# once.
fio --name=qd32 --filename="$zns" --direct=1 --ioengine=io_uring --iodepth=32 --rw=randread --bs=4k \
    --offset=$((6 * $zs * 512)) --size=8M --io_size=16M > "$work/fio-qd32" 2>&1 || fail queue-depth "$(tail -3 "$work/fio-qd32")"
stop
depth=$(sed -n "s/.*$z: at most \([0-9]*\) requests.*/\1/p" "$log" | tail -1)
[ "${depth:-0}" -ge 8 ] && pass "queue-depth (at most $depth requests on the device at once)" \
    || fail queue-depth "at most ${depth:-no} requests were on the device at once at QD 32"
serve || { fail setup "the restarted server did not serve"; exit 1; }
fio --name=randwrite --filename="$cnv" --direct=1 --ioengine=io_uring --iodepth=8 --rw=randwrite --bs=4k \
    --size=8M --verify=crc32c > "$work/fio-cnv" 2>&1 && pass fio-conventional \
    || fail fio-conventional "$(tail -3 "$work/fio-cnv")"

# 4. F2FS as the ZNS study formats it: the zoned namespace for data, the conventional one for metadata.
blkzone reset "$zns"
mkdir -p $work/f2fs
write_files() {
    for i in $(seq 1 "$2"); do
        head -c $((i * 37 * 1024)) /dev/urandom > "$1/f$i" && sync "$1/f$i"
    done
    (cd "$1" && sha256sum f* > "$work/sums")
}
# fsck.f2fs's failed checks of a multi-device F2FS (none when it is clean); --dry-run changes nothing.
f2fs_fails() {
    fsck.f2fs --dry-run "$1" > "$work/fsck.$2" 2>&1
    grep -o '\[FSCK\] [^[]*\[Fail\]' "$work/fsck.$2" | sed 's/  */ /g'
}
# mkfs, mount, files written and synced, unmount, fsck, remount, every byte checked: prints fsck's failed checks,
# fails when a file is not as written.
f2fs_round() { # zoned device, conventional device, label
    mkfs.f2fs -f -m -c "$1" "$2" > "$work/mkfs.$3" 2>&1 && mount -t f2fs "$2" $work/f2fs || return 1
    write_files $work/f2fs 40
    umount $work/f2fs
    f2fs_fails "$2" "$3" > "$work/fails.$3"
    mount -t f2fs "$2" $work/f2fs && (cd $work/f2fs && sha256sum -c --quiet "$work/sums")
    local intact=$?
    umount $work/f2fs
    return $intact
}
# null_blk devices shaped as the namespaces: memory-backed, 4 KiB blocks; the zoned one with the zoned
# namespace's zone size and capacity (MiB) and limits. Prints the block device.
null_blk() { # name, size in MiB, zoned (0 or 1)
    local nb=/sys/kernel/config/nullb/$1
    mkdir $nb || return 1
    echo 4096 > $nb/blocksize
    echo "$2" > $nb/size
    echo 1 > $nb/memory_backed
    if [ "$3" = 1 ]; then
        echo 1 > $nb/zoned
        echo 128 > $nb/zone_size
        echo 96 > $nb/zone_capacity
        echo 14 > $nb/zone_max_open
        echo 14 > $nb/zone_max_active
    fi
    echo 1 > $nb/power
    # Linux 6.12 names a configfs null_blk disk after its directory; older kernels nullbINDEX.
    udevadm settle 2> /dev/null
    local dev="/dev/$1"
    [ -b "$dev" ] || dev="/dev/nullb$(cat $nb/index)"
    echo "$dev"
}
null_blk_off() {
    echo 0 > /sys/kernel/config/nullb/$1/power
    rmdir /sys/kernel/config/nullb/$1
}
# The kernel's reference: F2FS on null_blk of the same shape. What fsck.f2fs (f2fs-tools 1.15) says there, it says
# of the file system whatever the device; zonelab's must say the same.
if nullz=$(null_blk f2fs-zoned $((64 * 128)) 1) && nullc=$(null_blk f2fs-cnv 4096 0) \
    && f2fs_round "$nullz" "$nullc" null_blk; then
    echo "fsck.f2fs on null_blk: $(tr '\n' ' ' < "$work/fails.null_blk")"
else
    fail f2fs-reference "F2FS on null_blk: $(tail -2 "$work/mkfs.null_blk" 2> /dev/null)"
fi
null_blk_off f2fs-zoned 2> /dev/null
null_blk_off f2fs-cnv 2> /dev/null
same_as_null_blk() { cmp -s "$work/fails.$1" "$work/fails.null_blk"; }
if f2fs_round "$zns" "$cnv" zonelab; then
    same_as_null_blk zonelab && pass f2fs \
        || fail f2fs "fsck.f2fs: $(tr '\n' ' ' < "$work/fails.zonelab"), on null_blk: $(tr '\n' ' ' < "$work/fails.null_blk")"
else
    fail f2fs "mkfs, mount or data: $(tail -2 "$work/mkfs.zonelab")"
fi
# F2FS's crash rounds: kill -9 of the server mid-write, a new server on the image, fsck, every fsynced file
# intact.
for round in 1 2 3 4 5; do
    mount -t f2fs "$cnv" $work/f2fs || { fail "f2fs-crash-$round" "mount"; break; }
    mkdir -p $work/f2fs/r$round
    write_files $work/f2fs/r$round 12
    cp "$work/sums" "$work/sums-$round"
    (while true; do head -c 256k /dev/urandom > $work/f2fs/r$round/unsynced 2> /dev/null || break; done) &
    writer=$!
    sleep 1
    kill -9 "$server"
    wait "$server" 2> /dev/null
    kill "$writer" 2> /dev/null
    wait "$writer" 2> /dev/null
    umount -l $work/f2fs 2> /dev/null
    for _ in $(seq 1 50); do [ -b "$zns" ] || break; sleep 0.1; done
    serve || { fail "f2fs-crash-$round" "restart: $(tail -2 "$log")"; break; }
    if mount -t f2fs "$cnv" $work/f2fs && (cd $work/f2fs/r$round && sha256sum -c --quiet "$work/sums-$round"); then
        umount $work/f2fs
        f2fs_fails "$cnv" "crash-$round" > "$work/fails.crash-$round"
        same_as_null_blk "crash-$round" && pass "f2fs-crash-$round" \
            || fail "f2fs-crash-$round" "fsck.f2fs after recovery: $(tr '\n' ' ' < "$work/fails.crash-$round")"
    else
        fail "f2fs-crash-$round" "fsynced data lost or no mount: $(dmesg | grep -i f2fs | tail -2)"
        umount $work/f2fs 2> /dev/null
    fi
done

# 5. btrfs in zoned mode on the zoned namespace.
blkzone reset "$zns"
mkdir -p $work/btrfs
if mkfs.btrfs -f -d single -m single "$zns" > "$work/mkfs.btrfs" 2>&1 && mount -t btrfs "$zns" $work/btrfs; then
    write_files $work/btrfs 24
    btrfs scrub start -B $work/btrfs > "$work/scrub" 2>&1 || fail btrfs "scrub: $(tail -3 "$work/scrub")"
    umount $work/btrfs && mount -t btrfs "$zns" $work/btrfs && (cd $work/btrfs && sha256sum -c --quiet "$work/sums") \
        && pass btrfs || fail btrfs "data after remount"
    umount $work/btrfs 2> /dev/null
else
    fail btrfs "mkfs or mount: $(dmesg | grep -i btrfs | tail -3)"
fi

# 6. ext4 with discard on the conventional namespace.
mkdir -p $work/ext4
if mkfs.ext4 -q -F "$cnv" > "$work/mkfs.ext4" 2>&1 && mount -o discard "$cnv" $work/ext4; then
    write_files $work/ext4 24
    rm $work/ext4/f1 $work/ext4/f2 && sed -i '/ f[12]$/d' "$work/sums"
    fstrim -v $work/ext4 > "$work/fstrim" 2>&1 || fail ext4 "fstrim: $(cat "$work/fstrim")"
    umount $work/ext4 && mount "$cnv" $work/ext4 && (cd $work/ext4 && sha256sum -c --quiet "$work/sums") \
        && pass ext4-discard || fail ext4-discard "data after remount"
    umount $work/ext4 2> /dev/null
else
    fail ext4-discard "mkfs or mount: $(tail -2 "$work/mkfs.ext4") $(dmesg | tail -2)"
fi

# 6b. A recoverable server killed under a mounted ext4 with writes in flight: a new server takes the same devices
# over, the writes that waited go on, and nothing fails; fsck is clean and every synced file intact.
stop
serve --recoverable || fail ext4-recovery "the recoverable server did not serve"
if mount "$cnv" $work/ext4; then
    before="$cnv $zns"
    mkdir -p $work/ext4/rec
    write_files $work/ext4/rec 12
    rm -f "$work/stop-writer" "$work/writer-errors"
    (i=0; while [ ! -e "$work/stop-writer" ]; do
        i=$((i + 1))
        dd if=/dev/urandom of=$work/ext4/rec/w$((i % 8)) bs=64k count=4 conv=fsync status=none 2>> "$work/writer-errors" \
            || echo "write $i failed" >> "$work/writer-errors"
        echo $i > "$work/writer-count"
    done) &
    writer=$!
    sleep 1
    kill -9 "$server"
    wait "$server" 2> /dev/null
    sleep 2
    at_kill=$(cat "$work/writer-count")
    serve --recoverable
    sleep 2
    touch "$work/stop-writer"
    wait "$writer"
    after=$(cat "$work/writer-count")
    sync && umount $work/ext4 && fsck.ext4 -n "$cnv" > "$work/fsck-recovery" 2>&1 && mount "$cnv" $work/ext4 \
        && (cd $work/ext4/rec && sha256sum -c --quiet "$work/sums") && intact=yes || intact=no
    umount $work/ext4 2> /dev/null
    if [ "$intact" = yes ] && [ "$cnv $zns" = "$before" ] && [ ! -s "$work/writer-errors" ] && [ "$after" -gt "$at_kill" ]; then
        pass "ext4-recovery (writes $at_kill before the kill, $after after the takeover)"
    else
        fail ext4-recovery "intact $intact, devices '$before' then '$cnv $zns', writes $at_kill then $after, errors: $(head -3 "$work/writer-errors" 2> /dev/null) $(tail -3 "$work/fsck-recovery")"
    fi
else
    fail ext4-recovery "mount"
fi
stop
serve || { fail setup "the server did not serve after the recovery"; exit 1; }

# 7. The rest of the zoned ecosystem: libzbd's zbd (Debian's zbd-utils) and device mapper's dm-linear over the
# zoned device, whose zones the kernel reports through the target.
blkzone reset "$zns"
dd if="$work/one" of="$zns" bs=64k count=2 oflag=direct status=none
if zbd report -i "$zns" > "$work/zbd-report" 2>&1 && grep -qi "host-managed" "$work/zbd-report" \
    && zbd reset -ofst 0 -len $((zs * 512)) "$zns" > /dev/null 2>&1 \
    && [ "$(blkzone report -c 1 "$zns" | grep -o 'zcond: *[0-9]*' | tr -d ' ')" = "zcond:1" ]; then
    pass libzbd
else
    fail libzbd "$(head -12 "$work/zbd-report")"
fi
if dmsetup create zonelab-linear --table "0 $((8 * zs)) linear $zns 0" 2> "$work/dmsetup"; then
    lin=/dev/mapper/zonelab-linear
    dd if="$work/one" of="$lin" bs=64k seek=$((zs * 512 / 65536)) count=4 oflag=direct status=none
    [ "$(cat /sys/block/$(basename "$(readlink -f "$lin")")/queue/zoned)" = host-managed ] \
        && [ "$(blkzone report -o "$zs" -c 1 "$lin" | sed 's/.*wptr \(0x[0-9a-f]*\).*/\1/')" = 0x000200 ] \
        && [ "$(blkzone report -o "$zs" -c 1 "$zns" | sed 's/.*wptr \(0x[0-9a-f]*\).*/\1/')" = 0x000200 ] \
        && pass dm-linear || fail dm-linear "$(blkzone report -o "$zs" -c 1 "$lin")"
    dmsetup remove zonelab-linear
else
    fail dm-linear "$(cat "$work/dmsetup")"
fi

# dm-flakey over the zoned device: its dropped writes (completed without reaching the device) leave the zone as it
# was, and its failed writes reach the writer as EIO; a second way to inject faults beside `zonelab inject`.
blkzone reset -o $((3 * zs)) -c 1 "$zns"
flakey() { # feature: creates or reloads the mapping over the first 8 zones, always in its "down" interval
    local table="0 $((8 * zs)) flakey $zns 0 0 1 1 $1"
    if [ -e /dev/mapper/zonelab-flakey ]; then
        dmsetup reload zonelab-flakey --table "$table" && dmsetup resume zonelab-flakey
    else
        dmsetup create zonelab-flakey --table "$table"
    fi
}
zone3() { blkzone report -o $((3 * zs)) -c 1 "$zns" | sed 's/.*wptr \(0x[0-9a-f]*\).*zcond: *\([0-9]*\).*/\1 \2/'; }
if flakey drop_writes 2> "$work/dmsetup"; then
    fl=/dev/mapper/zonelab-flakey
    dd if="$work/one" of="$fl" bs=64k seek=$((3 * zs * 512 / 65536)) count=1 oflag=direct status=none 2> "$work/flakey" \
        && [ "$(zone3)" = "0x000000 1" ] && dropped=yes || dropped="$(zone3) $(cat "$work/flakey")"
    flakey error_writes 2>> "$work/dmsetup"
    dd if="$work/one" of="$fl" bs=64k seek=$((3 * zs * 512 / 65536)) count=1 oflag=direct status=none 2> "$work/flakey"
    grep -q "Input/output error" "$work/flakey" && [ "$(zone3)" = "0x000000 1" ] && failed=yes \
        || failed="$(zone3) $(cat "$work/flakey")"
    [ "$dropped $failed" = "yes yes" ] && pass dm-flakey \
        || fail dm-flakey "dropped write: $dropped; failed write: $failed"
    dmsetup remove zonelab-flakey
else
    fail dm-flakey "$(cat "$work/dmsetup")"
fi

# 8. null_blk's zoned device, shaped as the zoned namespace (zone size and capacity in MiB, 14 open and active),
# gives the same errors for the same refused jobs.
if nullb=$(null_blk zl $((64 * 128)) 1); then
    blkzone reset "$zns"
    refused() { # device, read|write, offset and length in 64 KiB units: dd's error, or "ok"
        local said
        if [ "$2" = write ]; then
            said=$(dd if=/dev/zero of="$1" bs=64k seek="$3" count="$4" oflag=direct status=none 2>&1)
        else
            said=$(dd if="$1" of=/dev/null bs=64k skip="$3" count="$4" iflag=direct status=none 2>&1)
        fi
        [ -z "$said" ] && echo ok || echo "${said##*: }"
    }
    for dev in "$zns" "$nullb"; do blkzone finish -o $zs -c 1 "$dev"; done
    # A write off the write pointer, a write to a full zone, and a read that crosses from zone 1 into zone 2.
    for case in "off-wp write 1 1" "full-zone write 2048 1" "read-across-zones read 2047 2"; do
        set -- $case
        ours=$(refused "$zns" "$2" "$3" "$4")
        kernels=$(refused "$nullb" "$2" "$3" "$4")
        [ "$ours" = "$kernels" ] && pass "null_blk-$1 (both: $ours)" || fail "null_blk-$1" "zonelab: $ours, null_blk: $kernels"
    done
    # Past the open limit: 15 zones opened explicitly; the 15th is refused by both.
    for dev in "$zns" "$nullb"; do
        blkzone reset "$dev"
        opened=0
        for zone in $(seq 0 14); do
            blkzone open -o $((zone * $zs)) -c 1 "$dev" 2> /dev/null && opened=$((opened + 1))
        done
        echo "$opened" >> "$work/opened"
    done
    [ "$(sort -u "$work/opened")" = 14 ] && pass null_blk-open-limit \
        || fail null_blk-open-limit "zones opened: $(tr '\n' ' ' < "$work/opened")"
else
    fail null_blk "no configfs for null_blk"
fi

stop

# 9. A fault injected into the live device through the image's control socket reaches the kernel (zone 40 goes
# offline: the zone report says so and a read of it fails), injecting it again brings the zone back, and a
# server given trace= writes the kernel's requests with the device's commands at stop.
spec="$img,trace=$work/ublk-trace.json" serve || { fail setup "the traced server did not serve"; exit 1; }
dd if="$zns" of=/dev/null bs=64k count=16 iflag=direct status=none
zone40() { blkzone report -o $((40 * zs)) -c 1 "$zns" | grep -o 'zcond: *[0-9]*' | tr -d ' '; }
"$zonelab" inject "$img" --zone 40 --state offline > "$work/inject" 2>&1 && offline=$(zone40) \
    && ! dd if="$zns" of=/dev/null bs=4k skip=$((40 * zs / 8)) count=1 iflag=direct status=none 2> /dev/null \
    && "$zonelab" inject "$img" --zone 40 --state offline >> "$work/inject" 2>&1 && [ "$offline $(zone40)" = "zcond:15 zcond:1" ] \
    && pass inject-while-served || fail inject-while-served "$(cat "$work/inject") zone 40: ${offline:-?} then $(zone40)"
stop
spec=
grep -q "ublkb[0-9]* requests" "$work/ublk-trace.json" 2> /dev/null && python3 -m json.tool "$work/ublk-trace.json" > /dev/null \
    && pass trace || fail trace "no requests track in $work/ublk-trace.json: $(tail -2 "$log")"

# 10. fio's own zoned block device suite, as fio ships it, on a device of its own (guest/fio-zbd.sh): every case
# that the suite's own checks do not skip passes, but test 54, which fio 3.33 itself aborts on
# (zbd_replay_write_order's assertion, on null_blk alike): it may fail only that way.
if [ -n "$fio_src" ]; then
    bash "$(dirname "$0")/fio-zbd.sh" "$bin" "$work" "$fio_src" > "$work/fio-zbd" 2>&1
    summary="$(grep -E "tests (passed|skipped|failed)" "$work/fio-zbd" | tr -s ' \n' ' ')"
    failed_cases=$(sed -n 's/^Running test \([0-9]*\) \.\.\. FAIL.*/\1/p' "$work/fio-zbd" | tr '\n' ' ')
    if grep -q "tests passed" "$work/fio-zbd" && { [ -z "$failed_cases" ] || { [ "$failed_cases" = "54 " ] \
        && grep -q "zbd_replay_write_order: Assertion" "$work/fio/t/zbd/test-zbd-support.log.54"; }; }; then
        pass "fio-zbd-suite ($summary${failed_cases:+; fio 3.33 itself aborts on 54})"
    else
        fail fio-zbd-suite "${summary:-did not finish}: failed ${failed_cases:-none}"
    fi
else
    fail fio-zbd-suite "no fio source given"
fi
echo "CASES DONE" | tee -a "$work/cases"
