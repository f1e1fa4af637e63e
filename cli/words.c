// SPDX-License-Identifier: MIT
/* The words for a problem and its fix (cli/report.h), shared by the text and the JSON of
 * ffmctl report. Split from cli/report.c. */
#include <stdio.h>
#include <string.h>

#include "cli/ffmctl.h"
#include "cli/report.h"

/* ---- what each problem is, and its fix ------------------------------------------------------ */

/* What a driver call is, for the words of its problems: which of them synchronize implicitly,
 * and why (CUDA's "API synchronization behavior"), and which way a copy goes. */
enum api_kind {
	API_SYNC, API_FREE, API_FREE_HOST, API_COPY, API_COPY_ASYNC, API_MEMSET, API_OTHER
};

static enum api_kind api_kind(const char *api)
{
	if (!strncmp(api, "cuMemFreeHost", 13))
		return API_FREE_HOST;
	if (!strncmp(api, "cuMemFree", 9) && !strstr(api, "Async"))
		return API_FREE;
	if (!strncmp(api, "cuMemcpy", 8))
		return strstr(api, "Async") ? API_COPY_ASYNC : API_COPY;
	if (!strncmp(api, "cuMemset", 8))
		return API_MEMSET;
	if (strstr(api, "Synchronize") || !strncmp(api, "cuStreamQuery", 13) ||
	    !strncmp(api, "cuEventQuery", 12))
		return API_SYNC;
	return API_OTHER;
}

enum copy_dir { DIR_UNKNOWN, DIR_TO_GPU, DIR_TO_HOST, DIR_ON_GPU };

static enum copy_dir copy_dir(const char *api)
{
	if (strstr(api, "HtoD") || strstr(api, "HtoA"))
		return DIR_TO_GPU;
	if (strstr(api, "DtoH") || strstr(api, "AtoH"))
		return DIR_TO_HOST;
	if (strstr(api, "DtoD") || strstr(api, "DtoA") || strstr(api, "AtoD") ||
	    strstr(api, "AtoA") || strstr(api, "Peer"))
		return DIR_ON_GPU;
	return DIR_UNKNOWN;
}

/* Why a call that is not a sync waited, and what makes it not wait (NULL: an explicit sync). */
static const char *no_wait_fix(const char *api)
{
	switch (api_kind(api)) {
	case API_SYNC:
		return NULL;
	case API_FREE:
		return "cuMemFree waits for all of the GPU's work: allocate the buffer once, "
		       "outside the loop, and reuse it, or free it in stream order with "
		       "cuMemFreeAsync (cudaFreeAsync)";
	case API_FREE_HOST:
		return "cuMemFreeHost waits for all of the GPU's work: keep pinned buffers for "
		       "the whole run and free them at its end";
	case API_COPY_ASYNC:
		return "an async copy waits when its host memory is pageable: allocate that buffer "
		       "pinned (cuMemAllocHost, cudaMallocHost) or pin it (cuMemHostRegister, "
		       "cudaHostRegister)";
	case API_COPY:
		return "a synchronous copy waits for the GPU: use its Async form on a stream "
		       "(cuMemcpy*Async, cudaMemcpyAsync) with pinned host memory";
	case API_MEMSET:
		return "a memset of managed (or pinned host) memory waits for the GPU: reset the "
		       "buffer with a kernel on its stream, or with cuMemsetD*Async "
		       "(cudaMemsetAsync)";
	default:
		return "this call waits for the GPU: call it where the GPU is idle (out of the "
		       "loop), or use its stream-ordered (Async) form";
	}
}

/* The fix of problem type @p at site @s, in @buf. */
const char *ffmctl_fix_text(unsigned p, const struct ffm_an_site *s, char *buf, size_t len)
{
	const char *nw = no_wait_fix(s->api_name);

	switch (p) {
	case FFM_PROBLEM_UNNECESSARY_SYNC:
		if (s->managed_fix)
			return "set the buffer with a host memset where the host reads it next, or "
			       "keep it in device memory (cuMemAlloc, cudaMalloc) and copy back what "
			       "the host reads: the call, its wait, the pages' move to the GPU and the "
			       "host's page faults that bring them back go";
		if (!nw)
			return "delete the sync; where another stream's work must wait for this "
			       "one, record an event after it (cuEventRecord, cudaEventRecord) and "
			       "make that stream wait on it (cuStreamWaitEvent, "
			       "cudaStreamWaitEvent)";
		return nw;
	case FFM_PROBLEM_MISPLACED_SYNC:
		if (!nw)
			return "move the sync down to just before that first use";
		snprintf(buf, len, "%s; then synchronize the stream just before that first use",
			 nw);
		return buf;
	case FFM_PROBLEM_DUPLICATE_TRANSFER:
		switch (copy_dir(s->api_name)) {
		case DIR_TO_GPU:
			return "keep the data on the GPU: copy it once (before the loop) and "
			       "reuse the device buffer; copy again only after the host changes it";
		case DIR_TO_HOST:
			return "keep the host's copy: the GPU's data did not change since it was "
			       "last copied back; copy again only after a kernel changes it";
		default:
			return "copy once and reuse the destination; copy again only after the "
			       "source changes";
		}
	case FFM_PROBLEM_HOST_READ:
		snprintf(buf, len, "keep the values on the GPU and read them every %u iterations "
			 "(the saving shown): the fix changes when the value is used, not just the "
			 "call", FFM_HOST_READ_EVERY);
		return buf;
	case FFM_PROBLEM_LAUNCH_BLOCKED:
		return "fewer, larger kernels or a CUDA graph (cuGraphLaunch, cudaGraphLaunch); "
		       "no time is credited";
	case FFM_PROBLEM_TEMP_BUFFER:
		return "allocate the buffer once, outside the loop, and reuse it every step: the "
		       "allocations, their fills and frees but one go (a stream-ordered "
		       "cuMemAllocAsync/cuMemFreeAsync pool is another way)";
	}
	return "";
}

/* What an unnecessary sync at @s is: what waited, and why nothing needed it. */
const char *ffmctl_unnecessary_text(const struct ffm_an_site *s)
{
	enum api_kind k = api_kind(s->api_name);

	if (s->managed_fix)
		return "this memset of managed memory waited for the GPU and moved the pages to it, "
		       "and the host faults them back when it reads them after";
	if (k == API_COPY || k == API_COPY_ASYNC) {
		switch (copy_dir(s->api_name)) {
		case DIR_TO_GPU:
			return "the CPU waited in this copy to the GPU, and nothing it does before "
			       "the next sync needs the copy or the GPU's earlier work done";
		case DIR_TO_HOST:
			return "the CPU waited in this copy back from the GPU, and reads none of "
			       "the copied data before the next sync";
		default:
			return "the CPU waited in this copy, and uses nothing the GPU wrote before "
			       "the next sync";
		}
	}
	if (k == API_SYNC)
		return "the CPU reads no data the GPU wrote between this sync and the next";
	return "this call waited for the GPU, and the CPU reads no data the GPU wrote before "
	       "the next sync";
}

/* "the same bytes copied to the GPU", for a duplicate at @s. */
const char *ffmctl_dup_text(const struct ffm_an_site *s)
{
	switch (copy_dir(s->api_name)) {
	case DIR_TO_GPU:
		return "the same bytes copied from the host to the same GPU buffer again";
	case DIR_TO_HOST:
		return "the same bytes copied back from the GPU to the same host buffer again";
	case DIR_ON_GPU:
		return "the same bytes copied to the same GPU buffer again";
	default:
		return "the same bytes copied to the same destination again";
	}
}

