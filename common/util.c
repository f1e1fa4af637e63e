/* SPDX-License-Identifier: MIT */
/* Growing arrays, the clock, directories: see util.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/util.h"

int ffm_grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t ncap = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	memset((char *)p + *cap * size, 0, (ncap - *cap) * size);
	*arr = p;
	*cap = ncap;
	return 0;
}

uint64_t ffm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double ffm_now_s(void)
{
	return ffm_now_ns() / 1e9;
}

int ffm_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(buf, mode) < 0 && errno != EEXIST ? -errno : 0;
}
