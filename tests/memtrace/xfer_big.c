/* SPDX-License-Identifier: MIT */
/*
 * Test helper for stage 3 (test_stages34.c): uploads one MiB-sized buffer (argv[1] MiB) to a
 * device buffer, the same again, then with its last byte changed, then that to a second device
 * buffer, and downloads it back. The pattern is buf[i] = i * 131 + (i >> 20), which the test
 * rebuilds to check the hashes the BPF side computed over every byte.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult r_ = (call);                                                              \
		if (r_ != CUDA_SUCCESS) {                                                          \
			fprintf(stderr, "%s failed: %d\n", #call, (int)r_);                        \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

__attribute__((noinline)) static void upload(CUdeviceptr dst, const void *src, size_t n)
{
	CK(cuMemcpyHtoD(dst, src, n));
}

int main(int argc, char **argv)
{
	size_t n = (size_t)(argc > 1 ? atoi(argv[1]) : 80) << 20;
	CUdeviceptr a, b;
	CUcontext ctx;
	CUdevice dev;
	uint8_t *buf, *back;

	if (!n)
		return 2;
	buf = malloc(n);
	back = malloc(n);
	if (!buf || !back)
		return 1;
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 20));
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuMemAlloc(&a, n));
	CK(cuMemAlloc(&b, n));
	upload(a, buf, n);
	upload(a, buf, n);      /* a duplicate: same bytes, same destination */
	buf[n - 1] ^= 0x5a;
	upload(a, buf, n);      /* not a duplicate: the last byte differs */
	upload(b, buf, n);      /* the same bytes to another destination */
	CK(cuMemcpyDtoH(back, a, n));
	if (memcmp(back, buf, n)) {
		fprintf(stderr, "xfer_big: the bytes came back changed\n");
		return 1;
	}
	CK(cuMemFree(b));
	CK(cuMemFree(a));
	CK(cuDevicePrimaryCtxRelease(dev));
	printf("XFER_BIG %zu\n", n);
	return 0;
}
