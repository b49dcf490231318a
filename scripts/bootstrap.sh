#!/usr/bin/env bash
# Installs every Debian package Penstock needs to build, test and benchmark. Idempotent: when
# everything is present it only checks (well under a second) and installs nothing.
set -euo pipefail

PACKAGES=(
  # toolchain
  cmake ninja-build ccache g++ make pkg-config
  # libraries
  libucx-dev ucx-utils libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  librocksdb-dev liburing-dev libisal-dev libssl-dev libcli11-dev libspdlog-dev libfmt-dev
  nlohmann-json3-dev libcpp-httplib-dev libgtest-dev libgmock-dev libfuse3-dev fuse3
  # tests and benchmarks (clang-14 + its runtime: libFuzzer and sanitizers for fuzz/)
  python3 python3-pytest fio procps iproute2 clang-14 libclang-rt-14-dev etcd-server etcd-client
  # the Python package (src/python, python/penstock) and its torch integration
  pybind11-dev python3-dev python3-numpy python3-torch
  # benchmark charts and profiles
  python3-matplotlib linux-perf bindfs rsync
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "bootstrap: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
