/* validator_dl: dlopen of libcuda / libnvidia-ml and resolution of their entry points. */
#include "validator_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "validator.h"

int val_dl_load(void **lib, const char *path, const char *env_var, const char *def,
                const char *what, const struct val_dl_sym *syms, size_t n, void *base, char *err,
                size_t errlen)
{
    *lib = NULL;
    if (!path || !*path)
        path = getenv(env_var);
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
