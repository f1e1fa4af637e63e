#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Stage 3's coverage of protected ranges (docs/ACCURACY.md, "A false positive from partial
# coverage"): tests/workloads/coverage is a clean program whose every sync is required, but
# whose first use of each result lies past the first 8 bytes of the copied buffer (the word
# i % n, an 8-byte element i % (n/2), the last word, the middle, a strided subset; 16 KiB and
# 4 MiB buffers). Profiled through stages 1-4, each must report < 1% of its wall time as
# recoverable and no problem at its sync line, and say how much of the range stage 3 watched.
# The same program reading nothing between its syncs (--read none) must still be reported: an
# unnecessary sync at that line worth at least half of iters * min(kernel + copy, cpu).
# A program that holds its thread's debug registers (--dr-busy: ffm's watchpoints are refused)
# reads each result at once: while they are held nothing is watched, and that must never count
# as "no use seen": the sync is not called unnecessary, and its coverage is 0 when they are held
# all along; given back halfway, the watchpoints are set then and see the use.
# FFM_COVERAGE_VARIANTS="name|args..." (one a line) picks the variants.
# Skips (77, saying why) without root/BPF or the simulated driver.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
FFMCTL=$B/ffmctl
WL=$B/workloads/coverage
DRV=${FFM_COVERAGE_DRIVER_DIR:-$B/fakecuda}
ITERS=${FFM_COVERAGE_ITERS:-200}
SYNC_LINE=$(grep -n 'FFM-NOTE: coverage required-sync' tests/workloads/coverage.c | cut -d: -f1)
VARIANTS=${FFM_COVERAGE_VARIANTS:-"mod|--read mod
mod64|--read mod64
last|--read last
middle|--read middle
stride|--read stride --stride 16
mod_4mib|--read mod --n 1048576
last_4mib|--read last --n 1048576
stride_4mib|--read stride --n 1048576 --stride 24"}

. tests/ops/lib.sh # TAP helpers; T, a scratch directory removed at exit
need_root
if [ ! -e "$DRV/libcuda.so.1" ] || [ ! -x "$WL" ] || ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP needs the driver in $DRV, $WL (make) and python3"
	exit 77
fi

profile() { # profile NAME ARGS... -> report JSON in $T/NAME.json
	local name=$1
	shift
	LD_LIBRARY_PATH=$DRV "$FFMCTL" --state-dir "$T/s" profile --quiet --stages 1-4 \
		--key "cov-$name" --job-id "cov-$name" -- "$WL" --iters "$ITERS" "$@" \
		>"$T/$name.profile" 2>&1 || return 1
	"$FFMCTL" --state-dir "$T/s" report "cov-$name" --json --top 1000 >"$T/$name.json"
}

# "recoverable_pct benefit_at_sync_line types coverage" of a report.
summary() {
	python3 - "$T/$1.json" "$SYNC_LINE" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
line = int(sys.argv[2])
at = [p for p in r["problems"]
      if p["call_site"]["file"].endswith("coverage.c") and p["call_site"]["line"] == line]
ben = sum(p["benefit_s"] for p in at)
types = ",".join(sorted({p["type"] for p in at})) or "none"
cov = [p["evidence"].get("coverage") for p in at]
site = [s for s in r["call_sites"]
        if s["call_site"]["file"].endswith("coverage.c") and s["call_site"]["line"] == line]
scov = site[0].get("coverage") if site else None
c = scov if scov is not None else (cov[0] if cov else None)
print("%.3f %.6f %s %s" % (r["recoverable_pct"], ben, types,
                          "-" if c is None else "%.4f" % c))
EOF
}

if [ -z "$SYNC_LINE" ]; then
	notok "tests/workloads/coverage.c marks its sync line"
	echo "1..$n"
	exit 1
fi

while IFS='|' read -r name args; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086 # args is a list
	if ! profile "$name" $args; then
		if grep -qiE 'permission|BPF' "$T/$name.profile"; then
			echo "1..0 # SKIP BPF not usable here"
			exit 77
		fi
		notok "$name: profile"
		tail -n 10 "$T/$name.profile" | sed 's/^/# /'
		continue
	fi
	read -r pct ben types cov <<<"$(summary "$name")"
	msg="$name ($args): $pct% recoverable, sync line: $types (benefit $ben s), coverage $cov"
	if python3 -c "import sys; sys.exit(0 if $pct < 1.0 and '$types' == 'none' else 1)"; then
		ok "$msg"
	else
		notok "$msg"
		"$FFMCTL" --state-dir "$T/s" report "cov-$name" | sed 's/^/# /' | head -n 14
	fi
done <<<"$VARIANTS"

# Watchpoints refused (the program holds its debug registers): all along, then for half the run.
for busy in all half; do
	[ $busy = all ] && k=$((ITERS * 10)) || k=$((ITERS / 2))
	if ! profile "busy_$busy" --read first --dr-busy "$k"; then
		notok "busy_$busy: profile"
		tail -n 10 "$T/busy_$busy.profile" | sed 's/^/# /'
		continue
	fi
	taken=$(sed -n 's/^DEBUG_REGISTERS_TAKEN //p' "$T/busy_$busy.profile" | tail -n 1)
	if [ "${taken:-0}" = 0 ]; then
		ok "busy_$busy # SKIP the workload could not take a debug register here"
		continue
	fi
	read -r pct ben types cov <<<"$(summary "busy_$busy")"
	msg="busy_$busy ($taken debug registers held for $k iterations): $pct% recoverable, sync line: $types, coverage $cov"
	if [ $busy = all ]; then
		# nothing watched: no verdict but "not watched", no share of the range claimed
		python3 -c "import sys; sys.exit(0 if 'unnecessary_sync' not in '$types' and '$cov' in ('-', '0.0000') else 1)"
	else
		python3 -c "import sys; sys.exit(0 if $pct < 1.0 and '$types' == 'none' and '$cov' not in ('-', '0.0000') else 1)"
	fi && ok "$msg" || {
		notok "$msg"
		"$FFMCTL" --state-dir "$T/s" report "cov-busy_$busy" | sed 's/^/# /' | head -n 14
	}
done

# The negative: nothing read between the syncs, so each is unnecessary; covering more of the
# range must not make it look used. Predicted: iters * min(500 us + T(16 KiB), 1000 us).
if profile none --read none; then
	read -r pct ben types cov <<<"$(summary none)"
	want=$(python3 -c "print('%.6f' % ($ITERS * (500e-6 + 8e-6 + 16384 / 12e9) * 0.5))")
	msg="none: the sync line is $types, benefit $ben s (at least $want s), coverage $cov"
	if [ "$types" = unnecessary_sync ] && python3 -c "import sys; sys.exit(0 if $ben >= $want else 1)"; then
		ok "$msg"
	else
		notok "$msg"
		"$FFMCTL" --state-dir "$T/s" report cov-none | sed 's/^/# /' | head -n 14
	fi
else
	notok "none: profile"
	tail -n 10 "$T/none.profile" | sed 's/^/# /'
fi

echo "1..$n"
finish
