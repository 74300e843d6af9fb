/* Tests for op_gate: per-node gating decisions (labels, validation pods, phases). */
#include <criterion/criterion.h>
#include <string.h>

#include "kc_yaml.h"
#include "op_gate.h"
#include "op_policy.h"

static json_t *yaml(const char *y)
{
    json_t *v = NULL;
    kc_err err;
    cr_assert_eq(kc_yaml_parse_one(y, strlen(y), NULL, &v, &err), KC_OK, "%s", err.msg);
    return v;
}

static op_gate_policy policy(void)
{
    op_gate_policy p = {0};
    for (int s = 0; s < OP_STAGE_COUNT; s++)
        p.enabled[s] = true;
    p.followers_enabled = true;
    p.ns = "gpu-operator";
    p.validator_image = "v:1";
    p.mig_default = "all-disabled";
    p.runtime_class = "nvidia";
    return p;
}

static json_t *gpu_node(const char *extra_labels, const char *alloc)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "metadata:\n  name: n1\n  labels:\n    feature.node.kubernetes.io/pci-10de.present: "
             "\"true\"\n%s"
             "status:\n  allocatable: {%s}\n",
             extra_labels, alloc);
    return yaml(buf);
}

static json_t *ready_pod(const char *uid)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "metadata: {name: p-%s, uid: %s}\n"
             "status: {phase: Running, conditions: [{type: Ready, status: \"True\"}]}\n",
             uid, uid);
    return yaml(buf);
}

static const char *lbl(const json_t *patch, const char *k)
{
    return json_string_value(json_object_get(patch, k));
}

/* The first validation pod the gate asked for, as Succeeded, becomes stage s's validation pod on
 * the node; out is cleared. Returns the pod (the caller's reference). */
static json_t *validation_succeeded(op_gate_out *out, op_gate_in *in, op_stage s)
{
    json_t *pod = json_incref(json_array_get(out->create, 0));
    json_object_set_new(pod, "status", json_pack("{s:s}", "phase", "Succeeded"));
    op_gate_out_clear(out);
    in->stage[s].val_pods[0] = pod;
    in->stage[s].n_val = 1;
    return pod;
}

Test(gate, cpu_node_gets_nothing)
{
    op_gate_policy p = policy();
    json_t *n = yaml("metadata: {name: c, labels: {kubernetes.io/os: linux}}\n");
    op_gate_in in = {.node = n};
    op_gate_out out;
    cr_assert_eq(op_gate_node(&p, &in, &out, NULL), KC_OK);
    cr_assert_eq(out.phase, OP_NODE_NOT_GPU);
    cr_assert_eq(json_object_size(out.labels), 0);
    cr_assert_eq(json_array_size(out.create), 0);
    op_gate_out_clear(&out);
    json_decref(n);
}

