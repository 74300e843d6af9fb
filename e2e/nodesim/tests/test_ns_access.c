/* Tests for ns_access: what gpu-validator reaches in a container on a real node. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_yaml.h"
#include "ns_access.h"

static json_t *pod(const char *yaml)
{
    json_t *p = NULL;
    kc_err err;
    cr_assert_eq(kc_yaml_parse_one(yaml, strlen(yaml), NULL, &p, &err), KC_OK, "%s", err.msg);
    return p;
}

static int access_of(const json_t *p, int ctr, char *msg, size_t size)
{
    const json_t *c =
        json_array_get(json_object_get(json_object_get(p, "spec"), "containers"), (size_t)ctr);
    cr_assert_not_null(c);
    return ns_validator_access(p, c, msg, size);
}

#define DRIVER_MOUNT                                                                               \
    "volumes: [{name: d, hostPath: {path: /run/nvidia/driver}}, "                                  \
    "{name: v, hostPath: {path: /run/nvidia/validations, type: DirectoryOrCreate}}]\n"

Test(access, outside_the_runtime_both_libraries_come_from_the_driver_root)
{
    char msg[600];
    /* NVML's path alone: libcuda.so.1 is not found (the driver-validation defect). */
    json_t *p = pod("spec:\n  containers: [{name: c, command: [gpu-validator], args: [--mode, "
                    "driver], env: [{name: GPU_VALIDATOR_LIBNVML, value: "
                    "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1}], "
                    "volumeMounts: [{name: d, mountPath: /run/nvidia/driver}]}]\n  " DRIVER_MOUNT);
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 2);
    cr_assert_str_eq(msg, "no NVIDIA driver: libcuda.so.1: cannot open shared object file: No "
                          "such file or directory (is the driver installed and the container "
                          "run with the nvidia runtime?)");
    json_decref(p);
    /* The driver root, mounted: both load. */
    p = pod("spec:\n  containers: [{name: c, command: [gpu-validator], args: [--mode, driver], "
            "env: [{name: GPU_VALIDATOR_DRIVER_ROOT, value: /run/nvidia/driver}], "
            "volumeMounts: [{name: d, mountPath: /run/nvidia/driver}]}]\n  " DRIVER_MOUNT);
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 0, "%s", msg);
    json_decref(p);
    /* The driver root not mounted into the container. */
    p = pod("spec:\n  containers: [{name: c, command: [gpu-validator], args: [--mode, cuda], "
            "env: [{name: GPU_VALIDATOR_DRIVER_ROOT, value: /run/nvidia/driver}]}]\n");
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 2);
    cr_assert(strstr(msg, "libcuda.so.1 not found under the driver root /run/nvidia/driver"), "%s",
              msg);
    json_decref(p);
}

Test(access, through_the_runtime_only_a_container_that_asks_for_devices_gets_the_libraries)
{
    char msg[600];
    /* runtimeClassName without NVIDIA_VISIBLE_DEVICES: the runtime injects nothing. */
    json_t *p = pod("spec:\n  runtimeClassName: nvidia\n  containers: [{name: c, command: "
                    "[gpu-validator], args: [--mode, toolkit]}]\n");
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 2);
    cr_assert(strstr(msg, "no NVIDIA driver: libnvidia-ml.so.1: cannot open shared object file"),
              "%s", msg);
    json_decref(p);
    p = pod("spec:\n  runtimeClassName: nvidia\n  containers: [{name: c, command: "
            "[gpu-validator], args: [--mode, toolkit], env: [{name: NVIDIA_VISIBLE_DEVICES, value: "
            "void}]}]\n");
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 2, "void asks for nothing");
    json_decref(p);
    p = pod("spec:\n  runtimeClassName: nvidia\n  containers: [{name: c, command: "
            "[gpu-validator], args: [--mode, toolkit], env: [{name: NVIDIA_VISIBLE_DEVICES, value: "
            "all}]}]\n");
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 0, "%s", msg);
    json_decref(p);
    /* A requested GPU resource: the device plugin's allocation names the devices. */
    p = pod("spec:\n  runtimeClassName: nvidia\n  containers: [{name: c, command: "
            "[gpu-validator], args: [--mode, plugin], resources: {limits: {nvidia.com/gpu: "
            "1}}}]\n");
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 0, "%s", msg);
    json_decref(p);
    /* Devices asked for, but no runtime class: the default runtime injects nothing. */
    p = pod("spec:\n  containers: [{name: c, command: [gpu-validator], args: [--mode, plugin], "
            "resources: {limits: {nvidia.com/gpu: 1}}}]\n");
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 2);
    cr_assert(strstr(msg, "no NVIDIA driver: libcuda.so.1"), "%s", msg);
    json_decref(p);
}

