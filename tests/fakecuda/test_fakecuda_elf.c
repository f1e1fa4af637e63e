/* SPDX-License-Identifier: MIT */
/*
 * The simulated libcuda.so.1 has the shape of the real one where ffm depends on it (docs/DESIGN.md,
 * "Facts measured on the real GPU machine"): stripped (no .symtab, nothing names the wait
 * function), the CUDA API in .dynsym and nothing else, a GNU build-id, every function starting
 * with push %rbp; mov %rsp,%rbp, and an .eh_frame_hdr whose table has an FDE starting exactly at
 * the wait function's entry.
 */
#include "tests/fakecuda/fk_test.h"

static const uint8_t prologue[] = { 0x55, 0x48, 0x89, 0xe5 }; /* push %rbp; mov %rsp,%rbp */

/* Entry points the rest of ffm (probes, workloads, the runtime's cuGetProcAddress) relies on. */
static const char *const required[] = {
	"cuInit", "cuDriverGetVersion", "cuDeviceGet", "cuDeviceGetCount", "cuDeviceGetName",
	"cuGetErrorString", "cuGetErrorName", "cuGetProcAddress", "cuGetProcAddress_v2",
	"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2",
	"cuDevicePrimaryCtxSetFlags", "cuDevicePrimaryCtxSetFlags_v2", "cuCtxCreate",
	"cuCtxCreate_v2", "cuCtxCreate_v3", "cuCtxCreate_v4", "cuCtxDestroy", "cuCtxDestroy_v2",
	"cuCtxSetCurrent", "cuCtxGetCurrent", "cuCtxSynchronize", "cuCtxSynchronize_v2",
	"cuStreamCreate", "cuStreamDestroy", "cuStreamDestroy_v2", "cuStreamSynchronize",
	"cuStreamSynchronize_ptsz", "cuEventCreate", "cuEventRecord", "cuEventRecord_ptsz",
	"cuEventSynchronize", "cuEventElapsedTime", "cuEventElapsedTime_v2", "cuEventDestroy",
	"cuEventDestroy_v2", "cuMemAlloc", "cuMemAlloc_v2", "cuMemFree", "cuMemFree_v2",
	"cuMemAllocHost", "cuMemAllocHost_v2", "cuMemHostAlloc", "cuMemFreeHost",
	"cuMemAllocManaged", "cuMemcpy", "cuMemcpy_ptds", "cuMemcpyAsync", "cuMemcpyAsync_ptsz",
	"cuMemcpyHtoD", "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds", "cuMemcpyDtoH",
	"cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds", "cuMemcpyDtoD", "cuMemcpyDtoD_v2",
	"cuMemcpyDtoD_v2_ptds", "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2",
	"cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2",
	"cuMemcpyDtoHAsync_v2_ptsz", "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2",
	"cuMemcpyDtoDAsync_v2_ptsz", "cuMemsetD8", "cuMemsetD8_v2", "cuMemsetD32",
	"cuMemsetD32_v2", "cuMemsetD8Async", "cuMemsetD32Async", "cuModuleLoadData",
	"cuModuleGetFunction", "cuModuleUnload", "cuLaunchKernel", "cuLaunchKernel_ptsz",
	"cuPointerGetAttribute",
};

/* The wait function and its per-mode helpers (engine.c). */
static const char *const internal[] = { FK_WAIT_FN, "fake_wait_spin", "fake_wait_yield",
					"fake_wait_block" };

