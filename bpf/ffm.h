/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one contract between ffm's BPF programs (bpf/ffm.bpf.c) and user space (daemon/).
 *
 * Records travel through one BPF ring buffer. Each starts with struct ffm_rec_hdr; the type
 * says which record follows. Fields are fixed width, no pointers, no `long`, explicit padding;
 * user space checks every size with _Static_assert (daemon/collector.c). Changing a record
 * means changing FFM_ABI_VERSION (what each version added: docs/BPF.md, "ABI versions").
 *
 * A stack key names a call stack without unwinding the application: a hash of libcuda's return
 * addresses, the application's call site and the words at its learned slots (docs/BPF.md,
 * "Stack keys"). A key's first record in a process and job run follows its FFM_REC_STACK.
 */
#ifndef FFM_BPF_ABI_H
#define FFM_BPF_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define FFM_ABI_VERSION 19

#define FFM_MAX_JOBS 64           /* job slots active at once */
#define FFM_MAX_PROCS 16384       /* tracked processes */
#define FFM_LIB_FRAMES 24         /* libcuda frames walked by rbp */
#define FFM_LEARNED_SLOTS 16      /* application frames identified by slot reads */
#define FFM_STACK_BYTES 16384     /* stack bytes copied with a new stack */
#define FFM_MAX_CGROUP_LEVELS 16  /* cgroup ancestors checked against cgroup rules */
#define FFM_RINGBUF_BYTES (64u << 20)
#define FFM_PENDING_DTOH 8        /* async DtoH copies per thread awaiting their sync's hash */
#define FFM_HASH_CHUNK 32768      /* bytes copied from the process per hashing step */

enum ffm_rec_type {
	FFM_REC_WAIT = 1,   /* one wait in the internal wait function */
	FFM_REC_CALL = 2,   /* one probed driver API call (stage >= 2) */
	FFM_REC_STACK = 3,  /* first occurrence of a stack key in a process */
	FFM_REC_EXEC = 4,   /* a tracked process exec'd (or joined a job) */
	FFM_REC_EXIT = 5,   /* a tracked process exited */
	FFM_REC_FORK = 6,   /* a tracked process forked a child that inherits the job */
	FFM_REC_XFER = 7,   /* stage 3: content hash of the bytes a transfer moved */
	FFM_REC_RANGE = 8,  /* stages 3-4: a DtoH copy was issued; its destination becomes GPU-written */
	FFM_REC_HIT = 9,    /* stages 3-4: first watched CPU access after a synchronization */
	FFM_REC_MAP = 10,   /* a tracked process maps a libcuda file not in the drivers map */
	FFM_REC_RELEASE = 11, /* a tracked process enters a context release (adaptive stage 1) */
	FFM_REC_SAMPLE = 12,  /* stage 2: a CPU sample of a Python thread (struct ffm_rec_sample) */
	FFM_REC_PYCODE = 13,  /* a code object a new stack's Python frames run (struct ffm_rec_pycode) */
	FFM_REC_FUNC = 14,    /* a kernel's handle and name at its getter's return (ffm_rec_func) */
	FFM_REC_FAULT = 15,   /* stage 4: a page fault of a thread that samples them (ffm_rec_fault) */
};

/* The probe classes; the attach cookie carries one (see FFM_COOKIE). */
enum ffm_api_kind {
	FFM_KIND_WAIT = 0,     /* the internal wait function */
	FFM_KIND_SYNC = 1,     /* explicit synchronization (ctx/stream/event sync) */
	FFM_KIND_MEMCPY = 2,   /* transfers */
	FFM_KIND_ALLOC = 3,
	FFM_KIND_FREE = 4,
	FFM_KIND_MEMSET = 5,
	FFM_KIND_LAUNCH = 6,
	FFM_KIND_OTHER = 7,
	/* A getter of a kernel's handle or name (probed with the launches): no call record, a
	 * FFM_REC_FUNC at its return; the cookie's dir says where handle and name are. */
	FFM_KIND_NAME = 8,
};

