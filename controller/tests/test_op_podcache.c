/* Tests for the pod cache's transform (op_pod_transform): it keeps what the gate decides on, so
 * the steps of a pod's start are one cached state (no reconcile queued for them), while
 * readiness, validation results and the reasons the gate reports still come through. */
#include <criterion/criterion.h>
#include <string.h>

#include "kc_yaml.h"
#include "op_controller_int.h"
#include "op_gate.h"

static json_t *yaml(const char *y)
{
    json_t *v = NULL;
    kc_err err;
    cr_assert_eq(kc_yaml_parse_one(y, strlen(y), NULL, &v, &err), KC_OK, "%s", err.msg);
    return v;
}

#define POD_HEAD                                                                                   \
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nvidia-driver-daemonset-x1\n"                   \
    "  namespace: gpu-operator\n  uid: u-1\n  resourceVersion: \"%d\"\n"                           \
    "  creationTimestamp: \"2026-11-23T00:00:00Z\"\n"                                              \
    "  labels: {app: nvidia-driver-daemonset, pod-template-generation: \"1\", tier: x}\n"          \
    "spec:\n  nodeName: n1\n  containers: [{name: driver, image: d:1}]\n"

/* The cached form of a pod with this status block (YAML, indented two spaces, or ""). */
static json_t *cached(int rv, const char *status)
{
    char buf[4096];
    int n = snprintf(buf, sizeof(buf), POD_HEAD, rv);
    snprintf(buf + n, sizeof(buf) - (size_t)n, "%s", status);
    json_t *out = op_pod_transform(yaml(buf), &KC_RES_PODS, NULL);
    cr_assert_not_null(out);
    /* What a handler compares: everything but the resourceVersion. */
    json_object_del(json_object_get(out, "metadata"), "resourceVersion");
    return out;
}

static void assert_same(json_t *a, json_t *b, const char *what)
{
    char *sa = json_dumps(a, JSON_SORT_KEYS | JSON_COMPACT);
    char *sb = json_dumps(b, JSON_SORT_KEYS | JSON_COMPACT);
    cr_assert_str_eq(sa, sb, "%s", what);
    free(sa);
    free(sb);
}

Test(podcache, a_starting_pod_is_one_state_until_ready)
{
    json_t *created = cached(1, "");
    json_t *pending = cached(2, "status:\n  phase: Pending\n"
                                "  conditions: [{type: Ready, status: \"False\"}, "
                                "{type: PodScheduled, status: \"True\"}]\n"
                                "  containerStatuses:\n  - name: driver\n"
                                "    state: {waiting: {reason: ContainerCreating}}\n");
    json_t *running = cached(3, "status:\n  phase: Running\n  podIP: 10.0.0.7\n"
                                "  conditions: [{type: Ready, status: \"False\"}]\n"
                                "  containerStatuses:\n  - name: driver\n"
                                "    state: {running: {startedAt: \"2026-11-23T00:00:02Z\"}}\n");
    json_t *ready = cached(4, "status:\n  phase: Running\n"
                              "  conditions: [{type: Ready, status: \"True\"}]\n"
                              "  containerStatuses:\n  - name: driver\n"
                              "    state: {running: {startedAt: \"2026-11-23T00:00:02Z\"}}\n");
    assert_same(created, pending, "created and pending");
    assert_same(pending, running, "pending and running but not Ready");
    cr_assert(!op_pod_ready(running));
    cr_assert(op_pod_ready(ready));
    cr_assert(!json_equal(running, ready), "becoming Ready is a change");
    /* The labels the operator reads stay, the others go. */
    const json_t *labels = json_object_get(json_object_get(ready, "metadata"), "labels");
    cr_assert_str_eq(json_string_value(json_object_get(labels, "app")), "nvidia-driver-daemonset");
    cr_assert_null(json_object_get(labels, "tier"));
    json_decref(created);
    json_decref(pending);
    json_decref(running);
    json_decref(ready);
}

Test(podcache, failing_containers_keep_their_reason_and_last_message)
{
    json_t *crash =
        cached(5, "status:\n  phase: Running\n"
                  "  conditions: [{type: Ready, status: \"False\"}]\n"
                  "  containerStatuses:\n  - name: driver\n"
                  "    state: {waiting: {reason: CrashLoopBackOff, message: back-off}}\n"
                  "    lastState: {terminated: {exitCode: 1, message: \"no kernel "
                  "headers\"}}\n");
    const json_t *cs =
        json_array_get(json_object_get(json_object_get(crash, "status"), "containerStatuses"), 0);
    const json_t *w = json_object_get(json_object_get(cs, "state"), "waiting");
    cr_assert_str_eq(json_string_value(json_object_get(w, "reason")), "CrashLoopBackOff");
    cr_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(cs, "lastState"), "terminated"), "message")),
        "no kernel headers");
    json_t *pull = cached(6, "status:\n  phase: Pending\n  containerStatuses:\n  - name: driver\n"
                             "    state: {waiting: {reason: ImagePullBackOff, message: \"not "
                             "found\"}}\n");
    json_t *starting = cached(7, "status:\n  phase: Pending\n");
    cr_assert(!json_equal(pull, starting), "an image that cannot be pulled is a change");
    cr_assert(op_waiting_reason_failing("ErrImagePull"));
    cr_assert(!op_waiting_reason_failing("ContainerCreating"));
    cr_assert(!op_waiting_reason_failing(NULL));
    json_decref(crash);
    json_decref(pull);
    json_decref(starting);
}

Test(podcache, validation_results_keep_what_the_gate_reports)
{
    json_t *ok = cached(8, "status:\n  phase: Succeeded\n  containerStatuses:\n  - name: v\n"
                           "    state: {terminated: {exitCode: 0, message: all good}}\n");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ok, "status"), "phase")),
                     "Succeeded");
    json_t *failed =
        cached(9, "status:\n  phase: Failed\n  reason: OutOfnvidia.com/gpu\n  message: none left\n"
                  "  containerStatuses:\n  - name: v\n"
                  "    state: {terminated: {exitCode: 3, message: \"vectorAdd: bad result\", "
                  "finishedAt: \"2026-11-23T00:01:00Z\"}}\n");
    const json_t *st = json_object_get(failed, "status");
    cr_assert_str_eq(json_string_value(json_object_get(st, "phase")), "Failed");
    cr_assert_str_eq(json_string_value(json_object_get(st, "reason")), "OutOfnvidia.com/gpu");
    cr_assert_str_eq(json_string_value(json_object_get(st, "message")), "none left");
    const json_t *t = json_object_get(
        json_object_get(json_array_get(json_object_get(st, "containerStatuses"), 0), "state"),
        "terminated");
    cr_assert_eq(json_integer_value(json_object_get(t, "exitCode")), 3);
    cr_assert_str_eq(json_string_value(json_object_get(t, "message")), "vectorAdd: bad result");
    cr_assert_str_eq(json_string_value(json_object_get(t, "finishedAt")), "2026-11-23T00:01:00Z");
    json_decref(ok);
    json_decref(failed);
}
