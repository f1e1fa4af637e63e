#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Every class of problem as variants that change what the fix saves (tests/gpu/variants.cu:
# sizes, kernel against host work, who touches managed memory, threads, ranks of a job on one
# GPU, schedule flags; tests/gpu/torch_idioms.py: PyTorch's implicit syncs), and the controls
# whose every sync is required. Per variant: REPS plain/fixed pairs, interleaved (the order
# flips from pair to pair, so a drift of the node falls on both modes alike), then one
# `ffmctl profile --stages 1-4` of the plain program (no monitoring runs). The saving is the
# median of the pairs' differences of LOOP_S (the timed loop: without the CUDA context's
# creation, which moves by tens of ms between processes and which no fix touches).
# Writes OUT/variants.md (the table, made by bench/gpu/variants_table.py) and per variant the
# raw outputs: NAME.runs (every run's output), NAME.profile, NAME.json, NAME.txt.
#
#   O=DIR bench/gpu/variants.sh [--quick] [--reps N] OUT
#
# --quick: one variant of every class and control, a job of two ranks and one PyTorch idiom
# (runs of about 1 s: an estimated 5-6 minutes on an H200, under the 8 it must fit); without
# it, the full list. FFM_VARIANTS replaces the list: lines "name|kind|arguments", kind a class
# of tests/gpu/variants.cu (its --class), torch (tests/gpu/torch_idioms.py) or wl (a driver-API
# workload of $O/workloads, the first argument its name). DIR is what bench/gpu/pack.sh built
# (the default .dev/gpu). Needs root (BPF).
# Without a GPU (to try the harness itself) the list is the driver-API workloads, on the
# simulated driver of a build folder: O=build bench/gpu/variants.sh --quick OUT.
set -u
reps=5 quick=0
while [ $# -gt 1 ]; do
	case $1 in
	--reps) reps=$2; shift 2 ;;
	--quick) quick=1; shift ;;
	*) break ;;
	esac
