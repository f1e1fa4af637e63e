#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmctl's control verbs against a real ffmd (TAP): job start/end, status, jobs.
#   - with no ffmd: status fails (exit 1) saying ffmd is not running; usage errors exit 2 with
#     one specific message, before any connection;
#   - as root: a job on a real cgroup v2 directory (with a process inside, which status must
#     list) and a job by --uid; status (text and --json, which must be valid JSON) shows both;
#   - as `nobody` (setpriv, a different real uid, so ffmd sees it in SO_PEERCRED): job start and
#     job end are refused with "permission denied"; status shows only the job whose --user is
#     nobody; with admin_group set in ffmd's config, nobody plus that supplementary group may
#     start and end jobs;
#   - jobs lists every ended job from the stores, newest last, with state, runs and stages.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
NOBODY=$(id -u nobody 2>/dev/null) || { echo "# no user nobody"; exit 77; }
as_nobody() { setpriv --reuid="$NOBODY" --regid="$(id -g nobody)" --clear-groups "$@"; }
ADMIN_GROUP=users
ADMIN_GID=$(getent group "$ADMIN_GROUP" | cut -d: -f3)

# --- without ffmd --------------------------------------------------------------------------
out=$(ctl status 2>&1); rc=$?
if [ $rc = 1 ] && [[ $out == *"ffmd is not running"*"$T/run/ffmd.sock"* ]]; then
	ok "status without ffmd: exit 1, says it is not running and where it looked"
else
	notok "status without ffmd (rc $rc)"; echo "$out" | diag
fi
usage_case() { # usage_case NAME EXPECTED_SUBSTRING ARGS...
	local name=$1 want=$2 out rc
	shift 2
	out=$(ctl "$@" 2>&1); rc=$?
	if [ $rc = 2 ] && [[ $out == *"$want"* ]] && [ "$(echo "$out" | wc -l)" = 1 ]; then
		ok "usage error: $name (exit 2, one line)"
	else
		notok "usage error: $name (rc $rc)"; echo "$out" | diag
	fi
}
# --version: the release and the versions parts must share (store schema, protocol, BPF ABI).
v1=$(ctl --version 2>&1) v2=$("$B/ffmd" --version 2>&1)
if [[ $v1 =~ ^ffmctl\ [^\ ]+\ \(store\ schema\ [0-9]+,\ control\ protocol\ [0-9]+,\ BPF\ ABI\ [0-9]+\)$ ]] &&
	[ "${v2#ffmd }" = "${v1#ffmctl }" ]; then
	ok "ffmctl --version and ffmd --version: $v1"
else
	notok "--version: '$v1' / '$v2'"
fi
out=$(ctl help 2>&1) && h1=$? || h1=$?
out2=$(ctl help report 2>&1) && h2=$? || h2=$?
out3=$(ctl help job 2>&1) && h3=$? || h3=$?
if [ $h1 = 0 ] && [[ $out == *"ffmctl help VERB"* ]] && [ $h2 = 0 ] && [[ $out2 == *"report"*"--group"* ]] &&
	[ $h3 = 0 ] && [[ $out3 == *"job start"*"job end"* ]]; then
	ok "ffmctl help, help report, help job: the usage, each verb's own"
else
	notok "ffmctl help [VERB] ($h1 $h2 $h3)"; echo "$out2" | diag
fi
usage_case "help of an unknown verb" "unknown verb 'nosuch'" help nosuch
usage_case "no selector" "no selector" job start 1
usage_case "bad stage" "--stage must be" job start 1 --stage 7 --uid 0
usage_case "bad uid" "--uid must be" job start 1 --uid alice
usage_case "missing cgroup" "No such file" job start 1 --cgroup /nonexistent/cg
usage_case "no job id" "no job id" job end
usage_case "unknown action" "unknown action" job stop 1
usage_case "status extra argument" "unexpected argument" status now
# Nothing recorded yet (no keys/): an empty list, not an error (nor a qsort of NULL: make sanitize).
out=$(ctl jobs --json 2>&1); rc=$?
if [ $rc = 0 ] && [ "$(echo "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin))')" = "[]" ]; then
	ok "jobs with nothing recorded: exit 0, empty list"
else
	notok "jobs with nothing recorded (rc $rc)"; echo "$out" | diag
fi

# --- as root -------------------------------------------------------------------------------
start_ffmd || { notok "ffmd starts"; finish; }
ok "ffmd starts (socket $T/run/ffmd.sock)"

if make_cgroup ffm-test-ctl; then
	sleep 60 &
	inside=$!
	echo "$inside" >"$CGROUP/cgroup.procs"
	out=$(ctl job start zz-cg --cgroup "$CGROUP" --key nightly --user "$NOBODY" 2>&1); rc=$?
	if [ $rc = 0 ] && [[ $out == "job zz-cg started: key nightly, stage 1"* ]]; then
		ok "job start --cgroup (a real cgroup v2 directory): $out"
	else
		notok "job start --cgroup (rc $rc)"; echo "$out" | diag
	fi
	if ctl status --json | python3 -c '
import json, sys
st = json.load(sys.stdin)
job = [j for j in st["jobs"] if j["job"] == "zz-cg"][0]
sys.exit(0 if int(sys.argv[1]) in job["processes"] and job["owner"] == int(sys.argv[2]) else 1)' "$inside" "$NOBODY"; then
		ok "status --json: valid JSON; job zz-cg lists pid $inside (in the cgroup) and owner nobody"
	else
		notok "status --json lists the cgroup's process"; ctl status --json | diag
	fi
