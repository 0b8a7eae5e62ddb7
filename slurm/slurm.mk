# SPDX-License-Identifier: MIT
# The SPANK plugin for Slurm (`srun --btguard`): its build and install
# targets, beside its source.  Included by the Makefile; its tests are in
# tests/slurm/ (tests/slurm/slurm.mk: make check-slurm).

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
