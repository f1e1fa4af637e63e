#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmd against a hostile or careless job user (TAP; docs/SECURITY.md states the rules). A real
# unprivileged user is created for the test (and removed at its end); ffmd runs as root with a
# uid job for that user, as a scheduler's prolog starts it. Each case is a defect found by a
# review, run the way the user would:
#   - a libcuda.so.1 of the user's own, with a constructor, is never run by ffmd (as root);
#     a user's copy of a driver whose build-id root calibrated is measured without being run;
#   - a FIFO named libcuda.so.1 blocks neither ffmd nor ffmctl calibrate, and the socket is
#     answered while a new driver is calibrated;
#   - runuser, su, setsid, bash with job control (under a pty) and a Python parent waiting with
#     WUNTRACED, each with a child that loads a driver being calibrated (so that the child is
#     held): every command finishes and no process is left stopped;
#   - 24 bad libcuda files of the user do not keep root's next driver out, and the user's job
#     is not reported as complete data;
#   - a job resumed after ffmd is killed finds its running process again, is partial, keeps
#     the interrupted run's wall time, and does not advance the key's stage;
#   - refused requests do not flood the log; status shows another user's driver path to
#     nobody but root; status --json stays valid JSON for a job id that is not UTF-8;
#   - a job whose selectors take in ffmd itself (uid 0, ffmd's cgroup) stops neither ffmd nor
#     the calibration it runs;
#   - in a state directory shared by nodes, ffmd's journal and holds are its node's, and a run
#     a crash interrupted is closed in the node's store.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
FAKE=$PWD/$B/fakecuda
WL=$PWD/$B/workloads
WLARGS="--iters 150 --kernel-us 200 --cpu-us 100"
[ -f "$FAKE/libcuda.so.1" ] || { echo "# $FAKE/libcuda.so.1 not built"; exit 2; }
command -v sqlite3 >/dev/null || { echo "# sqlite3 not found; skipping"; exit 77; }

# Two users of our own: ffmsec1 runs the jobs, ffmsec2 looks at them.
make_users ffmsec1 ffmsec2
U1=$(id -u ffmsec1)
chmod 755 "$T"
mkdir -p "$T/user" && chown ffmsec1 "$T/user"
# Bounded: a user command that hangs (a process left stopped) is a failure, not a stuck test.
as_user() { timeout 60 runuser -u ffmsec1 -- "$@"; }

# A copy of the simulated driver with a build-id of its own: ffmd has to calibrate it (about a
# second), so a process that loads it at once is held meanwhile. Root-owned: trusted.
fresh_driver() { # fresh_driver DIR
	mkdir -p "$1"
	python3 - "$FAKE/libcuda.so.1" "$1/libcuda.so.1" <<'PY'
import os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
b = bytearray(open(src, "rb").read())
# Find the GNU build-id note: namesz 4, descsz, type 3, "GNU\0", then the id.
i = b.find(b"\x04\x00\x00\x00")
while i >= 0:
    descsz, ntype = struct.unpack_from("<II", b, i + 4)
    if ntype == 3 and b[i + 12:i + 16] == b"GNU\0" and 8 <= descsz <= 64:
        b[i + 16:i + 16 + descsz] = os.urandom(descsz)
        break
    i = b.find(b"\x04\x00\x00\x00", i + 1)
else:
    sys.exit("no build-id note")
open(dst, "wb").write(b)
os.chmod(dst, 0o755)
PY
}
# Processes of the test's users that are stopped ('T'), as "pid comm" lines.
# (Only this test's: other tests may run beside it.)
stopped_procs() { ps -e -o stat=,pid=,args= | awk -v t="$T" '$1 ~ /^T/ && index($0, t) {print $2, $3}'; }
status_json() { ctl status --json 2>/dev/null; }
log_has() { grep -q -- "$1" "$T/ffmd.log"; }
wait_log() { # wait_log PATTERN SECONDS
	for _ in $(seq $(($2 * 10))); do log_has "$1" && return 0; sleep 0.1; done
	return 1
}

start_ffmd || { notok "ffmd starts"; finish; }
# The simulated driver is root's file in the build tree: calibrated once, cached by build-id.
ctl calibrate --driver "$FAKE/libcuda.so.1" >/dev/null 2>&1 || { notok "calibrate the simulated driver"; finish; }
ctl job start sec-1 --key sec --uid "$U1" >/dev/null || { notok "job start for uid $U1"; finish; }

