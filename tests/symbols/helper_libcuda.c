/* SPDX-License-Identifier: MIT */
/* A stand-in libcuda for tests/symbols/test_driver: exported cu* variants and a static helper. */
#include <stdint.h>

volatile int helper_sink;

static __attribute__((noinline)) int helper_wait(int n)
{
	for (int i = 0; i < n; i++)
		helper_sink += i;
	return helper_sink;
}

int cuCtxSynchronize(void) { return helper_wait(1); }
int cuCtxSynchronize_v2(void) { return helper_wait(2); }
int cuMemcpyDtoH_v2(void *d, uint64_t s, uint64_t n) { return helper_wait((int)n); }
int cuMemcpyDtoH_v2_ptds(void *d, uint64_t s, uint64_t n) { return helper_wait((int)n + 1); }
int cuMemcpyDtoHAsync_v2(void *d, uint64_t s, uint64_t n, void *st) { return helper_wait(3); }
int cuMemcpyDtoHAsync_v2_ptsz(void *d, uint64_t s, uint64_t n, void *st) { return helper_wait(4); }
int cuMemcpyDtoHX(void) { return 0; } /* not a variant of cuMemcpyDtoH */
int notCuda(void) { return 1; }
