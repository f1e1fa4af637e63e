#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Users read their own jobs, and stores are safe on a state directory shared by hosts (TAP;
# docs/SECURITY.md rule 5, store/ffm_store.h "the state directory"). With two users of our own
# and a private ffmd on the simulated driver:
#   - both users run jobs under one key: each owner gets a store of their own
#     (keys/<key>@<uid>.db), holding only their jobs;
#   - as the owner, report, export, diff and jobs work on their jobs (read from the published
#     copy done/<uid>/, root's, which an ACL lets them read); the other user gets "no job" and a
#     hint, and their `jobs` lists none of it; root sees both;
#   - the owner can neither write the copy nor read the live stores;
#   - copies that are missing (a stop or a crash during the copy) are made at ffmd's start;
#   - per-node layout (nodes/ in the state directory), as on a shared file system: while ffmd
#     writes a key's live store for a running job, a reader on a second, read-only view of the
#     state directory reports the key's finished job from its copy, opens nothing under any
#     keys/, and no -wal, -shm or -journal file appears next to a copy.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
FAKE=$PWD/$B/fakecuda WL=$PWD/$B/workloads # the simulated driver, the workloads
[ -f "$FAKE/libcuda.so.1" ] && [ -x "$WL/unnecessary_sync" ] || {
	echo "# the simulated driver or the workloads are not built"; exit 77; }
for c in setpriv unshare strace python3; do
	command -v $c >/dev/null || { echo "# $c not found; skipping"; exit 77; }
done
make_users ffmusr1 ffmusr2
U1=$(id -u ffmusr1)
U2=$(id -u ffmusr2)
mkdir -p "$T/out1" && chown ffmusr1 "$T/out1"
as() { local u=$1; shift; timeout 60 runuser -u "$u" -- "$@"; }
uctl() { local u=$1; shift; as "$u" "$B/ffmctl" --runtime-dir "$T/run" --state-dir "${STATE:-$T/state}" "$@"; }

