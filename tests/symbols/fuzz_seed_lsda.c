/* SPDX-License-Identifier: MIT */
/*
 * Linked with helper_libcuda.c into one of fuzz_driver's seeds (tests/symbols/fuzz.mk), built
 * with -fexceptions: the cleanup gives this function a personality routine and an LSDA, so the
 * seed's .eh_frame has a "zPLR" CIE beside the usual "zR" ones.
 */
extern void cuSeedDone(int *p);
extern int cuSeedWork(int n);

int cuLaunchKernel(int n)
{
	int x __attribute__((cleanup(cuSeedDone))) = n;

	return cuSeedWork(x);
}
