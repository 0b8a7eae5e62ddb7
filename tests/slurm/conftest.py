# SPDX-License-Identifier: MIT
"""The Slurm tests' shared fixture: the job owner and a third user, made
for the module and removed after it (only if made here)."""

import pytest

import slurmlib


@pytest.fixture(scope="module")
def users():
    u = slurmlib.Users(slurmlib.OWNER, slurmlib.OTHER)
    try:
        yield u
    finally:
        u.remove()
