/* Tests for op_render: loading states/, golden renders of several ClusterPolicy specs, hashes,
 * spec errors naming the field, op_image.
 * Golden files live in controller/tests/data/render/<case>/<state>.json; after an intended change
 * regenerate them with `KC_UPDATE_GOLDEN=1 ./test_render` and review the diff. */
#include <criterion/criterion.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kc_yaml.h"
#include "op_policy.h"
#include "op_render.h"

#define STATES_DIR KC_SOURCE_DIR "/states"
#define GOLDEN_DIR KC_SOURCE_DIR "/controller/tests/data/render"
#define TEST_NS    "nvidia-gpu-operator"

static op_states *load_states(void)
{
    kc_err e = {0};
    op_states *s = NULL;
    kc_code rc = op_states_load(STATES_DIR, &s, &e);
    cr_assert_eq(rc, KC_OK, "loading %s: %s", STATES_DIR, e.msg);
    cr_assert_not_null(s);
    return s;
}

static json_t *owner(void)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "apiVersion", "nvidia.com/v1", "kind",
                     "ClusterPolicy", "name", "cluster-policy", "uid",
                     "5b0c4b1e-6f0a-4c52-9d43-0c1a2b3c4d5e", "controller", 1, "blockOwnerDeletion",
                     1);
}

/* The spec of a ClusterPolicy file, or the file's document itself when it is a bare spec. */
static json_t *load_spec_file(const char *path)
{
    kc_err e = {0};
    json_t *docs = NULL;
    cr_assert_eq(kc_yaml_parse_file(path, &docs, &e), KC_OK, "%s: %s", path, e.msg);
    json_t *doc = json_array_get(docs, 0);
    json_t *spec = json_object_get(doc, "spec");
    json_t *out = json_deep_copy(spec && json_object_get(doc, "kind") ? spec : doc);
    if (!out)
        out = json_object();
    json_decref(docs);
    return out;
}

static json_t *spec_yaml(const char *yaml)
{
    kc_err e = {0};
    json_t *doc = NULL;
    cr_assert_eq(kc_yaml_parse_one(yaml, strlen(yaml), "spec", &doc, &e), KC_OK, "%s", e.msg);
    return doc;
}

/* Renders a state by name; asserts success. */
/* Renders a state after the objects of the states before it (NULL: as if they had none). */
static json_t *render_after(const op_states *s, const char *state, const json_t *spec,
                            const json_t *rendered)
{
    json_t *own = owner();
    op_render_ctx ctx = {
        .spec = spec, .ns = TEST_NS, .owner = own, .operator_image = NULL, .rendered = rendered};
    int i = op_states_find(s, state);
    cr_assert_geq(i, 0, "unknown state %s", state);
    kc_err e = {0};
    json_t *objs = NULL;
    kc_code rc = op_render_state(s, (size_t)i, &ctx, &objs, &e);
    cr_assert_eq(rc, KC_OK, "%s: %s", state, e.msg);
    cr_assert(json_is_array(objs));
    json_decref(own);
    return objs;
}

static json_t *render(const op_states *s, const char *state, const json_t *spec)
{
    return render_after(s, state, spec, NULL);
}

/* Renders and expects KC_EINVALID with a message holding `needle`. */
static void expect_invalid(const char *yaml, const char *state, const char *needle)
{
    op_states *s = load_states();
    json_t *spec = spec_yaml(yaml);
    json_t *own = owner();
    op_render_ctx ctx = {.spec = spec, .ns = TEST_NS, .owner = own};
    kc_err e = {0};
    json_t *objs = (json_t *)0x1;
    kc_code rc = op_render_state(s, (size_t)op_states_find(s, state), &ctx, &objs, &e);
    cr_expect_eq(rc, KC_EINVALID, "%s for %s: got %s (%s)", state, yaml, kc_code_name(rc), e.msg);
    cr_expect_null(objs, "nothing is rendered on an error");
    cr_expect(strstr(e.msg, needle) != NULL, "message \"%s\" should hold \"%s\"", e.msg, needle);
    json_decref(own);
    json_decref(spec);
    op_states_free(s);
}

static json_t *find_kind(json_t *objs, const char *kind)
{
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0)
            return o;
    }
    return NULL;
}

static json_t *pod_spec(json_t *ds)
{
    return json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "spec");
}

static json_t *named(json_t *arr, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        const char *n = json_string_value(json_object_get(o, "name"));
        if (n && strcmp(n, name) == 0)
            return o;
    }
    return NULL;
}

static json_t *container(json_t *ds, const char *name)
{
    json_t *c = named(json_object_get(pod_spec(ds), "containers"), name);
    return c ? c : named(json_object_get(pod_spec(ds), "initContainers"), name);
}

static const char *env_of(json_t *ctr, const char *name)
{
    json_t *e = named(json_object_get(ctr, "env"), name);
    return e ? json_string_value(json_object_get(e, "value")) : NULL;
}

static const char *hash_of(json_t *obj)
{
    return json_string_value(json_object_get(
        json_object_get(json_object_get(obj, "metadata"), "annotations"), OP_HASH_ANNOTATION));
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[got] = 0;
    return buf;
}

/* Line number (1-based) where two texts first differ. */
static int first_diff_line(const char *a, const char *b)
{
    int line = 1;
    for (; *a && *a == *b; a++, b++)
        if (*a == '\n')
            line++;
    return line;
}

/* ---- loading ---- */

Test(render_load, states_in_operator_order)
{
    op_states *s = load_states();
    static const char *const want[] = {
        "pre-requisites",
        "state-operator-metrics",
        "state-driver",
        "state-container-toolkit",
        "state-operator-validation",
        "state-device-plugin",
        "state-mps-control-daemon",
        "state-dcgm",
        "state-dcgm-exporter",
        "gpu-feature-discovery",
        "state-mig-manager",
        "state-node-status-exporter",
        "state-image-prepull",
    };
    cr_assert_eq(op_states_count(s), 13);
    for (size_t i = 0; i < 13; i++) {
        cr_expect_str_eq(op_states_name(s, i), want[i]);
        cr_expect_eq(op_states_find(s, want[i]), (int)i);
    }
    cr_expect_null(op_states_name(s, 13));
    cr_expect_eq(op_states_find(s, "state-sandbox"), -1);
    op_states_free(s);
}

Test(render_load, files_in_name_order)
{
    op_states *s = load_states();
    json_t *spec = json_object();
    json_t *objs = render(s, "state-mig-manager", spec);
    static const char *const kinds[] = {
        "ServiceAccount",     "Role",      "ClusterRole", "RoleBinding",
        "ClusterRoleBinding", "ConfigMap", "ConfigMap",   "DaemonSet"};
    cr_assert_eq(json_array_size(objs), 8);
    for (size_t i = 0; i < 8; i++)
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(objs, i), "kind")),
                         kinds[i]);
    json_decref(objs);
    json_decref(spec);
    op_states_free(s);
}

