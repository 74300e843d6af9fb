/* Temporary files for tests: write a string to a fresh file and hand back its path. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *tu_write_tmp(const char *content)
{
    char tmpl[] = "/tmp/kctest.XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return NULL;
    size_t len = content ? strlen(content) : 0;
    if (len && write(fd, content, len) != (ssize_t)len) {
        close(fd);
        unlink(tmpl);
        return NULL;
    }
    close(fd);
    return strdup(tmpl);
}

void tu_remove_tmp(char *path)
{
    if (!path)
        return;
    unlink(path);
    free(path);
}