Test(gate, walks_the_chain)
{
    op_gate_policy p = policy();
    json_t *n = gpu_node("", "");
    op_gate_in in = {.node = n, .now_ms = 1000};
    op_gate_out out;
    /* Fresh node: gpu.present and the driver label only. */
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.present"), "true");
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.driver"), "true");
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.container-toolkit"));
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.gpu-feature-discovery"));
    cr_assert_eq(out.phase, OP_NODE_IN_PROGRESS);
    cr_assert_eq(out.stage, OP_STAGE_DRIVER);
    cr_assert(strstr(out.reason, "nvidia-driver-daemonset"), "%s", out.reason);
    op_gate_out_clear(&out);

    /* Driver pod Ready: a driver validation pod is created, pinned to the node. */
    json_t *drv = ready_pod("d1");
    in.stage[OP_STAGE_DRIVER].operand_pod = drv;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(json_array_size(out.create), 1);
    json_t *vp = json_incref(json_array_get(out.create, 0));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(vp, "spec"), "nodeName")),
                     "n1");
    cr_assert_str_eq(
        json_string_value(json_array_get(
            json_object_get(
                json_array_get(json_object_get(json_object_get(vp, "spec"), "containers"), 0),
                "args"),
            1)),
        "driver");
    cr_assert_null(json_object_get(json_object_get(vp, "spec"), "runtimeClassName"));
    /* Outside the nvidia runtime: privileged, the driver root read-only, the validator told. */
    const json_t *vc =
        json_array_get(json_object_get(json_object_get(vp, "spec"), "containers"), 0);
    cr_assert(json_is_true(json_object_get(json_object_get(vc, "securityContext"), "privileged")));
    const json_t *vm = json_array_get(json_object_get(vc, "volumeMounts"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(vm, "mountPath")), "/run/nvidia/driver");
    cr_assert(json_is_true(json_object_get(vm, "readOnly")));
    const json_t *vol = json_array_get(json_object_get(json_object_get(vp, "spec"), "volumes"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(vol, "hostPath"), "path")),
                     "/run/nvidia/driver");
    const json_t *ev = json_array_get(json_object_get(vc, "env"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "name")), "GPU_VALIDATOR_DRIVER_ROOT");
    cr_assert_str_eq(json_string_value(json_object_get(ev, "value")), "/run/nvidia/driver");
    op_gate_out_clear(&out);

    /* The validation Failed: reason from its output, retried after the backoff. */
    json_object_set_new(vp, "status",
                        json_pack("{s:s, s:[{s:{s:{s:i, s:s, s:s}}}]}", "phase", "Failed",
                                  "containerStatuses", "state", "terminated", "exitCode", 1,
                                  "message", "line one\nno NVIDIA driver: boom\n", "finishedAt",
                                  "1970-01-01T00:00:01Z"));
    in.stage[OP_STAGE_DRIVER].val_pods[0] = vp;
    in.stage[OP_STAGE_DRIVER].n_val = 1;
    in.now_ms = 2000;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_FAILED);
    cr_assert(strstr(out.reason, "driver validation failed: no NVIDIA driver: boom"), "%s",
              out.reason);
    cr_assert_eq(json_array_size(out.create), 0, "not before the backoff");
    cr_assert_eq(out.requeue_ms, 4000);
    op_gate_out_clear(&out);
    in.now_ms = 6001;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(json_array_size(out.create), 1, "retried");
    const char *retry = json_string_value(
        json_object_get(json_object_get(json_array_get(out.create, 0), "metadata"), "name"));
    cr_assert(retry[strlen(retry) - 1] == '1', "attempt 1: %s", retry);
    op_gate_out_clear(&out);

    /* Succeeded: the toolkit label turns on; followers wait for the toolkit. */
    json_object_set_new(json_object_get(vp, "status"), "phase", json_string("Succeeded"));
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.container-toolkit"), "true");
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.gpu-feature-discovery"));
    cr_assert_eq(out.stage, OP_STAGE_TOOLKIT);
    op_gate_out_clear(&out);

    /* The toolkit's validation pod runs through the nvidia runtime and asks for every device
     * (it requests no GPU resource, so no device plugin sets NVIDIA_VISIBLE_DEVICES): without it
     * the runtime injects no driver library. */
    json_t *tk = ready_pod("t1");
    in.stage[OP_STAGE_TOOLKIT].operand_pod = tk;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(json_array_size(out.create), 1);
    const json_t *tp = json_array_get(out.create, 0);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(tp, "spec"), "runtimeClassName")),
        "nvidia");
    const json_t *tc =
        json_array_get(json_object_get(json_object_get(tp, "spec"), "containers"), 0);
    cr_assert_null(json_object_get(tc, "resources"));
    char *env = json_dumps(json_object_get(tc, "env"), JSON_COMPACT);
    cr_assert_str_eq(env,
                     "[{\"name\":\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"all\"},"
                     "{\"name\":\"NVIDIA_DRIVER_CAPABILITIES\",\"value\":\"compute,utility\"}]");
    free(env);
    op_gate_out_clear(&out);

    /* spec.validator.toolkit.env naming the devices is kept as the user wrote it. */
    json_t *uenv = json_pack("[{s:s, s:s}]", "name", "NVIDIA_VISIBLE_DEVICES", "value", "GPU-0");
    p.validator_env[OP_STAGE_TOOLKIT] = uenv;
    op_gate_node(&p, &in, &out, NULL);
    tc = json_array_get(
        json_object_get(json_object_get(json_array_get(out.create, 0), "spec"), "containers"), 0);
    env = json_dumps(json_object_get(tc, "env"), JSON_COMPACT);
    cr_assert_str_eq(env,
                     "[{\"name\":\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"GPU-0\"},"
                     "{\"name\":\"NVIDIA_DRIVER_CAPABILITIES\",\"value\":\"compute,utility\"}]");
    free(env);
    op_gate_out_clear(&out);
    json_decref(uenv);
    json_decref(tk);
    json_decref(vp);
    json_decref(drv);
    json_decref(n);
}

Test(gate, never_overwrites_a_pause_and_reports_reconfiguring)
{
    op_gate_policy p = policy();
    json_t *n = gpu_node("    nvidia.com/gpu.deploy.driver: \"true\"\n"
                         "    nvidia.com/gpu.deploy.container-toolkit: \"true\"\n"
                         "    nvidia.com/gpu.deploy.device-plugin: paused-for-mig-change\n"
                         "    nvidia.com/gpu.deploy.gpu-feature-discovery: paused-for-mig-change\n"
                         "    nvidia.com/mig.capable: \"true\"\n"
                         "    nvidia.com/mig.config: all-balanced\n"
                         "    nvidia.com/mig.config.state: pending\n",
                         "");
    json_t *pods[2] = {ready_pod("d"), ready_pod("t")};
    json_t *ok =
        yaml("metadata: {name: v, annotations: {nvidia.com/gpu-operator.validation-key: d}}\n"
             "status: {phase: Succeeded}\n");
    json_t *ok2 =
        yaml("metadata: {name: w, annotations: {nvidia.com/gpu-operator.validation-key: t}}\n"
             "status: {phase: Succeeded}\n");
    op_gate_in in = {.node = n};
    in.stage[OP_STAGE_DRIVER] =
        (op_gate_stage_in){.operand_pod = pods[0], .val_pods = {ok}, .n_val = 1};
    in.stage[OP_STAGE_TOOLKIT] =
        (op_gate_stage_in){.operand_pod = pods[1], .val_pods = {ok2}, .n_val = 1};
    op_gate_out out;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_RECONFIGURING, "%s", out.reason);
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.device-plugin"));
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.gpu-feature-discovery"),
                   "a paused follower stays paused");
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.dcgm-exporter"), "true");
    cr_assert_null(json_object_get(out.labels, "nvidia.com/mig.config"), "a set config is kept");
    op_gate_out_clear(&out);
    json_decref(ok);
    json_decref(ok2);
    json_decref(pods[0]);
    json_decref(pods[1]);
    json_decref(n);
}