# user_job USER JOB KEY [START ARGS]: the workload run as USER, a job of ffmd by its pid (owner USER).
user_job() {
	local u=$1 job=$2 key=$3 iters=40 pid
	shift 3
	setpriv --reuid "$u" --regid "$u" --clear-groups -- \
		sh -c "sleep 0.5; exec env LD_LIBRARY_PATH='$FAKE' '$WL/unnecessary_sync' --iters $iters" \
		>/dev/null 2>&1 &
	pid=$!
	ctl job start "$job" --key "$key" --pid $pid --user "$(id -u "$u")" "$@" >/dev/null ||
		{ echo "# job start $job failed"; return 1; }
	wait $pid
	ctl job end "$job" >/dev/null
}
# published USER JOB: wait (10 s at most) until USER may report JOB.
published() {
	for _ in $(seq 100); do
		uctl "$1" report "$2" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

start_ffmd || { echo "Bail out! ffmd did not start"; exit 1; }
# u1-b is stage 1 again, so that diff has two stage-1 runs to compare.
user_job ffmusr1 u1-a shared && user_job ffmusr1 u1-b shared --stage 1 && user_job ffmusr2 u2-a shared ||
	{ echo "Bail out! the users' jobs did not run"; diag <"$T/ffmd.log"; exit 1; }

# ---- one store per owner ---------------------------------------------------------------------
q() { python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall())' "$@"; }
if [ "$(q "$T/state/keys/shared@$U1.db" "SELECT job_id, uid FROM jobs ORDER BY id")" = "[('u1-a', $U1), ('u1-b', $U1)]" ] &&
	[ "$(q "$T/state/keys/shared@$U2.db" "SELECT job_id, uid FROM jobs")" = "[('u2-a', $U2)]" ]; then
	ok "one key, two owners: two stores, each with its owner's jobs only"
else
	notok "stores per owner"; ls -l "$T/state/keys" | diag
fi

# ---- the owner reads their jobs --------------------------------------------------------------
if published ffmusr1 u1-b && uctl ffmusr1 report u1-a --json >"$T/r1.json" 2>"$T/err" &&
	python3 -c 'import json,sys; r = json.load(open(sys.argv[1])); assert r["key"] == "shared", r["key"]' "$T/r1.json"; then
	ok "the owner reports their job"
else
	notok "the owner reports their job"; diag <"$T/err"
fi
if uctl ffmusr1 export u1-a --format chrome-trace -o "$T/out1/t.json" 2>"$T/err" &&
	python3 tests/ops/check_export.py chrome-trace-any "$T/out1/t.json" >/dev/null 2>&1; then
	ok "the owner exports their job"
else
	notok "the owner exports their job"; diag <"$T/err"
fi
if uctl ffmusr1 diff u1-a u1-b >/dev/null 2>"$T/err"; then
	ok "the owner compares two of their jobs"
else
	notok "the owner's diff"; diag <"$T/err"
fi
out=$(uctl ffmusr1 jobs 2>&1)
if [[ $out == *u1-a* && $out == *u1-b* && $out != *u2-a* ]]; then
	ok "the owner's jobs list: their two jobs, not the other user's"
else
	notok "the owner's jobs list"; echo "$out" | diag
fi

# ---- nobody else does ------------------------------------------------------------------------
published ffmusr2 u2-a
out=$(uctl ffmusr2 report u1-a 2>&1); rc=$?
if [ $rc = 1 ] && [[ $out == *"no job 'u1-a'"* && $out == *"admin_group"* ]]; then
	ok "another user: no job u1-a, and who may read it"
else
	notok "another user's report of u1-a (rc $rc)"; echo "$out" | diag
fi
for v in "export u1-a --format hatchet -o /dev/null" "diff u2-a u1-a"; do
	out=$(uctl ffmusr2 $v 2>&1); rc=$?
	if [ $rc != 0 ] && [[ $out == *"no job 'u1-a'"* ]]; then
		ok "another user: ${v%% *} of u1-a refused"
	else
		notok "another user's ${v%% *} of u1-a (rc $rc)"; echo "$out" | diag
	fi
done
out=$(uctl ffmusr2 jobs 2>&1)
if [[ $out == *u2-a* && $out != *u1-* ]]; then
	ok "another user's jobs list: their job only"
else
	notok "another user's jobs list"; echo "$out" | diag
fi
out=$(ctl jobs 2>&1)
if [[ $out == *u1-a* && $out == *u1-b* && $out == *u2-a* ]] && ctl report u2-a >/dev/null 2>&1; then
	ok "root lists and reports every job"
else
	notok "root's view"; echo "$out" | diag
fi

# ---- users only ever read --------------------------------------------------------------------
copy=$T/state/done/$U1/shared@$U1.db
if [ -f "$copy" ] && ! as ffmusr1 test -w "$copy" && ! as ffmusr1 sh -c "echo x >>'$copy'" 2>/dev/null &&
	! as ffmusr1 cat "$T/state/keys/shared@$U1.db" >/dev/null 2>&1 &&
	! as ffmusr2 cat "$copy" >/dev/null 2>&1 && ! as ffmusr2 ls "$T/state/done/$U1" >/dev/null 2>&1; then
	ok "the copy is root's: its owner reads it, cannot write it nor read the live store; nobody else reads it"
else
	notok "permissions of the copy"; ls -ln "$T/state/done/$U1" "$T/state/keys" 2>&1 | diag
fi
stop_ffmd

# ---- copies a stop or a crash cut short are made again at start ------------------------------
rm -rf "$T/state/done"
start_ffmd || { echo "Bail out! ffmd did not start again"; exit 1; }
if published ffmusr1 u1-b && published ffmusr2 u2-a; then
	ok "ffmd's start publishes the stores whose copy is missing"
else
	notok "copies made again at start"; diag <"$T/ffmd.log"
fi
stop_ffmd

# ---- a state directory shared by hosts -------------------------------------------------------
S2=$T/shared
mkdir -p "$S2/nodes" "$T/view"
chmod 755 "$S2/nodes"
FFMD_PID=
"$B/ffmd" --state-dir "$S2" --runtime-dir "$T/run" >"$T/ffmd2.log" 2>&1 &
FFMD_PID=$!
for _ in $(seq 150); do [ -S "$T/run/ffmd.sock" ] && break; sleep 0.1; done
ctl2() { "$B/ffmctl" --runtime-dir "$T/run" --state-dir "$S2" "$@"; }
node=$(ls "$S2/nodes" | head -1)
setpriv --reuid ffmusr1 --regid ffmusr1 --clear-groups -- \
	sh -c "sleep 0.5; exec env LD_LIBRARY_PATH='$FAKE' '$WL/unnecessary_sync' --iters 30" >/dev/null 2>&1 &
pid=$!
ctl2 job start n-1 --key nk --pid $pid --user "$U1" >/dev/null
wait $pid
ctl2 job end n-1 >/dev/null
STATE=$S2 published ffmusr1 n-1
# The writer goes on: job n-2 of the same key runs (its live store open, WAL) while we read.
setpriv --reuid ffmusr1 --regid ffmusr1 --clear-groups -- \
	sh -c "sleep 0.5; exec env LD_LIBRARY_PATH='$FAKE' '$WL/unnecessary_sync' --iters 400" >/dev/null 2>&1 &
pid=$!
ctl2 job start n-2 --key nk --pid $pid --user "$U1" >/dev/null
sleep 1
live=$S2/nodes/$node/keys/nk@$U1.db
[ -e "$live-wal" ] && ok "the writer has the live store open in WAL mode while n-2 runs" ||
	notok "no -wal beside the live store while n-2 runs"
# A reader on another "host": a second view of the state directory, read-only.
view() { # view USER CMD...: CMD as USER with the state directory mounted read-only at $T/view
	local u=$1; shift
	unshare -m sh -c "mount --make-rprivate / && mount --bind '$S2' '$T/view' &&
		mount -o remount,bind,ro '$T/view' && exec runuser -u $u -- \"\$@\"" sh "$@"
}
# (LeakSanitizer cannot run under ptrace: `make sanitize` checks leaks in the reads below.)
view root env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	strace -f -e trace=open,openat -o "$T/strace.log" \
	"$B/ffmctl" --state-dir "$T/view" report n-1 --json >"$T/n1.json" 2>"$T/err"; rc=$?
if [ $rc = 0 ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/n1.json" &&
	! grep -E '/keys/' "$T/strace.log" | grep -v ENOENT | grep -q .; then
	ok "root on a read-only second view reports the finished job from its copy, opens no live store"
else
	notok "report on the read-only view (rc $rc)"; { cat "$T/err"; grep /keys/ "$T/strace.log"; } | head -n 10 | diag
fi
out=$(view ffmusr1 "$B/ffmctl" --state-dir "$T/view" report n-1 2>&1); rc=$?
if [ $rc = 0 ] && [[ $out == *"job n-1"* ]]; then
	ok "the owner on the read-only view reports it too"
else
	notok "the owner's report on the read-only view (rc $rc)"; echo "$out" | tail -n 5 | diag
fi
out=$(view ffmusr1 "$B/ffmctl" --state-dir "$T/view" jobs 2>&1); rc=$?
if [ $rc = 0 ] && [[ $out == *n-1* ]]; then
	ok "the owner lists their jobs on the read-only view"
else
	notok "the owner's jobs on the read-only view (rc $rc)"; echo "$out" | tail -n 5 | diag
fi
left=$(find "$S2/nodes" -path '*/done/*' \( -name '*-wal' -o -name '*-shm' -o -name '*-journal' \) | head -n 3)
if [ -z "$left" ]; then
	ok "no -wal, -shm or -journal beside a copy"
else
	notok "files beside the copies"; echo "$left" | diag
fi
wait $pid
ctl2 job end n-2 >/dev/null
if STATE=$S2 published ffmusr1 n-2; then
	ok "n-2's copy replaces n-1's when n-2 ends"
else
	notok "n-2 published"; diag <"$T/ffmd2.log"
fi
stop_ffmd

echo "1..$n"
finish
