/* Test shim for libcuda.so.1: the driver API calls gpu-validator makes, run on the CPU by a small
 * PTX interpreter, with switches (environment) for failures. Built in the test tree only.
 *
 * FAKECUDA_DEVICES=N      devices visible (default 1)
 * FAKECUDA_INIT_RC=N      cuInit returns N
 * FAKECUDA_LAUNCH_RC=N    cuLaunchKernel returns N
 * FAKECUDA_JIT_FAIL=1     cuModuleLoadDataEx rejects the PTX with a JIT log
 * FAKECUDA_CORRUPT=K      after a launch, element K of the third kernel argument is made wrong
 *
 * Every launch is reported on stderr ("fakecuda: launch ..."); whatever the program leaves behind
 * (device memory, modules, context references, an unbalanced cuInit) is reported when the library
 * is unloaded ("fakecuda: leaked ..."). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

#define CUDA_SUCCESS               0
#define CUDA_ERROR_INVALID_VALUE   1
#define CUDA_ERROR_OUT_OF_MEMORY   2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE       100
#define CUDA_ERROR_INVALID_DEVICE  101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_INVALID_PTX     218
#define CUDA_ERROR_INVALID_HANDLE  400
#define CUDA_ERROR_NOT_FOUND       500
#define CUDA_ERROR_ILLEGAL_ADDRESS 700
#define CUDA_ERROR_LAUNCH_TIMEOUT  702
#define CUDA_ERROR_LAUNCH_FAILED   719

#define MAX_DEVICES 8
#define MAX_ALLOCS  64
#define MAX_PARAMS  16
#define MAX_REGS    256
#define MAX_INSNS   256
#define MAX_LABELS  32
#define STEP_LIMIT  100000

static const struct {
    CUresult rc;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT",
     "the launch timed out and was terminated"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
};

/* ---- PTX model ------------------------------------------------------------------------------- */

enum opnd_kind { O_NONE, O_REG, O_IMM, O_FIMM, O_SREG, O_PARAM, O_ADDR, O_LABEL };
enum sreg { S_TID, S_NTID, S_CTAID, S_NCTAID };

struct opnd {
    enum opnd_kind kind;
    int reg; /* O_REG, O_ADDR: register index */
    long long imm;
    float fimm;
    int sreg, dim; /* O_SREG */
    int param;     /* O_PARAM */
    int label;     /* O_LABEL: instruction index, resolved after parsing */
    char name[64]; /* O_LABEL before resolution */
};

struct insn {
    int guard; /* register index of the predicate, -1 none */
    int guard_neg;
    char op[48];
    int nopnd;
    struct opnd o[4];
};

struct reg_decl {
    char prefix[16];
    char type[8];
    int count;
};

struct module {
    char entry[64];
    int nparams;
    char param_name[MAX_PARAMS][64];
    int param_size[MAX_PARAMS];
    int nregdecl;
    struct reg_decl regdecl[16];
    int nregs; /* registers in all declarations together */
    int ninsn;
    struct insn insn[MAX_INSNS];
    int nlabels;
    char label_name[MAX_LABELS][64];
    int label_at[MAX_LABELS];
};

/* ---- driver state ---------------------------------------------------------------------------- */

struct ctx {
    int device;
    int refs;
};

static int g_init;
static int g_ndev = -1;
static struct ctx g_ctx[MAX_DEVICES];
static struct ctx *g_current;
static struct {
    unsigned char *p;
    size_t size;
} g_alloc[MAX_ALLOCS];
static int g_live_allocs;
static int g_live_modules;
static CUresult g_sticky; /* error of the last launch, reported by cuCtxSynchronize */

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

static int ndevices(void)
{
    if (g_ndev < 0) {
        g_ndev = (int)env_long("FAKECUDA_DEVICES", 1);
        if (g_ndev > MAX_DEVICES)
            g_ndev = MAX_DEVICES;
    }
    return g_ndev;
}

