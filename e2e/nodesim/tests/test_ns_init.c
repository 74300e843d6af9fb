/* Tests for ns_init: NVIDIA's init-container gates (the ready-file loops, nvidia-validator's
 * components, the operator's gpu-validator) wait for the node's component state, and the
 * workload pods NVIDIA's validator creates. */
#include <criterion/criterion.h>
#include <string.h>

#include "kc_yaml.h"
#include "ns_init.h"

static json_t *yaml(const char *text)
{
    json_t *o = NULL;
    kc_err err;
    cr_assert_eq(kc_yaml_parse_one(text, strlen(text), NULL, &o, &err), KC_OK, "%s", err.msg);
    return o;
}

static ns_init_gate gate(const char *ctr_yaml)
{
    json_t *c = yaml(ctr_yaml);
    ns_init_gate g;
    ns_init_gate_of(c, &g);
    json_decref(c);
    return g;
}

/* NVIDIA's device-plugin / GFD / DCGM DaemonSets' init container. */
#define TOOLKIT_LOOP                                                                               \
    "name: toolkit-validation\nimage: "                                                            \
    "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0\n"                                 \
    "command: ['sh', '-c']\nargs: [\"until [ -f /run/nvidia/validations/toolkit-ready ]; do echo " \
    "waiting for nvidia container stack to be setup; sleep 5; done\"]\n"

/* NVIDIA's nvidia-operator-validator init containers (assets/state-operator-validation). */
#define VALIDATOR(comp, extra)                                                                     \
    "name: " comp "-validation\nimage: nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25\n"   \
    "command: ['sh', '-c']\nargs: [nvidia-validator]\nenv:\n- {name: WITH_WAIT, value: 'false'}\n" \
    "- {name: COMPONENT, value: " comp "}\n" extra

Test(init, nvidias_gates_are_recognised)
{
    ns_init_gate g = gate(TOOLKIT_LOOP);
    cr_assert_eq(g.kind, NS_GATE_FILE);
    cr_assert_str_eq(g.what, "toolkit");
    g = gate("name: d\nimage: x\ncommand: [sh, -c, 'while [ ! -f /run/nvidia/validations/"
             "driver-ready ]; do sleep 5; done']\n");
    cr_assert_eq(g.kind, NS_GATE_FILE);
    cr_assert_str_eq(g.what, "driver");
    g = gate(VALIDATOR("driver", ""));
    cr_assert_eq(g.kind, NS_GATE_VALIDATOR);
    cr_assert(g.nvidia && !g.workload);
    cr_assert_str_eq(g.what, "driver");
    g = gate(VALIDATOR("cuda", ""));
    cr_assert(g.nvidia && g.workload, "the cuda component runs a workload by default");
    g = gate(VALIDATOR("plugin", "- {name: WITH_WORKLOAD, value: 'false'}\n"));
    cr_assert_str_eq(g.what, "plugin");
    cr_assert(!g.workload);
    /* The operator's own validator. */
    g = gate("name: driver-validation\nimage: v\ncommand: [gpu-validator]\nargs: [--mode, "
             "driver, --status-file, /run/nvidia/validations/driver-ready]\n");
    cr_assert_eq(g.kind, NS_GATE_VALIDATOR);
    cr_assert(!g.nvidia && !g.workload);
    cr_assert_str_eq(g.what, "driver");
    /* Not gates: the driver manager, a plain copy, a one-off test of the file. */
    cr_assert_eq(gate("name: k8s-driver-manager\nimage: x\ncommand: [driver-manager]\n"
                      "args: [uninstall_driver]\n")
                     .kind,
                 NS_GATE_NONE);
    cr_assert_eq(gate("name: c\nimage: x\ncommand: [sh, -c, 'cat /run/nvidia/validations/"
                      "toolkit-ready']\n")
                     .kind,
                 NS_GATE_NONE);
}

