#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Does adaptive stage 1 still find what full tracing finds? Every workload of tests/workloads
# (but hang) runs as a stage-1 job through ffmd twice, interleaved per workload: every wait
# traced (sample_budget = 0), then adaptive (sample_budget = 0.1%, the default). From the two
# reports: every call site holding at least 1% of the full run's wait time must be reported by
# the adaptive run, with a wait total within 10% of the full run's. Also sync_rate at about
# 2.5k syncs/s (sampled for most of its run wherever the budget applies).
#
#   O=DIR bench/gpu/completeness.sh [--sim] [--args "WORKLOAD ARGS"] OUT
#
# --args: given to every workload (e.g. "--iters 4000": longer runs, so that more of each is
# sampled; default none). DIR (default .dev/gpu) is what bench/gpu/pack.sh built; --sim: the
# simulated driver of a build directory (O=build). OUT gets each run's output and report and
# completeness.md: per workload and call site, the two totals, their difference, the estimate's
# +- and whether it was sampled; the last line says how many sites passed. Exit 0 when all did.
# Needs root (BPF, cgroups).
set -u
sim=0 args=""
while [ $# -gt 1 ]; do
	case $1 in
	--sim) sim=1; shift ;;
	--args) args=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# = 1 ] || { echo "usage: $0 [--sim] [--args \"WORKLOAD ARGS\"] OUT" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$(dirname "$0")/../.." || exit 1
O=$(cd "${O:-.dev/gpu}" && pwd) || exit 1
. bench/gpu/ffmd_lib.sh
ffmd_begin $sim gpu-completeness

WLS="unnecessary_sync misplaced_sync free_in_loop dup_transfer pageable_async managed_memset
sequence templated control host_read threads"
: >"$OUT/runs.txt"
for w in $WLS sync_rate; do
	[ -x "$O/workloads/$w" ] || { echo "$w: not built, skipped" >>"$OUT/runs.txt"; continue; }
	a=$args
	[ $w = sync_rate ] && a="--kernel-us 5 --cpu-us 390 --iters 8000"
	for m in full adaptive; do
		if [ $m = full ]; then set_budget 0; else set_budget 0.1%; fi || exit 1
		# shellcheck disable=SC2086
		job_run "$w-$m" "complete-$w-$m" "$O/workloads/$w" $a </dev/null
		echo "$w $m: $(grep -E '^(WALL_S|SYNCS)' "$OUT/$w-$m.out" | tr '\n' ' ')" >>"$OUT/runs.txt"
	done
done

python3 - "$OUT" "$WLS sync_rate" "$sim" <<'PY' >"$OUT/completeness.md"
import json, os, sys
out, wls, sim = sys.argv[1], sys.argv[2].split(), sys.argv[3] == "1"

def sites(path):
    try:
        r = json.load(open(path))
    except Exception:
        return None
    s = {}
    for c in r.get("call_sites", []):
        cs = c["call_site"]
        s[(c["api"], cs.get("function"), cs.get("file"), cs.get("line"))] = c
    return s

print("# Adaptive stage 1 completeness: call sites >= 1%% of the waits, totals within 10%%%s\n"
      % (" (SIMULATED DRIVER)" if sim else ""))
print("| workload | call site | waits full | waits adaptive | wait s full | wait s adaptive | diff | +- s | sampled | share | pass |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
ok = bad = 0
for w in wls:
    f, a = sites(os.path.join(out, w + "-full.json")), sites(os.path.join(out, w + "-adaptive.json"))
    if f is None or a is None:
        print("| %s | (no report) | | | | | | | | | no |" % w)
        bad += 1
        continue
    total = sum(c["wait_s"] for c in f.values()) or 1
    for k, c in sorted(f.items(), key=lambda kv: -kv[1]["wait_s"]):
        share = c["wait_s"] / total
        if share < 0.01:
            continue
        x = a.get(k)
        wa = x["wait_s"] if x else 0
        d = (wa - c["wait_s"]) / c["wait_s"] if c["wait_s"] else 0
        good = x is not None and abs(d) <= 0.10
        ok, bad = ok + good, bad + (not good)
        print("| %s | %s %s %s:%s | %d | %d | %.6f | %.6f | %+.1f%% | %s | %s | %.1f%% | %s |" % (
            w, k[0], k[1], os.path.basename(k[2] or "?"), k[3], c["count"], x["count"] if x else 0,
            c["wait_s"], wa, 100 * d,
            "%.6f" % x["wait_s_pm"] if x and "wait_s_pm" in x else "", "yes" if x and x.get("sampled") else "no",
            100 * share, "yes" if good else "NO"))
print("\n%d of %d call sites (>= 1%% of a workload's waits) found with totals within 10%%" % (ok, ok + bad))
PY
cat "$OUT/completeness.md"
grep -q "^\([0-9]*\) of \1 call sites" "$OUT/completeness.md"