Test(gate, mig_default_and_opt_out)
{
    op_gate_policy p = policy();
    p.mig_default = "all-balanced";
    json_t *n = gpu_node("    nvidia.com/mig.capable: \"true\"\n", "");
    op_gate_in in = {.node = n};
    op_gate_out out;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/mig.config"), "all-balanced");
    op_gate_out_clear(&out);
    json_decref(n);
    n = gpu_node("    nvidia.com/gpu.deploy.operands: \"false\"\n"
                 "    nvidia.com/gpu.deploy.driver: \"true\"\n"
                 "    nvidia.com/gpu.deploy.dcgm: paused-for-driver-upgrade\n",
                 "");
    in.node = n;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_OPTED_OUT);
    cr_assert(json_is_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.driver")),
              "the operator's label goes");
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.dcgm"), "never overwrite");
    op_gate_out_clear(&out);
    json_decref(n);
}

/* The default MIG config costs no label patch of its own: mig.capable comes from GPU feature
 * discovery while the device plugin validates, and the default waits for the patch that deploys
 * the MIG manager (its only reader), or goes alone once no transition will carry it. */
Test(gate, mig_default_rides_with_the_mig_manager_label)
{
    op_gate_policy p = policy();
    p.enabled[OP_STAGE_DRIVER] = p.enabled[OP_STAGE_TOOLKIT] = false;
    json_t *n = gpu_node("    nvidia.com/gpu.present: \"true\"\n"
                         "    nvidia.com/gpu.deploy.device-plugin: \"true\"\n"
                         "    nvidia.com/gpu.deploy.gpu-feature-discovery: \"true\"\n"
                         "    nvidia.com/gpu.deploy.dcgm: \"true\"\n"
                         "    nvidia.com/gpu.deploy.dcgm-exporter: \"true\"\n"
                         "    nvidia.com/gpu.deploy.operator-validator: \"true\"\n"
                         "    nvidia.com/gpu.deploy.node-status-exporter: \"true\"\n"
                         "    nvidia.com/mig.capable: \"true\"\n",
                         "nvidia.com/gpu: \"8\"");
    json_t *dp = ready_pod("dp");
    op_gate_in in = {.node = n, .now_ms = 1000};
    in.stage[OP_STAGE_PLUGIN].operand_pod = dp;
    op_gate_out out;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_IN_PROGRESS);
    cr_assert_eq(out.stage, OP_STAGE_PLUGIN);
    cr_assert_eq(json_object_size(out.labels), 0, "no patch while the plugin validates");
    cr_assert_eq(json_object_size(out.annotations), 0);
    json_t *val = validation_succeeded(&out, &in, OP_STAGE_PLUGIN);
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.stage, OP_STAGE_MIG);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.mig-manager"), "true");
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/mig.config"), "all-disabled",
                     "in the same patch as the MIG manager");
    cr_assert_str_eq(lbl(out.annotations, OP_MIG_DEFAULT_ANN), "all-disabled");
    op_gate_out_clear(&out);

    /* The MIG manager switched off on the node: the default still comes, once the chain is
     * done. */
    json_object_set_new(json_object_get(json_object_get(n, "metadata"), "labels"),
                        "nvidia.com/gpu.deploy.mig-manager", json_string("false"));
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_DONE);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/mig.config"), "all-disabled");
    op_gate_out_clear(&out);
    json_decref(val);
    json_decref(dp);
    json_decref(n);
}

