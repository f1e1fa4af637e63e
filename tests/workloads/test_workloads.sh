#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ffm-test: timing: plain and fixed loop times of the simulated driver; tests/run-tests.sh
# runs it once more when it fails.
#
# Tests of the workloads (tests/workloads/README.md), TAP on stdout:
#   - README.md's call-site table matches the FFM-PLANT / FFM-NOTE markers in the sources, both
#     ways, and each marked line really holds the named driver call (ffm's tests compare ffm's
#     file:line output to that table, so a stale table would fail them for the wrong reason);
#   - the binaries are built as ffm expects to meet applications: DWARF line info, .eh_frame,
#     NEEDED libcuda.so.1 and no rpath/runpath;
#   - on the simulated driver (LD_LIBRARY_PATH=$FFM_BUILD/fakecuda): each workload runs, exits 0
#     and prints WALL_S and CHECKSUM; plain and --fixed print the same CHECKSUM; on the median of
#     3 runs each (6 when the first 3 miss a bound: shared CI machines have bursts of load),
#     --fixed is at least 10% faster (WALL_S) for the planted workloads, the smallest
#     saving the defaults predict being ~20%, and within 10% for the control; and the time saved
#     in the main loop (LOOP_S) is at least 0.6x what README.md's formula predicts, i.e. the
#     planted waste really happens. No upper bound: removing a call also saves the call's own cost,
#     which the formulas leave out and which the simulated driver on a small CI machine makes large
#     (e.g. ~300 us per cuMemAlloc + cuMemFree pair here).
# The runtime tests skip, saying so, while the simulated driver is not built.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
WL=$B/workloads
FAKE=$B/fakecuda
README=tests/workloads/README.md

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
check() { # check NAME CMD...: ok when CMD succeeds
	local name=$1
	shift
	if "$@"; then ok "$name"; else notok "$name"; fi
}

# --- README.md <-> sources -----------------------------------------------------------------
# Markers: "/* FFM-PLANT: <workload> <kind> */" on a planted problem's call line,
# "/* FFM-NOTE: <workload> <kind> */" on sites ffm must see but not report (required syncs,
# first use of GPU-written data). README rows: | workload | kind | `call` | `symbol` | `file:line` | ...
markers=$(grep -nE 'FFM-(PLANT|NOTE): [a-z_]+ [a-z-]+ \*/' tests/workloads/*.c |
	sed -E 's/^([^:]+):([0-9]+):.*FFM-(PLANT|NOTE): ([a-z_]+) ([a-z-]+) \*\/.*/\4 \5 \1:\2/' | sort)
rows=$(grep -E '^\| *[a-z_]+ *\| *[a-z-]+ *\| *`[^`]+` *\| *`[^`]+` *\| *`tests/workloads/[a-z_]+\.c:[0-9]+`' "$README" 2>/dev/null |
	sed -E 's/^\| *([a-z_]+) *\| *([a-z-]+) *\| *`([^`]+)` *\| *`[^`]+` *\| *`([^`]+)`.*/\1 \2 \4 \3/')
readme_sites=$(echo "$rows" | awk 'NF { print $1, $2, $3 }' | sort)

if [ -z "$markers" ]; then
	notok "sources carry FFM-PLANT/FFM-NOTE markers"
elif [ "$markers" = "$readme_sites" ]; then
	ok "README.md call sites match the markers in the sources ($(echo "$markers" | wc -l) sites)"
else
	notok "README.md call sites match the markers in the sources"
	diff <(echo "$readme_sites") <(echo "$markers") | sed 's/^/# README vs sources: /'
fi

bad=
while read -r wl kind site call; do
	[ -n "$wl" ] || continue
	line=$(sed -n "${site##*:}p" "${site%:*}" 2>/dev/null)
	# The call as written in the source, e.g. cuMemFree( on the marked line.
	case $line in
	*"$call"*) ;;
	*) bad="$bad $site($call)" ;;
	esac
done <<<"$rows"
if [ -z "$rows" ]; then
	notok "README.md has a call-site table"
