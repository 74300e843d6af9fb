/* ns_fleet: parser and validator of nodesim's fleet file. */
#include "ns_fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_yaml.h"

#define MAX_NODES 100000
#define MAX_GPUS  16

static const char *const group_keys[] = {
    "name",
    "count",
    "gpu",
    "gpus",
    "cpu",
    "memory",
    "pods",
    "runtime",
    "kernel",
    "os",
    "driver-version",
    "cuda-version",
    "driver",
    "toolkit",
    "labels",
    "annotations",
    "taints",
    "mig-needs-reboot",
    "ephemeral-storage",
    NULL,
};

static void group_free(ns_fleet_group *g)
{
    free(g->name);
    free(g->cpu);
    free(g->memory);
    free(g->pods);
    free(g->runtime);
    free(g->kernel);
    free(g->os_id);
    free(g->os_version);
    free(g->os_image);
    free(g->driver_version);
    free(g->cuda_version);
    json_decref(g->labels);
    json_decref(g->annotations);
    json_decref(g->taints);
}

void ns_fleet_free(ns_fleet *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_groups; i++)
        group_free(&f->groups[i]);
    free(f->groups);
    free(f);
}

void ns_fleet_node_name(const ns_fleet_group *g, int k, char *buf, size_t size)
{
    if (g->has_count)
        snprintf(buf, size, "%s-%d", g->name, k);
    else
        snprintf(buf, size, "%s", g->name);
}

/* A quantity or version given as a string or a number; def when absent. NULL + error otherwise. */
static kc_code scalar(const json_t *e, const char *key, const char *def, size_t i, char **out,
                      kc_err *err)
{
    const json_t *v = json_object_get(e, key);
    char buf[64];
    const char *s = def;
    if (json_is_string(v))
        s = json_string_value(v);
    else if (json_is_integer(v)) {
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
        s = buf;
    } else if (json_is_real(v)) {
        snprintf(buf, sizeof(buf), "%g", json_real_value(v));
        s = buf;
    } else if (v && !json_is_null(v))
        return kc_err_set(err, KC_EINVALID, "nodes[%zu].%s: expected a string or a number", i, key);
    if (s && (!*s || strpbrk(s, " \t\n")))
        return kc_err_set(err, KC_EINVALID, "nodes[%zu].%s: \"%s\" must be non-empty, no spaces", i,
                          key, s);
    *out = s ? strdup(s) : NULL;
    if (s && !*out)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    return KC_OK;
}

static kc_code provision(const json_t *e, const char *key, size_t i, ns_provision *out, kc_err *err)
{
    const json_t *v = json_object_get(e, key);
    *out = NS_PROV_CONTAINER;
    if (!v)
        return KC_OK;
    const char *s = json_string_value(v);
    if (s && strcmp(s, "container") == 0)
        return KC_OK;
    if (s && strcmp(s, "host") == 0) {
        *out = NS_PROV_HOST;
        return KC_OK;
    }
    return kc_err_set(err, KC_EINVALID,
                      "nodes[%zu].%s: expected \"container\" (the operator deploys it) or "
                      "\"host\" (preinstalled)",
                      i, key);
}

/* labels/annotations: an object of string values (numbers and booleans are written as YAML
 * reads them, so they are refused with a hint to quote them). */
static kc_code string_map(const json_t *e, const char *key, size_t i, json_t **out, kc_err *err)
{
    const json_t *v = json_object_get(e, key);
    if (!v || json_is_null(v)) {
        *out = json_object();
        return *out ? KC_OK : kc_err_set(err, KC_ENOMEM, "out of memory");
    }
    if (!json_is_object(v))
        return kc_err_set(err, KC_EINVALID, "nodes[%zu].%s: expected a map of strings", i, key);
    const char *k;
    const json_t *val;
    json_object_foreach((json_t *)v, k, val)
    {
        if (!json_is_string(val))
            return kc_err_set(err, KC_EINVALID,
                              "nodes[%zu].%s.%s: expected a string (quote values such as true, "
                              "1, on)",
                              i, key, k);
        if (!*k)
            return kc_err_set(err, KC_EINVALID, "nodes[%zu].%s: empty key", i, key);
    }
    *out = json_deep_copy(v);
    return *out ? KC_OK : kc_err_set(err, KC_ENOMEM, "out of memory");
}

