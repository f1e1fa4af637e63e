#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Every reader of a state directory shared by the nodes of a cluster (TAP): the stores sit in
# <state>/nodes/<node>/keys/ (store/ffm_store.h), one per node, and report, diff, export and
# jobs all find them there; report alone used to, export said "no store holds it" and jobs
# "no jobs recorded". Synthetic stores (ffm-synth) of job mj on gpu01 and gpu02, its rerun
# mj2 on both, and job solo on gpu01 only:
#   - report merges mj's nodes; diff compares mj and mj2 over both nodes;
#   - export of solo writes its one node's trace; export of mj asks for --node and, given one,
#     writes only that node's processes; an unknown --node is a usage error naming the nodes;
#   - jobs lists every job of every node (text with a NODE column, JSON with each row's node),
#     then each job's command; in the single-node layout no NODE column;
#   - a job no store holds still gets "no store holds it" from each verb.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh # TAP helpers, B, T
FFMCTL=$B/ffmctl
SYNTH=$B/tests/ffm-synth

if [ ! -x "$FFMCTL" ] || [ ! -x "$SYNTH" ] || ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP needs $FFMCTL, $SYNTH (make) and python3"
	exit 77
fi
S=$T/state

synth() { "$SYNTH" --scenarios unnecessary "$@" >/dev/null ||
	{ echo "Bail out! ffm-synth $*"; exit 1; }; }
mkdir -p "$S/nodes"
synth --state "$S/nodes/gpu01" --node gpu01 --key k1 --job mj --iters 100 --tgid 100
synth --state "$S/nodes/gpu02" --node gpu02 --key k1 --job mj --iters 50 --tgid 200
synth --state "$S/nodes/gpu01" --node gpu01 --key k1 --job mj2 --iters 40 --tgid 101 --stages 1
synth --state "$S/nodes/gpu02" --node gpu02 --key k1 --job mj2 --iters 20 --tgid 201 --stages 1
synth --state "$S/nodes/gpu01" --node gpu01 --key k2 --job solo --iters 10 --tgid 300 --stages 2
ctl() { "$FFMCTL" --state-dir "$S" "$@"; }

# --- report and diff ----------------------------------------------------------------------------
if ctl report mj --json >"$T/r.json" 2>"$T/err" && python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert [nd["node"] for nd in r["nodes"]] == ["gpu01", "gpu02"], r["nodes"]
assert r["problems"][0]["count"] == 150' "$T/r.json" 2>&1 | diag; then
	ok "report merges the job's two nodes"
else
	notok "report of a job on two nodes"; diag <"$T/err"
fi
if ctl diff mj mj2 --json >"$T/d.json" 2>"$T/err" && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["stage"] == 1 and d["actual_s"] > 0, d' "$T/d.json" 2>&1 | diag; then
	ok "diff compares two jobs of two nodes"
else
	notok "diff of jobs on two nodes"; diag <"$T/err"
fi

# --- export -------------------------------------------------------------------------------------
# pids PID...: the trace at $T/t.json has the processes PID... and no other (args.pid: the
# trace's own pid is the run).
pids() {
	python3 - "$T/t.json" "$@" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
got = sorted({e["args"]["pid"] for e in t["traceEvents"] if e.get("ph") == "X" and "pid" in e["args"]})
want = sorted(int(p) for p in sys.argv[2:])
assert got == want, f"pids {got}, want {want}"
EOF
}
if ctl export solo --format chrome-trace -o "$T/t.json" 2>"$T/err" && pids 300 2>&1 | diag; then
	ok "export of a job on one node of the shared directory"
else
	notok "export of a job in nodes/gpu01/keys"; diag <"$T/err"
fi
out=$(ctl export mj --format chrome-trace -o "$T/t.json" 2>&1); rc=$?
if [ $rc = 2 ] && [[ $out == *"ran on 2 nodes (gpu01, gpu02)"*"--node"* ]] && [ ! -e "$T/t.json.tmp" ]; then
	ok "export of a job on two nodes: exit 2, names them, asks for --node"
else
	notok "export of a job on two nodes without --node (rc $rc)"; echo "$out" | diag