# ---- 1: the user's own libcuda is never run by ffmd ----------------------------------------
mkdir -p "$T/user/evil" "$T/marks" && chmod 1777 "$T/marks"
cat >"$T/evil.c" <<EOF
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void pwn(void)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "$T/marks/ran-as-%u", (unsigned)geteuid());
	if ((f = fopen(p, "w")))
		fclose(f);
}
int cuInit(unsigned flags) { return 0; }
EOF
gcc -shared -fPIC -o "$T/user/evil/libcuda.so.1" "$T/evil.c" && chown -R ffmsec1 "$T/user/evil"
# (A process that lives long enough for ffmd to look at it.)
as_user env LD_LIBRARY_PATH="$T/user/evil" sleep 0.5
wait_log "cannot use driver $T/user/evil/libcuda.so.1" 10
if ! ls "$T/marks" | grep -q ran-as && log_has "cannot use driver $T/user/evil/libcuda.so.1: not calibrated: the file is owned by uid $U1"; then
	ok "a user's libcuda.so.1 is not run by ffmd (its constructor never ran)"
else
	notok "a user's libcuda.so.1 is not run by ffmd"; ls "$T/marks" | diag; grep evil "$T/ffmd.log" | diag
fi
out=$(ctl calibrate --driver "$T/user/evil/libcuda.so.1" 2>&1); rc=$?
if [ $rc != 0 ] && [[ $out == *"refusing to run"*"owned by uid $U1"* ]] && ! ls "$T/marks" | grep -q ran-as-0; then
	ok "ffmctl calibrate as root refuses the user's file and names why"
else
	notok "ffmctl calibrate as root refuses the user's file (rc $rc)"; echo "$out" | diag
fi
out=$(as_user "$B/ffmctl" --state-dir "$T/user" calibrate --driver "$T/user/evil/libcuda.so.1" 2>&1)
if ls "$T/marks" | grep -q "ran-as-0"; then
	notok "ffmctl calibrate as the user runs it as the user only"
else
	ok "ffmctl calibrate as the user runs it as the user only"
fi

# A user's copy of a driver root calibrated: measured from the cache, never run.
mkdir -p "$T/user/copy" && cp "$FAKE/libcuda.so.1" "$T/user/copy/" && chown -R ffmsec1 "$T/user/copy"
# (setpriv execs: its parent, this script, does not wait for stopped children, so the process
# is held until the copy is ready, and measured whole.)
setpriv --reuid="$U1" --regid="$U1" --clear-groups env LD_LIBRARY_PATH="$T/user/copy" \
	"$WL/unnecessary_sync" $WLARGS >/dev/null 2>&1
ev=$(status_json | python3 -c 'import json,sys; print(sum(j["events"] for j in json.load(sys.stdin)["jobs"] if j["job"]=="sec-1"))')
if log_has "driver $T/user/copy/libcuda.so.1: build-id.*(not root's file: the calibration of its build-id)" &&
	! grep "$T/user/copy" "$T/ffmd.log" | grep -q "calibrated now" && [ "${ev:-0}" -gt 100 ]; then
	ok "a user's copy of a calibrated driver is measured from the cache ($ev records), never run"
else
	notok "a user's copy of a calibrated driver is measured from the cache (records: ${ev:-?})"
	grep "$T/user/copy" "$T/ffmd.log" | diag
fi

# ---- 2: FIFOs and slow work ----------------------------------------------------------------
mkdir -p "$T/user/fifo" && mkfifo "$T/user/fifo/libcuda.so.1" && chown -R ffmsec1 "$T/user/fifo"
t0=$(date +%s%N)
out=$(timeout 20 "$B/ffmctl" --state-dir "$T/state" calibrate --driver "$T/user/fifo/libcuda.so.1" 2>&1); rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc != 0 ] && [ $rc != 124 ] && [ $ms -lt 5000 ] && [[ $out == *"not a regular file"* ]]; then
	ok "ffmctl calibrate --driver FIFO fails at once ($ms ms): not a regular file"
else
	notok "ffmctl calibrate --driver FIFO (rc $rc, $ms ms)"; echo "$out" | diag
