# SPDX-License-Identifier: MIT
# Slurm's tests: `btguardctl --slurm-job` and the SPANK plugin against a
# real Slurm on this machine.  Included by the Makefile; the plugin's own
# build and install targets are in slurm/slurm.mk, beside its source.
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
$(SLURM_DEB): slurm/btguard_spank.c slurm/btguard.conf slurm/slurm.mk tests/slurm/slurm.mk \
              debian/control debian/rules debian/changelog
	tests/deb/run --build-only $(BUILD)

.PHONY: check-slurm
check-slurm: check-deps
	$(MAKE) all victims
	$(MAKE) $(SLURM_DEB)
	BTGUARD_BUILD=$(abspath $(BUILD)) BTGUARD_SLURM_DIR=$(abspath $(BUILD))/slurm-test \
	    BTGUARD_SLURM_DEB=$(abspath $(SLURM_DEB)) /usr/bin/python3 -m pytest -q tests/slurm