Test(gate, plugin_and_mig_validation_resources)
{
    op_gate_policy p = policy();
    p.enabled[OP_STAGE_DRIVER] = p.enabled[OP_STAGE_TOOLKIT] = false;
    json_t *n = gpu_node(
        "    nvidia.com/mig.capable: \"true\"\n"
        "    nvidia.com/mig.config: all-balanced\n"
        "    nvidia.com/mig.config.state: success\n",
        "nvidia.com/gpu: \"0\", nvidia.com/mig-1g.5gb: \"16\", nvidia.com/mig-3g.20gb: \"8\"");
    json_t *dp = ready_pod("dp"), *mm = ready_pod("mm");
    op_gate_in in = {.node = n};
    in.stage[OP_STAGE_PLUGIN].operand_pod = dp;
    in.stage[OP_STAGE_MIG].operand_pod = mm;
    op_gate_out out;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(json_array_size(out.create), 1);
    json_t *c0 = json_array_get(
        json_object_get(json_object_get(json_array_get(out.create, 0), "spec"), "containers"), 0);
    cr_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(c0, "resources"), "limits"), "nvidia.com/mig-1g.5gb")),
        "1");
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.gpu-feature-discovery"), "true",
                     "without driver and toolkit stages the followers start at once");
    /* Plugin validated: one MIG validation pod per advertised profile. */
    json_t *pv = validation_succeeded(&out, &in, OP_STAGE_PLUGIN);
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.stage, OP_STAGE_MIG);
    cr_assert_eq(json_array_size(out.create), 2, "one per MIG profile");
    op_gate_out_clear(&out);
    json_decref(pv);
    json_decref(dp);
    json_decref(mm);
    json_decref(n);
}

Test(policy, oldest_is_active)
{
    json_t *items = yaml("- metadata: {name: b, creationTimestamp: \"2026-01-01T00:00:00Z\"}\n"
                         "- metadata: {name: a, creationTimestamp: \"2026-01-02T00:00:00Z\"}\n"
                         "- metadata: {name: c, creationTimestamp: \"2026-01-01T00:00:00Z\"}\n");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(op_policy_active(items), "metadata"), "name")),
                     "b");
    json_decref(items);
    json_t *empty = json_array();
    cr_assert_null(op_policy_active(empty));
    json_decref(empty);
}

Test(policy, an_ignored_one_never_becomes_active)
{
    json_t *items = yaml("- metadata: {name: second, creationTimestamp: \"2026-01-02T00:00:00Z\"}\n"
                         "  status: {state: ignored}\n");
    cr_assert_null(op_policy_active(items), "the active one was deleted: no other takes over");
    json_array_append_new(items, yaml("metadata: {name: third, creationTimestamp: "
                                      "\"2026-01-03T00:00:00Z\"}\n"));
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(op_policy_active(items), "metadata"), "name")),
                     "third");
    json_decref(items);
}

Test(gate, a_stage_switched_off_removes_its_validation_pods)
{
    op_gate_policy p = policy();
    json_t *n = gpu_node("", "nvidia.com/gpu: \"8\"");
    op_gate_in in = {.node = n};
    op_gate_out out;
    json_t *drv = ready_pod("d1");
    in.stage[OP_STAGE_DRIVER].operand_pod = drv;
    op_gate_node(&p, &in, &out, NULL);
    json_t *vp = validation_succeeded(&out, &in, OP_STAGE_DRIVER);
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(json_array_size(out.remove), 0, "an enabled stage keeps its passed validation");
    op_gate_out_clear(&out);
    p.enabled[OP_STAGE_DRIVER] = false;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(json_array_size(out.remove), 1);
    cr_assert_str_eq(json_string_value(json_array_get(out.remove, 0)),
                     json_string_value(json_object_get(json_object_get(vp, "metadata"), "name")));
    op_gate_out_clear(&out);
    json_decref(vp);
    json_decref(drv);
    json_decref(n);
}

Test(gate, single_strategy_with_mixed_profiles_is_a_failure_with_advice)
{
    op_gate_policy p = policy();
    p.enabled[OP_STAGE_DRIVER] = p.enabled[OP_STAGE_TOOLKIT] = false;
    json_t *n = gpu_node("    nvidia.com/mig.capable: \"true\"\n"
                         "    nvidia.com/mig.config: all-balanced\n"
                         "    nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB-MIG-INVALID\n",
                         "nvidia.com/gpu: \"0\"");
    json_t *dp = ready_pod("dp");
    op_gate_in in = {.node = n};
    in.stage[OP_STAGE_PLUGIN].operand_pod = dp;
    op_gate_out out;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_FAILED);
    cr_assert(strstr(out.reason, "use mig.strategy=mixed"), "%s", out.reason);
    op_gate_out_clear(&out);
    json_decref(dp);
    json_decref(n);
}

