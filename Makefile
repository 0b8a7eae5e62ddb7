# SPDX-License-Identifier: MIT
# btguard build.  `make` builds build/btguardd and build/btguardctl;
# `make check` installs test dependencies and runs every test;
# `make demo` runs the end-to-end demonstration; `make help` lists the rest.

CC      ?= gcc
ARCH    ?= $(shell uname -m)
BUILD   ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
SANITIZE ?=
# FAULTS=1: the test build with fault injection in the ptrace layer (daemon/base/fault.h).
FAULTS ?=

PKG_CONFIG ?= pkg-config
DAEMON_PKGS := libsystemd libunwind-ptrace inih
DEFAULT_DOCDIR := /usr/local/share/doc/btguard
DOCDIR ?= $(PREFIX)/share/doc/btguard
UNITDIR ?= $(shell $(PKG_CONFIG) --variable=systemdsystemunitdir systemd 2>/dev/null || echo /lib/systemd/system)
MANDIR ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share
# The policy's path is compiled into the daemon (daemon/watch/policy.h), whatever PREFIX.
SYSCONFDIR ?= /etc
# bash-completion's own directory, moved under PREFIX: it also searches
# $XDG_DATA_DIRS (/usr/local/share:/usr/share), so /usr/local works too.
BASHCOMPDIR ?= $(shell $(PKG_CONFIG) --define-variable=datadir=$(PREFIX)/share \
                 --variable=completionsdir bash-completion 2>/dev/null || \
                 echo $(PREFIX)/share/bash-completion/completions)
SCDOC ?= scdoc

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wformat=2 -Wno-format-nonliteral -Wno-format-truncation -Wundef -Wpointer-arith -Wvla \
        -Werror=implicit-function-declaration -Werror
HARDEN := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
CFLAGS ?= -O2 -g
# CPPFLAGS, CFLAGS and LDFLAGS from the caller (dpkg-buildflags in a package
# build) come first, our warnings and hardening after: a later -Wformat
# would otherwise undo -Wformat=2, and nothing from outside drops -Werror.
# The daemon's layers, lowest first (HACKING.md): a file includes headers of
# its own layer or lower ones (tests/lint/test_layers.py).  Each is on
# the quote path, so an include names the header alone.
DAEMON_LAYERS := base node engine request watch serve
DAEMON_IQUOTE := -iquote proto $(foreach l,$(DAEMON_LAYERS),-iquote daemon/$(l)) -iquote daemon/arch/$(ARCH) \
                 -iquote daemon/target -iquote $(BUILD)/gen
ALL_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(CPPFLAGS) $(CFLAGS) $(WARN) $(HARDEN) -MMD -MP \
              $(DAEMON_IQUOTE)
ALL_LDFLAGS := -pie -Wl,-z,relro,-z,now $(LDFLAGS)

ifeq ($(SANITIZE),1)
# _FORTIFY_SOURCE and ASan disagree about some interceptors; ASan checks more.
ALL_CFLAGS := $(filter-out -D_FORTIFY_SOURCE=2,$(ALL_CFLAGS)) -U_FORTIFY_SOURCE \
              -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
ALL_LDFLAGS += -fsanitize=address,undefined
endif

ifeq ($(SANITIZE),thread)
ALL_CFLAGS := $(filter-out -D_FORTIFY_SOURCE=2,$(ALL_CFLAGS)) -U_FORTIFY_SOURCE \
              -O1 -fsanitize=thread -fno-omit-frame-pointer
ALL_LDFLAGS += -fsanitize=thread
endif

ifeq ($(FAULTS),1)
ALL_CFLAGS += -DBTGUARD_FAULTS
endif

DAEMON_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(DAEMON_PKGS) 2>/dev/null)
DAEMON_LIBS   := $(shell $(PKG_CONFIG) --libs $(DAEMON_PKGS) 2>/dev/null)
CMOCKA_LIBS   := $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)

