# SPDX-License-Identifier: MIT
# memcheck of a serving daemon (tests/valgrind/run), included by the
# top-level Makefile.
#
#   make check-valgrind   btguardd (the plain build: valgrind and ASan do not
#                         mix) serves 1,000 guard/unguard/status requests
#                         under valgrind --leak-check=full; any invalid
#                         access or definitely/indirectly lost block makes
#                         valgrind exit 99 and the target fail.  ~10 s.
#
# valgrind comes from Debian's package, which tests/install-deps installs.

.PHONY: check-valgrind
check-valgrind: check-deps
	$(MAKE) all victims
	/usr/bin/python3 tests/valgrind/run --build $(abspath $(BUILD))
