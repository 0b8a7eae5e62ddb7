# SPDX-License-Identifier: MIT
# aarch64: the cross build and its test under qemu-system-aarch64 (TCG
# emulation, -cpu max: BTI and PAC, then -cpu cortex-a57: neither).
# Included by the Makefile.
#
#   make cross-aarch64   build/aarch64/btguardd, btguardctl and victims
#   make check-aarch64   boot Debian's arm64 kernel with them, run the tests
#   make check-aarch64 AARCH64_CPUS=max   one CPU model only
#
# The arm64 libraries, busybox and kernel come from Debian's packages,
# unpacked under build/aarch64/deps by tests/aarch64/fetch-deps (nothing is
# installed on the host for them); the cross compiler and qemu are host
# packages (tests/install-deps).

AARCH64_BUILD := $(BUILD)/aarch64
AARCH64_DEPS  := $(abspath $(AARCH64_BUILD))/deps
AARCH64_CC    ?= aarch64-linux-gnu-gcc
AARCH64_OBJDUMP ?= aarch64-linux-gnu-objdump
AARCH64_CPUS  ?= max cortex-a57
AARCH64_LIBDIRS := $(AARCH64_DEPS)/root/lib/aarch64-linux-gnu:$(AARCH64_DEPS)/root/usr/lib/aarch64-linux-gnu
# Victims the guest runs: the glibc hammer, and backtrace() definitions
# built with branch protection (paciasp, pacibsp and bti c landing pads).
AARCH64_VICTIMS := $(AARCH64_BUILD)/victims/bt_sync $(AARCH64_BUILD)/victims/bt_print \
                   $(AARCH64_BUILD)/victims/bt_park \
                   $(AARCH64_BUILD)/victims/coro_crash $(AARCH64_BUILD)/victims/libcoroswitch \
                   $(AARCH64_BUILD)/victims/libbtpad_pac \
                   $(AARCH64_BUILD)/victims/libbtpad_pacb $(AARCH64_BUILD)/victims/libbtpad_bti \
                   $(AARCH64_BUILD)/victims/leafcall $(AARCH64_BUILD)/victims/libbtleaf \
                   $(AARCH64_BUILD)/victims/uprobe_hold
AARCH64_VICTIM_CFLAGS = $(VICTIM_CFLAGS) -mbranch-protection=standard
# The linker marks a shared object BTI only if every input is marked, and
# the cross toolchain's crti.o/crtbeginS.o are not: without start files
# (these libraries need no _init) the objects carry BTI+PAC, so ld.so maps
# their code with PROT_BTI, and a stub that dropped the landing pad would
# take SIGILL on the first PLT call.
AARCH64_PAD_CFLAGS = $(AARCH64_VICTIM_CFLAGS) -shared -fPIC -nostartfiles
# Fails (and removes the library) unless its backtrace() starts with $(1):
# the pad the guest test says it exercises is the one the compiler emitted.
AARCH64_FIRST_INSN = $(AARCH64_OBJDUMP) -d --disassemble=backtrace $@ | \
	grep -A1 '<backtrace>:' | tail -n1 | grep -qw '$(1)' || \
	{ echo "$@: backtrace() does not start with $(1)" >&2; rm -f $@; exit 1; }

.PHONY: cross-aarch64 check-aarch64

# The same sources and flags as the native build (-Werror included), only
# the arch headers, compiler, pkg-config answers and build directory differ.
cross-aarch64: check-deps
	tests/aarch64/fetch-deps $(AARCH64_DEPS)
	$(MAKE) ARCH=aarch64 CC=$(AARCH64_CC) BUILD=$(AARCH64_BUILD) \
	    PKG_CONFIG="$(abspath tests/aarch64/pkg-config) $(AARCH64_DEPS)" \
	    LDFLAGS="-Wl,-rpath-link,$(AARCH64_LIBDIRS)" all
	$(MAKE) $(AARCH64_VICTIMS)

$(AARCH64_BUILD)/victims/bt_sync: tests/aarch64/bt_sync.c
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_VICTIM_CFLAGS) -o $@ $<

# Frames on demand, address by address: the segment walk's must be glibc's.
$(AARCH64_BUILD)/victims/bt_print: tests/victims/bt_print.c
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_VICTIM_CFLAGS) -o $@ $<