fi
timeout 20 runuser -u ffmsec1 -- env LD_LIBRARY_PATH="$T/user/fifo" /bin/true; rc=$?
if [ $rc = 0 ] && timeout 5 "$B/ffmctl" --runtime-dir "$T/run" status >/dev/null; then
	ok "a FIFO in the job's library path blocks neither the job nor ffmd"
else
	notok "a FIFO in the job's library path (rc $rc)"; tail -n 5 "$T/ffmd.log" | diag
fi
# While a new driver is calibrated, ffmd still answers at once.
fresh_driver "$T/drv-slow"
# (setpriv execs: the parent is this script, which does not wait for stopped children, so the
# process is held until the driver is ready.)
setpriv --reuid="$U1" --regid="$U1" --clear-groups env LD_LIBRARY_PATH="$T/drv-slow" \
	"$WL/unnecessary_sync" $WLARGS >/dev/null 2>&1 &
slow=$!
wait_log "driver $T/drv-slow/libcuda.so.1: being made ready" 10
worst=0
while kill -0 $slow 2>/dev/null && ! log_has "driver $T/drv-slow/libcuda.so.1: build-id"; do
	t0=$(date +%s%N)
	timeout 10 "$B/ffmctl" --runtime-dir "$T/run" status >/dev/null
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ $ms -gt $worst ] && worst=$ms
	sleep 0.05
done
wait $slow; rc=$?
wait_log "driver $T/drv-slow/libcuda.so.1: build-id" 20
if [ $rc = 0 ] && [ $worst -lt 1000 ] && log_has "driver $T/drv-slow/libcuda.so.1: build-id.*calibrated now"; then
	ok "status answered within $worst ms while a new driver was calibrated"
else
	notok "status while a new driver was calibrated (worst $worst ms, workload rc $rc)"
	grep drv-slow "$T/ffmd.log" | diag
fi

# ---- 3: parents that watch their children stop ----------------------------------------------
# Each command's child loads a driver ffmd has not seen, which ffmd calibrates meanwhile: a
# child would be held, but its parent waits for stopped children, so it is not. The command must
# finish, nobody may see a stop, nothing is left stopped.
held_run() { # held_run NAME CMD...
	local name=$1 rc
	shift
	fresh_driver "$T/drv-$name"
	timeout 60 "$@" >"$T/$name.out" 2>&1
	rc=$?
	sleep 0.3
	local st
	st=$(stopped_procs)
	if [ $rc = 0 ] && [ -z "$st" ] && ! grep -qE "Stopped|saw the child stopped" "$T/$name.out"; then
		ok "$name: finishes, nothing left stopped"
	else
		notok "$name: finishes, nothing left stopped (rc $rc)"
		{ echo "stopped: $st"; tail -n 5 "$T/$name.out"; grep -E "drv-$name|held|stopped itself" "$T/ffmd.log" | tail -n 8; } | diag
		# Let them go, so that the next cases run.
		for p in $(echo "$st" | awk '{print $1}'); do kill -CONT "$p" 2>/dev/null; done
	fi
}
wl_cmd() { echo "env LD_LIBRARY_PATH=$T/drv-$1 $WL/unnecessary_sync $WLARGS"; }
held_run runuser runuser -u ffmsec1 -- $(wl_cmd runuser)
held_run su su -s /bin/sh ffmsec1 -c "$(wl_cmd su)"
held_run setsid setsid -w runuser -u ffmsec1 -- $(wl_cmd setsid)
held_run python python3 - "$U1" $(wl_cmd python) <<'PY'
import os, sys
uid, cmd = int(sys.argv[1]), sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.setgid(uid); os.setuid(uid)
    os.execvp(cmd[0], cmd)
while True:
    p, st = os.waitpid(pid, os.WUNTRACED)
    if os.WIFSTOPPED(st):
        # Seen, and left alone: whoever stopped it must continue it.
        print("saw the child stopped", file=sys.stderr)
        continue
    sys.exit(os.waitstatus_to_exitcode(st))
PY
if command -v script >/dev/null; then
	# An interactive bash with job control on a pty: a stopped child is reported "Stopped"
	# and the shell takes the terminal back.
	fresh_driver "$T/drv-bash"
	printf '%s\nexit\n' "runuser -u ffmsec1 -- $(wl_cmd bash); echo BASH-DONE" >"$T/bash.in"
	held_run bash sh -c "script -qfec 'bash --norc -i' /dev/null <'$T/bash.in'"
	grep -q BASH-DONE "$T/bash.out" || { notok "bash -i: the command ran to its end"; tail -n 5 "$T/bash.out" | diag; }
