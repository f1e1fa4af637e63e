#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The JSON check of the shell tests (tests/ops/jsoncheck.sh, through lib.sh's ctl and
# "$B/ffmctl"): it is transparent (the same standard output bytes, exit status and standard
# input), it checks exactly the calls that ask for JSON, and an invalid output becomes a line of
# the log that tests/run-tests.sh counts as a failure. Needs no root: a synthetic store, and a
# stand-in for ffmctl that prints what it is told.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh # TAP helpers, B, T; sources tests/ops/jsoncheck.sh

if [ ! -x "$B/ffmctl" ] || [ ! -x "$B/tests/ffm-synth" ]; then
	echo "1..0 # SKIP needs $B/ffmctl and $B/tests/ffm-synth (make)"
	exit 77
fi
if ! /usr/bin/python3 -c 'import jsonschema' 2>/dev/null; then
	echo "Bail out! /usr/bin/python3 has no jsonschema module: make deps (python3-jsonschema)"
	exit 1
fi
# This test's own log, so that the invalid outputs it makes on purpose fail nothing else.
FFM_JSON_LOG=$T/invalid.log FFM_JSON_DONE=$T/done.log
checked() { [ -f "$T/done.log" ] && wc -l <"$T/done.log" || echo 0; }

"$B/tests/ffm-synth" --state "$T/state" --key k1 --job j1 --iters 20 --scenarios unnecessary,dup \
	>/dev/null || { echo "Bail out! ffm-synth failed"; exit 1; }

# --- transparent --------------------------------------------------------------------------------
command "$B/ffmctl" --state-dir "$T/state" report j1 --json >"$T/direct.json"
ctl report j1 --json >"$T/ctl.json"
rc=$?
check "ctl report --json: the same bytes as ffmctl itself, exit 0" \
	bash -c "[ $rc = 0 ] && cmp -s '$T/direct.json' '$T/ctl.json'"
check "... and it was checked, valid" bash -c "[ $(checked) = 1 ] && [ ! -s '$T/invalid.log' ]"
"$B/ffmctl" --state-dir "$T/state" jobs --json >"$T/jobs.json"
check "\"\$B/ffmctl\" is checked too (a function of that name)" \
	bash -c "[ \"$(type -t "$B/ffmctl")\" = function ] && [ $(checked) = 2 ] && [ -s '$T/jobs.json' ]"
ctl report nosuchjob --json >"$T/out" 2>"$T/err"
check "a failing call keeps its exit status (1) and prints nothing to check" \
	bash -c "[ $? = 1 ] && [ ! -s '$T/out' ] && [ -s '$T/err' ] && [ $(checked) = 2 ]"
ctl report j1 >/dev/null
ctl report j1 -j --help >/dev/null
ctl export j1 --format hatchet -o /dev/null 2>/dev/null
check "export -o /dev/null leaves /dev/null a device (no rename over it)" test -c /dev/null
check "calls that ask for no JSON (text, --help, -o /dev/null) are not checked" \
	test "$(checked)" = 2
ctl export j1 --format chrome-trace -o "$T/t.json.gz" 2>/dev/null
ctl export j1 --format hatchet 2>/dev/null | head -c 10 >/dev/null
check "export's -o FILE.gz and its standard output, read only in part, are checked" \
	bash -c "[ $(checked) = 4 ] && [ ! -s '$T/invalid.log' ]"

# A stand-in for ffmctl: reads standard input, prints $OUT, exits $RC.
cat >"$T/fake" <<'EOF'
#!/bin/sh
cat >"$(dirname "$0")/stdin.txt"
printf '%s' "$OUT"
exit "$RC"
EOF
chmod +x "$T/fake"
out=$(echo "from stdin" | OUT='[{"job":"x"}]' RC=3 ffmctl_checked "$T/fake" jobs --json)
rc=$?
stdin_ok() {
	[ "$rc" = 3 ] && [ "$out" = '[{"job":"x"}]' ] && [ "$(cat "$T/stdin.txt")" = 'from stdin' ]
}
check "standard input reaches ffmctl, its exit status (3) and output come back" stdin_ok

# --- an invalid output is logged ----------------------------------------------------------------
check "... and that invalid jobs list is one line of the log, naming the test, call and reason" \
	grep -q "^test_jsoncheck.sh: fake jobs --json : not valid against docs/schema/jobs.schema.json.*$(
	)'key' is a required property" "$T/invalid.log"
OUT='{"schema_version":2}' RC=0 ffmctl_checked "$T/fake" --state-dir x report j1 -j >/dev/null \
	</dev/null
OUT='not json' RC=0 ffmctl_checked "$T/fake" status --json >/dev/null </dev/null
check "a report without its fields and a status that is no JSON: two more lines" \
	bash -c "[ \$(wc -l <'$T/invalid.log') = 3 ] && grep -q 'report.*data_quality' '$T/invalid.log' &&
		grep -q 'status.*not one JSON value' '$T/invalid.log'"
FFM_JSON_CHECK=0 OUT='not json' RC=0 ffmctl_checked "$T/fake" status --json >/dev/null </dev/null
check "FFM_JSON_CHECK=0 checks nothing" test "$(wc -l <"$T/invalid.log")" = 3

echo "1..$n"
finish
