/* testutil: small helpers shared by the unit tests. */
#ifndef TESTUTIL_H
#define TESTUTIL_H

/* Writes content to a new file under /tmp; returns its malloc'd path (caller frees with
 * tu_remove_tmp, which also unlinks it), or NULL on failure. */
char *tu_write_tmp(const char *content);
void tu_remove_tmp(char *path);

#endif
