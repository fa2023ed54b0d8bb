#!/bin/sh
# install-deps.sh: Debian 12 packages kvx needs to build and to run its tests
# (unit tier and the Soft-RoCE VM tier). Idempotent: apt runs only when a
# package is missing. Run as root.
set -eu

# build
PKGS="gcc make cmake pkg-config clang-format"
# the fuzz build (make fuzz, and make test's short fuzz runs): clang, libFuzzer and the
# sanitizer runtimes (libclang-rt-14-dev), llvm-symbolizer for readable stacks (llvm)
PKGS="$PKGS clang libclang-rt-14-dev llvm"
# libraries and verbs userland (rxe provider, ibv_devinfo, perftest)
PKGS="$PKGS libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils perftest
 liburcu-dev libhwloc-dev libcmocka-dev libinih-dev libssl-dev libjson-c-dev"
# membership through etcd ([membership] etcd): the VM test runs Debian's etcd
PKGS="$PKGS etcd-server"
# installing and packaging (make package, tests/install/): CPack's DEB generator runs
# dpkg-shlibdeps (dpkg-dev) and file; systemd-analyze (systemd) checks the unit
PKGS="$PKGS dpkg-dev file systemd"
# the test VM (scripts/kvx-vm): qemu, the guest kernel and its modules, the
# initramfs tools, and the tools the guest runs from the shared host root
PKGS="$PKGS qemu-system-x86 linux-image-amd64 busybox-static cpio kmod iproute2 xz-utils zstd"
# gdb: the guest's backtraces of a test that hangs (kvx-vm); procps: its ps and pkill
PKGS="$PKGS gdb procps"
# the VM test of the metrics endpoint parses its text with Prometheus' own Python parser
PKGS="$PKGS python3-prometheus-client"
# the Python package kvx (python/): its C extension builds against Debian's python3 (3.11); its
# tests run under pytest (numpy is optional for the package, its tests use it where present)
PKGS="$PKGS python3-dev python3-pytest python3-numpy"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done

if [ -n "$missing" ]; then
	[ "$(id -u)" -eq 0 ] || { echo "install-deps: need root to install:$missing" >&2; exit 1; }
	# INITRD=No: linux-image-amd64 would otherwise run update-initramfs (~16 s
	# each time) for an initrd we never boot; kvx-vm builds its own.
	export DEBIAN_FRONTEND=noninteractive INITRD=No
	# Refresh the lists only when they are missing or older than a day.
	if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
		apt-get update -q
	fi
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $missing
	echo "install-deps: installed$missing"
else
	echo "install-deps: all $(echo $PKGS | wc -w) packages present"
fi
