#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `ffmctl report` and `ffmctl diff` end to end on synthetic stores with known answers
# (tests/report/synth.h, written by $FFM_BUILD/tests/ffm-synth): the JSON parses and follows
# docs/report-json.md (required fields and their types, checked by python3), the numbers are
# the planted ones, the groupings and --subsequence work, a job on two nodes is merged with its
# load imbalance, a key without stage 3 says what is known, and bad arguments get exit 2.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
FFMCTL=$B/ffmctl
SYNTH=$B/tests/ffm-synth

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else notok "$name"; fi; }

if [ ! -x "$FFMCTL" ] || [ ! -x "$SYNTH" ] || ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP needs $FFMCTL, $SYNTH (make) and python3"
	exit 77
fi
T=$(mktemp -d /tmp/ffm-test-report-XXXXXX)
trap 'rm -rf "$T"' EXIT

# The schema: docs/schema/report.schema.json (docs/report-json.md, version 2), by
# tests/ops/check_json.py --strict (Debian's /usr/bin/python3 with python3-jsonschema: types
# exact, every documented field required, no undocumented one); then the planted values, as
# Python expressions over `r`.
CHECK_JSON=(/usr/bin/python3 tests/ops/check_json.py --strict)
if ! /usr/bin/python3 -c 'import jsonschema' 2>/dev/null; then
	echo "Bail out! /usr/bin/python3 has no jsonschema module: make deps (python3-jsonschema)"
	exit 1
fi
cat >"$T/check.py" <<'EOF'
import json, sys
r = json.load(sys.stdin)
prev = None
for p in r["problems"]:
    assert prev is None or prev >= p["benefit_s"], "problems not sorted by benefit"
    prev = p["benefit_s"]
for expr in sys.argv[1:]:
    assert eval(expr), f"failed: {expr}"
EOF
valid() { # valid SCHEMA FILE: the file follows docs/schema/SCHEMA.schema.json
	"${CHECK_JSON[@]}" "$1" "$2" >"$T/valid.out" 2>&1 || { sed 's/^/# /' "$T/valid.out"; return 1; }
}
invalid() { # invalid SCHEMA FILE TEXT: refused, and the reasons say TEXT
	if "${CHECK_JSON[@]}" "$1" "$2" >"$T/valid.out" 2>&1 || ! grep -qF -- "$3" "$T/valid.out"; then
		echo "# not refused for '$3':"
		sed 's/^/# /' "$T/valid.out"
		return 1
	fi
}
schema() { # schema FILE [python expressions over r...]
	local f=$1
	shift
	valid report "$f" || return 1
	python3 "$T/check.py" "$@" <"$f" 2>"$T/py.err" || { sed 's/^/# /' "$T/py.err"; return 1; }
}

# --- one node, every scenario ------------------------------------------------------------------
ALL=unnecessary,misplaced,dup,control,sequence
"$SYNTH" --state "$T/s1" --key k1 --job j1 --iters 60 --scenarios $ALL || { echo "Bail out! ffm-synth failed"; exit 1; }
want=$("$SYNTH" --expected --iters 60 --scenarios $ALL | awk '{ s += $2 } END { printf "%.9f", s }')
"$FFMCTL" --state-dir "$T/s1" report j1 --json >"$T/r1.json"
check "report --json exits 0" test $? = 0
check "report JSON follows the schema; recoverable_s is the planted total ($want s)" \
	schema "$T/r1.json" "abs(r['recoverable_s'] - $want) < 1e-6" "r['problems_known']" \
	"len(r['problems']) == 5" "r['data_quality']['divergent_sites'] == 0"
check "each planted call site is a problem with its type and file:line" \
	schema "$T/r1.json" \
	"{(p['call_site']['line'], p['type']) for p in r['problems']} == {(11, 'unnecessary_sync'), (22, 'misplaced_sync'), (30, 'duplicate_transfer'), (51, 'unnecessary_sync'), (52, 'unnecessary_sync')}" \
	"all(p['call_site']['file'] == 'app.c' and p['call_site']['module'] == 'app' for p in r['problems'])" \
	"[p for p in r['problems'] if p['type'] == 'misplaced_sync'][0]['evidence']['first_use_site']['line'] == 24" \
	"abs([p for p in r['problems'] if p['type'] == 'misplaced_sync'][0]['evidence']['first_use_s'] - 0.001) < 1e-9" \
	"[p for p in r['problems'] if p['type'] == 'duplicate_transfer'][0]['evidence']['first_transfer_site']['line'] == 30"
"$FFMCTL" --state-dir "$T/s1" report j1 >"$T/r1.txt"
check "text report: recoverable time, problems with file:line, Table 2, next step" \
	bash -c "grep -q '^recoverable: ' '$T/r1.txt' && grep -q 'unnecessary sync .*step_unnecessary at app.c:11' '$T/r1.txt' && grep -q 'misplaced: the first use .* at step_misplaced at app.c:24' '$T/r1.txt' && grep -q '^time spent vs expected benefit' '$T/r1.txt' && grep -q '^next: all stages have run' '$T/r1.txt'"

