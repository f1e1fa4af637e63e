#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# libbpf's own messages in ffmd's log (TAP; daemon/log.h, ffm_log_libbpf): on a node whose
# tracefs is not mounted (the GPU node of docs/RESULTS.md), the map guard's syscall tracepoint
# fails once, libbpf says so in two lines, and ffmd mounts tracefs and attaches it. Those lines
# are ffmd's debug lines: none without --verbose, both with it, and the map guard is there
# either way. ffmd runs in a mount namespace of its own whose tracefs is unmounted.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
command -v unshare >/dev/null || { echo "# unshare not found; skipping"; exit 77; }
mountpoint -q /sys/kernel/tracing || { echo "# tracefs not mounted here; skipping"; exit 77; }
unshare -m --propagation private sh -c 'umount /sys/kernel/tracing' 2>/dev/null ||
	{ echo "# cannot unmount tracefs in a mount namespace; skipping"; exit 77; }

# run_ffmd LOG [ARGS...]: ffmd without tracefs until it is ready, then stopped
run_ffmd() {
	local log=$1 pid
	shift
	rm -rf "$T/state" "$T/run" && mkdir -p "$T/state" "$T/run" && : >"$T/ffmd.conf"
	unshare -m --propagation private sh -c \
		'umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null
		 exec "$@"' sh "$B/ffmd" --state-dir "$T/state" --runtime-dir "$T/run" \
		--config "$T/ffmd.conf" "$@" >"$log" 2>&1 &
	pid=$!
	for _ in $(seq 150); do
		[ -S "$T/run/ffmd.sock" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}

run_ffmd "$T/plain.log"
if grep -q "ffmd ready" "$T/plain.log"; then ok "ffmd starts without tracefs"; else
	notok "ffmd starts without tracefs"; diag <"$T/plain.log"; fi
if grep -q "^libbpf:" "$T/plain.log"; then
	notok "no line of libbpf's without --verbose"; diag <"$T/plain.log"
else ok "no line of libbpf's without --verbose"; fi
if grep -q "no map guard" "$T/plain.log"; then
	notok "the map guard is attached once ffmd mounted tracefs"; diag <"$T/plain.log"
else ok "the map guard is attached once ffmd mounted tracefs"; fi

run_ffmd "$T/verbose.log" --verbose
# libbpf's line about the tracepoint it could not find, one log line of its own
if grep -q "^libbpf: .*sys_enter_mmap" "$T/verbose.log"; then
	ok "--verbose shows libbpf's lines"
else notok "--verbose shows libbpf's lines"; diag <"$T/verbose.log"; fi
echo "1..$n"
finish
