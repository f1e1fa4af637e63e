#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmd_members.sh [HEADER]: who touches struct ffmd's members. For each member of struct ffmd
# (daemon/ffmd_int.h, or HEADER), the daemon files that name it through a `struct ffmd *d`
# (`d->member`), their number first. A measure for docs/DESIGN.md's "The daemon's parts": a
# member its owner alone changes is named by one file. Prints "member files names...".
cd "$(dirname "$0")/../.." || exit 2
H=${1:-daemon/ffmd_int.h}
members=$(awk '
	/^struct ffmd \{/ { on = 1; depth = 0 }
	on {
		line = $0
		sub(/\/\*.*\*\//, "", line); sub(/\/\*.*/, "", line)
		opens = gsub(/\{/, "{", line); closes = gsub(/\}/, "}", line)
		if (depth + opens - closes == 1 || (depth == 2 && closes > opens)) {
			if (depth + opens - closes == 1 && line ~ /;/) {
				s = line; sub(/\[.*/, "", s); gsub(/;.*/, "", s)
				n = split(s, parts, ",")
				for (i = 1; i <= n; i++) {
					p = parts[i]; gsub(/^[^A-Za-z_]*.*[^A-Za-z0-9_]/, "", p)
					if (p != "") print p
				}
			}
		}
		depth += opens - closes
		if (depth == 0 && closes > 0) exit
	}' "$H")
for m in $members; do
	files=$(grep -lE "\bd->$m\b" daemon/*.c daemon/*.h 2>/dev/null | sed 's|daemon/||' | tr '\n' ' ')
	echo "$m $(echo $files | wc -w) $files"
done | sort -k2,2nr -k1,1
