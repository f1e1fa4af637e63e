/* SPDX-License-Identifier: MIT */
/*
 * What ffmd reads of a process in /proc: its state, parent and start time (/proc/PID/stat),
 * whether its parent waits for stopped children (/proc/PID/task/TID/syscall), and which libcuda
 * it maps or will load. Plain readers: nothing here knows of jobs, holds or drivers' tables,
 * and nothing here changes a process.
 *
 * Each call is a few small reads of /proc; wait_stopped() alone polls, for at most its @ms.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/ffmd_int.h"
#include "daemon/resolve.h"
#include "symbols/ffm_driver.h"

/*
 * From /proc/PID/stat: the state letter ('T': stopped, 'Z': zombie), the parent (@ppid may be
 * NULL) and the start time in clock ticks since boot (field 22). -errno when the process is gone.
 */
int proc_stat(pid_t pid, char *state, pid_t *ppid, unsigned long long *start)
{
	char path[64], buf[1024], *rp;
	pid_t pp;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = 0;
	rp = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	/* After ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	 * cmajflt utime stime cutime cstime priority nice num_threads itrealvalue starttime(22) */
	if (!rp ||
	    sscanf(rp + 2,
		   "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   state, &pp, start) != 3)
		return -EPROTO;
	if (ppid)
		*ppid = pp;
	return 0;
}

char proc_state(pid_t pid)
{
	unsigned long long t;
	char st;

	return proc_stat(pid, &st, NULL, &t) < 0 ? 0 : st;
}

unsigned long long proc_start_time(pid_t pid)
{
	unsigned long long t;
	char st;

	return proc_stat(pid, &st, NULL, &t) < 0 ? 0 : t;
}

/* Alive and not yet past its exit (a zombie's exit tracepoint has run). */
bool alive(pid_t pid)
{
	char st = proc_state(pid);

	return st && st != 'Z' && st != 'X' && st != 'x';
}

/* Wait up to @ms for @pid to be stopped or gone; whether it stopped. */
bool wait_stopped(pid_t pid, int ms)
{
	for (int i = 0; i < ms; i++) {
		char st = proc_state(pid);

		if (st == 'T' || st == 't')
			return true;
		if (!st || st == 'Z' || st == 'X' || st == 'x')
			return false;
		usleep(1000);
	}
	return false;
}

/*
 * Whether a thread of @ppid is blocked in a wait that reports stopped children (wait4 with
 * WUNTRACED, waitid with WSTOPPED), from /proc/PPID/task/TID/syscall: the number and arguments
 * of the call a blocked thread is in. The user-space twin of the map guard's check (bpf/).
 */
bool waits_for_stops(pid_t ppid)
{
	char path[64];
	struct dirent *de;
	bool waits = false;
	DIR *dh;

	snprintf(path, sizeof(path), "/proc/%d/task", ppid);
	if (ppid <= 1 || !(dh = opendir(path)))
		return false;
	while (!waits && (de = readdir(dh))) {
		char sp[300], buf[512];
		unsigned long long a[6];
		long nr;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(sp, sizeof(sp), "/proc/%d/task/%s/syscall", ppid, de->d_name);
		if (!(f = fopen(sp, "re")))
			continue;
		if (fgets(buf, sizeof(buf), f) &&
		    sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx", &nr, &a[0], &a[1], &a[2], &a[3], &a[4],
			   &a[5]) == 7)
			waits = (nr == SYS_wait4 && (a[2] & WUNTRACED)) || (nr == SYS_waitid && (a[3] & WSTOPPED));
		fclose(f);
	}
	closedir(dh);
	return waits;
}

int parse_pid(const char *s, pid_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > INT32_MAX)
		return -EINVAL;
	*out = (pid_t)v;
	return 0;
}

/*
 * The libcuda @pid uses: the one it maps (returns 1), else the one its loader will pick (0). A
 * path through /proc/PID/root is shortened to the plain path when that names the same file from
 * ffmd's root: the /proc path dies with the process, and the driver outlives it.
 */
int driver_path_of(pid_t pid, char *out, size_t len)
{
	struct ffm_driver_list *l = NULL;
	char prefix[64];
	struct stat a, b;
	size_t pl;
	int err = -ENOENT, mapped = 0;

	if (ffm_driver_find_in_process(pid, NULL, &l) == 0 && l->n) {
		const struct ffm_driver_loc *lo = &l->locs[0];
		struct stat st;

		/* The maps path names the file for people; /proc/PID/map_files only while
		 * the process lives. */
		if (stat(lo->path, &st) == 0 && st.st_dev == lo->dev && st.st_ino == lo->ino)
			snprintf(out, len, "%s", lo->path);
		else
			snprintf(out, len, "%s", lo->open_path ? lo->open_path : lo->path);
		err = 0;
		mapped = 1;
	}
	ffm_driver_list__free(l);
	if (err && (err = ffm_resolve_libcuda_pid(pid, NULL, out, len)) < 0)
		return err;
	/* The plain path only where it names the same file here: the same root directory may
	 * still hold other mounts (ffmd's private /tmp, PrivateTmp=yes in its unit). */
	pl = (size_t)snprintf(prefix, sizeof(prefix), "/proc/%d/root", pid);
	if (!strncmp(out, prefix, pl) && out[pl] == '/' && stat(prefix, &a) == 0 && stat("/", &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino && stat(out, &a) == 0 &&
	    stat(out + pl, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		memmove(out, out + pl, strlen(out + pl) + 1);
	/* Likewise a path through /proc/PID/cwd (a relative LD_LIBRARY_PATH): the real path, if
	 * it is the same file from here. */
	if (!strncmp(out, "/proc/", 6) && stat(out, &a) == 0) {
		char *rp = realpath(out, NULL);

		if (rp && strncmp(rp, "/proc/", 6) && strlen(rp) < len && stat(rp, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			snprintf(out, len, "%s", rp);
		free(rp);
	}
	return mapped;
}