static void *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	void *buf;
	long n;

	if (!f)
		FAIL("open %s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		FAIL("read %s failed", path);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

TEST(stripped_has_no_symbols)
{
	struct fk_elf e;
	GElf_Shdr shdr;
	GElf_Sym sym;
	size_t len;
	char *buf;

	fk_elf_open(&e, FK_LIB);
	ASSERT_MSG(!fk_elf_section_type(&e, SHT_SYMTAB, &shdr), "%s still has a .symtab", FK_LIB);
	ASSERT(!fk_elf_section(&e, ".strtab", &shdr));
	ASSERT(!fk_elf_section(&e, ".debug_info", &shdr));
	ASSERT(fk_elf_section_type(&e, SHT_DYNSYM, &shdr));
	fk_elf_close(&e);

	/* Not in any string table, nor anywhere else in the file. */
	buf = read_file(FK_LIB, &len);
	ASSERT_MSG(!memmem(buf, len, FK_WAIT_FN, strlen(FK_WAIT_FN)),
		   "the stripped file names %s somewhere", FK_WAIT_FN);
	free(buf);

	/* The twin does know it: otherwise the check above proves nothing. */
	fk_elf_open(&e, FK_LIB_UNSTRIPPED);
	ASSERT_EQ(fk_elf_symbol(&e, SHT_SYMTAB, FK_WAIT_FN, &sym), 0);
	ASSERT_EQ(GELF_ST_BIND(sym.st_info), STB_LOCAL);
	fk_elf_close(&e);
}

/* The GNU build-id note's descriptor into id; returns its length. */
static size_t build_id(const char *path, uint8_t *id, size_t max)
{
	struct fk_elf e;
	GElf_Shdr shdr;
	Elf_Scn *scn;
	Elf_Data *d;
	GElf_Nhdr nh;
	size_t off = 0, name_off, desc_off, n = 0;

	fk_elf_open(&e, path);
	scn = fk_elf_section(&e, ".note.gnu.build-id", &shdr);
	ASSERT_MSG(scn, "%s has no .note.gnu.build-id", path);
	d = elf_getdata(scn, NULL);
	ASSERT(d);
	while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    !memcmp((char *)d->d_buf + name_off, "GNU", 4) && nh.n_descsz <= max) {
			n = nh.n_descsz;
			memcpy(id, (char *)d->d_buf + desc_off, n);
			break;
		}
	}
	fk_elf_close(&e);
	return n;
}

TEST(build_id_present_and_shared_with_twin)
{
	uint8_t a[64], b[64];
	size_t na = build_id(FK_LIB, a, sizeof(a)), nb = build_id(FK_LIB_UNSTRIPPED, b, sizeof(b));

	ASSERT_EQ(na, 20); /* sha1, ld's default */
	ASSERT_EQ(nb, na);
	ASSERT(!memcmp(a, b, na));
}

TEST(exports_only_the_cuda_api)
{
	struct fk_elf e;
	GElf_Shdr shdr;
	Elf_Scn *scn;
	Elf_Data *d;
	bool found[sizeof(required) / sizeof(required[0])] = { 0 };
	int nfuncs = 0;

	fk_elf_open(&e, FK_LIB);
	scn = fk_elf_section_type(&e, SHT_DYNSYM, &shdr);
	ASSERT(scn && (d = elf_getdata(scn, NULL)));
	for (size_t i = 1; i < shdr.sh_size / shdr.sh_entsize; i++) {
		GElf_Sym sym;
		const char *n;

		ASSERT(gelf_getsym(d, (int)i, &sym));
		n = elf_strptr(e.elf, shdr.sh_link, sym.st_name);
		if (sym.st_shndx == SHN_UNDEF)
			continue; /* imports from libc */
		ASSERT_MSG(n && !strncmp(n, "cu", 2), "exports a non-API symbol: %s", n ? n : "?");
		ASSERT_MSG(GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
				   GELF_ST_BIND(sym.st_info) == STB_GLOBAL,
			   "%s is not a global function", n);
		nfuncs++;
		for (size_t j = 0; j < sizeof(required) / sizeof(required[0]); j++)
			if (!strcmp(n, required[j]))
				found[j] = true;
	}
	fk_elf_close(&e);
	for (size_t j = 0; j < sizeof(required) / sizeof(required[0]); j++)
		ASSERT_MSG(found[j], "%s is not exported", required[j]);
	printf("# %d exported functions\n", nfuncs);

	/* And the dynamic linker agrees. */
	fk_load();
	for (size_t j = 0; j < sizeof(internal) / sizeof(internal[0]); j++)
		ASSERT_MSG(!dlsym(cu.handle, internal[j]), "%s is exported", internal[j]);
}

