/* SPDX-License-Identifier: MIT */
/*
 * btguardctl --help: the usage text.  completion/ and the tests read it,
 * so what it lists is what the command line takes (options.c).
 */
#ifndef BTGUARD_CLIENT_HELP_H
#define BTGUARD_CLIENT_HELP_H

/* Writes the usage text to standard output. */
void help_print(void);

#endif
