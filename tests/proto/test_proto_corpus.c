/* SPDX-License-Identifier: MIT */
/*
 * Replays tests/proto/corpus (README there) through ffm_proto_parse: every file must satisfy
 * tests/proto/proto_check.h, and files named ok-* / bad-<ERRNO>-* must give that result. Also a
 * few requests built here whose shape is easier to state in code than as files.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "tests/proto/proto_check.h"
#include "tests/testutil.h"

#define CORPUS "tests/proto/corpus"

static const struct {
	const char *name;
	int err;
} errnos[] = {
	{ "E2BIG", E2BIG }, { "EPROTO", EPROTO }, { "EOPNOTSUPP", EOPNOTSUPP },
	{ "EINVAL", EINVAL }, { "ENOSPC", ENOSPC },
};

static char *slurp(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf && read(fd, buf, (size_t)st.st_size) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

TEST(corpus_replays)
{
	DIR *d = opendir(CORPUS);
	struct dirent *de;
	int files = 0, named = 0;

	ASSERT_MSG(d, "%s: %s (run from the repository root)", CORPUS, strerror(errno));
	while ((de = readdir(d))) {
		char path[512];
		const char *broken;
		size_t len = 0;
		char *buf;
		int r, want = 1; /* 1: any result */

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "README.md"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", CORPUS, de->d_name);
		buf = slurp(path, &len);
		ASSERT_MSG(buf, "cannot read %s", path);
		files++;
		if (!strncmp(de->d_name, "ok-", 3))
			want = 0;
		for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
			size_t n = strlen(errnos[i].name);

			if (!strncmp(de->d_name, "bad-", 4) && !strncmp(de->d_name + 4, errnos[i].name, n) &&
			    de->d_name[4 + n] == '-')
				want = -errnos[i].err;
		}
		ASSERT_MSG(strncmp(de->d_name, "bad-", 4) || want != 1,
			   "%s: unknown errno in the name (see the corpus README)", de->d_name);
		broken = proto_check(buf, len, &r);
		free(buf);
		ASSERT_MSG(!broken, "%s: %s (returned %d)", de->d_name, broken, r);
		if (want != 1) {
			named++;
			ASSERT_MSG(r == want, "%s: returned %d (%s), expected %d", de->d_name, r,
				   strerror(-r), want);
		}
	}
	closedir(d);
	printf("# %d corpus files, %d with an expected result\n", files, named);
	ASSERT(named >= 30);
}

TEST(arguments_keep_order_and_first_wins)
{
	static struct ffm_request req;
	const char *m = "FFM/1 job-start\njob=7\npid=1\npid=2\nkey=a=b\n", *why;

	ASSERT_EQ(ffm_proto_parse(m, strlen(m), &req, &why), 0);
	ASSERT_EQ(req.verb, FFM_VERB_JOB_START);
	ASSERT_EQ(req.nargs, 4);
	ASSERT_STREQ(req.args[1].value, "1");
	ASSERT_STREQ(req.args[2].value, "2");
	ASSERT_STREQ(ffm_proto_arg(&req, "pid"), "1");
	ASSERT_STREQ(ffm_proto_arg(&req, "key"), "a=b");
	ASSERT(ffm_proto_arg(&req, "owner") == NULL);
}

TEST(format_refuses_what_parse_would)
{
	char buf[FFM_PROTO_MAX_REQUEST + 1];
	static char big[FFM_PROTO_MAX_VALUE + 2];
	struct ffm_proto_arg a = { .name = "job", .value = "x\ny=1" };
	struct ffm_proto_arg many[5];

	/* A newline in a value would smuggle a second argument line. */
	ASSERT_EQ(ffm_proto_format(buf, sizeof(buf), FFM_VERB_JOB_END, &a, 1), -EINVAL);
	memset(big, 'v', sizeof(big) - 1);
	a.value = big;
	ASSERT_EQ(ffm_proto_format(buf, sizeof(buf), FFM_VERB_JOB_END, &a, 1), -EINVAL);
	/* Five values of 1000 bytes: each valid, together over FFM_PROTO_MAX_REQUEST. */
	big[1000] = 0;
	for (int i = 0; i < 5; i++)
		many[i] = (struct ffm_proto_arg){ .name = "exe", .value = big };
	ASSERT_EQ(ffm_proto_format(buf, sizeof(buf), FFM_VERB_JOB_START, many, 5), -E2BIG);
	ASSERT_EQ(ffm_proto_format(buf, sizeof(buf), (enum ffm_verb)99, NULL, 0), -EINVAL);
}

TEST_MAIN()
