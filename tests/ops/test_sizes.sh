#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The size limits of docs/DESIGN.md ("Rules of the house"), checked on every product source
# file (tests, benchmarks, the simulated driver and generated files aside):
#   - no file over 1500 lines;
#   - no function over 100 lines (from its opening brace in column 0 to its closing one, the
#     style every file here follows);
#   - no line over 100 characters (tabs counted as one: the limit the reflowed files keep).
# A file or function that outgrows them is split by concern, not exempted here.
cd "$(dirname "$0")/../.." || exit 2
MAX_FILE=1500 MAX_FUNC=100
n=0 fails=0
check() { # check OK MESSAGE
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		fails=$((fails + 1))
		echo "not ok $n - $2"
	fi
}
mapfile -t files < <(git ls-files 'bpf/*.c' 'bpf/*.h' 'daemon/*.[ch]' 'symbols/*.[ch]' 'stages/*.[ch]' \
	'store/*.[ch]' 'cli/*.[ch]' 'analysis/*.[ch]' 'common/*.[ch]' 2>/dev/null | grep -v '^bpf/vmlinux.h$')
if [ "${#files[@]}" = 0 ]; then
	echo "1..0 # SKIP not a git checkout: no list of product sources"
	exit 77
fi
big=$(for f in "${files[@]}"; do l=$(wc -l <"$f"); [ "$l" -gt $MAX_FILE ] && echo "$f ($l lines)"; done)
check "$([ -z "$big" ]; echo $?)" "no product source file over $MAX_FILE lines"
[ -z "$big" ] || echo "$big" | sed 's/^/# /'
long=$(awk -v max=$MAX_FUNC '
	FNR == 1 { start = 0 }
	/^\{/ { start = FNR; name = prev }
	/^\}/ && start { if (FNR - start - 1 > max) printf "%s:%d: %s (%d lines)\n", FILENAME, start, name, FNR - start - 1; start = 0 }
	/^[A-Za-z_]/ { prev = $0 }
' "${files[@]}")
check "$([ -z "$long" ]; echo $?)" "no function over $MAX_FUNC lines"
[ -z "$long" ] || echo "$long" | sed 's/^/# /'
wide=$(awk 'length($0) > 100 { printf "%s:%d: %d characters\n", FILENAME, FNR, length($0) }' "${files[@]}")
check "$([ -z "$wide" ]; echo $?)" "no product line over 100 characters"
[ -z "$wide" ] || echo "$wide" | sed 's/^/# /'
echo "1..$n"
[ "$fails" = 0 ]