Test(access, the_status_file_in_a_hostpath_directory_needs_root)
{
    char msg[600];
    const char *base = "spec:\n  runtimeClassName: nvidia\n%s  containers: [{name: c, command: "
                       "[gpu-validator], args: [--mode, cuda, --status-file, "
                       "/run/nvidia/validations/cuda-ready], env: [{name: NVIDIA_VISIBLE_DEVICES, "
                       "value: all}], volumeMounts: [{name: v, mountPath: "
                       "/run/nvidia/validations}]%s}]\n  " DRIVER_MOUNT;
    char y[1200];
    /* The image's USER (1000). */
    snprintf(y, sizeof(y), base, "", "");
    json_t *p = pod(y);
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 1);
    cr_assert_str_eq(msg, "cannot write status file /run/nvidia/validations/cuda-ready.tmp.1: "
                          "Permission denied");
    json_decref(p);
    snprintf(y, sizeof(y), base, "", ", securityContext: {runAsUser: 0}");
    p = pod(y);
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 0, "%s", msg);
    json_decref(p);
    snprintf(y, sizeof(y), base, "  securityContext: {runAsUser: 0}\n", "");
    p = pod(y);
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 0, "the pod's runAsUser: %s", msg);
    json_decref(p);
    snprintf(y, sizeof(y), base, "  securityContext: {runAsUser: 0}\n",
             ", securityContext: {runAsUser: 1000}");
    p = pod(y);
    cr_assert_eq(access_of(p, 0, msg, sizeof(msg)), 1, "the container's wins");
    json_decref(p);
}

/* Every gpu-validator container of the DaemonSets the operator renders reaches the driver and its
 * status file, for every rendering the golden tests keep (host driver included). */
Test(access, the_operators_rendered_validators_reach_everything)
{
    static const char *const cases[] = {"minimal", "full", "time-slicing", "mig-mixed-host-driver",
                                        "custom-images"};
    static const char *const states[] = {"state-container-toolkit", "state-operator-validation"};
    const char *data = getenv("KC_TEST_DATA");
    cr_assert_not_null(data);
    int checked = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (size_t s = 0; s < 2; s++) {
            char path[1024];
            snprintf(path, sizeof(path), "%s/render/%s/%s.json", data, cases[i], states[s]);
            json_error_t je;
            json_t *objs = json_load_file(path, 0, &je);
            cr_assert_not_null(objs, "%s: %s", path, je.text);
            size_t k;
            const json_t *o;
            json_array_foreach(objs, k, o)
            {
                if (strcmp(json_string_value(json_object_get(o, "kind")), "DaemonSet") != 0)
                    continue;
                const json_t *tmpl = json_object_get(json_object_get(o, "spec"), "template");
                size_t j;
                const json_t *c;
                json_array_foreach(json_object_get(json_object_get(tmpl, "spec"), "initContainers"),
                                   j, c)
                {
                    const json_t *cmd = json_array_get(json_object_get(c, "command"), 0);
                    if (!cmd || strcmp(json_string_value(cmd), "gpu-validator") != 0)
                        continue;
                    char msg[600];
                    cr_assert_eq(ns_validator_access(tmpl, c, msg, sizeof(msg)), 0, "%s %s %s: %s",
                                 cases[i], states[s], json_string_value(json_object_get(c, "name")),
                                 msg);
                    checked++;
                }
            }
            json_decref(objs);
        }
    cr_assert_eq(checked, 5 * (1 + 3),
                 "driver-validation in the toolkit's, three in the validator's");
}
