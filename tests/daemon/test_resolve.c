/* SPDX-License-Identifier: MIT */
/*
 * daemon/resolve.c against a job user's LD_LIBRARY_PATH (docs/SECURITY.md, "Opening files a
 * job's user names"): a process of an unprivileged user (65534) names directories; ffmd (root)
 * must pick only a libcuda.so.1 that user could load, never open a FIFO or a device by that
 * name, never name a file the user cannot read. Needs root (skips otherwise).
 */
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

#include "common/util.h"
#include "daemon/resolve.h"
#include "symbols/useropen.h"
#include "tests/testutil.h"

#define NOBODY 65534

static char dir[256];

static void mk(const char *sub, mode_t mode)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, sub);
	ASSERT(mkdir(p, mode) == 0 && chmod(p, mode) == 0);
}

static void file(const char *path, mode_t mode, uid_t uid)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, path);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ASSERT(fd >= 0 && write(fd, "\177ELF", 4) == 4 && fchmod(fd, mode) == 0);
	ASSERT(fchown(fd, uid, uid) == 0);
	close(fd);
}

/* A process of user 65534 with LD_LIBRARY_PATH=@llp, stopped until killed. */
static pid_t user_process(const char *llp)
{
	int p[2];
	char c;
	pid_t pid;

	ASSERT(pipe(p) == 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		char *envp[] = { NULL, NULL };
		char env[4096];

		snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", llp);
		envp[0] = env;
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(2);
		close(p[0]);
		/* exec, so that /proc/PID/environ is this environment */
		if (dup2(p[1], 3) < 0)
			_exit(2);
		execle("/bin/sh", "sh", "-c", "echo x >&3; while :; do sleep 1; done", (char *)NULL,
		       envp);
		_exit(3);
	}
	close(p[1]);
	ASSERT(read(p[0], &c, 1) == 1);
	close(p[0]);
	return pid;
}

static int resolve_as_user(const char *llp, char *out, size_t len, double *ms)
{
	pid_t pid = user_process(llp);
	double t0 = ffm_now_s();
	int err = ffm_resolve_libcuda_pid(pid, NULL, out, len);

	*ms = (ffm_now_s() - t0) * 1e3;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return err;
}

TEST(setup)
{
	if (geteuid() != 0)
		SKIP("needs root (a user's process, root's lookups)");
	/* The shared test machine may be slow: the deadline is not what is tested here. */
	ffm_user_open__set_deadline_ms(3000);
	snprintf(dir, sizeof(dir), "/tmp/ffm-test-resolve.XXXXXX");
	ASSERT(mkdtemp(dir));
	ASSERT(chmod(dir, 0755) == 0);
	mk("good", 0755);
	file("good/libcuda.so.1", 0644, NOBODY);
	mk("fifo", 0755);
	ASSERT(mkfifo(strcat(strcpy((char[512]){ 0 }, dir), "/fifo/libcuda.so.1"), 0666) == 0);
	mk("dev", 0755);
	ASSERT(mknod(strcat(strcpy((char[512]){ 0 }, dir), "/dev/libcuda.so.1"), S_IFBLK | 0666,
		     makedev(7, 250)) == 0);
	mk("secret", 0700); /* root's: the user cannot look in */
	file("secret/libcuda.so.1", 0644, 0);
	mk("unreadable", 0755);
	file("unreadable/libcuda.so.1", 0600, 0);
	mk("link", 0755);
	ASSERT(symlink(strcat(strcpy((char[512]){ 0 }, dir), "/secret/libcuda.so.1"),
		       strcat(strcpy((char[512]){ 0 }, dir), "/link/libcuda.so.1")) == 0);
}

/* Each of @bad first, then good/: good/ is the pick, at once. */
TEST(only_what_the_user_could_load)
{
	static const char *const bad[] = { "fifo", "dev", "secret", "unreadable", "link" };
	char llp[2048], out[4096], want[512];
	double ms;
	int err;

	if (!*dir)
		SKIP("no setup");
	snprintf(want, sizeof(want), "%s/good/libcuda.so.1", dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(llp, sizeof(llp), "%s/%s:%s/good", dir, bad[i], dir);
		err = resolve_as_user(llp, out, sizeof(out), &ms);
		ASSERT_MSG(err == 0, "%s: no pick: %s", bad[i], strerror(-err));
		/* The pick is named through /proc/PID/root when it is not "/" from here. */
		ASSERT_MSG(strstr(out, want) != NULL, "%s/libcuda.so.1 first: picked %s", bad[i],
			   out);
		ASSERT_MSG(ms < 3000, "%s: %.0f ms", bad[i], ms);
	}
	/* Alone, none of them is picked. */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(llp, sizeof(llp), "%s/%s", dir, bad[i]);
		if (resolve_as_user(llp, out, sizeof(out), &ms) == 0)
			ASSERT_MSG(!strstr(out, dir), "%s alone: picked %s", bad[i], out);
	}
}

TEST(cleanup)
{
	char cmd[512];

	if (!*dir)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ASSERT(system(cmd) == 0);
}

TEST_MAIN()
