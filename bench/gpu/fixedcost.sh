#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What an always-on stage-1 job costs the programs clusters run, through ffmd (docs/OVERHEAD.md,
# "The fixed price per process"): plain (no job) against a stage-1 job with ffmd's default
# config (adaptive sampling on), interleaved in pairs whose order flips every pair, for three
# workloads:
#   cpp     one 2-3 s C++ program at about 2k syncs/s (tests/workloads/sync_rate, unpaced);
#           its whole process and its loop (LOOP_S) are timed
#   short   a workflow of --short N (default 200) short CUDA processes run one after the other
#           in one job (sync_rate, 40 iterations each: CUDA's start-up and a few syncs); the
#           batch is timed, the cost per process is the paired difference / N
#   torch   a PyTorch training loop (tests/gpu/torch_item.py) timed as a whole process, from
#           the interpreter's start, and inside (WALL_S, its loop)
# OUT gets times.tsv (workload, mode, pair, whole_s, loop_s), every run's output, ffmd's log,
# `ffmctl status --json` after each job, and summary.md: per workload the medians and minimums
# of each mode, the median of the paired differences with a 90% bootstrap interval, and the
# cost per process; then what ffmd says it spent: processes held and traced by the bridge, and
# per CUDA process the time held and ffmd's attaches (`overhead` of each job's status).
#
#   O=DIR bench/gpu/fixedcost.sh [--sim] [--pairs N] [--short N] [--only W[,W]] OUT
#
# DIR (default .dev/gpu) is what bench/gpu/pack.sh built. --sim: the simulated driver of a build
# directory (O=build), the harness end to end without a GPU (not the GPU's numbers). torch is
# skipped where Python has no torch with CUDA. Needs root (BPF, cgroups). Judges against the
# goal of issue 40: at most 0.1% of the steady state and 5 ms per CUDA process.
set -u
sim=0 pairs=10 nshort=200 only=cpp,short,torch
while [ $# -gt 1 ]; do
	case $1 in
	--sim) sim=1; shift ;;
	--pairs) pairs=$2; shift 2 ;;
	--short) nshort=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# = 1 ] || { echo "usage: $0 [--sim] [--pairs N] [--short N] [--only W,..] OUT" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$(dirname "$0")/../.." || exit 1
O=$(cd "${O:-.dev/gpu}" && pwd) || exit 1
TORCH_PY=$PWD/tests/gpu/torch_item.py
. bench/gpu/ffmd_lib.sh
[ -x "$O/workloads/sync_rate" ] || { echo "no $O/workloads/sync_rate (bench/gpu/pack.sh)" >&2; exit 1; }
ffmd_begin "$sim" gpu-fixedcost
# ffmd's default: adaptive stage 1 (ffmd_begin writes sample_budget = 0, every wait traced)
: >"$S/ffmd.conf" && kill -HUP "$FFMD" && sleep 0.5
want() { case ",$only," in *",$1,"*) return 0 ;; esac; return 1; }
now() { date +%s.%N; }

CPP_ARGS="--kernel-us 5 --cpu-us 390 --iters 6000"
SHORT_ARGS="--kernel-us 5 --cpu-us 100 --iters 40"
TORCH_ARGS="--steps 400 --warmup 20 --width 1024"
[ "$sim" = 1 ] && CPP_ARGS="--kernel-us 5 --cpu-us 390 --iters 3000"

short_batch() { # N outputs to FILE
	local i
	for i in $(seq "$1"); do "$O/workloads/sync_rate" $SHORT_ARGS || return 1; done >"$2" 2>&1
}

# One timed run: plain, or inside a stage-1 job of ffmd in a cgroup of its own.
one() { # one WORKLOAD MODE PAIR
	local w=$1 m=$2 p=$3 id=$1-$2-$3 t0 t1 cmd
	case $w in
	cpp) cmd="$O/workloads/sync_rate $CPP_ARGS" ;;
	short) cmd="short_batch $nshort $OUT/$id.batch" ;;
	torch) cmd="python3 $TORCH_PY $TORCH_ARGS" ;;
	esac
	if [ "$m" = stage1 ]; then
		mkdir -p "$CG/$id"
		ctl job start "$id" --key "bench-$w" --stage 1 --cgroup "$CG/$id" >/dev/null || return 1
		t0=$(now)
		(echo $BASHPID >"$CG/$id/cgroup.procs" && eval "$cmd") >"$OUT/$id.out" 2>&1 </dev/null
		t1=$(now)
		ctl status --json >"$OUT/$id.status.json" 2>/dev/null
		ctl job end "$id" >/dev/null
		rmdir "$CG/$id" 2>/dev/null
	else
		t0=$(now)
		eval "$cmd" >"$OUT/$id.out" 2>&1 </dev/null
		t1=$(now)
	fi
	printf '%s\t%s\t%s\t%s\t%s\n' "$w" "$m" "$p" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')" \
		"$(awk '/^LOOP_S|^WALL_S/ { print $2; exit }' "$OUT/$id.out")" >>"$OUT/times.tsv"
}

