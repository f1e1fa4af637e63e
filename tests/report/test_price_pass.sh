#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ffm-test: timing: the estimates rest on timed runs of the simulated driver; tests/run-tests.sh
# runs it once more when it fails.
#
# The pricing pass (analysis/price.c) end to end on the simulated driver: a loop whose async
# copy into pageable memory waits, where the GPU (not the CPU) bounds the loop, with pageable
# copies planted 20x slower than pinned ones (FAKECUDA_PAGEABLE_GBPS). The fix (a pinned
# buffer) deletes the driver's staging, so it saves far more than the CPU work after the wait,
# which is all that pricing the wait alone gives (about a fifth of the saving: -80% before
# the pass, +0..+4% with it on a quiet machine; the simulated copy engine is CPU threads, so a
# loaded machine moves the saving by a third).
# `ffmctl profile` measures the node model at its first calibration and the store keeps it
# with the driver; the report must price the planted copy within 30% of the planted saving
# (docs/ACCURACY.md has the figures measured on a quiet machine), and say it priced.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
DRV=$B/fakecuda
WL=$B/workloads
n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
check() { if [ "$2" = 0 ]; then ok "$1"; else notok "$1"; fi; }
if [ "$(id -u)" != 0 ]; then echo "1..0 # SKIP needs root for BPF uprobes"; exit 77; fi
if [ ! -e "$DRV/libcuda.so.1" ] || [ ! -x "$WL/pageable_async" ]; then
	echo "1..0 # SKIP needs the simulated driver and the workloads (make)"; exit 77
fi
T=$(mktemp -d /tmp/ffm-test-price-pass-XXXXXX)
trap 'rm -rf "$T"' EXIT
export FAKECUDA_PAGEABLE_GBPS=0.5 FFM_CALIB_PROG=$B/ffm-calib-probe
ARGS="--kernel-us 1500 --cpu-us 500 --n 262144 --iters 100"

# shellcheck disable=SC2086 # ARGS is a list
loop() { LD_LIBRARY_PATH=$DRV "$WL/pageable_async" $ARGS "$@" | awk '/^LOOP_S/ { print $2 }'; }
for i in 1 2 3; do loop >>"$T/plain"; loop --fixed >>"$T/fixed"; done
med() { sort -g "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
measured=$(awk -v p="$(med "$T/plain")" -v f="$(med "$T/fixed")" 'BEGIN { print p - f }')
# The planted saving, per iteration: plain K + pageable copy + C, fixed max(K + pinned copy, C)
# (1 MiB at 0.5 and 12 GB/s). What the runs measure is printed beside it: a CI machine under
# load stretched a plain run from 0.55 s to 1.09 s once, which says nothing of the estimate.
saved=$(awk 'BEGIN { b = 262144 * 4; k = 1.5e-3; c = 0.5e-3; pg = b / 0.5e9; pin = b / 12e9;
	f = k + pin > c ? k + pin : c; printf "%.6f", 100 * (k + pg + c - f) }')
echo "# measured: plain $(med "$T/plain") s, fixed $(med "$T/fixed") s, saved $measured s;" \
	"planted saving $saved s"

# shellcheck disable=SC2086
if ! LD_LIBRARY_PATH=$DRV "$B/ffmctl" --state-dir "$T/s" profile --quiet --stages 1-4 \
	--key price --job-id price -- "$WL/pageable_async" $ARGS >"$T/profile" 2>&1; then
	sed 's/^/# /' "$T/profile" | tail -n 8
	if grep -qiE 'permission|BPF' "$T/profile"; then echo "1..0 # SKIP BPF not usable"; exit 77; fi
	notok "profile"; echo "1..$n"; echo "$n passed, $fails failed"; exit 1
fi
"$B/ffmctl" --state-dir "$T/s" report --json price >"$T/r.json" 2>"$T/r.err"
check "the report of the profile" $?
python3 - "$T/r.json" "$saved" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1])); saved = float(sys.argv[2])
q = r["data_quality"]
est = sum(p["benefit_s"] for p in r["problems"]
          if p["call_site"]["file"].endswith("pageable_async.c") and p["call_site"]["line"] == 30)
print("# node model %s, %d calls priced, %.3f s deleted; estimate %.3f s of %.3f s saved (%+.0f%%)"
      % (q["node_model"], q["priced_calls"], q["priced_deleted_s"], est, saved,
         100 * (est - saved) / saved))
ok = q["node_model"] and q["priced_calls"] > 0 and saved > 0 and abs(est - saved) <= 0.3 * saved
sys.exit(0 if ok else 1)
EOF2
check "the pinned-buffer fix is priced with the node model (within 30% of the planted saving)" $?

# Rule (d): a misplaced sync in a blocking-sync context (FFM_SCHED=blocking), whose waits of
# 1 ms and more return 400 us later after the GPU is done than shorter ones (the exit
# latency the knobs plant, which the node model measures); the wait probe sees the thread
# sleep, and moving the wait to its first use (1.4 ms of CPU work later: from ~1.9 ms, its
# exit included, to ~0.1 ms) also saves that 400 us a call. Checked against the planted
# figures (a loaded machine moves the measured saving too much for 400 us a call): the priced
# exit latency, and the site's benefit at least most of the first-use delay plus most of it.
# (The knob is a step at 1 ms, the model log-linear between its points, 500 us and 1 ms: a
# moved wait that stays above 500 us is priced between, as the GPU's smooth curve would be.)
unset FAKECUDA_PAGEABLE_GBPS
export FFM_SCHED=blocking FAKECUDA_EXIT_BLOCK_US=30 FAKECUDA_EXIT_LONG_US=400
ITERS=150
if ! LD_LIBRARY_PATH=$DRV "$B/ffmctl" --state-dir "$T/s2" profile --quiet --stages 1-4 \
	--key exit --job-id exit -- "$WL/misplaced_sync" --kernel-us 1500 --cpu-us 1400 \
	--iters $ITERS >"$T/profile2" 2>&1; then
	sed 's/^/# /' "$T/profile2" | tail -n 8
	notok "profile in blocking mode"
else
	"$B/ffmctl" --state-dir "$T/s2" report --json exit >"$T/r2.json" 2>"$T/r2.err"
	python3 - "$T/r2.json" "$ITERS" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1])); iters = int(sys.argv[2])
q = r["data_quality"]
ps = [p for p in r["problems"] if p["call_site"]["file"].endswith("misplaced_sync.c")
      and p["call_site"]["line"] == 30]
est = sum(p["benefit_s"] for p in ps)
fu = ps[0]["evidence"]["first_use_s"] if ps and ps[0]["evidence"]["first_use_s"] else 0
print("# node model %s, %d calls priced, %.3f s of exit latency (planted 400 us a call); "
      "estimate %.3f s, first use %.1f ms after the sync" % (q["node_model"], q["priced_calls"],
      q["priced_deleted_s"], est, fu * 1e3))
# per priced call: 400 us planted; 200..520 us (moved waits that end above 500 us are priced on
# the model's ramp); in spin mode it would be about 1 us
per = q["priced_deleted_s"] / q["priced_calls"] if q["priced_calls"] else 0
ok = (q["node_model"] and 200e-6 <= per <= 520e-6 and q["priced_calls"] >= iters / 2
      and est >= iters * (0.8 * 1.4e-3 + 0.5 * 400e-6))
sys.exit(0 if ok else 1)
EOF2
	check "a moved blocking wait is priced with its shorter exit latency" $?
fi
echo "1..$n"
echo "$((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
