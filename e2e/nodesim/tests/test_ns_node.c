/* Tests for ns_node (registered Node, GFD labels) and ns_operand (pod roles, validation). */
#include <criterion/criterion.h>
#include <string.h>

#include "kc_yaml.h"
#include "ns_node.h"
#include "ns_operand.h"

static ns_fleet *fleet(const char *yaml)
{
    ns_fleet *f = NULL;
    kc_err err;
    cr_assert_eq(ns_fleet_parse(yaml, strlen(yaml), NULL, &f, &err), KC_OK, "%s", err.msg);
    return f;
}

static const char *lbl(const json_t *labels, const char *k)
{
    return json_string_value(json_object_get(labels, k));
}

Test(node, registered_object)
{
    ns_fleet *f = fleet("nodes:\n- name: p4d\n  count: 2\n  gpu: A100-SXM4-40GB\n  gpus: 8\n"
                        "  taints: [{key: k, value: v, effect: NoSchedule}]\n- name: cpu\n");
    json_t *n = ns_node_object(&f->groups[0], "p4d-1", 300);
    const json_t *labels = json_object_get(json_object_get(n, "metadata"), "labels");
    cr_assert_str_eq(lbl(labels, "feature.node.kubernetes.io/pci-10de.present"), "true");
    cr_assert_str_eq(lbl(labels, "kubernetes.io/hostname"), "p4d-1");
    cr_assert_str_eq(lbl(labels, "feature.node.kubernetes.io/system-os_release.VERSION_ID.minor"),
                     "04");
    const json_t *ann = json_object_get(json_object_get(n, "metadata"), "annotations");
    cr_assert_str_eq(lbl(ann, NS_MANAGED_ANNOTATION), "nodesim");
    cr_assert_str_eq(lbl(ann, NS_GPUS_ANNOTATION), "8");
    const json_t *st = json_object_get(n, "status");
    cr_assert_str_eq(lbl(json_object_get(st, "capacity"), "cpu"), "8");
    cr_assert_null(json_object_get(json_object_get(st, "capacity"), "nvidia.com/gpu"),
                   "GPU resources come from the device plugin, not registration");
    cr_assert_str_eq(lbl(json_array_get(json_object_get(st, "addresses"), 0), "address"),
                     "10.64.1.51");
    cr_assert_eq(json_array_size(json_object_get(json_object_get(n, "spec"), "taints")), 1);
    json_decref(n);
    n = ns_node_object(&f->groups[1], "cpu", 0);
    labels = json_object_get(json_object_get(n, "metadata"), "labels");
    cr_assert_null(json_object_get(labels, "feature.node.kubernetes.io/pci-10de.present"));
    json_decref(n);
    ns_fleet_free(f);
}

static ns_dpconfig *dp(const char *yaml)
{
    ns_dpconfig *cfg = NULL;
    kc_err err;
    cr_assert_eq(ns_dpconfig_parse(yaml, strlen(yaml), NULL, &cfg, &err), KC_OK, "%s", err.msg);
    return cfg;
}