/* Makes a temporary states folder linking the real state folders except `skip`. */
static char *temp_states(const char *skip)
{
    const char *tmp = getenv("TMPDIR");
    char *dir = NULL;
    cr_assert_geq(asprintf(&dir, "%s/test_render_XXXXXX", tmp && *tmp ? tmp : P_tmpdir), 0);
    cr_assert_not_null(mkdtemp(dir));
    op_states *s = load_states();
    for (size_t i = 0; i < op_states_count(s); i++) {
        const char *name = op_states_name(s, i);
        if (skip && strcmp(name, skip) == 0)
            continue;
        char from[512], to[512];
        snprintf(from, sizeof from, "%s/%s", STATES_DIR, name);
        snprintf(to, sizeof to, "%s/%s", dir, name);
        cr_assert_eq(symlink(from, to), 0, "symlink %s: %s", to, strerror(errno));
    }
    op_states_free(s);
    return dir;
}

static void remove_temp(char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
    free(dir);
}

static void expect_load_error(const char *dir, kc_code code, const char *needle)
{
    kc_err e = {0};
    op_states *s = (op_states *)0x1;
    kc_code rc = op_states_load(dir, &s, &e);
    cr_expect_eq(rc, code, "got %s: %s", kc_code_name(rc), e.msg);
    cr_expect_null(s);
    cr_expect(strstr(e.msg, needle) != NULL, "message \"%s\" should hold \"%s\"", e.msg, needle);
}

Test(render_load, unknown_folder_is_an_error)
{
    char *dir = temp_states(NULL);
    char extra[600];
    snprintf(extra, sizeof extra, "%s/state-sandbox-validation", dir);
    cr_assert_eq(mkdir(extra, 0755), 0);
    expect_load_error(dir, KC_EINVALID, "state-sandbox-validation: unknown state folder");
    remove_temp(dir);
}

Test(render_load, missing_folder_is_an_error)
{
    char *dir = temp_states("state-dcgm");
    expect_load_error(dir, KC_EINVALID, "state-dcgm: state folder missing");
    remove_temp(dir);
}