elif [ -z "$bad" ]; then
	ok "each README.md call site holds the named call"
else
	notok "each README.md call site holds the named call:$bad"
fi

# --- how the binaries are built ------------------------------------------------------------
WORKLOADS="unnecessary_sync misplaced_sync free_in_loop dup_transfer pageable_async managed_memset sequence control"
missing=
for w in $WORKLOADS hang; do [ -x "$WL/$w" ] || missing="$missing $w"; done
if [ -n "$missing" ]; then
	notok "all workloads are built in $WL (missing:$missing; run make)"
else
	ok "all workloads are built in $WL"
fi

built_as_apps() {
	local f=$1 dyn secs
	dyn=$(readelf -d "$f" 2>/dev/null) || return 1
	secs=$(readelf -SW "$f" 2>/dev/null) || return 1
	grep -q 'NEEDED.*\[libcuda\.so\.1\]' <<<"$dyn" || { echo "# $f: no NEEDED libcuda.so.1"; return 1; }
	! grep -qE 'RPATH|RUNPATH' <<<"$dyn" || { echo "# $f: has an rpath"; return 1; }
	grep -q ' \.debug_line ' <<<"$secs" || { echo "# $f: no .debug_line"; return 1; }
	grep -q ' \.eh_frame ' <<<"$secs" || { echo "# $f: no .eh_frame"; return 1; }
	# No frame pointer in the functions that hold planted calls: ffm must unwind them with CFI.
	local dis
	dis=$(objdump -d --no-show-raw-insn --disassemble=seq_fetch_and_scratch "$f" 2>/dev/null)
	grep -q 'call.*cuMemFree_v2' <<<"$dis" || { echo "# $f: cannot disassemble seq_fetch_and_scratch"; return 1; }
	! grep -q 'mov *%rsp,%rbp' <<<"$dis" || { echo "# $f: seq_fetch_and_scratch sets up a frame pointer"; return 1; }
}
if [ -x "$WL/sequence" ]; then
	check "sequence: line info, .eh_frame, no frame pointer, NEEDED libcuda.so.1, no rpath" built_as_apps "$WL/sequence"
else
	skip "sequence: line info, .eh_frame, no frame pointer, NEEDED libcuda.so.1, no rpath" "not built"
fi

# --- runs on the simulated driver -------------------------------------------------------------
# The copy model is pinned to the fake's documented defaults, so that the predicted savings
# below (which depend on the copy time T) do not move with someone's environment.
export FAKECUDA_COPY_GBPS=12 FAKECUDA_COPY_LAT_US=8
unset FFM_SCHED

# Predicted main-loop saving (seconds) with the default parameters; README.md derives each.
#   T(bytes) = 8 us + bytes / 12 GB/s on the simulated driver.
declare -A predicted=(
	[unnecessary_sync]=0.1995  # (400 - 1) * min(500 us, 1000 us)
	[misplaced_sync]=0.2036    # 400 * min(500 us + T(16 KiB), 1000 us)
	[free_in_loop]=0.1995      # (400 - 1) * min(500 us, 1000 us)
	[dup_transfer]=0.1426      # (400 - 1) * T(4 MiB) = 399 * 357.5 us
	[pageable_async]=0.2120    # 400 * min(500 us + T(256 KiB), 1000 us)
	[managed_memset]=0.1995    # (400 - 1) * min(500 us, 1000 us)
	[sequence]=0.3150          # 500 * (300 + 400 + T(256 KiB) + 300 + 400 - max(630, 800)) us
)

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { sed -n "s/^$1 //p" <<<"$2" | tail -n 1; }