Test(gfd, timeslicing_t4)
{
    ns_dpconfig *cfg = dp("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                          "    - name: nvidia.com/gpu\n      replicas: 4\n");
    ns_gfd_input in = {.model = kc_gpu_find("Tesla-T4"),
                       .n_gpus = 4,
                       .sharing = cfg,
                       .driver_version = "550.90.07",
                       .cuda_version = "12.4"};
    json_t *l = ns_gfd_labels(&in);
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.product"), "Tesla-T4-SHARED");
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.count"), "4");
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.replicas"), "4");
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.sharing-strategy"), "time-slicing");
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.family"), "turing");
    cr_assert_str_eq(lbl(l, "nvidia.com/cuda.driver-version.revision"), "07");
    cr_assert_str_eq(lbl(l, "nvidia.com/mig.capable"), "false");
    cr_assert_null(json_object_get(l, "nvidia.com/mig.strategy"));
    json_decref(l);
    ns_dpconfig_free(cfg);
}

static void balanced(kc_mp_gpu_state *st, int n)
{
    const kc_gpu_model *m = kc_gpu_find("A100-SXM4-40GB");
    memset(st, 0, sizeof(*st) * (size_t)n);
    for (int i = 0; i < n; i++) {
        st[i].mig_enabled = 1;
        st[i].counts[kc_gpu_profile_index(m, "1g.5gb")] = 2;
        st[i].counts[kc_gpu_profile_index(m, "2g.10gb")] = 1;
        st[i].counts[kc_gpu_profile_index(m, "3g.20gb")] = 1;
    }
}

Test(gfd, mig_strategies)
{
    kc_mp_gpu_state st[8];
    balanced(st, 8);
    ns_gfd_input in = {.model = kc_gpu_find("A100-SXM4-40GB"),
                       .n_gpus = 8,
                       .mig = st,
                       .strategy = NS_MIG_MIXED,
                       .driver_version = "550.90.07",
                       .cuda_version = "12.4"};
    json_t *l = ns_gfd_labels(&in);
    cr_assert_str_eq(lbl(l, "nvidia.com/mig-1g.5gb.count"), "16");
    cr_assert_str_eq(lbl(l, "nvidia.com/mig-3g.20gb.count"), "8");
    cr_assert_str_eq(lbl(l, "nvidia.com/mig-3g.20gb.slices.gi"), "3");
    cr_assert_str_eq(lbl(l, "nvidia.com/mig.strategy"), "mixed");
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB");
    json_decref(l);
    in.strategy = NS_MIG_SINGLE;
    l = ns_gfd_labels(&in);
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB-MIG-INVALID");
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.count"), "0");
    cr_assert_null(json_object_get(l, "nvidia.com/mig-1g.5gb.count"));
    json_decref(l);
    const kc_gpu_model *m = in.model;
    for (int i = 0; i < 8; i++) {
        memset(st[i].counts, 0, sizeof(st[i].counts));
        st[i].counts[kc_gpu_profile_index(m, "1g.5gb")] = 7;
    }
    l = ns_gfd_labels(&in);
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.count"), "56");
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.memory"), "4864");
    json_decref(l);
    /* +me profiles carry GFD's resource spelling: mig-1g.5gb.me, -MIG-1g.5gb.me. */
    for (int i = 0; i < 8; i++) {
        memset(st[i].counts, 0, sizeof(st[i].counts));
        st[i].counts[kc_gpu_profile_index(m, "1g.5gb+me")] = 1;
    }
    l = ns_gfd_labels(&in);
    cr_assert_str_eq(lbl(l, "nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb.me");
    json_decref(l);
    in.strategy = NS_MIG_MIXED;
    l = ns_gfd_labels(&in);
    cr_assert_str_eq(lbl(l, "nvidia.com/mig-1g.5gb.me.count"), "8");
    cr_assert_null(json_object_get(l, "nvidia.com/mig-1g.5gb+me.count"));
    json_decref(l);
    cr_assert(ns_gfd_owns_label("nvidia.com/mig-7g.40gb.count"));
    cr_assert(ns_gfd_owns_label("nvidia.com/gpu.product"));
    cr_assert_not(ns_gfd_owns_label("nvidia.com/gpu.deploy.driver"));
    cr_assert_not(ns_gfd_owns_label("nvidia.com/gpu.present"));
    cr_assert_not(ns_gfd_owns_label("nvidia.com/mig.config"));
}

static json_t *pod(const char *yaml)
{
    json_t *p = NULL;
    kc_err err;
    cr_assert_eq(kc_yaml_parse_one(yaml, strlen(yaml), NULL, &p, &err), KC_OK, "%s", err.msg);
    return p;
}

Test(operand, classification)
{
    json_t *p = pod("metadata: {labels: {app: nvidia-driver-daemonset}}\n"
                    "spec: {containers: [{name: c, image: x}]}\n");
    cr_assert_eq(ns_operand_of_pod(p, NULL), NS_OP_DRIVER);
    json_decref(p);
    p = pod("spec: {containers: [{name: c, image: nvcr.io/nvidia/k8s/dcgm-exporter:3.3}]}\n");
    cr_assert_eq(ns_operand_of_pod(p, NULL), NS_OP_DCGM_EXPORTER, "by image");
    json_decref(p);
    p = pod(
        "spec: {restartPolicy: Never, containers: [{name: c, image: reg/gpu-operator-validator:1,"
        " args: [--mode, plugin], env: [{name: MIG_STRATEGY, value: mixed}]}]}\n");
    cr_assert_eq(ns_operand_of_pod(p, NULL), NS_OP_VALIDATION);
    cr_assert_str_eq(ns_pod_arg(p, "--mode"), "plugin");
    cr_assert_eq(ns_pod_mig_strategy(p, NULL), NS_MIG_MIXED);
    cr_assert_eq(ns_operand_of_pod(p, "*other*"), NS_OP_NONE, "the glob decides");
    json_decref(p);
    /* The image decides, not the command or the label: busybox has no validator. */
    p = pod("metadata: {labels: {app: nvidia-cuda-validator}}\n"
            "spec: {restartPolicy: Never, containers: [{name: c, image: busybox,"
            " command: [/usr/bin/gpu-validator]}]}\n");
    cr_assert_eq(ns_operand_of_pod(p, NULL), NS_OP_NONE, "a command is no validator");
    bool direct = false;
    cr_assert_str_eq(ns_missing_program(p, NULL, &direct), "gpu-validator");
    cr_assert(direct);
    json_decref(p);
    /* NVIDIA's validator lives in its operator image since v25.10; ours in one image too. */
    const char *const holders[] = {"nvcr.io/nvidia/gpu-operator:v26.7.0",
                                   "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.4",
                                   "ghcr.io/gpu-operator/gpu-operator:0.1.0",
                                   "ghcr.io/gpu-operator/gpu-operator-validator:dev"};
    for (size_t i = 0; i < 4; i++)
        cr_assert(ns_image_has_validator(holders[i], NULL), "%s", holders[i]);
    cr_assert_not(ns_image_has_validator("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", NULL));
    cr_assert_not(ns_image_has_validator("busybox:1.36", NULL));
    p = pod("spec: {restartPolicy: Never, containers: [{name: c, image: "
            "nvcr.io/nvidia/gpu-operator:v26.7.0, command: [nvidia-validator]}]}\n");
    cr_assert_eq(ns_operand_of_pod(p, NULL), NS_OP_VALIDATION);
    cr_assert_null(ns_missing_program(p, NULL, &direct));
    json_decref(p);
    /* The operator's image running the operator (its uninstall hook) validates nothing. */
    p = pod("spec: {restartPolicy: Never, containers: [{name: c, image: "
            "ghcr.io/gpu-operator/gpu-operator:0.1.0, command: [gpu-operator], args: "
            "[--delete-clusterpolicy=cluster-policy]}]}\n");
    cr_assert_eq(ns_operand_of_pod(p, NULL), NS_OP_NONE);
    cr_assert_null(ns_missing_program(p, NULL, &direct));
    json_decref(p);
    /* NVIDIA's workload pod runs vectorAdd in an init container. */
    p = pod("spec: {restartPolicy: OnFailure, initContainers: [{name: cuda-validation, image: "
            "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0, command: [sh, -c], args: "
            "[vectorAdd]}], containers: [{name: c, image: "
            "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0, command: [sh, -c], args: "
            "[echo cuda workload validation is successful]}]}\n");
    cr_assert_eq(ns_operand_of_pod(p, NULL), NS_OP_VALIDATION);
    json_decref(p);
    /* NVIDIA's workload pod: vectorAdd in a shell; from busybox the shell cannot find it. */
    p = pod("spec: {restartPolicy: OnFailure, containers: [{name: c, image: busybox:1.36,"
            " command: [sh, -c], args: [vectorAdd]}]}\n");
    cr_assert_eq(ns_operand_of_pod(p, NULL), NS_OP_NONE);
    cr_assert_str_eq(ns_missing_program(p, NULL, &direct), "vectorAdd");
    cr_assert_not(direct);
    json_decref(p);
    p = pod("spec: {volumes: [{name: a, emptyDir: {}}, {name: config, configMap: {name: ts}}]}\n");
    const char *const names[] = {"config", NULL};
    cr_assert_str_eq(ns_pod_configmap(p, names, false), "ts");
    json_decref(p);
}

/* A node of 8 A100s with its driver and toolkit up. */
static ns_node_view a100_node(const json_t *alloc, const ns_faults *f)
{
    return (ns_node_view){.node = "n",
                          .model = kc_gpu_find("A100-SXM4-40GB"),
                          .n_gpus = 8,
                          .driver_up = true,
                          .toolkit_up = true,
                          .driver_version = "550.90.07",
                          .cuda_version = "12.4",
                          .allocatable = alloc,
                          .faults = f};
}

/* The validation fails on v, its output naming needle. */
static void expect_failure(const json_t *pod_, const ns_node_view *v, const char *needle)
{
    char *log = NULL;
    cr_assert_neq(0, ns_validation_run(pod_, v, &log));
    cr_assert(strstr(log, needle), "%s", log);
    free(log);
}

Test(operand, validation_outcomes)
{
    json_t *p = pod("spec: {restartPolicy: Never, containers: [{name: c, image: v, args: "
                    "[--mode=plugin], resources: {limits: {nvidia.com/gpu: 1}}}]}\n");
    json_t *alloc = json_pack("{s:s}", "nvidia.com/gpu", "8");
    ns_faults f;
    ns_fault_parse(NULL, 8, &f, NULL);
    ns_node_view v = a100_node(alloc, &f);
    char *log = NULL;
    cr_assert_eq(0, ns_validation_run(p, &v, &log));
    cr_assert(strstr(log, "Test PASSED"), "%s", log);
    cr_assert(strstr(log, "196 blocks of 256 threads"));
    free(log);
    /* NVIDIA's CUDA sample, users' smoke test: the sample's own output, or its error. */
    json_t *sample = pod("spec: {restartPolicy: OnFailure, containers: [{name: cuda-vectoradd, "
                         "image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0, resources: "
                         "{limits: {nvidia.com/gpu: 1}}}]}\n");
    cr_assert_eq(ns_operand_of_pod(sample, "*other*"), NS_OP_VALIDATION, "not by the glob");
    cr_assert_eq(0, ns_validation_run(sample, &v, &log));
    cr_assert_str_eq(log, "[Vector addition of 50000 elements]\n"
                          "Copy input data from the host memory to the CUDA device\n"
                          "CUDA kernel launch with 196 blocks of 256 threads\n"
                          "Copy output data from the CUDA device to the host memory\n"
                          "Test PASSED\nDone\n");
    free(log);
    v.toolkit_up = false;
    expect_failure(sample, &v, "Failed to allocate device vector A");
    v.toolkit_up = true;
    json_decref(sample);
    sample = pod("spec: {restartPolicy: Always, containers: [{name: c, image: "
                 "nvidia/samples:vectoradd-cuda11.2.1}]}\n");
    cr_assert_eq(ns_operand_of_pod(sample, NULL), NS_OP_NONE, "a restarting pod is no test run");
    json_decref(sample);
    ns_fault_parse("xid:gpu=2:code=48", 8, &f, NULL);
    cr_assert_neq(0, ns_validation_run(p, &v, &log));
    cr_assert(strstr(log, "Xid 48 on GPU 2"), "%s", log);
    cr_assert_null(strstr(log, "Test PASSED"));
    free(log);
    ns_fault_parse(NULL, 8, &f, NULL);
    v.toolkit_up = false;
    expect_failure(p, &v, "container toolkit is not ready");
    v.toolkit_up = true;
    json_object_set_new(alloc, "nvidia.com/gpu", json_string("0"));
    expect_failure(p, &v, "nvidia.com/gpu: 1 requested, 0 allocatable");
    v.driver_up = false;
    expect_failure(p, &v, "no NVIDIA driver");
    json_decref(alloc);
    json_decref(p);
}

/* The node's runtime as the toolkit's RUNTIME names it, from containerRuntimeVersion. */
Test(operand, runtime_name)
{
    cr_assert_str_eq(ns_runtime_name("containerd://1.7.20"), "containerd");
    cr_assert_str_eq(ns_runtime_name("docker://24.0.7"), "docker");
    cr_assert_str_eq(ns_runtime_name("cri-o://1.29.1"), "crio");
    cr_assert_null(ns_runtime_name("containerd"));
    cr_assert_null(ns_runtime_name(NULL));
}

/* Whether nodesim's answer to the driver container's probe, for the pod as operand op, holds
 * needle ("ok": is exactly ok). */
static bool driver_answer(const json_t *pod_, ns_operand op, const ns_probe_view *v,
                          const char *needle)
{
    json_t *a = ns_probe_answers(pod_, op, v);
    const char *s = json_string_value(json_object_get(a, "nvidia-driver-ctr"));
    bool ok = s && (strcmp(needle, "ok") ? strstr(s, needle) != NULL : !strcmp(s, "ok"));
    json_decref(a);
    return ok;
}

Test(operand, probe_answers_follow_the_components_state)
{
    json_t *drv = pod("metadata: {labels: {app: nvidia-driver-daemonset}}\n"
                      "spec: {containers: [{name: nvidia-driver-ctr, image: x, startupProbe: "
                      "{exec: {command: [nvidia-smi]}}}, {name: side, image: x}]}\n");
    ns_probe_view v = {.has_gpus = true};
    json_t *a = ns_probe_answers(drv, NS_OP_DRIVER, &v);
    cr_assert_eq(json_object_size(a), 1, "only containers with probes");
    json_decref(a);
    cr_assert(driver_answer(drv, NS_OP_DRIVER, &v, "not loaded"));
    v.driver_up = true;
    cr_assert(driver_answer(drv, NS_OP_DRIVER, &v, "ok"));
    v.driver_fail = true;
    cr_assert(driver_answer(drv, NS_OP_DRIVER, &v, "modprobe"));
    v.driver_fail = false;
    cr_assert(driver_answer(drv, NS_OP_TOOLKIT, &v, "toolkit"), "waits for the toolkit's install");
    v.toolkit_up = true;
    cr_assert(driver_answer(drv, NS_OP_TOOLKIT, &v, "ok"));
    v.driver_up = false;
    cr_assert(driver_answer(drv, NS_OP_NONE, &v, "ok"), "no NVIDIA component: nothing to wait for");
    json_decref(drv);
    json_t *plain = pod("spec: {containers: [{name: c, image: x}]}\n");
    cr_assert_null(ns_probe_answers(plain, NS_OP_DRIVER, &v), "no probes, no answers");
    json_decref(plain);
}
