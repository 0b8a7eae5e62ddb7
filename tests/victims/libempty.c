// SPDX-License-Identifier: MIT
/*
 * libempty: a shared object with nothing in it of interest.
 *
 * The at-risk tests copy it under the names the report recognises
 * (".../torch/lib/libc10.so", ".../greenlet/_greenlet.cpython-311-x86_64-linux-gnu.so")
 * and preload the copies, so a tiny victim looks like a torch + greenlet
 * process without importing either.  It defines no backtrace().
 */
int btg_libempty_marker(void);

int btg_libempty_marker(void)
{
	return 42;
}
