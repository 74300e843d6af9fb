/* gpu-validator: command line, modes and status file; the program is validator_main(). */
#include "validator.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "validator_cuda.h"
#include "validator_nvml.h"

#define ERRLEN 1024

static const char *const mode_names[] = {
    [VAL_MODE_DRIVER] = "driver", [VAL_MODE_TOOLKIT] = "toolkit", [VAL_MODE_PLUGIN] = "plugin",
    [VAL_MODE_MIG] = "mig",       [VAL_MODE_CUDA] = "cuda",
};

const char *val_mode_name(enum val_mode mode)
{
    if (mode <= VAL_MODE_NONE || mode > VAL_MODE_CUDA)
        return NULL;
    return mode_names[mode];
}

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gpu-validator --mode MODE [--status-file PATH]\n"
            "       gpu-validator --help | --version\n"
            "\n"
            "Validates the NVIDIA GPUs of this node (or container) for real: NVML lists them, the\n"
            "CUDA driver runs a vectorAdd kernel on 50000 elements and every result is checked.\n"
            "\n"
            "Modes:\n"
            "  driver   NVML loads, reports the driver version and sees at least one GPU\n"
            "  toolkit  driver checks, then the CUDA driver initializes and runs vectorAdd\n"
            "  plugin   vectorAdd on every CUDA device given to this container\n"
            "  mig      lists the MIG devices of every GPU (fails when MIG is on with none),\n"
            "           then vectorAdd on the first visible device\n"
            "  cuda     vectorAdd on the first visible device\n"
            "\n"
            "Options:\n"
            "  --status-file PATH  on success write PATH (e.g. /run/nvidia/validations/"
            "driver-ready),\n"
            "                      on failure remove it\n"
            "\n"
            "Exit codes: 0 passed, 1 validation failed, 2 no NVIDIA driver, 64 bad usage.\n"
            "Environment: GPU_VALIDATOR_LIBCUDA, GPU_VALIDATOR_LIBNVML override the library paths\n"
            "(default libcuda.so.1, libnvidia-ml.so.1); GPU_VALIDATOR_DRIVER_ROOT=DIR finds them\n"
            "under DIR's library folders (a driver root mounted outside the nvidia runtime).\n");
}

/* Value of "--name VALUE" or "--name=VALUE" at argv[*i]; NULL when argv[*i] is another option. */
static const char *option_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t len = strlen(name);
    const char *arg = argv[*i];
    if (strncmp(arg, name, len) != 0)
        return NULL;
    if (arg[len] == '=')
        return arg + len + 1;
    if (arg[len] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

int val_parse_args(int argc, char **argv, struct val_options *opt, char *err, size_t errlen)
{
    memset(opt, 0, sizeof(*opt));
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int missing = 0;
        const char *v;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            opt->help = 1;
        } else if (strcmp(arg, "--version") == 0) {
            opt->version = 1;
        } else if ((v = option_value(argc, argv, &i, "--mode", &missing)) != NULL) {
            opt->mode = VAL_MODE_NONE;
            for (int m = VAL_MODE_DRIVER; m <= VAL_MODE_CUDA; m++)
                if (strcmp(v, mode_names[m]) == 0)
                    opt->mode = (enum val_mode)m;
            if (opt->mode == VAL_MODE_NONE) {
                snprintf(err, errlen,
                         "unknown mode '%s' (expected driver, toolkit, plugin, mig or cuda)", v);
                return VAL_USAGE;
            }
        } else if ((v = option_value(argc, argv, &i, "--status-file", &missing)) != NULL) {
            if (!*v) {
                snprintf(err, errlen, "--status-file needs a path");
                return VAL_USAGE;
            }
            opt->status_file = v;
        } else if (missing) {
            snprintf(err, errlen, "%s needs a value", arg);
            return VAL_USAGE;
        } else {
            snprintf(err, errlen, "unknown argument '%s' (see --help)", arg);
            return VAL_USAGE;
        }
    }
    if (!opt->help && !opt->version && opt->mode == VAL_MODE_NONE) {
        snprintf(err, errlen, "--mode is required (driver, toolkit, plugin, mig or cuda)");
        return VAL_USAGE;
    }
    return VAL_OK;
}