/* Where a name getter (FFM_KIND_NAME) has them: the cookie's dir field. */
enum ffm_name_how {
	FFM_NAME_ARG = 1,   /* handle out through outp, the name at the src argument
			     * (cuModuleGetFunction, cuLibraryGetKernel) */
	FFM_NAME_ALIAS = 2, /* handle out through outp, the handle it is another form of at the dst
			     * argument (cuKernelGetFunction) */
	FFM_NAME_OUT = 3,   /* the name's pointer out through outp, the handle at the dst argument
			     * (cuKernelGetName, cuFuncGetName) */
};

enum ffm_rec_dir {
	FFM_REC_DIR_NONE = 0,
	FFM_REC_DIR_HTOD = 1,
	FFM_REC_DIR_DTOH = 2,
	FFM_REC_DIR_DTOD = 3,
	FFM_REC_DIR_HTOH = 4,
	FFM_REC_DIR_ANY = 5, /* cuMemcpy / cuMemcpyAsync: direction from the pointers (UVA) */
};

/*
 * Attach cookie of an API probe: where the interesting arguments are. An argument index is
 * 1..6 for the first six integer arguments (rdi, rsi, rdx, rcx, r8, r9), 0 for "none".
 *   bits  0..15  api id (index in the daemon's API table)
 *   bits 16..19  enum ffm_api_kind
 *   bits 20..23  enum ffm_rec_dir
 *   bits 24..27  argument holding the byte count (for memset: the element count)
 *   bits 28..31  argument holding the destination pointer
 *   bits 32..35  argument holding the source pointer
 *   bits 36..39  argument holding the stream
 *   bits 40..43  element size in bytes for memset counts (1, 2, 4), 0 = bytes
 *   bits 44..47  argument holding a pointer to the destination (cuMemAlloc's CUdeviceptr *)
 */
#define FFM_COOKIE(api, kind, dir, bytes, dst, src, stream, elsz, outp)                            \
	((__u64)(api) | (__u64)(kind) << 16 | (__u64)(dir) << 20 | (__u64)(bytes) << 24 |          \
	 (__u64)(dst) << 28 | (__u64)(src) << 32 | (__u64)(stream) << 36 | (__u64)(elsz) << 40 |   \
	 (__u64)(outp) << 44)
#define FFM_COOKIE_API(c) ((__u32)((c)&0xffff))
#define FFM_COOKIE_KIND(c) ((__u32)(((c) >> 16) & 0xf))
#define FFM_COOKIE_DIR(c) ((__u32)(((c) >> 20) & 0xf))
#define FFM_COOKIE_ARG(c, shift) ((__u32)(((c) >> (shift)) & 0xf))
#define FFM_COOKIE_BYTES_SHIFT 24
#define FFM_COOKIE_DST_SHIFT 28
#define FFM_COOKIE_SRC_SHIFT 32
#define FFM_COOKIE_STREAM_SHIFT 36
#define FFM_COOKIE_ELSZ_SHIFT 40
#define FFM_COOKIE_OUTP_SHIFT 44

/* Per job slot: what the job's runs record. */
enum ffm_job_flags {
	FFM_JOB_ACTIVE = 1 << 0,
	FFM_JOB_CALLS = 1 << 1,  /* record API calls (stage >= 2) */
	FFM_JOB_STACKS = 1 << 2, /* stack keys + first-seen stacks */
	FFM_JOB_MEMTRACE = 1 << 3, /* RANGE records at DtoH issue, HIT records from watchpoints */
	FFM_JOB_HASH = 1 << 4,     /* XFER records: hash transfers (needs the sleepable API probes) */
	/* A [rule]'s slot: its processes wait there until user space moves each to a job of its
	 * own, whose stage may be higher; the map guard stops one that maps libcuda before. */
	FFM_JOB_RULE = 1 << 5,
	/* CPU samples of the job's Python threads (FFM_REC_SAMPLE): the CPU time a Python line
	 * spends in a library call around its driver calls (stage 2, see daemon/pytrack.h). */
	FFM_JOB_CPU_SAMPLE = 1 << 6,
	/* A wait inside a probed call gets its own record too, as in stage 1, besides counting in
	 * the call's (a monitoring run that times copies: stage 1's records plus the calls'). */
	FFM_JOB_WAITS_ALONE = 1 << 7,
};

