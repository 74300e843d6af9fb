/* Tests for kc_yaml: Kubernetes scalar resolution, anchors, merge keys, documents and errors. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kc_yaml.h"
#include "testutil.h"

/* Parses one document and returns it (asserting success). */
static json_t *one(const char *yaml)
{
    kc_err e = {0};
    kc_err_clear(&e);
    json_t *doc = NULL;
    kc_code rc = kc_yaml_parse_one(yaml, strlen(yaml), "t.yaml", &doc, &e);
    cr_assert_eq(rc, KC_OK, "parse failed: %s", e.msg);
    cr_assert_not_null(doc);
    return doc;
}

/* Asserts that the document equals the JSON text `want`. */
static void expect_json(const char *yaml, const char *want)
{
    json_t *doc = one(yaml);
    json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
    cr_assert_not_null(w, "bad expectation %s", want);
    char *got = json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
    cr_assert(json_equal(doc, w), "yaml %s\n got  %s\n want %s", yaml, got, want);
    free(got);
    json_decref(w);
    json_decref(doc);
}

/* Asserts that parsing fails with `code` and a message holding `needle`. */
static void expect_error(const char *yaml, kc_code code, const char *needle)
{
    kc_err e = {0};
    kc_err_clear(&e);
    json_t *docs = (json_t *)0x1;
    kc_code rc = kc_yaml_parse(yaml, strlen(yaml), "t.yaml", &docs, &e);
    cr_assert_eq(rc, code, "yaml %s: rc %d (%s)", yaml, rc, e.msg);
    cr_assert_null(docs);
    cr_assert(strstr(e.msg, needle), "message \"%s\" lacks \"%s\"", e.msg, needle);
}

Test(yaml, booleans_of_yaml_1_1)
{
    expect_json("a: on\nb: yes\nc: Y\nd: n\ne: OFF\nf: True\ng: NO\nh: false\n",
                "{\"a\":true,\"b\":true,\"c\":true,\"d\":false,\"e\":false,\"f\":true,"
                "\"g\":false,\"h\":false}");
    /* Mixed case is not a boolean. */
    expect_json("a: yEs\nb: oN\n", "{\"a\":\"yEs\",\"b\":\"oN\"}");
}

Test(yaml, nulls)
{
    expect_json("a: ~\nb:\nc: null\nd: Null\ne: NULL\nf: nil\n",
                "{\"a\":null,\"b\":null,\"c\":null,\"d\":null,\"e\":null,\"f\":\"nil\"}");
}

Test(yaml, integers_in_every_base)
{
    expect_json("a: 0755\nb: 0o755\nc: 0x1F\nd: 1_000\ne: -12\nf: +7\ng: 0b101\nh: -0b11\ni: 0\n"
                "j: -0x10\nk: 9223372036854775807\nl: -9223372036854775808\n",
                "{\"a\":493,\"b\":493,\"c\":31,\"d\":1000,\"e\":-12,\"f\":7,\"g\":5,\"h\":-3,"
                "\"i\":0,\"j\":-16,\"k\":9223372036854775807,\"l\":-9223372036854775808}");
    json_t *d = one("a: 0x1F\n");
    cr_assert(json_is_integer(json_object_get(d, "a")));
    json_decref(d);
}

Test(yaml, too_big_integers_become_floats_or_strings)
{
    json_t *d = one("a: 99999999999999999999\nb: 0xFFFFFFFFFFFFFFFFFF\nc: 08\nd: 0x\ne: 1e400\n");
    /* Go's ParseFloat fails on overflow, so go-yaml keeps the text. */
    cr_assert_str_eq(json_string_value(json_object_get(d, "e")), "1e400");
    cr_assert(json_is_real(json_object_get(d, "a")));
    cr_assert_float_eq(json_real_value(json_object_get(d, "a")), 1e20, 1e6);
    cr_assert_str_eq(json_string_value(json_object_get(d, "b")), "0xFFFFFFFFFFFFFFFFFF");
    /* Not octal, but a valid YAML float: 8. */
    cr_assert_eq(json_integer_value(json_object_get(d, "c")), 8);
    cr_assert_str_eq(json_string_value(json_object_get(d, "d")), "0x");
    json_decref(d);
}