Test(render_load, bad_manifest_names_the_file)
{
    char *dir = temp_states("state-dcgm");
    char path[700];
    snprintf(path, sizeof path, "%s/state-dcgm", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/state-dcgm/0100_broken.yaml", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("apiVersion: v1\nkind: [unclosed\n", f);
    fclose(f);
    expect_load_error(dir, KC_EPARSE, "0100_broken.yaml");

    f = fopen(path, "w");
    fputs("apiVersion: v1\nmetadata: {name: x}\n", f);
    fclose(f);
    expect_load_error(dir, KC_EINVALID, "0100_broken.yaml: document 1 is not a Kubernetes object");
    remove_temp(dir);
}

Test(render_load, missing_dir)
{
    expect_load_error("/nonexistent/states", KC_EIO, "/nonexistent/states");
}

/* ---- golden renders ---- */

static void golden_case(const char *name, const char *spec_path)
{
    op_states *s = load_states();
    json_t *spec = load_spec_file(spec_path);
    bool update = getenv("KC_UPDATE_GOLDEN") && strcmp(getenv("KC_UPDATE_GOLDEN"), "1") == 0;
    json_t *all = json_array(); /* what the operator renders before each state, in its order */
    cr_assert_not_null(all);
    for (size_t i = 0; i < op_states_count(s); i++) {
        const char *state = op_states_name(s, i);
        json_t *objs = render_after(s, state, spec, all);
        cr_assert_eq(json_array_extend(all, objs), 0);
        char *got = json_dumps(objs, JSON_INDENT(2) | JSON_SORT_KEYS);
        cr_assert_not_null(got);
        char path[512];
        snprintf(path, sizeof path, "%s/%s/%s.json", GOLDEN_DIR, name, state);
        if (update) {
            FILE *f = fopen(path, "w");
            cr_assert_not_null(f, "%s: %s", path, strerror(errno));
            fprintf(f, "%s\n", got);
            fclose(f);
        } else {
            char *want = read_file(path);
            cr_expect_not_null(want, "%s missing: run with KC_UPDATE_GOLDEN=1", path);
            if (want) {
                size_t n = strlen(want);
                if (n && want[n - 1] == '\n')
                    want[n - 1] = 0;
                cr_expect_str_eq(got, want, "%s differs from the render at line %d", path,
                                 first_diff_line(got, want));
            }
            free(want);
        }
        free(got);
        json_decref(objs);
    }
    json_decref(all);
    json_decref(spec);
    op_states_free(s);
}

Test(render_golden, full)
{
    golden_case("full", KC_SOURCE_DIR "/e2e/testdata/clusterpolicy-full.yaml");
}
Test(render_golden, minimal)
{
    golden_case("minimal", GOLDEN_DIR "/minimal/spec.yaml");
}
Test(render_golden, time_slicing)
{
    golden_case("time-slicing", GOLDEN_DIR "/time-slicing/spec.yaml");
}
Test(render_golden, mig_mixed_host_driver)
{
    golden_case("mig-mixed-host-driver", GOLDEN_DIR "/mig-mixed-host-driver/spec.yaml");
}
Test(render_golden, custom_images)
{
    golden_case("custom-images", GOLDEN_DIR "/custom-images/spec.yaml");
}

/* ---- properties every render keeps ---- */

static const char *const CASES[] = {
    KC_SOURCE_DIR "/e2e/testdata/clusterpolicy-full.yaml",
    GOLDEN_DIR "/minimal/spec.yaml",
    GOLDEN_DIR "/time-slicing/spec.yaml",
    GOLDEN_DIR "/mig-mixed-host-driver/spec.yaml",
    GOLDEN_DIR "/custom-images/spec.yaml",
};

/* The deploy-label nodeSelectors, the selectors and the pods' app labels stay NVIDIA's: the
 * controller gates nodes with them and selectors are immutable. */
Test(render_props, node_selectors_and_selectors_untouched)
{
    op_states *s = load_states();
    json_t *empty = json_object();
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        json_t *spec = load_spec_file(CASES[c]);
        for (size_t i = 0; i < op_states_count(s); i++) {
            const char *state = op_states_name(s, i);
            json_t *objs = render(s, state, spec);
            json_t *base = render(s, state, empty);
            json_t *ds = find_kind(objs, "DaemonSet");
            json_t *bds = find_kind(base, "DaemonSet");
            if (ds && bds) {
                json_t *sel = json_object_get(pod_spec(ds), "nodeSelector");
                cr_expect(json_equal(sel, json_object_get(pod_spec(bds), "nodeSelector")),
                          "%s: nodeSelector changed for %s", state, CASES[c]);
                const char *key;
                json_t *v;
                int deploy = 0;
                json_object_foreach(sel, key, v)
                {
                    if (strncmp(key, "nvidia.com/gpu.deploy.", 22) == 0) {
                        deploy++;
                        cr_expect_str_eq(json_string_value(v), "true");
                    }
                }
                cr_expect_eq(deploy, 1, "%s: one deploy label", state);
                json_t *match = json_object_get(
                    json_object_get(json_object_get(ds, "spec"), "selector"), "matchLabels");
                cr_expect(json_equal(json_object_get(json_object_get(bds, "spec"), "selector"),
                                     json_object_get(json_object_get(ds, "spec"), "selector")),
                          "%s: selector changed", state);
                json_t *labels = json_object_get(
                    json_object_get(json_object_get(json_object_get(ds, "spec"), "template"),
                                    "metadata"),
                    "labels");
                json_object_foreach(match, key, v)
                {
                    cr_expect(json_equal(json_object_get(labels, key), v),
                              "%s: pod label %s no longer matches the selector (%s)", state, key,
                              CASES[c]);
                }
            }
            json_decref(objs);
            json_decref(base);
        }
        json_decref(spec);
    }
    json_decref(empty);
    op_states_free(s);
}

/* Recomputes the hash annotation: sha256 of the compact sorted JSON without it. */
static void expect_hash_valid(json_t *obj)
{
    json_t *copy = json_deep_copy(obj);
    json_t *ann = json_object_get(json_object_get(copy, "metadata"), "annotations");
    const char *want = hash_of(obj);
    cr_assert_not_null(want);
    json_object_del(ann, OP_HASH_ANNOTATION);
    if (json_object_size(ann) == 0)
        json_object_del(json_object_get(copy, "metadata"), "annotations");
    char *text = json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT);
    unsigned char md[32];
    cr_assert_eq(EVP_Digest(text, strlen(text), md, NULL, EVP_sha256(), NULL), 1);
    char hex[65];
    for (unsigned i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    cr_expect_str_eq(hex, want);
    free(text);
    json_decref(copy);
}

Test(render_props, metadata_of_every_object)
{
    op_states *s = load_states();
    json_t *spec = load_spec_file(CASES[0]);
    json_t *own = owner();
    for (size_t i = 0; i < op_states_count(s); i++) {
        const char *state = op_states_name(s, i);
        json_t *objs = render(s, state, spec);
        size_t k;
        json_t *o;
        json_array_foreach(objs, k, o)
        {
            const char *kind = json_string_value(json_object_get(o, "kind"));
            json_t *meta = json_object_get(o, "metadata");
            json_t *ns = json_object_get(meta, "namespace");
            bool cluster = strcmp(kind, "RuntimeClass") == 0 || strcmp(kind, "ClusterRole") == 0 ||
                           strcmp(kind, "ClusterRoleBinding") == 0;
            if (cluster)
                cr_expect_null(ns, "%s %s is cluster-scoped", state, kind);
            else
                cr_expect_str_eq(json_string_value(ns), TEST_NS, "%s %s", state, kind);
            json_t *labels = json_object_get(meta, "labels");
            cr_expect_str_eq(json_string_value(json_object_get(labels, OP_MANAGED_LABEL)),
                             OP_MANAGED_VALUE);
            cr_expect_str_eq(json_string_value(json_object_get(labels, OP_STATE_LABEL)), state);
            json_t *refs = json_object_get(meta, "ownerReferences");
            cr_expect_eq(json_array_size(refs), 1);
            cr_expect(json_equal(json_array_get(refs, 0), own));
            expect_hash_valid(o);
            size_t j;
            json_t *sub;
            json_array_foreach(json_object_get(o, "subjects"), j, sub)
                cr_expect_str_eq(json_string_value(json_object_get(sub, "namespace")), TEST_NS);
            json_t *names = json_object_get(
                json_object_get(json_object_get(o, "spec"), "namespaceSelector"), "matchNames");
            if (names)
                cr_expect_str_eq(json_string_value(json_array_get(names, 0)), TEST_NS);
        }
        json_decref(objs);
    }
    json_decref(own);
    json_decref(spec);
    op_states_free(s);
}

/* ---- hashes ---- */

Test(render_hash, stable_and_local_to_the_changed_state)
{
    op_states *s = load_states();
    json_t *spec = load_spec_file(CASES[0]);
    json_t *spec2 = json_deep_copy(spec);
    json_object_set_new(json_object_get(spec2, "devicePlugin"), "version", json_string("v0.17.1"));
    for (size_t i = 0; i < op_states_count(s); i++) {
        const char *state = op_states_name(s, i);
        json_t *a = render(s, state, spec);
        json_t *b = render(s, state, spec);
        json_t *c = render(s, state, spec2);
        cr_assert_eq(json_array_size(a), json_array_size(b));
        cr_assert_eq(json_array_size(a), json_array_size(c));
        /* The MPS daemon runs the device plugin's image, so it changes with it. */
        bool changes = strcmp(state, "state-device-plugin") == 0 ||
                       strcmp(state, "state-mps-control-daemon") == 0;
        for (size_t k = 0; k < json_array_size(a); k++) {
            json_t *oa = json_array_get(a, k), *oc = json_array_get(c, k);
            cr_expect_str_eq(hash_of(oa), hash_of(json_array_get(b, k)), "%s: same spec", state);
            bool ds = strcmp(json_string_value(json_object_get(oa, "kind")), "DaemonSet") == 0;
            if (changes && ds && json_array_size(a) > 0)
                cr_expect_str_neq(hash_of(oa), hash_of(oc), "%s: the DaemonSet must change", state);
            else
                cr_expect_str_eq(hash_of(oa), hash_of(oc), "%s: %s must not change", state,
                                 json_string_value(json_object_get(oa, "kind")));
        }
        json_decref(a);
        json_decref(b);
        json_decref(c);
    }
    json_decref(spec2);
    json_decref(spec);
    op_states_free(s);
}

Test(render_hash, stale_annotation_does_not_feed_the_hash)
{
    /* A manifest carrying a hash annotation of its own renders the same hash as one without. */
    char *dir = temp_states("pre-requisites");
    char path[700];
    snprintf(path, sizeof path, "%s/pre-requisites", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/pre-requisites/0100_runtimeclass.yaml", dir);
    char *orig = read_file(STATES_DIR "/pre-requisites/0100_runtimeclass.yaml");
    cr_assert_not_null(orig);
    char *meta = strstr(orig, "metadata:\n");
    cr_assert_not_null(meta);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "%.*smetadata:\n  annotations:\n    " OP_HASH_ANNOTATION ": stale\n%s",
            (int)(meta - orig), orig, meta + strlen("metadata:\n"));
    fclose(f);
    free(orig);

    kc_err e = {0};
    op_states *odd = NULL;
    cr_assert_eq(op_states_load(dir, &odd, &e), KC_OK, "%s", e.msg);
    op_states *s = load_states();
    json_t *spec = json_object();
    json_t *a = render(s, "pre-requisites", spec);
    json_t *b = render(odd, "pre-requisites", spec);
    cr_expect_str_eq(hash_of(json_array_get(a, 0)), hash_of(json_array_get(b, 0)));
    cr_expect(json_equal(a, b));
    expect_hash_valid(json_array_get(b, 0));
    json_decref(a);
    json_decref(b);
    json_decref(spec);
    op_states_free(s);
    op_states_free(odd);
    remove_temp(dir);
}

/* ---- behaviour ---- */

Test(render_behaviour, disabled_states_render_nothing)
{
    op_states *s = load_states();
    json_t *spec = spec_yaml("driver: {enabled: false}\ndevicePlugin: {enabled: false}\n"
                             "gfd: {enabled: false}\nmigManager: {enabled: false}\n"
                             "dcgmExporter: {enabled: false}\ntoolkit: {enabled: false}\n");
    static const char *const off[] = {"state-driver",
                                      "state-device-plugin",
                                      "state-mps-control-daemon",
                                      "gpu-feature-discovery",
                                      "state-mig-manager",
                                      "state-dcgm-exporter",
                                      "state-container-toolkit",
                                      "state-dcgm",
                                      "state-node-status-exporter"};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        cr_expect_not(op_state_enabled(s, (size_t)op_states_find(s, off[i]), spec), "%s", off[i]);
        json_t *objs = render(s, off[i], spec);
        cr_expect_eq(json_array_size(objs), 0, "%s renders nothing", off[i]);
        json_decref(objs);
    }
    json_t *objs = render(s, "state-operator-validation", spec);
    cr_expect_gt(json_array_size(objs), 0, "validation always renders");
    json_decref(objs);
    json_decref(spec);
    op_states_free(s);
}