else
	skip "job start --cgroup" "no writable cgroup v2 hierarchy here"
	skip "status lists the cgroup's process" "no writable cgroup v2 hierarchy here"
	ctl job start zz-cg --uid "$NOBODY" --key nightly --user "$NOBODY" >/dev/null
fi
sleep 1.1 # jobs orders by start time (seconds): the later job has the smaller id
out=$(ctl job start aa-uid --uid 4242 2>&1); rc=$?
check "job start --uid (owner taken from the selector)" test $rc = 0
out=$(ctl status 2>&1); rc=$?
if [ $rc = 0 ] && [[ $out == *"active jobs (2)"* ]] && [[ $out == *zz-cg*nightly*nobody* ]] &&
	[[ $out == *aa-uid*4242* ]]; then
	ok "status (text) shows both jobs with key and owner"
else
	notok "status (text)"; echo "$out" | diag
fi
out=$(ctl job start zz-cg --uid 1 2>&1); rc=$?
check "job start of an id that is already active is refused (exit 1)" test $rc = 1

# --- another user ----------------------------------------------------------------------------
out=$(as_nobody "$B/ffmctl" --runtime-dir "$T/run" job start evil --uid 0 2>&1); rc=$?
if [ $rc = 1 ] && [[ $out == *"permission denied"* ]]; then
	ok "job start as nobody: refused, permission denied"
else
	notok "job start as nobody (rc $rc)"; echo "$out" | diag
fi
out=$(as_nobody "$B/ffmctl" --runtime-dir "$T/run" job end zz-cg 2>&1); rc=$?
if [ $rc = 1 ] && [[ $out == *"permission denied"* ]]; then
	ok "job end as nobody: refused, permission denied"
else
	notok "job end as nobody (rc $rc)"; echo "$out" | diag
fi
out=$(as_nobody "$B/ffmctl" --runtime-dir "$T/run" status --json 2>&1); rc=$?
if [ $rc = 0 ] && echo "$out" | python3 -c '
import json, sys
ids = sorted(j["job"] for j in json.load(sys.stdin)["jobs"])
sys.exit(0 if ids == ["zz-cg"] else 1)'; then
	ok "status as nobody shows only nobody's own job"
else
	notok "status as nobody shows only nobody's own job"; echo "$out" | diag
fi

# --- ending, listing -------------------------------------------------------------------------
out=$(ctl job end zz-cg 2>&1); rc=$?
check "job end zz-cg" test $rc = 0
out=$(ctl job end zz-cg 2>&1); rc=$?
if [ $rc = 1 ] && [[ $out == *"no active job"* ]]; then
	ok "job end of an ended job: exit 1, no active job"
else
	notok "job end twice (rc $rc)"; echo "$out" | diag
fi
ctl job end aa-uid >/dev/null 2>&1
out=$(ctl jobs --json); rc=$?
if [ $rc = 0 ] && echo "$out" | python3 -c '
import json, sys
j = json.load(sys.stdin)
ok = [x["job"] for x in j] == ["zz-cg", "aa-uid"] and all(x["state"] == "done" and x["runs"] == 1
	and x["stages_done"] == [1] for x in j) and j[0]["key"] == "nightly" and j[0]["user"] == "nobody"
sys.exit(0 if ok else 1)'; then
	ok "jobs --json: both jobs, done, 1 run, stage 1 done, newest last"
else
	notok "jobs --json"; echo "$out" | diag
fi
out=$(ctl jobs); rc=$?
if [ $rc = 0 ] && [ "$(echo "$out" | sed -n 2p | awk '{print $1, $2, $3, $4, $5, $6}')" = "zz-cg nightly nobody 1 1 done" ]; then
	ok "jobs (text): one line per job"
else
	notok "jobs (text)"; echo "$out" | diag
fi
stop_ffmd

# --- admin group -----------------------------------------------------------------------------
if [ -n "$ADMIN_GID" ]; then
	printf 'admin_group = %s\n' "$ADMIN_GROUP" >"$T/ffmd.conf"
	if start_ffmd --config "$T/ffmd.conf"; then
		out=$(setpriv --reuid="$NOBODY" --regid="$(id -g nobody)" --groups="$ADMIN_GID" \
			"$B/ffmctl" --runtime-dir "$T/run" job start adm-1 --uid 4242 2>&1); rc=$?
		out2=$(setpriv --reuid="$NOBODY" --regid="$(id -g nobody)" --groups="$ADMIN_GID" \
			"$B/ffmctl" --runtime-dir "$T/run" job end adm-1 2>&1); rc2=$?
		if [ $rc = 0 ] && [ $rc2 = 0 ]; then
			ok "a member of admin_group ($ADMIN_GROUP, supplementary) may start and end jobs"
		else
			notok "admin group member (rc $rc/$rc2)"; printf '%s\n%s\n' "$out" "$out2" | diag
		fi
		out=$(as_nobody "$B/ffmctl" --runtime-dir "$T/run" job start adm-2 --uid 4242 2>&1); rc=$?
		check "without the group, still refused" test $rc = 1
		stop_ffmd
	else
		notok "ffmd starts with admin_group"
	fi
else
	skip "admin group" "no group '$ADMIN_GROUP' here"
fi
echo "1..$n"
finish
