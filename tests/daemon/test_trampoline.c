/* SPDX-License-Identifier: MIT */
/*
 * A return probe that someone else (another tool, or ffmd's API probes for another job) holds
 * on the driver's public functions puts the kernel's uretprobe trampoline address on the stack
 * in place of the call site's return address. Stage 1's waits must still name the
 * application's line: the BPF side takes the real address from the task's return instances.
 */
#include <limits.h>

#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"
#include "symbols/uprobe_count.h"
#include "tests/testutil.h"

#define ITERS 20
#define SITE_FILE "tests/workloads/unnecessary_sync.c"
#define SITE_LINE 27  /* the loop's sync: ITERS waits */
#define FINAL_LINE 44 /* main's sync after the loop: 1 wait, a call site of its own */

struct count_ctx {
	struct ffm_store *s;
	uint64_t at_site, at_final, waits;
};

/* Which of the two lines the stack's application frame is at (0: neither). Without the real
 * return addresses every sync gets the same key (libcuda frames + the trampoline) and the two
 * call sites merge into one. */
static int on_frame(const struct ffm_store_frame *f, uint32_t depth, void *vctx)
{
	int *line = vctx;

	if (!*line && f->file && strstr(f->file, SITE_FILE) &&
	    (f->line == SITE_LINE || f->line == FINAL_LINE))
		*line = (int)f->line;
	return 0;
}

static int on_agg(const struct ffm_store_stack_agg *a, void *vctx)
{
	struct count_ctx *c = vctx;
	int line = 0;

	if (a->kind != FFM_EV_WAIT)
		return 0;
	c->waits += a->count;
	ffm_store__for_each_frame(c->s, a->stack, on_frame, &line);
	if (line == SITE_LINE)
		c->at_site += a->count;
	else if (line == FINAL_LINE)
		c->at_final += a->count;
	return 0;
}

static int run_latest(const struct ffm_store_run *r, void *vctx)
{
	*(int64_t *)vctx = r->id;
	return 0;
}

TEST(stage1_call_site_under_foreign_return_probes)
{
	const char *b = ffm_test_build_dir();
	struct ffm_uprobe_counter *held[16] = {};
	struct ffm_driver_sym syms[16];
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct ffm_store_key key = { .key = "tramp" };
	struct count_ctx c = {};
	struct ffm_driver *d = NULL;
	char lib[PATH_MAX], st[] = "/tmp/ffm-tramp.XXXXXX", cmd[4 * PATH_MAX], why[256];
	int64_t run = 0;
	int n, nheld = 0;

	if (!ffm_test_can_bpf(why, sizeof(why)))
		SKIP("%s", why);
	snprintf(lib, sizeof(lib), "%s/fakecuda/libcuda.so.1", b);
	ASSERT_OK(ffm_driver__open(lib, NULL, &d));
	n = ffm_driver__variants(d, "cuCtxSynchronize", syms, 16);
	ASSERT_MSG(n > 0, "no cuCtxSynchronize in %s", lib);
	for (int i = 0; i < n && i < 16; i++) {
		int err = ffm_uprobe_counter__open(lib, syms[i].offset, true, -1, &held[nheld]);

		if (err == -EACCES || err == -EPERM)
			SKIP("perf uprobes not permitted: %s", strerror(-err));
		ASSERT_OK(err);
		nheld++;
	}
	ASSERT(mkdtemp(st));
	snprintf(cmd, sizeof(cmd),
		 "LD_LIBRARY_PATH=%s/fakecuda %s/ffmctl --state-dir %s profile --stages 1 --key tramp "
		 "-- %s/workloads/unnecessary_sync --iters %d >/dev/null 2>&1",
		 b, b, st, b, ITERS);
	ASSERT_EQ(system(cmd), 0);
	ASSERT_MSG(ffm_uprobe_counter__read(held[0]) + (nheld > 1 ? ffm_uprobe_counter__read(held[1]) : 0) > 0,
		   "the foreign return probes never fired: the test tests nothing");

	ASSERT_OK(ffm_store__open_key(st, &key, &so, &c.s));
	ffm_store__for_each_run(c.s, run_latest, &run);
	ASSERT(run > 0);
	ASSERT_OK(ffm_store__for_each_stack_agg(c.s, run, on_agg, &c));
	printf("# %" PRIu64 " of %" PRIu64 " waits at %s:%d, %" PRIu64 " at :%d\n", c.at_site, c.waits,
	       SITE_FILE, SITE_LINE, c.at_final, FINAL_LINE);
	ASSERT_EQ(c.at_site, ITERS);
	ASSERT_EQ(c.at_final, 1);

	ffm_store__free(c.s);
	for (int i = 0; i < nheld; i++)
		ffm_uprobe_counter__free(held[i]);
	ffm_driver__free(d);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", st);
	system(cmd);
}

TEST_MAIN()