Test(render_behaviour, enabled_defaults)
{
    op_states *s = load_states();
    json_t *spec = json_object();
    for (size_t i = 0; i < op_states_count(s); i++) {
        const char *n = op_states_name(s, i);
        bool want = strcmp(n, "state-dcgm") != 0 && strcmp(n, "state-node-status-exporter") != 0;
        cr_expect_eq(op_state_enabled(s, i, spec), want, "%s", n);
    }
    cr_expect_not(op_state_enabled(s, 99, spec));
    json_decref(spec);
    op_states_free(s);
}

Test(render_behaviour, env_merged_by_name)
{
    op_states *s = load_states();
    json_t *spec = spec_yaml("devicePlugin:\n  env:\n    - {name: FAIL_ON_INIT_ERROR, value: "
                             "\"false\"}\n    - {name: NEW_VAR, value: x}\n");
    json_t *objs = render(s, "state-device-plugin", spec);
    json_t *ctr = container(find_kind(objs, "DaemonSet"), "nvidia-device-plugin");
    json_t *env = json_object_get(ctr, "env");
    cr_expect_str_eq(env_of(ctr, "FAIL_ON_INIT_ERROR"), "false");
    cr_expect_str_eq(env_of(ctr, "NEW_VAR"), "x");
    cr_expect_str_eq(env_of(ctr, "PASS_DEVICE_SPECS"), "true", "manifest env kept");
    int count = 0;
    size_t i;
    json_t *e;
    json_array_foreach(env, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "name")), "FAIL_ON_INIT_ERROR") == 0)
            count++;
    }
    cr_expect_eq(count, 1, "no duplicate");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(env, i - 1), "name")),
                     "NEW_VAR", "new variables are appended");
    json_decref(objs);
    json_decref(spec);
    op_states_free(s);
}

Test(render_behaviour, device_plugin_config)
{
    op_states *s = load_states();
    static const char *const states[] = {"state-device-plugin", "gpu-feature-discovery",
                                         "state-mps-control-daemon"};
    static const char *const mains[] = {"nvidia-device-plugin", "gpu-feature-discovery",
                                        "mps-control-daemon-ctr"};
    json_t *none = json_object();
    json_t *cfg = spec_yaml("devicePlugin: {config: {name: ts-config, default: a100}}\n"
                            "mig: {strategy: mixed}\n");
    for (size_t i = 0; i < 3; i++) {
        json_t *objs = render(s, states[i], none);
        json_t *ds = find_kind(objs, "DaemonSet");
        cr_expect_null(container(ds, "config-manager"), "%s: no sidecar without config", states[i]);
        cr_expect_null(container(ds, "config-manager-init"), "%s", states[i]);
        cr_expect_null(named(json_object_get(pod_spec(ds), "volumes"), "config"), "%s", states[i]);
        cr_expect_null(env_of(container(ds, mains[i]), "CONFIG_FILE"), "%s", states[i]);
        cr_expect_str_eq(env_of(container(ds, mains[i]), "MIG_STRATEGY"), "single");
        json_decref(objs);

        objs = render(s, states[i], cfg);
        ds = find_kind(objs, "DaemonSet");
        json_t *vol = named(json_object_get(pod_spec(ds), "volumes"), "config");
        cr_expect_str_eq(
            json_string_value(json_object_get(json_object_get(vol, "configMap"), "name")),
            "ts-config", "%s", states[i]);
        cr_expect_str_eq(env_of(container(ds, "config-manager"), "DEFAULT_CONFIG"), "a100");
        cr_expect_str_eq(env_of(container(ds, "config-manager-init"), "DEFAULT_CONFIG"), "a100");
        cr_expect_str_eq(env_of(container(ds, mains[i]), "MIG_STRATEGY"), "mixed");
        json_decref(objs);
    }
    json_decref(none);
    json_decref(cfg);
    op_states_free(s);
}

Test(render_behaviour, update_strategy)
{
    op_states *s = load_states();
    json_t *spec = spec_yaml("daemonsets: {updateStrategy: RollingUpdate, rollingUpdate: "
                             "{maxUnavailable: \"1\"}}\n");
    json_t *objs = render(s, "state-device-plugin", spec);
    json_t *us =
        json_object_get(json_object_get(find_kind(objs, "DaemonSet"), "spec"), "updateStrategy");
    cr_expect_str_eq(json_string_value(json_object_get(us, "type")), "RollingUpdate");
    json_t *mu = json_object_get(json_object_get(us, "rollingUpdate"), "maxUnavailable");
    cr_expect(json_is_integer(mu) && json_integer_value(mu) == 1, "\"1\" becomes the integer 1");
    json_decref(objs);

    objs = render(s, "state-driver", spec);
    us = json_object_get(json_object_get(find_kind(objs, "DaemonSet"), "spec"), "updateStrategy");
    cr_expect_str_eq(json_string_value(json_object_get(us, "type")), "OnDelete");
    cr_expect_null(json_object_get(us, "rollingUpdate"));
    json_decref(objs);
    json_decref(spec);

    spec = spec_yaml("daemonsets: {rollingUpdate: {maxUnavailable: \"25%\"}}\n");
    objs = render(s, "gpu-feature-discovery", spec);
    us = json_object_get(json_object_get(find_kind(objs, "DaemonSet"), "spec"), "updateStrategy");
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(us, "rollingUpdate"), "maxUnavailable")),
        "25%");
    json_decref(objs);
    json_decref(spec);
    op_states_free(s);
}

Test(render_behaviour, driver_upgrade_policy)
{
    op_states *s = load_states();
    json_t *spec = spec_yaml("driver:\n  upgradePolicy:\n    autoUpgrade: false\n"
                             "    podDeletion: {force: true, timeoutSeconds: 60}\n"
                             "    drain: {enable: true, podSelector: \"app=x\", timeoutSeconds: "
                             "900, deleteEmptyDir: true}\n");
    json_t *objs = render(s, "state-driver", spec);
    json_t *mgr = container(find_kind(objs, "DaemonSet"), "k8s-driver-manager");
    cr_expect_str_eq(env_of(mgr, "ENABLE_AUTO_DRAIN"), "true");
    cr_expect_str_eq(env_of(mgr, "ENABLE_GPU_POD_EVICTION"), "true");
    cr_expect_str_eq(env_of(mgr, "DRAIN_POD_SELECTOR_LABEL"), "app=x");
    cr_expect_str_eq(env_of(mgr, "DRAIN_TIMEOUT_SECONDS"), "900s", "drain wins");
    cr_expect_str_eq(env_of(mgr, "DRAIN_DELETE_EMPTYDIR_DATA"), "true");
    cr_expect_str_eq(env_of(mgr, "DRAIN_USE_FORCE"), "false");
    json_decref(objs);
    json_decref(spec);

    spec = spec_yaml("driver:\n  upgradePolicy:\n    autoUpgrade: true\n"
                     "    podDeletion: {force: true, timeoutSeconds: 60}\n"
                     "    drain: {enable: true}\n");
    objs = render(s, "state-driver", spec);
    mgr = container(find_kind(objs, "DaemonSet"), "k8s-driver-manager");
    cr_expect_str_eq(env_of(mgr, "ENABLE_AUTO_DRAIN"), "false", "the upgrade flow drains");
    cr_expect_str_eq(env_of(mgr, "ENABLE_GPU_POD_EVICTION"), "false");
    json_decref(objs);
    json_decref(spec);
    op_states_free(s);
}

