# SPDX-License-Identifier: MIT
# Sourced by the tests of ffmd's loop (tests/daemon/test_sec_slowopen.sh, test_sec_loop.sh), after
# tests/ops/lib.sh and start_ffmd: slow opens of a user's files by ffmd, and pings of the loop.
# Both run until $T/stop exists.

# hold OUT FILE...: every open of a FILE by ffmd held HOLD_S, any other allowed at once. OUT gets
# "error E", then "opens" once listening, then "opens ffmd-opens FILE-INDEXES..."; OUT.t the
# monotonic time at which each of ffmd's held opens came.
hold() {
	python3 - "$T/stop" "$FFMD_PID" "$HOLD_S" "$@" <<'EOF'
import ctypes, os, select, struct, sys, time
stop, ffmd, hold_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
out, files = sys.argv[4], sys.argv[5:]
libc = ctypes.CDLL(None, use_errno=True)
FAN_CLASS_CONTENT, FAN_CLOEXEC, FAN_NONBLOCK = 0x4, 0x1, 0x2
FAN_MARK_ADD, FAN_OPEN_PERM, FAN_ALLOW = 0x1, 0x10000, 0x1
fd = libc.fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK, os.O_RDONLY)
ok = fd >= 0 and all(libc.fanotify_mark(fd, FAN_MARK_ADD, ctypes.c_uint64(FAN_OPEN_PERM), -100,
                                        f.encode()) == 0 for f in files)
if not ok:
    open(out, "w").write("error %d\n" % ctypes.get_errno())
    sys.exit(1)
ino = [os.stat(f).st_ino for f in files]
opens, seen, held = 0, set(), []
open(out, "w").write("0\n")
tl = open(out + ".t", "w", buffering=1)
while not os.path.exists(stop) or held:
    select.select([fd], [], [], 0.02)
    try:
        buf = os.read(fd, 4096)
    except BlockingIOError:
        buf = b""
    while len(buf) >= 24:
        ln, _, _, _, _, efd, pid = struct.unpack_from("IBBHQii", buf)
        buf = buf[ln:]
        if pid != ffmd:
            os.write(fd, struct.pack("iI", efd, FAN_ALLOW))
            os.close(efd)
            continue
        held.append((time.monotonic() + hold_s, efd))
        tl.write("%.3f\n" % time.monotonic())
        opens += 1
        st = os.fstat(efd)
        seen |= {i for i, n in enumerate(ino) if n == st.st_ino}
    for t, efd in [h for h in held if h[0] <= time.monotonic()]:
        os.write(fd, struct.pack("iI", efd, FAN_ALLOW))
        os.close(efd)
        held.remove((t, efd))
    open(out, "w").write("%d %s\n" % (opens, " ".join(map(str, sorted(seen)))))
EOF
}
# ping OUT: until $T/stop, ffmd's socket pinged every 5 ms over a fresh connection; OUT.all gets
# "start_time ms" for each.
ping_loop() {
	python3 - "$T/run/ffmd.sock" "$1" "$T/stop" <<'EOF'
import os, socket, sys, time
log = open(sys.argv[2] + ".all", "w", buffering=1)
while not os.path.exists(sys.argv[3]):
    t0 = time.monotonic()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    try:
        s.connect(sys.argv[1])
        s.send(b"FFM/1 ping\n")
        s.recv(1 << 16)
    except OSError:
        pass
    s.close()
    log.write("%.3f %.1f\n" % (t0, (time.monotonic() - t0) * 1e3))
    time.sleep(0.005)
EOF
}

# hold_start FILE...: hold (above) in the background, on $T/held, $HPID its pid, from when it
# listens; the test skips where fanotify is not available.
hold_start() {
	local held_n
	rm -f "$T/stop"
	hold "$T/held" "$@" &
	HPID=$!
	for _ in $(seq 50); do [ -s "$T/held" ] && break; sleep 0.1; done
	read -r held_n _ <"$T/held"
	[ "$held_n" = 0 ] || { echo "# fanotify not available here: $held_n"; touch "$T/stop"; exit 77; }
}
# pings_worst FROM TO: of the pings ($T/pings.all) in flight between the monotonic times FROM
# and TO, "count slowest-ms".
pings_worst() {
	awk -v a="$1" -v b="$2" '$1 < b && $1 + $2 / 1000 > a { m++; if ($2 > w) w = $2 }
		END { printf "%d %.0f\n", m, w }' "$T/pings.all"
}
# now: the monotonic time, as the pings log it.
now() { python3 -c 'import time; print("%.3f" % time.monotonic())'; }