__attribute__((destructor)) static void fakecuda_fini(void)
{
    int refs = 0;
    for (int i = 0; i < MAX_DEVICES; i++)
        refs += g_ctx[i].refs;
    if (g_live_allocs || g_live_modules || refs)
        fprintf(stderr,
                "fakecuda: leaked %d device allocation(s), %d module(s), %d context reference(s)\n",
                g_live_allocs, g_live_modules, refs);
    for (int i = 0; i < MAX_ALLOCS; i++)
        free(g_alloc[i].p);
}

/* ---- PTX parsing ----------------------------------------------------------------------------- */

struct parse {
    struct module *m;
    char *log;
    size_t loglen;
};

static int fail(struct parse *ps, const char *fmt, const char *arg)
{
    if (ps->log && ps->loglen) {
        snprintf(ps->log, ps->loglen, "ptx: ");
        size_t n = strlen(ps->log);
        snprintf(ps->log + n, ps->loglen - n, fmt, arg);
    }
    return -1;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Index of register name ("%r4"), or -1 when no declaration covers it. */
static int reg_index(const struct module *m, const char *name)
{
    int base = 0;
    for (int i = 0; i < m->nregdecl; i++) {
        const struct reg_decl *d = &m->regdecl[i];
        size_t pl = strlen(d->prefix);
        if (strncmp(name, d->prefix, pl) == 0 && name[pl] >= '0' && name[pl] <= '9') {
            char *end;
            long k = strtol(name + pl, &end, 10);
            if (*end == '\0' && k < d->count)
                return base + (int)k;
        }
        base += d->count;
    }
    return -1;
}

static int parse_opnd(struct parse *ps, char *text, struct opnd *o)
{
    struct module *m = ps->m;
    char *t = trim(text);
    memset(o, 0, sizeof(*o));
    if (*t == '[') {
        char *close = strchr(t, ']');
        if (!close || close[1])
            return fail(ps, "bad address operand '%s'", t);
        *close = '\0';
        char *inner = trim(t + 1);
        if (*inner == '%') {
            o->kind = O_ADDR;
            o->reg = reg_index(m, inner);
            return o->reg < 0 ? fail(ps, "undeclared register '%s'", inner) : 0;
        }
        for (int i = 0; i < m->nparams; i++)
            if (strcmp(inner, m->param_name[i]) == 0) {
                o->kind = O_PARAM;
                o->param = i;
                return 0;
            }
        return fail(ps, "unknown parameter '%s'", inner);
    }
    if (*t == '%') {
        static const char *const sregs[] = {"%tid", "%ntid", "%ctaid", "%nctaid"};
        for (int s = 0; s < 4; s++) {
            size_t n = strlen(sregs[s]);
            if (strncmp(t, sregs[s], n) == 0 && t[n] == '.' && t[n + 1] >= 'x' && t[n + 1] <= 'z' &&
                !t[n + 2]) {
                o->kind = O_SREG;
                o->sreg = s;
                o->dim = t[n + 1] - 'x';
                return 0;
            }
        }
        o->kind = O_REG;
        o->reg = reg_index(m, t);
        return o->reg < 0 ? fail(ps, "undeclared register '%s'", t) : 0;
    }
    if ((*t >= '0' && *t <= '9') || *t == '-') {
        if (strncmp(t, "0f", 2) == 0 && strlen(t) == 10) {
            uint32_t bits = (uint32_t)strtoul(t + 2, NULL, 16);
            o->kind = O_FIMM;
            memcpy(&o->fimm, &bits, sizeof(bits));
            return 0;
        }
        char *end;
        o->kind = O_IMM;
        o->imm = strtoll(t, &end, 0);
        return *end ? fail(ps, "bad immediate '%s'", t) : 0;
    }
    o->kind = O_LABEL;
    snprintf(o->name, sizeof(o->name), "%s", t);
    return 0;
}

static int parse_statement(struct parse *ps, char *st)
{
    struct module *m = ps->m;
    st = trim(st);
    if (!*st)
        return 0;
    if (strncmp(st, ".reg", 4) == 0) {
        /* .reg .TYPE %prefix<N> */
        char type[16], spec[64];
        if (m->nregdecl >= 16 || sscanf(st, ".reg .%15s %63s", type, spec) != 2)
            return fail(ps, "bad register declaration '%s'", st);
        struct reg_decl *d = &m->regdecl[m->nregdecl];
        char *lt = strchr(spec, '<');
        if (!lt || spec[0] != '%')
            return fail(ps, "unsupported register declaration '%s'", st);
        *lt = '\0';
        snprintf(d->prefix, sizeof(d->prefix), "%s", spec);
        snprintf(d->type, sizeof(d->type), "%s", type);
        d->count = atoi(lt + 1);
        if (d->count <= 0 || m->nregs + d->count > MAX_REGS)
            return fail(ps, "bad register count in '%s'", st);
        m->nregs += d->count;
        m->nregdecl++;
        return 0;
    }
    if (*st == '.')
        return fail(ps, "unsupported directive in kernel body '%s'", st);
    if (m->ninsn >= MAX_INSNS)
        return fail(ps, "too many instructions%s", "");
    struct insn *in = &m->insn[m->ninsn];
    memset(in, 0, sizeof(*in));
    in->guard = -1;
    if (*st == '@') {
        char pred[32];
        int neg = st[1] == '!';
        if (sscanf(st + 1 + neg, "%31s", pred) != 1)
            return fail(ps, "bad guard in '%s'", st);
        in->guard = reg_index(m, pred);
        in->guard_neg = neg;
        if (in->guard < 0)
            return fail(ps, "undeclared predicate '%s'", pred);
        st = strpbrk(st, " \t");
        if (!st)
            return fail(ps, "guard without instruction%s", "");
        st = trim(st);
    }
    size_t oplen = strcspn(st, " \t");
    if (oplen >= sizeof(in->op))
        return fail(ps, "opcode too long in '%s'", st);
    memcpy(in->op, st, oplen);
    in->op[oplen] = '\0';
    char *args = st + oplen;
    char *save = NULL;
    for (char *a = strtok_r(args, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        if (in->nopnd >= 4)
            return fail(ps, "too many operands for '%s'", in->op);
        if (parse_opnd(ps, a, &in->o[in->nopnd++]) != 0)
            return -1;
    }
    m->ninsn++;
    return 0;
}

/* Removes // and block comments in place. */
static void strip_comments(char *s)
{
    for (char *p = s; *p; p++) {
        if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                *p++ = ' ';
            if (!*p)
                break;
        } else if (p[0] == '/' && p[1] == '*') {
            while (*p && !(p[0] == '*' && p[1] == '/'))
                *p++ = ' ';
            if (*p)
                p[0] = p[1] = ' ';
            if (!*p)
                break;
        }
    }
}

static int parse_ptx(const char *ptx, struct module *m, char *log, size_t loglen)
{
    struct parse ps = {m, log, loglen};
    int rc = -1;
    char *text = strdup(ptx);
    if (!text)
        return fail(&ps, "out of memory%s", "");
    memset(m, 0, sizeof(*m));
    strip_comments(text);
    int major = 0, minor = 0, sm = 0, addr = 0;
    char *v = strstr(text, ".version");
    if (!v || sscanf(v, ".version %d.%d", &major, &minor) != 2) {
        fail(&ps, "missing .version%s", "");
        goto out;
    }
    char *tg = strstr(text, ".target");
    if (!tg || sscanf(tg, ".target sm_%d", &sm) != 1) {
        fail(&ps, "missing .target sm_XX%s", "");
        goto out;
    }
    char *as = strstr(text, ".address_size");
    if (!as || sscanf(as, ".address_size %d", &addr) != 1 || addr != 64) {
        fail(&ps, "missing .address_size 64%s", "");
        goto out;
    }
    if (major < 1 || major > 9 || sm < 20) {
        fail(&ps, "unsupported .version/.target%s", "");
        goto out;
    }
    char *e = strstr(text, ".entry");
    if (!e || sscanf(e, ".entry %63[A-Za-z0-9_$]", m->entry) != 1) {
        fail(&ps, "no .entry%s", "");
        goto out;
    }
    char *open = strchr(e, '('), *close = open ? strchr(open, ')') : NULL;
    if (!open || !close) {
        fail(&ps, "entry %s has no parameter list", m->entry);
        goto out;
    }
    *close = '\0';
    char *save = NULL;
    for (char *p = strtok_r(open + 1, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char type[16], name[64];
        if (m->nparams >= MAX_PARAMS || sscanf(p, " .param .%15s %63s", type, name) != 2) {
            fail(&ps, "bad parameter '%s'", trim(p));
            goto out;
        }
        int size =
            strcmp(type, "u64") == 0 || strcmp(type, "b64") == 0 || strcmp(type, "s64") == 0   ? 8
            : strcmp(type, "u32") == 0 || strcmp(type, "b32") == 0 || strcmp(type, "s32") == 0 ? 4
                                                                                               : 0;
        if (!size) {
            fail(&ps, "unsupported parameter type '%s'", type);
            goto out;
        }
        snprintf(m->param_name[m->nparams], sizeof(m->param_name[0]), "%s", name);
        m->param_size[m->nparams++] = size;
    }
    char *body = strchr(close + 1, '{');
    char *end = body ? strrchr(body, '}') : NULL;
    if (!body || !end) {
        fail(&ps, "entry %s has no body", m->entry);
        goto out;
    }
    *end = '\0';
    /* Statements end with ';'; labels ("NAME:") stand before them. */
    char *s = body + 1;
    while (*s) {
        size_t n = strcspn(s, ";:");
        char sep = s[n];
        s[n] = '\0';
        if (sep == ':') {
            char *label = trim(s);
            if (m->nlabels >= MAX_LABELS || !*label) {
                fail(&ps, "bad label '%s'", label);
                goto out;
            }
            snprintf(m->label_name[m->nlabels], sizeof(m->label_name[0]), "%s", label);
            m->label_at[m->nlabels++] = m->ninsn;
        } else if (parse_statement(&ps, s) != 0) {
            goto out;
        } else if (sep == '\0' && *trim(s)) {
            fail(&ps, "statement without ';'%s", "");
            goto out;
        }
        if (!sep)
            break;
        s += n + 1;
    }
    /* Resolve branch targets. */
    for (int i = 0; i < m->ninsn; i++)
        for (int k = 0; k < m->insn[i].nopnd; k++) {
            struct opnd *o = &m->insn[i].o[k];
            if (o->kind != O_LABEL)
                continue;
            o->label = -1;
            for (int l = 0; l < m->nlabels; l++)
                if (strcmp(o->name, m->label_name[l]) == 0)
                    o->label = m->label_at[l];
            if (o->label < 0) {
                fail(&ps, "unknown label '%s'", o->name);
                goto out;
            }
        }
    rc = 0;
out:
    free(text);
    return rc;
}

/* ---- PTX execution --------------------------------------------------------------------------- */

struct thread {
    unsigned int tid[3], ntid[3], ctaid[3], nctaid[3];
    void **params;
    uint64_t r[MAX_REGS];
    long stores;
};

static int in_allocation(uint64_t addr, size_t bytes)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        uint64_t base = (uint64_t)(uintptr_t)g_alloc[i].p;
        if (g_alloc[i].p && addr >= base && addr + bytes <= base + g_alloc[i].size)
            return 1;
    }
    return 0;
}

