/* validator_dl: loading a driver library at run time and filling a table of its entry points. */
#ifndef VALIDATOR_DL_H
#define VALIDATOR_DL_H

#include <stddef.h>

/* One entry point: its exported name and where its address goes in the caller's struct. */
struct val_dl_sym {
    const char *name;
    size_t offset;
};

/* Finds library `name` in the library folders of a driver root (e.g. /run/nvidia/driver, where
 * the driver container's files are): writes the path to out and returns VAL_OK, or returns
 * VAL_NO_DRIVER with err naming the root and the folders searched. */
int val_dl_find_in_root(const char *root, const char *name, char *out, size_t size, char *err,
                        size_t errlen);

/* Opens the library (path, else $env_var, else def: found under $GPU_VALIDATOR_DRIVER_ROOT when
 * that is set, by the dynamic linker's search otherwise) and stores each symbol's address at
 * base + offset. On failure returns VAL_NO_DRIVER with err saying what is missing ("no NVIDIA
 * driver: ..." or "<path> has no <sym>: not <what>, or a driver too old for this validator"),
 * leaving *lib NULL. */
int val_dl_load(void **lib, const char *path, const char *env_var, const char *def,
                const char *what, const struct val_dl_sym *syms, size_t n, void *base, char *err,
                size_t errlen);

#endif