Test(render_behaviour, host_paths)
{
    op_states *s = load_states();
    json_t *spec = spec_yaml("hostPaths: {rootFS: /sysroot, driverInstallDir: /opt/drv, "
                             "kubeletRootDir: /data/kubelet}\n");
    json_t *objs = render(s, "state-device-plugin", spec);
    json_t *vols = json_object_get(pod_spec(find_kind(objs, "DaemonSet")), "volumes");
    static const char *const want[][2] = {{"host-root", "/sysroot"},
                                          {"driver-install-dir", "/opt/drv"},
                                          {"device-plugin", "/data/kubelet/device-plugins"}};
    for (size_t i = 0; i < 3; i++)
        cr_expect_str_eq(json_string_value(json_object_get(
                             json_object_get(named(vols, want[i][0]), "hostPath"), "path")),
                         want[i][1]);
    json_decref(objs);
    json_decref(spec);
    op_states_free(s);
}

Test(render_behaviour, service_monitor_only_when_enabled)
{
    op_states *s = load_states();
    json_t *off = json_object();
    json_t *on = spec_yaml("dcgmExporter: {serviceMonitor: {enabled: true, interval: 15s, "
                           "additionalLabels: {release: prom}}}\n");
    json_t *objs = render(s, "state-dcgm-exporter", off);
    cr_expect_null(find_kind(objs, "ServiceMonitor"));
    cr_expect_not_null(find_kind(objs, "Service"));
    json_decref(objs);
    objs = render(s, "state-dcgm-exporter", on);
    json_t *sm = find_kind(objs, "ServiceMonitor");
    cr_assert_not_null(sm);
    json_t *ep = json_array_get(json_object_get(json_object_get(sm, "spec"), "endpoints"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(ep, "interval")), "15s");
    cr_expect_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(sm, "metadata"), "labels"), "release")),
                     "prom");
    json_decref(objs);
    json_decref(on);
    json_decref(off);
    op_states_free(s);
}

Test(render_behaviour, mig_manager_configs)
{
    op_states *s = load_states();
    json_t *spec = spec_yaml("migManager:\n  config: {name: my-mig}\n  gpuClientsConfig: {name: "
                             "my-clients}\n  env: [{name: WITH_REBOOT, value: \"true\"}]\n"
                             "driver: {enabled: false}\n");
    json_t *objs = render(s, "state-mig-manager", spec);
    json_t *ds = find_kind(objs, "DaemonSet");
    json_t *vols = json_object_get(pod_spec(ds), "volumes");
    cr_expect_str_eq(json_string_value(json_object_get(
                         json_object_get(named(vols, "mig-parted-config"), "configMap"), "name")),
                     "my-mig");
    cr_expect_str_eq(json_string_value(json_object_get(
                         json_object_get(named(vols, "gpu-clients"), "configMap"), "name")),
                     "my-clients");
    json_t *ctr = container(ds, "nvidia-mig-manager");
    cr_expect_str_eq(env_of(ctr, "WITH_REBOOT"), "true");
    cr_expect_str_eq(env_of(ctr, "WITH_SHUTDOWN_HOST_GPU_CLIENTS"), "true");
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
        cr_expect_str_neq(name, "default-mig-parted-config", "the default is not created");
    }
    json_decref(objs);
    json_decref(spec);

    spec = json_object();
    objs = render(s, "state-mig-manager", spec);
    ds = find_kind(objs, "DaemonSet");
    vols = json_object_get(pod_spec(ds), "volumes");
    cr_expect_str_eq(json_string_value(json_object_get(
                         json_object_get(named(vols, "mig-parted-config"), "configMap"), "name")),
                     "default-mig-parted-config");
    cr_expect_str_eq(env_of(container(ds, "nvidia-mig-manager"), "WITH_SHUTDOWN_HOST_GPU_CLIENTS"),
                     "false");
    json_decref(objs);
    json_decref(spec);
    op_states_free(s);
}

Test(render_behaviour, validator_image_falls_back_to_operator_image)
{
    op_states *s = load_states();
    json_t *spec = json_object();
    op_render_ctx ctx = {.spec = spec, .ns = TEST_NS, .operator_image = "example.com/op:v9"};
    kc_err e = {0};
    json_t *objs = NULL;
    cr_assert_eq(
        op_render_state(s, (size_t)op_states_find(s, "state-device-plugin"), &ctx, &objs, &e),
        KC_OK, "%s", e.msg);
    json_t *ds = find_kind(objs, "DaemonSet");
    cr_expect_str_eq(
        json_string_value(json_object_get(container(ds, "toolkit-validation"), "image")),
        "example.com/op:v9");
    cr_expect_null(json_object_get(json_object_get(ds, "metadata"), "ownerReferences"),
                   "no owner given, none set");
    json_decref(objs);
    json_decref(spec);

    spec = spec_yaml("validator: {version: v2}\n");
    ctx.spec = spec;
    cr_assert_eq(
        op_render_state(s, (size_t)op_states_find(s, "state-operator-validation"), &ctx, &objs, &e),
        KC_OK, "%s", e.msg);
    ds = find_kind(objs, "DaemonSet");
    cr_expect_str_eq(json_string_value(json_object_get(container(ds, "cuda-validation"), "image")),
                     "example.com/op:v2");
    json_decref(objs);
    json_decref(spec);
    op_states_free(s);
}

Test(render_behaviour, null_spec_is_empty_spec)
{
    op_states *s = load_states();
    json_t *empty = json_object();
    for (size_t i = 0; i < op_states_count(s); i++) {
        op_render_ctx ctx = {.spec = NULL, .ns = TEST_NS};
        kc_err e = {0};
        json_t *a = NULL;
        cr_assert_eq(op_render_state(s, i, &ctx, &a, &e), KC_OK, "%s", e.msg);
        ctx.spec = empty;
        json_t *b = NULL;
        cr_assert_eq(op_render_state(s, i, &ctx, &b, &e), KC_OK, "%s", e.msg);
        cr_expect(json_equal(a, b), "%s", op_states_name(s, i));
        json_decref(a);
        json_decref(b);
    }
    json_decref(empty);
    op_states_free(s);
}

Test(render_behaviour, bad_arguments)
{
    op_states *s = load_states();
    op_render_ctx ctx = {.spec = NULL, .ns = NULL};
    kc_err e = {0};
    json_t *objs = NULL;
    cr_expect_eq(op_render_state(s, 0, &ctx, &objs, &e), KC_EARG);
    ctx.ns = TEST_NS;
    cr_expect_eq(op_render_state(s, 13, &ctx, &objs, &e), KC_EARG);
    cr_expect_null(objs);
    json_t *spec = json_string("x");
    ctx.spec = spec;
    cr_expect_eq(op_render_state(s, 0, &ctx, &objs, &e), KC_EINVALID);
    json_decref(spec);
    op_states_free(s);
}

