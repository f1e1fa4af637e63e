// SPDX-License-Identifier: MIT
/*
 * A CUDA-runtime program's call sites are the user's lines (analysis/sites.c), on stacks as nvcc
 * builds them: a `work<<<...>>>(d)` in launch_on goes through nvcc's host function `work` (at the
 * kernel's own line), its launch stub `__device_stub__Z4workPj` (a temporary .cudafe1.stub.c)
 * and the statically linked runtime; a cudaMalloc(&p, n) through the template in
 * cuda_runtime.h, whose path nvcc writes as <prefix>/cuda/bin/../targets/.../include/.
 */
#include <stdlib.h>

#include "analysis/ffm_analysis.h"
#include "store/ffm_store.h"
#include "tests/testutil.h"

#define MS 1000000ull
#define T0 (100 * 1000 * MS)
#define TGID 777
#define APP_CU "/home/u/app/app.cu"

static char tmpl[] = "/tmp/ffm-test-sites-XXXXXX";
static char *root;

static const struct ffm_store_frame launch_stack[] = {
	{ .build_id = "d1", .module = "libcuda.so.1", .offset = 0x1000 },
	{ .build_id = "a1", .module = "app", .offset = 0x500, .func = "cudaLaunchKernel",
	  .demangled = "cudaLaunchKernel", .folded = "cudaLaunchKernel" },
	{ .build_id = "a1", .module = "app", .offset = 0x400, .func = "_Z23__device_stub__Z4workPjPj",
	  .demangled = "__device_stub__Z4workPj(unsigned int*)", .folded = "__device_stub__Z4workPj",
	  .file = "/tmp/tmpxft_0000021f_00000000-6_app.cudafe1.stub.c", .line = 38 },
	{ .build_id = "a1", .module = "app", .offset = 0x300, .func = "_Z4workPj",
	  .demangled = "work(unsigned int*)", .folded = "work", .file = APP_CU, .line = 50 },
	{ .build_id = "a1", .module = "app", .offset = 0x200, .func = "_Z9launch_onPj",
	  .demangled = "launch_on(unsigned int*)", .folded = "launch_on", .file = APP_CU, .line = 95 },
	{ .build_id = "a1", .module = "app", .offset = 0x100, .func = "main", .demangled = "main",
	  .folded = "main", .file = APP_CU, .line = 120 },
};

static const struct ffm_store_frame malloc_stack[] = {
	{ .build_id = "d1", .module = "libcuda.so.1", .offset = 0x2000 },
	{ .build_id = "a1", .module = "app", .offset = 0x600, .func = "cudaMalloc",
	  .demangled = "cudaMalloc", .folded = "cudaMalloc" },
	{ .build_id = "a1", .module = "app", .offset = 0x180, .func = "_Z10cudaMallocIjE9cudaErrorPPT_m",
	  .demangled = "cudaMalloc<unsigned int>(unsigned int**, unsigned long)", .folded = "cudaMalloc",
	  .file = "/usr/local/cuda/bin/../targets/x86_64-linux/include/cuda_runtime.h", .line = 879,
	  .inlined = 1 },
	{ .build_id = "a1", .module = "app", .offset = 0x180, .func = "main", .demangled = "main",
	  .folded = "main", .file = APP_CU, .line = 130 },
};

