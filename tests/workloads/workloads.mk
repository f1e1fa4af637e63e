# Workloads with planted problems (tests/workloads/README.md). Included by the top-level Makefile
# after tests/fakecuda/fakecuda.mk, so $(FAKECUDA) is known here.
#
# They are built with their own flags, not $(CFLAGS): -O2 -g for the DWARF line info ffm reports,
# and -fomit-frame-pointer because HPC applications are built that way and ffm must unwind them
# with CFI (the top-level CFLAGS force frame pointers for ffm's own code).
#
# They link against the simulated driver's libcuda.so.1 when tests/fakecuda provides one, else
# against the CUDA toolkit's stub. Either way the binary only records NEEDED libcuda.so.1 (no
# rpath): LD_LIBRARY_PATH=$(O)/fakecuda picks the simulated driver, and on a GPU node the real
# driver is found by the normal loader path.

WL_SRC   := tests/workloads
WL_OUT   := $(O)/workloads
WL_NAMES := unnecessary_sync misplaced_sync free_in_loop dup_transfer pageable_async \
	    managed_memset sequence control hang host_read threads sync_rate coverage \
	    temp_buffer managed_host
WORKLOADS := $(addprefix $(WL_OUT)/,$(WL_NAMES))

# Sources per program: <name>.c, except the two-file sequence workload.
WL_SRCS_sequence := seq_main.c seq_helpers.c
wl_srcs = $(or $(WL_SRCS_$(1)),$(1).c)

WL_CFLAGS := -O2 -g -fomit-frame-pointer -std=gnu11 $(WARN) -D_GNU_SOURCE
WL_CPPFLAGS := -I$(WL_SRC) -I$(WL_OUT) -I$(CUDA_INC)

CUDA_STUBS ?= $(dir $(CUDA_INC:/=))lib64/stubs
WL_FAKE_LIB := $(filter %/libcuda.so.1,$(FAKECUDA))
ifneq ($(WL_FAKE_LIB),)
WL_LDLIBS := -L$(dir $(WL_FAKE_LIB)) -l:libcuda.so.1
else
WL_LDLIBS := -L$(CUDA_STUBS) -lcuda
endif
WL_LDLIBS += -lpthread

# The embedded PTX: kernels.ptx turned into the body of one C string literal.
$(WL_OUT)/kernels_ptx.h: $(WL_SRC)/kernels.ptx
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@

$(WL_OUT)/obj/%.o: $(WL_SRC)/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(WL_CPPFLAGS) $(WL_CFLAGS) -MMD -MP -c $< -o $@

$(WL_OUT)/obj/wl.o: $(WL_OUT)/kernels_ptx.h

define wl_template
$(WL_OUT)/$(1): $(addprefix $(WL_OUT)/obj/,$(patsubst %.c,%.o,$(call wl_srcs,$(1)))) \
		$(WL_OUT)/obj/wl.o | $(FAKECUDA)
	$$(call msg,LINK,$$@)
	$$(Q)$$(CC) -o $$@ $$(filter %.o,$$^) $$(WL_LDLIBS)
endef
$(foreach w,$(WL_NAMES),$(eval $(call wl_template,$(w))))

# C++ workloads: a template whose instantiations must fold to one function in the report.
CXX ?= g++
WL_CXX_NAMES := templated lib_reduce
WORKLOADS += $(addprefix $(WL_OUT)/,$(WL_CXX_NAMES))
WL_CXXFLAGS := -O2 -g -fomit-frame-pointer -std=gnu++17 -Wall -Wextra -D_GNU_SOURCE

$(WL_OUT)/obj/%.o: $(WL_SRC)/%.cpp
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(WL_CPPFLAGS) $(WL_CXXFLAGS) -MMD -MP -c $< -o $@

$(WL_OUT)/obj/lib_reduce.o: WL_CPPFLAGS += -I$(WL_SRC)/toolkit/include

$(addprefix $(WL_OUT)/,$(WL_CXX_NAMES)): $(WL_OUT)/%: $(WL_OUT)/obj/%.o $(WL_OUT)/obj/wl.o | $(FAKECUDA)
	$(call msg,LINK,$@)
	$(Q)$(CXX) -o $@ $(filter %.o,$^) $(WL_LDLIBS)

workloads: $(WORKLOADS)

# Regenerates the checked-in PTX; needs nvcc, so it runs only when asked. The .version line is
# lowered from what nvcc 13 writes (9.0, driver r580+) to 7.0 (CUDA 11.0 drivers): the kernels use
# nothing newer, and a GPU node with an older driver must still JIT them.
NVCC ?= /usr/local/cuda/bin/nvcc
ptx:
	$(call msg,NVCC,$(WL_SRC)/kernels.ptx)
	$(Q)$(NVCC) -ptx -arch=compute_75 $(WL_SRC)/kernels.cu -o $(WL_SRC)/kernels.ptx.tmp
	$(Q)sed -i 's/^\.version .*/.version 7.0/' $(WL_SRC)/kernels.ptx.tmp
	$(Q)mv $(WL_SRC)/kernels.ptx.tmp $(WL_SRC)/kernels.ptx

.PHONY: workloads ptx