/* ---- invalid specs ---- */

Test(render_invalid, image_tag)
{
    expect_invalid("driver: {version: \"bad version\"}\n", "state-driver",
                   "spec.driver.version: \"bad version\" is not a valid image tag");
}
Test(render_invalid, image_repository)
{
    expect_invalid("devicePlugin: {repository: \"Registry Example/x\"}\n", "state-device-plugin",
                   "spec.devicePlugin.repository");
}
Test(render_invalid, env_without_name)
{
    expect_invalid("devicePlugin: {env: [{value: x}]}\n", "state-device-plugin",
                   "spec.devicePlugin.env[0].name: required");
}
Test(render_invalid, env_value_not_string)
{
    expect_invalid("validator: {driver: {env: [{name: X, value: 1}]}}\n",
                   "state-operator-validation", "spec.validator.driver.env[0].value");
}
Test(render_invalid, enabled_not_boolean)
{
    expect_invalid("driver: {enabled: \"sometimes\"}\n", "state-driver",
                   "spec.driver.enabled: must be true or false");
}
Test(render_invalid, mig_strategy)
{
    expect_invalid("mig: {strategy: both}\n", "gpu-feature-discovery",
                   "spec.mig.strategy: \"both\" is not one of none, single, mixed");
}
Test(render_invalid, update_strategy)
{
    expect_invalid("daemonsets: {updateStrategy: Sometimes}\n", "state-dcgm-exporter",
                   "spec.daemonsets.updateStrategy");
    expect_invalid("daemonsets: {rollingUpdate: {maxUnavailable: lots}}\n", "state-dcgm-exporter",
                   "spec.daemonsets.rollingUpdate.maxUnavailable");
}
Test(render_invalid, pull_policy_and_secrets)
{
    expect_invalid("gfd: {imagePullPolicy: Sometimes}\n", "gpu-feature-discovery",
                   "spec.gfd.imagePullPolicy");
    expect_invalid("driver: {imagePullSecrets: [{}]}\n", "state-driver",
                   "spec.driver.imagePullSecrets[0]");
}
Test(render_invalid, paths)
{
    expect_invalid("toolkit: {installDir: relative/dir}\n", "state-container-toolkit",
                   "spec.toolkit.installDir");
    expect_invalid("hostPaths: {rootFS: host}\n", "state-device-plugin", "spec.hostPaths.rootFS");
}
Test(render_invalid, names)
{
    expect_invalid("operator: {runtimeClass: Bad_Name}\n", "pre-requisites",
                   "spec.operator.runtimeClass");
    expect_invalid("migManager: {config: {name: \"my config\"}}\n", "state-mig-manager",
                   "spec.migManager.config.name");
    expect_invalid("devicePlugin: {config: {name: 42}}\n", "state-device-plugin",
                   "spec.devicePlugin.config.name: must be a string");
}
Test(render_invalid, lists_and_objects)
{
    expect_invalid("daemonsets: {tolerations: all}\n", "state-dcgm-exporter",
                   "spec.daemonsets.tolerations: must be a list");
    expect_invalid("gfd: {resources: {limits: lots}}\n", "gpu-feature-discovery",
                   "spec.gfd.resources.limits");
    expect_invalid("driver: {args: [1]}\n", "state-driver", "spec.driver.args[0]");
    expect_invalid("dcgmExporter: {serviceMonitor: {enabled: true, interval: soon}}\n",
                   "state-dcgm-exporter", "spec.dcgmExporter.serviceMonitor.interval");
    expect_invalid("daemonsets: {labels: {team: 1}}\n", "state-device-plugin",
                   "spec.daemonsets.labels.team");
    expect_invalid("validator: []\n", "state-operator-validation", "spec.validator");
}

/* ---- op_image ---- */

static void expect_image(const char *section_json, const char *def, const char *want)
{
    json_t *sec = section_json ? json_loads(section_json, 0, NULL) : NULL;
    kc_err e = {0};
    char *got = op_image(sec, "spec.x", def, &e);
    cr_expect_not_null(got, "%s: %s", section_json, e.msg);
    if (got)
        cr_expect_str_eq(got, want, "%s", section_json);
    free(got);
    json_decref(sec);
}

static void expect_image_error(const char *section_json, const char *def, const char *needle)
{
    json_t *sec = json_loads(section_json, 0, NULL);
    cr_assert_not_null(sec);
    kc_err e = {0};
    char *got = op_image(sec, "spec.x", def, &e);
    cr_expect_null(got, "%s gave %s", section_json, got ? got : "");
    cr_expect_eq(e.code, KC_EINVALID);
    cr_expect(strstr(e.msg, needle) != NULL, "message \"%s\" should hold \"%s\"", e.msg, needle);
    free(got);
    json_decref(sec);
}

#define DEF "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"

Test(op_image, tag)
{
    expect_image("{\"repository\": \"nvcr.io/nvidia\", \"image\": \"k8s-device-plugin\", "
                 "\"version\": \"v0.16.2\"}",
                 DEF, "nvcr.io/nvidia/k8s-device-plugin:v0.16.2");
    expect_image("{\"repository\": \"localhost:5000/nv\", \"image\": \"driver\", \"version\": "
                 "\"550.90.07-ubuntu22.04\"}",
                 NULL, "localhost:5000/nv/driver:550.90.07-ubuntu22.04");
    expect_image("{\"image\": \"registry.example.com:5000/nvidia/dp:v1\"}", DEF,
                 "registry.example.com:5000/nvidia/dp:v1");
    /* repository only: a mirror keeps the default's image and version */
    expect_image("{\"repository\": \"mirror.example.com/nvidia\"}", DEF,
                 "mirror.example.com/nvidia/k8s-device-plugin:v0.20.0");
    expect_image("{\"version\": \"v0.17.0\"}", DEF, "nvcr.io/nvidia/k8s-device-plugin:v0.17.0");
    expect_image("{\"image\": \"busybox\", \"version\": \"1.36\"}", NULL, "busybox:1.36");
}

Test(op_image, digest)
{
    const char *d = "sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
    char sec[256], want[256];
    snprintf(sec, sizeof sec,
             "{\"repository\": \"nvcr.io/nvidia\", \"image\": \"dp\", "
             "\"version\": \"%s\"}",
             d);
    snprintf(want, sizeof want, "nvcr.io/nvidia/dp@%s", d);
    expect_image(sec, DEF, want);
    snprintf(sec, sizeof sec,
             "{\"repository\": \"ignored.example.com\", \"image\": "
             "\"nvcr.io/nvidia/dp@%s\"}",
             d);
    expect_image(sec, DEF, want);
    snprintf(sec, sizeof sec, "{\"image\": \"nvcr.io/nvidia/dp:v1@%s\"}", d);
    snprintf(want, sizeof want, "nvcr.io/nvidia/dp:v1@%s", d);
    expect_image(sec, DEF, want);
}