/* What the checks found, for the status file. */
struct val_summary {
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    unsigned int gpus;
    unsigned int mig_devices;
    int cuda_devices;
    int vectoradd_runs;
};

static void print_memory(FILE *out, unsigned long long bytes)
{
    if (bytes)
        fprintf(out, "%llu MiB\n", bytes / (1024ull * 1024ull));
    else
        fprintf(out, "memory not reported\n");
}

/* NVML: driver version and every GPU (with its MIG devices when mig is set). */
static int check_nvml(int mig, struct val_summary *sum, FILE *out, char *err, size_t errlen)
{
    struct vnvml nv;
    struct vnvml_gpu *gpu = NULL;
    int rc = vnvml_open(&nv, NULL, err, errlen);
    if (rc != VAL_OK)
        return rc;
    rc = vnvml_driver(&nv, sum->driver_version, sizeof(sum->driver_version), &sum->gpus, err,
                      errlen);
    if (rc != VAL_OK)
        goto cleanup;
    fprintf(out, "NVIDIA driver %s, %u GPU(s)\n", sum->driver_version, sum->gpus);
    if (sum->gpus == 0) {
        snprintf(err, errlen, "NVML sees no GPU (is the GPU visible to this node/container?)");
        rc = VAL_FAILED;
        goto cleanup;
    }
    gpu = malloc(sizeof(*gpu));
    if (!gpu) {
        snprintf(err, errlen, "out of memory");
        rc = VAL_FAILED;
        goto cleanup;
    }
    for (unsigned int i = 0; i < sum->gpus; i++) {
        rc = vnvml_gpu(&nv, i, mig, gpu, err, errlen);
        if (rc != VAL_OK)
            goto cleanup;
        fprintf(out, "GPU %u: %s (UUID %s), ", i, gpu->name, gpu->uuid);
        print_memory(out, gpu->mem_total);
        if (!mig)
            continue;
        if (!gpu->mig_capable) {
            fprintf(out, "  MIG mode: not supported\n");
            continue;
        }
        const char *pending =
            gpu->mig_pending == gpu->mig_current
                ? ""
                : (gpu->mig_pending == NVML_DEVICE_MIG_ENABLE ? " (pending: enabled after reset)"
                                                              : " (pending: disabled after reset)");
        if (gpu->mig_current != NVML_DEVICE_MIG_ENABLE) {
            fprintf(out, "  MIG mode: disabled%s\n", pending);
            continue;
        }
        fprintf(out, "  MIG mode: enabled%s, %d MIG device(s) of at most %u\n", pending,
                gpu->mig_count, gpu->mig_max);
        for (int m = 0; m < gpu->mig_count; m++) {
            fprintf(out, "  MIG %u: %s (UUID %s), ", gpu->mig[m].index, gpu->mig[m].name,
                    gpu->mig[m].uuid);
            print_memory(out, gpu->mig[m].mem_total);
        }
        if (gpu->mig_count == 0) {
            snprintf(err, errlen,
                     "GPU %u (%s) has MIG mode enabled but no MIG devices: create GPU and compute "
                     "instances (e.g. with the MIG manager) first",
                     i, gpu->uuid);
            rc = VAL_FAILED;
            goto cleanup;
        }
        sum->mig_devices += (unsigned int)gpu->mig_count;
    }
cleanup:
    free(gpu);
    vnvml_close(&nv);
    return rc;
}

/* CUDA: initialize, then vectorAdd on device 0 or (all set) on every visible device. */
static int check_cuda(int all, struct val_summary *sum, FILE *out, char *err, size_t errlen)
{
    struct vcuda cu;
    int rc = vcuda_load(&cu, NULL, err, errlen);
    if (rc != VAL_OK)
        return rc;
    rc = vcuda_init(&cu, &sum->cuda_devices, out, err, errlen);
    if (rc != VAL_OK)
        goto cleanup;
    int last = all ? sum->cuda_devices : 1;
    for (int d = 0; d < last; d++) {
        rc = vcuda_vectoradd(&cu, d, out, err, errlen);
        if (rc != VAL_OK)
            goto cleanup;
        sum->vectoradd_runs++;
    }
cleanup:
    vcuda_unload(&cu);
    return rc;
}