Test(init, a_gate_waits_for_the_component_on_the_node)
{
    ns_init_gate tk = gate(TOOLKIT_LOOP), drv = gate(VALIDATOR("driver", ""));
    ns_init_gate cudaf = gate("name: c\nimage: x\ncommand: [sh, -c, 'until [ -f "
                              "/run/nvidia/validations/cuda-ready ]; do sleep 5; done']\n");
    ns_init_gate plugf = gate("name: c\nimage: x\ncommand: [sh, -c, 'until [ -f "
                              "/run/nvidia/validations/plugin-ready ]; do sleep 5; done']\n");
    ns_init_gate other = gate("name: c\nimage: x\ncommand: [sh, -c, 'until [ -f "
                              "/run/nvidia/validations/mofed-ready ]; do sleep 5; done']\n");
    /* The driver is not loaded yet: nothing passes. */
    ns_gate_view v = {.has_gpus = true};
    cr_assert_not_null(ns_init_gate_wait(&drv, &v));
    cr_assert_not_null(strstr(ns_init_gate_wait(&drv, &v), "driver"));
    cr_assert_not_null(ns_init_gate_wait(&tk, &v));
    cr_assert_not_null(ns_init_gate_wait(&cudaf, &v));
    cr_assert_not_null(ns_init_gate_wait(&plugf, &v));
    /* Loaded: the driver validator passes; the toolkit's file is not written yet. */
    v.driver_up = true;
    cr_assert_null(ns_init_gate_wait(&drv, &v));
    cr_assert_not_null(ns_init_gate_wait(&tk, &v));
    v.toolkit_up = true;
    cr_assert_not_null(strstr(ns_init_gate_wait(&tk, &v), "no validator has written it"),
                       "toolkit-ready exists only once a validator wrote it");
    v.written = NS_READY_DRIVER | NS_READY_TOOLKIT;
    cr_assert_null(ns_init_gate_wait(&tk, &v));
    cr_assert_not_null(ns_init_gate_wait(&cudaf, &v), "cuda-ready needs a passed validation");
    v.written |= NS_READY_CUDA;
    cr_assert_null(ns_init_gate_wait(&cudaf, &v));
    v.written |= NS_READY_PLUGIN;
    cr_assert_not_null(ns_init_gate_wait(&plugf, &v), "plugin-ready needs advertised GPUs");
    v.plugin_gpus = true;
    cr_assert_null(ns_init_gate_wait(&plugf, &v));
    cr_assert_not_null(ns_init_gate_wait(&other, &v), "no simulated component writes it");
    /* A written file no longer helps once the toolkit is gone. */
    v.toolkit_up = false;
    cr_assert_not_null(ns_init_gate_wait(&tk, &v));
    /* The driver fails again: its gates do not pass, even with driver-ready written. */
    ns_gate_view f = {.has_gpus = true, .driver_fail = true, .written = NS_READY_DRIVER};
    cr_assert_not_null(strstr(ns_init_gate_wait(&drv, &f), "modprobe"));
    ns_init_gate drvf = gate("name: c\nimage: x\ncommand: [sh, -c, 'until [ -f "
                             "/run/nvidia/validations/driver-ready ]; do sleep 5; done']\n");
    cr_assert_not_null(ns_init_gate_wait(&drvf, &f));
    f.driver_fail = false;
    f.driver_up = true;
    cr_assert_null(ns_init_gate_wait(&drvf, &f));
    /* A CPU node: never. */
    ns_gate_view cpu = {0};
    cr_assert_not_null(ns_init_gate_wait(&tk, &cpu));
    /* The operator's in-process CUDA validation fails on an XID. */
    ns_init_gate ours = gate("name: c\nimage: v\ncommand: [gpu-validator]\nargs: [--mode, cuda]\n");
    ns_gate_view x = {.has_gpus = true, .driver_up = true, .toolkit_up = true, .xid = true};
    cr_assert_not_null(ns_init_gate_wait(&ours, &x));
    x.xid = false;
    cr_assert_null(ns_init_gate_wait(&ours, &x));
}

