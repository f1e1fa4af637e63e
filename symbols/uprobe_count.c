/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "symbols/uprobe_count.h"

struct ffm_uprobe_counter {
	int nfds;
	int fds[];
};

int ffm_uprobe_pmu_type(const char *sysfs_path)
{
	char buf[32];
	FILE *f = fopen(sysfs_path ? sysfs_path : "/sys/bus/event_source/devices/uprobe/type", "re");
	int type;

	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%d", &type) != 1 || type < 0) {
		fclose(f);
		return -EINVAL;
	}
	fclose(f);
	return type;
}

static int open_one(int type, const char *path, uint64_t offset, bool retprobe, pid_t pid, int cpu)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = type,
		/* bit 0 of config is "retprobe" (format/retprobe: config:0). */
		.config = retprobe ? 1 : 0,
		.config1 = (uint64_t)(uintptr_t)path,
		.config2 = offset,
		.inherit = pid >= 0,
		.disabled = 0,
	};
	int fd = syscall(SYS_perf_event_open, &attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int ffm_uprobe_counter__open(const char *path, uint64_t offset, bool retprobe, pid_t pid,
			     struct ffm_uprobe_counter **ret)
{
	struct ffm_uprobe_counter *c;
	int type = ffm_uprobe_pmu_type(NULL), ncpu, err;

	*ret = NULL;
	if (type < 0)
		return type;
	if (access(path, R_OK) < 0)
		return -errno;
	ncpu = pid >= 0 ? 1 : (int)sysconf(_SC_NPROCESSORS_CONF);
	if (ncpu <= 0)
		return -EINVAL;
	c = calloc(1, sizeof(*c) + ncpu * sizeof(int));
	if (!c)
		return -ENOMEM;
	for (int i = 0; i < ncpu; i++) {
		int fd = open_one(type, path, offset, retprobe, pid, pid >= 0 ? -1 : i);

		if (fd < 0) {
			/* Offline CPUs cannot be opened; any other error is fatal. */
			if (pid < 0 && fd == -ENODEV)
				continue;
			err = fd;
			ffm_uprobe_counter__free(c);
			return err;
		}
		c->fds[c->nfds++] = fd;
	}
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
