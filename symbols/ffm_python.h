/* SPDX-License-Identifier: MIT */
/*
 * Python frames: which CPython build a process runs, the layout the BPF walk needs for it
 * (struct ffm_py_layout, bpf/ffm.h), a check of that layout against the live process, and the
 * decoding of a walked frame (code object address, instruction offset) into file, qualified
 * name and line.
 *
 * Builds: the file of the process that defines _PyRuntime in .dynsym (the python executable,
 * or libpython3.X.so), its version from Py_Version (3.11+); before 3.11, which has none, the
 * minor version from the C API functions the file defines (PyAIter_Check: 3.10;
 * PyModule_AddType: 3.9), the micro version unknown. Offsets come from a table per
 * (major, minor), taken from CPython's own headers (Include/internal/pycore_frame.h,
 * pycore_runtime.h, pycore_interp.h, cpython/pystate.h, cpython/code.h) of release builds.
 * Debug (Py_DEBUG) and free-threaded builds lay their objects out otherwise and are refused,
 * as is every version without a table: never guessed.
 *
 * Everything read from the process (/proc/PID/mem) is treated as hostile: bounded reads,
 * types checked against the build's PyCode_Type, PyUnicode_Type and PyBytes_Type, lengths
 * capped, line tables parsed with bounds. Decoded code objects are cached per process by
 * address. The BPF side sends a copy of each code object a new stack runs (FFM_REC_PYCODE),
 * taken while it runs; the process's memory is read only where no copy came.
 */
#ifndef FFM_PYTHON_H
#define FFM_PYTHON_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/ffm.h"

/* A CPython build found in a process. */
struct ffm_py_build {
	char path[PATH_MAX];  /* the file defining _PyRuntime, as the process maps it */
	uint32_t version;     /* PY_VERSION_HEX */
	uint64_t runtime;     /* address of _PyRuntime in the process */
	uint64_t code_type, str_type, bytes_type; /* PyCode_Type, PyUnicode_Type, PyBytes_Type */
	struct ffm_py_layout bpf;                 /* what the pyprocs map takes */
	const struct ffm_py_offsets *off;         /* the build's table (symbols/python.c) */
};

/*
 * Find the CPython build of process @pid (@proc_root NULL = "/proc"). 1: found and supported
 * (@b filled); 0: no CPython in the process (yet: libpython may be mapped later); -ENOTSUP: a
 * CPython build ffm cannot walk, @why says which ("3.10.13 (no table)", "debug build"...);
 * other -errno: the process could not be read.
 */
int ffm_py_detect(pid_t pid, const char *proc_root, struct ffm_py_build *b, char *why, size_t len);

/*
 * Check @b against the live process: the main interpreter's thread states point back to it,
 * their thread ids are addresses of the process, and their frame chains lead to objects of
 * type code. The process runs on while it is read: a check that fails is made again at once
 * (a few times), and fails only when it read the very same state each time. 0: checked;
 * -EAGAIN: not yet checkable (the interpreter is not initialized, no thread runs Python code,
 * or what the check read changed between its failures: frames or thread states being made or
 * freed); -EPROTO: the layout does not fit (@why), as far as this moment shows (a thread held
 * in the middle of such a change looks the same each time: decide on more than one moment);
 * other -errno: unreadable.
 */
int ffm_py_verify(pid_t pid, const char *proc_root, const struct ffm_py_build *b, char *why,
		  size_t len);

/* "3.11.7" for a PY_VERSION_HEX; "3.10" for one whose micro version is unknown (release
 * level 0, as ffm_py_detect leaves a build before 3.11). */
void ffm_py_version_str(uint32_t hex, char *buf, size_t len);

/* ---- frames ------------------------------------------------------------------------------ */

struct ffm_py_decoder;

struct ffm_py_loc {
	const char *file;     /* co_filename */
	const char *qualname; /* co_qualname (co_name where there is none) */
	const char *folded;   /* "qualname (file name)": the function, for grouping */
	uint32_t line;        /* the line of the instruction; first_line when not known */
	uint32_t first_line;  /* co_firstlineno */
	uint64_t key;         /* ffm_py_frame_key(file, qualname, line) */
};

int ffm_py_decoder__new(pid_t pid, const char *proc_root, const struct ffm_py_build *b,
			struct ffm_py_decoder **ret);
struct ffm_py_decoder *ffm_py_decoder__free(struct ffm_py_decoder *d);
/*
 * Decode the frame (@code, @instr: struct ffm_py_frame), from the code object's copy if one was
 * given (ffm_py_decoder__code), else from the process. Strings stay valid until the decoder is
 * freed or given a new copy of that address. -EFAULT: unreadable; -EPROTO: not a code object
 * of the build (or a malformed one).
 */
int ffm_py_decoder__frame(struct ffm_py_decoder *d, uint64_t code, int32_t instr,
			  struct ffm_py_loc *out);

/*
 * Take the copy of a code object that BPF sent while its frames ran (FFM_REC_PYCODE): frames of
 * that address decode from it from now on, not from the process, whose interpreter may free
 * the object before they are decoded. A location table cut short is completed from the process
 * if a frame's instruction lies past its end and the object there is still the same one.
 * -EPROTO: a copy that cannot stand alone (a name cut short or not a str), left unused: the
 * object is read from the process as before. -ENOMEM.
 */
int ffm_py_decoder__code(struct ffm_py_decoder *d, const struct ffm_rec_pycode *rec);

/* The formats of a code object's line table. */
enum ffm_py_lines {
	FFM_PY_LINES_LOCATIONS, /* 3.11+: co_linetable, the location table (Objects/locations.md) */
	FFM_PY_LINES_LNOTAB,    /* 3.9: co_lnotab, (bytes, line delta) pairs, one per new line */
	FFM_PY_LINES_LINETABLE, /* 3.10: co_linetable, (bytes, line delta) pairs covering the
				 * code, a delta of -128 for bytes with no line (PEP 626) */
};

/* The line of code unit @unit in a 3.11+ location table (co_linetable); -1: none. */
int ffm_py_line_at(const uint8_t *table, size_t len, int first_line, int64_t unit);
/* The line of the instruction at byte @offset of the bytecode, from a table of format @fmt;
 * -1: none (past the table, or an instruction with no line). */
int ffm_py_line_of(enum ffm_py_lines fmt, const uint8_t *table, size_t len, int first_line,
		   int64_t offset);
/* A Python frame's stable identity (the same in every process and run); never 0. */
uint64_t ffm_py_frame_key(const char *file, const char *qualname, uint32_t line);

/* The store's build_id of a Python frame (struct ffm_store_frame): "py". */
#define FFM_PY_BUILD_ID "py"

#endif