struct ffm_job_cfg {
	__u32 flags; /* enum ffm_job_flags */
	__u32 stage;
	/* Set by ffm_collector__set_job, new at each call: which stacks a process has sent is
	 * remembered per (process, gen), so a process that joins another run of the slot (or
	 * another job) sends its stacks again to the store that needs them. */
	__u32 gen;
	__u32 _pad;
};

/* Drop counters per job slot (index FFM_MAX_JOBS: records of no job). */
enum ffm_rec_drop {
	FFM_REC_DROP_RINGBUF = 0,   /* ring buffer full: a record was lost */
	FFM_REC_DROP_STACK = 1,     /* new stack could not be sent (ring buffer full) */
	FFM_REC_DROP_DEPTH = 2,     /* libcuda frames deeper than FFM_LIB_FRAMES: key is partial */
	FFM_REC_DROP_PROCS = 3,     /* process map full: a process could not be tracked */
	FFM_REC_DROP_THREADS = 4,   /* no thread state (no memory): a call's entry was not recorded */
	FFM_REC_DROP_UNMATCHED = 5, /* a return without its entry (attached mid-call) */
	FFM_REC_DROP_HASH = 6,      /* a transfer was not hashed (unreadable bytes, too many pending) */
	FFM_REC_DROP_QUOTA = 7,     /* its user's quota of tracked processes full: not tracked */
	FFM_REC_DROP__MAX = 8,
};

struct ffm_rec_drops {
	__u64 n[FFM_REC_DROP__MAX];
};

/* Per job slot (index FFM_MAX_JOBS: no job), per CPU: the run time of ffm's programs at a job
 * process's exec, mmap, fork and exit (bpf/procs.bpf.h), which run in the process's context
 * and are part of what it pays (store/ffm_store.h, FFM_OVERHEAD_BPF). */
struct ffm_bpf_overhead {
	__u64 ns, runs;
};

/* A tracked process: value of the procs map (key: tgid). */
struct ffm_proc {
	__u32 job;       /* job slot */
	__u32 flags;     /* FFM_PROC_CHARGED */
	__u64 lib_start; /* libcuda text range in this process, learned at the first probe */
	__u64 lib_end;
	/* Bumped by user space each time it puts the process's wait probe back (adaptive stage
	 * 1): a wait entered under an earlier link, whose return no probe saw, is forgotten. */
	__u32 link_epoch;
	/* FFM_PROC_CHARGED: the user whose quota of tracked processes (bpf/procs.bpf.h,
	 * procs_per_user) this entry counts in, until it is removed */
	__u32 quota_uid;
};
#define FFM_PROC_CHARGED 1u

/* A file as the kernel names it: s_dev (MKDEV: major << 20 | minor) and inode number. Keys of
 * the exe rules (checked at exec, in BPF) and of the drivers map (libcuda files user space has
 * dealt with: made ready, or found unusable). */
struct ffm_exe_key {
	__u64 dev;
	__u64 ino;
};

/* The drivers map's value (bpf/procs.bpf.h): user space has dealt with the file; and, per-process
 * scope, the bridge (a system-wide wait probe) is attached to it. */
#define FFM_DRV_KNOWN 1u
#define FFM_DRV_BRIDGED 2u

/* Learned stack slots of a call site (key: struct ffm_slot_key). */
struct ffm_slot_key {
	__u32 tgid;
	__u32 _pad;
	__u64 callsite; /* return address into the application */
};

struct ffm_slots {
	__u32 n;
	__s32 off[FFM_LEARNED_SLOTS]; /* byte offset from the call-site slot */
	__u32 _pad;
};

struct ffm_rec_hdr {
	__u16 type; /* enum ffm_rec_type */
	__u16 flags;
	__u32 cpu;
	__u64 ts_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u32 tgid;
	__u32 tid;
	__u32 job; /* job slot */
	__u32 _pad;
};