Test(yaml, floats)
{
    json_t *d = one("a: 1.5\nb: -2e3\nc: .5\nd: 1_0.25\ne: 1.\nf: 1e\ng: 1.2.3\n");
    cr_assert(json_is_real(json_object_get(d, "a")));
    cr_assert_float_eq(json_real_value(json_object_get(d, "a")), 1.5, 1e-12);
    /* Integral floats are what encoding/json writes as "-2000": the API server sees an integer. */
    cr_assert(json_is_integer(json_object_get(d, "b")));
    cr_assert_eq(json_integer_value(json_object_get(d, "b")), -2000);
    cr_assert_float_eq(json_real_value(json_object_get(d, "c")), 0.5, 1e-12);
    cr_assert_float_eq(json_real_value(json_object_get(d, "d")), 10.25, 1e-12);
    cr_assert_eq(json_integer_value(json_object_get(d, "e")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(d, "f")), "1e");
    cr_assert_str_eq(json_string_value(json_object_get(d, "g")), "1.2.3");
    json_decref(d);
}

Test(yaml, timestamps_and_versions_stay_strings)
{
    expect_json("a: 2001-12-14\nb: 1.2.3\nc: v1\nd: 12:30\n",
                "{\"a\":\"2001-12-14\",\"b\":\"1.2.3\",\"c\":\"v1\",\"d\":\"12:30\"}");
}

Test(yaml, quoted_and_block_scalars_stay_strings)
{
    expect_json("a: \"on\"\nb: 'yes'\nc: \"0755\"\nd: '~'\ne: \"\"\nf: |\n  on\ng: >-\n  123\n",
                "{\"a\":\"on\",\"b\":\"yes\",\"c\":\"0755\",\"d\":\"~\",\"e\":\"\",\"f\":\"on\\n\","
                "\"g\":\"123\"}");
    expect_json("s: |\n  line one\n    indented\n  last\nf: >\n  folded\n  text\n",
                "{\"s\":\"line one\\n  indented\\nlast\\n\",\"f\":\"folded text\\n\"}");
}

Test(yaml, explicit_tags)
{
    expect_json("a: !!str on\nb: !!int \"12\"\nc: !!bool \"yes\"\nd: !!float 2\ne: !!null ~\n"
                "f: !custom 5\ng: ! 7\n",
                "{\"a\":\"on\",\"b\":12,\"c\":true,\"d\":2,\"e\":null,\"f\":\"5\",\"g\":\"7\"}");
    json_t *d = one("a: !!float 2.5\n");
    cr_assert(json_is_real(json_object_get(d, "a")));
    json_decref(d);
    expect_error("a: !!int abc\n", KC_EPARSE, "line 1 column 4: cannot read \"abc\" as !!int");
    expect_error("a: !!bool 1\n", KC_EPARSE, "as !!bool");
    expect_error("a: !!null x\n", KC_EPARSE, "as !!null");
    expect_error("a: !!map x\n", KC_EPARSE, "scalar tagged !!map");
}

Test(yaml, nonfinite_floats_are_errors)
{
    expect_error("a: .inf\n", KC_EPARSE,
                 "t.yaml: line 1 column 4: value .inf is not representable");
    expect_error("- -.Inf\n", KC_EPARSE, "not representable in JSON");
    expect_error("x:\n  y: .nan\n", KC_EPARSE, "line 2 column 6");
    expect_error("a: !!float .inf\n", KC_EPARSE, "not representable");
    /* As a string it is fine. */
    expect_json("a: '.inf'\nb: !!str .nan\n", "{\"a\":\".inf\",\"b\":\".nan\"}");
}

Test(yaml, anchors_and_aliases)
{
    expect_json("base: &b {x: 1, y: [1, 2]}\ncopy: *b\nname: &n hello\nagain: *n\n",
                "{\"base\":{\"x\":1,\"y\":[1,2]},\"copy\":{\"x\":1,\"y\":[1,2]},\"name\":\"hello\","
                "\"again\":\"hello\"}");
    /* Copies are independent values, not shared references. */
    json_t *d = one("a: &x {k: 1}\nb: *x\n");
    json_object_set_new(json_object_get(d, "b"), "k", json_integer(2));
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(d, "a"), "k")), 1);
    json_decref(d);
    /* Redefinition: later anchors win. */
    expect_json("a: &x 1\nb: &x 2\nc: *x\n", "{\"a\":1,\"b\":2,\"c\":2}");
    /* An alias used as a key takes the anchored scalar's text. */
    expect_json("k: &key 10\n*key : v\n", "{\"k\":10,\"10\":\"v\"}");
    expect_error("a: *nope\n", KC_EPARSE, "unknown anchor \"nope\"");
    /* Anchors do not cross documents. */
    expect_error("a: &x 1\n---\nb: *x\n", KC_EPARSE, "line 3 column 4: unknown anchor \"x\"");
    /* A collection cannot refer to itself: the anchor exists only once the node is complete. */
    expect_error("a: &r [*r]\n", KC_EPARSE, "unknown anchor \"r\"");
}