Test(op_image, no_version)
{
    /* names nothing: the default */
    expect_image(NULL, DEF, DEF);
    expect_image("{}", DEF, DEF);
    expect_image("{\"repository\": \"\", \"image\": \"\", \"version\": \"\"}", DEF, DEF);
    expect_image("{\"enabled\": true}", DEF, DEF);
    /* the default's image: its version */
    expect_image("{\"repository\": \"m.example.com\", \"image\": \"k8s-device-plugin\"}", DEF,
                 "m.example.com/k8s-device-plugin:v0.20.0");
    /* another image has no version to take */
    expect_image_error("{\"repository\": \"m.example.com\", \"image\": \"other\"}", DEF,
                       "spec.x.version: required");
    expect_image_error("{\"repository\": \"m.example.com\", \"image\": \"dp\"}", NULL,
                       "spec.x.version: required");
    expect_image_error("{}", NULL, "spec.x: names no image");
}

Test(op_image, malformed)
{
    expect_image_error("{\"version\": \"bad version\"}", DEF,
                       "spec.x.version: \"bad version\" is not a valid image tag");
    expect_image_error("{\"version\": \"-v1\"}", DEF, "spec.x.version");
    expect_image_error("{\"version\": \"sha256:xyz\"}", DEF, "spec.x.version");
    expect_image_error("{\"version\": 1.5}", DEF, "spec.x.version: must be a string");
    expect_image_error("{\"repository\": \"nvcr.io//nvidia\"}", DEF, "spec.x.repository");
    expect_image_error("{\"repository\": \"nvcr.io/NVIDIA\"}", DEF, "spec.x.repository");
    expect_image_error("{\"image\": \"Driver\", \"version\": \"1\"}", DEF, "spec.x.image");
    expect_image_error("{\"image\": \"dp:\"}", DEF, "spec.x.image");
    expect_image_error("{\"image\": \"dp@sha256:12\"}", DEF, "spec.x.image");
    expect_image_error("{\"image\": \"a b:1\"}", DEF, "spec.x.image");

    kc_err e = {0};
    json_t *notobj = json_string("x");
    cr_expect_null(op_image(notobj, "spec.x", DEF, &e));
    cr_expect(strstr(e.msg, "spec.x: must be an object") != NULL, "%s", e.msg);
    json_decref(notobj);
}

/* A container of the state's DaemonSet rendered for ctx (a new reference). */
static json_t *rendered_container(const op_states *s, const char *state, const op_render_ctx *ctx,
                                  const char *name)
{
    json_t *objs = NULL;
    kc_err err;
    cr_assert_eq(op_render_state(s, (size_t)op_states_find(s, state), ctx, &objs, &err), KC_OK,
                 "%s", err.msg);
    json_t *c = json_incref(container(find_kind(objs, "DaemonSet"), name));
    json_decref(objs);
    return c;
}

/* Driver images are tagged per OS: the nodes' OS replaces the tag's suffix or is appended. */
static const char *driver_image_for(const op_states *s, const json_t *spec, const char *os,
                                    char *buf, size_t size)
{
    json_t *own = owner();
    op_render_ctx ctx = {.spec = spec, .ns = "gpu-operator", .owner = own, .driver_os = os};
    json_t *c = rendered_container(s, "state-driver", &ctx, "nvidia-driver-ctr");
    snprintf(buf, size, "%s", json_string_value(json_object_get(c, "image")));
    json_decref(c);
    json_decref(own);
    return buf;
}

Test(render_behaviour, driver_image_tag_follows_the_nodes_os)
{
    op_states *s = load_states();
    char buf[512];
    json_t *spec = spec_yaml("driver: {repository: nvcr.io/nvidia, image: driver, version: "
                             "\"550.90.07\"}\n");
    cr_assert_str_eq(driver_image_for(s, spec, "ubuntu22.04", buf, sizeof(buf)),
                     "nvcr.io/nvidia/driver:550.90.07-ubuntu22.04");
    cr_assert_str_eq(driver_image_for(s, spec, NULL, buf, sizeof(buf)),
                     "nvcr.io/nvidia/driver:550.90.07", "without nodes' OS the tag is kept");
    json_decref(spec);
    spec = spec_yaml("driver: {version: \"550.90.07-rhel9.4\"}\n");
    cr_assert_str_eq(driver_image_for(s, spec, "ubuntu22.04", buf, sizeof(buf)) + strlen(buf) -
                         strlen("550.90.07-ubuntu22.04"),
                     "550.90.07-ubuntu22.04", "an OS suffix is replaced: %s", buf);
    json_decref(spec);
    spec = spec_yaml("{}\n");
    driver_image_for(s, spec, "ubuntu22.04", buf, sizeof(buf));
    cr_assert(strstr(buf, "-ubuntu22.04") && !strstr(buf, "24.04"), "default image: %s", buf);
    json_decref(spec);
    op_states_free(s);
}

/* The toolkit's RUNTIME: the GPU nodes' runtime, else spec.operator.defaultRuntime, else
 * containerd; toolkit.env cannot change it (NVIDIA's order). */
static void expect_toolkit_runtime(const op_states *s, const char *spec_text, const char *rt,
                                   const char *want)
{
    json_t *own = owner(), *spec = spec_yaml(spec_text);
    op_render_ctx ctx = {.spec = spec, .ns = "gpu-operator", .owner = own, .runtime = rt};
    json_t *c =
        rendered_container(s, "state-container-toolkit", &ctx, "nvidia-container-toolkit-ctr");
    size_t i, n = 0;
    json_t *e;
    json_array_foreach(json_object_get(c, "env"), i, e)
    {
        if (!strcmp(json_string_value(json_object_get(e, "name")), "RUNTIME")) {
            cr_expect_str_eq(json_string_value(json_object_get(e, "value")), want,
                             "spec %s, nodes' runtime %s", spec_text, rt ? rt : "none");
            n++;
        }
    }
    cr_expect_eq(n, 1, "one RUNTIME entry");
    json_decref(c);
    json_decref(spec);
    json_decref(own);
}

Test(render_behaviour, toolkit_runtime_follows_the_nodes)
{
    op_states *s = load_states();
    const char *docker = "operator: {defaultRuntime: docker}\n";
    expect_toolkit_runtime(s, docker, "containerd", "containerd");
    expect_toolkit_runtime(s, "{}\n", "crio", "crio");
    expect_toolkit_runtime(s, docker, NULL, "docker"); /* no node reports a runtime */
    expect_toolkit_runtime(s, "{}\n", NULL, "containerd");
    expect_toolkit_runtime(s, "toolkit: {env: [{name: RUNTIME, value: docker}]}\n", "containerd",
                           "containerd");
    op_states_free(s);
}

/* The validator pods' default image is the one the chart installs: this version's image at the
 * chart's appVersion (kubesim's registry has only those tags, as ghcr.io would). */
Test(render_behaviour, default_validator_image_is_the_charts)
{
    json_t *chart = NULL;
    kc_err e = {0};
    cr_assert_eq(kc_yaml_parse_file(KC_SOURCE_DIR "/charts/gpu-operator/Chart.yaml", &chart, &e),
                 KC_OK, "%s", e.msg);
    const char *app = json_string_value(json_object_get(json_array_get(chart, 0), "appVersion"));
    cr_assert_str_eq(app, OP_VERSION);
    char want[200];
    snprintf(want, sizeof(want), "ghcr.io/gpu-operator/gpu-operator-validator:%s", app);
    cr_assert_str_eq(OP_DEFAULT_VALIDATOR_IMAGE, want);
    json_decref(chart);
}

