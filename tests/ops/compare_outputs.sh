#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# compare_outputs.sh REF [--no-workloads] [--keep]: are the printed outputs of this tree
# byte-identical to those of commit REF? Builds REF in a temporary worktree and this tree (make),
# writes one set of stores (tests/report/outputs.sh: the synthetic ones, one of over a million
# events, and `ffmctl profile` recordings of the workloads on the simulated driver, the last
# made by this tree's build) in a temporary directory, runs every output verb of both builds on
# the same files (report, its JSON and groupings, --subsequence, export chrome-trace and hatchet,
# diff) and diffs the results. Exit 0: identical; 1: a difference (shown); 2: could not run.
# Nothing is masked: no output holds a time of reading (the clock, a pid or the tool's version
# are in none of them), and both builds read the same store files, so their paths agree. The
# stores are checksummed before and after: a verb that wrote to one would show.
# --no-workloads: the synthetic stores only (no root needed); --keep: keep the temporary
# directory and say where.
set -u
cd "$(dirname "$0")/../.." || exit 2
REF=${1:?usage: compare_outputs.sh REF [--no-workloads] [--keep]}
shift
workloads=1 keep=0
for a in "$@"; do
	case $a in
	--no-workloads) workloads=0 ;;
	--keep) keep=1 ;;
	*) echo "compare_outputs.sh: unknown option $a" >&2; exit 2 ;;
	esac
done
. tests/report/outputs.sh
T=$(mktemp -d /tmp/ffm-compare.XXXXXX) || exit 2
cleanup() {
	git worktree remove --force "$T/ref" >/dev/null 2>&1
	if [ "$keep" = 1 ]; then echo "kept: $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
J=${FFM_MAKE_JOBS:-2}

git worktree add --detach "$T/ref" "$REF" >/dev/null 2>&1 ||
	{ echo "compare_outputs.sh: cannot check out $REF" >&2; exit 2; }
echo "# building $REF and this tree"
make -C "$T/ref" -j"$J" build/ffmctl >"$T/ref-build.log" 2>&1 ||
	{ tail -n 20 "$T/ref-build.log"; echo "compare_outputs.sh: $REF does not build" >&2; exit 2; }
make -j"$J" >"$T/build.log" 2>&1 ||
	{ tail -n 20 "$T/build.log"; echo "compare_outputs.sh: this tree does not build" >&2; exit 2; }

echo "# writing the stores"
outputs_synth build/tests/ffm-synth "$T/stores" &&
	outputs_synth_big build/tests/ffm-synth "$T/stores" || exit 2
if [ "$workloads" = 1 ]; then
	outputs_workloads build/ffmctl build "$T/stores" || exit 2
fi
sums() { find "$T/stores" -type f -name '*.db' -print0 | sort -z | xargs -0 md5sum; }
sums >"$T/sums.before"

echo "# ${#OUT_JOBS[@]} jobs, ${#OUT_DIFFS[@]} diffs: every output of $REF, then of this tree"
outputs_run "$T/ref/build/ffmctl" "$T/out-ref" || exit 2
outputs_run build/ffmctl "$T/out-new" || exit 2
sums >"$T/sums.after"
if ! cmp -s "$T/sums.before" "$T/sums.after"; then
	echo "compare_outputs.sh: a verb changed a store" >&2
	diff "$T/sums.before" "$T/sums.after" >&2
	exit 2
fi
files=$(find "$T/out-new" -type f | wc -l)
bytes=$(cat "$T/out-new"/* | wc -c)
if diff -r "$T/out-ref" "$T/out-new" >"$T/diff.txt"; then
	echo "identical: $files outputs ($bytes bytes) of $REF and this tree"
	exit 0
fi
echo "DIFFERENT: $(grep -c '^diff \|^Only' "$T/diff.txt") of $files outputs differ from $REF's:"
head -n 60 "$T/diff.txt"
exit 1