# measure W ROUNDS: runs W plain and --fixed ROUNDS times each, alternating so that a slow phase of
# the machine hits both alike; appends to plain_wall/fixed_wall/plain_loop/fixed_loop/sums.
# Returns 1 (with runfail set) on a failed run.
measure() {
	local w=$1 rounds=$2 r mode out rc wall loop sum
	local -a args
	for ((r = 1; r <= rounds; r++)); do
		for mode in plain fixed; do
			args=()
			[ $mode = fixed ] && args=(--fixed)
			out=$(LD_LIBRARY_PATH=$FAKE timeout 60 "$WL/$w" "${args[@]}" 2>&1)
			rc=$?
			wall=$(field WALL_S "$out")
			loop=$(field LOOP_S "$out")
			sum=$(field CHECKSUM "$out")
			if [ $rc != 0 ] || [ -z "$wall" ] || [ -z "$loop" ] || [ -z "$sum" ]; then
				runfail="$mode run $r: exit $rc"
				echo "$out" | tail -n 5 | sed 's/^/# /'
				return 1
			fi
			sums+=("$sum")
			if [ $mode = plain ]; then
				plain_wall+=("$wall") plain_loop+=("$loop")
			else
				fixed_wall+=("$wall") fixed_loop+=("$loop")
			fi
		done
	done
}

# timing_ok W: the timing verdicts on the medians so far (sets pw fw pl fl saved).
timing_ok() {
	local w=$1
	pw=$(median "${plain_wall[@]}") fw=$(median "${fixed_wall[@]}")
	pl=$(median "${plain_loop[@]}") fl=$(median "${fixed_loop[@]}")
	saved=$(awk -v p="$pl" -v f="$fl" 'BEGIN { printf "%.4f", p - f }')
	if [ "$w" = control ]; then
		awk -v p="$pw" -v f="$fw" 'BEGIN { d = f - p; if (d < 0) d = -d; exit !(d <= 0.10 * p) }'
	else
		awk -v p="$pw" -v f="$fw" -v s="$saved" -v e="${predicted[$w]}" \
			'BEGIN { exit !(f <= 0.90 * p && s >= 0.6 * e) }'
	fi
}

run_skip=
if [ ! -e "$FAKE/libcuda.so.1" ]; then
	run_skip="simulated driver $FAKE/libcuda.so.1 not built yet"
elif [ -n "$missing" ]; then
	run_skip="workloads not built"
fi

for w in $WORKLOADS; do
	names=("runs plain and --fixed, prints WALL_S and CHECKSUM" "same CHECKSUM plain and --fixed"
		"--fixed timing")
	[ "$w" = control ] || names+=("loop saves the modeled waste")
	if [ -n "$run_skip" ]; then
		for t in "${names[@]}"; do skip "$w: $t" "$run_skip"; done
		continue
	fi
	plain_wall=() fixed_wall=() plain_loop=() fixed_loop=() sums=() runfail=
	# Median of 3 each; a timing verdict that fails is measured once more (median of 6) before
	# it counts, because CI machines are shared and a burst of load moves one set of runs.
	if measure "$w" 3 && ! timing_ok "$w"; then
		echo "# $w: medians of 3 outside the bounds (WALL_S plain $pw fixed $fw), measuring again"
		measure "$w" 3
	fi
	if [ -n "$runfail" ]; then
		notok "$w: ${names[0]} ($runfail)"
		for t in "${names[@]:1}"; do skip "$w: $t" "the runs failed"; done
		continue
	fi
	ok "$w: ${names[0]}"

	if [ "$(printf '%s\n' "${sums[@]}" | sort -u | wc -l)" = 1 ]; then
		ok "$w: same CHECKSUM plain and --fixed (${sums[0]})"
	else
		notok "$w: same CHECKSUM plain and --fixed: ${sums[*]}"
	fi

	timing_ok "$w"
	echo "# $w: median of ${#plain_wall[@]}: WALL_S plain $pw fixed $fw, LOOP_S plain $pl fixed $fl"
	if [ "$w" = control ]; then
		if awk -v p="$pw" -v f="$fw" 'BEGIN { d = f - p; if (d < 0) d = -d; exit !(d <= 0.10 * p) }'; then
			ok "$w: --fixed within 10% of plain ($fw s vs $pw s)"
		else
			notok "$w: --fixed within 10% of plain ($fw s vs $pw s)"
		fi
		continue
	fi
	if awk -v p="$pw" -v f="$fw" 'BEGIN { exit !(f <= 0.90 * p) }'; then
		ok "$w: --fixed at least 10% faster ($fw s vs $pw s)"
	else
		notok "$w: --fixed at least 10% faster ($fw s vs $pw s)"
	fi
	exp=${predicted[$w]}
	if awk -v s="$saved" -v e="$exp" 'BEGIN { exit !(s >= 0.6 * e) }'; then
		ok "$w: loop saves at least 0.6x the modeled waste (saved $saved s, model $exp s)"
	else
		notok "$w: loop saves at least 0.6x the modeled waste (saved $saved s, model $exp s)"
	fi
