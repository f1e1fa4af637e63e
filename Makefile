# ffm — top-level Makefile.
#
#   make            BPF objects + skeletons, ffmd, ffmctl, the simulated driver, workloads, tests
#   make test       build and run every test (BPF tests skip, saying why, where BPF is not allowed)
#   make demo       profile a bundled workload (simulated driver when there is no GPU)
#   make deps       install the Debian packages the build and the tests need (idempotent)
#   make vmlinux    regenerate bpf/vmlinux.h from the running kernel's BTF (checked in)
#   make man        the manual pages ($(O)/man/, from docs/man/*.scd; needs scdoc)
#   make install    PREFIX=/usr/local DESTDIR= : binaries, systemd unit, default config, manual
#                   pages, bash completion, the documentation; `make uninstall` removes them
#   make STATIC=1   ffmd/ffmctl that run on a machine without the -dev packages (the GPU nodes)
#   make fuzz       libFuzzer targets for the control protocol (tests/proto/proto.mk)
#   make sanitize   build with ASan+UBSan into $(O) (default build-san/) and run every test;
#                   any sanitizer report fails it (SANITIZE=1 only builds that way)
#   make V=1        show the commands
#
# CFLAGS, CPPFLAGS and LDFLAGS on the command line only add (optimisation, debug, paths): the
# flags the build needs are kept in FFM_CFLAGS, FFM_CPPFLAGS and FFM_LDFLAGS, so that
# `make CFLAGS=-O0` still builds gnu11 with frame pointers, the warnings and -D_GNU_SOURCE.
#
# Objects go out of tree into $(O) (default build/). Each library directory (common/, symbols/,
# store/, stages/, analysis/, daemon/) is built from all of its *.c files into $(O)/lib<dir>.a;
# a directory with special needs brings its own <dir>.mk fragment, included below.

# `make sanitize` builds with SANITIZE=1, into build-san/ unless O is given.
ifneq ($(filter sanitize,$(MAKECMDGOALS)),)
O        ?= build-san
SANITIZE := 1
endif
O        ?= build
V        ?= 0
STATIC   ?= 0
PREFIX   ?= /usr/local
DESTDIR  ?=
CUDA_INC ?= /usr/local/cuda/include

CC       ?= gcc
CLANG    ?= clang
BPFTOOL  ?= bpftool
LLVM_STRIP ?= llvm-strip

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.DELETE_ON_ERROR:
.SUFFIXES:
.SECONDARY:

# -Wextra without two of its warnings: callbacks keep parameters they do not use, and tables
# (daemon/apis.c) leave trailing fields of a row to zero on purpose.
WARN     := -Wall -Wextra -Werror=undef -Wno-unused-parameter -Wno-missing-field-initializers
CFLAGS   ?= -O2 -g
CPPFLAGS ?=
LDFLAGS  ?=
FFM_CFLAGS   := -std=gnu11 -fno-omit-frame-pointer $(WARN) -D_GNU_SOURCE
# ffm's release, as --version says it (daemon/version.h).
VERSION  ?= 0.4.0
FFM_CPPFLAGS := -I. -I$(O) -DFFM_VERSION='"$(VERSION)"'
FFM_LDFLAGS  :=