Test(gate, a_refused_validation_pod_is_retried_after_the_backoff_from_its_creation)
{
    /* The kubelet refused the pod (no container ran): no finishedAt to count from. */
    op_gate_policy p = policy();
    json_t *n = gpu_node("", "");
    json_t *drv = ready_pod("d1");
    op_gate_in in = {.node = n, .now_ms = 1000};
    in.stage[OP_STAGE_DRIVER].operand_pod = drv;
    op_gate_out out;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(json_array_size(out.create), 1);
    json_t *vp = json_incref(json_array_get(out.create, 0));
    op_gate_out_clear(&out);
    json_object_set_new(json_object_get(vp, "metadata"), "creationTimestamp",
                        json_string("1970-01-01T00:00:01Z"));
    json_object_set_new(vp, "status",
                        json_pack("{s:s, s:s, s:s}", "phase", "Failed", "reason",
                                  "OutOfnvidia.com/gpu", "message",
                                  "Pod was rejected: Node didn't have enough resource"));
    in.stage[OP_STAGE_DRIVER].val_pods[0] = vp;
    in.stage[OP_STAGE_DRIVER].n_val = 1;
    in.now_ms = 3000;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_FAILED);
    cr_assert(strstr(out.reason, "the pod was refused: OutOfnvidia.com/gpu: Pod was rejected: "
                                 "Node didn't have enough resource"),
              "the reason says why, not an exit code: %s", out.reason);
    cr_assert_eq(json_array_size(out.create), 0, "not before the backoff");
    cr_assert_eq(out.requeue_ms, 3000, "5 s after its creation at 1 s");
    op_gate_out_clear(&out);
    in.now_ms = 6000;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(json_array_size(out.create), 1, "retried once the backoff has passed");
    op_gate_out_clear(&out);
    json_decref(vp);
    json_decref(drv);
    json_decref(n);
}

/* A user's nvidia.com/gpu.deploy.<component>=false: the component is skipped on that node, the
 * label is never set to true nor removed (opted out, or no GPU any more), and the chain goes on. */
Test(gate, user_false_is_kept_and_skips_the_component)
{
    op_gate_policy p = policy();
    json_t *n = gpu_node("    nvidia.com/gpu.deploy.driver: \"false\"\n"
                         "    nvidia.com/gpu.deploy.dcgm-exporter: \"false\"\n",
                         "");
    json_t *tk = ready_pod("tk");
    op_gate_in in = {.node = n, .now_ms = 1000};
    op_gate_out out;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.driver"));
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.container-toolkit"), "true",
                     "the toolkit comes first on a node with its own driver");
    cr_assert_eq(out.stage, OP_STAGE_TOOLKIT);
    op_gate_out_clear(&out);

    /* The toolkit validated: the followers come, but not the one the user keeps off. */
    in.stage[OP_STAGE_TOOLKIT].operand_pod = tk;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(json_array_size(out.create), 1);
    json_t *val = validation_succeeded(&out, &in, OP_STAGE_TOOLKIT);
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.gpu-feature-discovery"), "true");
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.dcgm-exporter"));
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.driver"));
    op_gate_out_clear(&out);
    json_decref(n);

    /* Opted out, then not a GPU node: the user's values stay. */
    n = gpu_node("    nvidia.com/gpu.deploy.operands: \"false\"\n"
                 "    nvidia.com/gpu.deploy.driver: \"false\"\n",
                 "");
    in.node = n;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_OPTED_OUT);
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.driver"));
    op_gate_out_clear(&out);
    json_decref(n);
    n = yaml("metadata: {name: c, labels: {nvidia.com/gpu.deploy.driver: \"false\", "
             "nvidia.com/gpu.deploy.device-plugin: \"true\"}}\n");
    in.node = n;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_NOT_GPU);
    cr_assert_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.driver"));
    cr_assert(json_is_null(json_object_get(out.labels, "nvidia.com/gpu.deploy.device-plugin")));
    op_gate_out_clear(&out);
    json_decref(n);
    json_decref(val);
    json_decref(tk);
}

static json_t *tainted_node(const char *taints, bool cordoned)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "metadata:\n  name: n1\n  labels:\n    feature.node.kubernetes.io/pci-10de.present: "
             "\"true\"\nspec: {unschedulable: %s, taints: %s}\n",
             cordoned ? "true" : "false", taints);
    return yaml(buf);
}

/* A taint the stage's DaemonSet does not tolerate blocks the node with the taint and the fix; a
 * tolerated one, a PreferNoSchedule one and a cordon do not. */
