/* SPDX-License-Identifier: MIT */
/*
 * Kernels. The simulator does not execute PTX: it finds the `.entry NAME(...)` declarations in
 * the module's PTX text and resolves the names it knows to host implementations of the same
 * semantics and duration. The set is a contract with tests/workloads/kernels.cu (names,
 * parameter order and sizes, semantics); a known name declared with other parameters is
 * rejected with CUDA_ERROR_INVALID_PTX, so the two cannot drift apart silently.
 *
 *   ffm_spin(u64 ns)                                   busy for ns nanoseconds
 *   ffm_work(u32 *buf, u64 n, u32 mul, u32 add, u64 ns) busy for ns, then buf[i] = buf[i]*mul+add
 *   ffm_hang(volatile u32 *flag)                       runs until *flag != 0
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakecuda.h"

enum { K_SPIN = 1, K_WORK, K_HANG };

static const struct known_kernel {
	const char *name;
	int kind;
	int nparams;
	unsigned int psize[FK_MAX_PARAMS];
} known[] = {
	{ "ffm_spin", K_SPIN, 1, { 8 } },
	{ "ffm_work", K_WORK, 5, { 8, 8, 4, 4, 8 } },
	{ "ffm_hang", K_HANG, 1, { 8 } },
};

/* The plain name inside an Itanium-mangled one (_Z8ffm_spiny -> ffm_spin), else the name. */
static size_t base_name(const char *name, size_t len, const char **base)
{
	size_t i = 2, n = 0;

	*base = name;
	if (len < 3 || name[0] != '_' || name[1] != 'Z')
		return len;
	while (i < len && isdigit((unsigned char)name[i]))
		n = n * 10 + (size_t)(name[i++] - '0');
	if (i == 2 || n == 0 || i + n > len)
		return len;
	*base = name + i;
	return n;
}

static const struct known_kernel *lookup_known(const char *name, size_t len)
{
	const char *base;
	size_t blen = base_name(name, len, &base);

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i].name) == blen && !memcmp(known[i].name, base, blen))
			return &known[i];
	return NULL;
}

/* PTX text without comments (they may mention ".entry" too), NUL-terminated. */
static char *strip_comments(const char *s)
{
	size_t len = strlen(s);
	char *out = malloc(len + 1), *o = out;

	if (!out)
		return NULL;
	while (*s) {
		if (s[0] == '/' && s[1] == '/') {
			while (*s && *s != '\n')
				s++;
		} else if (s[0] == '/' && s[1] == '*') {
			const char *e = strstr(s + 2, "*/");

			s = e ? e + 2 : s + strlen(s);
			*o++ = ' ';
		} else if (*s == '"') {
			/* String literals (e.g. in .file) are copied verbatim. */
			*o++ = *s++;
			while (*s && *s != '"')
				*o++ = *s++;
			if (*s)
				*o++ = *s++;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
	return out;
}

static bool is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.' || c == '%';
}

/* Bytes of a PTX scalar type (.u64, .b32, .f16, .pred ...), 0 if not a scalar type. */
static unsigned int type_size(const char *t, size_t len)
{
	if (len < 3 || t[0] != '.' || !strchr("usbf", t[1]))
		return 0;
	if (len == 3 && t[2] == '8')
		return 1;
	if (len == 4 && !memcmp(t + 2, "16", 2))
		return 2;
	if (len == 4 && !memcmp(t + 2, "32", 2))
		return 4;
	if (len == 4 && !memcmp(t + 2, "64", 2))
		return 8;
	return 0;
}

/*
 * Parses one parameter declaration ".param [.attrs] .TYPE [.ptr ...] name[N]" between p and
 * end; returns its size in bytes, 0 if it cannot be understood.
 */
static unsigned int param_size(const char *p, const char *end)
{
	unsigned int elem = 0, count = 1;

	while (p < end) {
		const char *tok;

		while (p < end && isspace((unsigned char)*p))
			p++;
		tok = p;
		while (p < end && (is_ident(*p)))
			p++;
		if (p == tok) {
			if (*p == '[') {
				count = (unsigned int)strtoul(p + 1, NULL, 10);
				break;
			}
			p++;
			continue;
		}
		if (!elem)
			elem = type_size(tok, (size_t)(p - tok));
		if (p < end && *p == '[')
			count = (unsigned int)strtoul(p + 1, NULL, 10);
	}
	return elem * count;
}

CUresult fk_module_load_ptx(const void *image, struct fk_module **ret)
{
	const unsigned char *img = image;
	struct fk_module *m;
	char *text, *p;
	size_t names_len = 0;
	CUresult r = CUDA_SUCCESS;

	/* ELF cubins and fatbins (magic 0xba55ed50) are not simulated: no machine code here. */
	if (!memcmp(img, "\177ELF", 4) || (img[0] == 0x50 && img[1] == 0xed && img[2] == 0x55 &&
					   img[3] == 0xba))
		return CUDA_ERROR_INVALID_IMAGE;
	text = strip_comments(image);
	if (!text)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!strstr(text, ".version") || !strstr(text, ".target")) {
		free(text);
		return CUDA_ERROR_INVALID_PTX;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		free(text);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->names = malloc(strlen(text) + 1);
	if (!m->names) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}

	for (p = text; (p = strstr(p, ".entry")); ) {
		const struct known_kernel *k;
		struct fk_function *fn, *v;
		const char *name, *q;
		size_t len;

		p += 6;
		if (!isspace((unsigned char)*p))
			continue; /* e.g. ".entryfoo" is not a declaration */
		while (isspace((unsigned char)*p))
			p++;
		name = p;
		while (is_ident(*p))
			p++;
		len = (size_t)(p - name);
		if (!len) {
			r = CUDA_ERROR_INVALID_PTX;
			goto out;
		}
		k = lookup_known(name, len);
		if (!k)
			continue; /* declared but not simulated: cuModuleGetFunction says NOT_FOUND */

		v = realloc(m->funcs, (m->nfuncs + 1) * sizeof(*v));
		if (!v) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		m->funcs = v;
		fn = &m->funcs[m->nfuncs++];
		memset(fn, 0, sizeof(*fn));
		fn->kind = k->kind;
		memcpy(m->names + names_len, name, len);
		m->names[names_len + len] = '\0';
		fn->name = m->names + names_len; /* m->names is as large as the text: never moves */
		names_len += len + 1;

		while (isspace((unsigned char)*p))
			p++;
		if (*p == '(') {
			const char *close = strchr(p, ')');

			if (!close) {
				r = CUDA_ERROR_INVALID_PTX;
				goto out;
			}
			for (q = p + 1; q < close;) {
				const char *comma = memchr(q, ',', (size_t)(close - q));
				const char *e = comma ? comma : close;
				const char *dp = strstr(q, ".param");

				if (dp && dp < e) {
					if (fn->nparams == FK_MAX_PARAMS) {
						r = CUDA_ERROR_INVALID_PTX;
						goto out;
					}
					fn->psize[fn->nparams++] = param_size(dp + 6, e);
				}
				q = e + 1;
			}
			p = (char *)close + 1;
		}
		if (fn->nparams != k->nparams ||
		    memcmp(fn->psize, k->psize, sizeof(fn->psize[0]) * k->nparams)) {
			/* The PTX and this simulator disagree on the kernel's signature. */
			r = CUDA_ERROR_INVALID_PTX;
			goto out;
		}
	}
	for (int i = 0; i < m->nfuncs; i++)
		m->funcs[i].mod = m;
out:
	free(text);
	if (r != CUDA_SUCCESS) {
		fk_module_free(m);
		return r;
	}
	*ret = m;
	return CUDA_SUCCESS;
}

