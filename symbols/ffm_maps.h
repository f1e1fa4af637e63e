/* SPDX-License-Identifier: MIT */
/*
 * /proc/PID/maps parsing. The parser takes the file's path (tests feed fixture files): each line
 * becomes one struct ffm_map. Paths may contain spaces; a " (deleted)" suffix is removed and
 * flagged; anonymous mappings have path NULL; pseudo mappings ("[stack]", "[vdso]") keep their
 * bracketed name with ino 0. Returns 0 or -errno (-ENOENT/-ESRCH for a vanished process,
 * -EACCES without permission, -EINVAL for a malformed line).
 */
#ifndef FFM_MAPS_H
#define FFM_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FFM_MAP_R 0x1
#define FFM_MAP_W 0x2
#define FFM_MAP_X 0x4
#define FFM_MAP_SHARED 0x8

struct ffm_map {
	uint64_t start, end; /* [start, end) virtual addresses */
	uint64_t offset;     /* file offset of start */
	uint64_t dev;        /* makedev(major, minor) as written in maps */
	uint64_t ino;
	uint32_t prot;       /* FFM_MAP_* */
	bool deleted;        /* the file was unlinked (" (deleted)") */
	char *path;          /* NULL for anonymous mappings */
};

int ffm_maps_parse(const char *maps_path, struct ffm_map **maps, size_t *n);
void ffm_maps_free(struct ffm_map *maps, size_t n);

#endif