/* FFM_REC_WAIT: ts_ns is the end of the wait. */
struct ffm_rec_wait {
	struct ffm_rec_hdr hdr;
	__u64 start_ns;
	__u64 dur_ns;
	__u64 stack_key;
	__u32 api_id; /* the probed call it happened in, or 0xffff outside any */
	__u32 flags;  /* FFM_WAIT_* */
};
/* The thread slept in the wait (a voluntary context switch: a blocking-sync context). */
#define FFM_WAIT_SLEPT 0x1u

/* FFM_REC_CALL: ts_ns is the return. */
/* FFM_REC_FUNC: a kernel's handle (CUfunction or CUkernel) and its name, as the program got
 * it; at most FFM_FUNC_NAME - 1 bytes of the name (a longer one is cut, name_len says so). */
#define FFM_FUNC_NAME 256
struct ffm_rec_func {
	struct ffm_rec_hdr hdr;
	__u64 handle;
	__u64 alias;	 /* FFM_NAME_ALIAS: the handle whose name @handle has; else 0 */
	__u32 name_len;	 /* bytes in name, without its NUL (0: none, an alias) */
	__u32 _pad;
	char name[FFM_FUNC_NAME];
};

struct ffm_rec_call {
	struct ffm_rec_hdr hdr;
	__u64 start_ns;
	__u64 dur_ns;
	__u64 wait_ns; /* time inside the wait function during this call */
	__u64 stack_key;
	__u64 bytes;
	/* copies, memsets, frees: their destination argument; allocations: the pointer they gave,
	 * read through their out argument at the return (what pairs a buffer's allocation with
	 * its free: analysis/reuse.c) */
	__u64 dst;
	__u64 src;
	__u64 stream;
	__u64 ret; /* CUresult */
	/* What ffm's probes had cost this thread before this call, ns, cumulative since the
	 * thread's state was made: per probed call the traps' calibrated price (probe_trap_ns)
	 * and the return program's own run time, and the CPU samples' programs. The difference
	 * between two calls of a thread is the time the probes added between them, which the
	 * program without probes does not spend (analysis/hidden.c). */
	__u64 probe_ns;
	__u32 api_id;
	__u32 nwaits;
	__u32 nslept; /* of the waits inside it, those the thread slept in (FFM_WAIT_SLEPT) */
	__u32 _pad;
};

/*
 * Python frames (bpf/python.bpf.h). In a process user space has checked to run a CPython
 * build it knows (an entry in the pyprocs map, key tgid), each stack key also covers the
 * calling thread's Python frames: per frame the code object's address and the offset in bytes
 * of the current instruction from the start of the code's bytecode. Only the offsets the walk
 * needs, all from CPython's own headers per (major, minor) (symbols/python.c).
 */
#define FFM_PY_FRAMES 32 /* Python frames walked (innermost first) */

struct ffm_py_frame {
	__u64 code;  /* PyCodeObject * */
	__s32 instr; /* byte offset of the current instruction in the code's bytecode */
	__u32 _pad;
};

enum ffm_py_flags {
	FFM_PY_TRUNCATED = 1 << 0, /* deeper than FFM_PY_FRAMES */
	FFM_PY_NO_TSTATE = 1 << 1, /* a Python process, but no thread state for this thread */
};

enum ffm_py_chain {
	FFM_PY_CHAIN_CFRAME = 1,  /* 3.11, 3.12: tstate->cframe->current_frame */
	FFM_PY_CHAIN_CURRENT = 2, /* 3.13: tstate->current_frame */
	FFM_PY_CHAIN_OBJECT = 3,  /* 3.9, 3.10: tstate->frame, a chain of PyFrameObjects on the
				   * heap (f_back), each with its f_lasti, an int */
};

/* Value of the pyprocs map (key: tgid). Offsets in bytes; every one < FFM_PY_TS_READ or
 * FFM_PY_FR_READ where it is read from a copied prefix. */
