#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The GPU variants' harness without a GPU (bench/gpu/variants.sh, tests/gpu/variants.cu and
# torch_idioms.py; the runs themselves need the GPU node):
#   - bench/gpu/variants_table.py on made-up runs and reports: the saving is the median of the
#     paired differences (not the difference of the medians), with their minimum and spread;
#     the estimate sums the planted lines' benefits only; a control shows the headline's share
#     of the loop; plain and fixed that computed different results are flagged;
#   - every variant of the runner's lists names a class of variants.cu (or an idiom of
#     torch_idioms.py) that has planted lines, and the controls have none;
#   - torch_idioms.py --dry-run (no torch) names each idiom's planted lines.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=$(mktemp -d /tmp/ffm-test-variants.XXXXXX) || exit 2
trap 'rm -rf "$T"' EXIT
n=0 bad=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); bad=$((bad + 1)); echo "not ok $n - $1"; }
echo "1..5"

# The planted line of a class in variants.cu (the first).
plant() { grep -n "FFM-PLANT: $1 \*/" tests/gpu/variants.cu | head -1 | cut -d: -f1; }
line=$(plant unnecessary_sync)
other=$((line + 1))

# runs FILE MODE:CHECKSUM:LOOP_S...: a .runs file as bench/gpu/runs_lib.sh's wall writes it
runs() {
	local f=$1 r
	shift
	for r in "$@"; do
		IFS=: read -r mode sum loop <<<"$r"
		wall=$(awk -v l="$loop" 'BEGIN { print l + 0.3 }')
		printf '%s PARAMS x\n%s CHECKSUM %s\n%s WALL_S %s\n%s LOOP_S %s\n' "$mode" "$mode" \
			"$sum" "$mode" "$wall" "$mode" "$loop" >>"$T/out/$f.runs"
	done
}
report() { # report NAME HEADLINE PROBLEM...: PROBLEM = line:benefit (in variants.cu)
	local name=$1 head=$2 p sep=""
	shift 2
	{
		printf '{"recoverable_s": %s, "problems": [' "$head"
		for p in "$@"; do
			printf '%s{"type": "unnecessary_sync", "benefit_s": %s, "call_site": ' \
				"$sep" "${p#*:}"
			printf '{"file": "/src/tests/gpu/variants.cu", "line": %s}}' "${p%%:*}"
			sep=", "
		done
		printf ']}\n'
	} >"$T/out/$name.json"
}
mkdir -p "$T/out"
printf '%s\n' "sync|unnecessary_sync|--iters 650" "feed|control_feed|--iters 650" \
	"broken|unnecessary_sync|--iters 650" >"$T/out/variants.list"
# Pairs (plain - fixed): 0.5, 0.1, 2.1: median 0.5, min 0.1, spread 2.0 (the medians' difference
# would be 1.2 - 0.9 = 0.3).
runs sync plain:a:1.0 fixed:a:0.5 fixed:a:1.1 plain:a:1.2 plain:a:3.0 fixed:a:0.9
report sync 0.6 "$line:0.4" "$other:0.1"
# A control's noise (0.02-0.03 s) is no saving to divide by.
runs feed plain:c:1.0 fixed:c:0.98 fixed:c:0.97 plain:c:1.0
report feed 0.002
runs broken plain:a:1.0 fixed:b:0.5
report broken 0.5 "$line:0.5"
python3 bench/gpu/variants_table.py "$T/out" tests/gpu tests/workloads >"$T/table" 2>&1
row() { grep "^| $1 |" "$T/table" | tr -d ' '; }
want="|sync|1.200|0.900|0.500|0.100|2.000|yes|3|0.400|0.600|-20%|+20%"
want="$want|unnecessary_syncatvariants.cu:$line|"
what="the saving is the median of paired differences; the planted line alone is the estimate"
if [ "$(row sync)" = "$want" ]; then
	ok "$what"
else
	notok "$what"
	sed 's/^/# /' "$T/table"
fi
if [ "$(row feed | cut -d'|' -f8,10-13)" = "yes|0.000|0.002|control|0.2%ofloop" ]; then
	ok "a control shows its headline's share of the loop"
else
	notok "a control shows its headline's share of the loop"
	sed 's/^/# /' "$T/table"
fi
if [ "$(row broken | cut -d'|' -f8)" = NO ]; then
	ok "plain and fixed that compute different results are flagged"
else
	notok "plain and fixed that compute different results are flagged"
	sed 's/^/# /' "$T/table"
fi

# Every list of the runner: each class exists in variants.cu, and has planted lines unless it
# is a control; each idiom has planted lines.
python3 - bench/gpu/variants.sh tests/gpu/variants.cu tests/gpu/torch_idioms.py <<'PY' >"$T/lists"
import re, sys
sh, cu, py = (open(f).read() for f in sys.argv[1:4])
classes = set(re.findall(r'\{ "(\w+)", \1 \}', cu))
plants = set(re.findall(r"FFM-PLANT: (\w+) \*/", cu))
idioms = set(re.findall(r"FFM-PLANT: idiom (\w+)", py))
seen = set()
for name, kind, args in re.findall(r"^(\w+)\|(\w+)\|(.*?)\"?$", sh, re.M):
    if kind == "wl":
        continue
    if kind == "torch":
        idiom = re.search(r"--idiom (\w+)", args).group(1)
        if idiom not in idioms:
            print("%s: idiom %s has no planted line" % (name, idiom))
        continue
    seen.add(kind)
    if kind not in classes:
        print("%s: no class %s in variants.cu" % (name, kind))
    elif kind.startswith("control") == (kind in plants):
        print("%s: class %s %s planted lines" % (name, kind, "has" if kind in plants else "lacks"))
if classes - seen:
    print("classes no list runs: %s" % " ".join(sorted(classes - seen)))
print("checked %d classes" % len(seen))
PY
what="every class and idiom of the lists exists, with planted lines unless a control"
if [ "$(cat "$T/lists")" = "checked 12 classes" ]; then
	ok "$what"
else
	notok "$what"
	sed 's/^/# /' "$T/lists"
fi

fail=0
for i in mask nonzero item_if tolist if_tensor timer unpinned; do
	if ! python3 tests/gpu/torch_idioms.py --idiom "$i" --dry-run >"$T/dry" 2>&1 ||
		! grep -q "^PLAN plain: " "$T/dry"; then
		fail=1
		echo "# $i:"
		sed 's/^/# /' "$T/dry"
	fi
done
if [ "$fail" = 0 ]; then
	ok "torch_idioms.py --dry-run names each idiom's planted lines without torch"
else
	notok "torch_idioms.py --dry-run names each idiom's planted lines without torch"
fi
echo "# $((n - bad)) passed, $bad failed"
[ "$bad" = 0 ]
