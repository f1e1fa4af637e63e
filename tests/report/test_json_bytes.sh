#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmctl's JSON is valid whatever bytes the names in a store hold (TAP). Job ids and keys come
# from root (the scheduler's prolog, a rule's config) and may be any bytes but NUL; JSON is
# UTF-8, and one byte that is not made `jobs --json` and `report --json` unreadable to strict
# readers. On a synthetic store (ffm-synth) whose job id is the bytes 0xff 0xfe and whose key
# holds an invalid byte too:
#   - jobs --json, report --json and export (chrome-trace, hatchet) parse with Python's json,
#     the bad bytes read back as U+FFFD and the rest as it was;
#   - a key of 5000 quotes and backslashes is written whole (the writer escapes, never cuts).
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
FFMCTL=$B/ffmctl
SYNTH=$B/tests/ffm-synth

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

if [ ! -x "$FFMCTL" ] || [ ! -x "$SYNTH" ] || ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP needs $FFMCTL, $SYNTH (make) and python3"
	exit 77
fi
T=$(mktemp -d /tmp/ffm-test-json-bytes-XXXXXX)
trap 'rm -rf "$T"' EXIT

ID=$'j\xff\xfe'
KEY=$'key-\xc3\xa9-\xc0'  # a well-formed e-acute, then a byte that begins no UTF-8 sequence
"$SYNTH" --state "$T/s" --key "$KEY" --job "$ID" --iters 20 --scenarios unnecessary ||
	{ echo "Bail out! ffm-synth failed"; exit 1; }

# json_check NAME FILE PYTHON-EXPR: FILE parses as JSON and EXPR (over `j`) holds.
json_check() {
	local name=$1 file=$2 expr=$3 out
	if out=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
sys.exit(0 if eval(sys.argv[2]) else "does not hold: " + sys.argv[2])' "$file" "$expr" 2>&1); then
		ok "$name"
	else
		notok "$name"
		echo "$out" | tail -n 3 | sed 's/^/# /'
		head -c 300 "$file" | od -c | head -n 8 | sed 's/^/# /'
	fi
}

"$FFMCTL" --state-dir "$T/s" jobs --json >"$T/jobs.json"
json_check "jobs --json: valid JSON, bad bytes as U+FFFD" "$T/jobs.json" \
	'[x["job"] for x in j] == ["j\ufffd\ufffd"] and j[0]["key"] == "key-\u00e9-\ufffd"'
"$FFMCTL" --state-dir "$T/s" report "$ID" --json >"$T/report.json"
json_check "report --json: valid JSON, bad bytes as U+FFFD" "$T/report.json" \
	'(j["job_id"], j["key"]) == ("j\ufffd\ufffd", "key-\u00e9-\ufffd") and j["stages"] and '\
'all(s["job_id"] == "j\ufffd\ufffd" for s in j["stages"])'
"$FFMCTL" --state-dir "$T/s" export "$ID" --format chrome-trace -o "$T/trace.json"
json_check "export --format chrome-trace: valid JSON" "$T/trace.json" 'True'
"$FFMCTL" --state-dir "$T/s" export "$ID" --format hatchet -o "$T/hatchet.json"
json_check "export --format hatchet: valid JSON" "$T/hatchet.json" 'True'

LONG=$(python3 -c 'print("\"\\" * 2500, end="")')
"$SYNTH" --state "$T/l" --key "$LONG" --job long --iters 5 --stages 1 --scenarios unnecessary ||
	{ echo "Bail out! ffm-synth failed"; exit 1; }
"$FFMCTL" --state-dir "$T/l" jobs --json >"$T/long.json"
json_check "a 5000-byte key of quotes and backslashes is written whole" "$T/long.json" \
	'j[0]["key"] == "\"\\" * 2500'

echo "1..$n"
[ "$fails" = 0 ]
