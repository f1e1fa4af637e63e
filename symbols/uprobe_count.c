/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "symbols/uprobe_count.h"

struct ffm_uprobe_counter {
	int nfds;
	int fds[];
};

/* The perf PMU type of uprobes; -errno. */
static int pmu_type(void)
{
	char buf[32];
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "re");
	int type = -1;

	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%d", &type) != 1)
		type = -1;
	fclose(f);
	return type >= 0 ? type : -EINVAL;
}

static int open_one(int type, const char *path, uint64_t offset, bool retprobe, pid_t pid, int cpu,
		    bool inherit)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = type,
		/* bit 0 of config is "retprobe" (format/retprobe: config:0). */
		.config = retprobe ? 1 : 0,
		.config1 = (uint64_t)(uintptr_t)path,
		.config2 = offset,
		.inherit = inherit,
		.disabled = 0,
	};
	int fd = syscall(SYS_perf_event_open, &attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* The threads of another process (its /proc/PID/task entries). */
static int list_tasks(pid_t pid, pid_t **tids)
{
	char dir[64];
	DIR *d;
	struct dirent *de;
	size_t n = 0, cap = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	*tids = NULL;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if (ffm_grow((void **)tids, &cap, n + 1, sizeof(**tids))) {
			closedir(d);
			free(*tids);
			return -ENOMEM;
		}
		(*tids)[n++] = atoi(de->d_name);
	}
	closedir(d);
	return (int)n;
}

int ffm_uprobe_counter__open(const char *path, uint64_t offset, bool retprobe, pid_t pid,
			     struct ffm_uprobe_counter **ret)
{
	struct ffm_uprobe_counter *c;
	int type = pmu_type(), n, err;
	pid_t *tids = NULL;
	/*
	 * An inherited uprobe event is re-created at each clone() from attr.config1, a pointer
	 * into *our* memory: valid in our own threads, garbage in another process, where it makes
	 * every pthread_create() there fail. So another process gets one event per thread it
	 * has now, without inherit.
	 */
	bool foreign = pid >= 0 && pid != getpid();

	*ret = NULL;
	if (type < 0)
		return type;
	if (access(path, R_OK) < 0)
		return -errno;
	if (foreign)
		n = list_tasks(pid, &tids);
	else
		n = pid >= 0 ? 1 : (int)sysconf(_SC_NPROCESSORS_CONF);
	if (n <= 0)
		return n < 0 ? n : -EINVAL;
	c = calloc(1, sizeof(*c) + n * sizeof(int));
	if (!c) {
		free(tids);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		int fd = foreign ? open_one(type, path, offset, retprobe, tids[i], -1, false)
				 : open_one(type, path, offset, retprobe, pid, pid >= 0 ? -1 : i,
					    pid >= 0);

		if (fd < 0) {
			/* Offline CPUs cannot be opened, threads may have exited; else fatal. */
			if ((pid < 0 && fd == -ENODEV) || (foreign && fd == -ESRCH))
				continue;
			err = fd;
			free(tids);
			ffm_uprobe_counter__free(c);
			return err;
		}
		c->fds[c->nfds++] = fd;
	}
	free(tids);
	*ret = c;
	return 0;
}

int64_t ffm_uprobe_counter__read(struct ffm_uprobe_counter *c)
{
	int64_t sum = 0;

	for (int i = 0; i < c->nfds; i++) {
		uint64_t v;

		if (read(c->fds[i], &v, sizeof(v)) != sizeof(v))
			return -EIO;
		sum += (int64_t)v;
	}
	return sum;
}

int ffm_uprobe_counter__reset(struct ffm_uprobe_counter *c)
{
	for (int i = 0; i < c->nfds; i++)
		if (ioctl(c->fds[i], PERF_EVENT_IOC_RESET, 0) < 0)
			return -errno;
	return 0;
}

struct ffm_uprobe_counter *ffm_uprobe_counter__free(struct ffm_uprobe_counter *c)
{
	if (!c)
		return NULL;
	for (int i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	free(c);
	return NULL;
}