done

# The wait modes: the same binary must run in each, with the same result.
for sched in spin yield blocking; do
	if [ -n "$run_skip" ]; then
		skip "unnecessary_sync runs with FFM_SCHED=$sched" "$run_skip"
		continue
	fi
	out=$(FFM_SCHED=$sched LD_LIBRARY_PATH=$FAKE timeout 60 "$WL/unnecessary_sync" --iters 50 2>&1)
	rc=$?
	ref=$(LD_LIBRARY_PATH=$FAKE timeout 60 "$WL/unnecessary_sync" --iters 50 --fixed 2>&1 | sed -n 's/^CHECKSUM //p')
	if [ $rc = 0 ] && [ -n "$ref" ] && [ "$(field CHECKSUM "$out")" = "$ref" ]; then
		ok "unnecessary_sync runs with FFM_SCHED=$sched"
	else
		notok "unnecessary_sync runs with FFM_SCHED=$sched (exit $rc)"
		echo "$out" | tail -n 5 | sed 's/^/# /'
	fi
done

# threads --pool: which worker runs which task changes from run to run; the checksum must not.
if [ -n "$run_skip" ]; then
	skip "threads --pool: the same CHECKSUM in every run, plain and --fixed" "$run_skip"
else
	pool_sums=()
	for mode in "" --fixed ""; do
		pool_sums+=("$(LD_LIBRARY_PATH=$FAKE timeout 60 "$WL/threads" --pool 1 --threads 3 --iters 40 \
			--kernel-us 100 --cpu-us 100 $mode 2>&1 | sed -n 's/^CHECKSUM //p')")
	done
	if [ -n "${pool_sums[0]}" ] && [ "$(printf '%s\n' "${pool_sums[@]}" | sort -u | wc -l)" = 1 ]; then
		ok "threads --pool: the same CHECKSUM in every run, plain and --fixed (${pool_sums[0]})"
	else
		notok "threads --pool: the same CHECKSUM in every run, plain and --fixed: ${pool_sums[*]}"
	fi
fi

# hang: the sync must last until the host releases the kernel, and then end.
if [ -n "$run_skip" ]; then
	skip "hang: cuCtxSynchronize lasts until the host releases ffm_hang" "$run_skip"
else
	out=$(LD_LIBRARY_PATH=$FAKE timeout 30 "$WL/hang" --hold-ms 200 2>&1)
	rc=$?
	loop=$(field LOOP_S "$out")
	if [ $rc = 0 ] && awk -v l="${loop:-0}" 'BEGIN { exit !(l >= 0.2 && l < 5) }'; then
		ok "hang: cuCtxSynchronize lasts until the host releases ffm_hang (${loop} s for 200 ms)"
	else
		notok "hang: cuCtxSynchronize lasts until the host releases ffm_hang (exit $rc, LOOP_S ${loop:-none})"
		echo "$out" | tail -n 5 | sed 's/^/# /'
	fi
fi

# A bad argument is a usage error (2), not a crash or a silent default.
if [ -z "$run_skip" ]; then
	LD_LIBRARY_PATH=$FAKE "$WL/control" --iters nope >/dev/null 2>&1
	rc=$?
	check "a bad argument exits 2" [ "$rc" = 2 ]
else
	skip "a bad argument exits 2" "$run_skip"
fi

echo "1..$n"
[ $fails = 0 ]
