/* SPDX-License-Identifier: MIT */
/* The collector's BPF side loads, and its maps and job/rule plumbing work (needs BPF). */
#include "daemon/collector.h"
#include "tests/testutil.h"

static struct ffm_collector *open_or_skip(void)
{
	struct ffm_collector *c = NULL;
	char why[256];
	int err;

	if (!ffm_test_can_bpf(why, sizeof(why)))
		SKIP("%s", why);
	err = ffm_collector__open(NULL, &c);
	ASSERT_MSG(err == 0, "ffm_collector__open: %s", strerror(-err));
	return c;
}

TEST(loads_and_tracks_pids)
{
	struct ffm_collector *c = open_or_skip();
	struct ffm_job_cfg cfg = { .flags = FFM_JOB_ACTIVE, .stage = 1 };
	pid_t pids[8];

	ASSERT_OK(ffm_collector__set_job(c, 3, &cfg));
	ASSERT_EQ(ffm_collector__set_job(c, FFM_MAX_JOBS, &cfg), -EINVAL);
	ASSERT_OK(ffm_collector__track_pid(c, getpid(), 3));
	ASSERT_EQ(ffm_collector__job_pids(c, 3, pids, 8), 1);
	ASSERT_EQ(pids[0], getpid());
	ASSERT_OK(ffm_collector__untrack_pid(c, getpid()));
	ASSERT_EQ(ffm_collector__job_pids(c, 3, pids, 8), 0);
	ffm_collector__free(c);
}

TEST(drops_start_at_zero)
{
	struct ffm_collector *c = open_or_skip();
	struct ffm_rec_drops d;

	ASSERT_OK(ffm_collector__drops(c, 0, &d));
	for (int i = 0; i < FFM_REC_DROP__MAX; i++)
		ASSERT_EQ(d.n[i], 0);
	ASSERT_EQ(ffm_collector__drops(c, FFM_MAX_JOBS + 1, &d), -EINVAL);
	ffm_collector__free(c);
}

TEST_MAIN()
