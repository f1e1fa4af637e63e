#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ffm-test: timing: a job's copy for its owner has, once in 4 clean-clone CI suites each,
# not appeared in time (the owner's report, done/ after 10 s); not reproduced in 5 runs here, loaded
# or not. tests/run-tests.sh runs it once more and keeps the first log, whose failing check
# prints what ffmd logged of the job and what it says it publishes.
#
# A job's end as its owner sees it (TAP; issue 41, items 4 and 5), with a user of our own and a
# private ffmd on the simulated driver:
#   - `ffmctl job end J` returns once J's copy for its owner is in place (its analysis stored,
#     then copied: daemon/control.c), so that the owner's `ffmctl report J` right after it
#     reads the job; a job-end that does not wait (--wait 0) says the report is being
#     written, and the owner's report then waits for the copy;
#   - a daemon job's wall time is its processes' lifetime, not the job's: a job started two
#     seconds before its program and ended a second after it reports about the program's
#     time, and `report` and `diff` print the same wall time for a job.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
FAKE=$PWD/$B/fakecuda WL=$PWD/$B/workloads
[ -f "$FAKE/libcuda.so.1" ] && [ -x "$WL/unnecessary_sync" ] || {
	echo "# the simulated driver or the workloads are not built"; exit 77; }
for c in setpriv runuser python3; do
	command -v $c >/dev/null || { echo "# $c not found; skipping"; exit 77; }
done
make_users ffmend1
U=$(id -u ffmend1)
uctl() { timeout 60 runuser -u ffmend1 -- "$B/ffmctl" --runtime-dir "$T/run" --state-dir "$T/state" "$@"; }
now() { date +%s.%N; }
# program ITERS: the workload as the user; prints its own duration (s), as the test saw it.
program() {
	local t0 t1
	t0=$(now)
	setpriv --reuid "$U" --regid "$U" --clear-groups -- \
		env LD_LIBRARY_PATH="$FAKE" "$WL/unnecessary_sync" --iters "$1" >/dev/null 2>&1
	t1=$(now)
	python3 -c 'import sys; print(float(sys.argv[2]) - float(sys.argv[1]))' "$t0" "$t1"
}
wall() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wall_s"])' "$1"; }
# lifetime WHAT PROG WALL: ok when the report's wall time WALL is the program's PROG, not more.
lifetime() {
	if python3 -c 'import sys; p, w = map(float, sys.argv[1:]); sys.exit(not (0.5 * p <= w <= p + 0.3))' \
		"${2:-0}" "${3:-99}"; then
		ok "the wall time of $1 is the program's lifetime, not the job's"
	else
		notok "the wall time of $1 (${3:-?} s) is not the program's (${2:-?} s)"
	fi
}

start_ffmd || { echo "Bail out! ffmd did not start"; exit 1; }

# ---- the owner reads right after job end; the wall time is the program's -----------------------
ctl job start e1 --key kend --uid "$U" --user "$U" >/dev/null || { echo "Bail out! job start"; exit 1; }
sleep 2
prog=$(program 2000)
sleep 1
ctl job end e1 >"$T/end1" 2>&1
if uctl report e1 --json >"$T/r1.json" 2>"$T/err"; then
	ok "the owner reports the job right after job end"
else
	notok "the owner's report right after job end"; diag <"$T/err"; diag <"$T/end1"
fi
if [[ $(cat "$T/end1") == *"see: ffmctl report e1"* ]]; then
	ok "job end says where the report is"
else
	notok "job end's words"; diag <"$T/end1"
fi
ctl report e1 --json >"$T/root1.json" 2>"$T/err" # root reads the live store: item 5 alone
w1=$(wall "$T/root1.json" 2>/dev/null)
echo "# program ${prog} s, job ~$(python3 -c "print(${prog:-0} + 3)") s, report's wall ${w1:-?} s"
lifetime "a stage-1 job" "$prog" "$w1"

# ---- a job-end whose wait is over before the copy: report waits for it ------------------------
ctl job start e2 --key kend --uid "$U" --user "$U" --stage 2 >/dev/null ||
	{ echo "Bail out! job start e2"; exit 1; }
sleep 1
prog=$(program 2000)
ctl job end e2 --wait 0 >"$T/end2" 2>&1
if uctl report e2 --json >"$T/r2.json" 2>"$T/err"; then
	ok "the owner's report waits for a copy being written"
else
	notok "the owner's report of a job being published"; diag <"$T/err"; diag <"$T/end2"
	# why: what ffmd logged of e2 (its end, analysis, copy) and says it publishes now
	{ grep "e2" "$T/ffmd.log"; ctl status --json | python3 -c 'import json,sys
print("publishing now:", json.load(sys.stdin).get("publishing"))'; } 2>&1 | diag
fi
if [[ $(cat "$T/end2") == *"job e2 ended: key kend, stage 2; its report is being written"* ]]; then
	ok "job end --wait 0 says the report is being written"
else
	notok "job end --wait 0's words"; diag <"$T/end2"
fi
ctl report e2 --json >"$T/root2.json" 2>"$T/err"
w2=$(wall "$T/root2.json" 2>/dev/null)
echo "# stage 2: program ${prog} s, report's wall ${w2:-?} s"
lifetime "a stage-2 job" "$prog" "$w2"

# ---- report and diff: one wall time ------------------------------------------------------------
ctl job start e3 --key kend --uid "$U" --user "$U" --stage 2 >/dev/null ||
	{ echo "Bail out! job start e3"; exit 1; }
program 400 >/dev/null
ctl job end e3 >/dev/null 2>&1
ctl report e3 --json >"$T/root3.json" 2>"$T/err"
ctl diff e2 e3 --json >"$T/d.json" 2>>"$T/err"
if python3 - "$T/root2.json" "$T/root3.json" "$T/d.json" <<'PY'; then
import json, sys
r2, r3, d = (json.load(open(p)) for p in sys.argv[1:])
b, a = d["before"]["wall_s"], d["after"]["wall_s"]
assert (b, a) == (r2["wall_s"], r3["wall_s"]), ((b, a), (r2["wall_s"], r3["wall_s"]))
PY
	ok "report and diff give each job the same wall time"
else
	notok "report's and diff's wall times differ"; diag <"$T/err"
fi
grep "analysis stored" "$T/ffmd.log" | diag
stop_ffmd
finish
