#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The owned parts of ffmd's state (docs/DESIGN.md, "Who owns what of ffmd's state") are named
# by their owner's file alone: each sub-object below may appear as `d->member` only in the
# files listed (tests/ops/ffmd_members.sh counts them). A new file reaching into one fails
# here: call the owner's function instead, or say in daemon/ffmd_int.h why it is shared.
cd "$(dirname "$0")/../.." || exit 2
OWNERS='hl:holds.c
lk:lookups.c
det:links.c
bridge:links.c
att:links.c
ctl:control.c
copies:jobs.c
lp:control.c,server.c
waiters:drivers.c
sample_hint:adaptive.c'
table=$(tests/ops/ffmd_members.sh) || exit 2
n=0 fails=0
while IFS=: read -r m allowed; do
	n=$((n + 1))
	line=$(grep "^$m " <<<"$table")
	if [ -z "$line" ]; then
		echo "not ok $n - $m: no such member of struct ffmd"
		fails=$((fails + 1))
		continue
	fi
	bad=""
	for f in $(cut -d' ' -f3- <<<"$line"); do
		case ",$allowed," in *",$f,"*) ;; *) bad="$bad $f" ;; esac
	done
	if [ -z "$bad" ]; then
		echo "ok $n - d->$m named only by $allowed"
	else
		echo "not ok $n - d->$m named by$bad too (owner: $allowed)"
		fails=$((fails + 1))
	fi
done <<<"$OWNERS"
echo "1..$n"
exit $((fails > 0))
