/* Tests for the validator's parts in-process: arguments, the result check, the PTX text, library
 * loading errors, and vectorAdd through the CPU shim of the CUDA driver. */
#include <criterion/criterion.h>

#include "vtest_tmp.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "validator.h"
#include "validator_cuda.h"
#include "validator_nvml.h"
#include "vectoradd_ptx.h"

static int parse(char **argv, struct val_options *opt, char *err, size_t errlen)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    return val_parse_args(argc, argv, opt, err, errlen);
}

Test(args, modes_and_options)
{
    static const char *const names[] = {"driver", "toolkit", "plugin", "mig", "cuda"};
    struct val_options opt;
    char err[256] = "";
    for (int m = 0; m < 5; m++) {
        char *argv[] = {"gpu-validator", "--mode", (char *)names[m], NULL};
        cr_assert_eq(parse(argv, &opt, err, sizeof(err)), VAL_OK, "%s", err);
        cr_assert_eq(opt.mode, (enum val_mode)(VAL_MODE_DRIVER + m));
        cr_assert_str_eq(val_mode_name(opt.mode), names[m]);
        cr_assert_null(opt.status_file);
    }
    char *eq[] = {"gpu-validator", "--mode=mig", "--status-file=/run/x/mig-ready", NULL};
    cr_assert_eq(parse(eq, &opt, err, sizeof(err)), VAL_OK, "%s", err);
    cr_assert_eq(opt.mode, VAL_MODE_MIG);
    cr_assert_str_eq(opt.status_file, "/run/x/mig-ready");
    char *sep[] = {"gpu-validator", "--status-file", "/tmp/s", "--mode", "cuda", NULL};
    cr_assert_eq(parse(sep, &opt, err, sizeof(err)), VAL_OK, "%s", err);
    cr_assert_eq(opt.mode, VAL_MODE_CUDA);
    cr_assert_str_eq(opt.status_file, "/tmp/s");
    char *help[] = {"gpu-validator", "--help", NULL};
    cr_assert_eq(parse(help, &opt, err, sizeof(err)), VAL_OK);
    cr_assert(opt.help);
    char *ver[] = {"gpu-validator", "--version", NULL};
    cr_assert_eq(parse(ver, &opt, err, sizeof(err)), VAL_OK);
    cr_assert(opt.version);
    cr_assert_null(val_mode_name(VAL_MODE_NONE));
}

