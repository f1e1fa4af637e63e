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
# Then rule (d) (a moved blocking wait, below), and rule (c), a temporary buffer's reuse (the
# last part, below).
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
if [ ! -e "$DRV/libcuda.so.1" ] || [ ! -x "$WL/pageable_async" ] || [ ! -x "$WL/temp_buffer" ]; then
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
COPY_LINE=$(grep -n "FFM-PLANT: pageable_async pageable-copy" tests/workloads/pageable_async.c |
	cut -d: -f1)
python3 - "$T/r.json" "$saved" "$COPY_LINE" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1])); saved = float(sys.argv[2]); line = int(sys.argv[3])
q = r["data_quality"]
est = sum(p["benefit_s"] for p in r["problems"]
          if p["call_site"]["file"].endswith("pageable_async.c") and p["call_site"]["line"] == line)
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

# The reuse pass (analysis/reuse.c) end to end on the simulated driver: tests/workloads/
# temp_buffer allocates a temporary every step, fills it (or not), uses it and frees it; the
# simulated driver plants each allocation's and free's own time (FAKECUDA_ALLOC_US,
# FAKECUDA_ALLOC_MIB_US, FAKECUDA_FREE_US). The fix (one buffer per thread, reused) deletes the
# allocations and frees of every step but one: (N - 1) * (A + F) per thread, the threads side
# by side; on a loaded machine the calls take longer than planted, so the planted saving is
# what they took in the profiled (stage-2) run, as the simulated driver logs it
# (FAKECUDA_ALLOC_LOG): per thread, its steps' allocations and frees but the first, the
# largest thread's. Each variant (4 KiB and 64 MiB, with and without the fill, 1 and 4
# threads) is profiled (`ffmctl profile`, stages 1-4) and its report must name the
# allocation's line as a temporary buffer priced within 10% of that planted saving (20% on
# four threads: see variant()); the control (the same program
# --fixed: one allocation per thread) must report no temporary buffer and no problem worth
# 0.5% of its wall time. The free's own implicit sync is the unnecessary sync it was before,
# priced apart (its wait is not counted twice). What the plain and fixed runs measure is
# printed beside each estimate (their difference also holds the free's waits).
#
# Planted costs of milliseconds: a loaded CI machine wakes a sleeping call up to 0.5 ms late,
# which the calls then really cost (the estimate prices their recorded times).
unset FFM_SCHED FAKECUDA_EXIT_BLOCK_US FAKECUDA_EXIT_LONG_US
export FAKECUDA_ALLOC_US=8000 FAKECUDA_ALLOC_MIB_US=400
export FAKECUDA_FREE_US=4000

loop() { LD_LIBRARY_PATH=$DRV "$WL/temp_buffer" "$@" | awk '/^LOOP_S/ { print $2 }'; }
ALLOC_LINE=$(grep -n "FFM-PLANT: temp_buffer temp-buffer" tests/workloads/temp_buffer.c |
	cut -d: -f1)

# profile NAME ARGS...: a profile of temp_buffer ARGS into key NAME, its report in $T/NAME.json.
profile() {
	local name=$1
	shift
	rm -f "$T/$name.log"
	if ! FAKECUDA_ALLOC_LOG=$T/$name.log LD_LIBRARY_PATH=$DRV "$B/ffmctl" --state-dir "$T/s3" \
		profile --quiet --stages 1-4 \
		--key "$name" --job-id "$name" -- "$WL/temp_buffer" "$@" >"$T/$name.out" 2>&1; then
		sed 's/^/# /' "$T/$name.out" | tail -n 8
		if grep -qiE 'permission|BPF' "$T/$name.out"; then
			echo "1..0 # SKIP BPF not usable"; exit 77
		fi
		return 1
	fi
	"$B/ffmctl" --state-dir "$T/s3" report --json "$name" >"$T/$name.json" 2>"$T/$name.err"
}

