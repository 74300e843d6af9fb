/* vtest_tmp: a mkstemp/mkdtemp template under $TMPDIR (else the system's temporary folder). */
#ifndef VTEST_TMP_H
#define VTEST_TMP_H

#include <stdio.h>
#include <stdlib.h>

static inline char *vtest_tmp(char *buf, size_t size, const char *stem)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, size, "%s/%s.XXXXXX", dir && *dir ? dir : P_tmpdir, stem);
    return buf;
}

#endif
