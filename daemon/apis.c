/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/apis.h"

/* Argument positions follow cuda.h (CUDA 13). Args past the sixth live on the stack and are
 * not recorded (cuLaunchKernel's stream is its 10th argument). */
#define M(n, dir, bytes, dst, src, stream)                                                         \
	{ n, FFM_KIND_MEMCPY, dir, bytes, dst, src, stream, 0, 0 }
static const struct ffm_api_desc builtin[] = {
	{ "ffm_wait", FFM_KIND_WAIT },
	/* explicit synchronization */
	{ "cuCtxSynchronize", FFM_KIND_SYNC },
	{ "cuStreamSynchronize", FFM_KIND_SYNC, 0, 0, 0, 0, 1 },
	{ "cuEventSynchronize", FFM_KIND_SYNC },
	{ "cuStreamWaitEvent", FFM_KIND_SYNC, 0, 0, 0, 0, 1 },
	/* transfers */
	M("cuMemcpy", FFM_REC_DIR_ANY, 3, 1, 2, 0),
	M("cuMemcpyAsync", FFM_REC_DIR_ANY, 3, 1, 2, 4),
	M("cuMemcpyHtoD", FFM_REC_DIR_HTOD, 3, 1, 2, 0),
	M("cuMemcpyHtoDAsync", FFM_REC_DIR_HTOD, 3, 1, 2, 4),
	M("cuMemcpyDtoH", FFM_REC_DIR_DTOH, 3, 1, 2, 0),
	M("cuMemcpyDtoHAsync", FFM_REC_DIR_DTOH, 3, 1, 2, 4),
	M("cuMemcpyDtoD", FFM_REC_DIR_DTOD, 3, 1, 2, 0),
	M("cuMemcpyDtoDAsync", FFM_REC_DIR_DTOD, 3, 1, 2, 4),
	M("cuMemcpyPeer", FFM_REC_DIR_DTOD, 5, 1, 3, 0),
	M("cuMemcpyPeerAsync", FFM_REC_DIR_DTOD, 5, 1, 3, 6),
	M("cuMemcpyHtoA", FFM_REC_DIR_HTOD, 4, 0, 3, 0),
	M("cuMemcpyHtoAAsync", FFM_REC_DIR_HTOD, 4, 0, 3, 5),
	M("cuMemcpyAtoH", FFM_REC_DIR_DTOH, 4, 1, 0, 0),
	M("cuMemcpyAtoHAsync", FFM_REC_DIR_DTOH, 4, 1, 0, 5),
	M("cuMemcpyAtoD", FFM_REC_DIR_DTOD, 4, 1, 0, 0),
	M("cuMemcpyDtoA", FFM_REC_DIR_DTOD, 4, 0, 3, 0),
	M("cuMemcpyAtoA", FFM_REC_DIR_DTOD, 5, 0, 0, 0),
	/* Descriptor-based copies: sizes live in the descriptor (not read in BPF yet). */
	M("cuMemcpy2D", FFM_REC_DIR_ANY, 0, 0, 0, 0),
	M("cuMemcpy2DUnaligned", FFM_REC_DIR_ANY, 0, 0, 0, 0),
	M("cuMemcpy2DAsync", FFM_REC_DIR_ANY, 0, 0, 0, 2),
	M("cuMemcpy3D", FFM_REC_DIR_ANY, 0, 0, 0, 0),
	M("cuMemcpy3DAsync", FFM_REC_DIR_ANY, 0, 0, 0, 2),
	M("cuMemcpy3DPeer", FFM_REC_DIR_ANY, 0, 0, 0, 0),
	M("cuMemcpy3DPeerAsync", FFM_REC_DIR_ANY, 0, 0, 0, 2),
	M("cuMemcpyBatchAsync", FFM_REC_DIR_ANY, 0, 0, 0, 0),
	M("cuMemcpy3DBatchAsync", FFM_REC_DIR_ANY, 0, 0, 0, 0),
	/* allocation */
	{ "cuMemAlloc", FFM_KIND_ALLOC, 0, 2, 0, 0, 0, 0, 1 },
	{ "cuMemAllocPitch", FFM_KIND_ALLOC, 0, 0, 0, 0, 0, 0, 1 },
	{ "cuMemAllocHost", FFM_KIND_ALLOC, 0, 2, 0, 0, 0, 0, 1 },
	{ "cuMemHostAlloc", FFM_KIND_ALLOC, 0, 2, 0, 0, 0, 0, 1 },
	{ "cuMemAllocManaged", FFM_KIND_ALLOC, 0, 2, 0, 0, 0, 0, 1 },
	{ "cuMemAllocAsync", FFM_KIND_ALLOC, 0, 2, 0, 0, 3, 0, 1 },
	{ "cuMemAllocFromPoolAsync", FFM_KIND_ALLOC, 0, 2, 0, 0, 4, 0, 1 },
	{ "cuMemHostRegister", FFM_KIND_ALLOC, 0, 2, 1, 0, 0, 0, 0 },
	/* free */
	{ "cuMemFree", FFM_KIND_FREE, 0, 0, 1 },
	{ "cuMemFreeHost", FFM_KIND_FREE, 0, 0, 1 },
	{ "cuMemFreeAsync", FFM_KIND_FREE, 0, 0, 1, 0, 2 },
	{ "cuMemHostUnregister", FFM_KIND_FREE, 0, 0, 1 },
	/* memset: count x element size */
	{ "cuMemsetD8", FFM_KIND_MEMSET, 0, 3, 1, 0, 0, 1 },
	{ "cuMemsetD16", FFM_KIND_MEMSET, 0, 3, 1, 0, 0, 2 },
	{ "cuMemsetD32", FFM_KIND_MEMSET, 0, 3, 1, 0, 0, 4 },
	{ "cuMemsetD8Async", FFM_KIND_MEMSET, 0, 3, 1, 0, 4, 1 },
	{ "cuMemsetD16Async", FFM_KIND_MEMSET, 0, 3, 1, 0, 4, 2 },
	{ "cuMemsetD32Async", FFM_KIND_MEMSET, 0, 3, 1, 0, 4, 4 },
	{ "cuMemsetD2D8", FFM_KIND_MEMSET, 0, 0, 1 },
	{ "cuMemsetD2D16", FFM_KIND_MEMSET, 0, 0, 1 },
	{ "cuMemsetD2D32", FFM_KIND_MEMSET, 0, 0, 1 },
	/* launches: the kernel's handle (CUfunction, or a CUkernel cast to one) as src */
	{ "cuLaunchKernel", FFM_KIND_LAUNCH, 0, 0, 0, 1 },
	{ "cuLaunchKernelEx", FFM_KIND_LAUNCH, 0, 0, 0, 2 },
	{ "cuLaunchCooperativeKernel", FFM_KIND_LAUNCH, 0, 0, 0, 1 },
	{ "cuLaunchHostFunc", FFM_KIND_LAUNCH, 0, 0, 0, 0, 1 },
	{ "cuGraphLaunch", FFM_KIND_LAUNCH, 0, 0, 0, 0, 2 },
	/* kernel names, as the program gets a kernel's handle (probed with the launches) */
	{ "cuModuleGetFunction", FFM_KIND_NAME, FFM_NAME_ARG, 0, 0, 3, 0, 0, 1 },
	{ "cuLibraryGetKernel", FFM_KIND_NAME, FFM_NAME_ARG, 0, 0, 3, 0, 0, 1 },
	{ "cuKernelGetFunction", FFM_KIND_NAME, FFM_NAME_ALIAS, 0, 2, 0, 0, 0, 1 },
	{ "cuKernelGetName", FFM_KIND_NAME, FFM_NAME_OUT, 0, 2, 0, 0, 0, 1 },
	{ "cuFuncGetName", FFM_KIND_NAME, FFM_NAME_OUT, 0, 2, 0, 0, 0, 1 },
};
#undef M

