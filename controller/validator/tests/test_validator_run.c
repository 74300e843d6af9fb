/* Tests that run the gpu-validator program against the CPU shims of libcuda and libnvidia-ml
 * (libfakecuda.so, libfakenvml.so) and against missing libraries, checking output and exit codes.
 */
#include <criterion/criterion.h>

#include "vtest_tmp.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

struct result {
    int code; /* exit status, -1 when killed */
    char *out, *err;
};

static char *slurp(int fd)
{
    off_t size = lseek(fd, 0, SEEK_END);
    cr_assert_geq(size, 0);
    char *buf = malloc((size_t)size + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(pread(fd, buf, (size_t)size, 0), size);
    buf[size] = '\0';
    close(fd);
    return buf;
}

static int tmpfd(void)
{
    char path[512];
    vtest_tmp(path, sizeof(path), "vrun");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    return fd;
}

/* Runs gpu-validator with args; env holds "NAME=VALUE" to set and "NAME" to unset. */
static struct result run(const char *const *args, const char *const *env)
{
    const char *bin = getenv("GPU_VALIDATOR_BIN");
    cr_assert(bin && *bin, "run through ctest: GPU_VALIDATOR_BIN names the program");
    const char *argv[16] = {bin};
    int argc = 1;
    for (; args && args[argc - 1]; argc++)
        argv[argc] = args[argc - 1];
    argv[argc] = NULL;

    /* The child's environment: ours, less what env replaces or removes, plus env's settings. */
    size_t n = 0;
    while (environ[n])
        n++;
    const char **envp = calloc(n + 32, sizeof(*envp));
    cr_assert_not_null(envp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int drop = 0;
        for (size_t j = 0; env && env[j]; j++) {
            size_t len = strcspn(env[j], "=");
            if (strncmp(environ[i], env[j], len) == 0 && environ[i][len] == '=')
                drop = 1;
        }
        if (!drop)
            envp[k++] = environ[i];
    }
    for (size_t j = 0; env && env[j]; j++)
        if (strchr(env[j], '='))
            envp[k++] = env[j];
    envp[k] = NULL;

    int ofd = tmpfd(), efd = tmpfd();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(ofd, 1);
        dup2(efd, 2);
        execve(bin, (char *const *)argv, (char *const *)envp);
        _exit(127);
    }
    free(envp);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    struct result r = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(ofd), slurp(efd)};
    return r;
}

static char *read_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    return slurp(fd);
}

static void done(struct result *r)
{
    free(r->out);
    free(r->err);
}

/* Asserts the lines appear in out in this order. */
static void assert_in_order(const char *out, const char *const *lines)
{
    const char *at = out;
    for (size_t i = 0; lines[i]; i++) {
        const char *p = strstr(at, lines[i]);
        cr_assert_not_null(p, "missing or out of order: '%s' in:\n%s", lines[i], out);
        at = p + strlen(lines[i]);
    }
}

static void assert_clean_shims(const struct result *r)
{
    cr_assert_null(strstr(r->err, "fakecuda: leaked"), "%s", r->err);
    cr_assert_null(strstr(r->err, "fakenvml: leaked"), "%s", r->err);
}

static const char *const sample_lines[] = {
    "[Vector addition of 50000 elements]\n",
    "Copy input data from the host memory to the CUDA device\n",
    "CUDA kernel launch with 196 blocks of 256 threads\n",
    "Copy output data from the CUDA device to the host memory\n",
    "Verified 50000 of 50000 elements on CUDA device 0 (tolerance 1e-05)\n",
    "Test PASSED\n",
    NULL,
};

#define LAUNCH0                                                                                    \
    "fakecuda: launch vectorAdd grid 196x1x1 block 256x1x1 on device 0: 50176 threads ran, 50000 " \
    "stores, n=50000, ok\n"

Test(run, no_cuda_driver_exits_2_with_advice)
{
    const char *args[] = {"--mode", "cuda", NULL};
    const char *env[] = {"GPU_VALIDATOR_LIBCUDA=/nonexistent/libcuda.so.1", NULL};
    struct result r = run(args, env);
    cr_assert_eq(r.code, 2, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "gpu-validator: no NVIDIA driver: /nonexistent/libcuda.so.1: cannot "
                            "open shared object file"),
              "%s", r.err);
    cr_assert(strstr(r.err, "(is the driver installed and the container run with the nvidia "
                            "runtime?)\n"),
              "%s", r.err);
    cr_assert(strstr(r.out, "Test FAILED\n"), "%s", r.out);
    cr_assert_null(strstr(r.out, "Test PASSED"));
    cr_assert_null(strstr(r.out, "[Vector addition"));
    done(&r);
}

