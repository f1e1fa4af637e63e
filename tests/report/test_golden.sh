#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Golden outputs (TAP): every printed output of the analysis (report, its JSON and groupings,
# --subsequence, export chrome-trace and hatchet, diff) on the deterministic synthetic stores of
# tests/report/outputs.sh, byte for byte against tests/report/golden/. A change of any printed
# number fails here; a change meant to move numbers rewrites the files with
#   FFM_GOLDEN_UPDATE=1 tests/report/test_golden.sh
# and the commit shows each changed line. The chrome traces are kept as their sha256 (they are
# megabytes); the others whole. The store directory's temporary path is written as STATE.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
G=tests/report/golden
if [ ! -x "$B/ffmctl" ] || [ ! -x "$B/tests/ffm-synth" ]; then
	echo "1..0 # SKIP needs $B/ffmctl and $B/tests/ffm-synth (make)"
	exit 77
fi
T=$(mktemp -d /tmp/ffm-golden.XXXXXX) || exit 2
trap 'rm -rf "$T"' EXIT
. tests/report/outputs.sh

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

outputs_synth "$B/tests/ffm-synth" "$T/stores" || { echo "Bail out! ffm-synth failed"; exit 1; }
outputs_run "$B/ffmctl" "$T/raw" || { echo "Bail out! cannot write $T/raw"; exit 1; }
mkdir -p "$T/out"
for f in "$T"/raw/*; do
	name=$(basename "$f")
	case $name in
	*.chrome*) sha256sum <"$f" | cut -d' ' -f1 >"$T/out/$name.sha256" ;;
	*) sed "s#$T/stores#STATE#g" "$f" >"$T/out/$name" ;;
	esac
done
if [ "${FFM_GOLDEN_UPDATE:-0}" = 1 ]; then
	rm -rf "$G" && mkdir -p "$G" && cp "$T"/out/* "$G"/ ||
		{ echo "Bail out! cannot write $G"; exit 1; }
	echo "# rewrote $(ls "$G" | wc -l) golden files in $G"
fi
for f in "$T"/out/*; do
	name=$(basename "$f")
	if [ ! -f "$G/$name" ]; then
		notok "$name: no golden file (FFM_GOLDEN_UPDATE=1 writes it)"
	elif cmp -s "$G/$name" "$f"; then
		ok "$name"
	else
		notok "$name differs from $G/$name:"
		diff "$G/$name" "$f" | head -n 20 | sed 's/^/# /'
	fi
done
for f in "$G"/*; do
	[ -e "$T/out/$(basename "$f")" ] || notok "$(basename "$f"): golden file of no output"
done
echo "1..$n"
[ "$fails" = 0 ]
