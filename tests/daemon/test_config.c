/* SPDX-License-Identifier: MIT */
/*
 * daemon/config.c, ffmd's config file, without a daemon: what is not a regular file is refused
 * (a directory is not an empty config, a FIFO does not block the reader), a section header
 * names exactly one rule, and the rules leave job slots for jobs.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "bpf/ffm.h"
#include "daemon/server.h"
#include "tests/testutil.h"

static char T[] = "/tmp/ffm-test-config.XXXXXX";
static struct ffmd_config cfg; /* large: not on the stack */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ASSERT_MSG(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	ASSERT(fclose(f) == 0);
}

/* Load @text as a config file; returns ffmd_config_load's result, the reason in @err. */
static int load_text(const char *text, char *err, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "%s/ffmd.conf", T);
	write_file(path, text);
	err[0] = 0;
	return ffmd_config_load(&cfg, path, err, len);
}

TEST(setup)
{
	ASSERT(mkdtemp(T));
}

TEST(regular_file_loads)
{
	char err[512];

	ASSERT_EQ(load_text("flush_ms = 100\n[rule r]\nuid = 1000\n", err, sizeof(err)), 0);
	ASSERT_EQ(cfg.flush_ms, 100);
	ASSERT_EQ(cfg.nrules, 1);
	ASSERT_STREQ(cfg.rules[0].name, "r");
}

TEST(sample_budget_and_wait_cost)
{
	static const char *const bad[] = { "sample_budget = -1%", "sample_budget = 101%",
					   "sample_budget = 0.1%%", "sample_budget = x",
					   "wait_cost_us = 0", "wait_cost_us = 1%" };
	char err[512], text[128];

	ASSERT_EQ(load_text("flush_ms = 100\n", err, sizeof(err)), 0);
	ASSERT_NEAR(cfg.sample_budget, 0.001, 1e-12); /* the defaults */
	ASSERT_NEAR(cfg.wait_cost_us, 2.8, 1e-12);
	ASSERT_EQ(load_text("sample_budget = 0.25%\nwait_cost_us = 1.5\n", err, sizeof(err)), 0);
	ASSERT_NEAR(cfg.sample_budget, 0.0025, 1e-12);
	ASSERT_NEAR(cfg.wait_cost_us, 1.5, 1e-12);
	ASSERT_EQ(load_text("sample_budget = 0\n", err, sizeof(err)), 0);
	ASSERT_EQ(cfg.sample_budget, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "%s\n", bad[i]);
		ASSERT_MSG(load_text(text, err, sizeof(err)) < 0, "%s accepted", bad[i]);
		ASSERT_MSG(strstr(err, ":1:"), "%s: %s", bad[i], err);
	}
}

TEST(directory_is_an_error)
{
	char dir[64], err[512] = "";

	/* fopen() of a directory succeeds and its first read fails: it used to load as an
	 * empty config, i.e. defaults and no rules, without a word. */
	snprintf(dir, sizeof(dir), "%s/conf.d", T);
	ASSERT(mkdir(dir, 0755) == 0);
	ASSERT(ffmd_config_load(&cfg, dir, err, sizeof(err)) < 0);
	ASSERT_MSG(strstr(err, dir) && strstr(err, "not a regular file") && strstr(err, "directory"),
		   "err: %s", err);
}

TEST(fifo_is_refused_without_blocking)
{
	char fifo[64];
	pid_t pid;
	int st = 0;

	snprintf(fifo, sizeof(fifo), "%s/fifo", T);
	ASSERT(mkfifo(fifo, 0600) == 0);
	/* In a child: a reader that blocks in open() waiting for a writer must not hang the
	 * whole test binary. */
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		char err[512] = "";
		int r = ffmd_config_load(&cfg, fifo, err, sizeof(err));

		printf("# %s\n", err);
		fflush(stdout);
		_exit(r < 0 && strstr(err, "not a regular file") && strstr(err, "FIFO") ? 0 : 1);
	}
	for (int i = 0; i < 500 && waitpid(pid, &st, WNOHANG) == 0; i++)
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		FAIL("loading a FIFO as the config blocks (5 s)");
	}
	ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "FIFO not refused as such (status %#x)", st);
}

TEST(device_is_refused)
{
	char err[512] = "";

	ASSERT(ffmd_config_load(&cfg, "/dev/null", err, sizeof(err)) < 0);
	ASSERT_MSG(strstr(err, "not a regular file") && strstr(err, "character device"), "err: %s", err);
}

