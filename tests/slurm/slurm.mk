# SPDX-License-Identifier: MIT
# Slurm: `btguardctl --slurm-job` against a real Slurm on this machine.
# Included by the Makefile.
#
#   make check-slurm   munged, slurmctld and slurmd from Debian's packages,
#                      configured under $(BUILD)/slurm-test and a temporary
#                      directory (nothing in /etc), one node or three,
#                      jobs submitted with sbatch, guarded through
#                      btguardd; the SPANK plugin from the btguard-slurm
#                      package.  Needs root; under 3 minutes once the
#                      package is built.
#
# The parsers behind --slurm-job have a unit test of their own, which
# `make unit` runs with the others.

SLURM_UNIT_BIN := $(BUILD)/tests/test_slurm_parse

$(BUILD)/tests/test_slurm_parse: $(call obj,tests/slurm/test_slurm_parse.c) $(call obj,client/slurm.c)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALL_LDFLAGS) $(CMOCKA_LIBS)

# The SPANK plugin tests load the plugin from the btguard-slurm package,
# extracted into the test cluster's directory (slurmlib.deb_plugstack):
# tests/deb/run --build-only builds it unless check-deb's is newer than
# its sources.
SLURM_DEB := $(BUILD)/deb/btguard-slurm_$(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' \
               debian/changelog)_$(shell dpkg --print-architecture 2>/dev/null).deb
$(SLURM_DEB): slurm/btguard_spank.c slurm/btguard.conf tests/slurm/slurm.mk \
              debian/control debian/rules debian/changelog
	tests/deb/run --build-only $(BUILD)

.PHONY: check-slurm
check-slurm: check-deps
	$(MAKE) all victims
	$(MAKE) $(SLURM_DEB)
	BTGUARD_BUILD=$(abspath $(BUILD)) BTGUARD_SLURM_DIR=$(abspath $(BUILD))/slurm-test \
	    BTGUARD_SLURM_DEB=$(abspath $(SLURM_DEB)) /usr/bin/python3 -m pytest -q tests/slurm

# The SPANK plugin (slurm/): `srun --btguard`.  Built against Debian's
# libslurm-dev (tests/install-deps), position-independent, no -pie.
SPANK_SO := $(BUILD)/slurm/btguard.so

$(SPANK_SO): slurm/btguard_spank.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(CPPFLAGS) $(CFLAGS) $(WARN) -fPIC -fstack-protector-strong \
	    -shared -Wl,-z,relro,-z,now $(LDFLAGS) -o $@ $<

.PHONY: spank
spank: $(SPANK_SO)

# Installs the plugin and its plugstack.conf.d snippet (slurm/btguard.conf:
# `optional`, off until a job asks for --btguard).  Slurm reads the snippet
# when plugstack.conf has `include /etc/slurm/plugstack.conf.d/*`.
SLURM_PLUGINDIR ?= /usr/lib/x86_64-linux-gnu/slurm-wlm
SLURM_CONFDIR ?= /etc/slurm
.PHONY: install-spank
install-spank: $(SPANK_SO)
	install -D -m 0755 $(SPANK_SO) $(DESTDIR)$(SLURM_PLUGINDIR)/btguard.so
	@mkdir -p $(DESTDIR)$(SLURM_CONFDIR)/plugstack.conf.d
	# The snippet names the plugin by its path: the one this install gives it.
	sed 's|/usr/lib/x86_64-linux-gnu/slurm-wlm/|$(SLURM_PLUGINDIR)/|' slurm/btguard.conf \
	    > $(DESTDIR)$(SLURM_CONFDIR)/plugstack.conf.d/btguard.conf
	chmod 0644 $(DESTDIR)$(SLURM_CONFDIR)/plugstack.conf.d/btguard.conf
