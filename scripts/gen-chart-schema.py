#!/usr/bin/env python3
"""Writes charts/gpu-operator/values.schema.json (JSON Schema draft-07) from the ClusterPolicy CRD.

Every values section that becomes a ClusterPolicy spec section takes the CRD's schema of that
section (so `helm install` refuses what the API server would refuse, with the key's path), plus
the chart's own keys (the operator Deployment, ConfigMaps to create, the MIG shorthands). Objects
the CRD closes are closed here too: a mistyped key fails `helm install` naming it.

  scripts/gen-chart-schema.py            # rewrite the file
  scripts/gen-chart-schema.py --check    # exit 1 when the file is not what this script writes
"""
import copy
import json
import os
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRD = os.path.join(REPO, "crds", "nvidia.com_clusterpolicies.yaml")
OUT = os.path.join(REPO, "charts", "gpu-operator", "values.schema.json")

# Values sections that are ClusterPolicy spec sections of the same name.
SPEC_SECTIONS = [
    "psa", "cdi", "sandboxWorkloads", "hostPaths", "daemonsets", "validator", "operator", "mig",
    "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager",
    "nodeStatusExporter", "gds", "gdrcopy", "vgpuManager", "vgpuDeviceManager", "vfioManager",
    "kataManager", "sandboxDevicePlugin", "kataSandboxDevicePlugin", "ccManager", "psp",
]

KEEP = ("type", "description", "properties", "items", "enum", "pattern", "minimum", "maximum",
        "minLength", "maxLength", "required", "format", "additionalProperties")


