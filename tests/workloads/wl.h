/* SPDX-License-Identifier: MIT */
/*
 * Shared code of the ffm workloads: small CUDA driver-API programs, each with one planted
 * synchronization or transfer problem (README.md lists them with their exact call sites) and a
 * --fixed mode that applies the fix and must print the same CHECKSUM.
 *
 * Contract with the tests (test_workloads.sh) and with ffm's own tests:
 *   - stdout ends with "CHECKSUM <16 hex digits>", "LOOP_S <s>" and "WALL_S <s>" (monotonic
 *     clock; WALL_S covers the whole run from before cuInit to after the context is released,
 *     LOOP_S only the workload's main loop, which is what the planted problem slows down);
 *   - any CUDA error prints the failing call, its CUresult name and file:line on stderr and
 *     exits 1; a bad argument exits 2;
 *   - env FFM_SCHED=spin|yield|blocking picks the context's CPU wait mode (default: the
 *     driver's automatic choice), so the same binary exercises the spinning and the futex
 *     paths of the driver's wait function.
 *
 * Durations are parameters in microseconds: kernels busy-wait on %globaltimer (kernels.cu) and
 * CPU work busy-waits on CLOCK_MONOTONIC, so the time a planted problem wastes is a known
 * function of the parameters on the real driver and on the simulated one alike.
 *
 * The planted call sites call the driver directly in the workload's own source, inside
 * WL_NOINLINE functions, so that the call's return address maps to that file:line and the stack
 * names that function. Everything here is built with -fomit-frame-pointer (as HPC codes are):
 * ffm must unwind the application's frames with CFI.
 */
#ifndef FFM_WL_H
#define FFM_WL_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* noclone too: an IPA clone would be named "fn.constprop.0" in the stack, not "fn". */
#define WL_NOINLINE __attribute__((noinline, noclone))

/* One numeric command-line option: --<name> N or --<name>=N. */
struct wl_opt {
	const char *name;
	long long *val;
	const char *help;
};

struct wl {
	const char *name;
	int fixed;		/* --fixed given */
	long long iters;	/* --iters, preset by the workload to its default */
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUlibrary lib; /* ffm_work's: the CUDA runtime's way (cuLibraryLoadData, cuLibraryGetKernel) */
	CUfunction fn_spin, fn_work, fn_hang;
	uint64_t t0_ns, loop_t0_ns, loop_t1_ns;
};

/*
 * Parses argv (--fixed, --iters N, --help and the workload's own opts; opts ends with a zeroed
 * entry and may be NULL), prints a PARAMS line, initializes the driver, retains the primary
 * context (as the CUDA runtime does) with the FFM_SCHED flags and loads the embedded PTX.
 */
void wl_init(struct wl *w, const char *name, int argc, char **argv, const struct wl_opt *opts);

/* Prints CHECKSUM, LOOP_S, releases everything and prints WALL_S. */
void wl_finish(struct wl *w, uint64_t checksum);

__attribute__((noreturn, cold)) void wl_cuda_fail(CUresult r, const char *expr, const char *file,
						  int line);

static inline void wl_check(CUresult r, const char *expr, const char *file, int line)
{
	if (__builtin_expect(r != CUDA_SUCCESS, 0))
		wl_cuda_fail(r, expr, file, line);
}

/* CK(cuFoo(...)): the call stays in the caller at the caller's line, the check follows it. */
#define CK(call) wl_check((call), #call, __FILE__, __LINE__)

uint64_t wl_now_ns(void);

/* Busy CPU loop of ns nanoseconds (CLOCK_MONOTONIC): the app's own computation. */
void wl_cpu_work(unsigned long long ns);

/* ffm_spin(ns) on one thread, on stream s. */
void wl_spin(struct wl *w, CUstream s, unsigned long long ns);

/*
 * ffm_work(buf, n, mul, add, ns) on stream s: buf[i] = buf[i] * mul + add for i < n after every
 * thread has waited ns. The grid is capped so that all its blocks are resident at once on any
 * GPU with 16 SMs or more: the kernel then lasts ns plus the update, not a multiple of ns.
 */
void wl_work(struct wl *w, CUstream s, CUdeviceptr buf, unsigned long long n, unsigned int mul,
	     unsigned int add, unsigned long long ns);

/* FNV-1a 64 over bytes; chain calls by passing the previous result (start with WL_FNV_INIT). */
#define WL_FNV_INIT 0xcbf29ce484222325ULL
uint64_t wl_fnv1a(uint64_t h, const void *p, size_t n);

/*
 * Copies n 32-bit words of device memory to the host with cuMemcpyDtoH (a necessary,
 * synchronizing read: its data is hashed at once) and folds them into h.
 */
uint64_t wl_hash_device(uint64_t h, CUdeviceptr buf, size_t n);

/* Host memory that aborts the run on failure. */
void *wl_xmalloc(size_t n);

/* Bracket the main loop: LOOP_S is the time between these two. */
static inline void wl_loop_begin(struct wl *w)
{
	w->loop_t0_ns = wl_now_ns();
}

static inline void wl_loop_end(struct wl *w)
{
	w->loop_t1_ns = wl_now_ns();
}

#endif