PROTO_SRC  := $(wildcard proto/*.c)
DAEMON_SRC := $(foreach l,$(DAEMON_LAYERS),$(wildcard daemon/$(l)/*.c))
CLIENT_SRC := $(wildcard client/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
VICTIM_SRC := $(wildcard tests/victims/*.c)
MAN_SRC    := $(wildcard man/*.scd)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
PROTO_OBJ  := $(call obj,$(PROTO_SRC))
DAEMON_OBJ := $(call obj,$(DAEMON_SRC))
CLIENT_OBJ := $(call obj,$(CLIENT_SRC))
UNIT_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
VICTIM_BIN := $(patsubst tests/victims/%.c,$(BUILD)/victims/%,$(VICTIM_SRC))
MAN_PAGES  := $(patsubst man/%.scd,$(BUILD)/man/%,$(MAN_SRC))

.PHONY: all man clean install uninstall check check-quick check-mutants check-deps check-install check-deb check-deb-on check-metrics \
        unit integration asan tsan faults victims demo bench bench-tools fuzz cross-aarch64 check-aarch64 check-deploy agent-image
all: $(BUILD)/btguardd $(BUILD)/btguardctl

# The day-to-day targets, one line each (the rest: comments at each target).
.PHONY: help
help:
	@echo 'make                   build/btguardd and build/btguardctl'
	@echo 'make check-quick       the edit-test loop: build, unit, fuzz corpora, quick pytest (seconds)'
	@echo 'make unit              the cmocka unit tests'
	@echo 'make integration       the integration suite, as root (TESTS=... for some of it)'
	@echo 'make asan / tsan       the AddressSanitizer+UBSan build / the ThreadSanitizer tests'
	@echo 'make faults            the daemon with fault injection, for test_ptrace_faults.py'
	@echo 'make fuzz-replay       every fuzz corpus through its harness; make fuzz runs libFuzzer'
	@echo 'make check             everything, as root on a fresh Debian 12 (tests/README.md)'
	@echo 'make check-mutants     planted bugs the suite must catch (about 5 minutes)'
	@echo 'make cross-aarch64     the arm64 build; make check-aarch64 tests it under qemu'
	@echo 'make demo              the crash, then its cure'
	@echo 'make bench             the benchmarks (docs/PERFORMANCE.md)'
	@echo 'make install           into DESTDIR/PREFIX; make uninstall removes it'
	@echo 'make clean             removes $(BUILD)/'

# Manual pages, from scdoc sources (man/*.scd): btguardd.8 and btguardctl.1.
# Not part of `all`, so building the programs needs no scdoc; `install` and
# `check` build them.
man: $(MAN_PAGES)

$(BUILD)/man/%: man/%.scd
	@mkdir -p $(dir $@)
	@command -v $(SCDOC) >/dev/null || \
	    { echo "scdoc is needed for the manual pages: tests/install-deps installs it" >&2; exit 1; }
	$(SCDOC) < $< > $@.tmp
	mv $@.tmp $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DAEMON_CFLAGS) -c -o $@ $<

# The segment walk's code runs inside a guarded process (daemon/target/):
# built freestanding, position-independent, with no relocation, no data
# outside .text and no call out (gen-walk-code refuses anything else), and
# compiled into the daemon as bytes.  None of the daemon's flags apply:
# no sanitizer, no stack protector, no unwind tables in the target.
WALK_CFLAGS := -std=gnu11 -Os -fPIC -ffreestanding -fno-builtin -nostdlib -fno-stack-protector \
               -fno-asynchronous-unwind-tables -fno-unwind-tables -fno-jump-tables \
               -fno-toplevel-reorder -fno-tree-loop-distribute-patterns -fno-stack-clash-protection \
               -g0 $(WARN) -iquote daemon/target
WALK_CFLAGS_x86_64  := -fcf-protection=branch
WALK_CFLAGS_aarch64 := -mcmodel=tiny -mbranch-protection=standard
# The binutils of the compiler's target: aarch64-linux-gnu-gcc's are aarch64-linux-gnu-*.
TOOL_PREFIX = $(patsubst %gcc,%,$(filter %gcc,$(notdir $(CC))))
$(BUILD)/gen/walk_code.h: daemon/target/walk_code.c daemon/target/walk_table.h daemon/target/gen-walk-code
	@mkdir -p $(dir $@)
	$(CC) $(WALK_CFLAGS) $(WALK_CFLAGS_$(ARCH)) -c -o $(BUILD)/gen/walk_code.o $<
	sh daemon/target/gen-walk-code $(BUILD)/gen/walk_code.o $(TOOL_PREFIX)nm $(TOOL_PREFIX)objcopy > $@.tmp
	mv $@.tmp $@
$(call obj,daemon/engine/walk.c): $(BUILD)/gen/walk_code.h

$(BUILD)/btguardd: $(call obj,daemon/main.c) $(DAEMON_OBJ) $(PROTO_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALL_LDFLAGS) $(DAEMON_LIBS)

$(BUILD)/btguardctl: $(CLIENT_OBJ) $(PROTO_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALL_LDFLAGS)

# Unit tests link every daemon module except main.c; test_output tests the client's.
$(BUILD)/tests/test_output: $(call obj,tests/unit/test_output.c) $(call obj,client/output.c) $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALL_LDFLAGS) $(CMOCKA_LIBS)

# test_queue links queue.c alone: the test scripts the action layer (and the log) itself.
$(BUILD)/tests/test_queue: $(call obj,tests/unit/test_queue.c) $(call obj,daemon/request/queue.c) $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALL_LDFLAGS) $(CMOCKA_LIBS)

$(BUILD)/tests/%: $(call obj,tests/unit/%.c) $(DAEMON_OBJ) $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALL_LDFLAGS) $(DAEMON_LIBS) $(CMOCKA_LIBS)

# Victims are small target programs; built plainly (never sanitized: the
# daemon is what we test) with symbols so failures can be debugged.
VICTIM_CFLAGS := -std=gnu11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -pthread -rdynamic
# nolibc has no C library at all (state "none"); libbtpre is a shared object
# exporting a second backtrace() for LD_PRELOAD (state "partial"); libempty
# one without, copied under torch's and greenlet's names for the risk tests.
VICTIM_CFLAGS_nolibc := -static -nostdlib -ffreestanding -fno-stack-protector -fno-pie -no-pie
VICTIM_CFLAGS_libbtpre := -shared -fPIC
VICTIM_CFLAGS_libempty := -shared -fPIC
VICTIM_CFLAGS_libcoroswitch := -shared -fPIC
VICTIM_LIBS_coro_crash := -ldl
VICTIM_CFLAGS_bt_static := -static
VICTIM_CFLAGS_first_line_static := -static
VICTIM_CFLAGS_nolibc_dyn := -nostdlib -ffreestanding -fno-stack-protector -fPIE -pie
VICTIM_CFLAGS_sigframe_fp := -fno-omit-frame-pointer
$(BUILD)/victims/%: tests/victims/%.c $(wildcard tests/victims/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(VICTIM_CFLAGS) $(VICTIM_CFLAGS_$*) -o $@ $< $(VICTIM_LIBS_$*)

# sigframe_fp is sigframe.c built with frame pointers.
$(BUILD)/victims/sigframe_fp: tests/victims/sigframe.c

victims: $(VICTIM_BIN)

# The aarch64 cross build and its qemu test; also the aarch64 stub table's
# unit test, which runs natively.
include tests/aarch64/aarch64.mk
# --slurm-job's parser unit test and the test against a real Slurm.
include slurm/slurm.mk
include tests/slurm/slurm.mk

unit: $(UNIT_BIN) $(AARCH64_UNIT_BIN) $(SLURM_UNIT_BIN)
	@set -e; for t in $(UNIT_BIN) $(AARCH64_UNIT_BIN) $(SLURM_UNIT_BIN); do echo "== $$t"; $$t; done

asan:
	$(MAKE) BUILD=$(BUILD)/asan SANITIZE=1 all $(patsubst $(BUILD)/%,$(BUILD)/asan/%,$(UNIT_BIN))

# The tests of code shared between threads without a lock (engine/scanwork.c's
# queue), under ThreadSanitizer: a report fails them.
TSAN_TESTS := test_scanwork
tsan:
	$(MAKE) BUILD=$(BUILD)/tsan SANITIZE=thread $(addprefix $(BUILD)/tsan/tests/,$(TSAN_TESTS))
	@set -e; for t in $(TSAN_TESTS); do echo "== $(BUILD)/tsan/tests/$$t (ThreadSanitizer)"; \
	    TSAN_OPTIONS=halt_on_error=1 $(BUILD)/tsan/tests/$$t; done

# The daemon with fault injection, for tests/integration/test_ptrace_faults.py only.
faults:
	$(MAKE) BUILD=$(BUILD)/faults FAULTS=1 $(BUILD)/faults/btguardd

# Everything `make check` runs; see tests/README.md.
check: check-deps
	$(MAKE) all man victims unit faults
	$(MAKE) asan
	$(MAKE) BUILD=$(BUILD)/asan SANITIZE=1 unit
	$(MAKE) tsan
	$(MAKE) fuzz-replay
	$(MAKE) check-valgrind
	$(call PYTEST,$(BUILD),$(PYTEST_SUITES))
	# The sanitizers find nothing more in a round's 20th repetition than in
	# its 3rd: the plain run above keeps the full counts.
	BTGUARD_UPROBE_INSIDE_CYCLES=3 BTGUARD_UPROBE_CYCLES=8 BTGUARD_CYCLES=300 $(call PYTEST,$(BUILD)/asan,$(PYTEST_SUITES))
	$(MAKE) check-mutants
	$(MAKE) check-metrics
	$(MAKE) check-install
	$(MAKE) check-system
	$(MAKE) check-slurm
	# check-deploy, on the package check-system has just built and checked.
	$(DEPLOY_TEST)
	$(MAKE) check-aarch64

# The pytest suites, by kind (tests/README.md): the repository's lints,
# btguardctl without a daemon, and the integration tests against the real
# daemon and victims.  tests/pytest.ini serves all three.
PYTEST_QUICK := tests/lint tests/client
PYTEST_SUITES := $(PYTEST_QUICK) tests/integration

# Pytest against the daemon in build directory $(1), the victims and the
# fault build always $(BUILD)'s: $(call PYTEST,DIR,FILES).  Said once, for
# check, check-quick, integration.
PYTEST = BTGUARD_BUILD=$(abspath $(1)) BTGUARD_VICTIMS=$(abspath $(BUILD))/victims \
	BTGUARD_FAULTS_BUILD=$(abspath $(BUILD))/faults /usr/bin/python3 -m pytest -q --durations=15 $(2)

# Every pytest suite on the plain build (as root; several minutes), or some
# of it: make integration TESTS="tests/integration/test_guard.py".
TESTS ?= $(PYTEST_SUITES)
integration:
	$(MAKE) all victims faults
	$(call PYTEST,$(BUILD),$(TESTS))

# Planted bugs in the safety path (tests/mutants/): each must make its tests
# fail.  A scratch copy under $(BUILD)/mutants; about 5 minutes.
check-mutants: check-deps
	tests/mutants/run --build $(abspath $(BUILD))

# The edit-test loop: builds, unit tests, the fuzz corpora, the lints and
# the client's tests (no daemon, no target process).  Seconds.
check-quick:
	$(MAKE) all victims unit
	$(MAKE) fuzz-replay
	$(call PYTEST,$(BUILD),$(PYTEST_QUICK))

# The shipped Prometheus alert rules and their unit tests, with Debian's
# promtool; then a real daemon's report served by Debian's real
# prometheus-node-exporter (tests/integration/test_metrics.py, which
# `integration` runs too).  Seconds.
check-metrics: check-deps
	$(MAKE) all victims
	promtool check rules deploy/prometheus/btguard.rules.yml
	cd deploy/prometheus && promtool test rules btguard.rules.test.yml
	BTGUARD_BUILD=$(abspath $(BUILD)) BTGUARD_VICTIMS=$(abspath $(BUILD))/victims \
	    /usr/bin/python3 -m pytest -q tests/integration/test_metrics.py

# The Debian package (tests/deb/run, docs/PACKAGING.md): dpkg-buildpackage
# in $(BUILD)/deb/src, then its contents, hardening and lintian.  About 15 s.
check-deb: check-deps
	tests/deb/run $(BUILD)

# The same source packaged on another Debian release (tests/deb/build-on,
# docs/PACKAGING.md): dpkg-buildpackage in a chroot of each of DEB_RELEASES
# with that release's Build-Depends from the mirror apt uses, then the file
# lists against check-deb's and that release's lintian.  Needs root;
# check-system runs it for its releases (this machine's own is skipped).
# The first run makes and caches the chroot in $(BUILD)/deb-on (measured:
# debootstrap 90 s, the Build-Depends and lintian 65 s, 750 MB of tars);
# after that 30-50 s (the package build 20-40 of it, lintian 6-8).  $(call DEB_ON,RELEASES)
# is the test alone, for check-system, which has just run check-deb.
DEB_RELEASES ?= trixie
DEB_ON = set -e; for r in $(1); do tests/deb/build-on $$r $(BUILD); done
check-deb-on: check-deps check-deb
	$(call DEB_ON,$(DEB_RELEASES))

# The node-agent container (tests/deploy/run, deploy/README.md): the
# deploy/ image built offline with podman from a cached Debian root file
# system and the package, run with deploy/podman-run.args, guards and
# unguards a host process through the socket on a host path; and the
# DaemonSet must match those options.  Needs root; the test takes 20-60 s
# (by load) once the root file system is cached in $(BUILD)/deploy (its
# first debootstrap adds 90-180 s), after check-deb's 45-110 s.
DEPLOY_TEST = tests/deploy/run $(BUILD) $(BUILD)/deb/btguard_*.deb
check-deploy: check-deps check-deb
	$(MAKE) all victims
	$(DEPLOY_TEST)

# The node-agent image for operators (deploy/README.md), into the system's
# podman storage: the package, the cached root file system, deploy/build-image.
agent-image: check-deps check-deb
	$(MAKE) all
	deploy/build-image "$$(tests/system/make-rootfs --base "" $(BUILD)/deploy \
	    $(BUILD)/btguardd $(BUILD)/btguardctl)" $(BUILD)/deb/btguard_*.deb

# The source install path (tests/install/run): make install into an empty
# DESTDIR, check every file, make uninstall, check nothing is left.
check-install: all man
	MAKE="$(MAKE)" tests/install/run $(BUILD) /usr/local
	MAKE="$(MAKE)" tests/install/run $(BUILD) /usr

check-deps:
	tests/install-deps

# The README's first command: install, build, then the crash and its cure.
demo: check-deps
	$(MAKE) all victims
	demo/run $(BUILD)

# Benchmarks (docs/PERFORMANCE.md): pause, latency, fleet and footprint, side
# by side with gdb; then the node-wide figures (bench/node: status --all of
# 10,000 processes, guard by selector of 1,000, the at-risk rule's window from
# torch mapped to guarded).  A few minutes; BENCH_ARGS=--quick for a smoke run.
# gdb (from tests/install-deps) is only the comparison.
bench: check-deps
	$(MAKE) all bench-tools
	/usr/bin/python3 bench/run --build $(BUILD) $(BENCH_ARGS)
	/usr/bin/python3 bench/node --build $(BUILD) $(filter --quick,$(BENCH_ARGS))

# The victims and floors the benchmarks run (bench/ab's too, for A/B runs by hand).
bench-tools:
	@mkdir -p $(BUILD)/bench
	$(CC) $(VICTIM_CFLAGS) -o $(BUILD)/bench/heartbeat bench/heartbeat.c
	$(CC) $(VICTIM_CFLAGS) -o $(BUILD)/bench/ptfloor bench/ptfloor.c
	$(CC) $(VICTIM_CFLAGS) -o $(BUILD)/bench/procfloor bench/procfloor.c
	$(CC) $(VICTIM_CFLAGS) -o $(BUILD)/bench/spawn bench/spawn.c
	$(CC) $(VICTIM_CFLAGS) -o $(BUILD)/bench/btcost bench/btcost.c

install: all man
	install -D -m 0755 $(BUILD)/btguardd $(DESTDIR)$(PREFIX)/sbin/btguardd
	install -D -m 0755 $(BUILD)/btguardctl $(DESTDIR)$(PREFIX)/bin/btguardctl
	# btguardd.8 goes to man8, btguardctl.1 to man1: the section is the suffix.
	for page in $(MAN_PAGES); do \
	    install -D -m 0644 $$page $(DESTDIR)$(MANDIR)/man$${page##*.}/$${page##*/} || exit 1; \
	done
	install -D -m 0644 completion/btguardctl $(DESTDIR)$(BASHCOMPDIR)/btguardctl
	install -D -m 0644 -t $(DESTDIR)$(DOCDIR) $(wildcard README.md SECURITY.md proto/PROTOCOL.md)
	# Examples to copy into btguardd.conf.d, never read from here.
	install -D -m 0644 -t $(DESTDIR)$(DOCDIR)/examples etc/examples/python-at-exec.conf
	@mkdir -p $(DESTDIR)$(UNITDIR)
	# The units name /usr/local paths; point them at where this install puts things.
	sed 's|$(DEFAULT_DOCDIR)|$(DOCDIR)|g' systemd/btguardd.socket > $(DESTDIR)$(UNITDIR)/btguardd.socket
	sed 's|@SBINDIR@|$(PREFIX)/sbin|g; s|@BINDIR@|$(PREFIX)/bin|g; s|$(DEFAULT_DOCDIR)|$(DOCDIR)|g' \
	    systemd/btguardd.service.in \
	    > $(DESTDIR)$(UNITDIR)/btguardd.service
	sed 's|@BINDIR@|$(PREFIX)/bin|g; s|$(DEFAULT_DOCDIR)|$(DOCDIR)|g' \
	    systemd/btguard-metrics.service.in > $(DESTDIR)$(UNITDIR)/btguard-metrics.service
	sed 's|$(DEFAULT_DOCDIR)|$(DOCDIR)|g' systemd/btguard-metrics.timer \
	    > $(DESTDIR)$(UNITDIR)/btguard-metrics.timer
	chmod 0644 $(DESTDIR)$(UNITDIR)/btguardd.socket $(DESTDIR)$(UNITDIR)/btguardd.service \
	    $(DESTDIR)$(UNITDIR)/btguard-metrics.service $(DESTDIR)$(UNITDIR)/btguard-metrics.timer
	# Alert rules for Prometheus, and their promtool test, to copy from.
	install -D -m 0644 -t $(DESTDIR)$(DATADIR)/btguard/prometheus \
	    deploy/prometheus/btguard.rules.yml deploy/prometheus/btguard.rules.test.yml
	# The shipped policy is all comments.  An existing one is the admin's: kept.
	[ -e $(DESTDIR)$(SYSCONFDIR)/btguard/btguardd.conf ] || \
	    install -D -m 0644 etc/btguardd.conf $(DESTDIR)$(SYSCONFDIR)/btguard/btguardd.conf