def convert(node):
    """An OpenAPI v3 structural schema node as JSON Schema draft-07."""
    out = {}
    for k in KEEP:
        if k not in node:
            continue
        v = node[k]
        if k == "properties":
            v = {name: convert(sub) for name, sub in v.items()}
        elif k in ("items",) or (k == "additionalProperties" and isinstance(v, dict)):
            v = convert(v)
        out[k] = copy.deepcopy(v) if k not in ("properties", "items", "additionalProperties") else v
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if (out.get("type") == "object" and "properties" in out and "additionalProperties" not in out
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def obj(desc, props=None, closed=True, **extra):
    o = {"type": "object", "description": desc}
    if props is not None:
        o["properties"] = props
        if closed:
            o["additionalProperties"] = False
    o.update(extra)
    return o


def s(desc, **extra):
    return dict({"type": "string", "description": desc}, **extra)


def b(desc):
    return {"type": "boolean", "description": desc}


def port(desc):
    return {"type": "integer", "minimum": 1, "maximum": 65535, "description": desc}


def string_map(desc):
    return obj(desc, additionalProperties={"type": "string"})


def config_create(section, what):
    return {
        "create": b("Creates the ConfigMap named by %s.config.name from %s.config.data." % (section, section)),
        "data": string_map("Keys of the ConfigMap to create (%s), one file per key." % what),
    }


def build():
    with open(CRD) as f:
        crd = yaml.safe_load(f)
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    props = {}
    for name in SPEC_SECTIONS:
        if name not in spec:
            raise SystemExit("gen-chart-schema: the CRD has no spec.%s section" % name)
        props[name] = convert(spec[name])

    op = props["operator"]["properties"]
    op.update({
        "repository": s("Registry and path of the operator image.", pattern=r"^\S+$"),
        "image": s("Name of the operator image.", pattern=r"^\S+$"),
        "version": s("Tag of the operator image (default: the chart's appVersion).", pattern=r"^\S*$"),
        "imagePullPolicy": s("Pull policy of the operator image.", enum=["Always", "IfNotPresent", "Never"]),
        "imagePullSecrets": {"type": "array", "description": "Secrets to pull the operator image.",
                             "items": {"type": "string"}},
        "priorityClassName": s("Priority class of the operator pod."),
        "replicas": {"type": "integer", "minimum": 1, "description": "Operator replicas (one leads)."},
        "resources": obj("Compute resources of the operator container.", {
            "limits": obj("Limits, e.g. cpu: 500m.", additionalProperties={"type": ["integer", "string"]}),
            "requests": obj("Requests, e.g. memory: 100Mi.", additionalProperties={"type": ["integer", "string"]}),
        }),
        "leaderElection": obj("Leader election on a Lease in the release namespace.", {
            "enabled": b("Runs the operator with --leader-elect."),
        }),
        "metricsPort": port("Port of /metrics (--metrics-bind-address) and of the metrics Service."),
        "healthPort": port("Port of /healthz and /readyz (--health-probe-bind-address)."),
        "tolerations": {"type": "array", "description": "Tolerations of the operator pod.",
                        "items": {"type": "object"}},
        "nodeSelector": string_map("Node selector of the operator pod."),
        "affinity": obj("Affinity of the operator pod (core/v1 Affinity)."),
        "upgradeCRD": b("Re-applies the ClusterPolicy CRD in a pre-upgrade hook Job."),
        "cleanupPolicy": b("Deletes the ClusterPolicy in a pre-delete hook Job and waits for the "
                           "operator to remove the operands and node labels."),
    })
    op["env"] = copy.deepcopy(props["driver"]["properties"]["env"])
    op["env"]["description"] = "Extra environment variables of the operator container."
    op["cleanupCRD"] = b("Deletes the ClusterPolicy CRD in the pre-delete hook, after the "
                         "ClusterPolicy (NVIDIA's operator.cleanupCRD).")
    op["imagePrepull"] = obj("The image pre-pull DaemonSet nvidia-image-prepull (this operator's "
                             "own value).", {
        "enabled": b("Pull a GPU node's later operand images while its first operand starts "
                     "(--image-prepull)."),
    })
    op["logging"] = obj("Log settings of the operator (NVIDIA's zap flags).", {
        "level": s("Least level logged (KC_LOG_LEVEL): debug, info, warn or error; NVIDIA's zap "
                   "levels dpanic, panic and fatal log errors only.",
                   enum=["debug", "info", "warn", "error", "dpanic", "panic", "fatal"]),
        "develMode": b("Debug logs as text (logfmt), as NVIDIA's --zap-devel gives console "
                       "logs; false: JSON lines at the given level."),
        "timeEncoding": s("The log lines' time (NVIDIA's --zap-time-encoding): seconds, "
                          "milliseconds or nanoseconds since the epoch, or an RFC 3339 time.",
                          enum=["epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano"]),
    })
    # Labels and annotations also go on the operator pod; defaultRuntime is a runtime hint.
    op["defaultRuntime"] = s("Container runtime of the GPU nodes (containerd, docker, crio); the "
                             "container toolkit configures it.", enum=["containerd", "docker", "crio"])

    mm = props["migManager"]["properties"]
    mm["config"]["properties"].update(config_create("migManager", "mig-parted configurations"))
    mm["WITH_REBOOT"] = {"type": ["boolean", "string"], "enum": [True, False, "true", "false"],
                         "description": "Shorthand for migManager.env WITH_REBOOT: reboot the node "
                                        "when a MIG mode change needs it."}
    mm["default"] = dict(mm["config"]["properties"]["default"])
    mm["default"]["description"] = ("Shorthand for migManager.config.default: the MIG config the "
                                    "operator labels MIG-capable nodes with when they carry no "
                                    "nvidia.com/mig.config label.")
    mm["default"].pop("default", None)

    props["devicePlugin"]["properties"]["config"]["properties"].update(
        config_create("devicePlugin", "device plugin configurations, e.g. time-slicing"))
    dcfg = props["dcgmExporter"]["properties"]["config"]["properties"]
    dcfg.update(config_create("dcgmExporter", "DCGM metrics lists"))
    dcfg["data"]["type"] = ["object", "string"]
    dcfg["data"]["description"] = ("The metrics to collect: a CSV string (NVIDIA's form, the "
                                   "ConfigMap's dcgm-metrics.csv) or the ConfigMap's keys.")

    drv = props["driver"]["properties"]
    drv["nvidiaDriverCRD"] = obj("NVIDIA's NVIDIADriver CRD (not supported by this operator: "
                                 "enabled=true fails the install).", {
        "enabled": b("Must stay false."),
        "deployDefaultCR": b("Unused while enabled is false."),
        "driverType": s("Unused while enabled is false.", enum=["gpu", "vgpu", "vgpu-host-manager"]),
        "nodeSelector": string_map("Unused while enabled is false."),
    })
    up = drv["upgradePolicy"]["properties"]
    up["gpuPodDeletion"] = copy.deepcopy(up["podDeletion"])
    up["gpuPodDeletion"]["description"] = ("NVIDIA's name for upgradePolicy.podDeletion: how GPU "
                                           "pods are deleted before a driver upgrade.")

    props["platform"] = obj("Where the cluster runs.", {
        "openshift": b("OpenShift (not supported by this chart: true fails the install)."),
    })
    props["nfd"] = obj("Node Feature Discovery. This chart does not deploy NFD: the operator "
                       "manages the nodes labelled feature.node.kubernetes.io/pci-10de.present=true "
                       "(or pci-0302_10de / pci-0300_10de), by NFD run on its own or by hand.", {
        "enabled": b("NVIDIA's subchart switch: accepted either way, NFD is not deployed (the "
                     "install notes say so and count the labelled nodes)."),
        "nodefeaturerules": b("Must stay false (NFD rules are NFD objects): true fails the install."),
    })
    props["node-feature-discovery"] = obj(
        "Values of NVIDIA's NFD subchart; kept so values files carry over, and unused (the chart "
        "deploys no NFD; the install notes say so when this is set).")
    props["clusterPolicy"] = obj("The ClusterPolicy the chart creates from these values.", {
        "name": s("Name of the ClusterPolicy.", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", maxLength=253),
        "create": b("Creates the ClusterPolicy (false: bring your own)."),
        "deployCR": b("NVIDIA's name for create; the ClusterPolicy is created when both are true."),
    })
    props["gpuCluster"] = obj("NVIDIA's GPUCluster (DRA) stack: not supported by this operator.", {
        "deployCR": b("Must stay false: true fails the install."),
    })
    open_obj = obj("Accepted for NVIDIA's values; unused (gpuCluster.deployCR must stay false).")
    props["draDriver"] = obj("NVIDIA's DRA driver, deployed only through gpuCluster (not "
                             "supported by this operator); accepted while gpuCluster is off.", {
        "repository": s("Unused.", pattern=r"^\S*$"),
        "image": s("Unused.", pattern=r"^\S*$"),
        "version": s("Unused.", pattern=r"^\S*$"),
        "imagePullPolicy": s("Unused.", enum=["Always", "IfNotPresent", "Never"]),
        "imagePullSecrets": {"type": "array", "description": "Unused.", "items": {"type": "string"}},
        "featureGates": obj("Unused.", additionalProperties={"type": "boolean"}),
        "gpus": obj("Unused.", {"kubeletPlugin": open_obj}),
        "computeDomains": obj("Unused.", {
            "enabled": b("Unused."),
            "controller": open_obj,
            "kubeletPlugin": open_obj,
        }),
    })
    props["extraObjects"] = {"type": "array", "description": "Extra manifests, rendered with tpl.",
                             "items": {"type": ["object", "string"]}}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Values of the gpu-operator chart",
        "description": "Written by scripts/gen-chart-schema.py from crds/nvidia.com_clusterpolicies.yaml.",
        "type": "object",
        "additionalProperties": False,
        "properties": props,
    }


def main():
    text = json.dumps(build(), indent=2) + "\n"
    if sys.argv[1:] == ["--check"]:
        with open(OUT) as f:
            if f.read() != text:
                print("gen-chart-schema: %s is stale; run scripts/gen-chart-schema.py" % OUT,
                      file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
