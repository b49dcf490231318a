#!/usr/bin/env bash
# `make demo`: a local cluster (mgmt + 3 targets on files in a temporary directory), a 256 MiB
# random file written and read back, verified byte for byte, throughput printed, cluster stopped.
set -euo pipefail
PENSTOCK=${PENSTOCK_BIN:-build/src/cli/penstock}
SIZE_MIB=${DEMO_SIZE_MIB:-256}
dir=$(mktemp -d -t penstock-demo.XXXXXX)
cleanup() {
  "$PENSTOCK" down --data-dir "$dir/cluster" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

echo "== starting a local cluster (3 targets) in $dir/cluster"
mgmt=$("$PENSTOCK" up --targets 3 --data-dir "$dir/cluster" --base-port 0 --capacity 2G)
echo "   mgmt at $mgmt"
"$PENSTOCK" status --mgmt "$mgmt"

echo "== creating container 'demo'"
"$PENSTOCK" container create demo --mgmt "$mgmt"

echo "== writing ${SIZE_MIB} MiB of random data"
head -c $((SIZE_MIB * 1024 * 1024)) /dev/urandom > "$dir/input.bin"
put_json=$("$PENSTOCK" put "$dir/input.bin" sample.bin --container demo --mgmt "$mgmt" --json)
get_json=$("$PENSTOCK" get sample.bin "$dir/output.bin" --container demo --mgmt "$mgmt" --json)

echo "== verifying byte for byte"
cmp "$dir/input.bin" "$dir/output.bin"
echo "   identical ($(stat -c %s "$dir/output.bin") bytes)"
"$PENSTOCK" ls --container demo --mgmt "$mgmt"

mbps() { sed -E 's/.*"mb_per_s":([0-9.]+).*/\1/' <<<"$1"; }
printf '== throughput: write %.1f MB/s, read %.1f MB/s (%d MiB, 3 targets, UCX_TLS=%s)\n' \
  "$(mbps "$put_json")" "$(mbps "$get_json")" "$SIZE_MIB" "${UCX_TLS:-default}"

echo "== stopping the cluster"
"$PENSTOCK" down --data-dir "$dir/cluster"