uninstall:
	rm -rf $(DESTDIR)$(DOCDIR)
	rm -f $(DESTDIR)$(PREFIX)/sbin/btguardd $(DESTDIR)$(PREFIX)/bin/btguardctl \
	      $(DESTDIR)$(UNITDIR)/btguardd.socket $(DESTDIR)$(UNITDIR)/btguardd.service \
	      $(DESTDIR)$(UNITDIR)/btguard-metrics.service $(DESTDIR)$(UNITDIR)/btguard-metrics.timer
	rm -rf $(DESTDIR)$(DATADIR)/btguard
	for page in $(MAN_SRC:man/%.scd=%); do rm -f $(DESTDIR)$(MANDIR)/man$${page##*.}/$$page; done
	rm -f $(DESTDIR)$(BASHCOMPDIR)/btguardctl
	# The policy only if it is still the shipped one: an edited file is the admin's.
	if cmp -s etc/btguardd.conf $(DESTDIR)$(SYSCONFDIR)/btguard/btguardd.conf; then \
	    rm -f $(DESTDIR)$(SYSCONFDIR)/btguard/btguardd.conf; \
	    rmdir $(DESTDIR)$(SYSCONFDIR)/btguard 2>/dev/null || true; \
	fi

clean:
	rm -rf $(BUILD)

# Fuzz harnesses and their corpus replay (tests/fuzz/fuzz.mk), and the
# system test under a real systemd (tests/system/system.mk).
-include tests/fuzz/fuzz.mk
-include tests/system/system.mk
-include tests/valgrind/valgrind.mk

# -type f: the system test keeps a root file system (with its etc/rc2.d) under build/;
# and tests/deploy's podman storage holds whole images (invoke-rc.d is a file).
-include $(shell find $(BUILD) -path $(BUILD)/deploy/podman -prune -o -name '*.d' -type f -print 2>/dev/null)
