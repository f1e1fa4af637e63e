# SPDX-License-Identifier: MIT
# Every printed output of the analysis on a set of stores, one file per output, for the golden
# test (tests/report/test_golden.sh) and tests/ops/compare_outputs.sh. Sourced, not run.
#   outputs_synth SYNTH DIR       deterministic synthetic stores (tests/report/synth.h) under DIR:
#                                 the same bytes of output every time; adds to OUT_JOBS, OUT_DIFFS
#   outputs_workloads CTL B DIR   `ffmctl profile` of the workloads in build B on the simulated
#                                 driver, stages 1-4, and a --fixed job of some for diff (timed
#                                 runs: their numbers differ from one recording to the next)
#   outputs_run CTL OUTDIR        each output verb of ffmctl CTL on every entry: OUTDIR/<name>
#                                 holds its standard output, its standard error and exit status
# OUT_JOBS entries are STATE|JOB|FLAGS (FLAGS "big": no chrome trace, which would be 100s of MB),
# OUT_DIFFS entries STATE|BEFORE|AFTER.
OUT_JOBS=()
OUT_DIFFS=()

# _synth SYNTH STATE KEY JOB ARGS...: one job's runs, written by ffm-synth
_synth() {
	local synth=$1 state=$2 key=$3 job=$4
	shift 4
	mkdir -p "$state" || return 1
	"$synth" --state "$state" --key "$key" --job "$job" "$@" >/dev/null ||
		{ echo "ffm-synth $job $*: failed" >&2; return 1; }
}

outputs_synth() {
	local S=$1 D=$2 all=unnecessary,misplaced,dup,control,sequence,host_read
	_synth "$S" "$D/one" k1 all --iters 60 --scenarios $all --threads 2 &&
		_synth "$S" "$D/one" k1 all-k300 --iters 60 --scenarios $all --k-us 300 &&
		_synth "$S" "$D/one" k2 timeline --stages 2 --iters 50 \
			--scenarios unnecessary,misplaced,dup &&
		_synth "$S" "$D/one" k3 monitor --stages 1 --iters 40 &&
		_synth "$S" "$D/one" k4 seq3 --iters 80 --scenarios sequence,unnecessary --threads 3 &&
		_synth "$S" "$D/one" k5 copy --iters 30 --scenarios unnecessary --copy-us 50 &&
		_synth "$S" "$D/one" k6 free --iters 30 --scenarios unnecessary,host_read \
			--sync-api cuMemFree_v2 &&
		_synth "$S" "$D/one" k7 partial --iters 40 --scenarios unnecessary,misplaced \
			--run-flags 1 &&
		_synth "$S" "$D/one" k8 failed --iters 20 --scenarios dup,control --exit-status 3 &&
		_synth "$S" "$D/nodes/nodes/gpu01" k1 mj --node gpu01 --iters 100 --tgid 100 \
			--scenarios unnecessary,dup &&
		_synth "$S" "$D/nodes/nodes/gpu02" k1 mj --node gpu02 --iters 50 --tgid 200 \
			--scenarios unnecessary,dup || return 1
	OUT_JOBS+=("$D/one|all|" "$D/one|all-k300|" "$D/one|timeline|" "$D/one|monitor|"
		"$D/one|seq3|" "$D/one|copy|" "$D/one|free|" "$D/one|partial|" "$D/one|failed|"
		"$D/nodes|mj|")
	OUT_DIFFS+=("$D/one|all|all-k300" "$D/one|all-k300|all" "$D/one|seq3|monitor"
		"$D/one|timeline|copy")
}

# outputs_synth_big SYNTH DIR: one store of over a million timeline events, which the analysis
# scans in several slices at once (analysis/timeline.c)
outputs_synth_big() {
	_synth "$1" "$2/big" kb big --fast --iters 60000 \
		--scenarios unnecessary,misplaced,dup,control,sequence,host_read || return 1
	OUT_JOBS+=("$2/big|big|big")
}

# _profile CTL B STATE JOB KEY STAGES WORKLOAD ARGS...
_profile() {
	local ctl=$1 b=$2 state=$3 job=$4 key=$5 stages=$6 wl=$7
	shift 7
	LD_LIBRARY_PATH=$b/fakecuda "$ctl" --state-dir "$state" profile --quiet --stages "$stages" \
		--job-id "$job" --key "$key" -- "$b/workloads/$wl" "$@" >/dev/null 2>&1 ||
		{ echo "ffmctl profile $wl $*: failed" >&2; return 1; }
}

outputs_workloads() {
	local C=$1 B=$2 D=$3/wl w
	for w in control coverage dup_transfer free_in_loop host_read managed_memset \
		misplaced_sync pageable_async sequence sync_rate threads unnecessary_sync \
		lib_reduce templated; do
		[ -x "$B/workloads/$w" ] || continue
		_profile "$C" "$B" "$D" "wl-$w" "key-$w" 1-4 "$w" || return 1
		OUT_JOBS+=("$D|wl-$w|")
	done
	for w in unnecessary_sync dup_transfer host_read sequence; do
		[ -x "$B/workloads/$w" ] || continue
		_profile "$C" "$B" "$D" "wl-$w-fixed" "key-$w" 1 "$w" --fixed || return 1
		OUT_DIFFS+=("$D|wl-$w|wl-$w-fixed")
	done
}

# _out CTL OUTFILE STATE ARGS...: one output: standard output, standard error, exit status
_out() {
	local ctl=$1 f=$2 state=$3 rc
	shift 3
	"$ctl" --state-dir "$state" "$@" >"$f" 2>"$f.err"
	rc=$?
	{ echo "--- stderr"; cat "$f.err"; echo "--- exit $rc"; } >>"$f"
	rm -f "$f.err"
}

outputs_run() {
	local C=$1 O=$2 e state job flags name fmt g
	mkdir -p "$O" || return 1
	for e in "${OUT_JOBS[@]}"; do
		IFS='|' read -r state job flags <<<"$e"
		name=$(basename "$state")-$job
		_out "$C" "$O/$name.report" "$state" report "$job" --noise 0 --top 1000
		_out "$C" "$O/$name.report-default" "$state" report "$job"
		for g in point function sequence; do
			_out "$C" "$O/$name.json-$g" "$state" report "$job" --json --group $g
		done
		_out "$C" "$O/$name.report-function" "$state" report "$job" --group function --noise 0
		_out "$C" "$O/$name.report-sequence" "$state" report "$job" --group sequence --noise 0
		_out "$C" "$O/$name.subsequence" "$state" report "$job" --subsequence 1:1:2 --json
		_out "$C" "$O/$name.hatchet" "$state" export "$job" --format hatchet
		[ "$flags" = big ] && continue
		for fmt in "" --all-runs --no-merge; do
			_out "$C" "$O/$name.chrome$fmt" "$state" export "$job" --format chrome-trace $fmt
		done
	done
	for e in "${OUT_DIFFS[@]}"; do
		IFS='|' read -r state job flags <<<"$e"
		name=$(basename "$state")-$job-$flags
		_out "$C" "$O/$name.diff" "$state" diff "$job" "$flags"
		_out "$C" "$O/$name.diff-json" "$state" diff "$job" "$flags" --json
	done
}
