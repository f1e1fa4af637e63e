#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `ffmctl export` and `ffmctl report` give the same verdict for every sync and transfer: both
# take them from the analysis (analysis/ffm_analysis.h). On synthetic stores (tests/report/
# synth.h) the problems the export paints red in the report's timeline run are, per call site and
# type, exactly those the report counts; a sync used at once ("control": first use 2 µs after
# it) is never called misplaced, in any run, and the planted misplaced one always is.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh # TAP helpers, B, T
FFMCTL=$B/ffmctl
SYNTH=$B/tests/ffm-synth
if [ ! -x "$FFMCTL" ] || [ ! -x "$SYNTH" ] || ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP needs $FFMCTL, $SYNTH (make) and python3"
	exit 77
fi

# compare.py REPORT TRACE [CONTROL_LINE MISPLACED_LINE]: per (line, type) in the timeline run,
# the report's counts == the export's red events; then the control/misplaced lines in every run.
cat >"$T/compare.py" <<'EOF'
import collections, json, sys
rep = json.load(open(sys.argv[1]))
trace = json.load(open(sys.argv[2]))
timeline = [s["run"] for s in rep["stages"] if s["used_as"] == "timeline"]
assert len(timeline) == 1, "one timeline run: %r" % rep["stages"]
timeline = timeline[0]
want = collections.Counter()
for p in rep["problems"]:
    for t, c in p["types"].items():
        want[(p["call_site"]["line"], t)] += c
names = {"unnecessary synchronization": "unnecessary_sync",
         "misplaced synchronization": "misplaced_sync", "duplicate transfer": "duplicate_transfer"}
got = collections.Counter()
per_run = collections.defaultdict(collections.Counter)
for e in trace["traceEvents"]:
    if e.get("ph") != "X":
        continue
    a = e["args"]
    text = a.get("problem", "")
    assert bool(text) == (e.get("cname") == "terrible"), "red iff a problem: %r" % e
    line = int(a.get("call_site", "? (app.c:0)").rsplit(":", 1)[1].rstrip(")"))
    kinds = [t for k, t in names.items() if text.startswith(k)]
    if "also a duplicate transfer" in text:
        kinds.append("duplicate_transfer")
    if e["name"] == "cuCtxSynchronize":
        per_run[a["run"]][(line, kinds[0] if kinds else "required")] += 1
    if a["run"] == timeline:
        for k in kinds:
            got[(line, k)] += 1
assert sum(want.values()) > 0, "the report has problems"
assert got == want, "export %r != report %r" % (sorted(got.items()), sorted(want.items()))
if len(sys.argv) > 4:
    control, misplaced = int(sys.argv[3]), int(sys.argv[4])
    for run, c in per_run.items():
        assert not any(l == control and k != "required" for (l, k) in c), \
            "run %d: a control sync called a problem: %r" % (run, c)
        if any(l == misplaced for (l, k) in c) and run != min(per_run):  # stage 1: waits only
            assert all(k == "misplaced_sync" for (l, k) in c if l == misplaced), \
                "run %d: misplaced sync not marked: %r" % (run, c)
print("# %d problems in the timeline, the same in both" % sum(got.values()))
EOF

# The regression: control syncs used 2 µs after them are not misplaced, in the export too.
"$SYNTH" --state "$T/s" --key k1 --job cm --scenarios control,misplaced --iters 50 >/dev/null
"$FFMCTL" --state-dir "$T/s" report cm --json >"$T/cm.json"
"$FFMCTL" --state-dir "$T/s" export cm --format chrome-trace -o "$T/cm.trace"
check "control + misplaced: export and report agree on every sync, control never misplaced" \
	python3 "$T/compare.py" "$T/cm.json" "$T/cm.trace" 41 22

# Every scenario (unnecessary, misplaced, duplicate, control, sequence) on two threads.
"$SYNTH" --state "$T/s" --key k2 --job all --threads 2 --iters 30 \
	--scenarios unnecessary,misplaced,dup,control,sequence >/dev/null
"$FFMCTL" --state-dir "$T/s" report all --json --top 1000 >"$T/all.json"
"$FFMCTL" --state-dir "$T/s" export all --format chrome-trace -o "$T/all.trace"
check "every scenario: export and report agree on every sync and transfer" \
	python3 "$T/compare.py" "$T/all.json" "$T/all.trace" 41 22

# Stages 1-3 only (no first-use run): delays from stage 3, still one verdict.
"$SYNTH" --state "$T/s" --key k3 --job s3 --stages 3 --iters 40 \
	--scenarios control,misplaced,dup >/dev/null
"$FFMCTL" --state-dir "$T/s" report s3 --json >"$T/s3.json"
"$FFMCTL" --state-dir "$T/s" export s3 --format chrome-trace -o "$T/s3.trace"
check "stages 1-3: export and report agree" python3 "$T/compare.py" "$T/s3.json" "$T/s3.trace" 41 22

echo "1..$n"
finish
