# SPDX-License-Identifier: MIT
# The system test (tests/system/run-nspawn-test): boots a real systemd in a
# systemd-nspawn container, installs btguard into it, and checks socket
# activation, the sandboxed daemon's real work, the journal, idle exit,
# `systemd-analyze verify`/`security`, the policy, and (one real reboot of
# the container) the start at boot of an enabled btguardd.service there.
# Needs root.  It runs once per release of SYSTEM_RELEASES, one after the
# other: Debian 12 (this machine's) and 13, the same checks and the same
# package, built here.  The first run debootstraps each release's root file
# system into $(BUILD)/system/rootfs-RELEASE-*.tar (about a minute each,
# ~220 MB); the container part takes about 80 s a release with the
# upgrade and purge (the reboot 2 s of it), most of it the watchdog's and
# idle exit's own timeouts: both releases about 3 minutes once cached.
# `make check-system SYSTEM_RELEASES=trixie` runs one.
# Then the package is built on each release but this machine's, from the
# same source (`make check-deb-on`, tests/deb/build-on): the one shipped is
# built on 12, and this shows 13's toolchain builds the same package.
#
# check-system (in `make check`) installs the Debian package from check-deb
# with apt, then upgrades and purges it; check-system-source installs with
# `make install` instead (tests/install/run covers that path in `make check`
# without a container).
.PHONY: check-system check-system-source
SYSTEM_RELEASES ?= bookworm trixie
check-system: check-deps check-deb
	$(MAKE) all victims
	set -e; for r in $(SYSTEM_RELEASES); do \
		MAKE="$(MAKE)" tests/system/run-nspawn-test --release $$r $(BUILD) $(BUILD)/deb/btguard_*.deb; \
	done
	$(call DEB_ON,$(SYSTEM_RELEASES))

check-system-source: check-deps
	$(MAKE) all victims
	set -e; for r in $(SYSTEM_RELEASES); do \
		MAKE="$(MAKE)" tests/system/run-nspawn-test --release $$r $(BUILD); \
	done
