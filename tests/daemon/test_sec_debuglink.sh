#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmd against a job user's .gnu_debuglink (TAP; docs/SECURITY.md, "Opening files a job's user
# names"). ffmd runs as root; a real unprivileged user of the test's own runs a workload in a
# --uid job. The binary is the user's stripped copy of a workload with a debuglink:
#   - to a FIFO: ffmd answers status within 1 s throughout, the process is never left stopped,
#     the run finishes and is measured;
#   - to a symlink to a root-only copy of the right debug file: ffmd never reads it (its atime
#     stays, and the report has no file:line from it), the run is still measured;
#   - to the user's own debug file (mode 0600, the user's): the report names file:line;
#   - to a debug file whose every open stalls 3 s (FFM_TEST_OPEN_DELAY, symbols/useropen.h: as on
#     a stalled FUSE or network file system): the opens run off ffmd's loop (daemon/unwinder.h),
#     so ffmd answers a ping well under the opens' 250 ms deadline throughout (a client that
#     stays up pings every 20 ms: no client start-up in the time, which is the loop's longest
#     stall this test sees), status within 1 s, and the run is measured.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
FAKE=$PWD/$B/fakecuda
WL=$PWD/$B/workloads/unnecessary_sync
[ -f "$FAKE/libcuda.so.1" ] && [ -x "$WL" ] || { echo "# driver or workload not built"; exit 2; }
command -v objcopy >/dev/null || { echo "# objcopy not found; skipping"; exit 77; }
SITE="unnecessary_sync.c:27"

make_users ffmdbg1
U1=$(id -u ffmdbg1)
mkdir -p "$T/user" && chown ffmdbg1 "$T/user"
objcopy --only-keep-debug "$WL" "$T/app.debug" && objcopy --strip-debug "$WL" "$T/app.stripped" ||
	{ echo "# objcopy failed"; exit 2; }
# mkcase NAME [DEBUG]: $T/user/NAME/app, stripped, with a debuglink to the right debug file
# beside it (named DEBUG, default app.debug).
mkcase() {
	local d=$T/user/$1 dbg=${2:-app.debug}
	mkdir -p "$d" && cp "$T/app.debug" "$d/$dbg" &&
		(cd "$d" && objcopy --add-gnu-debuglink="$dbg" "$T/app.stripped" app) || return 1
	chown -R ffmdbg1 "$d" && chmod 0755 "$d/app" && chmod 0600 "$d/$dbg"
}
mkcase good && mkcase fifo && mkcase link && mkcase slow slow.debug ||
	{ echo "# cannot make the binaries"; exit 2; }
F=$T/user/fifo/app.debug
rm "$F" && mkfifo -m 0644 "$F" && chown ffmdbg1 "$F"
# The root-only file: the right debug file, so that a read by root would name file:line.
mkdir -p "$T/secret" && cp "$T/app.debug" "$T/secret/app.debug" && chmod 0600 "$T/secret/app.debug"
L=$T/user/link/app.debug
rm "$L" && ln -s "$T/secret/app.debug" "$L" && chown -h ffmdbg1 "$L"
touch -a -d '2001-01-01 00:00:00' "$T/secret/app.debug"
atime0=$(stat -c %X "$T/secret/app.debug")

# Every path ffmd tries for the slow case's debug file (beside the binary, .debug/, the debug
# directory) stalls 3 s in its open, past the 250 ms deadline.
export FFM_TEST_OPEN_DELAY=slow.debug:3000
start_ffmd || { notok "ffmd starts"; finish; }
ctl calibrate --driver "$FAKE/libcuda.so.1" >/dev/null 2>&1 ||
	{ notok "calibrate the simulated driver"; finish; }

