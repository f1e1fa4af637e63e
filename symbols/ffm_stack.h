/* SPDX-License-Identifier: MIT */
/*
 * User stacks: address spaces, CFI unwinding of captured stack snapshots, symbolization.
 *
 * Snapshot contract (what the collector records at a uprobe, what ffm_stack__unwind takes):
 *   tgid, and the user registers ip, sp, bp at the probe, plus a copy of user stack memory
 *   [sp, sp + stack_len) (stack_len <= 16 KiB, shorter where the stack's top was reached).
 *   Nothing else of the process is read: memory outside the copy is "unknown" and ends the walk.
 *
 * Unwinding uses the modules' CFI (.eh_frame, else .debug_frame, through libdw), evaluating
 * reg+offset rules and the DWARF expressions PLT entries use; return addresses are looked up
 * as pc-1. Only where no CFI covers a pc does it follow the rbp chain. Each frame also says
 * where on the stack its return address was read from (ra_slot, CFA-8 on x86-64 under the
 * usual rules), so that the collector can re-identify a known call path by reading just those
 * slots in BPF.
 *
 * Symbolization gives, for a pc: module path and build-id, the module-relative file offset
 * (always), the symbol (symtab, dynsym or DWARF), demangled C++ name, file:line where DWARF is
 * present (also from separate debug files found by build-id or .gnu_debuglink), and the
 * paper's "folded function" key (the demangled name without template arguments, parameters and
 * return type). Results are cached per (module, offset); modules per (dev, ino) and build-id.
 * Returned pointers stay valid until the symbolizer is freed.
 */
#ifndef FFM_STACK_H
#define FFM_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "symbols/ffm_maps.h"

/* ------------------------------------------------------------------ address space */

struct ffm_addr_space;

struct ffm_addr_space_opts {
	size_t sz;
	const char *maps_path; /* NULL = <proc_root>/<pid>/maps */
	const char *proc_root; /* NULL = "/proc" */
};

/*
 * The file-backed mappings of @pid. -ESRCH when the process does not exist, -EACCES when its
 * maps may not be read. The mappings are kept after the process exits, and so are its user's
 * fs credentials and its root directory: its files are opened as its user, inside its root
 * (symbols/useropen.h; nobody's rights when its credentials cannot be read).
 */
int ffm_addr_space__new(pid_t pid, const struct ffm_addr_space_opts *opts,
			struct ffm_addr_space **ret);
/* Read maps again (a failure keeps the old mappings and is returned). */
int ffm_addr_space__refresh(struct ffm_addr_space *as);
/*
 * The file-backed mapping containing @addr; re-reads maps once when @addr is outside every
 * known mapping (a library loaded since). NULL if still unknown.
 */
const struct ffm_map *ffm_addr_space__find(struct ffm_addr_space *as, uint64_t addr);
pid_t ffm_addr_space__pid(const struct ffm_addr_space *as);
size_t ffm_addr_space__count(const struct ffm_addr_space *as);
struct ffm_addr_space *ffm_addr_space__free(struct ffm_addr_space *as);

/* ------------------------------------------------------------------ snapshots, frames */

struct ffm_stack_snapshot {
	uint32_t tgid;
	uint64_t ip, sp, bp;
	const void *stack; /* copy of user memory [sp, sp + stack_len) */
	size_t stack_len;
};

enum ffm_frame_how {
	FFM_FRAME_IP = 0, /* frame 0: the ip register */
	FFM_FRAME_CFI,    /* found by the callee's CFI */
	FFM_FRAME_FP,     /* found by the rbp chain (no CFI covered the callee) */
};

struct ffm_frame {
	uint64_t pc;      /* frame 0: ip; others: the return address (look up pc-1) */
	uint64_t cfa;     /* this frame's canonical frame address; 0 when not known */
	uint64_t ra_slot; /* stack address this frame's return address (frames[i+1].pc) was
			     read from; 0 where the walk stopped */
	enum ffm_frame_how how;
};

/* ------------------------------------------------------------------ symbolizer */

