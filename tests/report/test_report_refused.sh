#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A job whose store ffmctl refuses (TAP). Stores are found by opening every key file, and the
# files that are not usable stores are skipped; `report` then said "no store holds it" for a
# job whose data sat in a store it could not read. Under a state directory with one good store
# and three refused ones (not SQLite at all, a foreign SQLite database, an ffm store of a newer
# schema: the job's own, of its owner uid 1000) and a node's corrupt store (nodes/ layout: a
# published copy in done/<uid>/, what readers of a node's stores open):
#   - report, diff and export of the job exit 1 naming each refused file with its reason, the
#     node's too (every verb reads every node's stores);
#   - a job of the good store is still reported; a job in no store still gets "no store holds
#     it" when nothing was refused;
#   - the refused files are left as they were.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
FFMCTL=$B/ffmctl
SYNTH=$B/tests/ffm-synth

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

if [ ! -x "$FFMCTL" ] || [ ! -x "$SYNTH" ] || ! python3 -c 'import sqlite3' 2>/dev/null; then
	echo "1..0 # SKIP needs $FFMCTL, $SYNTH (make) and python3 with sqlite3"
	exit 77
fi
T=$(mktemp -d /tmp/ffm-test-refused-XXXXXX)
trap 'rm -rf "$T"' EXIT
S=$T/state
K=$S/keys

synth() { "$SYNTH" --iters 5 --stages 1 --scenarios unnecessary "$@" >/dev/null ||
	{ echo "Bail out! ffm-synth failed"; exit 1; }; }
synth --state "$S" --key good --job other
synth --state "$S" --key newer --job lost
synth --state "$T/empty" --key good --job other
mkdir -p "$S/nodes/gpu01/done/1000"
python3 - "$K" "$S/nodes/gpu01/done/1000" <<'EOF'
import sqlite3, sys
keys, node = sys.argv[1], sys.argv[2]
c = sqlite3.connect(keys + "/newer@1000.db")  # the job's own store, from a newer ffm
c.execute("PRAGMA user_version = 99")
c.commit()
c.close()
c = sqlite3.connect(keys + "/foreign.db")  # some other application's database
c.execute("CREATE TABLE t(x)")
c.commit()
c.close()
open(keys + "/garbage.db", "wb").write(b"not an SQLite file at all\n" * 40)
open(node + "/node.db", "wb").write(b"SQLite format 3\0" + b"\xff" * 84)  # a header, cut short
EOF
sums() { md5sum "$K"/newer@1000.db "$K"/foreign.db "$K"/garbage.db "$S"/nodes/gpu01/done/1000/node.db; }
before=$(sums)

NEWER="$K/newer@1000.db: an ffm store of a newer schema (this ffm reads store schema versions up to"
FOREIGN="$K/foreign.db: an SQLite database, but not an ffm store"
GARBAGE="$K/garbage.db: not a usable SQLite database"
NODE="$S/nodes/gpu01/done/1000/node.db: not a usable SQLite database"

# names VERB OUT RC EXPECTED...: exit 1 and each EXPECTED line in OUT.
names() {
	local verb=$1 out=$2 rc=$3 want missing=
	shift 3
	for want in "$@"; do
		[[ $out == *"ffmctl $verb: $want"* ]] || missing+=" [$want]"
	done
	if [ "$rc" = 1 ] && [ -z "$missing" ]; then
		ok "$verb of a job in a refused store: exit 1, names each refused file and why"
	else
		notok "$verb of a job in a refused store (rc $rc; missing:$missing)"
		echo "$out" | sed 's/^/# /'
	fi
}
out=$("$FFMCTL" --state-dir "$S" report lost 2>&1); rc=$?
names report "$out" $rc "no job 'lost' under $S: no usable store holds it, and 4 stores could not" \
	"$NEWER" "$FOREIGN" "$GARBAGE" "$NODE"
out=$("$FFMCTL" --state-dir "$S" report lost --json 2>&1 >/dev/null); rc=$?
names report "$out" $rc "$NEWER"
out=$("$FFMCTL" --state-dir "$S" diff lost other 2>&1); rc=$?
names diff "$out" $rc "$NEWER" "$FOREIGN" "$GARBAGE" "$NODE"
out=$("$FFMCTL" --state-dir "$S" export lost --format hatchet -o "$T/h.json" 2>&1); rc=$?
names export "$out" $rc "no job 'lost' under $S: no usable store holds it, and 4 stores could not" \
	"$NEWER" "$FOREIGN" "$GARBAGE" "$NODE"

out=$("$FFMCTL" --state-dir "$S" report other 2>&1); rc=$?
if [ $rc = 0 ] && [[ $out == *"job other, key good"* ]]; then
	ok "a job of the good store is reported beside the refused ones"
else
	notok "report of the good store's job (rc $rc)"
	echo "$out" | head -n 5 | sed 's/^/# /'
fi
out=$("$FFMCTL" --state-dir "$T/empty" report nosuch 2>&1); rc=$?
want="ffmctl report: no job 'nosuch' under $T/empty: no store holds it (ffmctl jobs lists the recorded ones; --state-dir reads another directory)"
if [ $rc = 1 ] && [ "$out" = "$want" ]; then
	ok "a job in no store, nothing refused: no store holds it"
else
	notok "a job in no store (rc $rc)"
	echo "$out" | sed 's/^/# /'
fi
if [ "$(sums)" = "$before" ]; then
	ok "the refused files are left as they were"
else
	notok "a refused file was changed"
fi

echo "1..$n"
[ "$fails" = 0 ]
