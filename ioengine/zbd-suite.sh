#!/usr/bin/env bash
# Runs fio's own zoned-block-device test suite, t/zbd/test-zbd-support from fio's source, against a zonelab image
# through the installed fio and zonelab's external engine (libzonelab_fio.so).
#
#   ioengine/zbd-suite.sh [-e ENGINE] [-s FIO_SOURCE_DIR] IMAGE [test-zbd-support options, e.g. -t 4 -q]
#
# ENGINE defaults to target/release/libzonelab_fio.so, FIO_SOURCE_DIR to ioengine/build.sh's. The suite's script
# is copied into a scratch directory with three substitutions, and fio's files are left as they are:
#   1. fio. The script runs ../../fio relative to itself; there the harness puts a wrapper that runs the installed
#      fio with zonelab's engine for every job (each --ioengine= the script passes, psync, libaio or io_uring,
#      becomes the external engine, and so does the default) and --thread, which the engine needs.
#   2. blkzone. The script reports and resets zones with util-linux blkzone on a block device; a blkzone on the
#      PATH answers `report` with `zonelab report --format blkzone` and `reset` with `zonelab reset`.
#   3. The device probe. The script reads the geometry (size, logical block size, zoned model) from sysfs and sets
#      the block device's I/O scheduler; the harness replaces that block with the same variables taken from
#      `zonelab info --json`. The zoned model is host-managed; the first sequential zone is found by the script's
#      own blkzone parsing; max_open_zones is the image's open limit.
# Prints the script's output and exits with its status; the per-case logs stay in the scratch directory, whose
# path is printed first.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
engine="$root/target/release/libzonelab_fio.so"
src="${ZONELAB_FIO_SRC:-$root/target/fio-src/fio-$(fio --version | sed 's/^fio-//')}"
while getopts "e:s:" opt; do
    case "$opt" in
        e) engine="$(realpath "$OPTARG")" ;;
        s) src="$OPTARG" ;;
        *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -lt 1 ]; then
    echo "usage: $0 [-e ENGINE] [-s FIO_SOURCE_DIR] IMAGE [test-zbd-support options]" >&2
    exit 2
fi
image="$(realpath "$1")"
shift
zonelab="${ZONELAB:-$(command -v zonelab || echo "$root/target/release/zonelab")}"
for need in "$src/t/zbd/test-zbd-support" "$src/t/zbd/functions" "$engine" "$zonelab"; do
    if [ ! -e "$need" ]; then
        echo "error: $need does not exist (fio's source: ioengine/build.sh fetches it; the engine: ioengine/build.sh)" >&2
        exit 2
    fi
done

scratch="$(mktemp -d "${TMPDIR:-/tmp}/zonelab-zbd-suite.XXXXXX")"
echo "zbd suite scratch directory: $scratch"
mkdir -p "$scratch/t/zbd" "$scratch/bin"
cp "$src/t/zbd/functions" "$scratch/t/zbd/functions"

# 1. fio with zonelab's engine for every job.
cat > "$scratch/fio" <<EOF
#!/usr/bin/env bash
args=(--ioengine=external:$engine --thread)
for arg in "\$@"; do
    case "\$arg" in
        --ioengine=*) args+=(--ioengine=external:$engine) ;;
        *) args+=("\$arg") ;;
    esac
done
exec fio "\${args[@]}"
EOF

# 2. blkzone over zonelab report and reset (offsets and counts in 512-byte sectors and zones, as blkzone's).
info="$("$zonelab" info "$image" --json)"
lba_size="$(sed -n 's/.*"lba_size":\([0-9]*\).*/\1/p' <<<"$info")"
zone_lba="$(sed -n 's/.*"zone_size_lba":\([0-9]*\).*/\1/p' <<<"$info")"
cat > "$scratch/bin/blkzone" <<EOF
#!/usr/bin/env bash
set -euo pipefail
command="\$1"; shift
offset=0; count=""
while [ \$# -gt 1 ]; do
    case "\$1" in
        -o) offset="\$2"; shift 2 ;;
        -c) count="\$2"; shift 2 ;;
        *) echo "blkzone (zonelab's harness): unknown option \$1" >&2; exit 2 ;;
    esac
done
device="\$1"
start_lba=\$(( offset * 512 / $lba_size ))
case "\$command" in
    report)
        exec "$zonelab" report "\$device" --format blkzone --start-lba "\$start_lba" \${count:+--count "\$count"} ;;
    reset)
        if [ -z "\$count" ] && [ "\$offset" = 0 ]; then
            exec "$zonelab" reset --all "\$device" >/dev/null
        fi
        for ((i = 0; i < \${count:-1}; i++)); do
            "$zonelab" reset --start-lba \$(( start_lba + i * $zone_lba )) "\$device" >/dev/null
        done ;;
    *) echo "blkzone (zonelab's harness): unknown command \$command" >&2; exit 2 ;;
esac
EOF
chmod +x "$scratch/fio" "$scratch/bin/blkzone"

# 3. The device probe from zonelab info instead of sysfs.
probe="$scratch/probe"
cat > "$probe" <<'EOF'
info=$("$ZONELAB" info "$dev" --json)
field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$info"; }
is_zbd=true
logical_block_size=$(field lba_size)
disk_size=$(($(field nsze_lba) * logical_block_size))
if ! result=($(first_sequential_zone "$dev")); then
	echo "Failed to determine first sequential zone"
	exit 1
fi
first_sequential_zone_sector=${result[0]}
sectors_per_zone=${result[1]}
zone_size=$((sectors_per_zone * 512))
max_open_zones=$(field max_open)
if [ -n "$reset_all_zones" ]; then
	reset_zone "$dev" -1
fi
EOF
awk -v probe="$probe" '
    /^if \[\[ -b "\$realdev" \]\]; then$/ { skipping = 1; while ((getline line < probe) > 0) print line; next }
    skipping && /^if \[\[ -n \$\{max_open_zones_opt\} \]\]; then$/ { skipping = 0 }
    !skipping { print }
' "$src/t/zbd/test-zbd-support" > "$scratch/t/zbd/test-zbd-support"
if ! grep -q '"$ZONELAB" info' "$scratch/t/zbd/test-zbd-support"; then
    echo "error: this fio's test-zbd-support has no device probe where the harness expects it" >&2
    exit 2
fi
chmod +x "$scratch/t/zbd/test-zbd-support"

cd "$scratch/t/zbd"
PATH="$scratch/bin:$PATH" ZONELAB="$zonelab" exec ./test-zbd-support "$@" "$image"
