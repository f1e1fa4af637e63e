#!/usr/bin/env bash
# The C++ workload through ffm (real BPF, simulated driver): both instantiations of the
# template that holds the planted sync are symbolized and demangled, and fold to one function,
# the key of the paper's "folded function" grouping. TAP on stdout.
set -u
B=${FFM_BUILD:-build}
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
skip_all() { echo "1..0 # SKIP $*"; exit 77; }

[ "$(id -u)" = 0 ] || skip_all "needs root for BPF and uprobes"
[ -x "$B/workloads/templated" ] && [ -x "$B/ffmctl" ] || skip_all "not built"
command -v sqlite3 >/dev/null || skip_all "sqlite3 not installed"
st=$(mktemp -d)
trap 'rm -rf "$st"' EXIT

echo "1..4"
out=$(LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$st" profile --stages 1-2 --key tmpl \
	-- "$B/workloads/templated" --iters 40 2>&1)
if [ $? = 0 ]; then ok "ffmctl profile of the C++ workload"; else notok "ffmctl profile of the C++ workload"; echo "$out" | sed 's/^/# /'; fi
db=$(ls "$st"/keys/*.db 2>/dev/null | head -1)
q() { sqlite3 -readonly "$db" "$1" 2>&1; }
# The frames of the planted line, from the stage-2 run's cuCtxSynchronize call sites.
line=$(grep -n 'FFM-PLANT: templated' tests/workloads/templated.cpp | cut -d: -f1)
rows=$(q "SELECT DISTINCT f.demangled || '|' || f.folded FROM frames f
	WHERE f.file LIKE '%templated.cpp' AND f.line = $line ORDER BY 1;")
if echo "$rows" | grep -q '^void step<float>(wl\*, unsigned long long, unsigned int)|step$' &&
	echo "$rows" | grep -q '^void step<double>(wl\*, unsigned long long, unsigned int)|step$'; then
	ok "both instantiations demangled at the planted line"
else
	notok "both instantiations demangled at the planted line"; echo "$rows" | sed 's/^/# /'
fi
nsites=$(q "SELECT COUNT(DISTINCT f.offset) FROM frames f WHERE f.folded = 'step' AND f.line = $line;")
if [ "$nsites" = 2 ]; then ok "two call sites (one per instantiation)"; else notok "two call sites, got '$nsites'"; fi
nfold=$(q "SELECT COUNT(DISTINCT f.folded) FROM frames f WHERE f.demangled LIKE 'void step<%';")
if [ "$nfold" = 1 ]; then ok "they fold to one function"; else notok "one folded function, got '$nfold'"; fi
[ "$failed" = 0 ]
