#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmd's control socket under hostile clients (TAP), against a real ffmd started here as root:
# malformed, oversized (> 4096 bytes, up to 64 KiB), truncated, empty and never-sending
# connections, a half-closed one, one that leaves before the answer, and more idle connections
# than ffmd has slots. Each must get an error answer (status = the errno) or be closed, ffmd
# closes an idle one after FFM_PROTO_TIMEOUT_MS (2 s, checked within 1.5..6 s), and after each
# case a `ping` still gets "pong" and ffmd is still running.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
start_ffmd || { echo "not ok 1 - ffmd starts"; echo "1..1"; exit 1; }
python3 - "$T/run/ffmd.sock" "$FFMD_PID" <<'PY'
import errno, os, socket, struct, sys, time

SOCK, PID = sys.argv[1], int(sys.argv[2])
n = fails = 0

def tap(good, name, detail=""):
    global n, fails
    n += 1
    if not good:
        fails += 1
    print(("ok" if good else "not ok"), n, "-", name)
    if not good and detail:
        print("# " + str(detail).replace("\n", "\n# "))
    sys.stdout.flush()

def conn():
    # Connect the way ffmctl does: a blocking connect() bounded by SO_SNDTIMEO. With a Python
    # timeout the socket is non-blocking, and an AF_UNIX connect() to a full listen backlog
    # (ffmd busy on a loaded machine) fails at once with EAGAIN instead of waiting.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 10, 0))
    s.connect(SOCK)
    s.settimeout(10)
    return s

def ask(msg):
    """Send one message; the answer (bytes), or b'' when ffmd closed without one."""
    s = conn()
    try:
        s.send(msg)
        return s.recv(1 << 20)
    finally:
        s.close()

def status_of(ans):
    line = ans.split(b"\n", 1)[0].decode(errors="replace")
    parts = line.split(" ", 2)
    return int(parts[1]) if len(parts) >= 2 and parts[0] == "FFM/1" else None, line

def still_serving(after):
    ans = ask(b"FFM/1 ping\n")
    alive = True
    try:
        os.kill(PID, 0)
    except OSError:
        alive = False
    tap(alive and ans.startswith(b"FFM/1 0 pong"), "ffmd still serves after " + after, ans)

def expect_error(name, msg, err):
    ans = ask(msg)
    st, line = status_of(ans)
    tap(st == err, "%s: answered with errno %d (%s)" % (name, err, errno.errorcode[err]),
        "got: %r" % line)
    still_serving(name)

ans = ask(b"FFM/1 ping\n")
tap(ans == b"FFM/1 0 pong\n", "ping answers pong", ans)
expect_error("malformed (no FFM/ header)", b"hello world\n", errno.EPROTO)
expect_error("binary garbage", bytes(range(1, 256)) * 4, errno.EPROTO)
expect_error("unknown verb", b"FFM/1 reboot\n", errno.EOPNOTSUPP)
expect_error("oversized (4097 bytes)", b"FFM/1 status\n" + b"key=" + b"k" * 4079 + b"\n", errno.E2BIG)
expect_error("oversized (64 KiB)", b"FFM/1 status\n" + b"x" * 65536, errno.E2BIG)
expect_error("truncated (argument line without newline)", b"FFM/1 job-end\njob=1", errno.EINVAL)
expect_error("truncated (first line without newline)", b"FFM/1 stat", errno.EPROTO)
expect_error("job-start without selector", b"FFM/1 job-start\njob=x\n", errno.EINVAL)
expect_error("job-end without job", b"FFM/1 job-end\n", errno.ENOENT)

# An empty message reads as end of stream: ffmd closes without answering.
s = conn()
s.send(b"")
ans = s.recv(1 << 20)
s.close()
tap(ans == b"", "empty message: closed without an answer", ans)
still_serving("an empty message")

# Half-closed before sending anything.
s = conn()
s.shutdown(socket.SHUT_WR)
ans = s.recv(1 << 20)
s.close()
tap(ans == b"", "half-closed connection: closed", ans)
still_serving("a half-closed connection")

# Sends a request and leaves before the answer (ffmd's send must not kill it: MSG_NOSIGNAL).
for _ in range(5):
    s = conn()
    s.send(b"FFM/1 status\n")
    s.close()
time.sleep(0.3)
still_serving("clients that leave before the answer")

# Never sends: ffmd closes after its timeout, and answers others meanwhile.
s = conn()
t0 = time.monotonic()
ans2 = ask(b"FFM/1 ping\n")
tap(ans2.startswith(b"FFM/1 0 pong"), "answers others while one connection is idle", ans2)
s.settimeout(10)
try:
    ans = s.recv(1 << 20)
except socket.timeout:
    ans = None
dt = time.monotonic() - t0
tap(ans == b"" and 1.5 <= dt <= 6, "never-sending connection closed after %.1f s (timeout 2 s)" % dt,
    "recv gave %r after %.1f s" % (ans, dt))
s.close()
still_serving("an idle connection")

# More idle connections than ffmd's slots: it must recover once they time out.
idle = [conn() for _ in range(40)]
t0 = time.monotonic()
served = None
while time.monotonic() - t0 < 8:
    try:
        if ask(b"FFM/1 ping\n").startswith(b"FFM/1 0 pong"):
            served = time.monotonic() - t0
            break
    except OSError:
        pass
    time.sleep(0.1)
for c in idle:
    c.close()
tap(served is not None, "40 idle connections: ping served again after %s s" %
    ("%.1f" % served if served is not None else "never (8 s)"))
still_serving("40 idle connections")

# One unprivileged user holding connections open must not lock root (the scheduler's prolog)
# out: ffmd allows a user 4 connections at once and keeps slots for root and the admins.
import pwd
nobody = pwd.getpwnam("nobody")
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.close(r)
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)
    held, refused = [], 0
    for i in range(6):
        c = conn()
        c.settimeout(0.5)
        try:
            if c.recv(16, socket.MSG_PEEK) == b"":
                refused += 1  # closed at once: over the user's limit
        except socket.timeout:
            held.append(c)  # accepted and waiting for a request
        except OSError:
            refused += 1
    os.write(w, b"%d %d" % (len(held), refused))
    time.sleep(1.0)  # keep them open while root asks
    os._exit(0)
os.close(w)
counts = os.read(r, 64).decode().split()
ans = ask(b"FFM/1 ping\n")
os.waitpid(child, 0)
tap(counts == ["4", "2"], "one user gets at most 4 connections (held, refused: %s)" % counts)
tap(ans.startswith(b"FFM/1 0 pong"), "root is served while a user holds connections", ans)

print("1..%d" % n)
sys.exit(1 if fails else 0)
PY
rc=$?
if ! kill -0 "$FFMD_PID" 2>/dev/null; then
	echo "# ffmd died; its log:"
	diag <"$T/ffmd.log"
	rc=1
fi
exit $rc
