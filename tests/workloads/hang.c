/* SPDX-License-Identifier: MIT */
/*
 * hang: a wait of known length that ends only when the host says so. Launches ffm_hang on a
 * flag in managed memory and enters cuCtxSynchronize; a second thread sets the flag after
 * hold_ms. Tests use it to see a wait that is in progress (attach while it blocks, stacks of a
 * waiting thread) and a sync whose duration is hold_ms whatever the driver. --fixed changes
 * nothing. It needs a GPU that lets the CPU write managed memory while a kernel runs
 * (concurrentManagedAccess, Pascal and later on Linux).
 */
#include "wl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long hold_ms = 300;

static const struct wl_opt opts[] = {
	{ "hold-ms", &hold_ms, "how long the kernel is held before the host releases it" },
	{},
};

static void *release_after_hold(void *flag)
{
	struct timespec ts = { hold_ms / 1000, (hold_ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
	__atomic_store_n((volatile unsigned int *)flag, 1u, __ATOMIC_SEQ_CST);
	return NULL;
}

WL_NOINLINE static void hold(struct wl *w, CUdeviceptr flag)
{
	void *args[] = { &flag };
	pthread_t t;
	int err;

	CK(cuLaunchKernel(w->fn_hang, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
	err = pthread_create(&t, NULL, release_after_hold, (void *)(uintptr_t)flag);
	if (err) {
		fprintf(stderr, "hang: pthread_create: %s\n", strerror(err));
		exit(1);
	}
	CK(cuCtxSynchronize()); /* FFM-NOTE: hang held-sync */
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 1 };
	CUdeviceptr flag;
	unsigned int released = 0;

	wl_init(&w, "hang", argc, argv, opts);
	CK(cuMemAllocManaged(&flag, sizeof(unsigned int), CU_MEM_ATTACH_GLOBAL));
	*(volatile unsigned int *)(uintptr_t)flag = 0;

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++) {
		*(volatile unsigned int *)(uintptr_t)flag = 0;
		hold(&w, flag);
		released += *(volatile unsigned int *)(uintptr_t)flag;
	}
	wl_loop_end(&w);

	CK(cuMemFree(flag));
	wl_finish(&w, wl_fnv1a(WL_FNV_INIT, &released, sizeof(released)));
	return 0;
}
