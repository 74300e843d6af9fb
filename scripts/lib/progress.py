#!/usr/bin/env python3
"""Shows the operator's progress per GPU node and per state until a condition holds.

Reads `kubectl get nodes` and `kubectl get clusterpolicy` (the operator's status) every half
second. On a terminal the table is redrawn in place; otherwise one line is printed per change.

  progress.py --kubeconfig PATH --until ready [--timeout S]
  progress.py --kubeconfig PATH --until mig:NODE=STATE [--timeout S]
Exit status 0 when the condition held, 1 on timeout.
"""
import argparse
import json
import subprocess
import sys
import time

STAGES = ["driver", "container-toolkit", "device-plugin", "mig-manager"]
LABELS = {
    "driver": "nvidia.com/gpu.deploy.driver",
    "container-toolkit": "nvidia.com/gpu.deploy.container-toolkit",
    "device-plugin": "nvidia.com/gpu.deploy.device-plugin",
    "mig-manager": "nvidia.com/gpu.deploy.mig-manager",
}


def kubectl(kubeconfig, *args):
    out = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *args, "-o", "json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    try:
        return json.loads(out.stdout)
    except ValueError:
        return None


def snapshot(kubeconfig):
    nodes = kubectl(kubeconfig, "get", "nodes") or {"items": []}
    cps = kubectl(kubeconfig, "get", "clusterpolicies") or {"items": []}
    cp = cps["items"][0] if cps["items"] else {}
    status = cp.get("status", {})
    behind = {b.get("node"): b for b in status.get("behind", [])}
    rows = []
    for n in sorted(nodes["items"], key=lambda n: n["metadata"]["name"]):
        labels = n["metadata"].get("labels", {})
        if labels.get("feature.node.kubernetes.io/pci-10de.present") != "true":
            continue
        name = n["metadata"]["name"]
        b = behind.get(name)
        cells = []
        for s in STAGES:
            v = labels.get(LABELS[s])
            if s == "mig-manager" and labels.get("nvidia.com/mig.capable") != "true":
                cells.append("-")
            elif b and b.get("state") == s:
                cells.append({"failed": "FAILED", "reconfiguring": "reconf"}.get(b.get("phase"), "..."))
            elif v == "true":
                cells.append("ok")
            elif v:
                cells.append("paused")
            else:
                cells.append("")
        alloc = n.get("status", {}).get("allocatable", {})
        gpus = " ".join("%s=%s" % (k.replace("nvidia.com/", ""), v) for k, v in sorted(alloc.items())
                        if k.startswith("nvidia.com/") and v not in ("0", 0))
        mig = labels.get("nvidia.com/mig.config", "")
        if mig:
            mig += "/" + labels.get("nvidia.com/mig.config.state", "")
        rows.append((name, labels.get("nvidia.com/gpu.product", ""), cells,
                     "ready" if not b else b.get("phase", ""), gpus, mig,
                     (b or {}).get("reason", "")))
    return status.get("state", "-"), status.get("nodes", {}), rows, labels_of(nodes)


def labels_of(nodes):
    return {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in nodes["items"]}


def render(state, counts, rows):
    out = ["ClusterPolicy: %-9s GPU nodes: %s ready / %s" % (state, counts.get("ready", 0),
                                                                 counts.get("gpu", 0))]
    out.append("%-8s %-28s %-7s %-8s %-8s %-7s %-10s %-18s %s" % (
        "NODE", "PRODUCT", "DRIVER", "TOOLKIT", "PLUGIN", "MIG", "NODE", "MIG CONFIG", "ALLOCATABLE"))
    for name, product, cells, phase, gpus, mig, reason in rows:
        out.append("%-8s %-28s %-7s %-8s %-8s %-7s %-10s %-18s %s" % (
            name, product[:28], *cells, phase, mig, gpus))
        if reason and phase != "ready":
            out.append("         why: %s" % reason[:150])
    return out


def holds(cond, state, all_labels):
    if cond == "ready":
        return state == "ready"
    if cond.startswith("mig:"):
        node, want = cond[4:].split("=", 1)
        return all_labels.get(node, {}).get("nvidia.com/mig.config.state") == want and state == "ready"
    raise SystemExit("unknown condition %s" % cond)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--until", required=True)
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    tty = sys.stdout.isatty()
    last, drawn = None, 0
    end = time.time() + a.timeout
    while True:
        state, counts, rows, all_labels = snapshot(a.kubeconfig)
        lines = render(state, counts, rows)
        if tty:
            if drawn:
                sys.stdout.write("\x1b[%dA\x1b[J" % drawn)
            sys.stdout.write("\n".join(lines) + "\n")
            drawn = len(lines)
        elif lines != last:
            stamp = time.strftime("%H:%M:%S")
            for line in lines:
                print("%s %s" % (stamp, line))
            print()
        sys.stdout.flush()
        last = lines
        if holds(a.until, state, all_labels):
            return 0
        if time.time() > end:
            print("timed out after %ds waiting for %s" % (a.timeout, a.until))
            return 1
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
