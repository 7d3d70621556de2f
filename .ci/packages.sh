#!/usr/bin/env bash
# The Debian packages, built and then tested as installed packages.  Run
# from the repository root, as root, on a Debian 12 machine where the
# README's set-up command did `meson install -C build` to /usr/local (and
# after .ci/cmake.sh, which tests the CMake package of that install):
#
#  1. installs the Build-Depends (apt-get build-dep on debian/control),
#     lintian and cmake;
#  2. dpkg-buildpackage -us -uc -b, with DEB_BUILD_OPTIONS=nocheck unless
#     the caller sets DEB_BUILD_OPTIONS (the test suite runs in .ci/run;
#     `DEB_BUILD_OPTIONS=parallel=1 bash .ci/packages.sh` runs the package's
#     own quick test step too); python3-attn only when python/meson.build
#     exists, otherwise the nopython build profile;
#  3. moves what dpkg-buildpackage wrote to the parent directory into
#     .ci-logs/debs and cleans the tree (debian/rules clean);
#     no compiler or debhelper warning may appear in its log;
#  4. lintian on the .changes: any error (E:) fails;
#  5. removes the /usr/local install (ninja -C build uninstall, ldconfig),
#     so that what follows tests the packages alone, and installs the .debs;
#  6. the README's C example via pkg-config, the CMake consumer test/cmake
#     via find_package (attn::attn and attn::attn_static), the ring example
#     via pkg-config attn-mpi under mpirun (libattn.so.1 must not link
#     MPI), attn-demo
#     --no-bench, attn-bench --help and a bad case, the man pages;
#  7. attn-doc: every docs/*.md (uncompressed), figure and example in
#     /usr/share/doc/attn-doc/, the VIEW.md path attn-demo --help names
#     exists, and the examples build from there as their README says;
#  8. `import attn` with one call (if python3-attn was built).
# Exit code 0 only if every step passes.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export DEBIAN_FRONTEND=noninteractive
fail=0
step() { printf '\n=== %s\n' "$*"; }
check() {
    local what=$1; shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=$((fail + 1)); fi
}
die() { echo "FAILED: $*"; exit 1; }

multiarch=$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH)
out=.ci-logs/debs
profile=()       # dpkg-buildpackage's form
apt_profile=()   # apt-get's
with_python=1
if [ ! -f python/meson.build ]; then
    profile=(-Pnopython)
    apt_profile=(-P nopython)
    with_python=0
fi

step "build dependencies"
apt-get install -y -qq dpkg-dev debhelper lintian cmake gcc pkg-config >/dev/null ||
    die "apt-get install dpkg-dev debhelper lintian cmake"
apt-get build-dep -y -qq "${apt_profile[@]}" "$root" >/dev/null || die "apt-get build-dep"

step "dpkg-buildpackage -us -uc -b ${profile[*]}"
version=$(dpkg-parsechangelog -SVersion)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
changes=attn_${version}_${arch}.changes
rm -rf "$out" && mkdir -p "$out"
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS-nocheck parallel=1}
echo "DEB_BUILD_OPTIONS=$DEB_BUILD_OPTIONS"
dpkg-buildpackage -us -uc -b "${profile[@]}" >"$out/build.log" 2>&1
rc=$?
# Everything the build put next to the repository, listed in the .changes
# (the .debs, -dbgsym .debs, .buildinfo), and the .changes itself.
if [ -f "../$changes" ]; then
    for f in $(awk '/^Files:/ { on = 1; next } /^[^ ]/ { on = 0 } on { print $5 }' "../$changes"); do
        mv "../$f" "$out/"
    done
    mv "../$changes" "$out/"
fi
debian/rules clean >>"$out/build.log" 2>&1 || true
[ "$rc" -eq 0 ] || { tail -n 60 "$out/build.log"; die "dpkg-buildpackage (log: $out/build.log)"; }
ls -l "$out"
# the compiler under dpkg-buildflags' CFLAGS (-g -O2 -fstack-protector-strong
# ..., the hardening flags of debian/rules) and meson's -Wall -Wextra; and
# debhelper's own warnings
check "no compiler or debhelper warning in the package build ($out/build.log)" bash -c "
    if grep -E 'warning: ' $out/build.log | grep -v '^dpkg-' | sort | uniq | grep .; then exit 1; fi"