Test(run, default_library_name_is_libcuda_so_1)
{
    /* Without the override the program asks the loader for libcuda.so.1. */
    const char *args[] = {"--mode=cuda", NULL};
    const char *env[] = {"GPU_VALIDATOR_LIBCUDA", NULL};
    struct result r = run(args, env);
    /* Whether the loader finds a real driver library on this machine. */
    void *real = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (real) {
        dlclose(real);
        /* A driver is installed here: the default name found it. */
        cr_assert_null(strstr(r.err, "libcuda.so.1: cannot open shared object file"), "%s", r.err);
    } else {
        cr_assert_eq(r.code, 2, "%s%s", r.out, r.err);
        cr_assert(strstr(r.err, "gpu-validator: no NVIDIA driver: libcuda.so.1: cannot open "
                                "shared object file"),
                  "%s", r.err);
    }
    done(&r);
}

Test(run, no_nvml_or_driver_not_loaded_exits_2)
{
    const char *args[] = {"--mode", "driver", NULL};
    const char *env[] = {"GPU_VALIDATOR_LIBNVML=/nonexistent/libnvidia-ml.so.1", NULL};
    struct result r = run(args, env);
    cr_assert_eq(r.code, 2, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "no NVIDIA driver: /nonexistent/libnvidia-ml.so.1: cannot open"), "%s",
              r.err);
    done(&r);

    const char *env9[] = {"FAKENVML_INIT_RC=9", NULL};
    r = run(args, env9);
    cr_assert_eq(r.code, 2, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "gpu-validator: nvmlInit_v2 failed: Driver Not Loaded [NVML code 9] "
                            "(is the NVIDIA kernel module loaded?)\n"),
              "%s", r.err);
    assert_clean_shims(&r);
    done(&r);
}

