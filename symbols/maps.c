/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "common/util.h"
#include "symbols/ffm_maps.h"

/* One line (no trailing newline needed); m->path is malloc'd. */
static int parse_line(const char *line, struct ffm_map *m)
{
	unsigned long long start, end, off, ino;
	unsigned int maj, min;
	char perms[8];
	int pos = 0;
	size_t len;
	const char *p;

	memset(m, 0, sizeof(*m));
	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu%n", &start, &end, perms, &off, &maj, &min,
		   &ino, &pos) != 7 || pos <= 0 || end < start || strlen(perms) < 4)
		return -EINVAL;
	*m = (struct ffm_map){ .start = start, .end = end, .offset = off, .dev = makedev(maj, min),
			       .ino = ino,
			       .prot = (perms[0] == 'r' ? FFM_MAP_R : 0) | (perms[1] == 'w' ? FFM_MAP_W : 0) |
				       (perms[2] == 'x' ? FFM_MAP_X : 0) |
				       (perms[3] == 's' ? FFM_MAP_SHARED : 0) };
	p = line + pos;
	while (*p == ' ' || *p == '\t')
		p++;
	len = strcspn(p, "\n");
	if (!len)
		return 0;
	if (len > 10 && !memcmp(p + len - 10, " (deleted)", 10)) {
		m->deleted = true;
		len -= 10;
	}
	m->path = strndup(p, len);
	return m->path ? 0 : -ENOMEM;
}

int ffm_maps_parse(const char *maps_path, struct ffm_map **maps, size_t *n)
{
	struct ffm_map *v = NULL;
	size_t cnt = 0, cap = 0, linecap = 0;
	char *line = NULL;
	FILE *f;
	int err = 0;

	*maps = NULL;
	*n = 0;
	f = fopen(maps_path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (getline(&line, &linecap, f) > 0) {
		if (line[0] == '\n')
			continue;
		if (FFM_GROW(v, cap, cnt + 1)) {
			err = -ENOMEM;
			goto out;
		}
		err = parse_line(line, &v[cnt]);
		if (err)
			goto out;
		cnt++;
	}
	/* Reading maps of a process that exited mid-read gives ESRCH. */
	if (ferror(f))
		err = -errno ?: -EIO;
out:
	free(line);
	fclose(f);
	if (err) {
		ffm_maps_free(v, cnt);
		return err;
	}
	*maps = v;
	*n = cnt;
	return 0;
}

void ffm_maps_free(struct ffm_map *maps, size_t n)
{
	if (!maps)
		return;
	for (size_t i = 0; i < n; i++)
		free(maps[i].path);
	free(maps);
}
