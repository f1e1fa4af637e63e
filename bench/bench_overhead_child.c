/* SPDX-License-Identifier: MIT */
/*
 * bench_overhead_child: times driver calls one by one against the libcuda given on the command
 * line (dlopen), for bench_overhead. Linked against libc only, never -static (it loads the
 * driver), so the same binary runs on a GPU node without ffm's build dependencies.
 *
 *   bench_overhead_child LIBCUDA PTX CALLS   -> lines "<call index> <ns per call>"
 *
 * A call the driver does not export (the simulated one lacks the occupancy calculator) is left
 * out of the output.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Keep in step with bench_overhead.c's list. */
enum { C_SYNC, C_LAUNCH, C_HTOD, C_QUERY, C_SSYNC, C_HTOD_SYNC, C_MEMSET, C_ALLOC_FREE, C_GETFN,
       C_FATTR, C_OCC, C__N };
static const char *const CALL_NAME[C__N] = { "cuCtxSynchronize", "cuLaunchKernel", "cuMemcpyHtoDAsync_v2",
					     "cuStreamQuery", "cuStreamSynchronize", "cuMemcpyHtoD_v2",
					     "cuMemsetD32Async", "cuMemAlloc_v2+cuMemFree_v2",
					     "cuModuleGetFunction", "cuFuncGetAttribute",
					     "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags" };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;
typedef unsigned long long CUdeviceptr;

#define SYM(h, name, var)                                                                          \
	do {                                                                                       \
		*(void **)&(var) = dlsym(h, name);                                                 \
		if (!(var)) {                                                                      \
			fprintf(stderr, "child: %s not in the driver\n", name);                   \
			return 3;                                                                  \
		}                                                                                  \
	} while (0)
#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult _r = (call);                                                              \
		if (_r) {                                                                          \
			fprintf(stderr, "child: %s failed: %d\n", #call, _r);                      \
			return 4;                                                                  \
		}                                                                                  \
	} while (0)

static int child_main(const char *lib, const char *ptx_path, long calls)
{
	CUresult (*cuInit)(unsigned), (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice), (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuModuleLoadData)(CUmodule *, const void *);
	CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t), (*cuMemAllocHost)(void **, size_t);
	CUresult (*cuCtxSynchronize)(void), (*cuStreamQuery)(CUstream);
	CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
				   unsigned, CUstream, void **, void **);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*cuStreamSynchronize)(CUstream), (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
	CUresult (*cuMemFree)(CUdeviceptr), (*cuFuncGetAttribute)(int *, int, CUfunction);
	CUresult (*cuOccupancy)(int *, CUfunction, int, size_t, unsigned);
	double ns[C__N] = {};
	int have[C__N];
	char *ptx = NULL;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction spin;
	CUdeviceptr dptr;
	void *host;
	FILE *f;
	long sz;
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		fprintf(stderr, "child: %s\n", dlerror());
		return 2;
	}
	f = fopen(ptx_path, "r");
	if (!f || fseek(f, 0, SEEK_END) || (sz = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) ||
	    !(ptx = calloc(1, sz + 1)) || fread(ptx, 1, sz, f) != (size_t)sz) {
		fprintf(stderr, "child: cannot read %s\n", ptx_path);
		return 2;
	}
	fclose(f);
	SYM(h, "cuInit", cuInit);
	SYM(h, "cuDeviceGet", cuDeviceGet);
	SYM(h, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain);
	SYM(h, "cuCtxSetCurrent", cuCtxSetCurrent);
	SYM(h, "cuModuleLoadData", cuModuleLoadData);
	SYM(h, "cuModuleGetFunction", cuModuleGetFunction);
	SYM(h, "cuMemAlloc_v2", cuMemAlloc);
	SYM(h, "cuMemAllocHost_v2", cuMemAllocHost);
	SYM(h, "cuCtxSynchronize", cuCtxSynchronize);
	SYM(h, "cuStreamQuery", cuStreamQuery);
	SYM(h, "cuLaunchKernel", cuLaunchKernel);
	SYM(h, "cuMemcpyHtoDAsync_v2", cuMemcpyHtoDAsync);
	SYM(h, "cuStreamSynchronize", cuStreamSynchronize);
	SYM(h, "cuMemcpyHtoD_v2", cuMemcpyHtoD);
	SYM(h, "cuMemsetD32Async", cuMemsetD32Async);
	SYM(h, "cuMemFree_v2", cuMemFree);
	/* Optional: not every driver (the simulated one) has them. */
	*(void **)&cuFuncGetAttribute = dlsym(h, "cuFuncGetAttribute");
	*(void **)&cuOccupancy = dlsym(h, "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
	for (int c = 0; c < C__N; c++)
		have[c] = (c != C_FATTR || cuFuncGetAttribute) && (c != C_OCC || cuOccupancy);
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleGetFunction(&spin, mod, "ffm_spin"));
	CK(cuMemAlloc(&dptr, 64));
	CK(cuMemAllocHost(&host, 64));
	CK(cuCtxSynchronize());

	for (int c = 0; c < C__N; c++) {
		uint64_t total = 0;

		for (long i = 0; i < calls && have[c]; i++) {
			unsigned long long zero = 0;
			void *params[] = { &zero };
			uint64_t t0, t1;
			CUresult r = 0;
			CUfunction fn;
			CUdeviceptr p;
			int v;

			t0 = now_ns();
			switch (c) {
			case C_SYNC: r = cuCtxSynchronize(); break;
			case C_LAUNCH: r = cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL); break;
			case C_HTOD: r = cuMemcpyHtoDAsync(dptr, host, 4, NULL); break;
			case C_QUERY: r = cuStreamQuery(NULL); break;
			case C_SSYNC: r = cuStreamSynchronize(NULL); break;
			case C_HTOD_SYNC: r = cuMemcpyHtoD(dptr, host, 4); break;
			case C_MEMSET: r = cuMemsetD32Async(dptr, 0, 1, NULL); break;
			case C_ALLOC_FREE:
				r = cuMemAlloc(&p, 256);
				if (!r)
					r = cuMemFree(p);
				break;
			case C_GETFN: r = cuModuleGetFunction(&fn, mod, "ffm_spin"); break;
			case C_FATTR: r = cuFuncGetAttribute(&v, 0 /* max threads per block */, spin); break;
			case C_OCC: r = cuOccupancy(&v, spin, 128, 0, 0); break;
			}
			t1 = now_ns();
			if (r && !(c == C_QUERY && r == 600 /* CUDA_ERROR_NOT_READY */)) {
				fprintf(stderr, "child: call %s failed: %d\n", CALL_NAME[c], r);
				return 4;
			}
			total += t1 - t0;
			/* Queued work is drained outside the timed calls: the queue stays short. */
			if ((c == C_LAUNCH || c == C_HTOD || c == C_MEMSET) && i % 64 == 63)
				CK(cuCtxSynchronize());
		}
		CK(cuCtxSynchronize());
		ns[c] = (double)total / calls;
	}
	for (int c = 0; c < C__N; c++)
		if (have[c])
			printf("%d %.1f\n", c, ns[c]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: bench_overhead_child LIBCUDA PTX CALLS\n");
		return 2;
	}
	return child_main(argv[1], argv[2], atol(argv[3]));
}
