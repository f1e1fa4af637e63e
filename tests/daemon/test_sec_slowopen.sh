#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ffm-test: timing: the loop's answer time to pings is judged on the shared machine;
# tests/run-tests.sh runs it once more when it fails.
#
# ffmd's loop while the opens of a job user's files are slow (TAP; docs/SECURITY.md, rule 2, "No
# open of a job user's file waits on the loop"). Two real unprivileged users of the test's own
# run, each in a --uid job of their own: one a Python program with the user's own copy of the
# interpreter, the other a workload with the user's own copy of the simulated driver, found
# through LD_LIBRARY_PATH. A fanotify listener of the test holds every open of those two files by
# ffmd for 1.5 s (FAN_OPEN_PERM: the open blocks in the kernel, as on a stalled FUSE or network
# file system), past the 250 ms deadline of ffmd's user opens; the users' own opens go at once. So
# the Python detection (the interpreter's file) and the libcuda lookup of each new process (its
# LD_LIBRARY_PATH's entries), besides the symbolizer, stall on the opens (two users: each user's
# slow opens stop after 1 s of them in 10 s, symbols/useropen.h). Meanwhile a client pings ffmd's
# socket every 5 ms over fresh connections: the longest answer is the longest the loop went
# without serving the socket. Checked: ffmd's opens of both files were held (the test tested
# something); every ping sent while one was held was answered within 150 ms (with the lookups on
# the loop: 250 ms and more, the deadline spent there; 7-93 ms off it, with single pings of a
# loaded 2-core VM's scheduling up to 90 ms); the runs finished and were measured; processes that
# exit before the answer of their lookup leave ffmd running.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
. tests/daemon/loop_lib.sh
need_root
need_sim_workloads
PY=/usr/bin/python3.11
[ -x "$PY" ] || PY=$(command -v python3.11 || command -v python3) ||
	{ echo "# no python3"; exit 77; }
PY=$(readlink -f "$PY")
command -v setpriv >/dev/null || { echo "# setpriv not found; skipping"; exit 77; }
HOLD_S=1.5

make_users ffmslow1 ffmslow2
U1=$(id -u ffmslow1)
U2=$(id -u ffmslow2)
D=$T/u1 D2=$T/u2
mkdir -p "$D" "$D2/lib" && cp "$PY" "$D/python3.11" && cp "$WL/unnecessary_sync" "$D2/app" &&
	cp "$FAKE/libcuda.so.1" "$D2/lib/libcuda.so.1" ||
	{ echo "# cannot copy the interpreter, the workload or the driver"; exit 2; }
cat >"$D/app.py" <<'EOF'
import ctypes, sys, time
cu = ctypes.CDLL("libcuda.so.1")
def ck(r):
    if r != 0:
        raise RuntimeError("CUDA error %d" % r)
ck(cu.cuInit(0))
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
ck(cu.cuDeviceGet(ctypes.byref(dev), 0))
ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
ck(cu.cuCtxSetCurrent(ctx))
def a():
    ck(cu.cuCtxSynchronize())
def b():
    ck(cu.cuCtxSynchronize())
# Alive a while after its first stack, so that ffmd looks at it (and its file) before it exits.
b()
time.sleep(1)
for i in range(int(sys.argv[1]) - 1):
    a() if i % 2 else b()
EOF
chown -R ffmslow1 "$D" && chown -R ffmslow2 "$D2" && chmod 0755 "$D/python3.11" "$D2/app" &&
	chmod 0644 "$D2/lib/libcuda.so.1"
# The interpreter's copy runs with the system's library (its home is not beside it).
PYHOME=$("$PY" -c 'import sys; print(sys.base_prefix)')

start_ffmd || { notok "ffmd starts"; finish; }
ctl calibrate --driver "$FAKE/libcuda.so.1" >/dev/null 2>&1 ||
	{ notok "calibrate the simulated driver"; finish; }

hold_start "$D2/lib/libcuda.so.1" "$D/python3.11"
ctl job start slowpy --key slowpy --uid "$U1" >/dev/null &&
	ctl job start slowlib --key slowlib --uid "$U2" >/dev/null || { notok "job start"; finish; }