/* ---- image pre-pull ---- */

/* Renders every state in order for spec; returns the image-prepull state's objects and, in
 * *all_out, everything rendered before it. */
static json_t *render_prepull(const char *spec_text, bool off, json_t **all_out)
{
    op_states *s = load_states();
    json_t *spec = spec_yaml(spec_text);
    json_t *own = owner();
    json_t *all = json_array();
    json_t *objs = NULL;
    for (size_t i = 0; i < op_states_count(s); i++) {
        op_render_ctx ctx = {
            .spec = spec, .ns = TEST_NS, .owner = own, .rendered = all, .no_image_prepull = off};
        kc_err e = {0};
        cr_assert_eq(op_render_state(s, i, &ctx, &objs, &e), KC_OK, "%s", e.msg);
        if (strcmp(op_states_name(s, i), "state-image-prepull") == 0)
            break;
        cr_assert_eq(json_array_extend(all, objs), 0);
        json_decref(objs);
        objs = NULL;
    }
    cr_assert_not_null(objs);
    json_decref(own);
    json_decref(spec);
    op_states_free(s);
    *all_out = all;
    return objs;
}

static const json_t *ds_pod_spec(const json_t *ds)
{
    return json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "spec");
}

/* How many of the pre-pull's containers run image. */
static int pulls_of(const json_t *ps, const char *image)
{
    int n = 0;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(ps, "containers"), i, c)
    {
        const char *img = json_string_value(json_object_get(c, "image"));
        n += img && !strcmp(img, image);
    }
    return n;
}

Test(render_prepull, pulls_every_later_operand_image_once_and_runs_none)
{
    json_t *all;
    json_t *objs = render_prepull("dcgm: {enabled: true}\n"
                                  "devicePlugin: {imagePullSecrets: [plugin-creds]}\n",
                                  false, &all);
    json_t *ds = NULL;
    size_t i;
    json_t *o;
    json_array_foreach(
        objs, i, o) if (!strcmp(json_string_value(json_object_get(o, "kind")), "DaemonSet")) ds = o;
    cr_assert_not_null(ds);
    const json_t *ps = ds_pod_spec(ds);
    /* Every image of the operands after the driver, once; none of the driver's. */
    int wanted = 0;
    json_array_foreach(all, i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "kind")), "DaemonSet"))
            continue;
        bool driver = !strcmp(json_string_value(json_object_get(
                                  json_object_get(json_object_get(o, "metadata"), "labels"),
                                  "nvidia.com/gpu-operator.state")),
                              "state-driver");
        static const char *const lists[] = {"initContainers", "containers"};
        for (int l = 0; l < 2; l++) {
            size_t j;
            const json_t *c;
            json_array_foreach(json_object_get(ds_pod_spec(o), lists[l]), j, c)
            {
                const char *img = json_string_value(json_object_get(c, "image"));
                cr_expect_eq(pulls_of(ps, img), driver ? 0 : 1, "%s (%s)", img,
                             driver ? "the driver's" : "a later operand's");
                wanted += !driver;
            }
        }
    }
    cr_assert_gt(wanted, 5);
    cr_expect_eq(pulls_of(ps, "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"), 1);
    /* The validator's image first (the validation pods need it next), then in state order. */
    const json_t *ctrs = json_object_get(ps, "containers");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ctrs, 0), "name")), "hold");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ctrs, 1), "name")),
                     "pull-container-toolkit");
    /* Each container runs the hold program the init container copies, as nobody. */
    const json_t *c;
    json_array_foreach(ctrs, i, c)
    {
        const json_t *cmd = json_object_get(c, "command");
        cr_expect_eq(json_array_size(cmd), 1);
        cr_expect_str_eq(json_string_value(json_array_get(cmd, 0)), "/prepull/hold");
        cr_expect_eq(
            json_integer_value(json_object_get(json_object_get(c, "securityContext"), "runAsUser")),
            65534);
    }
    const json_t *init = json_array_get(json_object_get(ps, "initContainers"), 0);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(init, "command"), 1)),
                     "/usr/bin/gpu-operator-hold");
    /* The operands' pull secrets come along. */
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(ps, "imagePullSecrets"), 0), "name")),
                     "plugin-creds");
    json_decref(objs);
    json_decref(all);
}

Test(render_prepull, follows_the_enabled_states_and_the_operators_switch)
{
    json_t *all;
    json_t *objs = render_prepull("dcgmExporter: {enabled: false}\n", false, &all);
    char *text = json_dumps(objs, JSON_COMPACT);
    cr_assert_not_null(text);
    cr_expect_null(strstr(text, "dcgm-exporter:"), "a disabled operand's image is not pulled");
    cr_expect_not_null(strstr(text, "k8s-device-plugin:"));
    free(text);
    json_decref(objs);
    json_decref(all);
    objs = render_prepull("{}\n", true, &all);
    cr_expect_eq(json_array_size(objs), 0, "--image-prepull=false: nothing (what exists goes)");
    json_decref(objs);
    json_decref(all);
}

/* Without spec.validator, the DaemonSets' validator containers and the validation pods the gate
 * creates run one image: the operator's (--operator-image), else this version's, never the
 * manifests' placeholder tag. */
Test(render_behaviour, validator_image_is_the_validation_pods_one)
{
    op_states *s = load_states();
    json_t *spec = spec_yaml("{}\n");
    json_t *own = owner();
    json_t *cp = json_pack("{s:{s:s, s:s}, s:{}}", "metadata", "name", "cp", "uid", "u1", "spec");
    const char *const images[] = {NULL, "registry.example.com/ops/gpu-operator:v9"};
    for (int k = 0; k < 2; k++) {
        op_render_ctx ctx = {
            .spec = spec, .ns = TEST_NS, .owner = own, .operator_image = images[k]};
        json_t *objs = NULL;
        kc_err e = {0};
        cr_assert_eq(op_render_state(s, (size_t)op_states_find(s, "state-operator-validation"),
                                     &ctx, &objs, &e),
                     KC_OK, "%s", e.msg);
        const json_t *ds = NULL, *o;
        size_t i;
        json_array_foreach(objs, i, o) if (!strcmp(json_string_value(json_object_get(o, "kind")),
                                                   "DaemonSet")) ds = o;
        cr_assert_not_null(ds);
        const char *ds_img = json_string_value(json_object_get(
            json_array_get(
                json_object_get(
                    json_object_get(json_object_get(json_object_get(ds, "spec"), "template"),
                                    "spec"),
                    "initContainers"),
                0),
            "image"));
        op_gate_policy gp;
        char *vimg = NULL;
        cr_assert_eq(op_policy_gate(cp, TEST_NS, own, images[k], &gp, &vimg, &e), KC_OK);
        cr_assert_str_eq(ds_img, vimg);
        cr_assert_str_eq(vimg, images[k] ? images[k] : OP_DEFAULT_VALIDATOR_IMAGE);
        free(vimg);
        json_decref(objs);
    }
    json_decref(cp);
    json_decref(own);
    json_decref(spec);
    op_states_free(s);
}