else
	skip "bash with job control" "no script(1)"
fi
# The same commands with a driver ffmd knows: its probes are attached as the child comes, so
# holds are the exception; the share is measured, not asserted (it depends on the load).
for i in 1 2 3 4 5; do
	runuser -u ffmsec1 -- env LD_LIBRARY_PATH="$FAKE" "$WL/unnecessary_sync" $WLARGS >/dev/null 2>&1
done
status_json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("# all jobs so far: %d of %d process starts held" % (d["processes_held"], d["processes_seen"]))'

# ---- 4: the driver table --------------------------------------------------------------------
for i in $(seq 24); do
	mkdir -p "$T/user/bad$i"
	echo "not a library $i" >"$T/user/bad$i/libcuda.so.1"
done
chown -R ffmsec1 "$T/user"
for i in $(seq 24); do as_user env LD_LIBRARY_PATH="$T/user/bad$i" /bin/true; done
sleep 1
# Root's job on a new copy of the driver (same build-id: cached) still gets a slot.
mkdir -p "$T/drv-root" && cp "$FAKE/libcuda.so.1" "$T/drv-root/"
sh -c "sleep 1; exec env LD_LIBRARY_PATH=$T/drv-root $WL/unnecessary_sync $WLARGS" >/dev/null 2>&1 &
rootwl=$!
ctl job start sec-root --key sec-root --pid $rootwl >/dev/null
wait $rootwl
ev=$(status_json | python3 -c 'import json,sys; print(sum(j["events"] for j in json.load(sys.stdin)["jobs"] if j["job"]=="sec-root"))')
ctl job end sec-root >/dev/null
if log_has "uid $U1 already owns 4 of the libcuda files in use" && [ "${ev:-0}" -gt 100 ]; then
	ok "24 bad files of one user: bounded at 4 entries; root's next driver is measured ($ev records)"
else
	notok "driver table after 24 bad files (root's job records: ${ev:-?})"; grep -E "bad|already|more than" "$T/ffmd.log" | tail -n 5 | diag
fi
ctl job end sec-1 >/dev/null
db=$(ls "$T/state/keys/sec@$U1.db" 2>/dev/null) # the owner's store of the key
flags=$(sqlite3 -cmd ".timeout 5000" "$db" "SELECT r.flags FROM runs r JOIN jobs j ON r.job = j.id WHERE j.job_id = 'sec-1'" 2>/dev/null)
if [ -n "$flags" ] && [ $((flags & 1)) = 1 ]; then
	ok "the user's job, whose processes were not measured, is a partial run (flags $flags)"
else
	notok "the user's job is a partial run (flags '${flags}')"
fi
out=$(ctl report sec-1 2>&1)
if [[ $out == *"data quality:"* ]] && [[ $out != *"data quality: good"* ]]; then
	ok "its report does not say the data is good"
else
	notok "its report does not say the data is good"; echo "$out" | grep -i quality | diag
fi

# ---- 5: resumed after a crash ---------------------------------------------------------------
ctl job start sec-2 --key sec-resume --uid "$U1" >/dev/null
as_user env LD_LIBRARY_PATH="$FAKE" "$WL/unnecessary_sync" --iters 5000 --kernel-us 1000 --cpu-us 1000 >/dev/null 2>&1 &
long=$!
sleep 1.5
kill -KILL "$FFMD_PID"; wait "$FFMD_PID" 2>/dev/null; FFMD_PID=
mv "$T/ffmd.log" "$T/ffmd-1.log"
start_ffmd || { notok "ffmd restarts"; finish; }
wait_log "journal: resumed job sec-2" 20
# (The workload runs about 10 s: still there when ffmd is back, even on a loaded machine.)
kill -0 $long 2>/dev/null && alive=1 || alive=0
wait $long
ctl job end sec-2 >/dev/null
db=$T/state/keys/sec-resume@$U1.db
rows=$(sqlite3 -cmd ".timeout 5000" -separator ' ' "$db" "SELECT r.id, r.flags, r.wall_s, (SELECT count(*) FROM events e WHERE e.run = r.id) FROM runs r ORDER BY r.id" 2>&1)
read -r r1 f1 w1 e1 r2 f2 w2 e2 <<<"$(echo $rows)"
if [ "$alive" = 1 ] && [ -n "${r2:-}" ] && [ $((f1 & 9)) = 9 ] && awk "BEGIN{exit !($w1 > 0.5)}" &&
	[ $((f2 & 1)) = 1 ] && [ "${e2:-0}" -gt 50 ]; then
	ok "resumed run: its running process found again ($e2 events), partial; the interrupted run kept ${w1} s"
