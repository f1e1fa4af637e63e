#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What Python frames cost per event: ns per driver call of a Python loop (bench/bench_python.py,
# ctypes, DEPTH frames deep), bare and under `ffmctl profile`, with the walk and with it off
# (FFM_PYTHON_FRAMES=0), for
#   a stage-1 wait: cuCtxSynchronize on an idle context under --stages 1 (the wait probe walks)
#   a stage-2 call: cuStreamWaitEvent on a completed event under --stages 2 (the call's return
#                   probe walks; it never waits)
# The walk and no-walk runs alternate, REPS times; the walk's price per event is their
# difference, taken per repetition (min and median printed). With FFM_BENCH_PROG_NS=1 each run
# also reports the kernel's run time of ffmctl's BPF programs per call (bench/bench_python.py),
# which the rest of the call's noise does not reach. Stage 2 also samples the CPU of a walked
# Python thread (1999 Hz, each sample a walk of its own: docs/OVERHEAD.md); a third stage-2
# configuration, the walk with FFM_CPU_SAMPLE_HZ=0, tells the walk at the call from the samples.
# With FFM_BENCH_AB=1 (and FFM_BENCH_PROG_NS=1), each repetition also runs the walk's in-process
# A/B at both stages (bench/bench_python.py: its pyprocs entry in and out in alternating rounds
# of one process, no CPU samples): the BPF time and the whole call's time the walk adds, free of
# the differences between processes that the comparison above carries.
# FFM_BENCH_CPU=N runs the Python loop pinned to CPU N (taskset), every configuration on the
# same core: a loop that migrates between a VM's vCPUs moves by more than the walk costs.
#   bench/bench_python.sh [FFMCTL [PYTHON [CALLS [DEPTH [REPS]]]]]
# Defaults: build/ffmctl, python3, 200000 calls, depth 10, 3 repetitions. Runs as root (ffmctl
# profile). On a GPU node, from the static build: bench/gpu/pack.sh, then on the node, from
# the repository's root with .dev/gpu carried there:
#   FFM_BENCH_PROG_NS=1 bench/bench_python.sh .dev/gpu/ffmctl python3
# On CI's simulated driver: LD_LIBRARY_PATH=build/fakecuda bench/bench_python.sh
set -eu
cd "$(dirname "$0")/.."
ctl=${1:-build/ffmctl} py=${2:-python3} calls=${3:-200000} depth=${4:-10} reps=${5:-3}
st=$(mktemp -d /tmp/ffm-bench-py.XXXXXX)
res=$st/results
trap 'rm -rf "$st"' EXIT
ab=${FFM_BENCH_AB:-}
unset FFM_BENCH_AB # only the A/B runs below measure in-process
# one MODE CONFIG [ffmctl profile args...]: a line "MODE CONFIG ns bpf_ns" into $res
one() {
	local mode=$1 cfg=$2 out
	shift 2
	out=$("$@" ${FFM_BENCH_CPU:+taskset -c "$FFM_BENCH_CPU"} "$py" bench/bench_python.py \
		"$calls" "$depth" 5 "$mode" 2>/dev/null) || true
	echo "$mode $cfg $(echo "$out" | sed -n 's/^ns_per_call //p') \
$(echo "$out" | sed -n 's/^bpf_ns_per_call //p')" >>"$res"
}
for r in $(seq "$reps"); do
	one wait bare env
	one call bare env
	for stage in 1 2; do
		mode=$([ $stage = 1 ] && echo wait || echo call)
		one $mode walk "$ctl" --state-dir "$st" profile --stages $stage --job-id "w$r$stage" --
		one $mode none env FFM_PYTHON_FRAMES=0 "$ctl" --state-dir "$st" profile \
			--stages $stage --job-id "n$r$stage" --
		[ $stage = 2 ] && one $mode nosample env FFM_CPU_SAMPLE_HZ=0 "$ctl" --state-dir "$st" \
			profile --stages $stage --job-id "s$r$stage" --
		[ "$ab" = 1 ] &&
			env FFM_BENCH_AB=1 FFM_CPU_SAMPLE_HZ=0 "$ctl" --state-dir "$st" profile --stages $stage \
				--job-id "a$r$stage" -- ${FFM_BENCH_CPU:+taskset -c "$FFM_BENCH_CPU"} \
				"$py" bench/bench_python.py "$calls" "$depth" 5 "$mode" 2>/dev/null |
			sed -n "s/^ab_walk_bpf_ns /$mode ab_bpf /p; s/^ab_walk_ns /$mode ab_call /p" >>"$res"
	done
done
echo "python $("$py" -V 2>&1 | cut -d' ' -f2), depth $depth, $calls calls, $reps repetitions${FFM_BENCH_CPU:+, on CPU $FFM_BENCH_CPU}"
python3 - "$res" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 3:
        rows.setdefault((f[0], f[1]), []).append((float(f[2]), float(f[3]) if len(f) > 3 else None))
def mm(v):
    return "min %6.0f  median %6.0f" % (min(v), statistics.median(v)) if v else "(no data)"
for mode, stage in (("wait", "stage 1 wait"), ("call", "stage 2 call")):
    walk, none = rows.get((mode, "walk"), []), rows.get((mode, "none"), [])
    print("%s, ns per call:" % stage)
    print("  bare              %s" % mm([x for x, _ in rows.get((mode, "bare"), [])]))
    print("  with the walk     %s" % mm([x for x, _ in walk]))
    print("  without           %s" % mm([x for x, _ in none]))
    print("  walk per event    %s" % mm([a - b for (a, _), (b, _) in zip(walk, none)]))
    nos = rows.get((mode, "nosample"), [])
    if nos:
        print("  walk, no samples  %s" % mm([x for x, _ in nos]))
        print("  ... per event     %s" % mm([a - b for (a, _), (b, _) in zip(nos, none)]))
    if walk and none and walk[0][1] is not None and none[0][1] is not None:
        print("  BPF, with walk    %s" % mm([y for _, y in walk]))
        print("  BPF, without      %s" % mm([y for _, y in none]))
        print("  BPF walk / event  %s" % mm([a - b for (_, a), (_, b) in zip(walk, none)]))
        if nos and nos[0][1] is not None:
            print("  BPF, no samples   %s" % mm([y for _, y in nos]))
            print("  ... walk / event  %s" % mm([a - b for (_, a), (_, b) in zip(nos, none)]))
    for kind, what in (("ab_bpf", "BPF time"), ("ab_call", "whole call")):
        ab = [x for x, _ in rows.get((mode, kind), [])]
        if ab:
            print("  in-process A/B, the walk's %-10s %s" % (what, mm(ab)))
EOF
