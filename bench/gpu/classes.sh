#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The classes of program whose estimates used to miss (host reads every iteration, host threads
# that wait side by side), and the controls, on a real GPU: per variant, the plain and --fixed
# runs interleaved (--reps each, default 5), the saving as the difference of the medians of
# LOOP_S (WALL_S less the CUDA context's creation, which the fix does not touch and which moves
# by tens of ms from one process to the next; WALL_S where a run did not print it), and the
# report of `ffmctl profile --stages 1-4`: the benefit of the planted line and the headline.
# With --monitor M the profile runs before the pairs and a monitoring run of its key
# (`ffmctl profile --next`) beside each of the first M pairs; the report is the last one's, as
# a job that runs again and again gets it (tests/report/test_accuracy.sh, FFM_ACCURACY_MONITOR).
# Writes OUT/classes.md (the table) and the raw outputs (NAME.runs: every run's output).
#
#   O=DIR bench/gpu/classes.sh [--reps N] [--monitor M] OUT
#
# DIR is what bench/gpu/pack.sh built (a static ffmctl); the CUDA-runtime program is built here
# with this machine's nvcc and cuBLAS. Needs root (BPF).
set -u
reps=5 mon=0
while [ $# -gt 1 ]; do
	case $1 in
	--reps) reps=$2; shift 2 ;;
	--monitor) mon=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# = 1 ] || { echo "usage: $0 [--reps N] [--monitor M] OUT" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$(dirname "$0")/../.." || exit 1
. bench/gpu/runs_lib.sh
gpu_setup classes
[ -z "$SIMULATED" ] || { echo "$0: no GPU: the CUDA runtime cannot run on the simulated driver" \
	"(bench/gpu/variants.sh runs the harness there)" >&2; exit 1; }
BIN=$S/cudart_problems
: >"$OUT/build.txt"
build_cuda "$SRC/cudart_problems.cu" "$BIN"

# name | arguments
VARIANTS=${FFM_CLASSES:-"host_read_memcpy|--problem host_read_memcpy
host_read_memcpy_k1000_c300|--problem host_read_memcpy --kernel-us 1000 --cpu-us 300
host_read_cublas|--problem host_read_cublas
host_read_thrust|--problem host_read_thrust
threads4|--problem threads --threads 4
threads8_k1000_c500|--problem threads --threads 8 --kernel-us 1000 --cpu-us 500
threads2|--problem threads --threads 2
threads4_shared|--problem threads --threads 4 --shared
threads16|--problem threads --threads 16
pool4|--problem pool --threads 4
pool16_k1000_c500|--problem pool --threads 16 --kernel-us 1000 --cpu-us 500
unnecessary_sync|--problem unnecessary_sync
control|--problem control"}

# profile NAME ARGS...: stages 1-4 of key cls-NAME
profile() {
	local n=$1
	shift
	profile_run "cls-$n" "cls-$n" "$BIN" "$@"
}

echo "$VARIANTS" | while IFS='|' read -r name args; do
	[ -n "$name" ] || continue
	: >"$OUT/$name.times"
	: >"$OUT/$name.runs"
	: >"$OUT/$name.profile"
	job=cls-$name
	# shellcheck disable=SC2086 # args is a list
	[ "$mon" -gt 0 ] && profile "$name" $args
	for i in $(seq "$reps"); do
		# shellcheck disable=SC2086
		echo "plain $(wall plain "$BIN" $args)" >>"$OUT/$name.times"
		# shellcheck disable=SC2086
		echo "fixed $(wall fixed "$BIN" $args --fixed)" >>"$OUT/$name.times"
		[ "$i" -le "$mon" ] || continue
		# shellcheck disable=SC2086
		"$O/ffmctl" --state-dir "$S/st" profile --quiet --next --key "cls-$name" \
			--job-id "cls-$name-m$i" -- "$BIN" $args >>"$OUT/$name.profile" 2>&1 </dev/null &&
			job=cls-$name-m$i
	done
	# shellcheck disable=SC2086
	[ "$mon" -gt 0 ] || profile "$name" $args
	report_job "$job"
done

python3 - "$OUT" "$SRC/cudart_problems.cu" <<'PY' >"$OUT/classes.md"
import json, os, re, statistics, sys
out, src = sys.argv[1], sys.argv[2]
plants = {}
for n, l in enumerate(open(src), 1):
    m = re.search(r"FFM-PLANT: cudart (\w+)", l)
    if m:
        plants[m.group(1)] = n
print("| variant | plain (s) | fixed (s) | saved (s) | ffm: planted line (s) | ffm: headline (s) | error (line) | error (headline) | top problem |")
print("|---|---|---|---|---|---|---|---|---|")
for f in sorted(os.listdir(out)):
    if not f.endswith(".times"):
        continue
    name = f[:-6]
    t = {"plain": [], "fixed": []}
    for line in open(os.path.join(out, f)):
        k, *v = line.split()
        if v:
            t[k].append(float(v[0]))
    loop = {"plain": [], "fixed": []}
    for line in open(os.path.join(out, name + ".runs")):
        k, *v = line.split()
        if len(v) == 2 and v[0] == "LOOP_S" and k in loop:
            loop[k].append(float(v[1]))
    if all(len(loop[k]) == len(t[k]) for k in t):
        t = loop
    try:
        r = json.load(open(os.path.join(out, name + ".json")))
    except Exception:
        print("| %s | report failed |" % name)
        continue
    mp, mf = statistics.median(t["plain"]), statistics.median(t["fixed"])
    saved = mp - mf
    prob = next((p for p in plants if name.startswith(p)), None)
    line = plants.get(prob)
    est = sum(p["benefit_s"] for p in r.get("problems", [])
              if line and p["call_site"]["file"].endswith("cudart_problems.cu") and p["call_site"]["line"] == line)
    head = r.get("recoverable_s") or 0
    top = r["problems"][0] if r.get("problems") else None
    tops = "%s at %s:%s" % (top["type"], os.path.basename(top["call_site"]["file"]), top["call_site"]["line"]) if top else "none"
    err = lambda e: "%+.0f%%" % ((e - saved) / saved * 100) if saved > 0.01 else "n/a"
    print("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %s | %s |" % (name, mp, mf, saved, est, head, err(est), err(head), tops))
PY
cat "$OUT/classes.md"
