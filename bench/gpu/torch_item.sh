#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The PyTorch host-read check on the GPU node (docs/RESULTS.md, "PyTorch"): tests/gpu/
# torch_item.py run plain and --fixed (loss kept on the GPU), REPS times each, interleaved;
# the saving is the difference of the medians of the timed loop (WALL_S), also of the
# minimums. Then `ffmctl profile --stages 1-4` of the plain program; its estimate for the
# .item() line (the FFM-PLANT "torch per-step sync" line) is scaled by steps / (steps +
# warmup), the profile covering the warm-up steps too. Prints a markdown row and the report's
# top problems. With --ab BLOCK it also runs REPS processes of torch_item.py --ab BLOCK (plain
# and fixed blocks alternating inside one process, the steady measure of the saving) and
# compares the estimate with the median of their savings per step, times the steps. The last
# column is the wait that stage 2's probes hid at the removed reads (analysis/hidden.c), which
# the estimate includes.
#   bench/gpu/torch_item.sh [--reps N] [--ab BLOCK] OUTDIR [torch_item.py options...]
# Uses the static package in $O (default .dev/gpu: bench/gpu/pack.sh).
set -u
cd "$(dirname "$0")/../.." || exit 2
O=${O:-.dev/gpu}
REPS=5
AB=0
while :; do
	case ${1:-} in
	--reps) REPS=$2; shift 2 ;;
	--ab) AB=$2; shift 2 ;;
	*) break ;;
	esac
done
OUT=${1:?usage: $0 [--reps N] [--ab BLOCK] OUTDIR [torch_item.py options]}
shift
mkdir -p "$OUT"
prog=tests/gpu/torch_item.py
wall() { python3 "$prog" "$@" 2>/dev/null | sed -n 's/^WALL_S //p'; }
: >"$OUT/times"
for _ in $(seq "$REPS"); do
	echo "plain $(wall "$@")" >>"$OUT/times"
	echo "fixed $(wall --fixed "$@")" >>"$OUT/times"
	[ "$AB" -gt 0 ] && echo "ab $(python3 "$prog" --ab "$AB" "$@" 2>/dev/null | sed -n 's/^AB_SAVED_PER_STEP //p')" >>"$OUT/times"
done
timeout 300 "$O/ffmctl" --state-dir "$OUT/state" profile --quiet --stages 1-4 --key torch --job-id torch -- \
	python3 "$prog" "$@" >"$OUT/profile.log" 2>&1 || { echo "profile failed"; tail "$OUT/profile.log"; exit 1; }
"$O/ffmctl" --state-dir "$OUT/state" report torch --json --top 1000 >"$OUT/report.json"
"$O/ffmctl" --state-dir "$OUT/state" report torch --top 4 >"$OUT/report.txt"
python3 - "$OUT/times" "$OUT/report.json" "$prog" "$*" <<'PY'
import json, re, statistics as st, sys
times, rep, prog, args = sys.argv[1:5]
t = {"plain": [], "fixed": [], "ab": []}
for l in open(times):
    k, *v = l.split()
    if v:
        t[k].append(float(v[0]))
steps = int(re.search(r"--steps (\d+)", args).group(1)) if "--steps" in args else 1000
warm = int(re.search(r"--warmup (\d+)", args).group(1)) if "--warmup" in args else 20
line = next(n for n, l in enumerate(open(prog), 1) if "FFM-PLANT: torch per-step" in l)
r = json.load(open(rep))
est = sum(p["benefit_s"] for p in r["problems"]
          if p["call_site"].get("file", "").endswith("torch_item.py") and p["call_site"].get("line") == line)
est *= steps / (steps + warm)
med = st.median(t["plain"]) - st.median(t["fixed"])
mn = min(t["plain"]) - min(t["fixed"])
q = r["data_quality"]
print("| config | plain (median) | fixed (median) | saved (medians / minimums) | ffm: .item() line | error (medians / minimums) | library CPU | hidden waits removed |")
print("|---|---|---|---|---|---|---|---|")
print("| %s | %.3f s | %.3f s | %.3f / %.3f s | %.3f s | %+.0f%% / %+.0f%% | %.3f s | %.3f s |" % (
    args or "default", st.median(t["plain"]), st.median(t["fixed"]), med, mn, est,
    (est - med) / med * 100 if med > 0 else float("inf"), (est - mn) / mn * 100 if mn > 0 else float("inf"),
    q.get("read_library_cpu_s", 0), q.get("hidden_wait_removed_s", 0)))
if t["ab"]:
    ab = st.median(t["ab"]) * steps
    print()
    print("In-process A/B (%d processes, blocks alternating): saved %.3f s (per step: %s us); "
          "ffm %.3f s, error %+.0f%%" % (len(t["ab"]), ab, " ".join("%.1f" % (v * 1e6) for v in t["ab"]),
                                           est, (est - ab) / ab * 100 if ab > 0 else float("inf")))
PY
sed -n '/^problems/,/^time spent/p' "$OUT/report.txt" | head -n 12
