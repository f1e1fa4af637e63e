# SPDX-License-Identifier: MIT
# Shared by the shell tests under tests/ops and tests/proto: TAP helpers, a private ffmd, a
# scratch cgroup. Source it after `cd` to the repository root; it sets B (the build directory)
# and T (a scratch directory removed at exit, with everything started here).

B=${FFM_BUILD:-build}
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
# notok_timing NAME: a failed judgment of time or of an estimate made from times. On a
# sanitizer build (`make sanitize` sets FFM_SANITIZE=1) ffmd and ffmctl run instrumented, 2-3x
# slower beside the plain workloads: what they measure is not judged there (the plain pass
# judges it), only that nothing is reported; the case is then skipped, saying so.
notok_timing() {
	if [ -n "${FFM_SANITIZE:-}" ]; then skip "$1" "not judged on a sanitizer build"; else notok "$1"; fi
}
diag() { sed 's/^/# /'; }
check() { # check NAME CMD...: ok when CMD succeeds
	local name=$1
	shift
	if "$@"; then ok "$name"; else notok "$name"; fi
}
finish() { [ "$fails" = 0 ]; exit $?; }

# The whole file skips (exit 77) unless root: ffmd loads BPF programs.
need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "# needs root (ffmd loads BPF programs); skipping"
		exit 77
	fi
}

# FAKE and WL: the build's simulated driver and workloads; exit 2 (an error) where they are not
# built.
need_sim_workloads() {
	FAKE=$PWD/$B/fakecuda
	WL=$PWD/$B/workloads
	[ -f "$FAKE/libcuda.so.1" ] && [ -x "$WL/unnecessary_sync" ] ||
		{ echo "# simulated driver or workloads not built"; exit 2; }
}

# 0755 so that the unprivileged users of the tests can reach the socket inside.
T=$(mktemp -d /tmp/ffm-ops.XXXXXX) || exit 2
chmod 755 "$T"
FFMD_PID=
CGROUP=
TEST_USERS=()
MADE_USERS=()
cleanup() {
	local u
	# Nothing of the test's users may outlive the test, stopped or not.
	for u in "${TEST_USERS[@]}"; do pkill -KILL -u "$u" 2>/dev/null; done
	[ -n "$FFMD_PID" ] && kill "$FFMD_PID" 2>/dev/null && wait "$FFMD_PID" 2>/dev/null
	for p in $(jobs -p); do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	# Child cgroups first (tests may create job_* directories inside).
	[ -n "$CGROUP" ] && { rmdir "$CGROUP"/*/ 2>/dev/null; rmdir "$CGROUP" 2>/dev/null; }
	rm -rf "$T"
	for u in "${MADE_USERS[@]}"; do userdel "$u" 2>/dev/null; done
}
trap cleanup EXIT

# make_users NAME...: unprivileged users of the test's own (made unless they exist; the whole
# file skips without useradd), their processes killed and the users made deleted at exit.
make_users() {
	local u
	command -v useradd >/dev/null || { echo "# useradd not found (passwd package); skipping"; exit 77; }
	for u in "$@"; do
		TEST_USERS+=("$u")
		id "$u" >/dev/null 2>&1 && continue
		useradd -M -d /nonexistent -s /bin/sh "$u" || { echo "# cannot create user $u"; exit 77; }
		MADE_USERS+=("$u")
	done
}

# start_ffmd [ARGS...]: a private ffmd on $T/state and $T/run; fails after 15 s without socket.
start_ffmd() {
	mkdir -p "$T/state" "$T/run"
	"$B/ffmd" --state-dir "$T/state" --runtime-dir "$T/run" "$@" >"$T/ffmd.log" 2>&1 &
	FFMD_PID=$!
	for _ in $(seq 150); do
		[ -S "$T/run/ffmd.sock" ] && return 0
		kill -0 "$FFMD_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "# ffmd did not start:"
	diag <"$T/ffmd.log"
	FFMD_PID=
	return 1
}
stop_ffmd() {
	[ -n "$FFMD_PID" ] || return 0
	kill "$FFMD_PID" 2>/dev/null
	wait "$FFMD_PID" 2>/dev/null
	local rc=$?
	FFMD_PID=
	return $rc
}
# ffmctl on this test's daemon and state; the JSON it prints is checked (tests/ops/jsoncheck.sh).
ctl() { ffmctl_checked "$B/ffmctl" --runtime-dir "$T/run" --state-dir "$T/state" "$@"; }
. tests/ops/jsoncheck.sh
# The cgroup v2 hierarchy (pure v2 at /sys/fs/cgroup, or hybrid's /sys/fs/cgroup/unified).
cgroup2_root() {
	local m
	for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ "$(stat -f -c %T "$m" 2>/dev/null)" = cgroup2fs ] && { echo "$m"; return 0; }
	done
	return 1
}
# make_cgroup NAME: a fresh cgroup v2 directory (removed at exit) in $CGROUP, or fail.
make_cgroup() {
	local root
	root=$(cgroup2_root) || return 1
	CGROUP=$root/$1-$$
	mkdir "$CGROUP" 2>/dev/null || { CGROUP=; return 1; }
}
