/* SPDX-License-Identifier: MIT */
/*
 * common/caps.h: what of a need an effective set lacks, CAP_SYS_ADMIN standing in for CAP_BPF
 * and CAP_PERFMON, and the words a refusal ends with.
 */
#include <linux/capability.h>

#include "common/caps.h"
#include "tests/testutil.h"

#define BPF FFM_CAP(CAP_BPF)
#define PERFMON FFM_CAP(CAP_PERFMON)
#define SYS_ADMIN FFM_CAP(CAP_SYS_ADMIN)

TEST(lacking)
{
	ASSERT_EQ(ffm_caps_lacking(BPF | PERFMON, PERFMON), BPF);
	ASSERT_EQ(ffm_caps_lacking(BPF | PERFMON, SYS_ADMIN), 0);
	ASSERT_EQ(ffm_caps_lacking(SYS_ADMIN, BPF | PERFMON), SYS_ADMIN);
	ASSERT_EQ(ffm_caps_lacking(SYS_ADMIN | BPF, 0), SYS_ADMIN | BPF);
}

TEST(hint_names_what_is_lacking)
{
	char buf[256];

	ASSERT_STREQ(ffm_caps_hint(BPF | PERFMON, PERFMON, buf, sizeof(buf)),
		     "needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); this process lacks CAP_BPF");
	ASSERT_STREQ(ffm_caps_hint(SYS_ADMIN, BPF | PERFMON, buf, sizeof(buf)),
		     "needs CAP_SYS_ADMIN; this process lacks CAP_SYS_ADMIN");
	ASSERT_STREQ(ffm_caps_hint(BPF | PERFMON | FFM_CAP(CAP_KILL), 0, buf, sizeof(buf)),
		     "needs CAP_BPF, CAP_PERFMON and CAP_KILL (or CAP_SYS_ADMIN); this process lacks "
		     "CAP_BPF, CAP_PERFMON and CAP_KILL");
	/* A capability without a name in the table still shows, by number. */
	ASSERT_STREQ(ffm_caps_hint(FFM_CAP(CAP_CHOWN), 0, buf, sizeof(buf)),
		     "needs capability 0; this process lacks capability 0");
}

TEST(hint_when_nothing_is_lacking)
{
	char buf[256];

	ffm_caps_hint(BPF | PERFMON, SYS_ADMIN, buf, sizeof(buf));
	ASSERT_MSG(strstr(buf, "which this process has: the kernel refused for another reason"),
		   "'%s'", buf);
}

TEST(hint_truncates)
{
	char buf[16];

	ffm_caps_hint(BPF | PERFMON, 0, buf, sizeof(buf));
	ASSERT_STREQ(buf, "needs CAP_BPF a");
}

TEST(own_effective_set)
{
	uint64_t eff = 0;
	char buf[256], own[256];

	ASSERT_OK(ffm_caps_effective(&eff));
	/* The hint of this process's own set is the one given its set explicitly. */
	ffm_caps_hint(SYS_ADMIN, eff, buf, sizeof(buf));
	ffm_caps_hint(SYS_ADMIN, UINT64_MAX, own, sizeof(own));
	ASSERT_STREQ(own, buf);
}

TEST_MAIN()
