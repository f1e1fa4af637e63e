#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ffm-test: timing: the loop's answer time to pings and a held process's run time are judged on
# the shared machine; tests/run-tests.sh runs it once more when it fails.
#
# What a job's user controls and ffmd's loop (TAP; docs/SECURITY.md, rule 2, "Nothing a job's
# user controls blocks ffmd's loop"). Three real unprivileged users of the test's own; a client
# pings ffmd's socket every 5 ms throughout (tests/daemon/loop_lib.sh): the longest answer in a
# window is the longest the loop went without serving the socket there. A fanotify listener
# holds ffmd's opens of some of the users' files for 1.5 s (FAN_OPEN_PERM), past the 250 ms
# deadline of each of ffmd's user opens (symbols/useropen.h). Checked:
#   1. A run's end behind slow stacks: user C's run (its own copy of the workload, whose opens
#      by the unwinder are held) is ended while its stacks are still being unwound: the pings
#      meanwhile are answered within 150 ms (with the end waiting for them on the loop: 250 ms
#      and more, up to the user's 1 s budget of slow opens), and the run is closed later with
#      its records (its report has them).
#   2. Lookups per user: user A's process names four LD_LIBRARY_PATH entries whose libcuda
#      copies are held (its lookup takes 4 x 250 ms); meanwhile user B's process, which a rule
#      holds until its own lookup's answer, runs within 400 ms of its time alone (behind A's
#      lookup, with one worker for all: 1 s more).
#   3. A forked child that is never stopped: a process with probes forks children and continues
#      each at once, so BPF's stop at the fork never lands; the pings meanwhile are answered
#      within 150 ms (with the stop waited for on the loop: 500 ms a child), and the children
#      are let go (ffmd says they did not stop).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
. tests/daemon/loop_lib.sh
need_root
need_sim_workloads
command -v setpriv >/dev/null && command -v python3 >/dev/null && command -v gcc >/dev/null ||
	{ echo "# setpriv, python3 or gcc not found; skipping"; exit 77; }
HOLD_S=1.5

make_users ffmloopa ffmloopb ffmloopc
UA=$(id -u ffmloopa) UB=$(id -u ffmloopb) UC=$(id -u ffmloopc)
DA=$T/a DC=$T/c
mkdir -p "$DA" "$DC" && cp "$WL/unnecessary_sync" "$DC/app" || { echo "# cannot copy"; exit 2; }
for i in 1 2 3 4; do
	mkdir -p "$DA/l$i" && cp "$FAKE/libcuda.so.1" "$DA/l$i/libcuda.so.1" || exit 2
done
gcc -O1 -o "$T/forkcont" tests/daemon/forkcont.c || { notok "build forkcont"; finish; }
chown -R ffmloopa "$DA" && chown -R ffmloopc "$DC" && chmod -R a+rX "$DA" "$DC" &&
	chmod 755 "$T/forkcont" || exit 2
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
secs() { date +%s.%N; }

# B's processes are a rule's: each is held at its exec until its driver's lookup answers.
printf '[rule loop-b]\nuid = %s\n' "$UB" >"$T/ffmd.conf"
start_ffmd --config "$T/ffmd.conf" || { notok "ffmd starts"; finish; }
ctl calibrate --driver "$FAKE/libcuda.so.1" >/dev/null 2>&1 ||
	{ notok "calibrate the simulated driver"; finish; }
hold_start "$DC/app" "$DA/l1/libcuda.so.1" "$DA/l2/libcuda.so.1" "$DA/l3/libcuda.so.1" \
	"$DA/l4/libcuda.so.1"
ctl job start loopc --key loopc --uid "$UC" >/dev/null &&
	ctl job start loopa --key loopa --uid "$UA" >/dev/null || { notok "job start"; finish; }
ping_loop "$T/pings" &
ppid=$!
sleep 0.5

# 1. The run's end while its stacks are unwound: ended as soon as ffmd's first open of C's app
# (the unwinder's, for its first stack or its Python check) is held, within that open's deadline.
read -r o0 _ <"$T/held"
as "$UC" env LD_LIBRARY_PATH="$FAKE" "$DC/app" --iters 20 >"$T/c.out" 2>&1 &
cpid=$!
for _ in $(seq 250); do
	read -r o1 _ <"$T/held"
	[ "$o1" -gt "$o0" ] && break
	sleep 0.02
done
e0=$(now)
ctl job end loopc >/dev/null 2>&1 || notok "job end loopc"
e1=$(now)
wait $cpid || echo "# app: $?"
sleep 2
read -r end_n end_worst < <(pings_worst "$e0" "$(echo "$e1 + 1.5" | bc)")
echo "# job end took $(echo "($e1 - $e0) * 1000" | bc | cut -d. -f1) ms (answered once its copy" \
	"is in place); pings from it to 1.5 s after: $end_n, the slowest in $end_worst ms"
