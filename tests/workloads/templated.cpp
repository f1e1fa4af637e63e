// SPDX-License-Identifier: MIT
/*
 * templated: the unnecessary sync of unnecessary_sync, inside a C++ function template that the
 * loop instantiates for two element types. The two instantiations are two functions in the
 * binary (two call sites, demangled "void step<float>(...)" and "void step<double>(...)"), but
 * one function in the source: the paper's "folded function" grouping merges them, because one
 * fix in the template fixes both. ffm must demangle them and fold both to "step".
 *
 *   plain: iters * (kernel_us + cpu_us); fixed: one sync after the loop.
 */
extern "C" {
#include "wl.h"
}

static long long kernel_us = 500, cpu_us = 1000, n = 65536;

template <typename T> struct scale {
	static constexpr unsigned int mul = sizeof(T) == 4 ? 3 : 5;
};

template <typename T> WL_NOINLINE void step(struct wl *w, CUdeviceptr buf, unsigned int i)
{
	wl_work(w, 0, buf, n, scale<T>::mul, i, kernel_us * 1000);
	if (!w->fixed)
		CK(cuCtxSynchronize()); /* FFM-PLANT: templated unnecessary-sync */
	wl_cpu_work(cpu_us * 1000);
}

int main(int argc, char **argv)
{
	static const struct wl_opt opts[] = {
		{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
		{ "cpu-us", &cpu_us, "CPU work of each iteration, independent of the GPU's data" },
		{ "n", &n, "32-bit words the kernel updates" },
		{ nullptr, nullptr, nullptr },
	};
	struct wl w = {};
	CUdeviceptr buf;
	uint64_t h;

	w.iters = 400;
	wl_init(&w, "templated", argc, argv, opts);
	CK(cuMemAlloc(&buf, n * 4 + 4));
	CK(cuMemsetD32(buf, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++) {
		if (i % 2)
			step<double>(&w, buf, (unsigned int)i);
		else
			step<float>(&w, buf, (unsigned int)i);
	}
	CK(cuCtxSynchronize());
	wl_loop_end(&w);

	h = wl_hash_device(WL_FNV_INIT, buf, n);
	CK(cuMemFree(buf));
	wl_finish(&w, h);
	return 0;
}