done
[ $# = 1 ] || { echo "usage: $0 [--quick] [--reps N] OUT" >&2; exit 2; }
[ "$reps" -ge 1 ] 2>/dev/null || { echo "$0: --reps wants a positive count" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$(dirname "$0")/../.." || exit 1
. bench/gpu/runs_lib.sh
gpu_setup variants

# One of every class and control; runs of about 1 s each.
QUICK="unnecessary_sync|unnecessary_sync|--iters 650
misplaced_k350_c350_block|misplaced_sync|--kernel-us 350 --cpu-us 350 --iters 1400 --sched block
managed_memset_host_2M|managed_memset|--touch host --size 2M --iters 350
pageable_async_256K|pageable_async|--size 256K --iters 650
dup_transfer_4M|dup_transfer|--size 4M --iters 550
temp_buffers_1M|temp_buffers|--size 1M --iters 650
lib_host_read_256K|lib_host_read|--size 256K --iters 650
free_in_loop_t4|free_in_loop|--threads 4 --iters 450
host_read_k1000_c300|host_read|--kernel-us 1000 --cpu-us 300 --iters 750
control_feed|control_feed|--iters 650
control_converge|control_converge|--iters 650
control_result_4M|control_result|--size 4M --iters 600
ranks2_unnecessary_sync|unnecessary_sync|--ranks 2 --iters 600
torch_mask|torch|--idiom mask"

# At least four variants of every class, what changes the price changed one at a time.
FULL="$QUICK
unnecessary_sync_k2000_c200|unnecessary_sync|--kernel-us 2000 --cpu-us 200 --iters 450
unnecessary_sync_k100_c1000|unnecessary_sync|--kernel-us 100 --cpu-us 1000 --iters 900
unnecessary_sync_t4|unnecessary_sync|--threads 4 --iters 650
unnecessary_sync_yield|unnecessary_sync|--sched yield --iters 650
unnecessary_sync_block|unnecessary_sync|--sched block --iters 650
misplaced_k20_c20|misplaced_sync|--kernel-us 20 --cpu-us 20 --iters 10000
misplaced_k20_c20_spin|misplaced_sync|--kernel-us 20 --cpu-us 20 --iters 10000 --sched spin
misplaced_k1000_c500|misplaced_sync|--kernel-us 1000 --cpu-us 500 --iters 700
misplaced_k5000_c3000_yield|misplaced_sync|--kernel-us 5000 --cpu-us 3000 --iters 125 --sched yield
misplaced_t4|misplaced_sync|--threads 4 --iters 650
managed_memset_host_16K|managed_memset|--touch host --size 16K --iters 650
managed_memset_host_64M|managed_memset|--touch host --size 64M --iters 25
managed_memset_device_2M|managed_memset|--touch device --size 2M --iters 600
managed_memset_both_2M|managed_memset|--touch both --size 2M --iters 350
managed_memset_both_64M|managed_memset|--touch both --size 64M --iters 25
managed_memset_device_16K_t4|managed_memset|--touch device --size 16K --threads 4 --iters 900
pageable_async_4K_k50_c100|pageable_async|--size 4K --kernel-us 50 --cpu-us 100 --iters 6000
pageable_async_4M|pageable_async|--size 4M --iters 500
pageable_async_64M|pageable_async|--size 64M --iters 100
pageable_async_1M_t4|pageable_async|--size 1M --threads 4 --iters 550
dup_transfer_64K|dup_transfer|--size 64K --iters 650
dup_transfer_64M|dup_transfer|--size 64M --iters 90
dup_transfer_1M_k2000_c200|dup_transfer|--size 1M --kernel-us 2000 --cpu-us 200 --iters 450
dup_transfer_4M_t4|dup_transfer|--size 4M --threads 4 --iters 400
temp_buffers_64K|temp_buffers|--size 64K --iters 650
temp_buffers_64M|temp_buffers|--size 64M --iters 250
temp_buffers_1M_t4|temp_buffers|--size 1M --threads 4 --iters 450
temp_buffers_1M_k100_c1000|temp_buffers|--size 1M --kernel-us 100 --cpu-us 1000 --iters 850
lib_host_read_16K|lib_host_read|--size 16K --iters 650
lib_host_read_16M|lib_host_read|--size 16M --iters 600
lib_host_read_k2000_c200|lib_host_read|--kernel-us 2000 --cpu-us 200 --iters 450
lib_host_read_t4|lib_host_read|--threads 4 --iters 550
free_in_loop|free_in_loop|--iters 650
free_in_loop_k2000_c200|free_in_loop|--kernel-us 2000 --cpu-us 200 --iters 450
free_in_loop_k100_c1000|free_in_loop|--kernel-us 100 --cpu-us 1000 --iters 900
free_in_loop_block|free_in_loop|--sched block --iters 650
host_read|host_read|--iters 650
host_read_k2000_c200|host_read|--kernel-us 2000 --cpu-us 200 --iters 450
host_read_t4|host_read|--threads 4 --iters 650
host_read_yield|host_read|--sched yield --iters 650
control_feed_t4|control_feed|--threads 4 --iters 650
control_converge_block|control_converge|--sched block --iters 650
control_result_64K_k1000|control_result|--size 64K --kernel-us 1000 --cpu-us 1500 --iters 400
ranks4_unnecessary_sync|unnecessary_sync|--ranks 4 --iters 450
ranks3_host_read|host_read|--ranks 3 --iters 500
ranks2_control_feed|control_feed|--ranks 2 --iters 600
torch_nonzero|torch|--idiom nonzero
torch_item_if|torch|--idiom item_if
torch_tolist|torch|--idiom tolist
torch_if_tensor|torch|--idiom if_tensor
torch_timer|torch|--idiom timer
torch_unpinned|torch|--idiom unpinned --steps 800
torch_item_if_host300|torch|--idiom item_if --host-us 300 --steps 800
torch_mask_host300|torch|--idiom mask --host-us 300 --steps 800"

# The harness on the simulated driver: the driver-API workloads of the build.
SIM="wl_unnecessary_sync|wl|unnecessary_sync --iters 200
wl_misplaced_sync|wl|misplaced_sync --iters 200
wl_host_read|wl|host_read --iters 200
wl_control|wl|control --iters 200"

if [ -n "${FFM_VARIANTS:-}" ]; then
	list=$FFM_VARIANTS
elif [ -n "$SIMULATED" ]; then
	list=$SIM
elif [ "$quick" = 1 ]; then
	list=$QUICK
else
	list=$FULL
fi

: >"$OUT/build.txt"
echo "$list" | cut -d'|' -f2 | grep -qvx 'torch\|wl' && build_cuda "$SRC/variants.cu" "$S/variants"
python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$SRC/torch_idioms.py" || exit 1

# cmd KIND ARGS...: the command line of a variant
cmd() {
	local kind=$1
	shift
	case $kind in
	torch) echo "python3 $SRC/torch_idioms.py $*" ;;
	wl) echo "$O/workloads/$*" ;;
	*) echo "$S/variants --class $kind $*" ;;
	esac
}

echo "$list" >"$OUT/variants.list"
t_all=$(date +%s)
echo "$list" | while IFS='|' read -r name kind args; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086 # args is a list
	c=$(cmd "$kind" $args) || continue
	# No torch without a GPU: the program checks its arguments and names its planted lines.
	# shellcheck disable=SC2086
	[ "$kind" != torch ] || [ -z "$SIMULATED" ] ||
		{ python3 "$SRC/torch_idioms.py" $args --dry-run >"$OUT/$name.runs"; continue; }
	t0=$(date +%s)
	: >"$OUT/$name.runs"
	: >"$OUT/$name.profile"
	for i in $(seq "$reps"); do
		# shellcheck disable=SC2086 # c is a command line
		if [ $((i % 2)) = 1 ]; then
			wall plain $c >/dev/null
			wall fixed $c --fixed >/dev/null
		else
			wall fixed $c --fixed >/dev/null
			wall plain $c >/dev/null
		fi
	done
	# shellcheck disable=SC2086
	profile_run "var-$name" "var-$name" $c || echo "profile failed" >>"$OUT/$name.profile"
	report_job "var-$name"
	echo "$name: $(($(date +%s) - t0)) s" | tee -a "$OUT/elapsed.txt" >&2
done
echo "all: $(($(date +%s) - t_all)) s" >>"$OUT/elapsed.txt"
python3 bench/gpu/variants_table.py "$OUT" "$SRC" "$PWD/tests/workloads" >"$OUT/variants.md"
cat "$OUT/variants.md"
