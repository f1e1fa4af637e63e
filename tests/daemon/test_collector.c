/* SPDX-License-Identifier: MIT */
/* The collector's BPF side loads, and its maps and job/rule plumbing work (needs BPF). */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

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

static void nap_ms(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * A job's process that maps a libcuda file nobody declared is stopped by the map guard until
 * the consumer lets it go. A consumer that goes before it has read that record (ffmd told to
 * stop, or a second ffmd on the machine whose job took the process) must not leave it stopped:
 * the collector lets every process it stopped go as it is freed.
 */
TEST(a_process_the_map_guard_stopped_is_let_go_with_the_collector)
{
	struct ffm_collector_opts o = { .sz = sizeof(o), .map_guard = true };
	struct ffm_job_cfg cfg = { .flags = FFM_JOB_ACTIVE, .stage = 1 };
	char dir[] = "/tmp/ffm-collector.XXXXXX", lib[64], why[256], st = 0;
	struct ffm_collector *c = NULL;
	int gate[2], fd, ws = 0, err;
	pid_t pid;

	if (!ffm_test_can_bpf(why, sizeof(why)))
		SKIP("%s", why);
	err = ffm_collector__open(&o, &c);
	ASSERT_MSG(err == 0, "ffm_collector__open: %s", strerror(-err));
	if (!ffm_collector__map_guard(c)) {
		ffm_collector__free(c);
		SKIP("no map guard on this kernel (the mmap syscall tracepoint)");
	}
	ASSERT(mkdtemp(dir));
	snprintf(lib, sizeof(lib), "%s/libcuda.so.1", dir);
	fd = open(lib, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	ASSERT(fd >= 0 && ftruncate(fd, 4096) == 0);
	close(fd);
	ASSERT(pipe(gate) == 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		char ch;

		close(gate[1]);
		if (read(gate[0], &ch, 1) < 0)
			_exit(2);
		fd = open(lib, O_RDONLY);
		_exit(fd >= 0 && mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) != MAP_FAILED ? 0 : 3);
	}
	close(gate[0]);
	ASSERT_OK(ffm_collector__set_job(c, 1, &cfg));
	ASSERT_OK(ffm_collector__track_pid(c, pid, 1));
	close(gate[1]);
	for (int i = 0; i < 500 && (st = ffm_test_proc_state(pid)) != 'T'; i++)
		nap_ms(10);
	if (st != 'T') {
		kill(pid, SIGCONT);
		waitpid(pid, &ws, 0);
		ffm_collector__free(c);
		FAIL("the map guard did not stop process %d at its mmap (state %c)", pid, st ? st : '?');
	}
	ffm_collector__free(c); /* nobody read the record */
	for (int i = 0; i < 500 && waitpid(pid, &ws, WNOHANG) == 0; i++)
		nap_ms(10);
	if (ffm_test_proc_state(pid) == 'T') {
		kill(pid, SIGCONT);
		waitpid(pid, &ws, 0);
		FAIL("process %d stayed stopped after the collector went", pid);
	}
	unlink(lib);
	rmdir(dir);
	ASSERT_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the child ended with status %#x", ws);
}

TEST_MAIN()