Test(gate, untolerated_taint_blocks_the_node)
{
    op_gate_policy p = policy();
    json_t *ds = yaml("spec: {template: {spec: {tolerations: [{key: nvidia.com/gpu, operator: "
                      "Exists, effect: NoSchedule}, {key: team, operator: Equal, value: a}]}}}\n");
    struct {
        const char *taints;
        bool cordoned;
        op_node_phase want;
    } cases[] = {
        {"[{key: dedicated, value: training, effect: NoSchedule}]", false, OP_NODE_BLOCKED},
        {"[{key: team, value: b, effect: NoExecute}]", false, OP_NODE_BLOCKED},
        {"[{key: team, value: a, effect: NoExecute}]", false, OP_NODE_IN_PROGRESS},
        {"[{key: nvidia.com/gpu, value: present, effect: NoSchedule}]", false, OP_NODE_IN_PROGRESS},
        {"[{key: dedicated, effect: PreferNoSchedule}]", false, OP_NODE_IN_PROGRESS},
        {"[{key: node.kubernetes.io/unschedulable, effect: NoSchedule}]", true,
         OP_NODE_IN_PROGRESS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *n = tainted_node(cases[i].taints, cases[i].cordoned);
        op_gate_in in = {.node = n, .now_ms = 1000};
        in.stage[OP_STAGE_DRIVER].ds = ds;
        op_gate_out out;
        op_gate_node(&p, &in, &out, NULL);
        cr_assert_eq(out.phase, cases[i].want, "case %zu: %s", i, out.reason);
        if (cases[i].want == OP_NODE_BLOCKED) {
            cr_assert(strstr(out.reason, "spec.daemonsets.tolerations"), "%s", out.reason);
            cr_assert(strstr(out.reason, "nvidia-driver-daemonset"), "%s", out.reason);
            cr_assert_str_eq(op_node_phase_name(out.phase), "blocked");
        }
        op_gate_out_clear(&out);
        json_decref(n);
    }
    json_t *n = tainted_node("[{key: dedicated, value: training, effect: NoSchedule}]", false);
    op_gate_in in = {.node = n, .now_ms = 1000};
    in.stage[OP_STAGE_DRIVER].ds = ds;
    op_gate_out out;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert(strstr(out.reason, "taint dedicated=training:NoSchedule is not tolerated"), "%s",
              out.reason);
    op_gate_out_clear(&out);
    /* The DaemonSet not in the cache yet: no verdict. */
    in.stage[OP_STAGE_DRIVER].ds = NULL;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_IN_PROGRESS);
    op_gate_out_clear(&out);
    in.stage[OP_STAGE_DRIVER].ds = ds;
    /* The pod runs already (the taint came later): nothing blocks. */
    json_t *pod = ready_pod("drv");
    in.stage[OP_STAGE_DRIVER].operand_pod = pod;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_neq(out.phase, OP_NODE_BLOCKED);
    op_gate_out_clear(&out);
    json_decref(pod);
    json_decref(n);
    json_decref(ds);
}

Test(gate, node_runtime)
{
    static const char *const cases[][2] = {{"containerd://1.7.20", "containerd"},
                                           {"docker://24.0.7", "docker"},
                                           {"cri-o://1.29.1", "crio"},
                                           {"rkt://1.0", NULL},
                                           {"", NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *n = json_pack("{s:{s:{s:s}}}", "status", "nodeInfo", "containerRuntimeVersion",
                              cases[i][0]);
        const char *got = op_node_runtime(n);
        if (cases[i][1])
            cr_assert_str_eq(got ? got : "(null)", cases[i][1]);
        else
            cr_assert_null(got, "%s", cases[i][0]);
        json_decref(n);
    }
    cr_assert_null(op_node_runtime(NULL));
}

/* A failed MIG state the node's new config has not replaced yet is no failure of the new config;
 * a problem the operator found with what the node asks of MIG is the MIG state's failure, also on
 * a node whose every stage is validated. */
Test(gate, mig_failures_belong_to_the_config_that_failed)
{
    op_gate_policy p = policy();
    p.enabled[OP_STAGE_DRIVER] = p.enabled[OP_STAGE_TOOLKIT] = p.enabled[OP_STAGE_PLUGIN] = false;
    json_t *n = gpu_node("    nvidia.com/mig.capable: \"true\"\n"
                         "    nvidia.com/mig.config: all-disabled\n"
                         "    nvidia.com/mig.config.state: failed\n",
                         "nvidia.com/gpu: \"8\"");
    json_t *mm = ready_pod("mm");
    op_gate_in in = {.node = n, .mig_state_stale = true};
    in.stage[OP_STAGE_MIG].operand_pod = mm;
    op_gate_out out;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_RECONFIGURING, "%d %s", out.phase, out.reason);
    cr_assert_str_eq(out.reason, "waiting for the MIG manager to take up all-disabled (the failed "
                                 "state is an earlier config's)");
    op_gate_out_clear(&out);
    in.mig_state_stale = false;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_FAILED);
    cr_assert_str_eq(out.reason,
                     "MIG config all-disabled failed (nvidia.com/mig.config.state=failed)");
    op_gate_out_clear(&out);
    in.mig_problem = "why it failed";
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_FAILED);
    cr_assert_str_eq(out.reason, "why it failed");
    op_gate_out_clear(&out);
    json_decref(n);
    /* success, every stage done: the problem still shows, at the MIG state. */
    n = gpu_node("    nvidia.com/mig.capable: \"true\"\n"
                 "    nvidia.com/mig.config: h200-only\n"
                 "    nvidia.com/mig.config.state: success\n",
                 "nvidia.com/gpu: \"8\"");
    in.node = n;
    in.mig_problem = "no entry for this GPU";
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_FAILED);
    cr_assert_eq(out.stage, OP_STAGE_MIG);
    cr_assert_str_eq(out.reason, "no entry for this GPU");
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.gpu-feature-discovery"), "true",
                     "the rest of the node goes on");
    op_gate_out_clear(&out);
    in.mig_problem = NULL;
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_DONE);
    op_gate_out_clear(&out);
    json_decref(mm);
    json_decref(n);
}

