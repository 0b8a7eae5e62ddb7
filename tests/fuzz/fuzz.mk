# SPDX-License-Identifier: MIT
# Fuzz harnesses (tests/fuzz/README.md), included by the top-level Makefile.
#
#   make fuzz-replay   replays every corpus with plain ASan+UBSan programs
#                      (no libFuzzer, a few seconds; part of `make check`)
#   make fuzz          runs each libFuzzer harness FUZZ_SECONDS, one at a
#                      time, merges new inputs into tests/fuzz/corpus/<name>/
#                      and saves every crash there too
#   make fuzz-seeds    regenerates the hand-made seeds (tests/fuzz/make-seeds)
#   make fuzz-coverage line coverage of the tested modules by each corpus
#                      (clang source coverage through the replay programs)
#
# Each harness is built twice from the same source: with clang and
# -fsanitize=fuzzer against objects instrumented for coverage, and with
# $(CC) and replay_main.c.  Both sets of objects live under $(BUILD)/fuzz/,
# apart from the normal build, because their flags differ.

FUZZ_NAMES   := proto maps elf server select policy cfi
FUZZ_DIR     := tests/fuzz
FUZZ_OUT     := $(BUILD)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_CLANG   ?= clang

# The modules each harness tests (fuzz_server replaces action.c and log.c
# with stubs of its own: it must never act on a real process).
FUZZ_SRC_proto  := proto/proto.c proto/names.c
FUZZ_SRC_maps   := daemon/node/procfs.c daemon/node/procfs_parse.c
FUZZ_SRC_elf    := daemon/node/elf.c
FUZZ_SRC_server := daemon/serve/conn.c daemon/request/queue.c proto/proto.c proto/names.c
FUZZ_SRC_select := daemon/node/select.c
FUZZ_SRC_cfi    := daemon/node/cfi.c
# policy.c's matching reads select.c and facts_needed() from facts.c; inih is linked.
FUZZ_SRC_policy := daemon/watch/policy.c daemon/node/select.c daemon/node/facts.c daemon/node/procfs.c daemon/node/procfs_parse.c

FUZZ_LIBS_policy := $(shell $(PKG_CONFIG) --libs inih 2>/dev/null)

# Longest input libFuzzer may make; every corpus file stays under 64 KiB.
FUZZ_MAXLEN_proto  := 20000
FUZZ_MAXLEN_maps   := 16384
FUZZ_MAXLEN_elf    := 65535
FUZZ_MAXLEN_server := 32768
FUZZ_MAXLEN_select := 8192
FUZZ_MAXLEN_cfi    := 8192
FUZZ_MAXLEN_policy := 16384

# The project's flags, but built for finding bugs: _FORTIFY_SOURCE and ASan
# disagree about some interceptors, and -O1 keeps reports readable.
fuzz_comma := ,
fuzz_empty :=
fuzz_space := $(fuzz_empty) $(fuzz_empty)
FUZZ_CFLAGS := $(filter-out -D_FORTIFY_SOURCE=2 -O2 -O3 -fsanitize=address$(fuzz_comma)undefined,$(ALL_CFLAGS)) \
               -U_FORTIFY_SOURCE -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=all \
               $(DAEMON_CFLAGS)
FUZZ_SAN    := -fsanitize=address,undefined
# clang does not know every gcc warning the project names.
FUZZ_LF_CFLAGS := $(FUZZ_CFLAGS) -Wno-unknown-warning-option -fsanitize=fuzzer-no-link,address,undefined

FUZZ_LF_BIN     := $(patsubst %,$(FUZZ_OUT)/libfuzzer/fuzz_%,$(FUZZ_NAMES))
FUZZ_REPLAY_BIN := $(patsubst %,$(FUZZ_OUT)/replay/fuzz_%,$(FUZZ_NAMES))

# Abort on the first report, so a finding fails the run; leaks count too.
FUZZ_ENV := ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:allocator_may_return_null=1 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: fuzz fuzz-replay fuzz-build fuzz-seeds fuzz-coverage

$(FUZZ_OUT)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) $(FUZZ_LF_CFLAGS) -c -o $@ $<

$(FUZZ_OUT)/replay-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -c -o $@ $<

FUZZ_COV_FLAGS := -fprofile-instr-generate -fcoverage-mapping
$(FUZZ_OUT)/cov-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) $(FUZZ_CFLAGS) -Wno-unknown-warning-option $(FUZZ_COV_FLAGS) -c -o $@ $<