static void report_visible(FILE *out)
{
    const char *names[] = {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"};
    for (size_t i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        fprintf(out, "%s=%s\n", names[i], v ? v : "(unset)");
    }
}

/* Writes the status file through a temporary file renamed into place. */
static int write_status(const char *path, enum val_mode mode, const struct val_summary *sum,
                        char *err, size_t errlen)
{
    char tmp[4096];
    int n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        snprintf(err, errlen, "status file path too long: %s", path);
        return VAL_FAILED;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write status file %s: %s", tmp, strerror(errno));
        return VAL_FAILED;
    }
    fprintf(f, "VALIDATOR_VERSION=%s\nMODE=%s\n", GPU_VALIDATOR_VERSION, val_mode_name(mode));
    if (sum->driver_version[0])
        fprintf(f, "DRIVER_VERSION=%s\nGPUS=%u\n", sum->driver_version, sum->gpus);
    if (mode == VAL_MODE_MIG)
        fprintf(f, "MIG_DEVICES=%u\n", sum->mig_devices);
    if (sum->vectoradd_runs)
        fprintf(f, "CUDA_DEVICES=%d\nVECTORADD_RUNS=%d\n", sum->cuda_devices, sum->vectoradd_runs);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, errlen, "cannot write status file %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return VAL_FAILED;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot create status file %s: %s", path, strerror(errno));
        unlink(tmp);
        return VAL_FAILED;
    }
    return VAL_OK;
}

int val_run(const struct val_options *opt, FILE *out, FILE *errout)
{
    char err[ERRLEN] = "";
    struct val_summary sum = {0};
    int rc = VAL_OK;

    fprintf(out, "gpu-validator %s: validating %s\n", GPU_VALIDATOR_VERSION,
            val_mode_name(opt->mode));
    switch (opt->mode) {
    case VAL_MODE_DRIVER:
        /* The driver's own libraries (mounted from the driver container), no runtime hook. */
        rc = check_nvml(0, &sum, out, err, sizeof(err));
        if (rc == VAL_OK)
            rc = check_cuda(0, &sum, out, err, sizeof(err));
        break;
    case VAL_MODE_TOOLKIT:
        rc = check_nvml(0, &sum, out, err, sizeof(err));
        if (rc == VAL_OK)
            rc = check_cuda(0, &sum, out, err, sizeof(err));
        break;
    case VAL_MODE_PLUGIN:
        report_visible(out);
        rc = check_cuda(1, &sum, out, err, sizeof(err));
        break;
    case VAL_MODE_MIG:
        report_visible(out);
        rc = check_nvml(1, &sum, out, err, sizeof(err));
        if (rc == VAL_OK)
            rc = check_cuda(0, &sum, out, err, sizeof(err));
        break;
    case VAL_MODE_CUDA:
        rc = check_cuda(0, &sum, out, err, sizeof(err));
        break;
    default:
        snprintf(err, sizeof(err), "no mode given");
        rc = VAL_USAGE;
        break;
    }
    if (rc == VAL_OK && opt->status_file)
        rc = write_status(opt->status_file, opt->mode, &sum, err, sizeof(err));
    if (rc != VAL_OK) {
        /* A stale ready file must not outlive a failed validation. */
        if (opt->status_file && unlink(opt->status_file) != 0 && errno != ENOENT)
            fprintf(errout, "gpu-validator: cannot remove status file %s: %s\n", opt->status_file,
                    strerror(errno));
        fflush(out);
        fprintf(errout, "gpu-validator: %s\n", err);
        fprintf(out, "Test FAILED\n");
        fflush(out);
        return rc;
    }
    fprintf(out, "Test PASSED\n");
    fflush(out);
    return VAL_OK;
}

int validator_main(int argc, char **argv, FILE *out, FILE *errout)
{
    struct val_options opt;
    char err[ERRLEN] = "";
    if (val_parse_args(argc, argv, &opt, err, sizeof(err)) != VAL_OK) {
        fprintf(errout, "gpu-validator: %s\nRun 'gpu-validator --help' for usage.\n", err);
        return VAL_USAGE;
    }
    if (opt.help) {
        usage(out);
        return VAL_OK;
    }
    if (opt.version) {
        fprintf(out, "gpu-validator %s\n", GPU_VALIDATOR_VERSION);
        return VAL_OK;
    }
    return val_run(&opt, out, errout);
}
