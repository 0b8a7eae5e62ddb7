# SPDX-License-Identifier: MIT
"""The Slurm tests' shared fixtures: the job owner and a third user, made
for the module and removed after it (only if made here), and a daemon of
the module's own."""

import pytest

import slurmlib
from slurmlib import btg


@pytest.fixture(scope="module")
def users():
    u = slurmlib.Users(slurmlib.OWNER, slurmlib.OTHER)
    try:
        yield u
    finally:
        u.remove()


@pytest.fixture(scope="module")
def daemon():
    """A btguardd for the module.  A module whose daemon must start after its
    cluster (the plug-in's socket= is the default path) overrides this."""
    with btg.running_daemon() as d:
        yield d
