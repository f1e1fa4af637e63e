#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds what bench/gpu/run.sh needs on a GPU node, which cannot build ffm itself (no -dev
# packages there), into one small folder (default .dev/gpu, git-ignored) to carry there:
# static ffmctl and ffmd, the calibration probe and the benchmark's call timer (libc only), the
# workloads (libc + libcuda.so.1), xfer_big, the overhead benchmark and bench_attach; the Python
# sites' program and benchmark (tests/python/, bench/bench_python.*), tests/gpu/torch_item.py and
# torch_idioms.py.
set -eu
cd "$(dirname "$0")/../.."
D=${1:-.dev/gpu}
make -s STATIC=1 O=build-static all
rm -rf "$D" && mkdir -p "$D/bench" "$D/workloads" "$D/tests/memtrace" "$D/tests/python" "$D/tests/gpu"
cp build-static/ffmctl build-static/ffmd build-static/ffm-calib-probe "$D/"
cp build-static/bench/bench_overhead build-static/bench/bench_overhead_child \
	build-static/bench/bench_attach "$D/bench/"
cp build-static/tests/memtrace/xfer_big "$D/tests/memtrace/"
cp bench/bench_python.sh bench/bench_python.py "$D/bench/"
cp tests/python/pysites.py tests/python/pydeep.py tests/python/pygen.py "$D/tests/python/"
cp tests/gpu/torch_item.py tests/gpu/torch_idioms.py "$D/tests/gpu/"
mkdir -p "$D/tests/workloads" && cp tests/workloads/kernels.ptx "$D/tests/workloads/"
for w in build-static/workloads/*; do
	[ -f "$w" ] && [ -x "$w" ] && cp "$w" "$D/workloads/"
done
du -sh "$D"