# (after the job's start: opening its store is the loop's, and not what is measured)
ping_loop "$T/pings" &
ppid=$!
rc=0
for i in 1 2; do
	timeout 60 setpriv --reuid="$U1" --regid="$U1" --clear-groups env PYTHONHOME="$PYHOME" \
		LD_LIBRARY_PATH="$FAKE" "$D/python3.11" "$D/app.py" 200 >"$T/py$i.out" 2>&1 || rc=$?
done
for i in 1 2; do
	timeout 60 setpriv --reuid="$U2" --regid="$U2" --clear-groups \
		env LD_LIBRARY_PATH="$D2/lib" "$D2/app" --iters 300 >"$T/app$i.out" 2>&1 || rc=$?
done
# Processes that exit before their lookup's answer (its opens held): the answer is dropped.
for i in 1 2 3 4 5; do
	setpriv --reuid="$U2" --regid="$U2" --clear-groups env LD_LIBRARY_PATH="$D2/lib" true
done
# Past the last hold, so that a wait of the loop, if any, is seen.
sleep 2
alive=0
kill -0 "$FFMD_PID" 2>/dev/null && ctl status >/dev/null 2>&1 && alive=1
touch "$T/stop"
wait $ppid
wait $HPID
read -r held_n held_files <"$T/held"
for j in slowpy slowlib; do
	timeout 10 "$B/ffmctl" --runtime-dir "$T/run" job end $j >/dev/null 2>&1 || rc=98
done
rep=$(timeout 20 "$B/ffmctl" --state-dir "$T/state" report slowpy 2>&1)
rep2=$(timeout 20 "$B/ffmctl" --state-dir "$T/state" report slowlib 2>&1)
echo "# ffmd's opens of the user's files held: ${held_n:-0} (files: ${held_files:-none})"
# The pings in flight while one of ffmd's opens was held: how long each waited for the loop.
read -r in_n in_worst < <(awk -v h="$HOLD_S" 'NR == FNR { t[++n] = $1; next }
	{ for (i = 1; i <= n; i++)
		if ($1 < t[i] + h && $1 + $2 / 1000 > t[i]) { m++; if ($2 > w) w = $2; break } }
	END { printf "%d %.0f\n", m, w }' "$T/held.t" "$T/pings.all")
all_worst=$(awk '$2 > w { w = $2 } END { printf "%.0f", w }' "$T/pings.all")
echo "# pings while an open was held: ${in_n:-0}, the slowest in ${in_worst:-?} ms (of all:" \
	"${all_worst:-?} ms)"

if [ "${held_n:-0}" -ge 2 ] && [ "${held_files:-}" = "0 1" ]; then
	ok "ffmd's opens of the users' libcuda copy and interpreter were held ($held_n)"
else
	notok "ffmd opened both user files and the opens were held (${held_n:-0}: ${held_files:-none})"
	tail -n 20 "$T/ffmd.log" | diag
fi
if [ "${in_n:-0}" -ge 10 ] && [ "${in_worst:-9999}" -lt 150 ]; then
	ok "while the opens were held the loop answered $in_n pings, each within $in_worst ms"
else
	notok_timing "the loop answered within 150 ms while the opens were held (${in_n:-0} pings,\
 ${in_worst:-?} ms)"
	tail -n 20 "$T/ffmd.log" | diag
fi
# The waits of the driver-function table (the interpreter's and driver's frames may be unknown:
# the symbolizer's opens of them were held too).
waits() {
	awk '/driver function +calls/ { on = 1; next } on && !NF { on = 0 }
		on { sub(/^ *(\(unattributed wait\)|[A-Za-z_0-9]+) +/, ""); s += $1 } END { print s + 0 }'
}
waits=$(echo "$rep" | waits)
waits2=$(echo "$rep2" | waits)
if [ $rc = 0 ] && [ "$waits" = 400 ] && [ "$waits2" -gt 0 ]; then
	ok "the runs finished and were measured: $waits and $waits2 waits"
else
	notok "the runs finished and were measured (rc $rc, $waits of 400 waits, $waits2)"
	{ echo "$rep" "$rep2" | head -n 40; cat "$T/py1.out" "$T/app1.out"; tail -n 10 "$T/ffmd.log"; } |
		diag
fi

if [ $alive = 1 ]; then
	ok "processes gone before their lookup's answer: ffmd goes on"
else
	notok "ffmd answers after processes gone before their lookup's answer"
	tail -n 10 "$T/ffmd.log" | diag
fi

echo "1..$n"
finish