"$FFMCTL" --state-dir "$T/s1" report j1 --json --group function >"$T/r2.json"
check "--group function: one group per function" schema "$T/r2.json" "r['grouping'] == 'function'" \
	"sorted(p['function'] for p in r['problems']) == ['seq_first', 'seq_second', 'step_dup', 'step_misplaced', 'step_unnecessary']"
"$FFMCTL" --state-dir "$T/s1" report j1 --json --group sequence >"$T/r3.json"
check "--group sequence: patterns with members in order" schema "$T/r3.json" \
	"r['grouping'] == 'sequence'" \
	"any([m['call_site']['line'] for m in p['members']] == [51, 52] and p['occurrences'] == 60 for p in r['problems'])"
seq_id=$(python3 -c "import json; r = json.load(open('$T/r3.json')); print([p['sequence_id'] for p in r['problems'] if [m['call_site']['line'] for m in p['members']] == [51, 52]][0])")
"$FFMCTL" --state-dir "$T/s1" report j1 --json --subsequence "$seq_id:2:2" >"$T/r4.json"
check "--subsequence $seq_id:2:2 gives the second member's benefit alone (60 x 400 us)" \
	schema "$T/r4.json" "abs(r['subsequence']['benefit_s'] - 0.024) < 1e-9" \
	"r['subsequence']['occurrences'] == 60" "abs(r['subsequence']['sequence_benefit_s'] - 0.054) < 1e-9"
"$FFMCTL" --state-dir "$T/s1" report j1 --subsequence "$seq_id:1:2" >"$T/r4.txt"
check "text --subsequence names the entries" grep -q "2. unnecessary sync cuCtxSynchronize in seq_second at app.c:52" "$T/r4.txt"

# --- two nodes, one job ------------------------------------------------------------------------
mkdir -p "$T/m/nodes"
"$SYNTH" --state "$T/m/nodes/gpu01" --key k1 --job mj --iters 100 --tgid 100 --node gpu01 --scenarios unnecessary &&
	"$SYNTH" --state "$T/m/nodes/gpu02" --key k1 --job mj --iters 50 --tgid 200 --node gpu02 --scenarios unnecessary ||
	notok "ffm-synth for two nodes"
"$FFMCTL" --state-dir "$T/m" report mj --json >"$T/m.json"
check "two nodes: merged problems, per-node figures, load imbalance max/mean-1 = 1/3" \
	schema "$T/m.json" "len(r['nodes']) == 2" "[nd['node'] for nd in r['nodes']] == ['gpu01', 'gpu02']" \
	"len(r['problems']) == 1 and r['problems'][0]['count'] == 150 and r['problems'][0]['nodes'] == 2" \
	"abs(r['recoverable_s'] - 0.075) < 1e-9" "abs(r['load_imbalance'] - 1/3) < 1e-6" \
	"r['nodes'][0]['processes'][0]['pid'] == 100"
"$FFMCTL" --state-dir "$T/m" report mj >"$T/m.txt"
check "two nodes, text: per node and process lines, imbalance" \
	bash -c "grep -q 'node gpu01 ' '$T/m.txt' && grep -q 'pid 200 ' '$T/m.txt' && grep -q 'load imbalance over nodes: 33.3%' '$T/m.txt'"

# --- what is known before stage 3 ----------------------------------------------------------------
"$SYNTH" --state "$T/s2" --key k2 --job j2 --iters 20 --stages 2 --scenarios unnecessary
"$FFMCTL" --state-dir "$T/s2" report j2 --json >"$T/s2.json"
check "stages 1-2 only: no problems, null recoverable time, the next run named" schema "$T/s2.json" \
	"not r['problems_known']" "r['recoverable_s'] is None" "r['problems'] == []" \
	"'stage 3' in r['next']" "any(c['call_site']['line'] == 11 for c in r['call_sites'])"
"$FFMCTL" --state-dir "$T/s2" report j2 >"$T/s2.txt"
check "stages 1-2 only, text: says what is known and what comes next" \
	bash -c "grep -q 'recoverable: not known yet' '$T/s2.txt' && grep -q 'call sites by time waited (known so far)' '$T/s2.txt' && grep -q 'next: the next run records stage 3' '$T/s2.txt'"

# --- diff ----------------------------------------------------------------------------------------
"$SYNTH" --state "$T/s1" --key k1 --job j1-fixed --iters 60 --stages 1 --scenarios misplaced,dup,control,sequence
"$FFMCTL" --state-dir "$T/s1" diff j1 j1-fixed --json >"$T/d.json"
check "diff --json: stage-1 comparison, the removed site's predicted and actual change" python3 -c "
import json
d = json.load(open('$T/d.json'))
assert d['schema_version'] == 1 and d['measure'] == 'wait_time' and d['stage'] == 1
s = [x for x in d['sites'] if x['call_site']['line'] == 11][0]
assert abs(s['predicted_s'] - 0.03) < 1e-9 and abs(s['actual_s'] - 0.03) < 1e-9, s
assert s['count_before'] == 60 and s['count_after'] == 0
assert d['actual_s'] > 0 and d['predicted_s'] > 0
"

