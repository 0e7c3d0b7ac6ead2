#!/usr/bin/env bash
# Builds libzonelab_fio.so, fio's external I/O engine for zonelab, against the headers of the fio that will load
# it. fio publishes no headers for external engines, so they come from fio's own source: Debian's source package
# of the installed fio (`apt-get source fio`, which needs a deb-src entry; .ci/run adds one), configured here so
# that its config-host.h matches this machine.
#
#   ioengine/build.sh [FIO_SOURCE_DIR] [OUT_DIR] [PROFILE]
#
# FIO_SOURCE_DIR (empty: the default) defaults to $ZONELAB_FIO_SRC, else target/fio-src/fio-<version of the
# installed fio>, fetched there if missing; OUT_DIR to target/<PROFILE>; PROFILE (the cargo profile
# libzonelab.so is built with) to release. Prints the path of the engine it built.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
profile="${3:-release}"
out="${2:-$root/target/$profile}"

version="$(fio --version | sed 's/^fio-//')"
default_src="$root/target/fio-src/fio-$version"
src="${1:-${ZONELAB_FIO_SRC:-$default_src}}"
# Only the default place is filled by fetching; a source tree named by the caller must be one.
if [ "$src" = "$default_src" ] && [ ! -f "$src/fio.h" ]; then
    mkdir -p "$root/target/fio-src"
    echo "fetching fio $version's source into target/fio-src (apt-get source fio)" >&2
    (cd "$root/target/fio-src" && apt-get source "fio=$(dpkg-query -W -f='${Version}' fio)" >&2)
fi
if [ ! -f "$src/fio.h" ]; then
    echo "error: no fio source at $src (apt-get source fio needs a deb-src entry and dpkg-dev)" >&2
    exit 1
fi
if [ ! -f "$src/config-host.h" ]; then
    (cd "$src" && ./configure >/dev/null)
fi

# The C library the engine calls, built with the same profile as the caller's zonelab.
if [ "$profile" = "release" ]; then
    cargo build --release --lib -p zonelab-capi --manifest-path "$root/Cargo.toml" >&2
else
    cargo build --profile "$profile" --lib -p zonelab-capi --manifest-path "$root/Cargo.toml" >&2
fi
libdir="$root/target/$profile"
[ "$profile" = "dev" ] && libdir="$root/target/debug"
[ "$profile" = "test" ] && libdir="$root/target/debug"

mkdir -p "$out"
"${CC:-cc}" -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers \
    -D_GNU_SOURCE -include "$src/config-host.h" -I"$src" -I"$root/include" \
    -shared -fPIC -o "$out/libzonelab_fio.so" "$root/ioengine/zonelab_fio.c" \
    -L"$libdir" -Wl,-rpath,"$libdir" -lzonelab -lpthread
echo "$out/libzonelab_fio.so"
