/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/elfutil.h"
#include "symbols/ffm_driver.h"

#ifndef PT_GNU_EH_FRAME
#define PT_GNU_EH_FRAME 0x6474e550
#endif

/* How libelf reads a file: mapped. The libFuzzer target (tests/symbols/fuzz_driver.c) builds
 * with ELF_C_READ, which reads the whole file into one heap block of its exact size, so that
 * AddressSanitizer catches a read past the end that a mapping's last page would hide. */
#ifndef FFM_ELF_READ_CMD
#define FFM_ELF_READ_CMD ELF_C_READ_MMAP
#endif

static void hexify(const uint8_t *p, size_t n, char *out, size_t len)
{
	static const char hx[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n && 2 * i + 2 < len; i++) {
		out[2 * i] = hx[p[i] >> 4];
		out[2 * i + 1] = hx[p[i] & 15];
	}
	out[2 * i] = 0;
}

static void read_build_id(struct ffm_elf *e, const uint8_t *p, size_t size)
{
	/* Notes: namesz, descsz, type, name (4-aligned), desc (4-aligned). */
	while (size >= 12) {
		uint32_t namesz, descsz, type;
		size_t nsz, dsz;

		memcpy(&namesz, p, 4);
		memcpy(&descsz, p + 4, 4);
		memcpy(&type, p + 8, 4);
		nsz = (namesz + 3) & ~3u;
		dsz = (descsz + 3) & ~3u;
		if (12 + nsz + dsz > size || nsz < namesz || dsz < descsz)
			return;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(p + 12, "GNU", 4) && descsz &&
		    descsz <= 64) {
			hexify(p + 12 + nsz, descsz, e->build_id, sizeof(e->build_id));
			return;
		}
		p += 12 + nsz + dsz;
		size -= 12 + nsz + dsz;
	}
}

int ffm_elf_open_fd(int fd, struct ffm_elf **ret)
{
	struct ffm_elf *e;
	GElf_Ehdr ehdr;
	size_t phnum, shstrndx;
	uint64_t ehhdr_phdr = 0;
	Elf_Scn *scn = NULL;

	*ret = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		close(fd);
		return -ENOSYS;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		close(fd);
		return -ENOMEM;
	}
	e->fd = fd;
	e->elf = elf_begin(fd, FFM_ELF_READ_CMD, NULL);
	if (!e->elf || elf_kind(e->elf) != ELF_K_ELF || !gelf_getehdr(e->elf, &ehdr))
		goto fail;
	e->raw = (const uint8_t *)elf_rawfile(e->elf, &e->raw_size);
	if (!e->raw || elf_getphdrnum(e->elf, &phnum) < 0)
		goto fail;
	e->type = ehdr.e_type;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e->elf, i, &ph))
			goto fail;
		/* A truncated file: its segments point past the end. */
		if (ph.p_offset > e->raw_size || ph.p_filesz > e->raw_size - ph.p_offset)
			goto fail;
		/* Past the top of the address space: no loader maps it, and the vaddr <-> offset
		 * conversions would wrap around. */
		if (ph.p_type == PT_LOAD && (ph.p_vaddr + ph.p_filesz < ph.p_vaddr ||
					     ph.p_vaddr + ph.p_memsz < ph.p_vaddr))
			goto fail;
		if (ph.p_type == PT_LOAD && e->nload < FFM_ELF_MAX_LOAD)
			e->load[e->nload++] = (struct ffm_elf_load){ ph.p_vaddr, ph.p_offset, ph.p_filesz,
								     ph.p_memsz, ph.p_flags };
		else if (ph.p_type == PT_GNU_EH_FRAME)
			e->ehhdr_vaddr = ph.p_vaddr;
		else if (ph.p_type == PT_NOTE && !e->build_id[0])
			read_build_id(e, e->raw + ph.p_offset, ph.p_filesz);
	}
	if (elf_getshdrstrndx(e->elf, &shstrndx) < 0)
		shstrndx = 0;
	/* With section headers, they are the truth: a PT_GNU_EH_FRAME left pointing at a
	 * removed .eh_frame_hdr (objcopy --remove-section) must not be believed. */
	if (shstrndx) {
		ehhdr_phdr = e->ehhdr_vaddr;
		e->ehhdr_vaddr = 0;
	}
	while ((scn = elf_nextscn(e->elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = shstrndx ? elf_strptr(e->elf, shstrndx, sh.sh_name) : NULL;
		if (sh.sh_type == SHT_DYNSYM)
			e->has_dynsym = true;
		else if (sh.sh_type == SHT_NOTE && !e->build_id[0] && sh.sh_type != SHT_NOBITS &&
			 sh.sh_offset <= e->raw_size && sh.sh_size <= e->raw_size - sh.sh_offset)
			read_build_id(e, e->raw + sh.sh_offset, sh.sh_size);
		if (!name)
			continue;
		if (!strcmp(name, ".debug_frame"))
			e->has_debug_frame = true;
		else if (!strcmp(name, ".eh_frame_hdr") && sh.sh_type != SHT_NOBITS)
			e->ehhdr_vaddr = sh.sh_addr ? sh.sh_addr : ehhdr_phdr;
		else if (!strcmp(name, ".eh_frame") && sh.sh_type != SHT_NOBITS) {
			e->ehframe_vaddr = sh.sh_addr;
			e->ehframe_size = sh.sh_size;
		}
	}
	*ret = e;
	return 0;
fail: /* not ELF, or cut short */
	ffm_elf_close(e);
	return -ENOEXEC;
}

int ffm_open_regular(const char *path)
{
	char self[64];
	struct stat st;
	int pfd = open(path, O_PATH | O_CLOEXEC), fd;

	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st) < 0) {
		fd = -errno;
	} else if (!S_ISREG(st.st_mode)) {
		fd = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	} else {
		/* Reopened through the O_PATH fd: the file checked is the file opened. Without
		 * blocking: a lease its owner holds on it fails the open (EWOULDBLOCK) rather than
		 * holding the caller for the lease break time (45 s). */
		snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
		fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd < 0)
			fd = -errno;
	}
	close(pfd);
	return fd;
}