static kc_code taints(const json_t *e, size_t i, json_t **out, kc_err *err)
{
    const json_t *v = json_object_get(e, "taints");
    if (!v || json_is_null(v)) {
        *out = json_array();
        return *out ? KC_OK : kc_err_set(err, KC_ENOMEM, "out of memory");
    }
    if (!json_is_array(v))
        return kc_err_set(err, KC_EINVALID, "nodes[%zu].taints: expected a list", i);
    size_t j;
    const json_t *t;
    json_array_foreach(v, j, t)
    {
        const char *key = json_string_value(json_object_get(t, "key"));
        const char *eff = json_string_value(json_object_get(t, "effect"));
        const json_t *val = json_object_get(t, "value");
        if (!json_is_object(t) || !key || !*key)
            return kc_err_set(err, KC_EINVALID, "nodes[%zu].taints[%zu].key: Required value", i, j);
        if (val && !json_is_string(val))
            return kc_err_set(err, KC_EINVALID, "nodes[%zu].taints[%zu].value: expected a string",
                              i, j);
        if (!eff || (strcmp(eff, "NoSchedule") && strcmp(eff, "PreferNoSchedule") &&
                     strcmp(eff, "NoExecute")))
            return kc_err_set(err, KC_EINVALID,
                              "nodes[%zu].taints[%zu].effect: expected NoSchedule, "
                              "PreferNoSchedule or NoExecute",
                              i, j);
        if (json_object_size(t) > (size_t)(val ? 3 : 2))
            return kc_err_set(err, KC_EINVALID,
                              "nodes[%zu].taints[%zu]: unknown key (allowed: key, value, effect)",
                              i, j);
    }
    *out = json_deep_copy(v);
    return *out ? KC_OK : kc_err_set(err, KC_ENOMEM, "out of memory");
}

static void known_models(char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t m = 0; m < kc_gpu_model_count() && off < size; m++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", m ? ", " : "",
                                kc_gpu_model_at(m)->name);
}