static uint64_t value(const struct module *m, const struct thread *t, const struct opnd *o)
{
    (void)m;
    switch (o->kind) {
    case O_REG:
        return t->r[o->reg];
    case O_IMM:
        return (uint64_t)o->imm;
    case O_FIMM: {
        uint32_t bits;
        memcpy(&bits, &o->fimm, sizeof(bits));
        return bits;
    }
    case O_SREG: {
        const unsigned int *v[] = {t->tid, t->ntid, t->ctaid, t->nctaid};
        return v[o->sreg][o->dim];
    }
    default:
        return 0;
    }
}

static float as_f32(uint64_t v)
{
    uint32_t bits = (uint32_t)v;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static uint64_t from_f32(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    return bits;
}

static int starts(const char *op, const char *prefix)
{
    return strncmp(op, prefix, strlen(prefix)) == 0;
}

/* Runs one thread to its ret; CUDA_SUCCESS or the error a GPU would report. */
static CUresult run_thread(const struct module *m, struct thread *t)
{
    int pc = 0;
    for (long steps = 0; pc < m->ninsn; steps++) {
        if (steps > STEP_LIMIT)
            return CUDA_ERROR_LAUNCH_TIMEOUT;
        const struct insn *in = &m->insn[pc++];
        if (in->guard >= 0 && ((t->r[in->guard] != 0) == in->guard_neg))
            continue;
        const char *op = in->op;
        const struct opnd *o = in->o;
        uint64_t *d = o[0].kind == O_REG ? &t->r[o[0].reg] : NULL;
        if (strcmp(op, "ret") == 0 || strcmp(op, "exit") == 0)
            return CUDA_SUCCESS;
        if (starts(op, "bra")) {
            pc = o[0].label;
        } else if (starts(op, "mov.") && d && in->nopnd == 2) {
            *d = value(m, t, &o[1]);
        } else if (starts(op, "ld.param.") && d && o[1].kind == O_PARAM) {
            uint64_t v = 0;
            memcpy(&v, t->params[o[1].param], (size_t)m->param_size[o[1].param]);
            *d = strstr(op, "32") ? (uint32_t)v : v;
        } else if (strcmp(op, "cvta.to.global.u64") == 0 && d) {
            *d = value(m, t, &o[1]);
        } else if (strcmp(op, "mad.lo.s32") == 0 && d && in->nopnd == 4) {
            *d = (uint32_t)((uint32_t)value(m, t, &o[1]) * (uint32_t)value(m, t, &o[2]) +
                            (uint32_t)value(m, t, &o[3]));
        } else if ((strcmp(op, "mul.lo.s32") == 0 || strcmp(op, "mul.lo.u32") == 0) && d) {
            *d = (uint32_t)((uint32_t)value(m, t, &o[1]) * (uint32_t)value(m, t, &o[2]));
        } else if ((strcmp(op, "add.s32") == 0 || strcmp(op, "add.u32") == 0) && d) {
            *d = (uint32_t)((uint32_t)value(m, t, &o[1]) + (uint32_t)value(m, t, &o[2]));
        } else if (strcmp(op, "mul.wide.s32") == 0 && d) {
            *d = (uint64_t)((int64_t)(int32_t)value(m, t, &o[1]) *
                            (int64_t)(int32_t)value(m, t, &o[2]));
        } else if ((strcmp(op, "add.s64") == 0 || strcmp(op, "add.u64") == 0) && d) {
            *d = value(m, t, &o[1]) + value(m, t, &o[2]);
        } else if (starts(op, "setp.") && d) {
            char cmp[8], type[8];
            if (sscanf(op, "setp.%7[a-z].%7s", cmp, type) != 2)
                return CUDA_ERROR_LAUNCH_FAILED;
            int64_t a, b;
            if (type[0] == 's') {
                a = (int32_t)value(m, t, &o[1]);
                b = (int32_t)value(m, t, &o[2]);
            } else {
                a = (uint32_t)value(m, t, &o[1]);
                b = (uint32_t)value(m, t, &o[2]);
            }
            int r = strcmp(cmp, "ge") == 0   ? a >= b
                    : strcmp(cmp, "gt") == 0 ? a > b
                    : strcmp(cmp, "lt") == 0 ? a < b
                    : strcmp(cmp, "le") == 0 ? a <= b
                    : strcmp(cmp, "eq") == 0 ? a == b
                    : strcmp(cmp, "ne") == 0 ? a != b
                                             : -1;
            if (r < 0)
                return CUDA_ERROR_LAUNCH_FAILED;
            *d = (uint64_t)r;
        } else if (strcmp(op, "ld.global.f32") == 0 && d && o[1].kind == O_ADDR) {
            uint64_t addr = t->r[o[1].reg];
            float f;
            if (!in_allocation(addr, sizeof(f)))
                return CUDA_ERROR_ILLEGAL_ADDRESS;
            memcpy(&f, (void *)(uintptr_t)addr, sizeof(f));
            *d = from_f32(f);
        } else if (strcmp(op, "st.global.f32") == 0 && o[0].kind == O_ADDR) {
            uint64_t addr = t->r[o[0].reg];
            float f = as_f32(value(m, t, &o[1]));
            if (!in_allocation(addr, sizeof(f)))
                return CUDA_ERROR_ILLEGAL_ADDRESS;
            memcpy((void *)(uintptr_t)addr, &f, sizeof(f));
            t->stores++;
        } else if ((strcmp(op, "add.f32") == 0 || strcmp(op, "add.rn.f32") == 0) && d) {
            *d = from_f32(as_f32(value(m, t, &o[1])) + as_f32(value(m, t, &o[2])));
        } else {
            fprintf(stderr, "fakecuda: unsupported instruction '%s'\n", op);
            return CUDA_ERROR_LAUNCH_FAILED;
        }
    }
    return CUDA_SUCCESS; /* fell off the end: as ret */
}

/* ---- driver API ------------------------------------------------------------------------------ */

#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (!g_init)                                                                               \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
    } while (0)
