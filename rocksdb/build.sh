#!/usr/bin/env bash
# Builds libzonelab_rocksdb.so, the RocksDB FileSystem plugin (zonelab_fs.cc), against the installed RocksDB
# (Debian's librocksdb-dev 7.8.3) and zonelab's C library. Load it into an unmodified RocksDB program with
# LD_PRELOAD and pass --fs_uri=zonelab://SPEC (docs/rocksdb.md). Also builds zonelab_ycsb (ycsb.cc), the YCSB
# driver, linked to the plugin so that zonelab:// is registered in it.
#
#   rocksdb/build.sh [OUT_DIR] [PROFILE]
#
# OUT_DIR defaults to target/<PROFILE>; PROFILE (the cargo profile libzonelab.so is built with) to release.
# Prints the path of the plugin it built (zonelab_ycsb is beside it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
profile="${2:-release}"
out="${1:-$root/target/$profile}"

if [ ! -f /usr/include/rocksdb/file_system.h ]; then
    echo "error: no RocksDB headers (apt-get install -y librocksdb-dev)" >&2
    exit 1
fi
if [ "$profile" = "release" ]; then
    cargo build --release --lib -p zonelab-capi --manifest-path "$root/Cargo.toml" >&2
else
    cargo build --profile "$profile" --lib -p zonelab-capi --manifest-path "$root/Cargo.toml" >&2
fi
libdir="$root/target/$profile"
[ "$profile" = "dev" ] && libdir="$root/target/debug"
[ "$profile" = "test" ] && libdir="$root/target/debug"

mkdir -p "$out"
"${CXX:-g++}" -std=c++17 -O2 -g -Wall -Wextra -Wno-unused-parameter -fPIC -shared \
    -I"$root/include" -o "$out/libzonelab_rocksdb.so" "$root/rocksdb/zonelab_fs.cc" \
    -L"$libdir" -Wl,-rpath,"$libdir" -lzonelab -lrocksdb -lpthread
# --no-as-needed: the driver calls nothing of the plugin's; loading it is what registers zonelab://.
"${CXX:-g++}" -std=c++17 -O2 -g -Wall -Wextra -o "$out/zonelab_ycsb" "$root/rocksdb/ycsb.cc" \
    -L"$out" -Wl,-rpath,"$out" -Wl,--no-as-needed -lzonelab_rocksdb -Wl,--as-needed -lrocksdb -lpthread
echo "$out/libzonelab_rocksdb.so"
