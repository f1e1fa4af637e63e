#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What Python frames cost per event: ns per driver call of a Python loop (bench/bench_python.py,
# ctypes, DEPTH frames deep) bare, under `ffmctl profile --stages 2` (every call an event whose
# stack key covers the Python frames), and the same with the walk off (FFM_PYTHON_FRAMES=0).
# The difference of the last two is the walk's price per event at that depth.
#   bench/bench_python.sh [FFMCTL [PYTHON [CALLS [DEPTH]]]]
# Defaults: build/ffmctl, python3, 200000 calls, depth 10. Runs as root (ffmctl profile). On a
# GPU node, from the static build: bench/gpu/pack.sh, then on the node (in the packed folder)
#   bench/bench_python.sh ./ffmctl python3
# On CI's simulated driver: LD_LIBRARY_PATH=build/fakecuda bench/bench_python.sh
set -eu
cd "$(dirname "$0")/.."
ctl=${1:-build/ffmctl} py=${2:-python3} calls=${3:-200000} depth=${4:-10}
st=$(mktemp -d /tmp/ffm-bench-py.XXXXXX)
trap 'rm -rf "$st"' EXIT
run() { "$@" bench/bench_python.py "$calls" "$depth" 5 | sed -n 's/^ns_per_call //p'; }
bare=$(run "$py")
walk=$("$ctl" --state-dir "$st" profile --stages 2 --job-id walk -- "$py" bench/bench_python.py "$calls" "$depth" 5 2>/dev/null | sed -n 's/^ns_per_call //p')
nowalk=$(FFM_PYTHON_FRAMES=0 "$ctl" --state-dir "$st" profile --stages 2 --job-id nowalk -- "$py" bench/bench_python.py "$calls" "$depth" 5 2>/dev/null | sed -n 's/^ns_per_call //p')
echo "python $("$py" -V 2>&1 | cut -d' ' -f2), depth $depth, $calls calls, ns per call:"
echo "  bare           $bare"
echo "  stage 2, walk  $walk"
echo "  stage 2, none  $nowalk"
python3 -c "import sys; w, n = float(sys.argv[1]), float(sys.argv[2]); print('  walk per event %.0f ns' % (w - n))" "$walk" "$nowalk"
