/* gpu-validator: command line, modes and status file; the program is validator_main(). */
#ifndef VALIDATOR_H
#define VALIDATOR_H

#include <stdio.h>

#define GPU_VALIDATOR_VERSION "0.1.0"

/* Results of the validator's functions, and the program's exit codes. */
enum val_rc {
    VAL_OK = 0,        /* the validation passed */
    VAL_FAILED = 1,    /* the validation failed: the message says what */
    VAL_NO_DRIVER = 2, /* no usable NVIDIA driver: a library is absent or the kernel module is not
                          loaded */
    VAL_USAGE = 64,    /* bad command line */
};

enum val_mode {
    VAL_MODE_NONE = 0,
    VAL_MODE_DRIVER,
    VAL_MODE_TOOLKIT,
    VAL_MODE_PLUGIN,
    VAL_MODE_MIG,
    VAL_MODE_CUDA,
};

struct val_options {
    enum val_mode mode;
    const char *status_file; /* written on success, removed on failure; NULL: none */
    int help;
    int version;
};

/* Name of a mode ("driver" ...), or NULL for VAL_MODE_NONE. */
const char *val_mode_name(enum val_mode mode);

/* Parses argv (argv[0] is the program). Returns VAL_OK or VAL_USAGE with the reason in err. */
int val_parse_args(int argc, char **argv, struct val_options *opt, char *err, size_t errlen);

/* Runs the validation opt asks for, reporting on out and errors on errout. Returns an exit code. */
int val_run(const struct val_options *opt, FILE *out, FILE *errout);

/* The whole program: parse, run, exit code. */
int validator_main(int argc, char **argv, FILE *out, FILE *errout);

#endif
