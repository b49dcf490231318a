#!/usr/bin/env bash
# fuzz/run.sh [SECONDS=10] — builds the libFuzzer targets with clang (in build-fuzz/) and runs
# each for SECONDS, starting from the committed seeds in fuzz/corpus/<target>/ (read only; new
# inputs go to build-fuzz/corpus/<target>/). Exits non-zero on the first crash, leak or
# sanitizer report, leaving the reproducer (crash-*) in build-fuzz/.
# Needs clang-14 and libclang-rt-14-dev (libFuzzer + sanitizers).
set -euo pipefail
SECONDS_EACH=${1:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${FUZZ_BUILD:-$ROOT/build-fuzz}
CXX=${FUZZ_CXX:-$(command -v clang++-14 || command -v clang++)}
cmake -S "$ROOT/fuzz" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$CXX" >/dev/null
ninja -C "$BUILD" >/dev/null
cd "$BUILD"
for target in wire_decode batch_decode shard_header_decode list_entries_decode object_head_decode capability_verify; do
  mkdir -p "corpus/$target"
  echo "fuzz_$target: ${SECONDS_EACH}s"
  if ! "./fuzz_$target" -max_total_time="$SECONDS_EACH" -artifact_prefix="$BUILD/" \
      "corpus/$target" "$ROOT/fuzz/corpus/$target" >"$target.log" 2>&1; then
    tail -n 40 "$target.log"
    echo "fuzz_$target FAILED (log: $BUILD/$target.log; reproducer: $BUILD/crash-*)"
    exit 1
  fi
  tail -n 1 "$target.log"
done
echo "all fuzz targets ran ${SECONDS_EACH}s each without findings"
