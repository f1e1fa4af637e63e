#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# docs/STORE.md cannot rot: every ```sql block in it runs, read-only, against a store that
# `ffmctl profile` wrote (real BPF, the simulated driver, stages 1-4 of a workload with planted
# problems) and must return rows; every table and view of the store is named in the document;
# and the stored analysis (what profile saved) is what `ffmctl report --json` shows: the same
# recoverable time, the same problems in the same order at the same call sites.
# Skips (exit 77, saying why) without root/BPF or the simulated driver.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh # TAP helpers, B, T
FFMCTL=$B/ffmctl
WL=$B/workloads
FAKE=$B/fakecuda
need_root
if [ ! -e "$FAKE/libcuda.so.1" ] || [ ! -x "$WL/misplaced_sync" ] || ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP needs the simulated driver and the workloads (make) and python3"
	exit 77
fi

LD_LIBRARY_PATH=$FAKE "$FFMCTL" --state-dir "$T/s" profile --quiet --job-id doc --key doc \
	--stages 1-4 -- "$WL/misplaced_sync" --iters 40 >"$T/profile.out" 2>"$T/profile.err"
rc=$?
if [ $rc != 0 ] && grep -qiE 'permission|BPF' "$T/profile.err"; then
	echo "1..0 # SKIP BPF not usable here: $(head -c 200 "$T/profile.err")"
	exit 77
fi
check "profile --stages 1-4 exits 0" test $rc = 0
[ $rc = 0 ] || diag <"$T/profile.err"
DB=$T/s/keys/doc.db
before=$(sqlite3 -readonly "$DB" 'SELECT id, at_unix FROM analyses')
"$FFMCTL" --state-dir "$T/s" report doc --json >"$T/report.json"

cat >"$T/doc.py" <<'PY'
import re, sqlite3, sys, urllib.parse
doc, db = sys.argv[1], sys.argv[2]
text = open(doc).read()
blocks = re.findall(r"```sql\n(.*?)```", text, re.S)
assert len(blocks) >= 8, "docs/STORE.md has %d sql blocks" % len(blocks)
con = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(db), uri=True)
bad = 0
for i, q in enumerate(blocks, 1):
    first = q.strip().splitlines()[0]
    try:
        rows = con.execute(q).fetchall()
    except sqlite3.Error as e:
        print("# block %d (%s): %s" % (i, first, e)); bad += 1; continue
    if not rows:
        print("# block %d (%s): no rows" % (i, first)); bad += 1
names = [r[0] for r in con.execute(
    "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'")]
missing = [n for n in names if not re.search(r"(^|[^a-z_])%s([^a-z_]|$)" % re.escape(n), text)]
if missing:
    print("# not documented: %s" % ", ".join(missing)); bad += 1
cols = {}
for n in names:
    for c in con.execute("SELECT name FROM pragma_table_info(?)", (n,)):
        if not re.search(r"`%s`" % re.escape(c[0]), text) and not re.search(
                r"[ ,(]%s[ ,)]" % re.escape(c[0]), text):
            cols.setdefault(n, []).append(c[0])
if cols:
    print("# columns not documented: %r" % cols); bad += 1
print("# %d sql blocks, %d tables and views" % (len(blocks), len(names)))
sys.exit(1 if bad else 0)
PY
check "every sql block of docs/STORE.md runs and returns rows; every table, view and column is documented" \
	python3 "$T/doc.py" docs/STORE.md "$DB"

cat >"$T/same.py" <<'PY'
import json, sqlite3, sys, urllib.parse
rep = json.load(open(sys.argv[1]))
con = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(sys.argv[2]), uri=True)
a = con.execute("SELECT id, job_id, recoverable_ns, have_problems, grouping, wall_ns,"
                " tool_version FROM latest_analysis").fetchone()
assert a and a[1] == "doc", a
assert a[3] == 1 and rep["problems_known"], "problems known in both"
assert abs(a[2] / 1e9 - rep["recoverable_s"]) < 1e-9, (a[2], rep["recoverable_s"])
assert abs(a[5] / 1e9 - rep["wall_s"]) < 1e-9, (a[5], rep["wall_s"])
assert a[4] == rep["grouping"], (a[4], rep["grouping"])
rows = con.execute("SELECT rank, problem_name, count, benefit_ns, line, driver_function FROM"
                   " problems_v WHERE analysis = ? ORDER BY rank", (a[0],)).fetchall()
want = [(p["rank"], p["type"], p["count"], p["call_site"]["line"], p["api"])
        for p in rep["problems"]]
got = [(r[0], r[1], r[2], r[4], r[5]) for r in rows]
assert got == want, "stored %r != report %r" % (got, want)
for r, p in zip(rows, rep["problems"]):
    assert abs(r[3] / 1e9 - p["benefit_s"]) < 1e-9, (r, p["benefit_s"])
print("# %d problems, recoverable %.6f s, stored by %s" % (len(rows), a[2] / 1e9, a[6]))
PY
check "the stored analysis is the report's: recoverable time, problems, ranks, call sites" \
	python3 "$T/same.py" "$T/report.json" "$DB"
check "ffmctl report writes no analysis: the stored one is still profile's" \
	test "$(sqlite3 -readonly "$DB" 'SELECT id, at_unix FROM analyses')" = "$before" -a -n "$before"
echo "1..$n"
finish