#define FFM_PY_TS_READ 320 /* most bytes of a PyThreadState read at once (ts_read of a build) */
#define FFM_PY_FR_READ 72  /* bytes of a _PyInterpreterFrame read at once */
#define FFM_PY_FO_READ 112 /* bytes of a PyFrameObject read at once (OBJECT: past f_lasti) */
#define FFM_PY_CO_READ 160 /* bytes of a PyCodeObject read at once: past every co_ offset */

/* Object fields the same in every supported build (Include/object.h, cpython/unicodeobject.h,
 * cpython/bytesobject.h): PyObject.ob_type, PyVarObject.ob_size, a str's length and state,
 * a bytes object's ob_sval. */
#define FFM_PY_OB_TYPE 8
#define FFM_PY_OB_SIZE 16
#define FFM_PY_STR_LENGTH 16
#define FFM_PY_STR_STATE 32
#define FFM_PY_BYTES_SVAL 32

struct ffm_py_layout {
	__u64 interp;        /* address of _PyRuntime.interpreters.main (a PyInterpreterState **) */
	__u16 is_threads;    /* PyInterpreterState: threads.head */
	__u16 ts_next;       /* PyThreadState: next */
	__u16 ts_thread_id;  /* PyThreadState: thread_id (pthread_self(): the thread pointer) */
	__u16 ts_frame;      /* PyThreadState: cframe (CFRAME) or current_frame (CURRENT) */
	__u16 ts_chunk;      /* PyThreadState: datastack_chunk (the _PyStackChunk in use) */
	__u16 ts_top;        /* PyThreadState: datastack_top (end of its used part) */
	__u16 ts_read;       /* bytes of a PyThreadState read: past every ts_ offset, <= FFM_PY_TS_READ */
	__u16 cf_frame;      /* _PyCFrame: current_frame (CFRAME only) */
	__u16 fr_code;       /* _PyInterpreterFrame: f_code / f_executable */
	__u16 fr_previous;
	__u16 fr_instr;      /* prev_instr / instr_ptr; OBJECT: f_lasti */
	__u16 fr_owner;      /* unused where owner_cstack is 0xff */
	__u16 co_code;       /* PyCodeObject: co_code_adaptive (the bytecode); unused by OBJECT */
	__u8 chain;          /* enum ffm_py_chain */
	__u8 owner_cstack;   /* owner value of C-stack shim frames (skipped), 0xff: none */
	__s16 cf_shim;       /* the innermost shim's distance from its _PyCFrame, learned by BPF
			      * (bpf/python.bpf.h); 0 from user space */
	__u8 lasti_shift;    /* OBJECT: f_lasti << lasti_shift is the instruction's byte offset
			      * (3.9 counts bytes: 0; 3.10 code units: 1) */
	__u8 _pad;
	/* What a code record (FFM_REC_PYCODE) copies: the type objects it checks, the
	 * PyCodeObject fields (< FFM_PY_CO_READ), where a compact str's characters start. 3.9
	 * and 3.10 have no co_qualname (co_name stands in) and keep their line table in
	 * co_lnotab (3.9) or co_linetable (3.10), each in its own format. */
	__u64 code_type, str_type, bytes_type;
	__u16 co_filename, co_qualname, co_linetable, co_firstlineno;
	__u16 str_ascii;     /* sizeof(PyASCIIObject): the data of a compact ASCII str */
	__u16 str_compact;   /* sizeof(PyCompactUnicodeObject): the data of other compact strs */
	__u8 _pad2[4];
};

/* FFM_REC_STACK: a stack key's first occurrence in a process. */
struct ffm_rec_stack {
	struct ffm_rec_hdr hdr;
	__u64 stack_key;
	__u64 ip, sp, bp;     /* user registers at the probe (a function entry) */
	__u64 callsite;       /* first return address outside libcuda, 0 if not found */
	__u64 callsite_slot;  /* its stack address */
	__u32 nlib;           /* libcuda return addresses in lib[] */
	__u32 stack_len;      /* bytes of stack[] copied from sp */
	__u64 lib[FFM_LIB_FRAMES];
	__u32 npy;            /* Python frames in py[], innermost first (0: not a Python process) */
	__u32 py_flags;       /* FFM_PY_* */
	struct ffm_py_frame py[FFM_PY_FRAMES];
	__u8 stack[FFM_STACK_BYTES];
};

