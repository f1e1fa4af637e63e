#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmd's config file as the admin meets it (TAP); tests/daemon/test_config.c has the parser's
# cases:
#   - `ffmd --config DIR` (a directory), a FIFO, /dev/null: ffmd exits 1 at once saying the file
#     is not a regular file (a directory used to load as an empty config; a FIFO blocked ffmd);
#   - `[rule a b]`: exit 1 naming the line (it used to become rule "a");
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
[ -x "$B/ffmd" ] || { echo "# no $B/ffmd (make); skipping"; exit 77; }

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

echo "1..$n"
finish