Test(args, usage_errors)
{
    struct val_options opt;
    char err[256];
    struct {
        char *argv[4];
        const char *msg;
    } cases[] = {
        {{"gpu-validator", NULL}, "--mode is required"},
        {{"gpu-validator", "--mode", "gpu", NULL}, "unknown mode 'gpu'"},
        {{"gpu-validator", "--mode", NULL}, "--mode needs a value"},
        {{"gpu-validator", "--mode=", NULL}, "unknown mode ''"},
        {{"gpu-validator", "--mode", "cuda", "--fast"}, "unknown argument '--fast'"},
        {{"gpu-validator", "--modes=cuda", NULL}, "unknown argument '--modes=cuda'"},
        {{"gpu-validator", "--mode=cuda", "--status-file=", NULL}, "--status-file needs a path"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        err[0] = '\0';
        int argc = 0;
        while (argc < 4 && cases[i].argv[argc])
            argc++;
        cr_assert_eq(val_parse_args(argc, cases[i].argv, &opt, err, sizeof(err)), VAL_USAGE,
                     "case %zu", i);
        cr_assert(strstr(err, cases[i].msg), "case %zu: %s", i, err);
    }
}

Test(vectoradd, launch_shape)
{
    cr_assert_eq(vectoradd_blocks(VECTORADD_ELEMENTS, VECTORADD_THREADS_PER_BLOCK), 196);
    cr_assert_eq(vectoradd_blocks(256, 256), 1);
    cr_assert_eq(vectoradd_blocks(257, 256), 2);
    cr_assert_eq(vectoradd_blocks(1, 256), 1);
}

Test(vectoradd, fill_is_random_in_unit_range_and_repeatable)
{
    enum { N = 4096 };
    static float a[N], b[N], c[N];
    unsigned int s1 = 42, s2 = 42, s3 = 43;
    vectoradd_fill(a, N, &s1);
    vectoradd_fill(b, N, &s2);
    vectoradd_fill(c, N, &s3);
    cr_assert_eq(memcmp(a, b, sizeof(a)), 0);
    cr_assert_neq(memcmp(a, c, sizeof(a)), 0);
    double sum = 0;
    int distinct = 0;
    for (int i = 0; i < N; i++) {
        cr_assert(a[i] >= 0.0f && a[i] < 1.0f, "a[%d] = %g", i, a[i]);
        sum += a[i];
        distinct += i > 0 && a[i] != a[i - 1];
    }
    cr_assert(fabs(sum / N - 0.5) < 0.05, "mean %g", sum / N);
    cr_assert_gt(distinct, N - 10);
    /* The state moves on: the next vector differs from the first. */
    vectoradd_fill(b, N, &s1);
    cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
}

Test(vectoradd, verify_finds_the_first_wrong_element)
{
    enum { N = 1000 };
    static float a[N], b[N], c[N];
    char err[256] = "";
    for (int i = 0; i < N; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = 1.0f;
        c[i] = a[i] + b[i];
    }
    cr_assert_eq(vectoradd_verify(a, b, c, N, err, sizeof(err)), -1);
    cr_assert_str_empty(err);
    /* Within the tolerance passes, beyond it fails. */
    c[10] = a[10] + b[10] + 5e-6f;
    cr_assert_eq(vectoradd_verify(a, b, c, N, err, sizeof(err)), -1);
    a[123] = 1.0f, b[123] = 2.0f, c[123] = 7.0f;
    c[500] = -1.0f;
    cr_assert_eq(vectoradd_verify(a, b, c, N, err, sizeof(err)), 123);
    cr_assert_str_eq(err, "Result verification failed at element 123: 1 + 2 != 7");
    c[123] = 3.0f;
    cr_assert_eq(vectoradd_verify(a, b, c, N, err, sizeof(err)), 500);
    c[500] = a[500] + b[500];
    c[N - 1] = NAN;
    cr_assert_eq(vectoradd_verify(a, b, c, N, err, sizeof(err)), N - 1);
    cr_assert(strstr(err, "element 999"), "%s", err);
}

/* The text of the entry's parameter list, "(...)". */
static char *param_list(void)
{
    const char *e = strstr(vectoradd_ptx, ".visible .entry vectorAdd(");
    cr_assert_not_null(e);
    const char *open = strchr(e, '('), *close = strchr(open, ')');
    cr_assert_not_null(close);
    return strndup(open, (size_t)(close - open + 1));
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

Test(ptx, header_entry_and_parameters)
{
    const char *p = vectoradd_ptx;
    cr_assert(strstr(p, "\n.version 7.0\n"));
    cr_assert(strstr(p, "\n.target sm_52\n"));
    cr_assert(strstr(p, "\n.address_size 64\n"));
    cr_assert_lt(strstr(p, ".version"), strstr(p, ".target"));
    cr_assert_lt(strstr(p, ".target"), strstr(p, ".entry"));
    cr_assert_eq(count(p, ".entry"), 1);
    cr_assert_str_eq(VECTORADD_ENTRY, "vectorAdd");
    char *params = param_list();
    cr_assert_eq(count(params, ".param"), 4, "%s", params);
    cr_assert_eq(count(params, ".param .u64"), 3, "%s", params);
    cr_assert_eq(count(params, ".param .u32"), 1, "%s", params);
    /* The int is last: A, B, C pointers then n. */
    cr_assert_gt(strstr(params, ".param .u32"), strrchr(params, ','));
    free(params);
    cr_assert_eq(count(p, "{"), 1);
    cr_assert_eq(count(p, "}"), 1);
    cr_assert_gt(strchr(p, '{'), strstr(p, ".entry"));
    cr_assert_eq(p[strlen(p) - 2], '}');
}

Test(ptx, index_and_bounds_check)
{
    const char *p = vectoradd_ptx;
    /* i = blockDim.x * blockIdx.x + threadIdx.x */
    cr_assert(strstr(p, "mov.u32 %r1, %ntid.x;"));
    cr_assert(strstr(p, "mov.u32 %r2, %ctaid.x;"));
    cr_assert(strstr(p, "mov.u32 %r3, %tid.x;"));
    cr_assert(strstr(p, "mad.lo.s32 %r4, %r1, %r2, %r3;"));
    /* if (i >= n) return, before any memory access */
    const char *setp = strstr(p, "setp.ge.s32 %p1, %r4, %r5;");
    const char *bra = strstr(p, "@%p1 bra DONE;");
    cr_assert(strstr(p, "ld.param.u32 %r5, [vectorAdd_param_n];"));
    cr_assert(setp && bra && setp < bra);
    cr_assert_lt(bra, strstr(p, "ld.global"));
    cr_assert_gt(strstr(p, "DONE:"), strstr(p, "st.global.f32"));
    cr_assert(strstr(p, "DONE:\n\tret;"));
    /* C[i] = A[i] + B[i] with 4-byte elements */
    cr_assert(strstr(p, "mul.wide.s32 %rd7, %r4, 4;"));
    cr_assert_eq(count(p, "ld.global.f32"), 2);
    cr_assert_eq(count(p, "st.global.f32"), 1);
    cr_assert(strstr(p, "add.rn.f32 %f3, %f1, %f2;"));
    cr_assert(strstr(p, "st.global.f32 [%rd10], %f3;"));
    cr_assert(strstr(p, "cvta.to.global.u64 %rd6, %rd3;"));
}

#ifdef VALIDATOR_PTXAS
/* Only where the build found ptxas; elsewhere the structure tests above stand in. */
Test(ptx, assembles_with_ptxas)
{
    const char *ptxas = VALIDATOR_PTXAS;
    char dir[512];
    cr_assert_not_null(mkdtemp(vtest_tmp(dir, sizeof(dir), "vptx")));
    char src[600], obj[600];
    snprintf(src, sizeof(src), "%s/vectoradd.ptx", dir);
    snprintf(obj, sizeof(obj), "%s/vectoradd.cubin", dir);
    FILE *f = fopen(src, "w");
    cr_assert_not_null(f);
    fputs(vectoradd_ptx, f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        execl(ptxas, ptxas, "-arch=sm_52", src, "-o", obj, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ptxas failed: status %d", st);
    cr_assert_eq(access(obj, R_OK), 0);
    unlink(obj);
    unlink(src);
    rmdir(dir);
}
#endif

Test(load, missing_cuda_library_is_no_driver)
{
    struct vcuda cu;
    char err[1024] = "";
    cr_assert_eq(vcuda_load(&cu, "/nonexistent/libcuda.so.1", err, sizeof(err)), VAL_NO_DRIVER);
    cr_assert(strstr(err, "no NVIDIA driver: /nonexistent/libcuda.so.1: cannot open shared object "
                          "file"),
              "%s", err);
    cr_assert(strstr(err, "nvidia runtime"), "%s", err);
    cr_assert_null(cu.lib);
    vcuda_unload(&cu);
}

Test(load, library_without_driver_symbols_is_no_driver)
{
    struct vcuda cu;
    struct vnvml nv;
    char err[1024] = "";
    const char *nvml = getenv("GPU_VALIDATOR_LIBNVML"), *cuda = getenv("GPU_VALIDATOR_LIBCUDA");
    cr_assert(nvml && cuda, "run through ctest: the shim paths come from the environment");
    cr_assert_eq(vcuda_load(&cu, nvml, err, sizeof(err)), VAL_NO_DRIVER);
    cr_assert(strstr(err, "has no cuInit"), "%s", err);
    cr_assert_eq(vnvml_open(&nv, cuda, err, sizeof(err)), VAL_NO_DRIVER);
    cr_assert(strstr(err, "has no nvmlInit_v2"), "%s", err);
    cr_assert_eq(vnvml_open(&nv, "/nonexistent/libnvidia-ml.so.1", err, sizeof(err)),
                 VAL_NO_DRIVER);
    cr_assert(strstr(err, "/nonexistent/libnvidia-ml.so.1: cannot open shared object file"), "%s",
              err);
}

/* GPU_VALIDATOR_DRIVER_ROOT: NVML is found in the root's library folders (here usr/lib64), and a
 * root without it is "no NVIDIA driver" naming the root. */
Test(load, nvml_found_under_a_driver_root)
{
    const char *nvml = getenv("GPU_VALIDATOR_LIBNVML");
    cr_assert(nvml, "run through ctest: the shim paths come from the environment");
    char *shim = strdup(nvml);
    char root[512], dir[600], link[700], err[1024] = "";
    cr_assert_not_null(mkdtemp(vtest_tmp(root, sizeof(root), "vroot")));
    snprintf(dir, sizeof(dir), "%s/usr", root);
    cr_assert_eq(mkdir(dir, 0755), 0);
    snprintf(dir, sizeof(dir), "%s/usr/lib64", root);
    cr_assert_eq(mkdir(dir, 0755), 0);
    struct vnvml nv;
    unsetenv("GPU_VALIDATOR_LIBNVML");
    setenv("GPU_VALIDATOR_DRIVER_ROOT", root, 1);
    cr_assert_eq(vnvml_open(&nv, NULL, err, sizeof(err)), VAL_NO_DRIVER);
    cr_assert(strstr(err, "libnvidia-ml.so.1 not found under the driver root "), "%s", err);
    cr_assert(strstr(err, root), "%s", err);
    snprintf(link, sizeof(link), "%s/libnvidia-ml.so.1", dir);
    cr_assert_eq(symlink(shim, link), 0);
    cr_assert_eq(vnvml_open(&nv, NULL, err, sizeof(err)), VAL_OK, "%s", err);
    vnvml_close(&nv);
    unsetenv("GPU_VALIDATOR_DRIVER_ROOT");
    setenv("GPU_VALIDATOR_LIBNVML", shim, 1);
    unlink(link);
    rmdir(dir);
    snprintf(dir, sizeof(dir), "%s/usr", root);
    rmdir(dir);
    rmdir(root);
    free(shim);
}

Test(shim, vectoradd_in_process)
{
    struct vcuda cu;
    char err[1024] = "";
    char *buf = NULL;
    size_t len = 0;
    int count = 0;
    FILE *out = open_memstream(&buf, &len);
    cr_assert_not_null(out);
    cr_assert_eq(vcuda_load(&cu, NULL, err, sizeof(err)), VAL_OK, "%s", err);
    cr_assert_eq(vcuda_init(&cu, &count, out, err, sizeof(err)), VAL_OK, "%s", err);
    cr_assert_eq(count, 1);
    cr_assert_eq(vcuda_vectoradd(&cu, 0, out, err, sizeof(err)), VAL_OK, "%s", err);
    /* A device that does not exist is an error with the driver's name for it. */
    cr_assert_eq(vcuda_vectoradd(&cu, 5, out, err, sizeof(err)), VAL_FAILED);
    cr_assert_str_eq(err, "cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE (invalid device ordinal)");
    vcuda_unload(&cu);
    fclose(out);
    cr_assert(strstr(buf, "CUDA driver API version 12.4, 1 CUDA device(s) visible\n"), "%s", buf);
    cr_assert(strstr(buf, "CUDA kernel launch with 196 blocks of 256 threads\n"), "%s", buf);
    cr_assert(strstr(buf, "Verified 50000 of 50000 elements on CUDA device 0"), "%s", buf);
    free(buf);
}

/* vectoradd_ptx with the first occurrence of from replaced by to. */
static char *mutate(const char *from, const char *to)
{
    const char *at = strstr(vectoradd_ptx, from);
    cr_assert_not_null(at, "'%s' not in the PTX", from);
    size_t pre = (size_t)(at - vectoradd_ptx);
    size_t len = strlen(vectoradd_ptx) - strlen(from) + strlen(to) + 1;
    char *s = malloc(len);
    cr_assert_not_null(s);
    snprintf(s, len, "%.*s%s%s", (int)pre, vectoradd_ptx, to, at + strlen(from));
    return s;
}

/* The host flow catches a wrong kernel: each broken variant fails with the error a GPU gives. */
Test(shim, broken_kernels_fail_the_validation)
{
    struct {
        const char *from, *to, *msg;
    } cases[] = {
        /* bounds check off by one: thread n writes past C */
        {"setp.ge.s32", "setp.gt.s32", "CUDA_ERROR_ILLEGAL_ADDRESS"},
        /* no bounds check at all */
        {"\t@%p1 bra DONE;\n", "\n", "CUDA_ERROR_ILLEGAL_ADDRESS"},
        /* 8-byte stride */
        {"%r4, 4;", "%r4, 8;", "CUDA_ERROR_ILLEGAL_ADDRESS"},
        /* A + A instead of A + B */
        {"%f3, %f1, %f2;", "%f3, %f1, %f1;", "Result verification failed at element 0: "},
        /* gridDim instead of blockDim in the index: most elements never written */
        {"%r1, %ntid.x;", "%r1, %nctaid.x;", "Result verification failed at element "},
        /* stores into B instead of C */
        {"%rd10, %rd6, %rd7;", "%rd10, %rd5, %rd7;", "Result verification failed at element 0: "},
        /* a register that is not declared: the JIT rejects the text */
        {".reg .f32 %f<4>;", ".reg .f32 %f<3>;", "CUDA_ERROR_INVALID_PTX"},
        /* another entry name */
        {".entry vectorAdd(", ".entry vecAdd(", "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND"},
    };
    struct vcuda cu;
    char err[1024];
    int count = 0;
    FILE *out = fopen("/dev/null", "w");
    cr_assert_not_null(out);
    cr_assert_eq(vcuda_load(&cu, NULL, err, sizeof(err)), VAL_OK, "%s", err);
    cr_assert_eq(vcuda_init(&cu, &count, out, err, sizeof(err)), VAL_OK, "%s", err);
    cr_assert_eq(vcuda_vectoradd_ptx(&cu, 0, vectoradd_ptx, out, err, sizeof(err)), VAL_OK, "%s",
                 err);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *ptx = mutate(cases[i].from, cases[i].to);
        err[0] = '\0';
        cr_assert_eq(vcuda_vectoradd_ptx(&cu, 0, ptx, out, err, sizeof(err)), VAL_FAILED,
                     "case %zu passed", i);
        cr_assert(strstr(err, cases[i].msg), "case %zu: %s", i, err);
        free(ptx);
    }
    vcuda_unload(&cu);
    fclose(out);
}