/*
 * FFM_REC_PYCODE: a copy of one code object that a new stack's Python frames run, sent before
 * that stack's record, once per process, job run and code object (its address and fields).
 * Decoding it later from the process's memory is a race: a short program finalizes its
 * interpreter, freeing its code objects, while user space still unwinds the stacks before.
 * Strings as CPython keeps them: @..._kind bytes per character (1, 2, 4; 0: not a compact str,
 * not copied), @..._chars characters, of which the first @..._bytes bytes were copied (fewer
 * than chars * kind: cut at the buffer). The location table (co_linetable) likewise: its first
 * table_bytes of table_size bytes; its prefix decodes the lines of the code's first units.
 */
#define FFM_PY_FILE_BYTES 1024
#define FFM_PY_QUAL_BYTES 256
#define FFM_PY_TABLE_BYTES 8192

struct ffm_rec_pycode {
	struct ffm_rec_hdr hdr;
	__u64 code;        /* PyCodeObject * */
	__s32 first_line;  /* co_firstlineno */
	__u32 table_size;
	__u32 file_chars, qual_chars;
	__u16 file_bytes, qual_bytes, table_bytes;
	__u8 file_kind, qual_kind;
	__u8 file[FFM_PY_FILE_BYTES];
	__u8 qual[FFM_PY_QUAL_BYTES];
	__u8 table[FFM_PY_TABLE_BYTES];
};

/* FFM_REC_EXEC / FFM_REC_EXIT / FFM_REC_FORK / FFM_REC_RELEASE */
struct ffm_rec_proc {
	struct ffm_rec_hdr hdr;
	__u32 ppid;     /* FORK: parent tgid */
	__u32 exit_code;
	__u64 cgroup_id;
	__u32 uid;
	__u32 flags;    /* FFM_PROC_STOPPED */
	char comm[16];
	/* EXEC: FNV-1a 64 of the first FFM_ARGS_HASH_MAX bytes of the new image's argument block
	 * (argv, NUL-separated), read as the exec completes: with uid and comm, what a rule's
	 * job key is made of, so that a process that execs again at once keeps the key of
	 * the exec that matched (ffm_job_key_exec). 0 elsewhere. */
	__u64 args_hash;
};

#define FFM_ARGS_HASH_MAX 1023

/* FORK of a process whose probes are its own (per-process scope): BPF sent the child SIGSTOP,
 * which lands before it runs any code; user space attaches the child's probes, then sends
 * SIGCONT. */
#define FFM_PROC_STOPPED 1u

/* Key of the linked map (per-process scope): {tgid, dev, ino} once user space has attached the
 * probes of driver file {dev, ino} for process tgid; {tgid, 0, 0} while tgid has any. */
struct ffm_link_key {
	__u32 tgid;
	__u32 _pad;
	__u64 dev;
	__u64 ino;
};

/* FFM_REC_XFER: ts_ns is when the hash was taken. The transfer is the call of this thread that
 * began at call_start_ns (its FFM_REC_CALL has start_ns == call_start_ns). */
enum ffm_xfer_flags {
	FFM_XFER_FAILED = 1 << 0,   /* bytes unreadable: hash is 0 and means nothing */
	FFM_XFER_DEFERRED = 1 << 1, /* async DtoH hashed at the sync that covered it */
};

struct ffm_rec_xfer {
	struct ffm_rec_hdr hdr;
	__u64 call_start_ns;
	__u64 hash; /* bpf/ffm_hash.h over [src, src+bytes) (HtoD) or [dst, dst+bytes) (DtoH) */
	__u64 dst;
	__u64 src;
	__u64 bytes;
	__u32 dir; /* enum ffm_rec_dir */
	__u32 flags;
};