else
	notok "resumed run (workload alive at resume: $alive)"
	{ echo "$rows"; tail -n 12 "$T/ffmd-1.log"; grep -E "sec-2|journal" "$T/ffmd.log"; } | diag
fi
out=$(ctl job start sec-3 --key sec-resume --uid "$U1" --json 2>&1)
if [[ $out == *'"stage":1'* ]]; then
	ok "partial runs do not advance the key's stage (next job: stage 1)"
else
	notok "partial runs do not advance the key's stage"; echo "$out" | diag
fi
ctl job end sec-3 >/dev/null 2>&1

# ---- 6: what a user sees and can do ---------------------------------------------------------
# Refusals are logged 10 per uid in a 10 s window (daemon/control.c), the window opened by
# that uid's first refusal: the 300 may straddle a window's end, which logs the sum of the
# quiet ones and a new burst. At most two bursts and their sums, never one line a request.
nref0=$(grep -c "refused" "$T/ffmd.log")
python3 - "$T/run/ffmd.sock" "$U1" <<'PY'
import os, socket, struct, sys
os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[2]))
for i in range(300):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 5, 0))
    s.connect(sys.argv[1])
    s.send(b"FFM/1 job-start\njob=x%d\nuid=0\n" % i)
    s.recv(4096)
    s.close()
PY
sleep 0.3
nref=$(($(grep -c "refused" "$T/ffmd.log") - nref0))
if [ "$nref" -le 24 ]; then
	ok "300 refused requests from one user: $nref log lines"
else
	notok "300 refused requests from one user: $nref log lines"
fi
# ffmsec1's files are in the driver table now (its copy): ffmsec2 must not see their paths.
out=$(runuser -u ffmsec2 -- "$B/ffmctl" --runtime-dir "$T/run" status --json 2>&1)
mine=$(as_user "$B/ffmctl" --runtime-dir "$T/run" status --json 2>&1)
if echo "$out" | python3 -c 'import json,sys; json.load(sys.stdin)' && [[ $out != *"$T/user"* ]] &&
	[[ $mine == *"$T/user/copy"* ]]; then
	ok "status shows a user's driver path to that user, not to another"
else
	notok "status hides other users' driver paths"; echo "$out" | head -c 600 | diag
fi
sleep 30 &
sl=$!
ctl job start "$(printf 'bad\xff\xfeid')" --pid $sl >/dev/null 2>&1
if status_json | python3 -c 'import json,sys; json.load(sys.stdin)'; then
	ok "status --json is valid JSON with a job id that is not UTF-8"
else
	notok "status --json with a job id that is not UTF-8"
fi
kill $sl

# ---- 7: a rule's job key does not depend on when ffmd looks --------------------------------
# `env ... ./app` execs twice; whether ffmd reads the process before or after the second exec,
# the key is the one of the exec the rule matched.
stop_ffmd
printf '[rule sec-env]\nuid = %s\n' "$U1" >"$T/rules.conf"
start_ffmd --config "$T/rules.conf" || { notok "ffmd starts with a rule"; finish; }
for i in $(seq 8); do
	as_user env FOO=1 LD_LIBRARY_PATH="$FAKE" "$WL/unnecessary_sync" --iters 20 --kernel-us 100 --cpu-us 100 >/dev/null 2>&1