define FUZZ_HARNESS
$(FUZZ_OUT)/libfuzzer/fuzz_$(1): $(FUZZ_OUT)/obj/$(FUZZ_DIR)/fuzz_$(1).o \
		$(patsubst %.c,$(FUZZ_OUT)/obj/%.o,$(FUZZ_SRC_$(1)))
	@mkdir -p $$(dir $$@)
	$(FUZZ_CLANG) -fsanitize=fuzzer,address,undefined -o $$@ $$^ $(FUZZ_LIBS_$(1))

$(FUZZ_OUT)/replay/fuzz_$(1): $(FUZZ_OUT)/replay-obj/$(FUZZ_DIR)/fuzz_$(1).o \
		$(FUZZ_OUT)/replay-obj/$(FUZZ_DIR)/replay_main.o \
		$(patsubst %.c,$(FUZZ_OUT)/replay-obj/%.o,$(FUZZ_SRC_$(1)))
	@mkdir -p $$(dir $$@)
	$(CC) $(FUZZ_SAN) -o $$@ $$^ $(FUZZ_LIBS_$(1))

$(FUZZ_OUT)/cov/fuzz_$(1): $(FUZZ_OUT)/cov-obj/$(FUZZ_DIR)/fuzz_$(1).o \
		$(FUZZ_OUT)/cov-obj/$(FUZZ_DIR)/replay_main.o \
		$(patsubst %.c,$(FUZZ_OUT)/cov-obj/%.o,$(FUZZ_SRC_$(1)))
	@mkdir -p $$(dir $$@)
	$(FUZZ_CLANG) $(FUZZ_COV_FLAGS) -o $$@ $$^ $(FUZZ_LIBS_$(1))
endef
$(foreach n,$(FUZZ_NAMES),$(eval $(call FUZZ_HARNESS,$(n))))

fuzz-build: $(FUZZ_LF_BIN) $(FUZZ_REPLAY_BIN)

# Every corpus file, crash inputs included, through every replay program.
fuzz-replay: $(FUZZ_REPLAY_BIN)
	@set -e; for n in $(FUZZ_NAMES); do \
	    $(FUZZ_ENV) $(FUZZ_OUT)/replay/fuzz_$$n $(FUZZ_DIR)/corpus/$$n; \
	done

# One harness at a time, one process each: the machine is shared.
fuzz: $(FUZZ_LF_BIN)
	@rm -f $(FUZZ_OUT)/run/summary.txt
	@failed=0; for j in $(foreach n,$(FUZZ_NAMES),$(n):$(FUZZ_MAXLEN_$(n))); do \
	    n=$${j%%:*}; \
	    $(FUZZ_ENV) $(FUZZ_DIR)/run-fuzzer $$n $(FUZZ_OUT)/libfuzzer/fuzz_$$n \
	        $(FUZZ_DIR)/corpus/$$n $(FUZZ_OUT)/run/$$n $(FUZZ_SECONDS) $${j#*:} \
	        $(FUZZ_OUT)/run/summary.txt || failed=1; \
	done; \
	cat $(FUZZ_OUT)/run/summary.txt; exit $$failed

fuzz-coverage: $(patsubst %,$(FUZZ_OUT)/cov/fuzz_%,$(FUZZ_NAMES))
	@set -e; for j in $(foreach n,$(FUZZ_NAMES),$(n):$(subst $(fuzz_space),$(fuzz_comma),$(FUZZ_SRC_$(n)))); do \
	    n=$${j%%:*}; \
	    rm -f $(FUZZ_OUT)/cov/$$n.profraw; \
	    LLVM_PROFILE_FILE=$(FUZZ_OUT)/cov/$$n.profraw $(FUZZ_OUT)/cov/fuzz_$$n \
	        $(FUZZ_DIR)/corpus/$$n >/dev/null; \
	    llvm-profdata merge -o $(FUZZ_OUT)/cov/$$n.profdata $(FUZZ_OUT)/cov/$$n.profraw; \
	    echo "== fuzz_$$n"; \
	    llvm-cov report $(FUZZ_OUT)/cov/fuzz_$$n -instr-profile=$(FUZZ_OUT)/cov/$$n.profdata \
	        $$(echo $${j#*:} | tr , ' ') | grep -v -e '^---' -e '^TOTAL'; \
	done

fuzz-seeds:
	/usr/bin/python3 $(FUZZ_DIR)/make-seeds $(FUZZ_DIR)/corpus