# variant NAME ITERS BYTES MEMSET THREADS [ARGS...]: within 10% of the planted saving on one
# thread, 20% on four: the model takes, per slice of the wall time, the largest thread's saving
# (docs/ACCURACY.md, "Threads"), and a slice of ten steps (two problems a step: the allocation
# and the free's sync) where one thread's allocations number one more than another's counts
# that one (+10%), although the four save the same side by side: +3.5% to +15% measured at
# load 8-15 on the 2-core CI machine.
variant() {
	local name=$1 iters=$2 bytes=$3 fill=$4 threads=$5 planted knobs measured tol=0.10
	local -a args=(--iters "$iters" --bytes "$bytes" --memset "$fill" --threads "$threads")
	shift 5
	args+=("$@")
	[ "$threads" = 1 ] || tol=0.20
	knobs=$(awk -v n="$iters" -v b="$bytes" -v a="$FAKECUDA_ALLOC_US" \
		-v m="$FAKECUDA_ALLOC_MIB_US" -v f="$FAKECUDA_FREE_US" \
		'BEGIN { printf "%.6f", (n - 1) * (a + m * b / 1048576 + f) / 1e6 }')
	measured=$(awk -v p="$(loop "${args[@]}")" -v f="$(loop "${args[@]}" --fixed)" \
		'BEGIN { printf "%.3f", p - f }')
	if ! profile "$name" "${args[@]}"; then
		notok "$name: profile"
		return
	fi
	# The timeline run's calls: the second temp_buffer process of the log (stages 1, 2, 3, 4).
	planted=$(awk -v b="$bytes" '$3 == "temp_buffer" && !($2 in seen) { seen[$2] = ++np }
		$3 == "temp_buffer" && seen[$2] == 2 && $5 == b {
			if (($1, $4) in one) sum[$4] += $6; else one[$1, $4] = 1 }
		END { for (t in sum) if (sum[t] > m) m = sum[t]; printf "%.6f", m / 1e9 }' \
		"$T/$name.log" 2>/dev/null)
	echo "# $name: planted (N - 1) * (A + F) = $knobs s a thread;" \
		"the profiled run's calls took $planted s"
	python3 - "$T/$name.json" "${planted:-0}" "$measured" "$name" "$tol" "$ALLOC_LINE" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1])); planted = float(sys.argv[2])
at = [p for p in r["problems"] if p["call_site"]["file"].endswith("temp_buffer.c")]
tb = [p for p in at if p["type"] == "temp_buffer"]
est = sum(p["benefit_s"] for p in tb)
line = tb[0]["call_site"]["line"] if tb else 0
others = sum(p["benefit_s"] for p in at if p["type"] != "temp_buffer")
if planted <= 0:
    print("# %s: no planted calls in the driver's log" % sys.argv[4])
    sys.exit(1)
print("# %s: temporary buffer at line %d: %.3f s for %.3f s planted (%+.1f%%); other problems"
      " %.3f s, headline %.3f s; plain - fixed measured %s s"
      % (sys.argv[4], line, est, planted, 100 * (est - planted) / planted, others,
         r["recoverable_s"], sys.argv[3]))
tol, want = float(sys.argv[5]), int(sys.argv[6])
sys.exit(0 if len(tb) == 1 and line == want and abs(est - planted) <= tol * planted else 1)
EOF2
	rc=$?
	check "$name: the allocation's line is a temporary buffer, priced within $(awk -v t="$tol" \
		'BEGIN { print 100 * t }')% of the planted saving" $rc
}

# Four threads do less CPU work a step: four busy threads on a 2-core machine would wait for
# the CPU, and the fix would save less than the calls it deletes.
variant small_fill_1t 40 4096 1 1
variant small_nofill_4t 40 4096 0 4 --cpu-us 200
variant big_fill_1t 20 67108864 1 1
variant big_nofill_4t 20 67108864 0 4 --cpu-us 200

# The control: one buffer per thread, allocated once.
if profile control --iters 40 --bytes 4096 --memset 1 --threads 1 --fixed; then
	python3 - "$T/control.json" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
tb = [p for p in r["problems"] if p["type"] == "temp_buffer"]
big = [p for p in r["problems"] if p["benefit_s"] >= 0.005 * r["wall_s"]]
print("# control: %d temporary buffers, %d problems worth 0.5%% of %.3f s, headline %.6f s"
      % (len(tb), len(big), r["wall_s"], r["recoverable_s"]))
sys.exit(0 if not tb and not big else 1)
EOF2
	rc=$?
	check "control: no temporary buffer and no problem worth 0.5% of the wall time" $rc
else
	notok "control: profile"
fi

echo "1..$n"
echo "$((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
