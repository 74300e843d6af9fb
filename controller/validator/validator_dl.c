/* validator_dl: dlopen of libcuda / libnvidia-ml (by name, by path, or found under a driver root)
 * and resolution of their entry points. */
#include "validator_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "validator.h"

/* Library folders of a driver root, as the distributions the driver container images are built
 * on lay them out. */
static const char *const DRIVER_LIB_DIRS[] = {
    "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib",
    "lib/x86_64-linux-gnu",     "lib/aarch64-linux-gnu",     "lib64",     NULL};

int val_dl_find_in_root(const char *root, const char *name, char *out, size_t size, char *err,
                        size_t errlen)
{
    size_t rl = strlen(root);
    while (rl > 1 && root[rl - 1] == '/')
        rl--;
    for (int i = 0; DRIVER_LIB_DIRS[i]; i++) {
        int n = snprintf(out, size, "%.*s/%s/%s", (int)rl, root, DRIVER_LIB_DIRS[i], name);
        if (n > 0 && (size_t)n < size && access(out, R_OK) == 0)
            return VAL_OK;
    }
    snprintf(err, errlen,
             "no NVIDIA driver: %s not found under the driver root %.*s (looked in "
             "usr/lib/x86_64-linux-gnu, usr/lib/aarch64-linux-gnu, usr/lib64, usr/lib, "
             "lib/x86_64-linux-gnu, lib/aarch64-linux-gnu, lib64; is the driver installed there?)",
             name, (int)rl, root);
    out[0] = '\0';
    return VAL_NO_DRIVER;
}

int val_dl_load(void **lib, const char *path, const char *env_var, const char *def,
                const char *what, const struct val_dl_sym *syms, size_t n, void *base, char *err,
                size_t errlen)
{
    *lib = NULL;
    char found[4096];
    if (!path || !*path)
        path = getenv(env_var);
    if (!path || !*path) {
        /* Outside the nvidia runtime (the driver's own validation) the libraries are found
         * under the driver's root, mounted into the container. */
        const char *root = getenv("GPU_VALIDATOR_DRIVER_ROOT");
        if (root && *root) {
            int rc = val_dl_find_in_root(root, def, found, sizeof(found), err, errlen);
            if (rc != VAL_OK)
                return rc;
            path = found;
        }
    }
    if (!path || !*path)
        path = def;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(err, errlen,
                 "no NVIDIA driver: %s (is the driver installed and the container run with the "
                 "nvidia runtime?)",
                 why ? why : path);
        return VAL_NO_DRIVER;
    }
    for (size_t i = 0; i < n; i++) {
        void *sym = dlsym(h, syms[i].name);
        if (!sym) {
            snprintf(err, errlen, "%s has no %s: not %s, or a driver too old for this validator",
                     path, syms[i].name, what);
            dlclose(h);
            return VAL_NO_DRIVER;
        }
        memcpy((char *)base + syms[i].offset, &sym, sizeof(sym));
    }
    *lib = h;
    return VAL_OK;
}
