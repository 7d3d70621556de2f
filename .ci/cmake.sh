#!/usr/bin/env bash
# The CMake package against the Meson install the README's set-up command
# made (meson install -C build, prefix /usr/local): test/cmake, a CMake
# project using find_package(attn CONFIG), is configured, built and run with
# attn::attn (shared) and attn::attn_static, then again against a copy of
# the install staged under another prefix (meson install --destdir), which
# checks that the package derives every path from its own location.
# Run from the repository root, as root, after the README's command and
# before .ci/packages.sh.  Exit code 0 only if every check passes.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export DEBIAN_FRONTEND=noninteractive
fail=0
check() {
    local what=$1; shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=$((fail + 1)); fi
}

command -v cmake >/dev/null || apt-get install -y -qq cmake >/dev/null || { echo "cannot install cmake"; exit 1; }
multiarch=$(gcc -print-multiarch)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# consumer <build dir> <prefix> <expected libattn.so.1 directory>
consumer() {
    local b=$1 prefix=$2 libdir=$3
    cmake -S "$root/test/cmake" -B "$b" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF >"$b.log" 2>&1 &&
        cmake --build "$b" >>"$b.log" 2>&1 || { cat "$b.log"; return 1; }
    # find_package must have found the package under this prefix ...
    local dir
    dir=$(sed -n 's/^attn_DIR:PATH=//p' "$b/CMakeCache.txt")
    [ "$dir" = "$prefix/lib/$multiarch/cmake/attn" ] || { echo "attn_DIR is $dir"; return 1; }
    # ... the shared program must load this prefix's library, the static
    # one none, and both must pass their float64 check.
    ldd "$b/consumer" | grep "libattn.so.1 => $libdir/libattn.so.1" ||
        { ldd "$b/consumer"; return 1; }
    ! ldd "$b/consumer-static" | grep libattn || { ldd "$b/consumer-static"; return 1; }
    "$b/consumer" && "$b/consumer-static"
}

check "CMake consumer against /usr/local (attn::attn, attn::attn_static)" \
    consumer "$tmp/local" /usr/local "/usr/local/lib/$multiarch"

# The same install under another prefix: files only, no ldconfig; the
# shared program finds the staged library through CMake's build RPATH.
# meson install rewrites build/meson-logs/install-log.txt, the list that
# `ninja -C build uninstall` (.ci/packages.sh) removes: keep the real one.
log=build/meson-logs/install-log.txt
cp "$log" "$tmp/install-log.txt" || { echo "no $log: run the README's set-up command first"; exit 1; }
check "meson install --destdir (a relocated copy)" \
    bash -c "meson install -C build --no-rebuild --destdir '$tmp/stage' >'$tmp/stage.log' 2>&1 || { cat '$tmp/stage.log'; exit 1; }"
cp "$tmp/install-log.txt" "$log"
check "CMake consumer against the relocated copy" \
    consumer "$tmp/reloc" "$tmp/stage/usr/local" "$tmp/stage/usr/local/lib/$multiarch"

# A version the package does not satisfy must be refused.
mkdir -p "$tmp/v1"
cat > "$tmp/v1/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.13)
project(v LANGUAGES C)
find_package(attn 2.0 CONFIG REQUIRED)
CMAKE
check "find_package(attn 2.0) refused" \
    bash -c "! cmake -S '$tmp/v1' -B '$tmp/v1/b' -DCMAKE_PREFIX_PATH=/usr/local >'$tmp/v1.log' 2>&1"

echo "cmake checks: $fail failed"
[ "$fail" -eq 0 ]