check "diff --json follows docs/schema/diff.schema.json" valid diff "$T/d.json"

# --- the other JSON outputs of a store ----------------------------------------------------------
"$FFMCTL" --state-dir "$T/s1" jobs --json >"$T/jobs.json"
check "jobs --json follows docs/schema/jobs.schema.json" valid jobs "$T/jobs.json"
"$FFMCTL" --state-dir "$T/s1" export j1 --format chrome-trace -o "$T/trace.json" 2>"$T/err" &&
	"$FFMCTL" --state-dir "$T/s1" export j1 --format hatchet -o "$T/tree.json" 2>"$T/err"
check "export: chrome-trace follows its schema" valid chrome-trace "$T/trace.json"
check "export: hatchet follows its schema" valid hatchet "$T/tree.json"

# --- the schema refuses what a broken writer prints (issue 41) ------------------------------------
# bad FILE PYTHON: a copy of the report r1.json in $T/bad.json, changed by PYTHON over `r`.
bad() {
	python3 -c "import json, sys
r = json.load(open(sys.argv[1]))
$2
json.dump(r, open(sys.argv[2], 'w'))" "$1" "$T/bad.json"
}
# What cli/report.c printed before commit 205ff91: one 's:o' too few in data_quality's
# json_pack, so duplicate_time_added_s took the next argument, a pointer, and
# duplicate_price_runs was gone.
bad "$T/r1.json" "q = r['data_quality']; del q['duplicate_price_runs']
q['duplicate_time_added_s'] = 94360417622032"
old_bug() {
	invalid report "$T/bad.json" "'duplicate_price_runs' is a required property" &&
		invalid report "$T/bad.json" "duplicate_time_added_s: 94360417622032 is greater than the maximum"
}
check "refused: data_quality as report.c wrote it before 205ff91 (a pointer, a field lost)" old_bug
bad "$T/r1.json" "r['data_quality']['duplicate_time_trimmed_s'] = 2500000000"
check "refused: nanoseconds printed as seconds" \
	invalid report "$T/bad.json" "greater than the maximum"
bad "$T/r1.json" "r['problems'][0]['count'] = 60.0"
check "refused: a count printed as a real" \
	invalid report "$T/bad.json" "60.0 is not of type 'integer'"
bad "$T/r1.json" "r['apis'][0]['wait_s'] = '0.5'"
check "refused: seconds as a string" invalid report "$T/bad.json" "'0.5' is not of type 'number'"
bad "$T/r1.json" "r['problems'][0]['evidence']['first_use_from_stage'] = 2"
check "refused: a value the page does not list" invalid report "$T/bad.json" "first_use_from_stage"
bad "$T/r1.json" "r['stages'][0]['used_as'] = None; r['data_quality']['drops']['new_reason'] = 0"
check "--strict refuses a member the page does not document" \
	invalid report "$T/bad.json" "'new_reason' was unexpected"
check "without --strict the schema lets a consumer meet a newer member" \
	/usr/bin/python3 tests/ops/check_json.py report "$T/bad.json"
printf '{"schema_version":2,"schema_version":2}\n' >"$T/dup.json"
check "refused: a member twice" invalid report "$T/dup.json" "duplicate member 'schema_version'"
sed 's/"wall_s":[0-9.e+-]*/"wall_s":NaN/' "$T/r1.json" >"$T/nan.json"
check "refused: NaN" invalid report "$T/nan.json" "NaN is not JSON"
head -c 200 "$T/r1.json" >"$T/cut.json"
check "refused: a report cut short" invalid report "$T/cut.json" "not one JSON value"
bad "$T/d.json" "del r['sites'][0]['count_after']; r['actual_s'] = None"
check "refused: a diff without a site's count_after, actual_s null" \
	invalid diff "$T/bad.json" "'count_after' is a required property"

# --- errors --------------------------------------------------------------------------------------
"$FFMCTL" --state-dir "$T/s1" report nosuchjob >/dev/null 2>&1
check "unknown job: exit 1" test $? = 1
"$FFMCTL" --state-dir "$T/s1" report j1 --group nonsense >/dev/null 2>&1
check "bad --group: exit 2" test $? = 2
"$FFMCTL" --state-dir "$T/s1" report j1 --subsequence 1:3:2 >/dev/null 2>&1
check "bad --subsequence: exit 2" test $? = 2
"$FFMCTL" --state-dir "$T/s1" report j1 --subsequence 99:1:1 >/dev/null 2>"$T/e.txt"
check "--subsequence of a sequence that does not exist: exit 1, says so" \
	bash -c "test $? = 1 && grep -q 'no sequence 99' '$T/e.txt'"
"$FFMCTL" --state-dir "$T/s1" diff j1 >/dev/null 2>&1
check "diff with one job id: exit 2" test $? = 2

echo "1..$n"
[ "$fails" = 0 ]