int ffm_elf_open(const char *path, struct ffm_elf **ret)
{
	int fd = ffm_open_regular(path);

	*ret = NULL;
	if (fd < 0)
		return fd;
	return ffm_elf_open_fd(fd, ret);
}

struct ffm_elf *ffm_elf_close(struct ffm_elf *e)
{
	if (!e)
		return NULL;
	if (e->elf)
		elf_end(e->elf);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
	return NULL;
}

/* The PT_LOAD segment whose file bytes hold @vaddr, or NULL. */
static const struct ffm_elf_load *load_of(const struct ffm_elf *e, uint64_t vaddr)
{
	for (size_t i = 0; i < e->nload; i++)
		if (vaddr >= e->load[i].vaddr && vaddr < e->load[i].vaddr + e->load[i].filesz)
			return &e->load[i];
	return NULL;
}

int ffm_elf_vaddr_to_offset(const struct ffm_elf *e, uint64_t vaddr, uint64_t *off)
{
	const struct ffm_elf_load *l = load_of(e, vaddr);

	if (!l)
		return -ERANGE;
	*off = vaddr - l->vaddr + l->offset;
	return 0;
}

int ffm_elf_offset_to_vaddr(const struct ffm_elf *e, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < e->nload; i++) {
		const struct ffm_elf_load *l = &e->load[i];

		if (off >= l->offset && off < l->offset + l->filesz) {
			*vaddr = off - l->offset + l->vaddr;
			return 0;
		}
	}
	return -ERANGE;
}

/* Bytes of the file at @vaddr, with *avail bytes readable; NULL if not in the file. */
static const uint8_t *vptr(const struct ffm_elf *e, uint64_t vaddr, size_t *avail)
{
	const struct ffm_elf_load *l = load_of(e, vaddr);
	uint64_t off = l ? vaddr - l->vaddr + l->offset : 0, end;

	if (!l || off >= e->raw_size)
		return NULL;
	end = l->offset + l->filesz < e->raw_size ? l->offset + l->filesz : e->raw_size;
	*avail = end - off;
	return e->raw + off;
}

/* A cursor over CFI bytes that knows the vaddr of each byte (for pcrel). */
struct cur {
	const uint8_t *p, *end;
	uint64_t vaddr; /* vaddr of *p */
	bool bad;
};

static void adv(struct cur *c, size_t n)
{
	if ((size_t)(c->end - c->p) < n) {
		c->bad = true;
		c->p = c->end;
		return;
	}
	c->p += n;
	c->vaddr += n;
}

