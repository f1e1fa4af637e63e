#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The PyTorch host-read check on the GPU node (docs/RESULTS.md, "PyTorch"): tests/gpu/
# torch_item.py run plain and --fixed (loss kept on the GPU), REPS times each, interleaved;
# the saving is the difference of the medians of the timed loop (WALL_S), also of the
# minimums. Then `ffmctl profile --stages 1-4` of the plain program; its estimate for the
# per-step read's line (.item() or the --read variant: the FFM-PLANT "torch per-step sync"
# lines) is scaled by steps / (steps + warmup), the profile covering the warm-up steps too.
# Prints a markdown row and the report's top problems. With --ab BLOCK it also runs REPS processes of torch_item.py --ab BLOCK (plain
# and fixed blocks alternating inside one process, the steady measure of the saving) and
# compares the estimate with the median of their savings per step, times the steps. The last
# column is the wait that stage 2's probes hid at the removed reads (analysis/hidden.c), which
# the estimate includes. With --monitor M the profile runs inside the loop instead, as a job
# that runs again and again meets ffm: stages 1-4 beside the first pair, then one monitoring
# run (stage 1) beside each of the next M pairs (M < N); the estimate is the report after the
# last of them (analysis/hidden.c reads every stage-1 run), and the row also gives the
# estimate after stages 1-4 alone. The row is followed by the saving's 90% interval (bootstrap
# of the plain and fixed runs): what REPS runs of this node can tell apart.
#   bench/gpu/torch_item.sh [--reps N] [--ab BLOCK] [--monitor M] OUTDIR [torch_item.py options...]
# Uses the static package in $O (default .dev/gpu: bench/gpu/pack.sh).
set -u
cd "$(dirname "$0")/../.." || exit 2
O=${O:-.dev/gpu}
REPS=5
AB=0
MON=0
while :; do
	case ${1:-} in
	--reps) REPS=$2; shift 2 ;;
	--ab) AB=$2; shift 2 ;;
	--monitor) MON=$2; shift 2 ;;
	*) break ;;
	esac
done
OUT=${1:?usage: $0 [--reps N] [--ab BLOCK] [--monitor M] OUTDIR [torch_item.py options]}
[ "$MON" -lt "$REPS" ] || { echo "--monitor wants fewer than --reps" >&2; exit 2; }
shift
mkdir -p "$OUT"
prog=tests/gpu/torch_item.py
wall() { python3 "$prog" "$@" 2>/dev/null | sed -n 's/^WALL_S //p'; }
: >"$OUT/times"
# profile STAGES JOB: one profile run (or several) of the key "torch"
profile() {
	timeout 300 "$O/ffmctl" --state-dir "$OUT/state" profile --quiet --stages "$1" --key torch \
		--job-id "$2" -- python3 "$prog" "${args[@]}" >>"$OUT/profile.log" 2>&1 ||
		{ echo "profile failed"; tail "$OUT/profile.log"; exit 1; }
}
args=("$@")
last=torch
for i in $(seq "$REPS"); do
	echo "plain $(wall "$@")" >>"$OUT/times"
	echo "fixed $(wall --fixed "$@")" >>"$OUT/times"
	[ "$AB" -gt 0 ] && echo "ab $(python3 "$prog" --ab "$AB" "$@" 2>/dev/null | sed -n 's/^AB_SAVED_PER_STEP //p')" >>"$OUT/times"
	if [ "$MON" -gt 0 ] && [ "$i" = 1 ]; then
		profile 1-4 torch
	elif [ "$MON" -gt 0 ] && [ "$i" -le $((MON + 1)) ]; then
		last=torch-m$((i - 1))
		profile 1 "$last"
	fi
done
[ "$MON" = 0 ] && profile 1-4 torch
"$O/ffmctl" --state-dir "$OUT/state" report torch --json --top 1000 >"$OUT/report-stages.json"
"$O/ffmctl" --state-dir "$OUT/state" report "$last" --json --top 1000 >"$OUT/report.json"
"$O/ffmctl" --state-dir "$OUT/state" report "$last" --top 4 >"$OUT/report.txt"
python3 - "$OUT/times" "$OUT/report.json" "$prog" "$*" "$OUT/report-stages.json" "$MON" <<'PY'
import json, random, re, statistics as st, sys
times, rep, prog, args, rep0, mon = sys.argv[1:7]
t = {"plain": [], "fixed": [], "ab": []}
for l in open(times):
    k, *v = l.split()
    if v:
        t[k].append(float(v[0]))
steps = int(re.search(r"--steps (\d+)", args).group(1)) if "--steps" in args else 1000
warm = int(re.search(r"--warmup (\d+)", args).group(1)) if "--warmup" in args else 20
# The per-step read's line: one per --read variant, only the one run has problems.
lines = {n for n, l in enumerate(open(prog), 1) if "FFM-PLANT: torch per-step" in l}
def estimate(r):
    return steps / (steps + warm) * sum(
        p["benefit_s"] for p in r["problems"]
        if p["call_site"].get("file", "").endswith("torch_item.py") and p["call_site"].get("line") in lines)
r = json.load(open(rep))
est = estimate(r)
med = st.median(t["plain"]) - st.median(t["fixed"])
mn = min(t["plain"]) - min(t["fixed"])
q = r["data_quality"]
print("| config | plain (median) | fixed (median) | saved (medians / minimums) | ffm: the read's line | error (medians / minimums) | library CPU | hidden waits removed |")
print("|---|---|---|---|---|---|---|---|")
print("| %s | %.3f s | %.3f s | %.3f / %.3f s | %.3f s | %+.0f%% / %+.0f%% | %.3f s | %.3f s |" % (
    args or "default", st.median(t["plain"]), st.median(t["fixed"]), med, mn, est,
    (est - med) / med * 100 if med > 0 else float("inf"), (est - mn) / mn * 100 if mn > 0 else float("inf"),
    q.get("read_library_cpu_s", 0), q.get("hidden_wait_removed_s", 0)))
# How well REPS runs of each pin the saving down: the 90% interval of the medians' difference
# over 2000 resamples of the plain and fixed runs (bootstrap, fixed seed).
rng = random.Random(1)
boot = sorted(st.median(rng.choices(t["plain"], k=len(t["plain"]))) -
              st.median(rng.choices(t["fixed"], k=len(t["fixed"]))) for _ in range(2000))
lo, hi = boot[100], boot[1899]
print()
print("The saving's 90%% interval (bootstrap of the %d + %d runs): %.3f to %.3f s; "
      "the estimate is %s it" % (len(t["plain"]), len(t["fixed"]), lo, hi,
                                 "inside" if lo <= est <= hi else "outside"))
if int(mon):
    est0 = estimate(json.load(open(rep0)))
    print()
    print("After stages 1-4 alone: ffm %.3f s, error %+.0f%% / %+.0f%%; with %s monitoring runs "
          "(%d stage-1 runs read): %.3f s" % (
              est0, (est0 - med) / med * 100 if med > 0 else float("inf"),
              (est0 - mn) / mn * 100 if mn > 0 else float("inf"), mon,
              q.get("hidden_wait_baseline_runs", 0), est))
if t["ab"]:
    ab = st.median(t["ab"]) * steps
    print()
    print("In-process A/B (%d processes, blocks alternating): saved %.3f s (per step: %s us); "
          "ffm %.3f s, error %+.0f%%" % (len(t["ab"]), ab, " ".join("%.1f" % (v * 1e6) for v in t["ab"]),
                                           est, (est - ab) / ab * 100 if ab > 0 else float("inf")))
PY
sed -n '/^problems/,/^time spent/p' "$OUT/report.txt" | head -n 12