#define NEED_CTX()                                                                                 \
    do {                                                                                           \
        NEED_INIT();                                                                               \
        if (!g_current || g_current->refs <= 0)                                                    \
            return CUDA_ERROR_INVALID_CONTEXT;                                                     \
    } while (0)

CUresult cuGetErrorName(CUresult rc, const char **name)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].rc == rc) {
            *name = errors[i].name;
            return CUDA_SUCCESS;
        }
    *name = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult rc, const char **text)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].rc == rc) {
            *text = errors[i].text;
            return CUDA_SUCCESS;
        }
    *text = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuInit(unsigned int flags)
{
    CUresult rc = (CUresult)env_long("FAKECUDA_INIT_RC", CUDA_SUCCESS);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ndevices() == 0)
        return CUDA_ERROR_NO_DEVICE;
    g_init = 1;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 12040;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    NEED_INIT();
    *count = ndevices();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    NEED_INIT();
    if (ordinal < 0 || ordinal >= ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    NEED_INIT();
    if (dev < 0 || dev >= ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "Fake GPU %d (CPU shim)", dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value_out, int attrib, CUdevice dev)
{
    NEED_INIT();
    if (dev < 0 || dev >= ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    if (attrib == 75)
        *value_out = 9;
    else if (attrib == 76)
        *value_out = 0;
    else
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(struct ctx **ctx, CUdevice dev)
{
    NEED_INIT();
    if (dev < 0 || dev >= ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    g_ctx[dev].device = dev;
    g_ctx[dev].refs++;
    *ctx = &g_ctx[dev];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    NEED_INIT();
    if (dev < 0 || dev >= ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    if (g_ctx[dev].refs <= 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    g_ctx[dev].refs--;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(struct ctx *ctx)
{
    NEED_INIT();
    if (ctx && (ctx < g_ctx || ctx >= g_ctx + MAX_DEVICES || ctx->refs <= 0))
        return CUDA_ERROR_INVALID_CONTEXT;
    g_current = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    NEED_CTX();
    CUresult rc = g_sticky;
    g_sticky = CUDA_SUCCESS;
    return rc;
}

CUresult cuModuleLoadDataEx(struct module **mod, const void *image, unsigned int n, int *options,
                            void **values)
{
    NEED_CTX();
    char *log = NULL;
    size_t loglen = 0;
    for (unsigned int i = 0; i < n; i++) {
        if (options[i] == 5)
            log = values[i];
        else if (options[i] == 6)
            loglen = (size_t)(uintptr_t)values[i];
    }
    if (!mod || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if (env_long("FAKECUDA_JIT_FAIL", 0)) {
        if (log && loglen)
            snprintf(log, loglen, "ptxas fatal   : simulated JIT failure");
        return CUDA_ERROR_INVALID_PTX;
    }
    struct module *m = malloc(sizeof(*m));
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (parse_ptx(image, m, log, loglen) != 0) {
        free(m);
        return CUDA_ERROR_INVALID_PTX;
    }
    *mod = m;
    g_live_modules++;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(struct module *mod)
{
    NEED_CTX();
    if (!mod)
        return CUDA_ERROR_INVALID_HANDLE;
    free(mod);
    g_live_modules--;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(struct module **fn, struct module *mod, const char *name)
{
    NEED_CTX();
    if (!mod || !name)
        return CUDA_ERROR_INVALID_HANDLE;
    if (strcmp(mod->entry, name) != 0)
        return CUDA_ERROR_NOT_FOUND;
    *fn = mod; /* one entry per module */
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    NEED_CTX();
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (g_alloc[i].p)
            continue;
        /* Filled with garbage: device memory is not zeroed. */
        g_alloc[i].p = malloc(bytes);
        if (!g_alloc[i].p)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memset(g_alloc[i].p, 0xA5, bytes);
        g_alloc[i].size = bytes;
        g_live_allocs++;
        *dptr = (CUdeviceptr)(uintptr_t)g_alloc[i].p;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    NEED_CTX();
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (g_alloc[i].p && (CUdeviceptr)(uintptr_t)g_alloc[i].p == dptr) {
            free(g_alloc[i].p);
            g_alloc[i].p = NULL;
            g_live_allocs--;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes)
{
    NEED_CTX();
    if (!src || !in_allocation(dst, bytes))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes)
{
    NEED_CTX();
    if (!dst || !in_allocation(src, bytes))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(dst, (void *)(uintptr_t)src, bytes);
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(struct module *fn, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        void *stream, void **params, void **extra)
{
    NEED_CTX();
    CUresult forced = (CUresult)env_long("FAKECUDA_LAUNCH_RC", CUDA_SUCCESS);
    if (forced != CUDA_SUCCESS)
        return forced;
    if (!fn || !params || extra || !gx || !gy || !gz || !bx || !by || !bz)
        return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned long)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (fn->nparams != 4) {
        fprintf(stderr, "fakecuda: %s takes %d parameters, expected 4\n", fn->entry, fn->nparams);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct thread *t = calloc(1, sizeof(*t));
    if (!t)
        return CUDA_ERROR_OUT_OF_MEMORY;
    unsigned int grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    long threads = 0, stores = 0;
    CUresult rc = CUDA_SUCCESS;
    for (unsigned int cz = 0; cz < gz && rc == CUDA_SUCCESS; cz++)
        for (unsigned int cy = 0; cy < gy && rc == CUDA_SUCCESS; cy++)
            for (unsigned int cx = 0; cx < gx && rc == CUDA_SUCCESS; cx++)
                for (unsigned int z = 0; z < bz && rc == CUDA_SUCCESS; z++)
                    for (unsigned int y = 0; y < by && rc == CUDA_SUCCESS; y++)
                        for (unsigned int x = 0; x < bx && rc == CUDA_SUCCESS; x++) {
                            memset(t->r, 0, sizeof(t->r));
                            memcpy(t->ntid, block, sizeof(block));
                            memcpy(t->nctaid, grid, sizeof(grid));
                            t->tid[0] = x, t->tid[1] = y, t->tid[2] = z;
                            t->ctaid[0] = cx, t->ctaid[1] = cy, t->ctaid[2] = cz;
                            t->params = params;
                            t->stores = 0;
                            rc = run_thread(fn, t);
                            stores += t->stores;
                            threads++;
                        }
    free(t);
    int n = 0;
    memcpy(&n, params[3], sizeof(n));
    fprintf(stderr,
            "fakecuda: launch %s grid %ux%ux%u block %ux%ux%u on device %d: %ld threads ran, "
            "%ld stores, n=%d, %s\n",
            fn->entry, gx, gy, gz, bx, by, bz, g_current->device, threads, stores, n,
            rc == CUDA_SUCCESS ? "ok" : "fault");
    long corrupt = env_long("FAKECUDA_CORRUPT", -1);
    if (rc == CUDA_SUCCESS && corrupt >= 0 && corrupt < n) {
        CUdeviceptr c;
        memcpy(&c, params[2], sizeof(c));
        float *cf = (float *)(uintptr_t)c;
        if (in_allocation(c + (CUdeviceptr)corrupt * sizeof(float), sizeof(float)))
            cf[corrupt] += 3.0f;
    }
    g_sticky = rc; /* kernel faults surface at the next synchronization, as on a GPU */
    return CUDA_SUCCESS;
}
