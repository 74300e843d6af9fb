/* validator_dl: loading a driver library at run time and filling a table of its entry points. */
#ifndef VALIDATOR_DL_H
#define VALIDATOR_DL_H

#include <stddef.h>

/* One entry point: its exported name and where its address goes in the caller's struct. */
struct val_dl_sym {
    const char *name;
    size_t offset;
};

/* Opens the library (path, else $env_var, else def) and stores each symbol's address at
 * base + offset. On failure returns VAL_NO_DRIVER with err saying what is missing ("no NVIDIA
 * driver: ..." or "<path> has no <sym>: not <what>, or a driver too old for this validator"),
 * leaving *lib NULL. */
int val_dl_load(void **lib, const char *path, const char *env_var, const char *def,
                const char *what, const struct val_dl_sym *syms, size_t n, void *base, char *err,
                size_t errlen);

#endif