# watch FILE [PERIOD]: until $T/stop exists (status every PERIOD s, default 0.1), the worst
# ffmctl status time (ms) and the longest time (ms)
# a process of the user stayed stopped, into FILE as "worst_status longest_stop".
watch() {
	local worst=0 stop=0 longest=0 t0 ms
	while [ ! -e "$T/stop" ]; do
		t0=$(date +%s%N)
		timeout 5 "$B/ffmctl" --runtime-dir "$T/run" status >/dev/null 2>&1
		ms=$((($(date +%s%N) - t0) / 1000000))
		[ $ms -gt $worst ] && worst=$ms
		if ps -u ffmdbg1 -o stat= 2>/dev/null | grep -q '^T'; then
			stop=$((stop + ms + 100))
			[ $stop -gt $longest ] && longest=$stop
		else
			stop=0
		fi
		echo "$worst $longest" >"$1"
		sleep "${2:-0.1}"
	done
}
# ping_watch FILE: until $T/stop exists, ffmd's answer time (ms) to a ping every 20 ms from one
# client process; the worst into FILE.
ping_watch() {
	python3 - "$T/run/ffmd.sock" "$T/stop" "$1" <<'PY'
import os, socket, sys, time
sock, stop, out = sys.argv[1:4]
worst = 0.0
while not os.path.exists(stop):
    t0 = time.monotonic()
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(10)
        s.connect(sock)
        s.send(b"FFM/1 ping\n")
        s.recv(4096)
        s.close()
    except OSError:
        pass
    worst = max(worst, (time.monotonic() - t0) * 1e3)
    with open(out, "w") as f:
        f.write("%d\n" % worst)
    time.sleep(0.02)
PY
}
# run_case NAME [PERIOD]: the user's app in a --uid job; sets rc, worst, longest, rep; with
# PING set, ping_watch into $T/ping meanwhile.
run_case() {
	local name=$1 period=${2:-0.1}
	rm -f "$T/stop"
	ctl job start "dbg-$name" --key "dbg-$name" --uid "$U1" >/dev/null || { rc=99; return; }
	watch "$T/watch-$name" "$period" &
	local wpid=$! ppid=
	# (after the job's start: opening its store is the loop's, and not what is measured)
	[ -z "${PING:-}" ] || { ping_watch "$T/ping" & ppid=$!; }
	timeout 60 setpriv --reuid="$U1" --regid="$U1" --clear-groups \
		env LD_LIBRARY_PATH="$FAKE" "$T/user/$name/app" --iters 1500 >"$T/$name.out" 2>&1
	rc=$?
	sleep 0.5
	touch "$T/stop"
	wait $wpid $ppid
	read -r worst longest <"$T/watch-$name"
	timeout 10 "$B/ffmctl" --runtime-dir "$T/run" job end "dbg-$name" >/dev/null 2>&1 || rc=98
	rep=$(timeout 20 "$B/ffmctl" --state-dir "$T/state" report "dbg-$name" 2>&1)
}

# ---- a debuglink to a FIFO ---------------------------------------------------------------------
run_case fifo
# (Should ffmd be stuck in the FIFO's open, let it go so that the next cases run.)
timeout 1 sh -c ": >'$F'" 2>/dev/null
if [ $rc = 0 ] && [ "$worst" -lt 1000 ] && [ "$longest" -lt 1000 ] && [[ $rep == *cuCtxSynchronize* ]]; then
	ok "debuglink to a FIFO: status within $worst ms, never stopped, the run finishes and is measured"
else
	notok "debuglink to a FIFO (rc $rc, status worst $worst ms, stopped $longest ms)"
	{ echo "$rep" | head -n 20; tail -n 5 "$T/ffmd.log"; } | diag
fi

# ---- a debuglink to a link to a root-only file --------------------------------------------------
run_case link
atime1=$(stat -c %X "$T/secret/app.debug")
if [ $rc = 0 ] && [ "$worst" -lt 1000 ] && [ "$longest" -lt 1000 ] && [[ $rep == *cuCtxSynchronize* ]] &&
	[[ $rep != *"$SITE"* ]] && [ "$atime1" = "$atime0" ]; then
	ok "debuglink to a root-only file: never read by ffmd, the run measured without its lines"
else
	notok "debuglink to a root-only file (rc $rc, status $worst ms, atime $atime0 -> $atime1)"
	echo "$rep" | head -n 20 | diag
fi

# ---- the user's own debug file --------------------------------------------------------------------
run_case good
if [ $rc = 0 ] && [ "$worst" -lt 1000 ] && echo "$rep" | grep -q "cuCtxSynchronize.*$SITE"; then
	ok "debuglink to the user's own 0600 debug file: file:line ($SITE)"
else
	notok "debuglink to the user's own debug file names $SITE (rc $rc)"
	echo "$rep" | head -n 20 | diag
fi

# ---- a debug file whose opens stall -------------------------------------------------------------
stalls0=$(grep -c 'test delay of 3000 ms opening .*slow.debug' "$T/ffmd.log")
PING=1 run_case slow
ping=$(cat "$T/ping" 2>/dev/null || echo 99999)
stalls=$(($(grep -c 'test delay of 3000 ms opening .*slow.debug' "$T/ffmd.log") - stalls0))
if [ $rc = 0 ] && [ "$stalls" -gt 0 ] && [ "$ping" -lt 150 ] && [ "$worst" -lt 1000 ] &&
	[ "$longest" -lt 1000 ] && [[ $rep == *cuCtxSynchronize* ]]; then
	msg="ping answered within $ping ms at worst, status $worst ms (loop never waited)"
	ok "debug file opens stalled $stalls times: $msg"
else
	msg="ping worst $ping ms, status worst $worst ms, stopped $longest ms"
	notok "debug file opens that stall (rc $rc, $stalls stalls, $msg)"
	{ echo "$rep" | head -n 20; tail -n 5 "$T/ffmd.log"; } | diag
fi

echo "1..$n"
finish
