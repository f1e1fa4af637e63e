/* SPDX-License-Identifier: MIT */
/*
 * libcuda discovery and inspection.
 *
 * Discovery finds every libcuda in use: the system's (from ld.so.cache under a root directory,
 * plus the usual NVIDIA directories) and the ones a process maps (from /proc/PID/maps; the file
 * is opened through /proc/PID/map_files/ or /proc/PID/root/<path> so that a process in another
 * mount namespace works). A library is identified by st_dev+st_ino and its GNU build-id, never
 * by its path: two locations of one file are reported once.
 *
 * An opened driver (struct ffm_driver) knows its build-id (hex), its version (from the name
 * libcuda.so.<version> after resolving symlinks, else "unknown"), the exported cu* functions of
 * .dynsym with their FILE OFFSETS (what uprobes take; converted through PT_LOAD, never assumed
 * equal to the vaddr), and the function enclosing any address by its FDE (the true entry).
 *
 * All functions return 0 (or a count) or -errno; nothing prints.
 */
#ifndef FFM_DRIVER_H
#define FFM_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FFM_BUILD_ID_MAX 129 /* hex digits + NUL */

/* ------------------------------------------------------------------ discovery */

struct ffm_driver_loc {
	char *path;      /* the path as its user sees it (ld.so.cache entry, maps path) */
	char *open_path; /* a path this process can open the same file by */
	uint64_t dev, ino;
	char build_id[FFM_BUILD_ID_MAX]; /* "" when the file has none */
	pid_t pid;       /* the process mapping it; 0 for the system's */
	bool deleted;    /* mapped, but replaced or removed on disk since */
};

struct ffm_driver_find_opts {
	size_t sz;             /* sizeof(struct ffm_driver_find_opts) */
	const char *root;      /* system root for the ld.so.cache lookup; NULL = "/" */
	const char *ld_cache;  /* NULL = <root>/etc/ld.so.cache */
	const char *proc_root; /* NULL = "/proc" */
	bool no_default_dirs;  /* do not also look in the usual NVIDIA library directories */
};

struct ffm_driver_list {
	size_t n;
	struct ffm_driver_loc *locs;
};

/* The system's libcuda(s). 0 with n == 0 when there is none. */
int ffm_driver_find_system(const struct ffm_driver_find_opts *opts, struct ffm_driver_list **ret);
/* The libcuda(s) mapped by @pid. -ESRCH for no such process, -EACCES without permission. */
int ffm_driver_find_in_process(pid_t pid, const struct ffm_driver_find_opts *opts,
			       struct ffm_driver_list **ret);
struct ffm_driver_list *ffm_driver_list__free(struct ffm_driver_list *l);

/*
 * Open @path read-only as a file a job's user may control (a driver, an ld.so.cache, a mapped
 * library): the path is looked up with O_PATH, which opens nothing, and only a regular file is
 * then opened for reading, with O_NONBLOCK, so a FIFO, a socket or a device named like a
 * library never blocks the caller or sees an open, nor does a lease on the file. Returns the
 * fd (O_CLOEXEC), -EINVAL for anything but a regular file, or -errno.
 */
int ffm_open_regular(const char *path);

/*
 * Parse an ld.so.cache file: the paths of every entry whose soname is @soname (e.g.
 * "libcuda.so.1"). Handles the "glibc-ld.so.cache1.1" format (with or without the old
 * "ld.so-1.7.0" header in front). *paths is a malloc'd array of malloc'd strings.
 */
int ffm_ld_cache_lookup(const char *cache_path, const char *soname, char ***paths, size_t *n);

/* The version in a file name "libcuda.so.<x.y[.z]>" into @buf; -ENOENT if it has none. */
int ffm_driver_version_from_name(const char *name, char *buf, size_t len);

/*
 * Whose code a module is, from its file name (a path or a bare name; NULL = unknown): the one
 * test of "is this frame NVIDIA's library" for every caller (stack keys, call sites, exports).
 *   FFM_MODULE_DRIVER   NVIDIA's user-space driver, libcuda.so*: where ffm's probes are.
 *   FFM_MODULE_NVIDIA   NVIDIA's libraries between the application and the driver (the CUDA
 *                       runtime, the math libraries, NCCL, ...): stripped, and not where a user
 *                       fixes anything.
 *   FFM_MODULE_OTHER    the application, a framework, the C library, unknown.
 */
enum ffm_module_owner {
	FFM_MODULE_OTHER = 0,
	FFM_MODULE_DRIVER,
	FFM_MODULE_NVIDIA,
};

enum ffm_module_owner ffm_module_owner(const char *path);

/* ------------------------------------------------------------------ one driver file */

struct ffm_driver;

struct ffm_driver_sym {
	const char *name;
	uint64_t offset; /* file offset of the entry (uprobe offset) */
	uint64_t vaddr;  /* st_value */
	uint64_t size;   /* st_size */
};

struct ffm_func_range {
	uint64_t entry_vaddr, entry_offset; /* FDE initial location, as vaddr and file offset */
	uint64_t size;                      /* FDE address range */
};

struct ffm_driver_opts {
	size_t sz;
	const char *display_path; /* what __path() reports; NULL = the path opened */
};

/* -ENOENT, -EACCES, -ENOEXEC (not ELF / truncated), -ENODATA (no .dynsym). */
int ffm_driver__open(const char *path, const struct ffm_driver_opts *opts, struct ffm_driver **ret);
struct ffm_driver *ffm_driver__free(struct ffm_driver *d);

const char *ffm_driver__path(const struct ffm_driver *d);
const char *ffm_driver__build_id(const struct ffm_driver *d); /* "" when none */
const char *ffm_driver__version(const struct ffm_driver *d); /* "unknown" when not known */
void ffm_driver__dev_ino(const struct ffm_driver *d, uint64_t *dev, uint64_t *ino);

/* The exported cu* function @name (exact, e.g. "cuCtxSynchronize_v2"); -ENOENT if absent. */
int ffm_driver__lookup(const struct ffm_driver *d, const char *name, struct ffm_driver_sym *sym);
/* Number of exported cu* functions, and the i-th (sorted by name). */
size_t ffm_driver__sym_count(const struct ffm_driver *d);
int ffm_driver__sym(const struct ffm_driver *d, size_t i, struct ffm_driver_sym *sym);
/*
 * Every exported variant of @base: base, base_v2, base_v3, ..., base_ptds, base_ptsz,
 * base_v2_ptds, ... Fills up to @max entries, returns how many exist.
 */
int ffm_driver__variants(const struct ffm_driver *d, const char *base, struct ffm_driver_sym *syms,
			 size_t max);

/* The function enclosing @vaddr by its FDE; -ENOENT when no FDE covers it. */
int ffm_driver__func_at(const struct ffm_driver *d, uint64_t vaddr, struct ffm_func_range *r);
/* The same for a file offset (as a uprobe or a mapping gives it). */
int ffm_driver__func_at_offset(const struct ffm_driver *d, uint64_t offset,
			       struct ffm_func_range *r);
int ffm_driver__vaddr_to_offset(const struct ffm_driver *d, uint64_t vaddr, uint64_t *offset);
int ffm_driver__offset_to_vaddr(const struct ffm_driver *d, uint64_t offset, uint64_t *vaddr);

#endif