Test(yaml, alias_bomb_is_refused)
{
    const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                       "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                       "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                       "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                       "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
                       "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
                       "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
    expect_error(bomb, KC_EPARSE, "more than 1000000 nodes");
}

Test(yaml, merge_keys)
{
    /* Explicit keys win whether they come before or after <<. */
    expect_json("base: &b {a: 1, b: 2, c: 3}\nobj:\n  b: 20\n  <<: *b\n  c: 30\n",
                "{\"base\":{\"a\":1,\"b\":2,\"c\":3},\"obj\":{\"a\":1,\"b\":20,\"c\":30}}");
    /* With a list, earlier maps win over later ones. */
    expect_json("x: &x {k: 1, only_x: 1}\ny: &y {k: 2, only_y: 2}\nz:\n  <<: [*x, *y]\n",
                "{\"x\":{\"k\":1,\"only_x\":1},\"y\":{\"k\":2,\"only_y\":2},"
                "\"z\":{\"k\":1,\"only_x\":1,\"only_y\":2}}");
    /* Inline map, and a quoted "<<" is an ordinary key. */
    expect_json("a:\n  <<: {p: 1}\n  q: 2\nb: {\"<<\": 3}\n",
                "{\"a\":{\"p\":1,\"q\":2},\"b\":{\"<<\":3}}");
    expect_error("a:\n  <<: 5\n", KC_EPARSE, "line 2 column 3: merge key << needs a mapping");
    expect_error("a:\n  <<: [{x: 1}, 2]\n", KC_EPARSE, "element 1 is not a mapping");
}

Test(yaml, non_string_keys_keep_their_text)
{
    expect_json("1: a\ntrue: b\n0x10: c\n~: d\n1.50: e\n",
                "{\"1\":\"a\",\"true\":\"b\",\"0x10\":\"c\",\"~\":\"d\",\"1.50\":\"e\"}");
    expect_error("? [a, b]\n: c\n", KC_EPARSE, "mapping keys must be scalars");
    expect_error("? {a: 1}\n: c\n", KC_EPARSE, "line 1 column 3: mapping keys must be scalars");
}

Test(yaml, duplicate_keys)
{
    expect_error("a: 1\nb: 2\na: 3\n", KC_EPARSE,
                 "t.yaml: line 3 column 1: mapping key \"a\" already defined at line 1");
    expect_error("m:\n  x: 1\n  'x': 2\n", KC_EPARSE, "line 3 column 3: mapping key \"x\"");
    /* Keys that are only equal after stringification collide too. */
    expect_error("1: a\n\"1\": b\n", KC_EPARSE, "already defined at line 1");
}

