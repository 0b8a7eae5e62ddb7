# SPDX-License-Identifier: MIT
# The system test (tests/system/run-nspawn-test): boots a real systemd in a
# systemd-nspawn container, installs btguard into it with `make install`, and
# checks socket activation, the sandboxed daemon's real work, the journal,
# idle exit and `systemd-analyze verify`/`security` there.  Needs root.  The
# first run debootstraps a Debian root file system into
# $(BUILD)/system/rootfs-*.tar (about a minute, ~150 MB); later runs take
# about 10 s.
.PHONY: check-system
check-system: check-deps
	$(MAKE) all victims
	MAKE="$(MAKE)" tests/system/run-nspawn-test $(BUILD)
