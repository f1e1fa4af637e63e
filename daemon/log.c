/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#ifdef FFM_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include <bpf/libbpf.h>

#include "daemon/log.h"

int ffm_log_level = LOG_INFO;

void ffm_log(int prio, const char *fmt, ...)
{
	static int journal = -1;
	va_list ap;

	if (prio > ffm_log_level)
		return;
	if (journal < 0)
		journal = getenv("JOURNAL_STREAM") != NULL;
	flockfile(stderr); /* one line, whole, whichever thread logs (the store publisher's too) */
	if (journal)
		fprintf(stderr, "<%d>", prio);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	funlockfile(stderr);
}

int ffm_log_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[1024];
	int n;

	if (level == LIBBPF_DEBUG || ffm_log_level < LOG_DEBUG)
		return 0;
	n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0)
		return n;
	n = (int)strcspn(line, "\n"); /* one line of the log each (its lines end in one) */
	ffm_log(LOG_DEBUG, "%.*s", n, line);
	return n;
}

int ffm_notify(const char *state)
{
#ifdef FFM_HAVE_LIBSYSTEMD
	return sd_notify(0, state);
#else
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n;
	int fd, r = 0;

	if (!path || !*path)
		return 0;
	n = strlen(path);
	if (n >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
		return -EINVAL;
	memcpy(sa.sun_path, path, n);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = 0; /* abstract namespace */
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		   offsetof(struct sockaddr_un, sun_path) + n) < 0)
		r = -errno;
	close(fd);
	return r < 0 ? r : 1;
#endif
}

unsigned long long ffm_watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");

	if (!usec)
		return 0;
	if (pid && atol(pid) != getpid())
		return 0;
	return strtoull(usec, NULL, 10);
}
