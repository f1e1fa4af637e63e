/*
 * The three kernels every ffm workload runs, and the contract with the simulated driver
 * (tests/fakecuda): the fake does not execute PTX, it recognizes these entry names and their
 * parameters (in this order) and reproduces their effect and duration. Keep the names, the
 * parameter lists and the semantics below in step with tests/fakecuda.
 *
 * Durations are measured on %globaltimer (nanoseconds, the same clock on every SM), not in clock
 * cycles, so a kernel takes the asked time on any GPU and clock rate: that is what makes each
 * workload's planted waste predictable on the real driver and on the simulated one.
 *
 * kernels.ptx is generated from this file with `make ptx` (needs nvcc) and checked in, because CI
 * has no nvcc; the workloads embed the PTX text and load it with cuModuleLoadData, so the real
 * driver JIT-compiles it for whatever GPU it runs on.
 */

static __device__ __forceinline__ unsigned long long ffm_globaltimer(void)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

static __device__ __forceinline__ void ffm_busy_wait(unsigned long long ns)
{
	unsigned long long start = ffm_globaltimer();

	while (ffm_globaltimer() - start < ns)
		;
}

/* Busy-waits ns nanoseconds; launch with one thread (grid 1x1x1, block 1x1x1). */
extern "C" __global__ void ffm_spin(unsigned long long ns)
{
	ffm_busy_wait(ns);
}

/*
 * Every thread busy-waits ns nanoseconds, then the grid updates buf[i] = buf[i] * mul + add for
 * all i < n with a grid-stride loop (n may be 0: then it is a pure delay). mul = 0 makes it a
 * memset; mul = 1, add = 0 reads and rewrites the buffer unchanged (a "read" of input data).
 */
extern "C" __global__ void ffm_work(unsigned int *buf, unsigned long long n, unsigned int mul,
				    unsigned int add, unsigned long long ns)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;

	ffm_busy_wait(ns);
	for (; i < n; i += stride)
		buf[i] = buf[i] * mul + add;
}

/*
 * Spins until the host writes a non-zero value to *flag (host-visible memory: managed or mapped
 * pinned). Used to hold the GPU busy for as long as a test needs, e.g. to observe a wait that is
 * in progress; it never finishes on its own.
 */
extern "C" __global__ void ffm_hang(volatile unsigned int *flag)
{
	while (*flag == 0)
		;
}
