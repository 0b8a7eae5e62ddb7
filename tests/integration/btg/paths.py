# SPDX-License-Identifier: MIT
"""Where the programs under test are, and how long any wait may last.

The binaries come from BTGUARD_BUILD, the victims from BTGUARD_VICTIMS,
the fault-injection daemon from BTGUARD_FAULTS_BUILD.  The limits are
generous: CI is a shared, noisy 2-core machine, and no test asserts on
how long something took.
"""

import os
from pathlib import Path


REPO = Path(__file__).resolve().parents[3]


BUILD = Path(os.environ.get("BTGUARD_BUILD", REPO / "build"))


VICTIMS = Path(os.environ.get("BTGUARD_VICTIMS", REPO / "build" / "victims"))


BTGUARDD = BUILD / "btguardd"


BTGUARDCTL = BUILD / "btguardctl"


# The daemon built with fault injection in its ptrace layer (make faults).
FAULTS_BTGUARDD = Path(os.environ.get("BTGUARD_FAULTS_BUILD", REPO / "build" / "faults")) / "btguardd"


# Generous bounds for a loaded machine; hitting one is a failure, not a flake.
START_TIMEOUT = 20.0


STOP_TIMEOUT = 30.0


SETTLE_TIMEOUT = 10.0


REPORT_TIMEOUT = 60.0


# Text that means a sanitizer fired inside the daemon (ASan/LSan/UBSan).
SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")


CPU_CGROUP_V1 = "/sys/fs/cgroup/cpu"