Test(yaml, multi_documents_skip_empty_ones)
{
    const char *y = "---\n---\na: 1\n---\n# only a comment\n---\n~\n---\n- x\n...\n---\nb: 2\n";
    kc_err e = {0};
    json_t *docs = NULL;
    cr_assert_eq(kc_yaml_parse(y, strlen(y), NULL, &docs, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(json_array_size(docs), 3);
    json_t *want = json_loads("[{\"a\":1},[\"x\"],{\"b\":2}]", 0, NULL);
    cr_assert(json_equal(docs, want));
    json_decref(want);
    json_decref(docs);

    /* A stream of separators only, and an empty stream. */
    cr_assert_eq(kc_yaml_parse("---\n", 4, NULL, &docs, &e), KC_OK);
    cr_assert_eq(json_array_size(docs), 0);
    json_decref(docs);
    cr_assert_eq(kc_yaml_parse(NULL, 0, NULL, &docs, &e), KC_OK);
    cr_assert(json_is_array(docs));
    cr_assert_eq(json_array_size(docs), 0);
    json_decref(docs);
}

Test(yaml, parse_one)
{
    kc_err e = {0};
    json_t *doc = NULL;
    cr_assert_eq(kc_yaml_parse_one("", 0, "empty", &doc, &e), KC_OK);
    cr_assert(json_is_object(doc));
    cr_assert_eq(json_object_size(doc), 0);
    json_decref(doc);
    doc = (json_t *)0x1;
    cr_assert_eq(kc_yaml_parse_one("a: 1\n---\nb: 2\n", 14, "two.yaml", &doc, &e), KC_EPARSE);
    cr_assert_null(doc);
    cr_assert_str_eq(e.msg, "two.yaml: expected one YAML document, found 2");
    cr_assert_eq(kc_yaml_parse_one("a: 1", 4, NULL, NULL, &e), KC_EARG);
}

Test(yaml, syntax_errors_have_location)
{
    expect_error("a: [1, 2\nb: 3\n", KC_EPARSE, "t.yaml: line ");
    expect_error("a: b: c\n", KC_EPARSE, "line 1 column 5: mapping values are not allowed");
    expect_error("a: 'unterminated\n", KC_EPARSE, "found unexpected end of stream");
    expect_error("- a\nb: c\n", KC_EPARSE, "did not find expected");
    expect_error("a: \"\\xZZ\"\n", KC_EPARSE, "line 1");
    expect_error("a: \x01\n", KC_EPARSE,
                 "line 1 column 4 (byte 3, value 0x1): control characters are not allowed");
    expect_error("a: 1\nb: \xff\xfe\xfd\n", KC_EPARSE,
                 "t.yaml: line 2 column 4 (byte 8, value 0xFF): invalid leading UTF-8 octet");
    /* No name: the message starts with the location. */
    kc_err e = {0};
    json_t *docs = NULL;
    cr_assert_eq(kc_yaml_parse("[", 1, NULL, &docs, &e), KC_EPARSE);
    cr_assert(strncmp(e.msg, "line 2 column 1: ", 17) == 0, "%s", e.msg);
}

Test(yaml, tabs)
{
    /* Tabs may not indent, but may appear inside values and as separators after the colon. */
    expect_error("a:\n\tb: 1\n", KC_EPARSE, "line 2 column 1: found character that cannot start");
    expect_json("a:\tx\ty\nb: \"\\tq\"\n", "{\"a\":\"x\\ty\",\"b\":\"\\tq\"}");
}

Test(yaml, deep_nesting)
{
    /* 300 levels are fine, 5000 are refused without exhausting the stack. */
    size_t n = 5000;
    char *buf = malloc(2 * n + 1);
    for (size_t i = 0; i < 300; i++)
        buf[i] = '[', buf[600 - 1 - i] = ']';
    kc_err e = {0};
    json_t *docs = NULL;
    cr_assert_eq(kc_yaml_parse(buf, 600, NULL, &docs, &e), KC_OK, "%s", e.msg);
    json_t *v = json_array_get(docs, 0);
    size_t depth = 0;
    while (json_is_array(v))
        v = json_array_get(v, 0), depth++;
    cr_assert_eq(depth, 300);
    json_decref(docs);
    for (size_t i = 0; i < n; i++)
        buf[i] = '[', buf[2 * n - 1 - i] = ']';
    cr_assert_eq(kc_yaml_parse(buf, 2 * n, NULL, &docs, &e), KC_EPARSE);
    cr_assert(strstr(e.msg, "nesting deeper than 1000 levels"), "%s", e.msg);
    free(buf);
}

Test(yaml, embedded_nul_in_quoted_scalar)
{
    json_t *d = one("a: \"x\\0y\"\n");
    json_t *a = json_object_get(d, "a");
    cr_assert_eq(json_string_length(a), 3);
    cr_assert_eq(memcmp(json_string_value(a), "x\0y", 3), 0);
    json_decref(d);
}

Test(yaml, bad_arguments)
{
    kc_err e = {0};
    json_t *docs;
    cr_assert_eq(kc_yaml_parse("a", 1, NULL, NULL, &e), KC_EARG);
    cr_assert_eq(kc_yaml_parse(NULL, 3, NULL, &docs, &e), KC_EARG);
    cr_assert_eq(kc_yaml_parse_file(NULL, &docs, &e), KC_EARG);
}

static const char daemonset[] = "# NVIDIA device plugin\n"
                                "apiVersion: apps/v1\n"
                                "kind: DaemonSet\n"
                                "metadata:\n"
                                "  name: nvidia-device-plugin-daemonset\n"
                                "  namespace: gpu-operator\n"
                                "  labels: &labels\n"
                                "    app: nvidia-device-plugin\n"
                                "    version: \"1.0\"\n"
                                "spec:\n"
                                "  selector:\n"
                                "    matchLabels: *labels\n"
                                "  updateStrategy:\n"
                                "    type: RollingUpdate\n"
                                "  template:\n"
                                "    metadata:\n"
                                "      labels:\n"
                                "        <<: *labels\n"
                                "        tier: node\n"
                                "      annotations:\n"
                                "        scheduler.alpha.kubernetes.io/critical-pod: \"\"\n"
                                "    spec:\n"
                                "      hostNetwork: yes\n"
                                "      priorityClassName: system-node-critical\n"
                                "      tolerations:\n"
                                "      - key: nvidia.com/gpu\n"
                                "        operator: Exists\n"
                                "        effect: NoSchedule\n"
                                "      nodeSelector:\n"
                                "        nvidia.com/gpu.present: \"true\"\n"
                                "      containers:\n"
                                "      - name: nvidia-device-plugin-ctr\n"
                                "        image: nvcr.io/nvidia/k8s-device-plugin:v0.14.1\n"
                                "        args: [\"--fail-on-init-error=false\"]\n"
                                "        env:\n"
                                "        - name: FAIL_ON_INIT_ERROR\n"
                                "          value: \"false\"\n"
                                "        securityContext:\n"
                                "          allowPrivilegeEscalation: false\n"
                                "          capabilities:\n"
                                "            drop: [\"ALL\"]\n"
                                "        ports:\n"
                                "        - containerPort: 8080\n"
                                "          protocol: TCP\n"
                                "        volumeMounts:\n"
                                "        - name: device-plugin\n"
                                "          mountPath: /var/lib/kubelet/device-plugins\n"
                                "      volumes:\n"
                                "      - name: device-plugin\n"
                                "        hostPath:\n"
                                "          path: /var/lib/kubelet/device-plugins\n"
                                "          type: DirectoryOrCreate\n"
                                "      terminationGracePeriodSeconds: 30\n";

Test(yaml, realistic_daemonset_from_file)
{
    char *path = tu_write_tmp(daemonset);
    cr_assert_not_null(path);
    kc_err e = {0};
    json_t *docs = NULL;
    cr_assert_eq(kc_yaml_parse_file(path, &docs, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(json_array_size(docs), 1);
    json_t *ds = json_array_get(docs, 0);
    cr_assert_str_eq(json_string_value(json_object_get(ds, "kind")), "DaemonSet");
    json_t *tmpl = json_object_get(json_object_get(ds, "spec"), "template");
    json_t *spec = json_object_get(tmpl, "spec");
    cr_assert(json_is_true(json_object_get(spec, "hostNetwork")));
    json_t *want_labels =
        json_pack("{s:s,s:s,s:s}", "app", "nvidia-device-plugin", "version", "1.0", "tier", "node");
    cr_assert(
        json_equal(json_object_get(json_object_get(tmpl, "metadata"), "labels"), want_labels));
    json_decref(want_labels);
    json_t *ctr = json_array_get(json_object_get(spec, "containers"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(ctr, "image")),
                     "nvcr.io/nvidia/k8s-device-plugin:v0.14.1");
    json_t *port = json_array_get(json_object_get(ctr, "ports"), 0);
    cr_assert_eq(json_integer_value(json_object_get(port, "containerPort")), 8080);
    cr_assert_eq(json_integer_value(json_object_get(spec, "terminationGracePeriodSeconds")), 30);
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(tmpl, "metadata"), "annotations"),
                         "scheduler.alpha.kubernetes.io/critical-pod")),
                     "");
    json_decref(docs);
    tu_remove_tmp(path);
}

Test(yaml, file_errors_name_the_file)
{
    char *path = tu_write_tmp("a: 1\na: 2\n");
    kc_err e = {0};
    json_t *docs = NULL;
    cr_assert_eq(kc_yaml_parse_file(path, &docs, &e), KC_EPARSE);
    cr_assert(strncmp(e.msg, path, strlen(path)) == 0, "%s", e.msg);
    cr_assert(strstr(e.msg, ": line 2 column 1: mapping key \"a\" already defined at line 1"), "%s",
              e.msg);
    tu_remove_tmp(path);
    cr_assert_eq(kc_yaml_parse_file("/nonexistent/dir/x.yaml", &docs, &e), KC_EIO);
    cr_assert(strstr(e.msg, "/nonexistent/dir/x.yaml: cannot open"), "%s", e.msg);
}