Test(run, cuda_mode_adds_50000_elements_on_196_blocks)
{
    const char *args[] = {"--mode", "cuda", NULL};
    struct result r = run(args, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    assert_in_order(r.out, sample_lines);
    /* The last line is Test PASSED. */
    size_t len = strlen(r.out);
    cr_assert(len > 12 && strcmp(r.out + len - 12, "Test PASSED\n") == 0, "%s", r.out);
    cr_assert(strstr(r.out, "CUDA device 0: \"Fake GPU 0 (CPU shim)\" with compute capability "
                            "9.0\n"),
              "%s", r.out);
    /* The shim ran the PTX: every thread of the grid, one store per element below n. */
    cr_assert(strstr(r.err, LAUNCH0), "%s", r.err);
    cr_assert_null(strstr(r.out, "MIG"));
    assert_clean_shims(&r);
    done(&r);
}

Test(run, wrong_element_fails_with_its_index)
{
    const char *args[] = {"--mode", "cuda", NULL};
    const long elems[] = {123, 0, 49999};
    for (size_t i = 0; i < 3; i++) {
        char env0[64];
        snprintf(env0, sizeof(env0), "FAKECUDA_CORRUPT=%ld", elems[i]);
        const char *env[] = {env0, NULL};
        struct result r = run(args, env);
        cr_assert_eq(r.code, 1, "%s%s", r.out, r.err);
        char want[96];
        snprintf(want, sizeof(want),
                 "gpu-validator: Result verification failed at element %ld: ", elems[i]);
        cr_assert(strstr(r.err, want), "%s", r.err);
        cr_assert(strstr(r.out, "Copy output data from the CUDA device to the host memory\n"
                                "Test FAILED\n"),
                  "%s", r.out);
        cr_assert_null(strstr(r.out, "Test PASSED"));
        assert_clean_shims(&r);
        done(&r);
    }
}

Test(run, cuda_errors_are_named)
{
    const char *args[] = {"--mode", "cuda", NULL};
    struct {
        const char *env, *msg;
    } cases[] = {
        {"FAKECUDA_LAUNCH_RC=719",
         "gpu-validator: cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED (unspecified launch "
         "failure)\n"},
        {"FAKECUDA_INIT_RC=100",
         "gpu-validator: cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is "
         "detected)\n"},
        {"FAKECUDA_JIT_FAIL=1",
         "gpu-validator: cuModuleLoadDataEx (vectorAdd PTX) failed: CUDA_ERROR_INVALID_PTX (a PTX "
         "JIT compilation failed): ptxas fatal   : simulated JIT failure\n"},
        {"FAKECUDA_LAUNCH_RC=4242",
         "gpu-validator: cuLaunchKernel failed: unknown CUresult (no description) [code 4242]\n"},
        {"FAKECUDA_DEVICES=0",
         "gpu-validator: cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is "
         "detected)\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *env[] = {cases[i].env, NULL};
        struct result r = run(args, env);
        cr_assert_eq(r.code, 1, "%s: %s%s", cases[i].env, r.out, r.err);
        cr_assert(strstr(r.err, cases[i].msg), "%s: %s", cases[i].env, r.err);
        cr_assert(strstr(r.out, "Test FAILED\n"), "%s", r.out);
        /* Whatever failed, what was allocated was released. */
        assert_clean_shims(&r);
        done(&r);
    }
}

Test(run, driver_mode_lists_gpus_then_adds_vectors)
{
    const char *args[] = {"--mode", "driver", NULL};
    /* Without the CUDA library the driver is not usable: exit 2, after the NVML listing. */
    const char *env[] = {"GPU_VALIDATOR_LIBCUDA=/nonexistent/libcuda.so.1", NULL};
    struct result r = run(args, env);
    cr_assert_eq(r.code, 2, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "no NVIDIA driver"), "%s", r.err);
    done(&r);
    r = run(args, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    const char *lines[] = {
        "gpu-validator 0.1.0: validating driver\n",
        "NVIDIA driver 550.54.15, 2 GPU(s)\n",
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID GPU-fa4e0000-0000-4000-8000-000000000000), 40960 MiB\n",
        "GPU 1: NVIDIA A100-SXM4-40GB (UUID GPU-fa4e0000-0000-4000-8000-000000000001), 40960 MiB\n",
        "Test PASSED\n",
        NULL,
    };
    assert_in_order(r.out, lines);
    cr_assert_not_null(strstr(r.out, "[Vector addition"), "driver mode runs vectorAdd too");
    cr_assert_null(strstr(r.out, "MIG"));
    assert_clean_shims(&r);
    done(&r);

    /* Memory that NVML does not report is said so; another error fails. */
    const char *nomem[] = {"FAKENVML_MEMINFO_RC=3", NULL};
    r = run(args, nomem);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "GPU 1: NVIDIA A100-SXM4-40GB (UUID "
                            "GPU-fa4e0000-0000-4000-8000-000000000001), memory not reported\n"),
              "%s", r.out);
    done(&r);
    const char *memfail[] = {"FAKENVML_MEMINFO_RC=15", NULL};
    r = run(args, memfail);
    cr_assert_eq(r.code, 1, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "gpu-validator: nvmlDeviceGetMemoryInfo (GPU 0) failed: Unknown Error "
                            "[NVML code 15]\n"),
              "%s", r.err);
    assert_clean_shims(&r);
    done(&r);

    const char *none[] = {"FAKENVML_GPUS=0", NULL};
    r = run(args, none);
    cr_assert_eq(r.code, 1, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "NVIDIA driver 550.54.15, 0 GPU(s)\n"), "%s", r.out);
    cr_assert(strstr(r.err, "gpu-validator: NVML sees no GPU"), "%s", r.err);
    assert_clean_shims(&r);
    done(&r);
}