struct ffm_symbolizer;

struct ffm_symbolizer_opts {
	size_t sz;
	const char *debuginfo_path; /* elfutils syntax; NULL = ":.debug:/usr/lib/debug" */
	bool no_lines;              /* skip file:line (and DWARF names) */
};

int ffm_symbolizer__new(const struct ffm_symbolizer_opts *opts, struct ffm_symbolizer **ret);
struct ffm_symbolizer *ffm_symbolizer__free(struct ffm_symbolizer *s);

struct ffm_sym {
	const char *module;   /* path of the module file */
	const char *build_id; /* hex; "" when the module has none */
	uint64_t offset;      /* file offset of pc in the module (always set) */
	uint64_t elf_addr;    /* pc as an address of the ELF file (st_value space) */
	const char *name;     /* symbol as in the file (mangled), NULL when unknown */
	const char *function; /* demangled (== name for C), NULL when unknown */
	const char *folded;   /* folded function key, NULL when unknown */
	uint64_t sym_offset;  /* pc - start of the symbol */
	const char *file;     /* source file, NULL without DWARF */
	int line;             /* 0 without DWARF */
	/* Functions the compiler inlined at pc, innermost first (none without DWARF). Then
	 * file:line above is where the outermost of them is called from, in the real function:
	 * the line its author wrote; inlined[0] has the innermost line (a template header's). */
	const struct ffm_sym_inline *inlined;
	int n_inlined;
};

struct ffm_sym_inline {
	const char *name;     /* linkage name, else the DWARF name */
	const char *function; /* demangled */
	const char *folded;
	const char *file;     /* the line inside this function */
	int line;
};
#define FFM_SYM_MAX_INLINED 16

/*
 * Symbolize @pc of @as. @retaddr: pc is a return address (frames 1..n), so the call
 * instruction (pc-1) is looked up. -ENOENT when pc is in no file-backed mapping, -ENOEXEC /
 * -ENOENT / -EACCES / -EINVAL (not a regular file) when the module file cannot be used,
 * -ETIMEDOUT / -EAGAIN when its file system did not answer in time.
 */
int ffm_symbolizer__symbolize(struct ffm_symbolizer *s, struct ffm_addr_space *as, uint64_t pc,
			      bool retaddr, const struct ffm_sym **ret);
/* The same for a file offset in the file at @path (no process needed). */
int ffm_symbolizer__symbolize_file(struct ffm_symbolizer *s, const char *path, uint64_t offset,
				   bool retaddr, const struct ffm_sym **ret);
/* Cache statistics (for benchmarks): lookups answered from the cache and modules open. */
void ffm_symbolizer__stats(const struct ffm_symbolizer *s, uint64_t *hits, uint64_t *misses,
			   size_t *modules);

/*
 * Unwind @snap through @as with the modules' CFI into @frames (at most @max). Returns the number
 * of frames (>= 1) or -errno (-EINVAL for an empty snapshot).
 */
int ffm_stack__unwind(struct ffm_symbolizer *s, struct ffm_addr_space *as,
		      const struct ffm_stack_snapshot *snap, struct ffm_frame *frames, size_t max);

/*
 * Check that a module file can be used for unwinding: 0, -ENOEXEC (not ELF, truncated),
 * -ENODATA (no CFI: neither .eh_frame nor .debug_frame), -ENOENT/-EACCES.
 */
int ffm_stack_check_module(const char *path);

/* ------------------------------------------------------------------ names */

/* Demangle a C++ (Itanium ABI) name: malloc'd string, or NULL when @name is not mangled. */
char *ffm_demangle(const char *name);
/*
 * The folded function key of a demangled name: template arguments, parameter lists, return
 * type, cv/ref qualifiers and clone suffixes dropped; operators (operator<, operator<<,
 * operator(), operator new, conversion operators) and "(anonymous namespace)" kept.
 * "void ns::f<int, std::vector<float> >(int)" -> "ns::f". Returns the length or -ENOSPC.
 */
int ffm_fold_function(const char *demangled, char *buf, size_t len);

#endif