step "lintian"
lintian --fail-on error "$out/$changes" 2>&1 | tee "$out/lintian.log"
check "lintian: no errors" test "${PIPESTATUS[0]}" -eq 0

step "remove the /usr/local install, install the packages"
if [ -d build ]; then
    ninja -C build uninstall >"$out/uninstall.log" 2>&1 || { cat "$out/uninstall.log"; die "ninja -C build uninstall"; }
fi
ldconfig
if ls /usr/local/lib/"$multiarch"/libattn* /usr/local/include/attn.h >/dev/null 2>&1; then
    die "attn is still installed under /usr/local"
fi
debs=()
for p in libattn1 libattn-dev libattn-mpi1 libattn-mpi-dev attn-tools attn-doc python3-attn; do
    f=$out/${p}_${version}_${arch}.deb
    [ -f "$f" ] || f=$out/${p}_${version}_all.deb
    if [ -f "$f" ]; then debs+=("./$f"); elif [ "$p" != python3-attn ] || [ "$with_python" = 1 ]; then
        die "no package $p"
    fi
done
apt-get install -y -qq "${debs[@]}" >/dev/null || die "apt-get install ${debs[*]}"
dpkg -l libattn1 libattn-dev libattn-mpi1 libattn-mpi-dev attn-tools attn-doc | grep '^ii'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
syslib=/usr/lib/$multiarch
# Only the packages' files: pkg-config and CMake look in /usr alone.
export PKG_CONFIG_LIBDIR=$syslib/pkgconfig:/usr/share/pkgconfig