done
sleep 1
keys=$(ctl jobs --json 2>/dev/null | python3 -c '
import json, sys
print(" ".join(sorted({j["key"] for j in json.load(sys.stdin) if j["job"].startswith("sec-env-")})))')
nj=$(ctl jobs --json 2>/dev/null | python3 -c '
import json, sys
print(sum(j["job"].startswith("sec-env-") for j in json.load(sys.stdin)))')
if [ "${nj:-0}" -ge 8 ] && [ "$(echo $keys | wc -w)" = 1 ]; then
	ok "8 runs of env ... ./app under a uid rule: one job key ($keys)"
else
	notok "8 runs of env ... ./app under a uid rule: keys '$keys' over ${nj:-0} jobs"
fi

# ---- 8: ffmd never joins a job ---------------------------------------------------------------
# A uid 0 job, and a job of the cgroup ffmd runs in, would take in ffmd and the calibration probe
# it runs: the map guard stopped the probe, the driver waited for the probe (calibration
# timed out), and a /proc scan of the cgroup made ffmd stop itself.
stop_ffmd
start_ffmd || { notok "ffmd starts"; finish; }
ctl job start sec-root --key sec-root --uid 0 >/dev/null
cg=$(awk -F: '$1 == "0" {print $3}' /proc/$FFMD_PID/cgroup)
if [ -n "$cg" ] && [ -f "/sys/fs/cgroup$cg/cgroup.procs" ]; then
	ctl job start sec-cg --key sec-cg --cgroup "/sys/fs/cgroup$cg" >/dev/null
fi
fresh_driver "$T/drv-self"
timeout 60 env LD_LIBRARY_PATH="$T/drv-self" "$WL/unnecessary_sync" --iters 20 --kernel-us 100 --cpu-us 100 >/dev/null 2>&1
rc=$?
st=$(ps -o stat= -p "$FFMD_PID" 2>/dev/null)
kill -CONT "$FFMD_PID" 2>/dev/null # were it stopped, nothing else would end it
ctl job end sec-root >/dev/null 2>&1
ctl job end sec-cg >/dev/null 2>&1
drv=$(status_json | python3 -c '
import json, sys
print(" ".join(str(d.get("usable")) for d in json.load(sys.stdin)["drivers"] if "drv-self" in d.get("path", "")))' 2>/dev/null)
if [ $rc = 0 ] && [[ $st != T* ]] && [ "$drv" = True ] && [ -z "$(stopped_procs)" ]; then
	ok "a uid 0 job and a job of ffmd's cgroup: ffmd and its calibration run on (driver usable)"
else
	notok "ffmd in its own job: workload rc $rc, ffmd state '$st', driver usable '$drv'"
	stopped_procs | diag
	tail -n 5 "$T/ffmd.log" | diag
fi

# ---- 9: a state directory shared by nodes: each ffmd's journal and holds are its node's -------
# With nodes/ in the state directory, a node's stores are in nodes/<host>/; its ffmd's journal
# and holds file go there too (two nodes must never share one), and a run that a crash
# interrupted is closed in that node's store.
stop_ffmd
host=$(hostname)
mkdir -p "$T/state/nodes"
start_ffmd || { notok "ffmd starts"; finish; }
ctl job start sec-node --key sec-node --exe "$WL/unnecessary_sync" >/dev/null
env LD_LIBRARY_PATH="$FAKE" "$WL/unnecessary_sync" --iters 5000 --kernel-us 1000 --cpu-us 1000 >/dev/null 2>&1 &
long=$!
sleep 1.5
kill -KILL "$FFMD_PID"; wait "$FFMD_PID" 2>/dev/null; FFMD_PID=
journal_here=$([ -s "$T/state/nodes/$host/ffmd-jobs" ] && ! grep -q sec-node "$T/state/ffmd-jobs" 2>/dev/null && echo 1)
start_ffmd || { notok "ffmd restarts"; finish; }
wait_log "journal: resumed job sec-node" 20
kill $long 2>/dev/null; wait $long 2>/dev/null
ctl job end sec-node >/dev/null
f1=$(sqlite3 -cmd ".timeout 5000" "$T/state/nodes/$host/keys/sec-node.db" "SELECT flags FROM runs ORDER BY id LIMIT 1" 2>&1)
if [ "$journal_here" = 1 ] && [ -n "$f1" ] && [ $((f1 & 9)) = 9 ] && [ ! -e "$T/state/keys/sec-node.db" ]; then
	ok "nodes/: the journal is nodes/$host/ffmd-jobs; the interrupted run is closed in the node's store"
else
	notok "nodes/: journal in the node's directory: '${journal_here:-no}', first run's flags '$f1'"
	ls -R "$T/state" | head -n 20 | diag
	grep -E "sec-node|journal" "$T/ffmd.log" | diag
fi
finish