/* FFM_REC_RANGE: sent at the entry of a DtoH copy, before any byte moves, so user space can arm
 * a watchpoint on the destination while the copy and its synchronization run. stack_key is the
 * key the call's FFM_REC_CALL will carry (it may not be known yet at the first occurrence). */
struct ffm_rec_range {
	struct ffm_rec_hdr hdr;
	__u64 call_start_ns;
	__u64 lo;
	__u64 bytes;
	__u64 stack_key;
	__u32 api_id;
	__u32 _pad;
};

/* FFM_REC_HIT: a hardware watchpoint fired in a tracked thread outside every driver call, the
 * first time since that thread's last synchronization. ip is the instruction *after* the access
 * (x86 data breakpoints trap after it), addr the watched address. A new stack_key is preceded by
 * its FFM_REC_STACK, as for the other records. */
struct ffm_rec_hit {
	struct ffm_rec_hdr hdr;
	__u64 ip;
	__u64 addr;
	__u64 stack_key;
	/* When the return probe of the thread's last synchronization finished (0: unknown). The
	 * sync's own record is stamped as that probe begins; its reads of user memory after that
	 * (the call site's stack words, stage 3's hash of a destination) trap too when they touch
	 * a watched word, so the first use is timed from here. */
	__u64 sync_done_ns;
};

/* FFM_REC_FAULT (stage 4): a user page fault of a thread whose page faults user space samples
 * (a perf software event, PERF_COUNT_SW_PAGE_FAULTS, period 1: opened only on the driver-calling
 * threads of a process that allocated managed memory), outside the driver's calls, inside one of
 * the process's managed ranges in the managed map. addr: the faulting address; ip: the faulting
 * instruction. */
#define FFM_MANAGED_RANGES 16
/* The managed map (hash, tgid -> this): the process's managed allocations [lo, hi), at most
 * FFM_MANAGED_RANGES of them (the newest; unused slots 0, 0), set by user space. */
struct ffm_managed {
	__u64 lo[FFM_MANAGED_RANGES];
	__u64 hi[FFM_MANAGED_RANGES];
};
struct ffm_rec_fault {
	struct ffm_rec_hdr hdr;
	__u64 ip;
	__u64 addr;
};

/* FFM_REC_MAP: a tracked process is mapping (at mmap's entry, before the mapping exists) an
 * executable mapping of a file named libcuda.so* that is not in the drivers map. With stopped
 * set, BPF has sent the process SIGSTOP (it stops when the mmap returns, before any code of
 * that file runs): user space makes the driver ready, adds {dev, ino} to the drivers map and
 * sends SIGCONT. Without it (the signal could not be sent) the record is only a notice. */
struct ffm_rec_map {
	struct ffm_rec_hdr hdr;
	__u64 dev; /* kernel encoding, as struct ffm_exe_key */
	__u64 ino;
	__u32 stopped;
	__u32 flags;   /* FFM_MAP_PARENT_WAITS */
};

/* FFM_REC_SAMPLE: the thread was on a CPU for period_ns up to ts_ns (task-clock, frequency
 * mode) and was in @state then. stack_key: its Python frames only (no native frames: the sample
 * may interrupt anything, the kernel included); its FFM_REC_STACK has nlib 0 and no stack
 * bytes. */
enum ffm_sample_state {
	FFM_SAMPLE_USER = 0, /* outside every probed driver call */
	FFM_SAMPLE_CALL = 1, /* inside a probed driver call, not waiting */
	FFM_SAMPLE_WAIT = 2, /* inside the internal wait function */
	FFM_SAMPLE__MAX = 3,
};

struct ffm_rec_sample {
	struct ffm_rec_hdr hdr;
	__u64 stack_key;
	__u64 period_ns;
	__u32 state;
	__u32 _pad;
};

/* Not stopped: its parent was waiting for stopped children (waitpid with WUNTRACED, waitid
 * with WSTOPPED: a shell with job control, su, runuser, sudo), which would have seen the stop. */
#define FFM_MAP_PARENT_WAITS 1u

#endif /* FFM_BPF_ABI_H */
