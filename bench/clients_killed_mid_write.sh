#!/usr/bin/env bash
# bench/clients_killed_mid_write.sh — kills (-9) 20 client processes mid-write, one after
# another, while 4 others write to the same target on this host, and prints each of the 4's
# errors, ops and slowest write. With UCX's shared-memory FIFOs on (UCX_MM_ERROR_HANDLING=y
# UCX_TLS=posix,cma) a sender killed mid-message leaves a FIFO element never completed and the
# others stall until their 30 s call timeout; with Penstock's default (nothing set) they do not.
# Env: PENSTOCK_BIN, UCX_TLS, UCX_MM_ERROR_HANDLING, VSIZE (the killed clients' write size, 64K).
set -u
cd "$(dirname "$0")/.."
P=${PENSTOCK_BIN:-build/src/cli/penstock}
D=$(mktemp -d /var/tmp/shmkill.XXXX)
M=$($P up --targets 1 --data-dir $D/c --base-port 0 --capacity 2G --log-level warn 2>/dev/null)
for i in 1 2 3 4; do $P container create k$i --redundancy none --mgmt $M >/dev/null; done
for i in 1 2 3 4; do $P bench write --container k$i --size 1M --concurrency 8 --objects 8 --seconds 40 --json --mgmt $M > $D/long$i.json 2>$D/long$i.err & done
sleep 2
for k in $(seq 20); do
  $P bench write --redundancy none --size ${VSIZE:-64K} --concurrency 16 --seconds 10 --mgmt $M >/dev/null 2>&1 &
  v=$!
  sleep 0.$((RANDOM % 9 + 1))
  kill -9 $v
  wait $v 2>/dev/null
done
wait
for i in 1 2 3 4; do python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("errors", d.get("errors"), "ops", d.get("ops"), "max_ms", round(d.get("max_us",0)/1000), d.get("first_error",""), d.get("error",""))' $D/long$i.json; done
$P down --data-dir $D/c >/dev/null 2>&1
rm -rf $D
