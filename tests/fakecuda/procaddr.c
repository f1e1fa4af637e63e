/* SPDX-License-Identifier: MIT */
/*
 * cuGetProcAddress: how the CUDA runtime finds every driver entry point. It asks for a base
 * name ("cuMemcpyHtoD"), the CUDA version it was built for and whether it wants per-thread
 * default stream semantics, and gets the newest matching versioned function: a CUDA 13 runtime
 * asking for "cuCtxSynchronize" gets cuCtxSynchronize_v2, never cuCtxSynchronize
 * (docs/DESIGN.md, "Facts measured on the real GPU machine").
 * A probe set that covers only the plain exported names misses those calls; this table makes
 * the simulator hand out the same functions the real driver does.
 */
#include <string.h>

#include "fakecuda.h"

enum { ANY = 0, LEGACY = 1, PTDS = 2 };

static const struct proc {
	const char *name;
	int version; /* first CUDA version (1000*major + 10*minor) that gets this function */
	int stream;  /* ANY, or which default-stream flavour this variant serves */
	void *fn;
} procs[] = {
#define P(name, ver, fn) { #name, ver, ANY, (void *)fn }
#define L(name, ver, fn) { #name, ver, LEGACY, (void *)fn }
#define T(name, ver, fn) { #name, ver, PTDS, (void *)fn }
	P(cuInit, 2000, cuInit),
	P(cuDriverGetVersion, 2020, cuDriverGetVersion),
	P(cuGetErrorString, 6000, cuGetErrorString),
	P(cuGetErrorName, 6000, cuGetErrorName),
	P(cuGetProcAddress, 11030, cuGetProcAddress),
	P(cuGetProcAddress, 12000, cuGetProcAddress_v2),
	P(cuDeviceGet, 2000, cuDeviceGet),
	P(cuDeviceGetCount, 2000, cuDeviceGetCount),
	P(cuDeviceGetName, 2000, cuDeviceGetName),
	P(cuDeviceGetUuid, 9020, cuDeviceGetUuid),
	P(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2),
	P(cuDeviceTotalMem, 2000, cuDeviceTotalMem),
	P(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
	P(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
	P(cuDeviceComputeCapability, 2000, cuDeviceComputeCapability),
	P(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
	P(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
	P(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
	P(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags),
	P(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2),
	P(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),
	P(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
	P(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
	P(cuCtxCreate, 2000, cuCtxCreate),
	P(cuCtxCreate, 3020, cuCtxCreate_v2),
	P(cuCtxCreate, 11040, cuCtxCreate_v3),
	P(cuCtxCreate, 12050, cuCtxCreate_v4),
	P(cuCtxDestroy, 2000, cuCtxDestroy),
	P(cuCtxDestroy, 4000, cuCtxDestroy_v2),
	P(cuCtxPushCurrent, 2000, cuCtxPushCurrent),
	P(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
	P(cuCtxPopCurrent, 2000, cuCtxPopCurrent),
	P(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
	P(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
	P(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
	P(cuCtxGetDevice, 2000, cuCtxGetDevice),
	P(cuCtxGetFlags, 7000, cuCtxGetFlags),
	P(cuCtxGetApiVersion, 3020, cuCtxGetApiVersion),
	P(cuCtxSynchronize, 2000, cuCtxSynchronize),
	P(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
	P(cuStreamCreate, 2000, cuStreamCreate),
	P(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
	P(cuStreamDestroy, 2000, cuStreamDestroy),
	P(cuStreamDestroy, 4000, cuStreamDestroy_v2),
	L(cuStreamSynchronize, 2000, cuStreamSynchronize),
	T(cuStreamSynchronize, 7000, cuStreamSynchronize_ptsz),
	L(cuStreamQuery, 2000, cuStreamQuery),
	T(cuStreamQuery, 7000, cuStreamQuery_ptsz),
	L(cuStreamWaitEvent, 3020, cuStreamWaitEvent),
	T(cuStreamWaitEvent, 7000, cuStreamWaitEvent_ptsz),
	P(cuStreamGetFlags, 5050, cuStreamGetFlags),
	P(cuStreamGetPriority, 5050, cuStreamGetPriority),
	P(cuStreamGetCtx, 9020, cuStreamGetCtx),
	P(cuEventCreate, 2000, cuEventCreate),
	P(cuEventDestroy, 2000, cuEventDestroy),
	P(cuEventDestroy, 4000, cuEventDestroy_v2),
	L(cuEventRecord, 2000, cuEventRecord),
	T(cuEventRecord, 7000, cuEventRecord_ptsz),
	L(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags),
	T(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags_ptsz),
	P(cuEventQuery, 2000, cuEventQuery),
	P(cuEventSynchronize, 2000, cuEventSynchronize),
	P(cuEventElapsedTime, 2000, cuEventElapsedTime),
	P(cuEventElapsedTime, 12080, cuEventElapsedTime_v2),
	P(cuMemAlloc, 2000, cuMemAlloc),
	P(cuMemAlloc, 3020, cuMemAlloc_v2),
	P(cuMemFree, 2000, cuMemFree),
	P(cuMemFree, 3020, cuMemFree_v2),
	P(cuMemAllocHost, 2000, cuMemAllocHost),
	P(cuMemAllocHost, 3020, cuMemAllocHost_v2),
	P(cuMemHostAlloc, 2020, cuMemHostAlloc),
	P(cuMemFreeHost, 2000, cuMemFreeHost),
	P(cuMemAllocManaged, 6000, cuMemAllocManaged),
	P(cuMemHostRegister, 4000, cuMemHostRegister),
	P(cuMemHostRegister, 6050, cuMemHostRegister_v2),
	P(cuMemHostUnregister, 4000, cuMemHostUnregister),
	P(cuMemHostGetDevicePointer, 2020, cuMemHostGetDevicePointer),
	P(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2),
	P(cuMemGetInfo, 2000, cuMemGetInfo),
	P(cuMemGetInfo, 3020, cuMemGetInfo_v2),
	P(cuMemGetAddressRange, 2000, cuMemGetAddressRange),
	P(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2),
	P(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
	L(cuMemcpyHtoD, 2000, cuMemcpyHtoD),
	L(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2),
	T(cuMemcpyHtoD, 7000, cuMemcpyHtoD_v2_ptds),
	L(cuMemcpyDtoH, 2000, cuMemcpyDtoH),
	L(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2),
	T(cuMemcpyDtoH, 7000, cuMemcpyDtoH_v2_ptds),
	L(cuMemcpyDtoD, 2000, cuMemcpyDtoD),
	L(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2),
	T(cuMemcpyDtoD, 7000, cuMemcpyDtoD_v2_ptds),
	L(cuMemcpyHtoDAsync, 2000, cuMemcpyHtoDAsync),
	L(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2),
	T(cuMemcpyHtoDAsync, 7000, cuMemcpyHtoDAsync_v2_ptsz),
	L(cuMemcpyDtoHAsync, 2000, cuMemcpyDtoHAsync),
	L(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2),
	T(cuMemcpyDtoHAsync, 7000, cuMemcpyDtoHAsync_v2_ptsz),
	L(cuMemcpyDtoDAsync, 3000, cuMemcpyDtoDAsync),
	L(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2),
	T(cuMemcpyDtoDAsync, 7000, cuMemcpyDtoDAsync_v2_ptsz),
	L(cuMemcpy, 4000, cuMemcpy),
	T(cuMemcpy, 7000, cuMemcpy_ptds),
	L(cuMemcpyAsync, 4000, cuMemcpyAsync),
	T(cuMemcpyAsync, 7000, cuMemcpyAsync_ptsz),
	L(cuMemsetD8, 2000, cuMemsetD8),
	L(cuMemsetD8, 3020, cuMemsetD8_v2),
	T(cuMemsetD8, 7000, cuMemsetD8_v2_ptds),
	L(cuMemsetD16, 2000, cuMemsetD16),
	L(cuMemsetD16, 3020, cuMemsetD16_v2),
	T(cuMemsetD16, 7000, cuMemsetD16_v2_ptds),
	L(cuMemsetD32, 2000, cuMemsetD32),
	L(cuMemsetD32, 3020, cuMemsetD32_v2),
	T(cuMemsetD32, 7000, cuMemsetD32_v2_ptds),
	L(cuMemsetD8Async, 3020, cuMemsetD8Async),
	T(cuMemsetD8Async, 7000, cuMemsetD8Async_ptsz),
	L(cuMemsetD16Async, 3020, cuMemsetD16Async),
	T(cuMemsetD16Async, 7000, cuMemsetD16Async_ptsz),
	L(cuMemsetD32Async, 3020, cuMemsetD32Async),
	T(cuMemsetD32Async, 7000, cuMemsetD32Async_ptsz),
	P(cuModuleLoad, 2000, cuModuleLoad),
	P(cuModuleLoadData, 2000, cuModuleLoadData),
	P(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx),
	P(cuModuleGetFunction, 2000, cuModuleGetFunction),
	P(cuModuleUnload, 2000, cuModuleUnload),
	P(cuLibraryLoadData, 12000, cuLibraryLoadData),
	P(cuLibraryGetKernel, 12000, cuLibraryGetKernel),
	P(cuLibraryUnload, 12000, cuLibraryUnload),
	P(cuKernelGetFunction, 12000, cuKernelGetFunction),
	P(cuKernelGetName, 12030, cuKernelGetName),
	P(cuFuncGetName, 12030, cuFuncGetName),
	L(cuLaunchKernel, 4000, cuLaunchKernel),
	T(cuLaunchKernel, 7000, cuLaunchKernel_ptsz),
#undef P
#undef L
#undef T
};

static CUresult get_proc_address(const char *symbol, void **pfn, int cudaVersion,
				 cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	/* CU_GET_PROC_ADDRESS_DEFAULT means legacy for a caller not built for per-thread streams. */
	int want = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? PTDS : LEGACY;
	const struct proc *best = NULL;
	bool known = false;

	/* Works before cuInit: the runtime looks up cuInit itself this way. */
	if (!symbol || !pfn || cudaVersion <= 0 ||
	    (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
				    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		const struct proc *p = &procs[i];

		if (strcmp(p->name, symbol))
			continue;
		known = true;
		if (p->version > cudaVersion || (p->stream != ANY && p->stream != want))
			continue;
		if (!best || p->version > best->version)
			best = p;
	}
	/*
	 * A per-thread caller asking for a name that exists only in its legacy flavour before the
	 * per-thread variant appeared (cudaVersion < 7000) gets the legacy one.
	 */
	if (!best && known && want == PTDS) {
		for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
			const struct proc *p = &procs[i];

			if (!strcmp(p->name, symbol) && p->version <= cudaVersion &&
			    (!best || p->version > best->version))
				best = p;
		}
	}
	if (symbolStatus)
		*symbolStatus = best    ? CU_GET_PROC_ADDRESS_SUCCESS
				: known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
					: CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	*pfn = best ? best->fn : NULL;
	return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *symbolStatus)
{
	return get_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* The CUDA 11.3 form, without the status. */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return get_proc_address(symbol, pfn, cudaVersion, flags, NULL);
}