/* Applies the gate's label patch to the node, as the API server would. */
static void apply_labels(json_t *node, const op_gate_out *out)
{
    json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    const char *k;
    json_t *v;
    json_object_foreach(out->labels, k, v)
    {
        if (json_is_null(v))
            json_object_del(labels, k);
        else
            json_object_set(labels, k, v);
    }
}

/* Runs the gate once; the label patch is applied to the node. out is the caller's to clear. */
static void step(const op_gate_policy *p, op_gate_in *in, op_gate_out *out)
{
    cr_assert_eq(op_gate_node(p, in, out, NULL), KC_OK);
    apply_labels((json_t *)in->node, out);
}

/* Walks a node up to (and with) the patch deploying the device plugin and the followers. */
static void walk_to_plugin(const op_gate_policy *p, op_gate_in *in, json_t **pods)
{
    op_gate_out out;
    step(p, in, &out);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.driver"), "true");
    cr_assert_str_eq(lbl(out.labels, OP_PREPULL_LABEL), "true",
                     "the pre-pull starts with the first deploy label, in its patch");
    op_gate_out_clear(&out);
    in->stage[OP_STAGE_DRIVER].operand_pod = pods[0] = ready_pod("d1");
    step(p, in, &out);
    pods[1] = validation_succeeded(&out, in, OP_STAGE_DRIVER);
    step(p, in, &out);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.container-toolkit"), "true");
    cr_assert_null(json_object_get(out.labels, OP_PREPULL_LABEL), "no change in between");
    op_gate_out_clear(&out);
    in->stage[OP_STAGE_TOOLKIT].operand_pod = pods[2] = ready_pod("t1");
    step(p, in, &out);
    pods[3] = validation_succeeded(&out, in, OP_STAGE_TOOLKIT);
}

/* The device plugin's pod turns Ready and its validation succeeds; out holds the gate's next
 * decision. */
static void plugin_validated(const op_gate_policy *p, op_gate_in *in, op_gate_out *out,
                             json_t **pods)
{
    in->stage[OP_STAGE_PLUGIN].operand_pod = pods[4] = ready_pod("p1");
    step(p, in, out);
    pods[5] = validation_succeeded(out, in, OP_STAGE_PLUGIN);
    step(p, in, out);
}

Test(gate, image_prepull_runs_from_the_first_deploy_label_to_the_last)
{
    op_gate_policy p = policy();
    p.image_prepull = true;
    json_t *n = gpu_node("", "nvidia.com/gpu: 8");
    op_gate_in in = {.node = n, .now_ms = 1000};
    json_t *pods[6] = {0};
    walk_to_plugin(&p, &in, pods);
    op_gate_out out;
    step(&p, &in, &out);
    /* The last deploy labels of a node without MIG: the pre-pull ends in their patch. */
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.device-plugin"), "true");
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.dcgm-exporter"), "true");
    cr_assert(json_is_null(json_object_get(out.labels, OP_PREPULL_LABEL)),
              "the pre-pull ends with the last deploy label, in its patch");
    op_gate_out_clear(&out);
    plugin_validated(&p, &in, &out, pods);
    cr_assert_eq(out.phase, OP_NODE_DONE);
    cr_assert_eq(json_object_size(out.labels), 0, "a done node costs no patch");
    op_gate_out_clear(&out);
    for (size_t i = 0; i < 6; i++)
        json_decref(pods[i]);
    json_decref(n);
}

Test(gate, image_prepull_ends_with_the_mig_manager_label_on_mig_nodes)
{
    op_gate_policy p = policy();
    p.image_prepull = true;
    json_t *n = gpu_node("    nvidia.com/mig.capable: \"true\"\n", "nvidia.com/gpu: 8");
    op_gate_in in = {.node = n, .now_ms = 1000};
    json_t *pods[6] = {0};
    walk_to_plugin(&p, &in, pods);
    op_gate_out out;
    step(&p, &in, &out);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.device-plugin"), "true");
    cr_assert_null(json_object_get(out.labels, OP_PREPULL_LABEL), "the MIG manager is to come");
    op_gate_out_clear(&out);
    plugin_validated(&p, &in, &out, pods);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.mig-manager"), "true");
    cr_assert(json_is_null(json_object_get(out.labels, OP_PREPULL_LABEL)));
    op_gate_out_clear(&out);
    for (size_t i = 0; i < 6; i++)
        json_decref(pods[i]);
    json_decref(n);
}