struct ffm_apis {
	size_t n;
	struct ffm_api_desc d[FFM_API_MAX];
	char *owned[FFM_API_MAX]; /* names of interned entries */
};

int ffm_apis__new(struct ffm_apis **ret)
{
	struct ffm_apis *a = calloc(1, sizeof(*a));

	*ret = NULL;
	if (!a)
		return -ENOMEM;
	a->n = sizeof(builtin) / sizeof(builtin[0]);
	memcpy(a->d, builtin, sizeof(builtin));
	*ret = a;
	return 0;
}

struct ffm_apis *ffm_apis__free(struct ffm_apis *a)
{
	if (!a)
		return NULL;
	for (size_t i = 0; i < a->n; i++)
		free(a->owned[i]);
	free(a);
	return NULL;
}

size_t ffm_apis__count(const struct ffm_apis *a)
{
	return a->n;
}

const struct ffm_api_desc *ffm_apis__get(const struct ffm_apis *a, uint32_t id)
{
	return id < a->n ? &a->d[id] : NULL;
}

void ffm_api_base_name(const char *name, char *buf, size_t len)
{
	size_t n;

	if (!len)
		return;
	n = strlen(name);
	if (n >= len)
		n = len - 1;
	memcpy(buf, name, n);
	buf[n] = 0;
	for (;;) {
		char *u = strrchr(buf, '_');

		if (!u || u == buf)
			return;
		if (!strcmp(u, "_ptds") || !strcmp(u, "_ptsz")) {
			*u = 0;
			continue;
		}
		if (u[1] == 'v' && u[2] >= '0' && u[2] <= '9' && strspn(u + 2, "0123456789") == strlen(u + 2)) {
			*u = 0;
			continue;
		}
		return;
	}
}

bool ffm_api_is_query(const char *name)
{
	char base[256];
	size_t n;

	ffm_api_base_name(name, base, sizeof(base));
	if (strncmp(base, "cu", 2))
		return false;
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (!strcmp(builtin[i].name, base))
			return false; /* a kind the model uses is never a query */
	n = strlen(base);
	return strstr(base + 2, "Get") || !strncmp(base, "cuOccupancy", 11) ||
	       (n > 5 && !strcmp(base + n - 5, "Query"));
}

static int find(const struct ffm_apis *a, const char *base)
{
	for (size_t i = 0; i < a->n; i++)
		if (!strcmp(a->d[i].name, base))
			return (int)i;
	return -ENOENT;
}

int ffm_apis__intern(struct ffm_apis *a, const char *name, uint8_t kind)
{
	char base[256];
	int id;

	ffm_api_base_name(name, base, sizeof(base));
	id = find(a, base);
	if (id >= 0)
		return id;
	if (a->n >= FFM_API_MAX)
		return -ENOSPC;
	a->owned[a->n] = strdup(base);
	if (!a->owned[a->n])
		return -ENOMEM;
	a->d[a->n] = (struct ffm_api_desc){ .name = a->owned[a->n], .kind = kind };
	return (int)a->n++;
}

uint64_t ffm_apis__cookie(const struct ffm_apis *a, uint32_t id)
{
	const struct ffm_api_desc *d = ffm_apis__get(a, id);

	if (!d)
		return 0;
	return FFM_COOKIE(id, d->kind, d->dir, d->bytes_arg, d->dst_arg, d->src_arg, d->stream_arg,
			  d->elsz, d->outp_arg);
}