Test(run, toolkit_mode_is_driver_then_cuda)
{
    const char *args[] = {"--mode", "toolkit", NULL};
    struct result r = run(args, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    const char *lines[] = {"NVIDIA driver 550.54.15, 2 GPU(s)\n",
                           "GPU 1: ", "CUDA driver API version 12.4, 1 CUDA device(s) visible\n",
                           NULL};
    assert_in_order(r.out, lines);
    assert_in_order(r.out, sample_lines);
    cr_assert(strstr(r.err, LAUNCH0), "%s", r.err);
    assert_clean_shims(&r);
    done(&r);

    /* No driver: the NVML check fails first and CUDA is never tried. */
    const char *env[] = {"FAKENVML_INIT_RC=9", NULL};
    r = run(args, env);
    cr_assert_eq(r.code, 2, "%s%s", r.out, r.err);
    cr_assert_null(strstr(r.err, "fakecuda: launch"));
    done(&r);
}

Test(run, plugin_mode_runs_on_every_visible_device)
{
    const char *args[] = {"--mode", "plugin", NULL};
    const char *env[] = {"FAKECUDA_DEVICES=2", "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b",
                         "CUDA_VISIBLE_DEVICES", NULL};
    struct result r = run(args, env);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    const char *lines[] = {"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b\n",
                           "CUDA_VISIBLE_DEVICES=(unset)\n",
                           "CUDA driver API version 12.4, 2 CUDA device(s) visible\n",
                           "[Vector addition of 50000 elements]\n",
                           "Verified 50000 of 50000 elements on CUDA device 0",
                           "[Vector addition of 50000 elements]\n",
                           "CUDA device 1: \"Fake GPU 1 (CPU shim)\"",
                           "CUDA kernel launch with 196 blocks of 256 threads\n",
                           "Verified 50000 of 50000 elements on CUDA device 1",
                           "Test PASSED\n",
                           NULL};
    assert_in_order(r.out, lines);
    const char *launches[] = {LAUNCH0,
                              "fakecuda: launch vectorAdd grid 196x1x1 block 256x1x1 on "
                              "device 1: 50176 threads ran, 50000 stores, n=50000, ok\n",
                              NULL};
    assert_in_order(r.err, launches);
    assert_clean_shims(&r);
    done(&r);
}

Test(run, mig_mode_lists_mig_devices_then_runs_vectoradd)
{
    char status[512];
    vtest_tmp(status, sizeof(status), "vmig");
    int sfd = mkstemp(status);
    cr_assert_geq(sfd, 0);
    close(sfd);
    const char *args[] = {"--mode", "mig", "--status-file", status, NULL};
    const char *env[] = {"FAKENVML_MIG=3,-", "CUDA_VISIBLE_DEVICES=MIG-fa4e0000-0000", NULL};
    struct result r = run(args, env);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    const char *lines[] = {
        "CUDA_VISIBLE_DEVICES=MIG-fa4e0000-0000\n",
        "NVIDIA driver 550.54.15, 2 GPU(s)\n",
        "GPU 0: NVIDIA A100-SXM4-40GB",
        "  MIG mode: enabled, 3 MIG device(s) of at most 7\n",
        "  MIG 0: NVIDIA A100-SXM4-40GB MIG 1g.5gb (UUID "
        "MIG-fa4e0000-0000-4000-8000-000000000000), "
        "4864 MiB\n",
        /* indices 1 and 3 are unused slots: listed by their real index */
        "  MIG 2: NVIDIA A100-SXM4-40GB MIG 1g.5gb (UUID MIG-fa4e0000-0000-4000-8000-000000000002)",
        "  MIG 4: NVIDIA A100-SXM4-40GB MIG 1g.5gb (UUID MIG-fa4e0000-0000-4000-8000-000000000004)",
        "GPU 1: NVIDIA A100-SXM4-40GB",
        "  MIG mode: not supported\n",
        "[Vector addition of 50000 elements]\n",
        "Test PASSED\n",
        NULL,
    };
    assert_in_order(r.out, lines);
    cr_assert_null(strstr(r.out, "MIG 1:"));
    cr_assert_null(strstr(r.out, "MIG 6:"));
    cr_assert(strstr(r.err, LAUNCH0), "%s", r.err);
    assert_clean_shims(&r);
    done(&r);
    char *text = read_file(status);
    cr_assert_not_null(text);
    cr_assert_str_eq(text, "VALIDATOR_VERSION=0.1.0\nMODE=mig\nDRIVER_VERSION=550.54.15\nGPUS=2\n"
                           "MIG_DEVICES=3\nCUDA_DEVICES=1\nVECTORADD_RUNS=1\n");
    free(text);
    unlink(status);
}

Test(run, mig_mode_fails_when_mig_is_on_without_devices)
{
    const char *args[] = {"--mode", "mig", NULL};
    const char *env[] = {"FAKENVML_MIG=off,0", NULL};
    struct result r = run(args, env);
    cr_assert_eq(r.code, 1, "%s%s", r.out, r.err);
    const char *lines[] = {"GPU 0: ",       "  MIG mode: disabled\n",
                           "GPU 1: ",       "  MIG mode: enabled, 0 MIG device(s) of at most 7\n",
                           "Test FAILED\n", NULL};
    assert_in_order(r.out, lines);
    cr_assert(strstr(r.err, "gpu-validator: GPU 1 (GPU-fa4e0000-0000-4000-8000-000000000001) has "
                            "MIG mode enabled but no MIG devices"),
              "%s", r.err);
    cr_assert_null(strstr(r.err, "fakecuda: launch"), "%s", r.err);
    assert_clean_shims(&r);
    done(&r);
}

Test(run, status_file_written_on_success_removed_on_failure)
{
    char dir[512];
    cr_assert_not_null(mkdtemp(vtest_tmp(dir, sizeof(dir), "vstatus")));
    char path[600], arg[640];
    snprintf(path, sizeof(path), "%s/driver-ready", dir);
    snprintf(arg, sizeof(arg), "--status-file=%s", path);
    const char *args[] = {"--mode", "driver", arg, NULL};
    struct result r = run(args, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    char *text = read_file(path);
    cr_assert_not_null(text);
    cr_assert_str_eq(text, "VALIDATOR_VERSION=0.1.0\nMODE=driver\n"
                           "DRIVER_VERSION=550.54.15\nGPUS=2\nCUDA_DEVICES=1\nVECTORADD_RUNS=1\n");
    free(text);
    done(&r);

    const char *cargs[] = {"--mode", "cuda", "--status-file", path, NULL};
    r = run(cargs, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    text = read_file(path);
    cr_assert_str_eq(text, "VALIDATOR_VERSION=0.1.0\nMODE=cuda\nCUDA_DEVICES=1\n"
                           "VECTORADD_RUNS=1\n");
    free(text);
    done(&r);

    /* A failed validation removes the stale file. */
    const char *env[] = {"FAKECUDA_CORRUPT=7", NULL};
    r = run(cargs, env);
    cr_assert_eq(r.code, 1, "%s%s", r.out, r.err);
    cr_assert_eq(access(path, F_OK), -1);
    done(&r);

    /* No temporary file is left behind. */
    cr_assert_eq(rmdir(dir), 0);
}

Test(run, status_file_that_cannot_be_written_fails)
{
    const char *args[] = {"--mode", "driver", "--status-file", "/nonexistent-dir/driver-ready",
                          NULL};
    struct result r = run(args, NULL);
    cr_assert_eq(r.code, 1, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "gpu-validator: cannot write status file "
                            "/nonexistent-dir/driver-ready.tmp."),
              "%s", r.err);
    cr_assert(strstr(r.err, "No such file or directory"), "%s", r.err);
    cr_assert_null(strstr(r.out, "Test PASSED"));
    done(&r);
}

Test(run, help_version_and_usage_errors)
{
    const char *help[] = {"--help", NULL};
    struct result r = run(help, NULL);
    cr_assert_eq(r.code, 0);
    cr_assert(strstr(r.out, "Usage: gpu-validator --mode MODE"), "%s", r.out);
    cr_assert(strstr(r.out, "Exit codes: 0 passed, 1 validation failed, 2 no NVIDIA driver, 64 "
                            "bad usage."),
              "%s", r.out);
    cr_assert_str_empty(r.err);
    done(&r);

    const char *ver[] = {"--version", NULL};
    r = run(ver, NULL);
    cr_assert_eq(r.code, 0);
    cr_assert_str_eq(r.out, "gpu-validator 0.1.0\n");
    done(&r);

    r = run(NULL, NULL);
    cr_assert_eq(r.code, 64);
    cr_assert_str_eq(r.err, "gpu-validator: --mode is required (driver, toolkit, plugin, mig or "
                            "cuda)\nRun 'gpu-validator --help' for usage.\n");
    cr_assert_str_empty(r.out);
    done(&r);

    const char *bad[] = {"--mode", "gpu", NULL};
    r = run(bad, NULL);
    cr_assert_eq(r.code, 64);
    cr_assert(strstr(r.err, "unknown mode 'gpu'"), "%s", r.err);
    done(&r);
}