# SANITIZE=1 (what `make sanitize` sets): ffm's own code (libraries, ffmd, ffmctl,
# ffm-calib-probe, the test programs) with ASan and UBSan, UB fatal. Not the BPF objects
# (clang -target bpf), not the simulated driver tests/fakecuda nor the workloads: they keep their
# own flags, because their code generation is part of what is tested (prologues, frame
# pointers, CFI-only unwinding), and because a sanitized shared library cannot be loaded into
# the unsanitized workloads (the __asan_* symbols come only with a sanitized main program).
# GCC links UBSan as its own runtime beside ASan's; linked as a shared library it ignores
# UBSAN_OPTIONS=log_path (and writes to stderr only), linked statically it honours it.
SANITIZE ?= 0
SAN_FLAGS :=
SAN_LDFLAGS :=
ifeq ($(SANITIZE),1)
ifeq ($(STATIC),1)
$(error SANITIZE=1 cannot be combined with STATIC=1: the sanitizer runtimes do not link -static)
endif
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined
SAN_LDFLAGS := $(SAN_FLAGS) $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null)),,-static-libubsan)
endif
# Every object depends on a stamp of SAN_FLAGS, so that switching an output directory between
# SANITIZE=0 and 1 rebuilds it rather than mixing instrumented and plain objects. A plain
# build's first stamp is dated 1970: an existing build directory is not rebuilt for it.
SAN_STAMP := $(shell mkdir -p $(O) && f=$(O)/.sanitize && \
	       if [ ! -e $$f ] && [ -z '$(SAN_FLAGS)' ]; then echo > $$f && touch -d @0 $$f; \
	       elif ! echo '$(SAN_FLAGS)' | cmp -s - $$f; then echo '$(SAN_FLAGS)' > $$f; fi && \
	       echo $$f)

