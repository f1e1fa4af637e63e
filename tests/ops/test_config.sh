#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmd's config file as the admin meets it (TAP); tests/daemon/test_config.c has the parser's
# cases:
#   - `ffmd --config DIR` (a directory), a FIFO, /dev/null: ffmd exits 1 at once saying the file
#     is not a regular file (a directory used to load as an empty config; a FIFO blocked ffmd);
#   - `[rule a b]`: exit 1 naming the line (it used to become rule "a");
#   - more rules than FFM_MAX_RULES (half of the FFM_MAX_JOBS job slots): exit 1 naming the
#     limit; as root, with the most rules allowed, jobs still start (as many rules as slots
#     used to take every one).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
[ -x "$B/ffmd" ] || { echo "# no $B/ffmd (make); skipping"; exit 77; }

# The job slots (bpf/ffm.h) and the rules the config may name: half of them (daemon/server.h).
SLOTS=$(sed -n 's/^#define FFM_MAX_JOBS \([0-9]*\).*/\1/p' bpf/ffm.h)
MAX_RULES=$((SLOTS / 2))

# bad_config NAME WANT PATH: ffmd exits 1 within 5 s, its message names PATH and says WANT.
bad_config() {
	local name=$1 want=$2 path=$3 out rc
	out=$(timeout 5 "$B/ffmd" --state-dir "$T/state" --runtime-dir "$T/run" --config "$path" 2>&1)
	rc=$?
	if [ $rc = 1 ] && [[ $out == *"$path"* ]] && [[ $out == *"$want"* ]]; then
		ok "$name: exit 1, $(echo "$out" | tail -n 1)"
	else
		notok "$name (rc $rc$([ $rc = 124 ] && echo ": still running after 5 s"))"
		echo "$out" | tail -n 5 | diag
	fi
}
mkdir -p "$T/state" "$T/run" "$T/conf.d"
mkfifo "$T/fifo"
bad_config "--config DIR" "not a regular file (a directory)" "$T/conf.d"
bad_config "--config FIFO (no writer: must not block)" "not a regular file (a FIFO)" "$T/fifo"
bad_config "--config /dev/null" "not a regular file (a character device)" /dev/null

printf 'flush_ms = 100\n[rule a b]\nuid = 1000\n' >"$T/two-names.conf"
bad_config "[rule a b]" "$T/two-names.conf:2: want [rule NAME] with one name, not [rule a b]" \
	"$T/two-names.conf"

rules() { # rules N FILE: N rules, one uid each
	local i
	for i in $(seq 0 $(($1 - 1))); do printf '[rule r%d]\nuid = %d\n' "$i" $((50000 + i)); done >"$2"
}
rules "$SLOTS" "$T/all.conf"
bad_config "$SLOTS rules (every job slot)" "more than $MAX_RULES rules" "$T/all.conf"
rules $((MAX_RULES + 1)) "$T/over.conf"
bad_config "$((MAX_RULES + 1)) rules" \
	"$T/over.conf:$((2 * MAX_RULES + 1)): more than $MAX_RULES rules" "$T/over.conf"

# With the most rules allowed, the scheduler's jobs still get slots.
if [ "$(id -u)" != 0 ]; then
	skip "jobs start beside $MAX_RULES rules" "needs root (ffmd loads BPF programs)"
else
	rules $MAX_RULES "$T/max.conf"
	if start_ffmd --config "$T/max.conf"; then
		good=0
		for i in $(seq 1 8); do
			ctl job start "slot-$i" --uid $((60000 + i)) >/dev/null 2>&1 && good=$((good + 1))
		done
		out=$(ctl status 2>&1)
		if [ $good = 8 ]; then
			ok "8 jobs start beside $MAX_RULES rules"
		else
			notok "$good of 8 jobs started beside $MAX_RULES rules"
			{ echo "$out"; tail -n 5 "$T/ffmd.log"; } | diag
		fi
		stop_ffmd
	else
		notok "ffmd starts with $MAX_RULES rules"
	fi
fi
echo "1..$n"
finish