step "the README's C example via pkg-config"
python3 .ci/readme-block.py example >"$tmp/example.c" || die "README example"
check "README example, pkg-config --cflags --libs attn" bash -ec "
    [ \"\$(pkg-config --variable=libdir attn)\" = $syslib ]
    cc -std=c11 -Wall -Werror $tmp/example.c \$(pkg-config --cflags --libs attn) -o $tmp/example
    ldd $tmp/example | grep -E 'libattn.so.1 => (/usr)?/lib/$multiarch/libattn.so.1'
    $tmp/example"

step "the CMake consumer via find_package(attn CONFIG)"
check "test/cmake: attn::attn and attn::attn_static" bash -ec "
    cmake -S test/cmake -B $tmp/cmake -DCMAKE_PREFIX_PATH=/usr -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF >$tmp/cmake.log 2>&1 || { cat $tmp/cmake.log; exit 1; }
    cmake --build $tmp/cmake >>$tmp/cmake.log 2>&1 || { cat $tmp/cmake.log; exit 1; }
    grep -qx 'attn_DIR:PATH=$syslib/cmake/attn' $tmp/cmake/CMakeCache.txt
    dpkg -S $syslib/cmake/attn/attnConfig.cmake | grep -q '^libattn-dev:'
    ldd $tmp/cmake/consumer | grep -E 'libattn.so.1 => (/usr)?/lib/$multiarch/libattn.so.1'
    if ldd $tmp/cmake/consumer-static | grep libattn; then exit 1; fi
    $tmp/cmake/consumer
    $tmp/cmake/consumer-static"

step "attn_mpi via pkg-config attn-mpi"
check "examples/ring-example.c against libattn-mpi-dev (pkg-config attn-mpi), on 2 ranks" bash -ec "
    [ \"\$(pkg-config --variable=libdir attn-mpi)\" = $syslib ]
    cc -std=c11 -Wall -Werror examples/ring-example.c \$(pkg-config --cflags --libs attn-mpi) -lm -o $tmp/ring
    ldd $tmp/ring | grep -E 'libattn_mpi.so.1 => (/usr)?/lib/$multiarch/libattn_mpi.so.1'
    if ldd $syslib/libattn.so.1 | grep libmpi; then exit 1; fi
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -n 2 --oversubscribe $tmp/ring 512"

step "attn-tools"
check "attn-demo --no-bench" bash -ec "/usr/bin/attn-demo --no-bench >$tmp/demo.log && tail -n 3 $tmp/demo.log"
check "attn-bench is installed and runs (usage)" bash -c "[ -x /usr/bin/attn-bench ] && /usr/bin/attn-bench --no-such-option 2>&1 | grep -q '^usage: attn-bench'"
check "attn-bench --help (exit 0, the cases) and a bad case (exit 2)" bash -ec "
    /usr/bin/attn-bench --help >$tmp/bench-help.txt
    grep -q '^S1 ' $tmp/bench-help.txt && grep -q '^DL-32k ' $tmp/bench-help.txt
    rc=0; /usr/bin/attn-bench --case s1 2>$tmp/bench-err.txt || rc=\$?
    [ \$rc -eq 2 ] && grep -q 'did you mean S1' $tmp/bench-err.txt"
check "man pages attn-demo(1), attn-bench(1)" bash -ec "
    [ -f /usr/share/man/man1/attn-demo.1.gz ] && [ -f /usr/share/man/man1/attn-bench.1.gz ]"

step "attn-doc"
doc=/usr/share/doc/attn-doc
# every guide, uncompressed (dh_compress -X.md), every figure, every example
check "attn-doc: docs/*.md, the figures and the examples in $doc" bash -ec "
    for f in docs/*.md docs/*.png docs/*.svg; do [ -f $doc/\${f#docs/} ] || { echo missing $doc/\${f#docs/}; exit 1; }; done
    for f in examples/README.md examples/*.c examples/*.h examples/view/view.html examples/view/embed.py; do
        [ -f $doc/\$f ] || { echo missing $doc/\$f; exit 1; }
    done
    if ls $doc/*.md.gz 2>/dev/null; then echo 'compressed guides'; exit 1; fi
    dpkg -L attn-doc | grep -qx $doc/VIEW.md"
# the path attn-demo --help gives for the view's guide exists
check "attn-demo --help names VIEW.md where attn-doc installed it" bash -ec "
    /usr/bin/attn-demo --help >$tmp/demo-help.txt
    p=\$(grep -o '/usr/share/doc/[^ ,)]*VIEW.md' $tmp/demo-help.txt)
    echo \"attn-demo --help: \$p\"
    [ -n \"\$p\" ] && [ -f \"\$p\" ]"
# the examples build from the installed copy as examples/README.md says
check "attn-doc examples: mha-example, decode-example and attn-demo built from $doc/examples and run" bash -ec "
    cp -r $doc/examples $tmp/examples && cd $tmp/examples
    cc -std=c11 -Wall -Werror mha-example.c \$(pkg-config --cflags --libs attn) -lm -o mha-example
    ./mha-example >/dev/null
    cc -std=c11 -Wall -Werror decode-example.c \$(pkg-config --cflags --libs attn) -lm -o decode-example
    ./decode-example f16 | tail -n 1
    python3 view/embed.py view/view.html demo_view.inc
    cc -std=c11 -Wall -Werror -I. attn-demo.c demo_model.c demo_html.c \$(pkg-config --cflags --libs attn) -lm -o attn-demo
    ./attn-demo --no-bench | tail -n 1"

if [ "$with_python" = 1 ]; then
    step "python3-attn"
    check "import attn (python3-attn) and one call" bash -ec "cd $tmp && /usr/bin/python3 -c '
import numpy as np, attn
assert attn.__file__.startswith(\"/usr/lib/python3/dist-packages/attn/\"), attn.__file__
assert attn.library_path.startswith(\"/usr/lib/\"), attn.library_path
q = np.linspace(-1, 1, 2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4)
v = np.arange(2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4)
o = attn.scaled_dot_product_attention(q, q, v, is_causal=True)
s = np.einsum(\"bhid,bhjd->bhij\", q.astype(np.float64), q.astype(np.float64)) / 2.0
s[..., np.triu_indices(3, 1)[0], np.triu_indices(3, 1)[1]] = -np.inf
p = np.exp(s - s.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
err = float(np.abs(p @ v - o).max())
print(attn.__file__, attn.library_path, \"largest difference from float64:\", err)
assert err < 1e-5'"
    if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        check "attn.torch (python3-attn with python3-torch): one backward" bash -ec "cd $tmp && /usr/bin/python3 -c '
import torch, attn.torch as at
assert at.__file__.startswith(\"/usr/lib/python3/dist-packages/attn/\"), at.__file__
q = torch.randn(1, 2, 5, 8, requires_grad=True)
at.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
assert q.grad is not None and bool(torch.isfinite(q.grad).all())
print(at.__file__, \"backward ok\")'"
    fi
fi

echo
echo "packages: $fail failed"
[ "$fail" -eq 0 ]