/* A key's store with one stage-1 run: a wait under each stack. */
static const char *write_store(void)
{
	static char dir[512];
	struct ffm_store_opts so = { .sz = sizeof(so), .create = true };
	struct ffm_store *s = NULL;
	int64_t run, sl, sm;

	root = mkdtemp(tmpl);
	ASSERT(root);
	snprintf(dir, sizeof(dir), "%s/s", root);
	ASSERT_OK(ffm_store__open_key(dir, &(struct ffm_store_key){ .key = "k", .uid = 1 }, &so, &s));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = "j", .uid = 1,
		.state = FFM_JOB_RUNNING, .start_unix = 1700000000 }, NULL));
	ASSERT_OK(ffm_store__put_api_name(s, 1, "cuLaunchKernel"));
	ASSERT_OK(ffm_store__put_api_name(s, 2, "cuMemAlloc"));
	ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "j", .stage = 1,
		.start_ns = T0 - MS, .start_unix = 1700000000 }, &run));
	ASSERT_OK(ffm_store__put_process(s, &(struct ffm_store_process){ .run = run, .tgid = TGID,
		.exe = "app", .start_ns = T0 - MS }));
	ASSERT(ffm_store__put_stack(s, 0xa, launch_stack,
				    sizeof(launch_stack) / sizeof(launch_stack[0]), &sl) >= 0);
	ASSERT(ffm_store__put_stack(s, 0xb, malloc_stack,
				    sizeof(malloc_stack) / sizeof(malloc_stack[0]), &sm) >= 0);
	ASSERT_OK(ffm_store__put_event(s, &(struct ffm_store_event){ .run = run, .kind = FFM_EV_WAIT,
		.api = 1, .tgid = TGID, .tid = TGID, .start_ns = T0, .dur_ns = 100000,
		.wait_ns = 100000, .stack = sl }, NULL));
	ASSERT_OK(ffm_store__put_event(s, &(struct ffm_store_event){ .run = run, .kind = FFM_EV_WAIT,
		.api = 2, .tgid = TGID, .tid = TGID, .start_ns = T0 + MS, .dur_ns = 50000,
		.wait_ns = 50000, .stack = sm }, NULL));
	ASSERT_OK(ffm_store__process_exit(s, run, TGID, T0 + 10 * MS, 0));
	ASSERT_OK(ffm_store__run_end(s, run, T0 + 11 * MS, 0.011, 0, 0));
	ASSERT_OK(ffm_store__job_end(s, "j", FFM_JOB_DONE, 1700000100));
	ffm_store__free(s);
	return dir;
}

static const struct ffm_an_site *site_of(const struct ffm_analysis_result *r, uint64_t wait_ns)
{
	for (size_t i = 0; i < r->n_sites; i++)
		if (r->sites[i].wait_ns == wait_ns)
			return &r->sites[i];
	FAIL("no site waited %llu ns", (unsigned long long)wait_ns);
	return NULL;
}

TEST(nvcc_stubs_and_runtime_headers_name_the_users_line)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct ffm_store *s = NULL;
	struct ffm_analysis *a = NULL;
	const struct ffm_analysis_result *r;
	const struct ffm_an_site *x;

	unsetenv("FFM_SRC_LIBRARY");
	ASSERT_OK(ffm_store__open_key(write_store(), &(struct ffm_store_key){ .key = "k", .uid = 1 },
				      &so, &s));
	ASSERT_OK(ffm_analysis__run(s, &(struct ffm_analysis_opts){
		.sz = sizeof(struct ffm_analysis_opts), .job_id = "j", .profile_stage = 1 }, &a));
	r = ffm_analysis__result(a);
	x = site_of(r, 100000);
	ASSERT_STREQ(x->file, APP_CU);
	ASSERT_EQ(x->line, 95); /* the launch, not the kernel's line (50) or the stub's */
	x = site_of(r, 50000);
	ASSERT_STREQ(x->file, APP_CU);
	ASSERT_EQ(x->line, 130); /* the cudaMalloc line, not cuda_runtime.h:879 */
	ffm_analysis__free(a);
	ffm_store__free(s);
}

TEST(kernel_wrapper_names)
{
	ASSERT(ffm_an_nvcc_kernel_wrapper("__device_stub__Z4workPj(unsigned int*)", "_Z4workPj"));
	ASSERT(ffm_an_nvcc_kernel_wrapper("__device_stub__Z4workPj", "_Z4workPj"));
	/* extern "C" */
	ASSERT(ffm_an_nvcc_kernel_wrapper("__device_stub__saxpy(int, float*)", "saxpy"));
	ASSERT(!ffm_an_nvcc_kernel_wrapper("__device_stub__saxpy(int, float*)", "saxpy2"));
	ASSERT(!ffm_an_nvcc_kernel_wrapper("__device_stub__Z4workPj(unsigned int*)", "_Z4workPjj"));
	ASSERT(!ffm_an_nvcc_kernel_wrapper("__device_stub__Z4workPj", "_Z9launch_onPj"));
	ASSERT(!ffm_an_nvcc_kernel_wrapper("cudaLaunchKernel", "_Z4workPj"));
	ASSERT(!ffm_an_nvcc_kernel_wrapper(NULL, "main"));
	ASSERT(!ffm_an_nvcc_kernel_wrapper("__device_stub__x", NULL));
}

TEST(cleanup)
{
	ASSERT_OK(ffm_test_rmtree(root));
}

TEST_MAIN()