fi
if ctl export mj --node gpu02 --format chrome-trace -o "$T/t.json" 2>"$T/err" && pids 200 2>&1 | diag; then
	ok "export --node gpu02: that node's processes only"
else
	notok "export --node gpu02"; diag <"$T/err"
fi
if ctl export mj --node gpu01 --format hatchet -o "$T/h.json" 2>"$T/err" &&
	python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))' "$T/h.json"; then
	ok "export --node gpu01 --format hatchet"
else
	notok "export --node gpu01 --format hatchet"; diag <"$T/err"
fi
out=$(ctl export mj --node gpu09 --format hatchet -o "$T/h9.json" 2>&1); rc=$?
if [ $rc = 2 ] && [[ $out == *"did not run on a node 'gpu09' (its nodes: gpu01, gpu02)"* ]]; then
	ok "export --node of a node the job did not run on: exit 2, names its nodes"
else
	notok "export --node gpu09 (rc $rc)"; echo "$out" | diag
fi

# --- jobs ---------------------------------------------------------------------------------------
if ctl jobs --json >"$T/j.json" 2>"$T/err" && python3 -c '
import json, sys
rows = sorted((j["job"], j["node"], j["key"]) for j in json.load(open(sys.argv[1])))
want = [("mj", "gpu01", "k1"), ("mj", "gpu02", "k1"), ("mj2", "gpu01", "k1"),
        ("mj2", "gpu02", "k1"), ("solo", "gpu01", "k2")]
assert rows == want, rows' "$T/j.json" 2>&1 | diag; then
	ok "jobs --json: every job of every node, with its node"
else
	notok "jobs --json on a shared state directory"; diag <"$T/err"
fi
ctl jobs >"$T/j.txt" 2>&1
if head -n 1 "$T/j.txt" | grep -q ' STARTED  *NODE  *COMMAND$' &&
	[ "$(grep -c ' gpu0[12]  *[^ ]*$' "$T/j.txt")" = 5 ]; then
	ok "jobs: a NODE column, one row per job and node"
else
	notok "jobs text on a shared state directory"; diag <"$T/j.txt"
fi
synth --state "$T/single" --key k1 --job one --iters 5 --stages 1
"$FFMCTL" --state-dir "$T/single" jobs >"$T/j1.txt" 2>&1
if head -n 1 "$T/j1.txt" | grep -q ' STARTED  *COMMAND$' && [ "$(wc -l <"$T/j1.txt")" = 2 ]; then
	ok "jobs in the single-node layout: no NODE column"
else
	notok "jobs text in the single-node layout"; diag <"$T/j1.txt"
fi

# --- a job no store holds -----------------------------------------------------------------------
for verb in report "diff nosuch mj" "export --format hatchet" ; do
	set -- $verb
	v=$1; shift
	[ "$v" = diff ] && args=("$@") || args=(nosuch "$@")
	out=$(ctl "$v" "${args[@]}" 2>&1); rc=$?
	if [ $rc = 1 ] && [ "$out" = "ffmctl $v: no job 'nosuch' under $S: no store holds it (ffmctl jobs lists the recorded ones; --state-dir reads another directory)" ]; then
		ok "$v of a job no node holds: no store holds it"
	else
		notok "$v of a job no node holds (rc $rc)"; echo "$out" | diag
	fi
done

# jobs' columns are as wide as the longest job id and key: a long one does not shift the rest.
long=nightly-cfd-run-with-a-very-long-job-id-0001
"$SYNTH" --scenarios unnecessary --state "$T/wide" --key "key-that-is-longer-than-twenty" --job "$long" \
	--iters 5 --stages 1 >/dev/null
out=$("$FFMCTL" --state-dir "$T/wide" jobs 2>&1)
if python3 -c '
import re, sys
hdr, row = sys.argv[1].splitlines()[:2]
starts = lambda l: [m.start() for m in re.finditer(r"\S+", l)]
assert starts(hdr)[:3] == starts(row)[:3], (hdr, row)' "$out" 2>/dev/null; then
	ok "jobs: columns fit a long job id and key (KEY and OWNER aligned)"
else
	notok "jobs: columns fit a long job id and key"; echo "$out" | diag
fi

echo "1..$n"
[ "$fails" = 0 ]
