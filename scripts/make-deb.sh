#!/usr/bin/env bash
# Makes the Debian package of a CMake build of hvd: libhvd and libhvd_nn
# (shared and static), their headers and pkg-config files, hvdrun,
# hvd-bench, hvd-train-fashion-mnist, hvd-report, and the hvd Python
# package (hvd.torch) for Debian's python3, all under /usr.  Offline: the
# build's own install step, dpkg-shlibdeps for the dependencies, dpkg-deb.
#
# Usage: scripts/make-deb.sh BUILD_DIR [OUT_DIR]    (make deb does this)
# Prints the path of the .deb it wrote (OUT_DIR, default .).
set -euo pipefail
build=$(cd "${1:?usage: scripts/make-deb.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=$(cd "${2:-.}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)

# The Python package goes where Debian's python3 looks: /usr/lib/python3/dist-packages.
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
if [ "$libdir" != lib ]; then
  echo "make-deb: $build installs libraries into '$libdir', not 'lib': configure it with" \
       "-DCMAKE_INSTALL_LIBDIR=lib (make deb does)" >&2
  exit 1
fi
if grep -q '^HVD_SANITIZE:[A-Z]*=.\+' "$build/CMakeCache.txt"; then
  echo "make-deb: $build is built with sanitizers: package a release build" >&2
  exit 1
fi
version=$(sed -n 's/^project(hvd VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)
work=$(mktemp -d "${TMPDIR:-/tmp}/hvd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/debian/hvd # the layout dpkg-shlibdeps expects

cmake --install "$build" --prefix "$root/usr" >/dev/null
find "$root" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$root/DEBIAN"
# Our libraries are ours: dpkg-shlibdeps must not look for another package.
printf 'libhvd 0 hvd (>= %s)\nlibhvd_nn 0 hvd (>= %s)\n' "$version" "$version" >"$root/DEBIAN/shlibs"
printf 'Source: hvd\n\nPackage: hvd\nArchitecture: any\n' >"$work/debian/control"
mapfile -t elves < <(find "$root/usr" -type f \( -path '*/bin/*' -o -name '*.so*' \))
depends=$(cd "$work" && dpkg-shlibdeps -O -xhvd -l"$root/usr/lib" "${elves[@]}" 2>/dev/null |
          sed -n 's/^shlibs:Depends=//p')
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
# hvd._C is on CPython's limited API as of 3.9 (_C.abi3.so): any python3 from 3.9.
python=python3
if [ -n "$(find "$root" -name '_C.abi3.so' | head -1)" ]; then
  python="python3 (>= 3.9)"
fi

cat >"$root/DEBIAN/control" <<CONTROL
Package: hvd
Version: $version
Architecture: $arch
Maintainer: hvd developers <hvd@localhost>
Installed-Size: $size
Depends: $depends
Recommends: $python, python3-torch, python3-numpy, gnuplot-nox
Suggests: openssh-client
Section: libs
Priority: optional
Description: distributed data-parallel training in C, Horovod's job
 libhvd (include/hvd.h): allreduce, broadcast, allgather, alltoall and
 reducescatter across processes and hosts, with Horovod's engine (named
 tensors, negotiation, fusion, timeline); libhvd_nn, a small training
 toolkit; hvdrun, the launcher (horovodrun's flags); hvd-bench;
 hvd-train-fashion-mnist; hvd-report, which says from a job's timelines
 why it does not scale; and the hvd.torch Python package (horovod.torch's
 API) for Debian's python3 and PyTorch.
CONTROL
# Shared libraries in /usr/lib: the dynamic linker's cache follows them.
echo "activate-noawait ldconfig" >"$root/DEBIAN/triggers"
# Running python3 as root leaves bytecode in the package's directories:
# take it away with the package, so that removing it leaves nothing.
cat >"$root/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
find /usr/lib/python3/dist-packages/hvd -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null || true
PRERM
chmod 0755 "$root/DEBIAN/prerm"
(cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum >DEBIAN/md5sums)

deb=$out/hvd_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