TEST(missing_file_says_so)
{
	char err[512] = "", path[64];

	snprintf(path, sizeof(path), "%s/none.conf", T);
	ASSERT_EQ(ffmd_config_load(&cfg, path, err, sizeof(err)), -ENOENT);
	ASSERT_MSG(strstr(err, path) && strstr(err, strerror(ENOENT)), "err: %s", err);
}

TEST(section_header_names_one_rule)
{
	static const char *const bad[] = {
		"[rule a b]", "[rule a\tb]", "[rulea]", "[rules a]", "[rule]", "[rule ]", "[ rule ]",
		"[rule a]]", "[rule [a]", "[job a]", "[rule a", "[]",
	};
	char text[256], err[512], want[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* On line 2, after a valid setting: the error names the line and the header. */
		snprintf(text, sizeof(text), "flush_ms = 100\n%s\nuid = 1000\n", bad[i]);
		ASSERT_MSG(load_text(text, err, sizeof(err)) == -EINVAL, "'%s' accepted (%d rules, first '%s')",
			   bad[i], cfg.nrules, cfg.nrules ? cfg.rules[0].name : "");
		snprintf(want, sizeof(want), "ffmd.conf:2: ");
		ASSERT_MSG(strstr(err, want) && strstr(err, bad[i]) && strstr(err, "[rule NAME]"),
			   "'%s': %s", bad[i], err);
	}
	/* Blanks around the parts are fine, and a comment after the header. */
	ASSERT_EQ(load_text("[ rule\tgpu-users ]  # all of them\nuid = 1000\n", err, sizeof(err)), 0);
	ASSERT_EQ(cfg.nrules, 1);
	ASSERT_STREQ(cfg.rules[0].name, "gpu-users");
}

TEST(rule_name_is_never_cut)
{
	char name[80], text[256], err[512];

	/* 63 bytes fit; 64 used to become the first 63, another rule's name perhaps. */
	memset(name, 'n', 63);
	name[63] = 0;
	snprintf(text, sizeof(text), "[rule %s]\nuid = 1\n", name);
	ASSERT_EQ(load_text(text, err, sizeof(err)), 0);
	ASSERT_STREQ(cfg.rules[0].name, name);
	strcat(name, "X");
	snprintf(text, sizeof(text), "[rule %s]\nuid = 1\n", name);
	ASSERT_MSG(load_text(text, err, sizeof(err)) < 0, "a 64-byte name became '%s'", cfg.rules[0].name);
	ASSERT_MSG(strstr(err, "ffmd.conf:1: ") && strstr(err, "63 bytes"), "err: %s", err);
}

static int load_rules(int n, char *err, size_t len)
{
	size_t cap = (size_t)n * 48 + 1, off = 0;
	char *text = malloc(cap);
	int r;

	ASSERT(text);
	text[0] = 0;
	for (int i = 0; i < n; i++)
		off += (size_t)snprintf(text + off, cap - off, "[rule r%d]\nuid = %d\n", i, 50000 + i);
	r = load_text(text, err, len);
	free(text);
	return r;
}

TEST(rules_leave_job_slots_for_jobs)
{
	char err[512], want[64];

	/* Every rule holds a job slot as long as it is configured: as many rules as slots left
	 * none for any job, and each job start failed. */
	ASSERT_MSG(FFM_MAX_JOBS - FFM_MAX_RULES >= FFM_MAX_JOBS / 2, "%d rules of %d slots",
		   FFM_MAX_RULES, FFM_MAX_JOBS);
	ASSERT_EQ(load_rules(FFM_MAX_RULES, err, sizeof(err)), 0);
	ASSERT_EQ(cfg.nrules, FFM_MAX_RULES);
	ASSERT_EQ(load_rules(FFM_MAX_RULES + 1, err, sizeof(err)), -ENOSPC);
	/* The error names the limit, the line and why there is one. */
	snprintf(want, sizeof(want), "ffmd.conf:%d: more than %d rules", 2 * FFM_MAX_RULES + 1,
		 FFM_MAX_RULES);
	ASSERT_MSG(strstr(err, want) && strstr(err, "job slots"), "err: %s", err);
	ASSERT_EQ(load_rules(FFM_MAX_JOBS, err, sizeof(err)), -ENOSPC);
}

TEST(cleanup)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", T);
	ASSERT_EQ(system(cmd), 0);
}

TEST_MAIN()