if grep -q "job loopc ended.*its last stacks being stored" "$T/ffmd.log"; then
	ok "the run ended while its stacks were still being unwound"
else
	notok "the run ended while its stacks were still being unwound (the test tested something)"
	grep "loopc" "$T/ffmd.log" | diag
fi
if [ "${end_n:-0}" -ge 10 ] && [ "${end_worst:-9999}" -lt 150 ]; then
	ok "during the run's end the loop answered $end_n pings, each within $end_worst ms"
else
	notok_timing "the loop answered within 150 ms during the run's end (${end_n:-0} pings,\
 ${end_worst:-?} ms)"
	tail -n 20 "$T/ffmd.log" | diag
fi
rep=$(timeout 20 "$B/ffmctl" --state-dir "$T/state" report loopc 2>&1)
if echo "$rep" | grep -q "cuCtxSynchronize\|cuStreamSynchronize" &&
	grep -q "job loopc: analysis stored" "$T/ffmd.log"; then
	ok "the run was closed, analysed and published with its records"
else
	notok "the run was closed, analysed and published with its records"
	{ echo "$rep" | head -n 30; grep loopc "$T/ffmd.log"; } | diag
fi

# 2. B's held process while A's lookup is slow. B's time alone first (its second run: the first
# makes the rule's store).
b_run() {
	local t0 t1
	t0=$(secs)
	as "$UB" env LD_LIBRARY_PATH="$FAKE" "$WL/unnecessary_sync" --iters 5 >/dev/null 2>&1
	t1=$(secs)
	echo "($t1 - $t0) * 1000" | bc | cut -d. -f1
}
b_run >/dev/null
alone=$(b_run)
alone2=$(b_run)
[ "$alone2" -lt "$alone" ] && alone=$alone2
as "$UA" env LD_LIBRARY_PATH="$DA/l1:$DA/l2:$DA/l3:$DA/l4" sleep 3 &
apid=$!
sleep 0.2
behind=$(b_run)
wait $apid
echo "# B's process alone: $alone ms; while A's lookup was slow: $behind ms"
read -r held_n held_files <"$T/held"
if [[ " ${held_files:-} " == *" 1 "* ]] && [ "$behind" -lt $((alone + 400)) ]; then
	ok "B's held process ran in $behind ms while A's lookup was slow (alone: $alone ms)"
else
	notok_timing "B's held process ran within 400 ms of its time alone while A's lookup was slow\
 ($behind ms, alone $alone ms; held files: ${held_files:-none})"
	tail -n 20 "$T/ffmd.log" | diag
fi

# 3. Children whose stop at their fork never lands. A stage-2 job: its processes have probes of
# their own at once (a stage-1 job's may be the bridge's, and their forks are not stopped); each
# child gets the stage's probes on the loop (milliseconds each, 65 of them), so the forks are
# 150 ms apart, one child's attach a round.
sleep 2 # past the last held open
ctl job start loopf --key loopf --uid "$UC" --stage 2 >/dev/null || notok "job start loopf"
f0=$(now)
as "$UC" env LD_LIBRARY_PATH="$FAKE" "$T/forkcont" 6 800 150 >"$T/fork.out" 2>&1
frc=$?
f1=$(now)
read -r fork_n fork_worst < <(pings_worst "$f0" "$f1")
echo "# pings while children were not stopped: $fork_n, the slowest in $fork_worst ms"
nostop=$(grep -c "did not stop at its fork" "$T/ffmd.log")
if [ $frc = 0 ] && [ "$nostop" -ge 1 ]; then
	ok "children never stopped at their fork: let go ($nostop said so), the parent ran through"
else
	notok "children never stopped at their fork are let go (rc $frc, $nostop said so)"
	{ cat "$T/fork.out"; tail -n 20 "$T/ffmd.log"; } | diag
fi
if [ "${fork_n:-0}" -ge 10 ] && [ "${fork_worst:-9999}" -lt 150 ]; then
	ok "while children were not stopped the loop answered $fork_n pings, each within $fork_worst ms"
else
	notok_timing "the loop answered within 150 ms while children were not stopped (${fork_n:-0}\
 pings, ${fork_worst:-?} ms)"
	tail -n 20 "$T/ffmd.log" | diag
fi

touch "$T/stop"
wait $ppid
wait $HPID
ctl job end loopa >/dev/null 2>&1
ctl job end loopf >/dev/null 2>&1
if kill -0 "$FFMD_PID" 2>/dev/null && ctl status >/dev/null 2>&1; then
	ok "ffmd goes on"
else
	notok "ffmd goes on"
	tail -n 10 "$T/ffmd.log" | diag
fi
echo "1..$n"
finish