static void assert_prologue(const uint8_t *file, size_t len, int64_t off, const char *what)
{
	ASSERT_MSG(off >= 0 && (size_t)off + sizeof(prologue) <= len, "%s: no file offset", what);
	ASSERT_MSG(!memcmp(file + off, prologue, sizeof(prologue)),
		   "%s at file offset %#llx starts %02x %02x %02x %02x, not push %%rbp; mov %%rsp,%%rbp",
		   what, (unsigned long long)off, file[off], file[off + 1], file[off + 2],
		   file[off + 3]);
}

TEST(every_function_starts_with_push_rbp)
{
	struct fk_elf e;
	GElf_Shdr shdr;
	Elf_Scn *scn;
	Elf_Data *d;
	size_t len;
	uint8_t *file = read_file(FK_LIB, &len);
	int checked = 0;

	/* Exported entry points: .dynsym of the stripped file, bytes of the stripped file. */
	fk_elf_open(&e, FK_LIB);
	scn = fk_elf_section_type(&e, SHT_DYNSYM, &shdr);
	ASSERT(scn && (d = elf_getdata(scn, NULL)));
	for (size_t i = 1; i < shdr.sh_size / shdr.sh_entsize; i++) {
		GElf_Sym sym;

		ASSERT(gelf_getsym(d, (int)i, &sym));
		if (sym.st_shndx == SHN_UNDEF || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
			continue;
		assert_prologue(file, len, fk_elf_vaddr_to_offset(&e, sym.st_value),
				elf_strptr(e.elf, shdr.sh_link, sym.st_name));
		checked++;
	}
	fk_elf_close(&e);

	/*
	 * Every other function, the wait function first: addresses from the twin's .symtab, bytes
	 * from the stripped file (same link, same layout).
	 */
	for (size_t j = 0; j < sizeof(internal) / sizeof(internal[0]); j++)
		assert_prologue(file, len, (int64_t)fk_wait_fn_offset(internal[j], NULL, NULL),
				internal[j]);
	fk_elf_open(&e, FK_LIB_UNSTRIPPED);
	scn = fk_elf_section_type(&e, SHT_SYMTAB, &shdr);
	ASSERT(scn && (d = elf_getdata(scn, NULL)));
	for (size_t i = 1; i < shdr.sh_size / shdr.sh_entsize; i++) {
		GElf_Sym sym;

		ASSERT(gelf_getsym(d, (int)i, &sym));
		if (sym.st_shndx == SHN_UNDEF || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
			continue;
		assert_prologue(file, len, fk_elf_vaddr_to_offset(&e, sym.st_value),
				elf_strptr(e.elf, shdr.sh_link, sym.st_name));
		checked++;
	}
	fk_elf_close(&e);
	free(file);
	printf("# %d functions checked\n", checked);
	ASSERT(checked > 150);
}

static uint64_t uleb(const uint8_t **p)
{
	uint64_t v = 0;
	int shift = 0;

	do {
		v |= (uint64_t)(**p & 0x7f) << shift;
		shift += 7;
	} while (*(*p)++ & 0x80);
	return v;
}

static int32_t rd32(const uint8_t *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/*
 * The .eh_frame_hdr search table of the stripped file has an entry whose initial location is
 * exactly the wait function's entry, and that FDE covers the whole function: what symbols/
 * uses to find function entries in a stripped libcuda.
 */
TEST(eh_frame_has_fde_at_wait_function_entry)
{
	struct fk_elf e;
	GElf_Shdr hdr_sh, eh_sh;
	Elf_Scn *hdr_scn, *eh_scn;
	Elf_Data *hd, *ed;
	const uint8_t *h, *fde, *cie, *p;
	uint64_t wait_vaddr, wait_size, fde_vaddr = 0, pc_begin;
	uint32_t count;
	uint8_t fde_enc = 0;
	const char *aug;

	fk_wait_fn_offset(FK_WAIT_FN, &wait_vaddr, &wait_size);
	fk_elf_open(&e, FK_LIB);
	hdr_scn = fk_elf_section(&e, ".eh_frame_hdr", &hdr_sh);
	eh_scn = fk_elf_section(&e, ".eh_frame", &eh_sh);
	ASSERT_MSG(hdr_scn && eh_scn, "no .eh_frame_hdr/.eh_frame in %s", FK_LIB);
	hd = elf_getdata(hdr_scn, NULL);
	ed = elf_getdata(eh_scn, NULL);
	ASSERT(hd && ed && hd->d_size >= 12);
	h = hd->d_buf;
	/* version 1; eh_frame_ptr pcrel|sdata4, fde_count udata4, table datarel|sdata4 (ld's). */
	ASSERT_EQ(h[0], 1);
	ASSERT_EQ(h[2], 0x03);
	ASSERT_EQ(h[3], 0x3b);
	memcpy(&count, h + 8, sizeof(count));
	ASSERT(count > 100 && 12 + (size_t)count * 8 <= hd->d_size);
	for (uint32_t i = 0; i < count; i++) {
		uint64_t loc = hdr_sh.sh_addr + (int64_t)rd32(h + 12 + 8 * i);

		if (loc == wait_vaddr)
			fde_vaddr = hdr_sh.sh_addr + (int64_t)rd32(h + 12 + 8 * i + 4);
	}
	ASSERT_MSG(fde_vaddr, "no FDE starts at %s (%#llx)", FK_WAIT_FN,
		   (unsigned long long)wait_vaddr);

	/* The FDE and its CIE: the CIE's 'R' augmentation says how pc_begin is encoded. */
	ASSERT(fde_vaddr >= eh_sh.sh_addr && fde_vaddr + 16 <= eh_sh.sh_addr + ed->d_size);
	fde = (const uint8_t *)ed->d_buf + (fde_vaddr - eh_sh.sh_addr);
	ASSERT(rd32(fde) > 0 && rd32(fde) != -1); /* 32-bit length, not a terminator */
	cie = fde + 4 - rd32(fde + 4);
	ASSERT(cie >= (const uint8_t *)ed->d_buf && rd32(cie + 4) == 0);
	p = cie + 8; /* past length, CIE id */
	ASSERT_EQ(*p, 1); /* version */
	p++;
	aug = (const char *)p;
	p += strlen(aug) + 1;
	uleb(&p); /* code alignment */
	uleb(&p); /* data alignment (sleb, only skipped) */
	p++;	  /* return address register (version 1: one byte) */
	ASSERT(aug[0] == 'z');
	uleb(&p); /* augmentation data length */
	for (const char *a = aug + 1; *a; a++) {
		if (*a == 'R')
			fde_enc = *p++;
		else if (*a == 'L')
			p++;
		else
			FAIL("unexpected CIE augmentation '%c' in \"%s\"", *a, aug);
	}
	ASSERT_EQ(fde_enc, 0x1b); /* pcrel|sdata4 */
	pc_begin = fde_vaddr + 8 + (int64_t)rd32(fde + 8);
	ASSERT_EQ(pc_begin, wait_vaddr);
	ASSERT_MSG((uint64_t)rd32(fde + 12) >= wait_size, "FDE covers %d bytes, function has %llu",
		   rd32(fde + 12), (unsigned long long)wait_size);
	fk_elf_close(&e);
}

TEST(vaddr_to_offset_follows_pt_load)
{
	struct fk_elf e;
	GElf_Sym sym;
	size_t n;
	int64_t off;
	bool distinct = false;

	/* Resolve cuInit both ways and check the bytes agree with what dlsym maps. */
	fk_elf_open(&e, FK_LIB);
	ASSERT_EQ(fk_elf_symbol(&e, SHT_DYNSYM, "cuInit", &sym), 0);
	off = fk_elf_vaddr_to_offset(&e, sym.st_value);
	ASSERT(off > 0);
	ASSERT_EQ(fk_elf_vaddr_to_offset(&e, 0xffffffffff), -1);
	ASSERT_EQ(elf_getphdrnum(e.elf, &n), 0);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e.elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    ph.p_vaddr != ph.p_offset)
			distinct = true;
	}
	fk_elf_close(&e);
	fk_load();
	{
		size_t len;
		uint8_t *file = read_file(FK_LIB, &len);

		ASSERT(!memcmp(file + off, (void *)cu.cuInit, 16));
		free(file);
	}
	printf("# some PT_LOAD has vaddr != offset: %s\n", distinct ? "yes" : "no");
}

TEST_MAIN()