static kc_code parse_group(const json_t *e, size_t i, ns_fleet_group *g, kc_err *err)
{
    kc_code rc;
    if (!json_is_object(e))
        return kc_err_set(err, KC_EINVALID, "nodes[%zu]: expected a map", i);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)e, k, v)
    {
        size_t j = 0;
        while (group_keys[j] && strcmp(group_keys[j], k))
            j++;
        if (!group_keys[j])
            return kc_err_set(err, KC_EINVALID,
                              "nodes[%zu]: unknown key \"%s\" (known: name, count, gpu, gpus, cpu, "
                              "memory, pods, runtime, kernel, os, driver-version, cuda-version, "
                              "driver, toolkit, mig-needs-reboot, labels, annotations, taints)",
                              i, k);
    }
    const json_t *nv = json_object_get(e, "name");
    const char *name = json_string_value(nv);
    if (!name || !*name)
        return kc_err_set(err, KC_EINVALID, "nodes[%zu].name: %s", i,
                          !nv ? "Required value"
                              : "expected a non-empty string (quote names such as n, y, no, on "
                                "that YAML reads as booleans)");
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return kc_err_set(err, KC_EINVALID,
                              "nodes[%zu].name: \"%s\" is not a valid node name prefix (lower "
                              "case letters, digits, '-' and '.')",
                              i, name);
    if (strlen(name) > 200)
        return kc_err_set(err, KC_EINVALID, "nodes[%zu].name: longer than 200 characters", i);
    if (!(g->name = strdup(name)))
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    const json_t *cnt = json_object_get(e, "count");
    g->count = 1;
    if (cnt) {
        if (!json_is_integer(cnt) || json_integer_value(cnt) < 0 ||
            json_integer_value(cnt) > MAX_NODES)
            return kc_err_set(err, KC_EINVALID, "nodes[%zu].count: expected an integer 0-%d", i,
                              MAX_NODES);
        g->has_count = true;
        g->count = (int)json_integer_value(cnt);
    }
    const json_t *gv = json_object_get(e, "gpu");
    const json_t *gn = json_object_get(e, "gpus");
    if (gv && !json_is_null(gv)) {
        const char *model = json_string_value(gv);
        if (!model)
            return kc_err_set(err, KC_EINVALID, "nodes[%zu].gpu: expected a GPU model name", i);
        if (!(g->model = kc_gpu_find(model))) {
            char known[1024];
            known_models(known, sizeof(known));
            return kc_err_set(err, KC_EINVALID,
                              "nodes[%zu].gpu: unknown GPU model \"%s\" (known: %s)", i, model,
                              known);
        }
        g->gpus = 1;
        if (gn) {
            if (!json_is_integer(gn) || json_integer_value(gn) < 1 ||
                json_integer_value(gn) > MAX_GPUS)
                return kc_err_set(err, KC_EINVALID, "nodes[%zu].gpus: expected an integer 1-%d", i,
                                  MAX_GPUS);
            g->gpus = (int)json_integer_value(gn);
        }
    } else if (gn) {
        return kc_err_set(err, KC_EINVALID,
                          "nodes[%zu].gpus: needs a gpu model (a CPU-only group has neither)", i);
    }
    const json_t *os = json_object_get(e, "os");
    const char *os_id = "ubuntu", *os_ver = "22.04", *os_image = NULL;
    if (os && !json_is_null(os)) {
        const json_t *idv = json_object_get(os, "id"), *verv = json_object_get(os, "version");
        if (!json_is_object(os) || !json_is_string(idv) || !json_is_string(verv) ||
            json_object_size(os) != 2)
            return kc_err_set(err, KC_EINVALID,
                              "nodes[%zu].os: expected {id: ubuntu, version: \"22.04\"} (quote "
                              "the version)",
                              i);
        os_id = json_string_value(idv);
        os_ver = json_string_value(verv);
    }
    char img[128];
    if (strcmp(os_id, "ubuntu") == 0)
        snprintf(img, sizeof(img), "Ubuntu %s LTS", os_ver);
    else if (strcmp(os_id, "rhel") == 0)
        snprintf(img, sizeof(img), "Red Hat Enterprise Linux %s", os_ver);
    else if (strcmp(os_id, "amzn") == 0)
        snprintf(img, sizeof(img), "Amazon Linux %s", os_ver);
    else
        snprintf(img, sizeof(img), "%s %s", os_id, os_ver);
    os_image = img;
    if (!(g->os_id = strdup(os_id)) || !(g->os_version = strdup(os_ver)) ||
        !(g->os_image = strdup(os_image)))
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    if ((rc = scalar(e, "cpu", "8", i, &g->cpu, err)) ||
        (rc = scalar(e, "memory", "32Gi", i, &g->memory, err)) ||
        (rc = scalar(e, "pods", "110", i, &g->pods, err)) ||
        (rc = scalar(e, "runtime", "containerd://1.7.20", i, &g->runtime, err)) ||
        (rc = scalar(e, "kernel", "5.15.0-1063-aws", i, &g->kernel, err)) ||
        (rc = scalar(e, "driver-version", "550.90.07", i, &g->driver_version, err)) ||
        (rc = scalar(e, "cuda-version", "12.4", i, &g->cuda_version, err)))
        return rc;
    unsigned a, b, c;
    if (sscanf(g->driver_version, "%u.%u.%u", &a, &b, &c) != 3 &&
        sscanf(g->driver_version, "%u.%u", &a, &b) != 2)
        return kc_err_set(err, KC_EINVALID,
                          "nodes[%zu].driver-version: \"%s\" is not MAJOR.MINOR[.REVISION]", i,
                          g->driver_version);
    if (sscanf(g->cuda_version, "%u.%u", &a, &b) != 2)
        return kc_err_set(err, KC_EINVALID, "nodes[%zu].cuda-version: \"%s\" is not MAJOR.MINOR", i,
                          g->cuda_version);
    if ((rc = provision(e, "driver", i, &g->driver, err)) ||
        (rc = provision(e, "toolkit", i, &g->toolkit, err)))
        return rc;
    const json_t *mr = json_object_get(e, "mig-needs-reboot");
    if (mr && !json_is_boolean(mr))
        return kc_err_set(err, KC_EINVALID, "nodes[%zu].mig-needs-reboot: expected true or false",
                          i);
    g->mig_needs_reboot = json_is_true(mr);
    if (g->mig_needs_reboot && (!g->model || !g->model->mig_capable))
        return kc_err_set(err, KC_EINVALID,
                          "nodes[%zu].mig-needs-reboot: the group's GPUs do not support MIG", i);
    if ((rc = string_map(e, "labels", i, &g->labels, err)) ||
        (rc = string_map(e, "annotations", i, &g->annotations, err)) ||
        (rc = taints(e, i, &g->taints, err)))
        return rc;
    return KC_OK;
}

