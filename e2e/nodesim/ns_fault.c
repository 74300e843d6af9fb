/* ns_fault: parser of nodesim's fault specs (see ns_fault.h for the grammar). */
#include "ns_fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KNOWN "xid, gpu-lost, driver-fail, mig-fail, mig-hang, notready, slow"

static void clear(ns_faults *f)
{
    memset(f, 0, sizeof(*f));
    f->slow_factor = 1;
}

bool ns_fault_none(const ns_faults *f)
{
    return !f->xid_gpus && !f->lost_gpus && !f->driver_fail && !f->mig_fail && !f->mig_hang &&
           !f->notready && f->slow_factor <= 1;
}

int ns_fault_count_bits(uint32_t mask, int n)
{
    int c = 0;
    for (int i = 0; i < n && i < NS_FAULT_MAX_GPUS; i++)
        c += (mask >> i) & 1u;
    return c;
}

/* Parses a decimal integer in [lo, hi]; false otherwise. */
static bool int_in(const char *s, long lo, long hi, long *out)
{
    if (!*s)
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* One entry "kind[:k=v]...", NUL-terminated and writable. */
static kc_code parse_entry(char *entry, const char *orig, int n_gpus, ns_faults *f, kc_err *err)
{
    char *save = NULL;
    char *kind = strtok_r(entry, ":", &save);
    if (!kind)
        return kc_err_set(err, KC_EINVALID, "fault \"%s\": empty entry", orig);
    bool gpu_fault = !strcmp(kind, "xid") || !strcmp(kind, "gpu-lost");
    long gpu = !strcmp(kind, "gpu-lost") ? n_gpus - 1 : 0, code = 13, factor = 10;
    char *opt;
    while ((opt = strtok_r(NULL, ":", &save))) {
        char *eq = strchr(opt, '=');
        if (!eq)
            return kc_err_set(err, KC_EINVALID, "fault \"%s\": option \"%s\" is not key=value",
                              orig, opt);
        *eq = '\0';
        const char *val = eq + 1;
        if (gpu_fault && !strcmp(opt, "gpu")) {
            if (!int_in(val, 0, NS_FAULT_MAX_GPUS - 1, &gpu))
                return kc_err_set(err, KC_EINVALID, "fault \"%s\": gpu=%s is not a GPU index", orig,
                                  val);
        } else if (!strcmp(kind, "xid") && !strcmp(opt, "code")) {
            if (!int_in(val, 1, 1000, &code))
                return kc_err_set(err, KC_EINVALID,
                                  "fault \"%s\": code=%s is not an XID code (1-1000)", orig, val);
        } else if (!strcmp(kind, "slow") && !strcmp(opt, "factor")) {
            if (!int_in(val, 1, 1000, &factor))
                return kc_err_set(err, KC_EINVALID,
                                  "fault \"%s\": factor=%s is not an integer 1-1000", orig, val);
        } else {
            return kc_err_set(err, KC_EINVALID, "fault \"%s\": %s takes no option \"%s\"", orig,
                              kind, opt);
        }
    }
    if (gpu_fault) {
        if (n_gpus <= 0)
            return kc_err_set(err, KC_EINVALID, "fault \"%s\": the node has no GPUs", orig);
        if (gpu >= n_gpus)
            return kc_err_set(err, KC_EINVALID,
                              "fault \"%s\": gpu %ld does not exist (the node has %d GPUs, 0-%d)",
                              orig, gpu, n_gpus, n_gpus - 1);
        if (!strcmp(kind, "xid")) {
            f->xid_gpus |= 1u << gpu;
            f->xid_code[gpu] = (int)code;
        } else {
            f->lost_gpus |= 1u << gpu;
        }
    } else if (!strcmp(kind, "driver-fail"))
        f->driver_fail = true;
    else if (!strcmp(kind, "mig-fail"))
        f->mig_fail = true;
    else if (!strcmp(kind, "mig-hang"))
        f->mig_hang = true;
    else if (!strcmp(kind, "notready"))
        f->notready = true;
    else if (!strcmp(kind, "slow"))
        f->slow_factor = (int)factor;
    else
        return kc_err_set(err, KC_EINVALID, "fault \"%s\": unknown fault \"%s\" (known: " KNOWN ")",
                          orig, kind);
    return KC_OK;
}

kc_code ns_fault_parse(const char *spec, int n_gpus, ns_faults *out, kc_err *err)
{
    clear(out);
    if (!spec || !*spec)
        return KC_OK;
    if (strlen(spec) > 4096)
        return kc_err_set(err, KC_EINVALID, "faults: longer than 4096 characters");
    char *copy = strdup(spec);
    if (!copy)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    ns_faults f;
    clear(&f);
    kc_code rc = KC_OK;
    char *save = NULL;
    for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        while (*e == ' ')
            e++;
        size_t n = strlen(e);
        while (n && e[n - 1] == ' ')
            e[--n] = '\0';
        if (!*e)
            continue;
        char orig[128];
        snprintf(orig, sizeof(orig), "%s", e);
        if ((rc = parse_entry(e, orig, n_gpus, &f, err)) != KC_OK)
            break;
    }
    free(copy);
    if (rc == KC_OK)
        *out = f;
    return rc;
}
