// SPDX-License-Identifier: MIT
/*
 * Which probes a stage puts on the simulated driver (daemon/probes.c): the stage-1 list's
 * queries and getters get none (daemon/apis.c, ffm_api_is_query), its other functions and
 * every kind the model uses do; the context-release set is entry only.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "tests/testutil.h"

#include "daemon/apis.h"
#include "daemon/probes.h"
#include "stages/ffm_plan.h"
#include "symbols/ffm_driver.h"

TEST(query_names)
{
	/* The getters of kernel handles are probed for the kernels' names (FFM_KIND_NAME). */
	ASSERT(!ffm_api_is_query("cuKernelGetFunction"));
	ASSERT(ffm_api_is_query("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"));
	ASSERT(ffm_api_is_query("cuFuncGetAttribute"));
	ASSERT(!ffm_api_is_query("cuModuleGetFunction"));
	ASSERT(ffm_api_is_query("cuLibraryGetGlobal"));
	ASSERT(ffm_api_is_query("cuMemGetInfo_v2"));
	ASSERT(ffm_api_is_query("cuStreamQuery_ptsz"));
	ASSERT(ffm_api_is_query("cuEventQuery"));
	/* What the model times, and functions that really synchronize or set up, are not. */
	ASSERT(!ffm_api_is_query("cuCtxSynchronize"));
	ASSERT(!ffm_api_is_query("cuStreamSynchronize_ptsz"));
	ASSERT(!ffm_api_is_query("cuMemcpyDtoHAsync_v2"));
	ASSERT(!ffm_api_is_query("cuLaunchKernel"));
	ASSERT(!ffm_api_is_query("cuMemFree_v2"));
	ASSERT(!ffm_api_is_query("cuDevicePrimaryCtxRetain"));
	ASSERT(!ffm_api_is_query("cuModuleLoadData"));
	ASSERT(!ffm_api_is_query("cuStreamWaitEvent"));
	ASSERT(!ffm_api_is_query("Get"));
	ASSERT(!ffm_api_is_query(""));
}

static bool has(const struct ffm_probe_set *ps, const struct ffm_driver *d, const char *name,
		bool *release)
{
	struct ffm_driver_sym syms[16];
	int n = ffm_driver__variants(d, name, syms, 16);

	for (int i = 0; i < n && i < 16; i++)
		for (size_t k = 0; k < ps->n; k++)
			if (ps->p[k].offset == syms[i].offset) {
				if (release)
					*release = ps->p[k].release;
				return true;
			}
	return false;
}

TEST(stage2_leaves_out_the_lists_queries)
{
	const char *list[] = { "cuCtxSynchronize", "cuDeviceGetName", "cuDeviceGetAttribute",
			       "cuDevicePrimaryCtxRetain" };
	uint32_t s2 = ffm_plan__probes(FFM_STAGE_DETAIL);
	struct ffm_probe_set ps;
	struct ffm_driver *d = NULL;
	struct ffm_apis *apis = NULL;
	char lib[PATH_MAX];
	bool rel = false;

	snprintf(lib, sizeof(lib), "%s/fakecuda/libcuda.so.1", ffm_test_build_dir());
	ASSERT_OK(ffm_driver__open(lib, NULL, &d));
	ASSERT_OK(ffm_apis__new(&apis));
	ASSERT_OK(ffm_probe_set__build(&ps, d, apis, s2, 0, list, 4));
	ASSERT(has(&ps, d, "cuCtxSynchronize", NULL));
	ASSERT(has(&ps, d, "cuDevicePrimaryCtxRetain", NULL));
	ASSERT(has(&ps, d, "cuLaunchKernel", NULL));
	ASSERT(has(&ps, d, "cuMemcpyHtoDAsync", NULL));
	ASSERT(!has(&ps, d, "cuDeviceGetName", NULL));
	ASSERT(!has(&ps, d, "cuDeviceGetAttribute", NULL));
	ffm_probe_set__release(&ps);
	/* The benchmark's yardstick: the same list with its queries probed. */
	ASSERT_OK(ffm_probe_set__build(&ps, d, apis, s2 | FFM_PROBE_SYNC_QUERIES, 0, list, 4));
	ASSERT(has(&ps, d, "cuDeviceGetName", NULL));
	ASSERT(has(&ps, d, "cuDeviceGetAttribute", NULL));
	ffm_probe_set__release(&ps);
	/* Adaptive stage 1's release probes: entry only, every variant. */
	ASSERT_OK(ffm_probe_set__build(&ps, d, apis, FFM_PROBE_CTX_END, 0, NULL, 0));
	ASSERT(has(&ps, d, "cuDevicePrimaryCtxRelease", &rel) && rel);
	ASSERT(has(&ps, d, "cuCtxDestroy", &rel) && rel);
	ASSERT(!has(&ps, d, "cuCtxSynchronize", NULL));
	ffm_probe_set__release(&ps);
	ffm_apis__free(apis);
	ffm_driver__free(d);
}

TEST_MAIN()