Test(gate, image_prepull_off_the_label_of_a_node_and_pauses)
{
    /* Switched off: never set, and removed where an earlier run set it. */
    op_gate_policy p = policy();
    json_t *n = gpu_node("", "");
    op_gate_in in = {.node = n, .now_ms = 1000};
    op_gate_out out;
    step(&p, &in, &out);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.driver"), "true");
    cr_assert_null(json_object_get(out.labels, OP_PREPULL_LABEL));
    op_gate_out_clear(&out);
    json_decref(n);
    n = gpu_node("    nvidia.com/gpu.deploy.image-prepull: \"true\"\n", "");
    in.node = n;
    step(&p, &in, &out);
    cr_assert(json_is_null(json_object_get(out.labels, OP_PREPULL_LABEL)));
    op_gate_out_clear(&out);
    json_decref(n);

    /* A user's "false" stays and stops the pre-pull on the node. */
    p.image_prepull = true;
    n = gpu_node("    nvidia.com/gpu.deploy.image-prepull: \"false\"\n", "");
    in.node = n;
    step(&p, &in, &out);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.driver"), "true");
    cr_assert_null(json_object_get(out.labels, OP_PREPULL_LABEL));
    op_gate_out_clear(&out);
    json_decref(n);

    /* Opting the node out removes the operator's "true". */
    n = gpu_node("    nvidia.com/gpu.deploy.image-prepull: \"true\"\n"
                 "    nvidia.com/gpu.deploy.operands: \"false\"\n",
                 "");
    in.node = n;
    step(&p, &in, &out);
    cr_assert_eq(out.phase, OP_NODE_OPTED_OUT);
    cr_assert(json_is_null(json_object_get(out.labels, OP_PREPULL_LABEL)));
    op_gate_out_clear(&out);
    json_decref(n);

    /* The MIG manager pausing the device plugin on a rolled-out node is no deploy to come: no
     * pre-pull, no patch. */
    n = gpu_node("    nvidia.com/gpu.deploy.driver: \"true\"\n"
                 "    nvidia.com/gpu.deploy.container-toolkit: \"true\"\n"
                 "    nvidia.com/gpu.deploy.device-plugin: paused-for-mig-change\n"
                 "    nvidia.com/gpu.deploy.gpu-feature-discovery: \"true\"\n"
                 "    nvidia.com/gpu.deploy.dcgm: \"true\"\n"
                 "    nvidia.com/gpu.deploy.dcgm-exporter: \"true\"\n"
                 "    nvidia.com/gpu.deploy.operator-validator: \"true\"\n"
                 "    nvidia.com/gpu.deploy.node-status-exporter: \"true\"\n"
                 "    nvidia.com/gpu.present: \"true\"\n",
                 "");
    in.node = n;
    json_t *pods[4] = {ready_pod("d1"), NULL, ready_pod("t1"), NULL};
    in.stage[OP_STAGE_DRIVER].operand_pod = pods[0];
    op_gate_node(&p, &in, &out, NULL);
    pods[1] = validation_succeeded(&out, &in, OP_STAGE_DRIVER);
    in.stage[OP_STAGE_TOOLKIT].operand_pod = pods[2];
    op_gate_node(&p, &in, &out, NULL);
    pods[3] = validation_succeeded(&out, &in, OP_STAGE_TOOLKIT);
    op_gate_node(&p, &in, &out, NULL);
    cr_assert_eq(out.phase, OP_NODE_RECONFIGURING);
    cr_assert_eq(json_object_size(out.labels), 0, "%s",
                 json_dumps(out.labels, JSON_COMPACT)); /* leaks only on failure */
    op_gate_out_clear(&out);
    for (size_t i = 0; i < 4; i++)
        json_decref(pods[i]);
    json_decref(n);
}

Test(gate, image_prepull_does_not_start_again_for_a_stage_that_comes_up_later)
{
    /* GPU feature discovery reports MIG once it runs, after the pre-pull ended with the device
     * plugin's patch: the MIG manager's label comes without a pre-pull, and without a patch of
     * its own before it. */
    op_gate_policy p = policy();
    p.image_prepull = true;
    json_t *n = gpu_node("", "nvidia.com/gpu: 8");
    op_gate_in in = {.node = n, .now_ms = 1000};
    json_t *pods[6] = {0};
    walk_to_plugin(&p, &in, pods);
    op_gate_out out;
    step(&p, &in, &out);
    cr_assert(json_is_null(json_object_get(out.labels, OP_PREPULL_LABEL)));
    op_gate_out_clear(&out);
    json_object_set_new(json_object_get(json_object_get(n, "metadata"), "labels"),
                        "nvidia.com/mig.capable", json_string("true"));
    step(&p, &in, &out);
    cr_assert_eq(json_object_size(out.labels), 0, "no patch while the device plugin validates");
    op_gate_out_clear(&out);
    plugin_validated(&p, &in, &out, pods);
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/gpu.deploy.mig-manager"), "true");
    cr_assert_str_eq(lbl(out.labels, "nvidia.com/mig.config"), "all-disabled");
    cr_assert_null(json_object_get(out.labels, OP_PREPULL_LABEL));
    op_gate_out_clear(&out);
    for (size_t i = 0; i < 6; i++)
        json_decref(pods[i]);
    json_decref(n);
}
