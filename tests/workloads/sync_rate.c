/* SPDX-License-Identifier: MIT */
/*
 * sync_rate: synchronizes at a steady rate, for adaptive stage 1 (docs/OVERHEAD.md): each
 * iteration launches a short kernel and waits for it with cuStreamSynchronize at one of eight
 * call sites (site_0 ... site_7, one function each), paced by the clock to --rate syncs/s for
 * --ms milliseconds (the iteration count follows; --iters is ignored). With --cpu-us C instead,
 * --iters iterations each do C µs of CPU work after the sync, unpaced: the loop's time then
 * grows with what tracing costs (the overhead benchmark, bench/gpu/adaptive.sh).
 *
 *   --sites K        the first K sites take turns from the start (default 2)
 *   --new-at-ms X    from X ms on, site K takes its turn too: a new call site appears after a
 *                    stable phase (0: never)
 *   --burst-every-ms B  every B ms, the next unused site shows up for --burst-n syncs, then
 *                    the stable sites go on (bursts of new call sites; 0: none)
 *   --tail-ms T      T ms of CPU work after the context is released, before the exit: the
 *                    teardown a real driver takes there (tens of ms on a GPU), made long
 * No planted problem; `--fixed` changes nothing. Prints SITE_<i> <syncs> FIRST_NS <t> per site
 * used (t: CLOCK_MONOTONIC of its first sync), so a run can be compared with what ffm stored.
 */
#include <stdio.h>

#include "wl.h"

static long long rate = 2500, ms = 4000, sites = 2, new_at_ms, burst_every_ms, burst_n = 50,
		 kernel_us = 20, cpu_us, tail_ms;

static const struct wl_opt opts[] = {
	{ "rate", &rate, "synchronizing calls per second" },
	{ "ms", &ms, "how long the loop runs (ms)" },
	{ "sites", &sites, "call sites in turn from the start (1..7)" },
	{ "new-at-ms", &new_at_ms, "a further call site takes its turn from then on (0: never)" },
	{ "burst-every-ms", &burst_every_ms, "a burst of a new call site this often (0: none)" },
	{ "burst-n", &burst_n, "syncs per burst" },
	{ "kernel-us", &kernel_us, "GPU time of each kernel" },
	{ "cpu-us", &cpu_us, "CPU work after each sync, unpaced, --iters times (0: paced by --rate)" },
	{ "tail-ms", &tail_ms, "CPU work after the context's release, before the exit (ms)" },
	{},
};

#define SITE(i)                                                                                    \
	WL_NOINLINE static void site_##i(struct wl *w, CUstream s)                                 \
	{                                                                                          \
		wl_spin(w, s, kernel_us * 1000);                                                   \
		CK(cuStreamSynchronize(s));                                                        \
	}
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)

static void (*const site_fn[8])(struct wl *, CUstream) = {
	site_0, site_1, site_2, site_3, site_4, site_5, site_6, site_7,
};

int main(int argc, char **argv)
{
	struct wl w = { .iters = 0 };
	unsigned long long counts[8] = { 0 }, i = 0;
	uint64_t first[8] = { 0 }; /* CLOCK_MONOTONIC of each site's first sync */
	long long next_burst, burst_left = 0, burst_site;
	uint64_t t0, t, period, next;

	wl_init(&w, "sync_rate", argc, argv, opts);
	if (rate <= 0 || sites < 1 || sites > 7) {
		fprintf(stderr, "sync_rate: --rate must be > 0 and --sites 1..7\n");
		return 2;
	}
	period = 1000000000ull / (uint64_t)rate;
	burst_site = sites + (new_at_ms ? 1 : 0);
	next_burst = burst_every_ms;
	wl_loop_begin(&w);
	t0 = next = wl_now_ns();
	for (t = t0; cpu_us ? i < (unsigned long long)w.iters : t - t0 < (uint64_t)ms * 1000000; i++) {
		long long at_ms = (long long)((t - t0) / 1000000);
		int k = (int)(i % (unsigned long long)sites);

		if (new_at_ms && at_ms >= new_at_ms && i % (unsigned long long)(sites + 1) == (unsigned long long)sites)
			k = (int)sites;
		if (burst_every_ms && !burst_left && at_ms >= next_burst && burst_site < 8) {
			burst_left = burst_n;
			next_burst += burst_every_ms;
		}
		if (burst_left) {
			k = (int)burst_site;
			if (!--burst_left)
				burst_site++;
		}
		if (!counts[k])
			first[k] = wl_now_ns();
		site_fn[k](&w, 0);
		counts[k]++;
		if (cpu_us) {
			wl_cpu_work((unsigned long long)cpu_us * 1000);
			t = wl_now_ns();
			continue;
		}
		/* Pace: the next sync a period after this one's due time, or now when late (no
		 * catching up in a burst after a stall: the rate stays what was asked or below). */
		next = next + period > wl_now_ns() ? next + period : wl_now_ns();
		while ((t = wl_now_ns()) < next)
			;
	}
	wl_loop_end(&w);
	for (int k = 0; k < 8; k++)
		if (counts[k])
			printf("SITE_%d %llu FIRST_NS %llu\n", k, counts[k], (unsigned long long)first[k]);
	printf("SYNCS %llu\n", i);
	wl_finish(&w, WL_FNV_INIT);
	if (tail_ms > 0)
		wl_cpu_work((unsigned long long)tail_ms * 1000000);
	return 0;
}
