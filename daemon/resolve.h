/* SPDX-License-Identifier: MIT */
/*
 * Which libcuda.so.1 a process will load, decided before it loads it, so probes are in place
 * for its first driver call. Follows the dynamic loader's order for dlopen("libcuda.so.1"):
 * LD_LIBRARY_PATH, then ld.so.cache and the default directories (symbols/ffm_driver.h),
 * all inside the process's root directory (containers: /proc/PID/root).
 *
 * The process's environment and the LD_LIBRARY_PATH entries it names are its user's: they are
 * opened as that user (symbols/useropen.h): regular files only, without blocking, without
 * following links the user could not follow, absolute entries inside the process's root, each
 * open within a deadline. An entry whose libcuda.so.1 is a FIFO, a device or a file the user
 * cannot read is skipped, as the loader would skip it.
 */
#ifndef FFM_RESOLVE_H
#define FFM_RESOLVE_H

#include <stddef.h>
#include <sys/types.h>

/*
 * @ld_library_path: the process's LD_LIBRARY_PATH (NULL: none); @root: its root directory
 * (NULL: "/"); @cwd: its working directory, for relative entries (NULL: ours). @out gets a
 * path this process can open. -ENOENT if none found. The entries are looked at with the
 * caller's own rights (ffmctl profile: its user's).
 */
int ffm_resolve_libcuda(const char *ld_library_path, const char *root, const char *cwd, char *out,
			size_t len);
/* The same for a running process, from /proc/PID/environ and /proc/PID/root, as its user. */
int ffm_resolve_libcuda_pid(pid_t pid, const char *proc_root, char *out, size_t len);

#endif
