# SPDX-License-Identifier: MIT
# The system test (tests/system/run-nspawn-test): boots a real systemd in a
# systemd-nspawn container, installs btguard into it, and checks socket
# activation, the sandboxed daemon's real work, the journal, idle exit,
# `systemd-analyze verify`/`security`, the policy, and (one real reboot of
# the container) the start at boot of an enabled btguardd.service there.
# Needs root.  The first run debootstraps a Debian root file system into
# $(BUILD)/system/rootfs-*.tar (about a minute, ~150 MB); the container part
# takes about 40 s (the reboot 2 s of it), most of it the watchdog's and
# idle exit's own timeouts.
#
# check-system (in `make check`) installs the Debian package from check-deb
# with apt, then upgrades and purges it; check-system-source installs with
# `make install` instead (tests/install/run covers that path in `make check`
# without a container).
.PHONY: check-system check-system-source
check-system: check-deps check-deb
	$(MAKE) all victims
	MAKE="$(MAKE)" tests/system/run-nspawn-test $(BUILD) $(BUILD)/deb/btguard_*.deb

check-system-source: check-deps
	$(MAKE) all victims
	MAKE="$(MAKE)" tests/system/run-nspawn-test $(BUILD)