static uint64_t rd(struct cur *c, size_t n)
{
	uint64_t v = 0;

	if ((size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	memcpy(&v, c->p, n); /* little endian host and target (x86-64) */
	adv(c, n);
	return v;
}

/* An LEB128 number, sign-extended when @sign (sleb128); 0 and c->bad when cut short. */
static uint64_t leb(struct cur *c, bool sign)
{
	uint64_t v = 0; /* unsigned: the file's bits may shift into the sign bit, or past it */
	unsigned shift = 0;

	while (c->p < c->end) {
		uint8_t b = *c->p;

		adv(c, 1);
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return sign && shift < 64 && (b & 0x40) ? v | ~(uint64_t)0 << shift : v;
	}
	c->bad = true;
	return 0;
}

#define DW_EH_PE_omit 0xff

/* Read a pointer with DW_EH_PE encoding @enc; @datarel is the base for DW_EH_PE_datarel. */
static uint64_t rd_enc(struct cur *c, uint8_t enc, uint64_t datarel)
{
	uint64_t at = c->vaddr, v;

	if (enc == DW_EH_PE_omit)
		return 0;
	switch (enc & 0x0f) {
	case 0x00: v = rd(c, 8); break;
	case 0x01: v = leb(c, false); break;
	case 0x02: v = rd(c, 2); break;
	case 0x03: v = rd(c, 4); break;
	case 0x04: v = rd(c, 8); break;
	case 0x09: v = leb(c, true); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd(c, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd(c, 4); break;
	case 0x0c: v = rd(c, 8); break;
	default: c->bad = true; return 0;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += at; break;
	case 0x30: v += datarel; break;
	default: c->bad = true; return 0; /* textrel/funcrel do not occur on x86-64 */
	}
	if (enc & 0x80)
		c->bad = true; /* indirect: never used for FDE addresses */
	return v;
}

/* Parse the FDE at @fde (vaddr): its initial location and range. 1 = CIE, 0 = FDE, <0 error. */
static int parse_fde(const struct ffm_elf *e, uint64_t fde, uint64_t *start, uint64_t *range,
		     uint64_t *next)
{
	struct cur c, cc;
	size_t avail;
	const uint8_t *p = vptr(e, fde, &avail);
	uint64_t len, cie_ptr_at, cie_id, cie;
	uint8_t fde_enc = 0;
	bool dwarf64 = false;

	if (!p)
		return -EINVAL;
	c = (struct cur){ p, p + avail, fde, false };
	len = rd(&c, 4);
	if (len == 0xffffffff) {
		len = rd(&c, 8);
		dwarf64 = true;
	}
	if (c.bad || len == 0 || len > (uint64_t)(c.end - c.p))
		return len == 0 ? -ENOENT : -EINVAL; /* zero terminator */
	*next = c.vaddr + len;
	c.end = c.p + len;
	cie_ptr_at = c.vaddr;
	cie_id = rd(&c, dwarf64 ? 8 : 4);
	if (c.bad)
		return -EINVAL;
	if (cie_id == 0)
		return 1;
	cie = cie_ptr_at - cie_id;
	/* The CIE: length, id, version, augmentation, code/data align, RA register, aug data. */
	p = vptr(e, cie, &avail);
	if (!p)
		return -EINVAL;
	cc = (struct cur){ p, p + avail, cie, false };
	len = rd(&cc, 4);
	dwarf64 = len == 0xffffffff;
	if (dwarf64)
		len = rd(&cc, 8);
	/* Every field is read within the CIE's own length, which must lie in the segment. */
	if (cc.bad || len > (uint64_t)(cc.end - cc.p))
		return -EINVAL;
	cc.end = cc.p + len;
	rd(&cc, dwarf64 ? 8 : 4);
	{
		uint8_t version = (uint8_t)rd(&cc, 1);
		const char *aug = (const char *)cc.p;
		size_t alen = strnlen(aug, cc.end - cc.p);

		/* No NUL before the CIE's end: bad, and aug must not be read as a string. */
		adv(&cc, alen + 1);
		if (cc.bad || !strcmp(aug, "eh") || version > 4)
			return -EINVAL;
		if (version == 4)
			adv(&cc, 2); /* address_size, segment_size */
		leb(&cc, false);
		leb(&cc, true);
		if (version == 1)
			rd(&cc, 1);
		else
			leb(&cc, false);
		if (aug[0] == 'z') {
			leb(&cc, false);
			for (const char *a = aug + 1; *a && !cc.bad; a++) {
				if (*a == 'R')
					fde_enc = (uint8_t)rd(&cc, 1);
				else if (*a == 'L')
					rd(&cc, 1);
				else if (*a == 'P')
					rd_enc(&cc, (uint8_t)rd(&cc, 1) & 0x7f, 0);
				else if (*a == 'S' || *a == 'B')
					;
				else
					break; /* unknown: the rest is skipped by the length */
			}
		}
		if (cc.bad)
			return -EINVAL;
	}
	*start = rd_enc(&c, fde_enc, 0);
	*range = rd_enc(&c, fde_enc & 0x0f, 0);
	return c.bad ? -EINVAL : 0;
}

int ffm_elf_fde_lookup(const struct ffm_elf *e, uint64_t vaddr, uint64_t *start, uint64_t *size)
{
	uint64_t s, r, next;
	size_t avail;
	const uint8_t *p;

	if (e->ehhdr_vaddr && (p = vptr(e, e->ehhdr_vaddr, &avail))) {
		struct cur c = { p, p + avail, e->ehhdr_vaddr, false };
		uint8_t version = (uint8_t)rd(&c, 1), ptr_enc = (uint8_t)rd(&c, 1);
		uint8_t cnt_enc = (uint8_t)rd(&c, 1), tab_enc = (uint8_t)rd(&c, 1);
		uint64_t count, lo, hi, entsz;
		struct cur t;

		rd_enc(&c, ptr_enc, e->ehhdr_vaddr);
		count = rd_enc(&c, cnt_enc, e->ehhdr_vaddr);
		/* The binary search table needs fixed-size entries: sdata4/udata4/8 only. */
		if (version == 1 && !c.bad && tab_enc != DW_EH_PE_omit && cnt_enc != DW_EH_PE_omit &&
		    ((tab_enc & 0x0f) == 0x03 || (tab_enc & 0x0f) == 0x0b ||
		     (tab_enc & 0x0f) == 0x04 || (tab_enc & 0x0f) == 0x0c)) {
			entsz = (tab_enc & 0x0f) == 0x03 || (tab_enc & 0x0f) == 0x0b ? 8 : 16;
			if (count > (uint64_t)(c.end - c.p) / entsz)
				return -EINVAL;
			lo = 0;
			hi = count;
			/* Find the last entry whose initial location is <= vaddr. */
			while (lo < hi) {
				uint64_t mid = lo + (hi - lo) / 2, loc;

				t = (struct cur){ c.p + mid * entsz, c.end, c.vaddr + mid * entsz, false };
				loc = rd_enc(&t, tab_enc, e->ehhdr_vaddr);
				if (loc <= vaddr)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo == 0)
				return -ENOENT;
			t = (struct cur){ c.p + (lo - 1) * entsz, c.end, c.vaddr + (lo - 1) * entsz,
					  false };
			rd_enc(&t, tab_enc, e->ehhdr_vaddr);
			{
				uint64_t fde = rd_enc(&t, tab_enc, e->ehhdr_vaddr);
				int err = t.bad ? -EINVAL : parse_fde(e, fde, &s, &r, &next);

				if (err)
					return err < 0 ? err : -EINVAL;
			}
			if (vaddr < s || vaddr - s >= r)
				return -ENOENT;
			*start = s;
			*size = r;
			return 0;
		}
	}
	/* No usable search table: walk .eh_frame. */
	if (!e->ehframe_vaddr)
		return -ENODATA;
	for (uint64_t at = e->ehframe_vaddr; at < e->ehframe_vaddr + e->ehframe_size; at = next) {
		int err = parse_fde(e, at, &s, &r, &next);

		if (err == -ENOENT)
			break;
		if (err < 0)
			return err;
		if (err == 0 && vaddr >= s && vaddr - s < r) {
			*start = s;
			*size = r;
			return 0;
		}
	}
	return -ENOENT;
}

int ffm_elf_build_id_of(const char *path, char *buf, size_t len)
{
	struct ffm_elf *e;
	int err = ffm_elf_open(path, &e);

	if (err)
		return err;
	snprintf(buf, len, "%s", e->build_id);
	ffm_elf_close(e);
	return buf[0] ? 0 : -ENODATA;
}