$(AARCH64_BUILD)/victims/bt_park: tests/victims/bt_park.c
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_VICTIM_CFLAGS) -o $@ $<

# The coroutine crash and its switch in a library of its own, which the
# guest copies under greenlet's name: the walk must stop at its trampoline.
$(AARCH64_BUILD)/victims/coro_crash: tests/victims/coro_crash.c tests/victims/coroswitch.h
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_VICTIM_CFLAGS) -o $@ $< -ldl

$(AARCH64_BUILD)/victims/libcoroswitch: tests/victims/libcoroswitch.c tests/victims/coroswitch.h
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_VICTIM_CFLAGS) -shared -fPIC -o $@ $<

$(AARCH64_BUILD)/victims/libbtpad_pac: tests/aarch64/libbtpad.c tests/aarch64/aarch64.mk
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_PAD_CFLAGS) -o $@ $<
	$(call AARCH64_FIRST_INSN,paciasp)

# pac-ret with the B key: pacibsp signs x30, the stub must return with retab.
$(AARCH64_BUILD)/victims/libbtpad_pacb: tests/aarch64/libbtpad.c tests/aarch64/aarch64.mk
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_PAD_CFLAGS) -mbranch-protection=pac-ret+b-key+bti -o $@ $<
	$(call AARCH64_FIRST_INSN,pacibsp)

$(AARCH64_BUILD)/victims/libbtpad_bti: tests/aarch64/libbtpad.c tests/aarch64/aarch64.mk
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_PAD_CFLAGS) -DBTPAD_LEAF -o $@ $<
	$(call AARCH64_FIRST_INSN,bti)

# A thread parked in a leaf called from backtrace()'s first instruction.
$(AARCH64_BUILD)/victims/leafcall: tests/aarch64/leafcall.c
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_VICTIM_CFLAGS) -o $@ $<

# The kernel's uprobe on a guarded backtrace(), attached and detached.
$(AARCH64_BUILD)/victims/uprobe_hold: tests/aarch64/uprobe_hold.c
	@mkdir -p $(dir $@)
	$(AARCH64_CC) $(AARCH64_VICTIM_CFLAGS) -o $@ $<

$(AARCH64_BUILD)/victims/libbtleaf: tests/aarch64/libbtleaf.S
	@mkdir -p $(dir $@)
	$(AARCH64_CC) -shared -fPIC -nostartfiles -o $@ $<

# The aarch64 stub table and the segment walk's derivation, tested
# natively: stub.c and arch_walk.h are pure data and logic.
AARCH64_UNIT_BIN := $(BUILD)/tests/test_stub_aarch64 $(BUILD)/tests/test_walk_aarch64
$(BUILD)/tests/test_stub_aarch64: tests/aarch64/test_stub_aarch64.c daemon/engine/stub.c \
                                  daemon/engine/stub.h daemon/arch/aarch64/arch_stub.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(CFLAGS) $(WARN) -iquote proto -iquote daemon/engine \
	    -iquote daemon/arch/aarch64 -o $@ tests/aarch64/test_stub_aarch64.c daemon/engine/stub.c $(CMOCKA_LIBS)

$(BUILD)/tests/test_walk_aarch64: tests/aarch64/test_walk_aarch64.c daemon/arch/aarch64/arch_walk.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(CFLAGS) $(WARN) -iquote daemon/arch/aarch64 -o $@ \
	    tests/aarch64/test_walk_aarch64.c $(CMOCKA_LIBS)

# Two boots side by side, about 3 minutes under TCG: -cpu max with 300
# guard/unguard cycles (they stop early on a very busy host) and the pad
# checks, never more than its 260 s timeout; -cpu cortex-a57 with 40
# cycles and the same pad checks, about a minute.  Each guest's serial
# console is kept in $(AARCH64_BUILD)/qemu/console-CPU.log.
check-aarch64: cross-aarch64 $(AARCH64_UNIT_BIN)
	@set -e; for t in $(AARCH64_UNIT_BIN); do echo "== $$t"; $$t; done
	tests/aarch64/run $(AARCH64_BUILD) --cpus "$(AARCH64_CPUS)"
