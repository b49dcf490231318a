#!/usr/bin/env bash
# fs_vs_ext4.sh — issue 37's figures: Penstock's file system against the local file system, each
# pair with the same harness (src/fs/fs_bench.cc) in the same run.
#
#   FUSE:   `penstock mount` of an fs container  vs  a bindfs passthrough of a local directory
#           (the same FUSE cost on both sides), fs_bench posix on each mount
#   native: fs_bench native (penstock/fs.h)       vs  fs_bench posix on the local directory
# The local directory is on the disk that holds the targets' files. Per side and thread count
# (1 and 8 threads; files in one shared directory, and in one directory per thread): create,
# stat, readdir, unlink of FILES empty files; create, read, unlink of FILES 4 KiB files; then a
# sequential write and read of one SEQ_MIB MiB file in 1 MiB calls (1 thread). No side fsyncs:
# Penstock's writes are durable when they return, the local file system's are not, which
# flatters the local side on every write-bound row.
# The last line (FUSE over passthrough, 8 threads, shared directory; seq* at 1 thread):
#   fs/ext4 create=R stat=R readdir=R unlink=R read4k=R seqwrite=R seqread=R
# Raw JSON of every run goes to $OUT (default bench/results/fs_vs_ext4-<date>.json).
#
# Usage: bench/fs_vs_ext4.sh            (FILES=5000 SEQ_MIB=1024: a few minutes)
# Env: FILES, SEQ_MIB, THREADS ("1 8"), CAPACITY (4G a target), BENCH_DIR (/var/tmp), UCX_TLS (tcp),
# BUILD (build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PENSTOCK=$BUILD/src/cli/penstock
FSB=$BUILD/src/fs/fs_bench
FILES=${FILES:-5000}
SEQ_MIB=${SEQ_MIB:-1024}
THREADS=${THREADS:-1 8}
CAPACITY=${CAPACITY:-4G}
export UCX_TLS=${UCX_TLS:-tcp}
fail() { echo "fs_vs_ext4.sh: $*" >&2; exit 1; }
say() { echo "fs_vs_ext4.sh: $*" >&2; }
[[ -x $PENSTOCK && -x $FSB ]] || fail "build first: ninja -C $BUILD penstock fs_bench"
[[ -e /dev/fuse ]] || fail "/dev/fuse is missing: FUSE is unavailable here"
command -v bindfs >/dev/null || fail "bindfs is not installed (scripts/bootstrap.sh installs it)"
[[ $FILES =~ ^[1-9][0-9]*$ ]] || fail "FILES must be a positive integer, not '$FILES'"
OUT=${OUT:-bench/results/fs_vs_ext4-$(date +%Y%m%d-%H%M%S).json}
mkdir -p "$(dirname "$OUT")"
dir=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}" penstock-fsb.XXXXXX)
cleanup() {
  for m in "$dir/mnt-ps" "$dir/mnt-bind"; do
    if mountpoint -q "$m" 2>/dev/null; then fusermount3 -u "$m" 2>/dev/null || umount -l "$m" || true; fi
  done
  "$PENSTOCK" down --data-dir "$dir/cluster" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

say "a fresh cluster of 3 targets (--capacity $CAPACITY) in $dir/cluster"
up=$("$PENSTOCK" up --targets 3 --data-dir "$dir/cluster" --base-port 0 --capacity "$CAPACITY" --log-level warn --json 2>&1) ||
  fail "penstock up failed: $up"
mgmt=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])["mgmt"])' "$up")
/usr/bin/python3 bench/compare_report.py wait-zeroing "$mgmt" "$PENSTOCK"
mkdir -p "$dir/ext4" "$dir/mnt-ps" "$dir/mnt-bind"
: > "$OUT"

row() {  # side threads layout size fs_bench-arguments...: appends one JSON line
  local side=$1 threads=$2 layout=$3 size=$4 j
  shift 4
  j=$("$FSB" "$@" --threads "$threads" --layout "$layout" --size "$size" --files "$FILES" \
        --phases "$([[ $size == 0 ]] && echo create,stat,readdir,unlink || echo create,read,unlink)") ||
    fail "fs_bench $* ($side) failed: $j"
  echo "{\"side\": \"$side\", \"data\": $j}" >> "$OUT"
  say "$side threads=$threads $layout size=$size: $j"
}

n=0
for threads in $THREADS; do
  for layout in shared private; do
    for size in 0 4096; do
      n=$((n + 1))
      c="fsb$n"
      "$PENSTOCK" container create "$c" --type fs --redundancy none --mgmt "$mgmt" >/dev/null || fail "container create $c --type fs failed"
      "$PENSTOCK" mount "$c" "$dir/mnt-ps" --mgmt "$mgmt" >/dev/null || fail "penstock mount $c failed"
      rm -rf "${dir:?}/ext4/"* && bindfs "$dir/ext4" "$dir/mnt-bind"
      row fuse "$threads" "$layout" "$size" posix "$dir/mnt-ps"
      row passthrough "$threads" "$layout" "$size" posix "$dir/mnt-bind"
      fusermount3 -u "$dir/mnt-bind" && fusermount3 -u "$dir/mnt-ps"
      rm -rf "${dir:?}/ext4/"*
      "$PENSTOCK" container create "${c}n" --type fs --redundancy none --mgmt "$mgmt" >/dev/null
      row native "$threads" "$layout" "$size" native "$mgmt" "${c}n"
      row ext4 "$threads" "$layout" "$size" posix "$dir/ext4"
    done
  done
done
# Sequential, one thread: a fresh container and mount.
"$PENSTOCK" container create fsseq --type fs --redundancy none --mgmt "$mgmt" >/dev/null
"$PENSTOCK" mount fsseq "$dir/mnt-ps" --mgmt "$mgmt" >/dev/null
rm -rf "${dir:?}/ext4/"* && bindfs "$dir/ext4" "$dir/mnt-bind"
for side in fuse passthrough native ext4; do
  case $side in
    fuse) args=(posix "$dir/mnt-ps") ;;
    passthrough) args=(posix "$dir/mnt-bind") ;;
    native) "$PENSTOCK" container create fsseqn --type fs --redundancy none --mgmt "$mgmt" >/dev/null
            args=(native "$mgmt" fsseqn) ;;
    ext4) args=(posix "$dir/ext4") ;;
  esac
  j=$("$FSB" "${args[@]}" --phases seq --seq-mib "$SEQ_MIB") || fail "fs_bench seq ($side) failed: $j"
  echo "{\"side\": \"$side\", \"data\": $j}" >> "$OUT"
  say "$side seq: $j"
done
/usr/bin/python3 bench/fs_vs_ext4_report.py "$OUT"