# What a compile and a link of ffm's own code use: the user's variables between ours.
ALL_CFLAGS  = $(FFM_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(FFM_CFLAGS) $(SAN_FLAGS)
ALL_LDFLAGS = $(FFM_LDFLAGS) $(LDFLAGS) $(SAN_LDFLAGS)

# libsystemd has no static archive: the static build speaks the documented sd_notify datagram
# protocol itself (daemon/log.c), the dynamic build uses libsystemd.
ifeq ($(STATIC),1)
FFM_LDFLAGS  += -static
FFM_CPPFLAGS += -DFFM_STATIC=1
SYS_LIBS := -lbpf -ldw -lelf -lsqlite3 -ljansson -lz -lzstd -llzma -lbz2 -lstdc++ -lm -lpthread -ldl
else
FFM_CPPFLAGS += -DFFM_HAVE_LIBSYSTEMD=1
SYS_LIBS := -lbpf -ldw -lelf -lsqlite3 -ljansson -lsystemd -lstdc++ -lz -lm -lpthread -ldl
endif

ARCH     := x86
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I. -Ibpf -Wall -Wno-unused-function

all:

# ---------------------------------------------------------------------------------------------
# Libraries: every *.c in the directory.
LIBDIRS  := common symbols stages store analysis daemon
define lib_template
$(1)_SRCS := $$(filter-out $(1)/ffmd.c,$$(wildcard $(1)/*.c))
$(1)_OBJS := $$(patsubst %.c,$(O)/%.o,$$($(1)_SRCS))
$(O)/lib$(1).a: $$($(1)_OBJS)
	$$(call msg,AR,$$@)
	$$(Q)rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach d,$(LIBDIRS),$(eval $(call lib_template,$(d))))

# Link order, each library before the ones it uses: daemon uses analysis, store, stages,
# symbols; analysis uses stages, store, symbols; stages uses store (the plan of a key, from
# its store); every one may use common.
FFM_LIBS := $(O)/libdaemon.a $(O)/libanalysis.a $(O)/libstages.a $(O)/libstore.a \
	    $(O)/libsymbols.a $(O)/libcommon.a

# ---------------------------------------------------------------------------------------------
# BPF: bpf/X.bpf.c -> $(O)/bpf/X.bpfo -> $(O)/bpf/X.skel.h (own suffix: the generic
# $(O)/%.o rule below must not match BPF objects).
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(O)/bpf/%.bpfo,$(BPF_SRCS))
BPF_SKELS := $(patsubst bpf/%.bpf.c,$(O)/bpf/%.skel.h,$(BPF_SRCS))

$(O)/bpf/%.tmp.bpfo: bpf/%.bpf.c $(wildcard bpf/*.h) | $(O)/bpf
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(O)/bpf/%.bpfo: $(O)/bpf/%.tmp.bpfo
	$(call msg,GEN-OBJ,$@)
	$(Q)$(BPFTOOL) gen object $@ $<

$(O)/bpf/%.skel.h: $(O)/bpf/%.bpfo
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@.tmp && mv $@.tmp $@

vmlinux:
	$(call msg,GEN,bpf/vmlinux.h)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > bpf/vmlinux.h

# C objects; the daemon includes the skeletons.
$(O)/%.o: %.c $(SAN_STAMP) | $(BPF_SKELS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(O)/bpf:
	$(Q)mkdir -p $@

# ---------------------------------------------------------------------------------------------
# Programs
FFMD_OBJS   := $(O)/daemon/ffmd.o
FFMCTL_SRCS := $(wildcard cli/*.c)
FFMCTL_OBJS := $(patsubst %.c,$(O)/%.o,$(FFMCTL_SRCS))

$(O)/ffmd: $(FFMD_OBJS) $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $(FFMD_OBJS) $(FFM_LIBS) $(SYS_LIBS)

$(O)/ffmctl: $(FFMCTL_OBJS) $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $(FFMCTL_OBJS) $(FFM_LIBS) $(SYS_LIBS)

PROGRAMS := $(if $(wildcard daemon/ffmd.c),$(O)/ffmd) $(if $(FFMCTL_SRCS),$(O)/ffmctl)

# ---------------------------------------------------------------------------------------------
# Simulated driver, workloads, tests: their own fragments.
# Optional per-directory fragments (e.g. symbols/symbols.mk) add programs to EXTRA_PROGS.
EXTRA_PROGS :=
include $(wildcard bpf/*.mk common/*.mk symbols/*.mk stages/*.mk store/*.mk analysis/*.mk \
		    daemon/*.mk cli/*.mk)
include tests/proto/proto.mk
include tests/fakecuda/fakecuda.mk
include tests/workloads/workloads.mk
include tests/tests.mk

all: $(BPF_SKELS) $(PROGRAMS) $(EXTRA_PROGS) $(FAKECUDA) $(WORKLOADS) $(TEST_BINS)

test: all man
	$(Q)O=$(O) tests/run-tests.sh

# `make sanitize [O=dir]`: everything built with SANITIZE=1 into its own directory (build-san/
# unless O is given), then every test, with FFM_SANITIZE=1: the judgments of times and of
# estimates made from times are skipped there, saying so (tests/ops/lib.sh, notok_timing),
# since the instrumented ffmd runs 2-3x slower beside the plain workloads; `make test` judges
# them. .ci/run runs both. A finding stops the process that has it (halt_on_error;
# -fno-sanitize-recover makes UB fatal), so that test fails. The reports go to files in
# $(O)/san-reports (asan|ubsan.<program>.<pid>), printed at the end, and any file there fails
# the target: a finding in a process whose exit status or stderr no test looks at (ffmd at
# shutdown, a child of a shell test) still counts.
# LeakSanitizer is on. It cannot check a process that is ptraced when it exits ("does not work
# under ptrace", and it says so on stderr only): ffmd, ffmctl and the tests are never traced,
# and ffm-calib-probe, whose stacks calibration samples with ptrace (libdwfl), is detached after
# each sample, before QUIT. A test binary one of whose cases FAIL or SKIP cut short is not
# leak-checked (tests/testutil.c): that case's allocations are the test's, not leaks.
# detect_stack_use_after_return stays off: its fake frames live on the heap, and the BPF tests
# walk the test programs' own stacks by frame pointer.
SAN_REPORTS  = $(abspath $(O))/san-reports
SAN_ASAN_OPTIONS  = halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2:log_path=$(SAN_REPORTS)/asan:log_exe_name=1
SAN_UBSAN_OPTIONS = halt_on_error=1:print_stacktrace=1:log_path=$(SAN_REPORTS)/ubsan:log_exe_name=1
sanitize: all man
	$(Q)rm -rf $(SAN_REPORTS) && mkdir -p $(SAN_REPORTS)
	$(Q)O=$(O) ASAN_OPTIONS=$(SAN_ASAN_OPTIONS) UBSAN_OPTIONS=$(SAN_UBSAN_OPTIONS) \
		FFM_SANITIZE=1 tests/run-tests.sh; rc=$$?; \
	n=0; for f in $(SAN_REPORTS)/*; do [ -f "$$f" ] || continue; rc=1; n=$$((n + 1)); \
		echo "sanitizer report $$f:"; cat "$$f"; done; \
	[ $$n = 0 ] || echo "sanitize: $$n sanitizer report(s) in $(SAN_REPORTS)"; \
	exit $$rc

# The README's main job: profile a bundled workload through every stage. The real driver is
# used where an NVIDIA GPU is present, else the simulated one. Needs root (BPF, uprobes).
DEMO_WORKLOAD ?= sequence
demo: all
	@if [ -e /dev/nvidiactl ] && ldconfig -p | grep -q 'libcuda\.so\.1 '; then llp=; \
		echo "demo: NVIDIA GPU found, using the system's libcuda"; \
	else llp=$(O)/fakecuda; echo "demo: no GPU, using the simulated driver ($(O)/fakecuda)"; fi; \
	LD_LIBRARY_PATH=$$llp $(O)/ffmctl --state-dir $(O)/state profile --stages 1-4 -- \
		$(O)/workloads/$(DEMO_WORKLOAD)

# ---------------------------------------------------------------------------------------------
# Dependencies. The CUDA toolkit's headers (cuda.h) come from the CUDA toolkit in
# /usr/local/cuda, which Debian does not package; the rest are Debian packages.
DEB_PKGS := make gcc g++ clang llvm libbpf-dev bpftool libelf-dev libdw-dev libsqlite3-dev \
	    libjansson-dev libsystemd-dev zlib1g-dev libzstd-dev liblzma-dev libbz2-dev pkg-config \
	    sqlite3 systemd python3 python3-jsonschema binutils scdoc man-db strace \
	    slurmctld slurmd slurm-client munge
deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
		grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "deps: all Debian packages present"; fi
	@test -f $(CUDA_INC)/cuda.h || { echo "deps: $(CUDA_INC)/cuda.h not found: install the CUDA toolkit or set CUDA_INC=" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# The programs look for ffm-calib-probe next to themselves, then in the libexec directory of
# the PREFIX they were built for; a stamp rebuilds the two objects that hold it when PREFIX
# changes, so `make install PREFIX=/usr` never installs binaries that look in /usr/local.
LIBEXECDIR := $(PREFIX)/libexec/ffm
$(O)/daemon/driver_setup.o: FFM_CPPFLAGS += -DFFM_LIBEXECDIR='"$(LIBEXECDIR)"'
# (Written while the Makefile is read: .SECONDARY would keep a stamp rule from running.)
PREFIX_STAMP := $(shell mkdir -p $(O) && { echo '$(LIBEXECDIR)' | cmp -s - $(O)/.prefix || \
		  echo '$(LIBEXECDIR)' > $(O)/.prefix; } && echo $(O)/.prefix)
$(O)/daemon/driver_setup.o $(O)/cli/calibrate.o: $(PREFIX_STAMP)

# The manual pages: docs/man/NAME.SECTION.scd -> $(O)/man/NAME.SECTION. Their own target, so
# that building the programs (e.g. STATIC=1 for the GPU nodes) never needs scdoc.
MAN_SRCS  := $(wildcard docs/man/*.scd)
MAN_PAGES := $(patsubst docs/man/%.scd,$(O)/man/%,$(MAN_SRCS))
SCDOC     ?= scdoc
$(O)/man/%: docs/man/%.scd
	$(call msg,SCDOC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)command -v $(SCDOC) >/dev/null || { echo "man: $(SCDOC) not found (make deps installs it)" >&2; exit 1; }
	$(Q)$(SCDOC) < $< > $@.tmp && mv $@.tmp $@
man: $(MAN_PAGES)

# The systemd unit, its paths those of PREFIX.
$(O)/ffmd.service: systemd/ffmd.service.in $(PREFIX_STAMP)
	$(call msg,GEN,$@)
	$(Q)sed 's|@PREFIX@|$(PREFIX)|g' $< > $@.tmp && mv $@.tmp $@

# What `make install` puts where, MODE:SOURCE:DESTINATION (under DESTDIR) each, and what
# `make uninstall` removes. The documentation keeps the source tree's layout, so that the
# README's links (docs/..., systemd/README.md) work where it is installed.
DOCDIR   := $(PREFIX)/share/doc/ffm
DOC_FILES := README.md $(wildcard docs/*.md) systemd/README.md contrib/slurm/README.md \
	     tests/fakecuda/README.md tests/workloads/README.md
INSTALL_LIST = 0755:$(O)/ffmd:$(PREFIX)/sbin/ffmd \
	       0755:$(O)/ffmctl:$(PREFIX)/bin/ffmctl \
	       0755:$(O)/ffm-calib-probe:$(LIBEXECDIR)/ffm-calib-probe \
	       0644:$(O)/ffmd.service:$(PREFIX)/lib/systemd/system/ffmd.service \
	       0755:contrib/slurm/prolog.sh:$(PREFIX)/share/ffm/slurm/prolog.sh \
	       0755:contrib/slurm/epilog.sh:$(PREFIX)/share/ffm/slurm/epilog.sh \
	       0644:contrib/bash-completion/ffmctl:$(PREFIX)/share/bash-completion/completions/ffmctl \
	       $(foreach m,$(MAN_PAGES),0644:$(m):$(PREFIX)/share/man/man$(subst .,,$(suffix $(m)))/$(notdir $(m))) \
	       $(foreach f,$(DOC_FILES),0644:$(f):$(DOCDIR)/$(f))
# The default config, installed only where none is, and removed only as installed.
CONF := /etc/ffm/ffmd.conf

install: all man $(O)/ffmd.service
	$(Q)for e in $(INSTALL_LIST); do \
		mode=$${e%%:*} rest=$${e#*:}; src=$${rest%%:*} dst=$${rest#*:}; \
		install -D -m $$mode "$$src" "$(DESTDIR)$$dst" || exit 1; \
	done
	$(Q)if [ ! -f $(DESTDIR)$(CONF) ]; then install -D -m 0644 systemd/ffmd.conf $(DESTDIR)$(CONF); fi

# Every installed file, then the directories that are left empty: ffm's own always, the
# shared ones (bin/, share/man/man1/, ...) only inside a DESTDIR, never DESTDIR itself.
uninstall:
	$(Q)for e in $(INSTALL_LIST); do dst=$${e#*:}; rm -f "$(DESTDIR)$${dst#*:}"; done
	$(Q)if cmp -s systemd/ffmd.conf $(DESTDIR)$(CONF); then rm -f $(DESTDIR)$(CONF); \
	elif [ -f $(DESTDIR)$(CONF) ]; then echo "uninstall: keeping $(DESTDIR)$(CONF) (changed)"; fi
	$(Q)for d in $(sort $(foreach e,$(INSTALL_LIST),$(dir $(lastword $(subst :, ,$(e)))))) /etc/ffm/; do \
		d=$(DESTDIR)$${d%/}; \
		while [ "$$d" != "$(DESTDIR)" ] && [ "$$d" != / ] && [ -d "$$d" ] && \
		      { [ -n "$(DESTDIR)" ] || case $$d in *ffm*) true;; *) false;; esac; } && \
		      rmdir "$$d" 2>/dev/null; do d=$${d%/*}; [ -n "$$d" ] || break; done; \
	done

clean:
	rm -rf $(O)

.PHONY: all test sanitize demo deps vmlinux man install uninstall clean

-include $(shell find $(O) -name '*.d' 2>/dev/null)