if want torch && ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "torch: no PyTorch with CUDA here, skipped" >"$OUT/torch-skipped.txt"
	only=${only//torch/}
fi
printf 'workload\tmode\tpair\twhole_s\tloop_s\n' >"$OUT/times.tsv"
t0=$(date +%s)
# Warm-up: the driver's calibration (cached per build-id) and the page cache, untimed.
ctl job start warm --key bench-warm --stage 1 >/dev/null 2>&1 && ctl job end warm >/dev/null 2>&1
"$O/workloads/sync_rate" $SHORT_ARGS >/dev/null 2>&1
for w in cpp short torch; do
	want "$w" || continue
	one "$w" stage1 0 # the key's first run, and its warm-up: not counted
	for p in $(seq "$pairs"); do
		if [ $((p % 2)) = 1 ]; then one "$w" plain "$p"; one "$w" stage1 "$p"
		else one "$w" stage1 "$p"; one "$w" plain "$p"; fi
	done
done
echo "$(($(date +%s) - t0)) s" >"$OUT/elapsed.txt"

python3 - "$OUT" "$nshort" "$sim" <<'PY' >"$OUT/summary.md"
import csv, json, glob, os, random, statistics as st, sys
out, nshort, sim = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
t = {}
for row in csv.DictReader(open(os.path.join(out, "times.tsv")), delimiter="\t"):
    if row["pair"] == "0":
        continue
    for col in ("whole_s", "loop_s"):
        if row[col]:
            t.setdefault((row["workload"], col), {}).setdefault(int(row["pair"]), {})[row["mode"]] = float(row[col])

def boot(d, n=4000):
    random.seed(1)
    m = sorted(st.median(random.choices(d, k=len(d))) for _ in range(n))
    return m[int(0.05 * n)], m[int(0.95 * n)]

print("# The fixed price of always-on stage 1, through ffmd%s\n" % (" (SIMULATED DRIVER: not the GPU's numbers)" if sim else ""))
print("Plain vs a stage-1 job (ffmd's default config), interleaved pairs; ran %s.\n" % open(os.path.join(out, "elapsed.txt")).read().strip())
print("| workload | measure | pairs | plain median s | stage 1 median s | plain min s | stage 1 min s | overhead (medians) | overhead (minimums) | paired diff median (90% CI) | per process |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (w, col), by in sorted(t.items()):
    ps = [v for v in by.values() if "plain" in v and "stage1" in v]
    if not ps:
        continue
    a, b = [v["plain"] for v in ps], [v["stage1"] for v in ps]
    d = [v["stage1"] - v["plain"] for v in ps]
    lo, hi = boot(d)
    per = "%.2f ms" % (st.median(d) / nshort * 1e3) if w == "short" and col == "whole_s" else (
        "%.2f ms" % (st.median(d) * 1e3) if col == "whole_s" else "")
    print("| %s | %s | %d | %.4f | %.4f | %.4f | %.4f | %+.3f%% | %+.3f%% | %+.4f s (%+.4f, %+.4f) | %s |" % (
        w, "whole process" if col == "whole_s" and w != "short" else ("batch of %d" % nshort if col == "whole_s" else "loop"),
        len(ps), st.median(a), st.median(b), min(a), min(b), (st.median(b) / st.median(a) - 1) * 100,
        (min(b) / min(a) - 1) * 100, st.median(d), lo, hi, per))
print("\n## What ffmd says (status after each stage-1 job, summed over the timed jobs)\n")
tot, parts, jobs = {}, {}, {}
for f in glob.glob(os.path.join(out, "*-stage1-*.status.json")):
    if f.endswith("-stage1-0.status.json"):
        continue  # the key's first run, not timed
    try:
        s = json.load(open(f))
    except Exception:
        continue
    w = os.path.basename(f).split("-stage1-")[0]
    for j in s.get("jobs", []):
        jobs[w] = jobs.get(w, 0) + 1
        for k in ("processes_seen", "processes_held", "processes_not_held", "processes_bridged"):
            if isinstance(j.get(k), (int, float)):
                tot.setdefault(w, {}).setdefault(k, 0)
                tot[w][k] += j[k]
        for k, v in ((j.get("overhead") or {}).get("parts") or {}).items():
            a = parts.setdefault(w, {}).setdefault(k, [0.0, 0])
            a[0] += v.get("ms", 0)
            a[1] += v.get("count", 0)
for w, v in sorted(tot.items()):
    print("- %s: %s" % (w, ", ".join("%s %d" % kv for kv in sorted(v.items()))))
# Per CUDA process: a short batch has nshort of them, the others one (the shell and seq of a
# batch are job processes too, but map no driver).
print("\n| workload | jobs | CUDA processes | held ms (count) | per process | attach ms (count) | per process | bpf ms | waits traced ms |")
print("|---|---|---|---|---|---|---|---|---|")
for w, v in sorted(parts.items()):
    n = jobs[w] * (nshort if w == "short" else 1)
    g = lambda k: v.get(k, [0.0, 0])
    print("| %s | %d | %d | %.1f (%d) | %.2f ms | %.1f (%d) | %.2f ms | %.1f | %.1f |" % (
        w, jobs[w], n, g("held")[0], g("held")[1], g("held")[0] / n, g("attach")[0], g("attach")[1],
        g("attach")[0] / n, g("bpf")[0], g("waits_full")[0] + g("waits_sampled")[0]))
print("\nGoal (issue 40): at most 0.1% of the steady state and 5 ms per CUDA process.")
PY
cat "$OUT/summary.md"
