#!/usr/bin/env bash
# Runs every test of ffm and prints one closing line: "N passed, N failed, N skipped".
#   C tests:     $O/tests/<dir>/test_*   (TAP on stdout; exit 77 = whole binary skipped)
#   shell tests: tests/<dir>/test_*.sh   (same conventions)
# A binary that exits non-zero without printing "not ok" counts as one failure, so a crash is
# never a pass. FFM_TEST_FILTER=substring runs only matching test files.
# A test that measures time on the shared machine (its source holds the line "ffm-test:
# timing", with why) and fails is run once more, and its second result counts; the closing
# lines name it with the first attempt's log, so a test that fails now and then stays seen.
# FFM_TEST_RETRY=0 turns that off.
set -u
O=${O:-build}
export FFM_BUILD=$O
cd "$(dirname "$0")/.." || exit 2

pass=0 fail=0 skip=0
failed_names=() retried=()
logdir=$O/test-logs
mkdir -p "$logdir"
# The shell tests' JSON outputs, checked against docs/schema/ (tests/ops/lib.sh, ctl): the
# invalid ones and every check, counted at the end.
json_bad=$O/json-invalid.log json_done=$O/json-checked.log
rm -f "$json_bad" "$json_done"

# The source of test @1 (a shell test is its own source; a C test's is tests/<dir>/<name>.c).
source_of() {
	case $1 in
	*.sh) echo "$1" ;;
	*) echo "tests/${1#"$O"/tests/}.c" ;;
	esac
}

run_one() {
	local t=$1 name log rc t0=$SECONDS src
	name=${t#"$O"/}
	name=${name#tests/}
	log=$logdir/$(echo "$name" | tr '/' '_').log
	timeout "${FFM_TEST_TIMEOUT:-600}" "$t" >"$log" 2>&1
	rc=$?
	src=$(source_of "$t")
	if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ "${FFM_TEST_RETRY:-1}" != 0 ] &&
		grep -q 'ffm-test: timing' "$src" 2>/dev/null; then
		mv "$log" "$log.first"
		retried+=("$name ($log.first)")
		timeout "${FFM_TEST_TIMEOUT:-600}" "$t" >"$log" 2>&1
		rc=$?
	fi
	t0=$((SECONDS - t0))
	local p f s
	p=$(grep -cE '^ok [0-9]+' "$log" | head -1)
	s=$(grep -cE '^ok [0-9]+ .*# SKIP' "$log" | head -1)
	f=$(grep -cE '^not ok [0-9]+' "$log" | head -1)
	p=$((p - s))
	if [ "$rc" = 77 ] && [ "$p" = 0 ] && [ "$f" = 0 ]; then
		s=$((s > 0 ? s : 1))
		echo "SKIP $name: $(tail -n 1 "$log")"
	elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		f=1
		echo "FAIL $name (exit $rc, no failing case reported; log: $log)"
		tail -n 20 "$log" | sed 's/^/    /'
	elif [ "$f" != 0 ]; then
		echo "FAIL $name ($f failed; log: $log; ${t0} s)"
		# The failures and their messages first (a CI log may keep only a part), then
		# what led to them.
		grep -E '^not ok|^# .*\.(c|sh):[0-9]+: ' "$log" | head -n 20 | sed 's/^/    /'
		echo "    --- last lines of the log:"
		grep -E '^(not ok|# )' "$log" | tail -n 25 | sed 's/^/    /'
	else
		echo "ok   $name ($p passed${s:+, $s skipped}; ${t0} s)"
	fi
	grep -E '^ok [0-9]+ .*# SKIP' "$log" | grep -v FFM_TEST_ONLY | sed 's/^/    /'
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	[ "$f" = 0 ] || failed_names+=("$name")
}

tests=()
for t in "$O"/tests/*/test_*; do
	[ -x "$t" ] && [ -f "$t" ] && case $t in *.o | *.d) ;; *) tests+=("$t") ;; esac
done
for t in tests/*/test_*.sh; do
	[ -f "$t" ] && tests+=("$t")
done
for t in "${tests[@]}"; do
	if [ -n "${FFM_TEST_FILTER:-}" ] && [[ $t != *"$FFM_TEST_FILTER"* ]]; then continue; fi
	run_one "$t"
done

if [ -s "$json_done" ]; then
	awk '{ n++; ms += $2 }
		END { printf "json: %d outputs checked against docs/schema/ in %.1f s\n", n, ms / 1000 }' \
		"$json_done"
fi
if [ -s "$json_bad" ]; then
	bad=$(wc -l <"$json_bad")
	echo "FAIL json: $bad JSON output(s) of ffmctl not valid against their schema (docs/schema/;"
	echo "    tests/ops/check_json.py --strict FILE shows why; docs/report-json.md says what holds):"
	cut -c 1-1000 "$json_bad" | sed 's/^/    /'
	fail=$((fail + bad))
	failed_names+=(json-schema)
fi
echo
[ ${#retried[@]} = 0 ] || echo "run twice (a timing test whose first attempt failed): ${retried[*]}"
[ ${#failed_names[@]} = 0 ] || echo "failed: ${failed_names[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
