# Simulated driver: $(O)/fakecuda/libcuda.so.1, stripped like the real libcuda (no .symtab,
# .eh_frame/.eh_frame_hdr and a GNU build-id kept), and the same link unstripped, whose .symtab
# tells the tests where the internal wait function is. README.md says what is simulated.
#
# Code generation is part of the contract (docs/DESIGN.md, "Facts measured on the real GPU
# machine"), and it is why this is built with clang: GCC 12 drops the frame pointer of leaf
# functions even with -fno-omit-frame-pointer, and it names IPA clones fn.isra.0/fn.part.0.
#   -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fcf-protection=none
#                                      every function starts push %rbp; mov %rsp,%rbp
#                                      (no endbr64: a probe on it is single-stepped, 20x slower)
#   -mllvm -enable-shrink-wrap=false   ... even those with an early return
#   -fno-optimize-sibling-calls        no tail calls: an API function and the wait function stay
#                                      on the stack while it waits
#   -fvisibility=hidden + libcuda.map  only the cu* API is exported
#   -nostartfiles                      no crtbegin/crtend functions (frame_dummy, _init, ...):
#                                      every function in the file is ours and has the prologue
FAKECUDA_DIR  := $(O)/fakecuda
FAKECUDA_SRCS := $(filter-out tests/fakecuda/test_%.c,$(wildcard tests/fakecuda/*.c))
FAKECUDA_OBJS := $(patsubst tests/fakecuda/%.c,$(FAKECUDA_DIR)/%.o,$(FAKECUDA_SRCS))
FAKECUDA_MAP  := tests/fakecuda/libcuda.map
FAKECUDA_STRIP ?= strip

FAKECUDA_CC     ?= $(CLANG)
FAKECUDA_CFLAGS := -std=gnu11 -fPIC -O2 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer \
	-fcf-protection=none -mllvm -enable-shrink-wrap=false -fno-optimize-sibling-calls \
	-fvisibility=hidden -fno-stack-protector -pthread $(WARN) -D_GNU_SOURCE \
	-D__CUDA_API_VERSION_INTERNAL -I$(CUDA_INC)

FAKECUDA := $(FAKECUDA_DIR)/libcuda.so.1 $(FAKECUDA_DIR)/libcuda.so.1.unstripped \
	$(FAKECUDA_DIR)/libcuda.so

$(FAKECUDA_DIR)/%.o: tests/fakecuda/%.c tests/fakecuda/fakecuda.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(FAKECUDA_CC) $(FAKECUDA_CFLAGS) -MMD -MP -c $< -o $@

$(FAKECUDA_DIR)/libcuda.so.1.unstripped: $(FAKECUDA_OBJS) $(FAKECUDA_MAP)
	$(call msg,LINK,$@)
	$(Q)$(FAKECUDA_CC) -shared -nostartfiles -pthread -Wl,-soname,libcuda.so.1 -Wl,--build-id \
		-Wl,--version-script=$(FAKECUDA_MAP) -Wl,--no-undefined -Wl,-z,noexecstack \
		-o $@ $(FAKECUDA_OBJS)

$(FAKECUDA_DIR)/libcuda.so.1: $(FAKECUDA_DIR)/libcuda.so.1.unstripped
	$(call msg,STRIP,$@)
	$(Q)$(FAKECUDA_STRIP) --strip-all -o $@ $<

$(FAKECUDA_DIR)/libcuda.so: | $(FAKECUDA_DIR)/libcuda.so.1
	$(Q)ln -sf libcuda.so.1 $@

# The tests include cuda.h and need the library at run time.
FAKECUDA_TESTS := $(patsubst tests/%.c,$(O)/tests/%,$(wildcard tests/fakecuda/test_*.c))
$(patsubst %,%.o,$(FAKECUDA_TESTS)): FFM_CPPFLAGS += -I$(CUDA_INC)
$(FAKECUDA_TESTS): | $(FAKECUDA)
