# SPDX-License-Identifier: MIT
# Every JSON output of ffmctl in a shell test checked against its schema: source this after `cd`
# to the repository root with B set (the build directory; T, a scratch directory, optional).
# tests/ops/lib.sh sources it, so every test that uses lib.sh is covered.
#
# docs/schema/*.schema.json (docs/report-json.md says what they promise), by tests/ops/
# check_json.py --strict, run with Debian's /usr/bin/python3 (python3-jsonschema). Checked: each
# call of ctl, and of "$B/ffmctl" by that name (also "$PWD/$B/ffmctl": shell functions of those
# names, below) in a test that sources this file, whose arguments ask for JSON: --json/-j of
# report, profile (= report), diff, status, jobs, job and calibrate on standard output or
# profile's -o FILE; export --format chrome-trace|hatchet on standard output or -o FILE. The call
# itself is unchanged: the same bytes on standard output (passed on as they come), the same
# exit status, standard input untouched; a call that asks for no JSON runs ffmctl as it is. Not
# seen: ffmctl run by another program (runuser, setpriv, timeout, bash -c), and "$!" of a call
# put in the background is the wrapper's. An invalid output is one line of $FFM_JSON_LOG (the
# test, the call, the validator's reasons), which tests/run-tests.sh clears before the tests
# and counts as failures after them; each check is a line of $FFM_JSON_DONE (schema and
# milliseconds), which it sums up. FFM_JSON_CHECK=0 turns it all off.
case $B in
/*) FFM_JSON_LOG=$B/json-invalid.log ;;
*) FFM_JSON_LOG=$PWD/$B/json-invalid.log ;;
esac
FFM_JSON_DONE=${FFM_JSON_LOG%/*}/json-checked.log
FFM_JSON_VALIDATOR=(/usr/bin/python3 "$PWD/tests/ops/check_json.py" --strict)

# ffmctl_checked FFMCTL ARGS...: run FFMCTL ARGS (the binary, never a function) and check the
# JSON that ARGS ask for.
ffmctl_checked() {
	local bin=$1
	shift
	_ffm_json_ask "$@"
	if [ -z "$_FFM_JSON_SCHEMA" ] || [ "${FFM_JSON_CHECK:-1}" = 0 ]; then
		command "$bin" "$@"
		return
	fi
	local rc out=$_FFM_JSON_FILE
	if [ -n "$out" ]; then
		command "$bin" "$@"
		rc=$?
	else
		out=$(mktemp "${T:-${TMPDIR:-/tmp}}/ffm-json.XXXXXX") || return 2
		# tee -p: a reader that stops early (| grep -q) leaves the copy whole
		command "$bin" "$@" | tee -p "$out"
		rc=${PIPESTATUS[0]}
	fi
	# a failed call may print nothing; what it prints is checked all the same
	if [ -f "$out" ] && { [ "$rc" = 0 ] || [ -s "$out" ]; }; then
		_ffm_json_check "$_FFM_JSON_SCHEMA" "$out" "${bin##*/}" "$@"
	fi
	[ -n "$_FFM_JSON_FILE" ] || rm -f "$out"
	return "$rc"
}
# "$B/ffmctl" ARGS in the tests: the binary through ffmctl_checked (bash allows a '/' in a
# function's name; the path is looked up as a function first).
for _p in "$B/ffmctl" "$PWD/$B/ffmctl"; do
	case $B in /*) [ "$_p" = "$B/ffmctl" ] || continue ;; esac
	eval "function $(printf '%q' "$_p") { ffmctl_checked $(printf '%q' "$_p") \"\$@\"; }" 2>/dev/null
done
unset _p

# _ffm_json_check SCHEMA FILE WHAT...: validate FILE; an invalid one is logged (never fails the
# caller). The helpers' names start with _ffm_json_ so that a test's own cannot hide them.
_ffm_json_check() {
	local schema=$1 file=$2 msg t0=${EPOCHREALTIME/[.,]/}
	shift 2
	msg=$("${FFM_JSON_VALIDATOR[@]}" "$schema" "$file" 2>&1)
	local rc=$? t1=${EPOCHREALTIME/[.,]/}
	echo "$schema $(((t1 - t0) / 1000))" >>"$FFM_JSON_DONE"
	[ "$rc" = 0 ] && return 0
	printf '%s: %s: %s\n' "${0##*/}" "$(printf '%q ' "$@")" \
		"not valid against docs/schema/$schema.schema.json (exit $rc): ${msg//$'\n'/ | }" \
		>>"$FFM_JSON_LOG"
	return 0
}

# _ffm_json_ask FFMCTL-ARGS...: _FFM_JSON_SCHEMA = the schema of the JSON those arguments ask for
# (empty: none), _FFM_JSON_FILE = the file it goes to (empty: standard output).
_ffm_json_ask() {
	local verb= json=0 help=0 fmt= out= a
	_FFM_JSON_SCHEMA= _FFM_JSON_FILE=
	while [ $# -gt 0 ]; do
		a=$1
		shift
		if [ -z "$verb" ]; then
			case $a in
			--runtime-dir | --state-dir | --timeout | --py-library | --src-library) shift ;;
			-*) ;;
			*) verb=$a ;;
			esac
			continue
		fi
		case $a in
		--) break ;; # profile: the command's own arguments follow
		--json | -j) json=1 ;;
		--help | -h) help=1 ;;
		--format) fmt=${1-} && shift ;;
		--format=*) fmt=${a#*=} ;;
		-o | --output) out=${1-} && shift ;;
		--output=*) out=${a#*=} ;;
		-o?*) out=${a#-o} ;;
		esac
	done
	[ "$help" = 0 ] || return 0
	case $verb in
	report | diff | status | jobs | job | calibrate) [ "$json" = 1 ] && _FFM_JSON_SCHEMA=$verb ;;
	profile) [ "$json" = 1 ] && _FFM_JSON_SCHEMA=report && _FFM_JSON_FILE=$out ;;
	export) case $fmt in chrome-trace | hatchet) _FFM_JSON_SCHEMA=$fmt _FFM_JSON_FILE=$out ;; esac ;;
	esac
	case $_FFM_JSON_FILE in /dev/*) _FFM_JSON_SCHEMA= _FFM_JSON_FILE= ;; esac
	return 0
}