kc_code ns_fleet_parse(const char *yaml, size_t len, const char *name, ns_fleet **out, kc_err *err)
{
    json_t *doc = NULL;
    ns_fleet *f = NULL;
    *out = NULL;
    kc_code rc = kc_yaml_parse_one(yaml, len, name, &doc, err);
    if (rc != KC_OK)
        return rc;
    const json_t *nodes = json_object_get(doc, "nodes");
    if (!json_is_object(doc) || !json_is_array(nodes)) {
        rc = kc_err_set(
            err, KC_EINVALID,
            "expected a top-level `nodes:` list of groups {name, count, gpu, gpus, ...}");
        goto fail;
    }
    const char *k;
    const json_t *v;
    json_object_foreach(doc, k, v) if (strcmp(k, "nodes"))
    {
        rc = kc_err_set(err, KC_EINVALID, "unknown top-level key \"%s\" (only `nodes`)", k);
        goto fail;
    }
    if (!(f = calloc(1, sizeof(*f))) ||
        !(f->groups = calloc(json_array_size(nodes) + 1, sizeof(*f->groups)))) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory");
        goto fail;
    }
    size_t i;
    json_array_foreach(nodes, i, v)
    {
        f->n_groups = i + 1;
        if ((rc = parse_group(v, i, &f->groups[i], err)) != KC_OK)
            goto fail;
        for (size_t j = 0; j < i; j++)
            if (strcmp(f->groups[j].name, f->groups[i].name) == 0) {
                rc = kc_err_set(err, KC_EINVALID,
                                "nodes[%zu].name: \"%s\" is already the name of nodes[%zu]", i,
                                f->groups[i].name, j);
                goto fail;
            }
        f->n_nodes += (size_t)f->groups[i].count;
        if (f->n_nodes > MAX_NODES) {
            rc = kc_err_set(err, KC_EINVALID, "more than %d nodes in the fleet", MAX_NODES);
            goto fail;
        }
    }
    json_decref(doc);
    *out = f;
    return KC_OK;
fail:
    if (name && err)
        kc_err_prefix(err, "fleet %s", name);
    ns_fleet_free(f);
    json_decref(doc);
    return rc;
}

kc_code ns_fleet_load(const char *path, ns_fleet **out, kc_err *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return kc_err_set(err, KC_EIO, "fleet %s: cannot open: %m", path);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
            if (!nb) {
                free(buf);
                fclose(fp);
                return kc_err_set(err, KC_ENOMEM, "out of memory reading %s", path);
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, fp);
        len += n;
        if (n == 0)
            break;
    }
    fclose(fp);
    kc_code rc = ns_fleet_parse(buf ? buf : "", len, path, out, err);
    free(buf);
    return rc;
}
