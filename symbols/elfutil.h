/* SPDX-License-Identifier: MIT */
/*
 * Internal to symbols/: a read-only view of one ELF file (libelf over an mmap of the file):
 * PT_LOAD segments for vaddr <-> file offset conversion, the GNU build-id, and the function
 * entry lookup through .eh_frame_hdr's binary-search table (the FDE's initial location is the
 * true entry; libdw's CFI row ranges start after the prologue, docs/DESIGN.md).
 */
#ifndef FFM_SYMBOLS_ELFUTIL_H
#define FFM_SYMBOLS_ELFUTIL_H

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FFM_ELF_MAX_LOAD 32
#define FFM_BUILD_ID_HEX_MAX 129 /* 64 bytes of id as hex + NUL */

struct ffm_elf_load {
	uint64_t vaddr, offset, filesz, memsz;
	uint32_t flags;
};

struct ffm_elf {
	int fd;
	Elf *elf;
	const uint8_t *raw;
	size_t raw_size;
	uint16_t type; /* ET_DYN, ET_EXEC, ... */
	size_t nload;
	struct ffm_elf_load load[FFM_ELF_MAX_LOAD];
	char build_id[FFM_BUILD_ID_HEX_MAX]; /* "" when the file has none */
	/* .eh_frame_hdr and .eh_frame as vaddrs (0 when absent) */
	uint64_t ehhdr_vaddr, ehframe_vaddr, ehframe_size;
	bool has_dynsym, has_debug_frame;
};

/* Open @path read-only. -ENOEXEC for a file that is not ELF or is cut short. */
int ffm_elf_open(const char *path, struct ffm_elf **ret);
/* Takes ownership of @fd (closed on failure too). */
int ffm_elf_open_fd(int fd, struct ffm_elf **ret);
struct ffm_elf *ffm_elf_close(struct ffm_elf *e);

int ffm_elf_vaddr_to_offset(const struct ffm_elf *e, uint64_t vaddr, uint64_t *off);
int ffm_elf_offset_to_vaddr(const struct ffm_elf *e, uint64_t off, uint64_t *vaddr);

/*
 * The function containing @vaddr according to its FDE: *start = FDE initial location (the
 * true entry), *size = FDE address range. -ENODATA when the file has no .eh_frame, -ENOENT
 * when no FDE covers @vaddr, -EINVAL for malformed CFI.
 */
int ffm_elf_fde_lookup(const struct ffm_elf *e, uint64_t vaddr, uint64_t *start, uint64_t *size);

/* Build-id of the file at @path as hex into @buf (>= FFM_BUILD_ID_HEX_MAX bytes). */
int ffm_elf_build_id_of(const char *path, char *buf, size_t len);

#endif
