#!/usr/bin/env bash
# bench/transport_vs_ucx.sh [RUNS=3] — Penstock's data-plane RPC against raw UCX (ucx_perftest),
# server and client in separate processes on this machine, same UCX_TLS, for tcp and for shared
# memory. Median of RUNS for every number.
#   1 MiB: ucx_perftest ucp_am_bw vs transport_bench read-like (small request, 1 MiB reply) and
#          write-like (1 MiB request, empty reply), 8 calls in flight.
#   4 KiB: ops/s (write-like, 32 in flight; perftest ucp_am_bw msg rate) and latency
#          (1 in flight, p50/p99 round trip; perftest ucp_am_lat reports half a round trip).
# Settings: ucx_perftest runs with UCX's own defaults and busy-polls its worker. Penstock's 1 MiB
# figures are taken twice: with the same settings (its progress threads polling,
# PENSTOCK_POLL_US=1000, and UCX_TCP_PUT_ENABLE=y, UCX's default, which Penstock turns off by
# default) — the like-for-like comparison the ratios use — and with Penstock's own defaults on
# this host (no polling below 4 CPUs, no tcp put-zcopy, direct copies on the same host; see
# src/transport/README.md), printed on their own line.
# Memory as perftest uses it: perftest's am_bw sends every message from one buffer and receives
# every one into one buffer; transport_bench writes send one pooled buffer and reads lend one
# reply buffer to every call (huge-page backed, as the client's own buffers; an extra line
# gives shm reads with a buffer per call, PENSTOCK_BENCH_BUFFERS=per-call).
# tcp: perftest's endpoints stripe a rendezvous over two rails (lo and the host's other
# interface); UCX 1.13 gives endpoints with peer-failure handling, which Penstock needs, no
# rendezvous rails. An extra line gives perftest with failure handling (-e) and with one
# rendezvous rail (UCX_MAX_RNDV_RAILS=1), and Penstock's ratios against those.
# Shared memory means client and target on one host, where Penstock copies 1 MiB payloads
# directly between the two processes (process_vm_readv/writev, one copy: src/transport/README.md,
# "Direct copies with a client on the same host"), which is what it does by default there; the
# shm ratios use that path (PENSTOCK_LOCAL_DIRECT=1). UCX 1.13 drops its cma lane (one copy)
# from endpoints with peer-failure handling, which Penstock needs, so through UCX alone the
# bytes take two copies through a shared-memory FIFO; that figure is printed too. tcp figures
# are UCX's tcp throughout (a tcp client is normally on another host). Over shared memory the
# like-for-like figures and the 4 KiB line use UCX's FIFOs (UCX_MM_ERROR_HANDLING=y), as
# perftest does; Penstock's defaults leave them off (a peer killed mid-send stalls the others),
# so its "defaults" line sends messages over loopback tcp and payloads by direct copies.
# Last line: "penstock/ucx_perftest tcp_read=R tcp_write=R shm_read=R shm_write=R" (1 MiB ratios,
# like-for-like settings).
# Needs ucx_perftest (package ucx-utils) and a built transport_bench (TRANSPORT_BENCH=path).
set -euo pipefail
RUNS=${1:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${TRANSPORT_BENCH:-$ROOT/build/src/transport/transport_bench}
BIG=1048576 SMALL=4096 BIG_CALLS=${BIG_CALLS:-10000} SMALL_CALLS=${SMALL_CALLS:-20000}
[ -x "$BENCH" ] || { echo "no transport_bench at $BENCH (build first or set TRANSPORT_BENCH)"; exit 1; }
command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found (apt-get install ucx-utils)"; exit 1; }

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
port=14000
# perftest TLS TEST SIZE ITERS FIELD -> the Final: line's FIELD (6 = MB/s, 8 = msg/s, 3 = p50 usec)
# PT_ENV (env assignments) and PT_FLAGS (perftest options) vary the run.
perftest() {
  port=$((port + 1))
  # shellcheck disable=SC2086
  env $PT_ENV UCX_TLS=$1 ucx_perftest -p $port $PT_FLAGS >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  local out
  # shellcheck disable=SC2086
  out=$(env $PT_ENV UCX_TLS=$1 ucx_perftest 127.0.0.1 -p $port -t "$2" -s "$3" -n "$4" $PT_FLAGS 2>/dev/null | awk '/^Final:/')
  wait $srv || true
  echo "$out" | awk -v f="$5" '{print $f}'
}
# penstock TLS MODE SIZE IN_FLIGHT CALLS KEY -> value of KEY= in transport_bench's result line
# Settings of the like-for-like run (env assignments), and of the defaults run (none).
MATCHED="PENSTOCK_POLL_US=1000 UCX_TCP_PUT_ENABLE=y"
# Shared memory as perftest uses it: UCX's FIFOs, which Penstock takes only when asked (with
# them a peer killed mid-send stalls the others; see src/transport/README.md). The "defaults"
# line goes without them: loopback tcp for messages, direct copies for payloads.
SHM_FIFOS="UCX_MM_ERROR_HANDLING=y"
PT_ENV="" PT_FLAGS=""
SETTINGS=$MATCHED
penstock() {
  # shellcheck disable=SC2086
  coproc SRV { env $SETTINGS UCX_TLS=$1 "$BENCH" serve 2>/dev/null; }
  local line=""
  while read -r line <&"${SRV[0]}"; do [[ $line == PORT* ]] && break; done
  local out
  # shellcheck disable=SC2086
  out=$(env $SETTINGS UCX_TLS=$1 "$BENCH" run "127.0.0.1:${line#PORT }" "$2" "$3" "$4" "$5" 2>/dev/null | grep '^mode=')
  exec {SRV[1]}>&-
  wait "$SRV_PID" || true
  [[ $out == *" failed=0 "* ]] || { echo "transport_bench run failed: $out" >&2; exit 1; }
  echo "$out" | tr ' ' '\n' | awk -F= -v k="$6" '$1 == k {print $2}'
}
repeat() { for _ in $(seq "$RUNS"); do "$@"; done | median; }

declare -A R
for kind in tcp shm; do
  tls=tcp; [ $kind = shm ] && tls=posix,cma
  ucx_bw=$(repeat perftest $tls ucp_am_bw $BIG $BIG_CALLS 6)
  ucx_rate=$(repeat perftest $tls ucp_am_bw $SMALL $SMALL_CALLS 8)
  ucx_lat=$(repeat perftest $tls ucp_am_lat $SMALL $SMALL_CALLS 3)
  if [ $kind = tcp ]; then
    ucx_bw_e=$(PT_FLAGS=-e repeat perftest $tls ucp_am_bw $BIG $BIG_CALLS 6)
    ucx_bw_1rail=$(PT_ENV=UCX_MAX_RNDV_RAILS=1 repeat perftest $tls ucp_am_bw $BIG $BIG_CALLS 6)
  fi
  SETTINGS=""
  [ $kind = shm ] && SETTINGS="PENSTOCK_LOCAL_DIRECT=1"
  def_read=$(repeat penstock $tls read $BIG 8 $BIG_CALLS mib_s)
  def_write=$(repeat penstock $tls write $BIG 8 $BIG_CALLS mib_s)
  SETTINGS=$MATCHED
  [ $kind = shm ] && SETTINGS="$MATCHED $SHM_FIFOS"
  ps_read=$(repeat penstock $tls read $BIG 8 $BIG_CALLS mib_s)
  ps_write=$(repeat penstock $tls write $BIG 8 $BIG_CALLS mib_s)
  if [ $kind = shm ]; then
    ucx_only_read=$ps_read ucx_only_write=$ps_write
    SETTINGS="$MATCHED $SHM_FIFOS PENSTOCK_LOCAL_DIRECT=1"
    ps_read=$(repeat penstock $tls read $BIG 8 $BIG_CALLS mib_s)
    ps_write=$(repeat penstock $tls write $BIG 8 $BIG_CALLS mib_s)
    SETTINGS="$MATCHED $SHM_FIFOS PENSTOCK_LOCAL_DIRECT=1 PENSTOCK_BENCH_BUFFERS=per-call"
    ps_read_per_call=$(repeat penstock $tls read $BIG 8 $BIG_CALLS mib_s)
  fi
  SETTINGS=""
  [ $kind = shm ] && SETTINGS=$SHM_FIFOS
  ps_rate=$(repeat penstock $tls write $SMALL 32 $SMALL_CALLS ops_s)
  ps_p50=$(repeat penstock $tls write $SMALL 1 $((SMALL_CALLS / 4)) p50_us)
  ps_p99=$(repeat penstock $tls write $SMALL 1 $((SMALL_CALLS / 4)) p99_us)
  echo "$kind (UCX_TLS=$tls): 1 MiB ucx_perftest am_bw ${ucx_bw} MiB/s; penstock read ${ps_read} MiB/s, write ${ps_write} MiB/s (${MATCHED}$([ $kind = shm ] && echo ' PENSTOCK_LOCAL_DIRECT=1'))"
  if [ $kind = tcp ]; then
    echo "tcp: 1 MiB ucx_perftest with peer-failure handling (-e) ${ucx_bw_e} MiB/s, with one rendezvous rail" \
         "(UCX_MAX_RNDV_RAILS=1) ${ucx_bw_1rail} MiB/s; penstock read / write against them:" \
         "$(awk -v r="$ps_read" -v w="$ps_write" -v e="$ucx_bw_e" -v o="$ucx_bw_1rail" \
            'BEGIN {printf "%.2f / %.2f and %.2f / %.2f", r / e, w / e, r / o, w / o}')"
  fi
  if [ $kind = shm ]; then
    echo "shm: 1 MiB penstock reads with a reply buffer per call (PENSTOCK_BENCH_BUFFERS=per-call): ${ps_read_per_call} MiB/s" \
         "($(awk -v a="$ps_read_per_call" -v b="$ucx_bw" 'BEGIN {printf "%.2f", a / b}') of ucx_perftest)"
    echo "shm: 1 MiB penstock through UCX only (no direct copies): read ${ucx_only_read} MiB/s, write ${ucx_only_write} MiB/s" \
         "($(awk -v a="$ucx_only_read" -v c="$ucx_only_write" -v b="$ucx_bw" 'BEGIN {printf "%.2f / %.2f", a / b, c / b}') of ucx_perftest)"
  fi
  echo "$kind: 1 MiB penstock with its defaults on this host: read ${def_read} MiB/s, write ${def_write} MiB/s" \
       "($(awk -v a="$def_read" -v c="$def_write" -v b="$ucx_bw" 'BEGIN {printf "%.2f / %.2f", a / b, c / b}') of ucx_perftest)"
  echo "$kind: 4 KiB ucx_perftest ${ucx_rate} msg/s, am_lat p50 ${ucx_lat} us (half round trip); penstock ${ps_rate} ops/s, p50 ${ps_p50} us, p99 ${ps_p99} us (round trip)"
  R[${kind}_read]=$(awk -v a="$ps_read" -v b="$ucx_bw" 'BEGIN {printf "%.2f", a / b}')
  R[${kind}_write]=$(awk -v a="$ps_write" -v b="$ucx_bw" 'BEGIN {printf "%.2f", a / b}')
done
echo "penstock/ucx_perftest tcp_read=${R[tcp_read]} tcp_write=${R[tcp_write]} shm_read=${R[shm_read]} shm_write=${R[shm_write]}"