void fk_module_free(struct fk_module *m)
{
	if (!m)
		return;
	free(m->funcs);
	free(m->names);
	free(m);
}

struct fk_function *fk_module_find(struct fk_module *m, const char *name)
{
	for (int i = 0; i < m->nfuncs; i++)
		if (!strcmp(m->funcs[i].name, name))
			return &m->funcs[i];
	return NULL;
}

CUresult fk_kernel_check(const struct fk_function *fn, const uint64_t *args)
{
	/*
	 * A real GPU would fault on a bad pointer while the kernel runs (a sticky
	 * CUDA_ERROR_ILLEGAL_ADDRESS at the next sync); the simulator would crash instead, so it
	 * refuses the launch.
	 */
	switch (fn->kind) {
	case K_WORK:
		if (args[1] && (args[1] > SIZE_MAX / 4 || !fk_mem_gpu_ok(args[0], args[1] * 4)))
			return CUDA_ERROR_INVALID_VALUE;
		break;
	case K_HANG:
		if (!fk_mem_gpu_ok(args[0], sizeof(uint32_t)))
			return CUDA_ERROR_INVALID_VALUE;
		break;
	}
	return CUDA_SUCCESS;
}

void fk_kernel_run(const struct fk_function *fn, const uint64_t *args, uint64_t start_ns)
{
	switch (fn->kind) {
	case K_SPIN:
		fk_engine_sleep_until(start_ns + args[0]);
		break;
	case K_WORK: {
		uint32_t *buf = (uint32_t *)(uintptr_t)args[0];
		uint32_t mul = (uint32_t)args[2], add = (uint32_t)args[3];

		uint64_t migrate = fk_mig_device_use(buf, args[1] * 4);

		/* As on the GPU: every thread busy-waits first, then the grid updates buf. */
		fk_engine_sleep_until(start_ns + migrate + args[4]);
		for (uint64_t i = 0; i < args[1]; i++)
			buf[i] = buf[i] * mul + add;
		fk_mig_device_done(buf, args[1] * 4);
		break;
	}
	case K_HANG: {
		volatile uint32_t *flag = (volatile uint32_t *)(uintptr_t)args[0];
		struct timespec ts = { 0, 20000 };

		fk_engine_sleep_until(start_ns + fk_mig_device_use((const void *)flag, 4));
		/* A GPU would poll in a tight loop; 20 us steps keep a CPU free for the host. */
		while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0)
			nanosleep(&ts, NULL);
		fk_mig_device_done((const void *)flag, 4);
		break;
	}
	}
}
