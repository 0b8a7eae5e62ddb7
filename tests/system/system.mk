# SPDX-License-Identifier: MIT
# The system test (tests/system/run-nspawn-test): boots a real systemd in a
# systemd-nspawn container, installs btguard into it, and checks socket
# activation, the sandboxed daemon's real work, the journal, idle exit and
# `systemd-analyze verify`/`security` there.  Needs root.  The first run
# debootstraps a Debian root file system into $(BUILD)/system/rootfs-*.tar
# (about a minute, ~150 MB); later runs take about 10 s.
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