Test(init, the_validators_prestop_clears_the_ready_files)
{
    json_t *p = yaml("spec:\n  containers:\n  - name: nvidia-operator-validator\n    image: v\n"
                     "    lifecycle: {preStop: {exec: {command: [sh, -c, 'rm -f "
                     "/run/nvidia/validations/*-ready']}}}\n");
    cr_assert(ns_pod_clears_ready_files(p));
    json_decref(p);
    p = yaml("spec:\n  containers:\n  - {name: c, image: v}\n");
    cr_assert(!ns_pod_clears_ready_files(p));
    json_decref(p);
    cr_assert_eq(ns_ready_file_bit("toolkit"), NS_READY_TOOLKIT);
    cr_assert_eq(ns_ready_file_bit("mofed"), 0u);
}

Test(init, the_validators_workload_pods_are_nvidias)
{
    json_t *cuda_ctr =
        yaml(VALIDATOR("cuda", "- {name: VALIDATOR_IMAGE, value: 'nvcr.io/nvidia/cloud-native/"
                               "gpu-operator-validator:v25.3.0'}\n"));
    json_t *ds = yaml("metadata:\n  name: nvidia-operator-validator\n  ownerReferences:\n"
                      "  - {apiVersion: nvidia.com/v1, kind: ClusterPolicy, name: cluster-policy,"
                      " uid: u1, controller: true}\nspec:\n  template:\n    spec:\n"
                      "      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: "
                      "NoSchedule}, {key: extra, operator: Exists}]\n");
    ns_init_gate g;
    ns_init_gate_of(cuda_ctr, &g);
    json_t *p = ns_init_workload_pod(&g, cuda_ctr, "gpu-operator", "n1", ds, NULL);
    cr_assert_not_null(p);
    const json_t *meta = json_object_get(p, "metadata"), *spec = json_object_get(p, "spec");
    cr_assert_str_eq(json_string_value(json_object_get(meta, "generateName")),
                     "nvidia-cuda-validator-");
    cr_assert_str_eq(json_string_value(json_object_get(meta, "namespace")), "gpu-operator");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(meta, "labels"), "app")),
                     "nvidia-cuda-validator");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(meta, "ownerReferences"), 0), "kind")),
                     "ClusterPolicy");
    cr_assert_str_eq(json_string_value(json_object_get(spec, "nodeName")), "n1");
    cr_assert_str_eq(json_string_value(json_object_get(spec, "restartPolicy")), "OnFailure");
    cr_assert_eq(json_array_size(json_object_get(spec, "tolerations")), 2);
    const json_t *init = json_array_get(json_object_get(spec, "initContainers"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(init, "name")), "cuda-validation");
    cr_assert_str_eq(json_string_value(json_object_get(init, "image")),
                     "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0");
    cr_assert_null(json_object_get(init, "resources"), "the cuda workload asks no GPU resource");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(spec, "containers"), 0), "name")),
                     "nvidia-cuda-validator");
    json_decref(p);
    json_decref(cuda_ctr);

    json_t *plug_ctr = yaml(VALIDATOR("plugin", ""));
    ns_init_gate_of(plug_ctr, &g);
    cr_assert(g.workload);
    p = ns_init_workload_pod(&g, plug_ctr, "gpu-operator", "n1", ds, "nvidia.com/mig-1g.5gb");
    meta = json_object_get(p, "metadata");
    spec = json_object_get(p, "spec");
    cr_assert_str_eq(json_string_value(json_object_get(meta, "generateName")),
                     "nvidia-device-plugin-validator-");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(meta, "labels"), "app")),
                     "nvidia-device-plugin-validator");
    init = json_array_get(json_object_get(spec, "initContainers"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(init, "name")), "plugin-validation");
    const json_t *res = json_object_get(init, "resources");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(res, "limits"), "nvidia.com/mig-1g.5gb")),
        "1");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "requests"),
                                                       "nvidia.com/mig-1g.5gb")),
                     "1");
    json_decref(p);
    json_decref(plug_ctr);
    json_decref(ds);
}
