#!/usr/bin/env python3
"""Helpers of bench/run (the operator at scale on kubesim + nodesim).

  operator_scale.py watch DIR NAMESPACE OUT    record node, operator pod and ClusterPolicy changes
                                               (wall-clock receive times) until SIGTERM
  operator_scale.py analyze ARGS.json          one size's result object from what bench/run saved
  operator_scale.py report RESULTS.json OUTDIR [NAME [OPERATOR-ARGS]]
                                               NAME.json, NAME.md, NAME.png (NAME: latest);
                                               prints the targets with pass/miss
  operator_scale.py compare RESULTS.json OUT.md   the before/after table of bench/run --compare-build
  operator_scale.py selftest                   checks the Go-duration parser, the parsing of
                                               Pulled events and the per-node pull slack (exit 1
                                               on a failure)

Only the Python standard library; the plot uses gnuplot when it is installed.
"""
import calendar
import decimal
import http.client
import json
import math
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
STAGES = ["driver", "container-toolkit", "device-plugin", "mig-manager"]
STAGE_DS = {
    "nvidia-driver-daemonset": "driver",
    "nvidia-container-toolkit-daemonset": "container-toolkit",
    "nvidia-device-plugin-daemonset": "device-plugin",
    "nvidia-mig-manager": "mig-manager",
}
DEPLOY = "nvidia.com/gpu.deploy."


# ---- watch ----------------------------------------------------------------------------------


def server_of(d):
    kc = open(os.path.join(d, "kubeconfig")).read()
    m = re.search(r'server:\s*"?([^"\s]+)"?', kc)
    if not m:
        raise SystemExit("operator_scale: no server in %s/kubeconfig" % d)
    return urllib.parse.urlsplit(m.group(1))


class Watcher:
    """Lists then watches one collection, resuming from the last resourceVersion."""

    def __init__(self, d, path, compact, emit):
        self.url = server_of(d)
        self.token = open(os.path.join(d, "admin.token")).read().strip()
        self.ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        self.path, self.compact, self.emit = path, compact, emit
        self.last = {}

    def conn(self):
        return http.client.HTTPSConnection(self.url.hostname, self.url.port, context=self.ctx,
                                           timeout=600)

    def get(self, c, q):
        c.request("GET", self.path + "?" + q, headers={"Authorization": "Bearer " + self.token})
        return c.getresponse()

    def see(self, typ, obj):
        name = obj["metadata"]["name"]
        facts = self.compact(obj)
        if typ == "DELETED":
            self.last.pop(name, None)
            self.emit({"t": time.time(), "k": facts["k"], "type": typ, "name": name})
            return
        if self.last.get(name) == facts:
            return
        self.last[name] = facts
        rec = {"t": time.time(), "type": typ, "name": name}
        rec.update(facts)
        self.emit(rec)

    def run(self):
        rv = None
        while True:
            try:
                c = self.conn()
                if rv is None:
                    r = self.get(c, "limit=0")
                    body = json.loads(r.read())
                    for o in body.get("items", []):
                        self.see("LISTED", o)
                    rv = body["metadata"]["resourceVersion"]
                r = self.get(c, "watch=true&allowWatchBookmarks=true&resourceVersion=" + rv)
                if r.status != 200:
                    r.read()
                    rv = None
                    continue
                while True:
                    line = r.readline()
                    if not line:
                        break
                    ev = json.loads(line)
                    obj = ev.get("object", {})
                    if ev.get("type") == "ERROR":
                        rv = None
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev.get("type") != "BOOKMARK":
                        self.see(ev["type"], obj)
                c.close()
            except (OSError, http.client.HTTPException, ValueError):
                time.sleep(0.2)


def compact_node(o):
    labels = o["metadata"].get("labels") or {}
    keep = {k: v for k, v in labels.items()
            if k.startswith(DEPLOY) or k.startswith("nvidia.com/mig.config")}
    return {"k": "node", "labels": keep}


def pod_ready(o):
    for c in (o.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def validation_run(o):
    """[startedAt, finishedAt] of a validation pod's terminated "validation" container, else
    None (whole seconds, as the API gives them)."""
    for c in (o.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == "validation":
            t = (c.get("state") or {}).get("terminated") or {}
            if t.get("startedAt") and t.get("finishedAt"):
                return [t["startedAt"], t["finishedAt"]]
    return None


def compact_pod(o):
    m = o["metadata"]
    labels = m.get("labels") or {}
    ann = m.get("annotations") or {}
    facts = {"k": "pod", "node": (o.get("spec") or {}).get("nodeName"), "app": labels.get("app"),
            "val": labels.get("nvidia.com/gpu-operator.validation"),
            "key": ann.get("nvidia.com/gpu-operator.validation-key") or ann.get(
                "nvidia.com/gpu-operator.key"),
            "res": ann.get("nvidia.com/gpu-operator.resource"),
            "phase": (o.get("status") or {}).get("phase"), "ready": pod_ready(o),
            "deleting": bool(m.get("deletionTimestamp"))}
    if facts["val"]:
        run = validation_run(o)
        if run:
            facts["run"] = run
    return facts


def compact_policy(o):
    st = o.get("status") or {}
    nodes = st.get("nodes") or {}
    return {"k": "policy", "state": st.get("state"), "gpu": nodes.get("gpu"),
            "ready": nodes.get("ready")}


def cmd_watch(d, ns, out, ready_n=None):
    f = open(out, "w")
    lock = threading.Lock()
    marked = [False]

    def emit(rec):
        with lock:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            # The ClusterPolicy ready on every GPU node: the time the event arrived goes to
            # D/ready, which bench/run waits for (no polling client competing for the CPU).
            if (ready_n is not None and not marked[0] and rec.get("k") == "policy" and
                    rec.get("state") == "ready" and rec.get("ready") == ready_n):
                marked[0] = True
                with open(os.path.join(d, "ready.tmp"), "w") as r:
                    r.write("%.6f\n" % rec["t"])
                os.rename(os.path.join(d, "ready.tmp"), os.path.join(d, "ready"))

    def stop(*_):
        with lock:
            f.flush()
            os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    specs = [("/api/v1/nodes", compact_node),
             ("/api/v1/namespaces/%s/pods" % ns, compact_pod),
             ("/apis/nvidia.com/v1/clusterpolicies", compact_policy)]
    for path, comp in specs:
        threading.Thread(target=Watcher(d, path, comp, emit).run, daemon=True).start()
    while True:
        time.sleep(0.5)
        with lock:
            f.flush()


# ---- analysis -------------------------------------------------------------------------------


def parse_histogram(text, name, match=""):
    """Cumulative buckets [(le, count)] of one histogram series from Prometheus text."""
    out = []
    for line in text.splitlines():
        if not line.startswith(name + "_bucket{") or match not in line:
            continue
        m = re.search(r'le="([^"]+)"\}\s+(\S+)', line)
        if m:
            le = math.inf if m.group(1) == "+Inf" else float(m.group(1))
            out.append((le, float(m.group(2))))
    return sorted(out)


def quantile(buckets, q):
    """histogram_quantile as Prometheus does it: linear within the bucket (0 below the first)."""
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if math.isinf(le):
                return prev_le  # the highest finite bound: all we know
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def hist_max(buckets):
    """The upper bound of the highest non-empty bucket (inf when the +Inf bucket has any)."""
    prev = 0.0
    top = None
    for le, c in buckets:
        if c > prev:
            top = le
        prev = c
    return top


def counter(text, name, match=""):
    """The value of one counter or gauge series (a histogram's _count) from Prometheus text."""
    for line in text.splitlines():
        if line.startswith(name) and match in line and line[len(name)] in " {":
            return float(line.rsplit(None, 1)[1])
    return 0.0


def failed_validations(evs, t_from, t_to):
    """Validation pods the watch saw fail in a window (each one costs a backoff and a retry)."""
    return len({e["name"] for e in evs if e["k"] == "pod" and e.get("val") and
                e.get("phase") == "Failed" and t_from <= e["t"] <= t_to})


def pct(values, q):
    if not values:
        return None
    s = sorted(values)
    i = min(len(s) - 1, max(0, int(math.ceil(q * len(s))) - 1))
    return s[i]


def is_operator(agent):
    """The operator's user agent: "gpu-operator", or "gpu-operator@HOST" (not its hook modes)."""
    return agent == "gpu-operator" or agent.startswith("gpu-operator@")


def operator_requests(stats):
    mine = {}
    found = False
    for c in stats.get("clients", {}).values():
        if is_operator(c.get("agent", "")):
            found = True
            for what, n in c.get("requests", {}).items():
                mine[what] = mine.get(what, 0) + n
    if not found:
        agents = sorted({c.get("agent", "") for c in stats.get("clients", {}).values()})
        raise SystemExit("operator_scale: no requests from the operator's user agent "
                         "(gpu-operator[@HOST]) in kubesim's counters; agents seen: %s" %
                         ", ".join(agents))
    return mine


def diff(after, before):
    out = {}
    for k, v in after.items():
        d = v - before.get(k, 0)
        if d:
            out[k] = d
    return out


def by_verb(reqs):
    out = {}
    for k, v in reqs.items():
        verb = k.split(" ", 1)[0]
        out[verb] = out.get(verb, 0) + v
    return out


def load_events(path):
    evs = []
    with open(path) as f:
        for line in f:
            try:
                evs.append(json.loads(line))
            except ValueError:
                pass  # a line cut by the stop
    evs.sort(key=lambda e: e["t"])
    return evs


def stage_events(evs, t_from, t_to):
    """First times in a window, per (node, stage): the operand pod Ready, the validation pod
    created, the validation pod Succeeded, the deploy label set; per node: the MIG config's
    state success."""
    ready_at, val_added, val_ok, label_at, mig_ok = {}, {}, {}, {}, {}
    for e in evs:
        if e["t"] < t_from or e["t"] > t_to or e["type"] == "DELETED":
            continue
        if e["k"] == "pod" and e.get("node"):
            n = e["node"]
            st = STAGE_DS.get(e.get("app") or "")
            if st and e.get("ready") and not e.get("deleting"):
                ready_at.setdefault((n, st), e["t"])
            if e.get("val"):
                if e["type"] == "ADDED":
                    val_added.setdefault((n, e["val"]), e["t"])
                if e.get("phase") == "Succeeded":
                    val_ok.setdefault((n, e["val"]), e["t"])
        elif e["k"] == "node":
            for k, v in e["labels"].items():
                if k.startswith(DEPLOY) and v == "true":
                    label_at.setdefault((e["name"], k[len(DEPLOY):]), e["t"])
                if k == "nvidia.com/mig.config.state" and v == "success":
                    mig_ok.setdefault(e["name"], e["t"])
    return ready_at, val_added, val_ok, label_at, mig_ok


def cross_check(evs, t_from, t_to):
    """Transition delays seen from outside, per node: operand pod Ready → the operator creates
    that stage's validation pod; a stage's validation Succeeded → the operator sets the next
    stage's deploy label. Each includes one extra watch delivery to this observer."""
    ready_at, val_added, val_ok, label_at, _ = stage_events(evs, t_from, t_to)
    delays = []
    for (n, st), t in ready_at.items():
        a = val_added.get((n, st))
        if a is not None and a >= t:
            delays.append(a - t)
    for i in range(len(STAGES) - 1):
        for (n, st), t in val_ok.items():
            if st != STAGES[i]:
                continue
            lt = label_at.get((n, STAGES[i + 1]))
            if lt is not None and lt >= t:
                delays.append(lt - t)
    return [d * 1000 for d in delays]


def node_timeline(evs, t_from, t_to):
    """Per GPU node, from the ClusterPolicy's creation (every node of the bench's fleet carries
    NFD's pci-10de label before it): when each stage's deploy label was set, its operand pod
    became Ready, its validation pod was created and succeeded. A node is ready when the
    validation pod of every stage deployed to it has succeeded (what the operator counts as a
    validated node, seen one watch delivery later). Returns (ready seconds per node, per-stage
    segment lists in ms, nodes with a stage that did not validate in the window)."""
    ready_at, val_added, val_ok, label_at, mig_ok = stage_events(evs, t_from, t_to)
    label_at = {k: v for k, v in label_at.items() if k[1] in STAGES}
    # A stage without a validation pod on the node (the MIG manager's where MIG stays off) is
    # done once its operand is Ready (and, for the MIG manager, its config applied).
    for (n, st), lab in label_at.items():
        if (n, st) in val_ok or (n, st) in val_added or (n, st) not in ready_at:
            continue
        if st == "mig-manager":
            if n in mig_ok:
                val_ok[(n, st)] = max(ready_at[(n, st)], mig_ok[n])
        else:
            val_ok[(n, st)] = ready_at[(n, st)]
    nodes = {n for n, _ in label_at}
    ready, unfinished = {}, 0
    seg = {st: {"label_to_operand_ready": [], "operand_ready_to_validation_pod": [],
                "validation_pod_run": [], "validated_to_next_label": []} for st in STAGES}
    for n in nodes:
        stages = [st for st in STAGES if (n, st) in label_at]
        if any((n, st) not in val_ok for st in stages):
            unfinished += 1
            continue
        ready[n] = max(val_ok[(n, st)] for st in stages) - t_from
        for i, st in enumerate(stages):
            lab, rdy = label_at[(n, st)], ready_at.get((n, st))
            add, ok = val_added.get((n, st)), val_ok[(n, st)]
            if rdy is not None and rdy >= lab:
                seg[st]["label_to_operand_ready"].append((rdy - lab) * 1000)
            if rdy is not None and add is not None and add >= rdy:
                seg[st]["operand_ready_to_validation_pod"].append((add - rdy) * 1000)
            if add is not None and ok >= add:
                seg[st]["validation_pod_run"].append((ok - add) * 1000)
            if i + 1 < len(stages) and label_at[(n, stages[i + 1])] >= ok:
                seg[st]["validated_to_next_label"].append(
                    (label_at[(n, stages[i + 1])] - ok) * 1000)
    return ready, seg, unfinished


def mig_timing(evs, node, t_label):
    """Times of the MIG change on one node after the label (ms from the label write)."""
    t_seen = t_pending = t_success = t_pods = t_pods_ok = None
    pods = {}
    for e in evs:
        if e["t"] < t_label:
            continue
        if e["k"] == "node" and e["name"] == node:
            lab = e.get("labels", {})
            if t_seen is None and lab.get("nvidia.com/mig.config") == "all-balanced":
                t_seen = e["t"]
            st = lab.get("nvidia.com/mig.config.state")
            if t_pending is None and st == "pending":
                t_pending = e["t"]
            if t_pending is not None and t_success is None and st == "success":
                t_success = e["t"]
        if (e["k"] == "pod" and e.get("node") == node and e.get("val") == "mig-manager"
                and (e.get("key") or "").endswith("/all-balanced") and e["type"] != "DELETED"):
            if e["type"] == "ADDED" and t_pods is None:
                t_pods = e["t"]
            pods[e["name"]] = e.get("phase")
            if pods and all(p == "Succeeded" for p in pods.values()) and t_pods_ok is None:
                t_pods_ok = e["t"]

    def ms(t, base):
        return None if t is None or base is None else round((t - base) * 1000, 1)

    return {
        "mig_label_to_pending_ms": ms(t_pending, t_label),
        "mig_label_to_success_ms": ms(t_success, t_label),
        "mig_label_to_validation_pods_ms": ms(t_pods, t_label),
        "mig_success_to_validation_pods_ms": ms(t_pods, t_success),
        "mig_validation_pods": len(pods),
        "mig_label_to_validated_ms": ms(t_pods_ok, t_label),
    }


def idle_fleet_hops(evs, node, t_from):
    """One node's transitions while the rest of the fleet is idle (the MIG change): a stage's
    validation Succeeded → the operator creates the next stage's validation pod(s). Only the
    hops whose cause is that Succeeded alone: driver → toolkit and device-plugin → MIG (the
    device-plugin validation also waits for the plugin to advertise the new resources)."""
    first_ok, hops = {}, []
    for e in evs:
        if e["t"] < t_from or e["k"] != "pod" or e.get("node") != node or not e.get("val"):
            continue
        if e.get("phase") == "Succeeded":
            first_ok.setdefault(e["val"], e["t"])
        if e["type"] == "ADDED" and e["val"] in ("container-toolkit", "mig-manager"):
            prev = STAGES[STAGES.index(e["val"]) - 1]
            if prev in first_ok:
                hops.append([e["val"], round((e["t"] - first_ok[prev]) * 1000, 1)])
    return hops


# ---- image pulls (kubesim's pull model) -----------------------------------------------------

GO_UNITS_NS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6,
               "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
GO_TERM = re.compile("([0-9]*(?:\\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
PULLED = re.compile('Successfully pulled image "([^"]*)" in ([0-9.]+[a-z\u00b5\u03bc]+'
                    '(?:[0-9.]+[a-z\u00b5\u03bc]+)*)')
SLACK_LIMIT_S = 2.0


def go_duration_s(text):
    """Seconds of a Go time.Duration string as time.ParseDuration reads it ("1.623s", "850ms",
    "1m2.5s", "0s", "0"); ValueError if it is not one."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s[1:] if s[:1] in ("-", "+") else s
    if s == "0":
        return 0.0
    if not s:
        raise ValueError("not a Go duration: %r" % text)
    pos, ns = 0, decimal.Decimal(0)
    while pos < len(s):
        m = GO_TERM.match(s, pos)
        if not m or m.group(1) in ("", "."):
            raise ValueError("not a Go duration: %r" % text)
        ns += decimal.Decimal(m.group(1)) * GO_UNITS_NS[m.group(2)]
        pos = m.end()
    return sign * float(ns) / 1e9


def parse_pulled(message):
    """(image, seconds) of a kubelet's "Successfully pulled image "X" in D ..." message (the pull's
    own time, without the wait for the node's puller), else None ("already present", errors)."""
    m = PULLED.match(message or "")
    if not m:
        return None
    try:
        return m.group(1), go_duration_s(m.group(2))
    except ValueError:
        return None


def rfc3339_s(text):
    """Seconds since the epoch of an RFC 3339 time in UTC ("2024-05-01T10:00:03Z", fractions
    allowed)."""
    m = re.match(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?Z$", text or "")
    if not m:
        raise ValueError("not an RFC 3339 UTC time: %r" % text)
    secs = calendar.timegm(tuple(int(m.group(i)) for i in range(1, 7)))
    return secs + (float(m.group(7)) if m.group(7) else 0.0)


def api_list(d, path, query=""):
    """Every item of a collection of the bench's cluster, a page of 500 at a time."""
    url = server_of(d)
    token = open(os.path.join(d, "admin.token")).read().strip()
    ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
    c = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=600)
    items, cont = [], None
    try:
        while True:
            q = "limit=500" + ("&" + query if query else "") + (
                "&continue=" + urllib.parse.quote(cont, safe="") if cont else "")
            c.request("GET", path + "?" + q, headers={"Authorization": "Bearer " + token})
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                raise SystemExit("operator_scale: GET %s: %d %s" % (path, r.status, body[:200]))
            page = json.loads(body)
            items.extend(page.get("items") or [])
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                return items
    finally:
        c.close()


def rollout_pulls(events, evs, t_from, t_to):
    """Per GPU node, [(image, seconds)] of every successful pull of a pod that the watch saw
    created in the rollout window, from the kubelet's Pulled events (the node: the event's
    source.host, else the pod's node as the watch saw it)."""
    pod_node, first_seen = {}, {}
    for e in evs:
        if e["k"] == "pod" and e["type"] != "DELETED":
            first_seen.setdefault(e["name"], e["t"])
            if e.get("node"):
                pod_node[e["name"]] = e["node"]
    out = {}
    for ev in events:
        if ev.get("reason") != "Pulled":
            continue
        got = parse_pulled(ev.get("message"))
        pod = (ev.get("involvedObject") or {}).get("name")
        if not got or pod not in first_seen or not t_from <= first_seen[pod] <= t_to:
            continue
        node = (ev.get("source") or {}).get("host") or pod_node.get(pod)
        if node:
            out.setdefault(node, []).append(got)
    return out


def validation_runs(evs, t_from, ready):
    """Per GPU node, the run of each validation pod that counted toward its readiness (Succeeded
    on it between t_from and the node's ready time, t_from + ready[node]), in seconds: its
    validation container's startedAt -> finishedAt. The API gives those in whole seconds (runs of
    a few hundred ms read 0 or 1 s), so a run is timed by the watch where it saw both ends: the
    pod's first Running -> first Succeeded update as received (the container's start and exit,
    one watch delivery later each); else by the API's times. Returns (runs per node, the number
    of runs timed by the API's times)."""
    first_running, done = {}, {}
    for e in evs:
        if e["k"] != "pod" or not e.get("val") or e["type"] == "DELETED" or not e.get("node"):
            continue
        n, name = e["node"], e["name"]
        if n not in ready or e["t"] < t_from or e["t"] > t_from + ready[n] + 1e-6:
            continue
        if e.get("phase") == "Running":
            first_running.setdefault(name, e["t"])
        if e.get("phase") == "Succeeded" and name not in done:
            if name in first_running:
                done[name] = (n, e["t"] - first_running[name], False)
            elif e.get("run"):
                done[name] = (n, rfc3339_s(e["run"][1]) - rfc3339_s(e["run"][0]), True)
    runs, by_api = {}, 0
    for n, secs, api in done.values():
        runs.setdefault(n, []).append(secs)
        by_api += api
    return runs, by_api


def node_slack(ready, pulls, runs):
    """Per node of `ready` (seconds from the ClusterPolicy's creation) that pulled an image:
    {ready, longest (its longest single pull, s), image (that pull's), runs (the sum of its
    validation runs, s), slack = ready - (longest + runs)}."""
    out = {}
    for n, t in ready.items():
        if not pulls.get(n):
            continue
        image, longest = max(pulls[n], key=lambda p: p[1])
        total = sum(runs.get(n, []))
        out[n] = {"ready": t, "longest": longest, "image": image, "runs": total,
                  "slack": t - (longest + total)}
    return out


def slack_figures(per_node, pulls, r):
    """The result's pull-model fields from node_slack's output (empty when no node pulled)."""
    if not per_node:
        return {}
    sl = [v["slack"] for v in per_node.values()]
    lp = [v["longest"] for v in per_node.values()]
    vr = [v["runs"] for v in per_node.values()]
    worst = max(per_node.items(), key=lambda kv: kv[1]["slack"])
    by_image = {}
    for ps in pulls.values():
        for image, secs in ps:
            by_image.setdefault(image, []).append(secs)
    return {
        "pull_nodes": len(per_node),
        "node_longest_pull_s_p50": r(pct(lp, 0.5), 3),
        "node_longest_pull_s_p99": r(pct(lp, 0.99), 3),
        "node_validation_runs_s_p50": r(pct(vr, 0.5), 3),
        "node_validation_runs_s_p99": r(pct(vr, 0.99), 3),
        "node_pull_slack_s_p50": r(pct(sl, 0.5), 3),
        "node_pull_slack_s_p99": r(pct(sl, 0.99), 3),
        "node_pull_slack_s_max": r(max(sl), 3),
        "node_pull_slack_s_min": r(min(sl), 3),
        "nodes_pull_slack_over_2s": sum(1 for x in sl if x > SLACK_LIMIT_S),
        "nodes_ready_below_longest_pull": sum(1 for v in per_node.values()
                                              if v["ready"] < v["longest"]),
        "node_pull_slack_worst": {"node": worst[0], **{k: (r(v, 3) if k != "image" else v)
                                                       for k, v in worst[1].items()}},
        "pulls_counted": sum(len(v) for v in pulls.values()),
        "pull_s_by_image": {im: {"n": len(v), "p50": r(pct(v, 0.5), 3), "max": r(max(v), 3)}
                            for im, v in sorted(by_image.items())},
    }


def cmd_analyze(argfile):
    a = json.load(open(argfile))
    d = a["dir"]
    evs = load_events(os.path.join(d, "events.jsonl"))
    req0 = operator_requests(json.load(open(os.path.join(d, "req-ready.json"))))
    req1 = operator_requests(json.load(open(os.path.join(d, "req-idle.json"))))
    rollout = req0
    idle = diff(req1, req0)
    idle_writes = sum(v for k, v in idle.items() if k.split(" ", 1)[0] in WRITE_VERBS)
    idle_lists = sum(v for k, v in idle.items() if k.startswith("list "))
    hist = parse_histogram(open(os.path.join(d, "metrics-ready.txt")).read(),
                           "gpu_operator_transition_delay_seconds")
    # ready_s from the watch of the ClusterPolicy; the poll's time when the watch saw none.
    t_ready = None
    for e in evs:
        if (e["k"] == "policy" and e["t"] >= a["t_cp"] and e.get("state") == "ready"
                and e.get("ready") == a["nodes"]):
            t_ready = e["t"]
            break
    if t_ready is None:
        t_ready = a["t_ready_poll"]
    outside = cross_check(evs, a["t_cp"], a["t_ready_poll"])
    n = a["nodes"]
    m_ready = open(os.path.join(d, "metrics-ready.txt")).read()
    m_idle = open(os.path.join(d, "metrics-idle.txt")).read()
    idle_reconciles = {}
    for kind in ("node", "policy", "status"):
        sel = 'kind="%s"' % kind
        idle_reconciles[kind] = int(
            counter(m_idle, "gpu_operator_reconcile_duration_seconds_count", sel) -
            counter(m_ready, "gpu_operator_reconcile_duration_seconds_count", sel))
    finite = hist[-2][0] if len(hist) >= 2 else None

    def r(x, nd=1):
        return None if x is None else round(x, nd)

    # The same transitions timed to the reconcile's start (waiting for a worker) and to the API
    # server's answer to the last write (what the transition costs end to end, server included).
    parts = {}
    for part in ("queued", "applied"):
        h = parse_histogram(m_ready, "gpu_operator_transition_%s_seconds" % part)
        for q in (50, 99):
            parts["transition_%s_ms_p%d" % (part, q)] = r(
                quantile(h, q / 100) * 1000 if h and h[-1][1] else None, 2)

    res = {
        "nodes": n,
        "rss_peak_kib": a["rss_peak_kib"],
        "rss_settled_kib": a["rss_settled_kib"],
        "rollout_cpu_s": r(a["cpu_ready"] - a["cpu_start"], 2),
        "idle_cpu_s": r(a["cpu_idle"] - a["cpu_ready"], 2),
        "idle_window_s": a["idle_s"],
        "ready_s": r(t_ready - a["t_cp"], 2),
        "ready_s_poll": r(a["t_ready_poll"] - a["t_cp"], 2),
        "transition_delay_ms_p50": r(quantile(hist, 0.5) * 1000 if hist and hist[-1][1] else None, 2),
        "transition_delay_ms_p99": r(quantile(hist, 0.99) * 1000 if hist and hist[-1][1] else None, 2),
        # The upper bound of the highest non-empty bucket; the highest finite bound (and the
        # flag) when some transitions took longer than it.
        "transition_delay_ms_max_bucket": r(min(hist_max(hist), finite) * 1000
                                            if hist and hist[-1][1] else None, 2),
        "transition_delay_ms_max_lower_bound": bool(hist and hist[-1][1] and
                                                    math.isinf(hist_max(hist))),
        "transitions": int(hist[-1][1]) if hist else 0,
        # A quantile in the +Inf bucket is only known to exceed the highest finite bound.
        "transition_delay_ms_p50_lower_bound": bool(
            hist and quantile(hist, 0.5) is not None and quantile(hist, 0.5) >= finite),
        "transition_delay_ms_p99_lower_bound": bool(
            hist and quantile(hist, 0.99) is not None and quantile(hist, 0.99) >= finite),
        "transitions_over_top_bucket": int(hist[-1][1] - hist[-2][1]) if len(hist) >= 2 else 0,
        **parts,
        "watch_updates_ignored": int(counter(m_ready, "gpu_operator_watch_updates_ignored_total")),
        "rss_settled_anon_kib": a.get("rss_settled_anon_kib"),
        "rss_settled_file_kib": a.get("rss_settled_file_kib"),
        "variant": a.get("variant", ""),
        "api_connections": a.get("api_connections"),
        "validation_failures_rollout": failed_validations(evs, a["t_cp"], a["t_ready_poll"]),
        "node_reconciles_rollout": int(counter(
            m_ready, "gpu_operator_reconcile_duration_seconds_count", 'kind="node"')),
        "node_reconcile_mean_ms": r(1000 * counter(
            m_ready, "gpu_operator_reconcile_duration_seconds_sum", 'kind="node"') / max(1, counter(
                m_ready, "gpu_operator_reconcile_duration_seconds_count", 'kind="node"')), 2),
        "idle_reconciles": idle_reconciles,
        "transition_delay_outside_ms_p50": r(pct(outside, 0.5)),
        "transition_delay_outside_ms_p99": r(pct(outside, 0.99)),
        "transition_delay_outside_ms_max": r(max(outside) if outside else None),
        "transition_delay_outside_samples": len(outside),
        "rollout_requests": sum(rollout.values()),
        "rollout_requests_per_node": r(sum(rollout.values()) / n, 2),
        # Against the operator's client-side limit (500 requests/s, burst 1,000 by default in
        # op_controller_new): a rate at the limit means the limiter paced the rollout.
        "rollout_requests_per_s": r(sum(rollout.values()) / max(0.001, t_ready - a["t_cp"]), 1),
        # Summed over requests: how long they waited for that limit (writes sent late by it count
        # in the transition delays).
        "rollout_throttled_s": r(counter(m_ready, "gpu_operator_api_throttled_seconds_total"), 2),
        "rollout_requests_by_verb": by_verb(rollout),
        "rollout_requests_detail": dict(sorted(rollout.items(), key=lambda kv: -kv[1])),
        "idle_requests": sum(idle.values()),
        "idle_requests_detail": idle,
        "idle_writes": idle_writes,
        "idle_lists": idle_lists,
        # kubesim's controllers up to ready (the whole simulated control plane, not the
        # operator): keys synced and milliseconds spent syncing, per controller.
        "kubesim_controller_syncs": json.load(open(os.path.join(d, "req-ready.json"))).get(
            "controllers", {}),
    }
    ready, seg, unfinished = node_timeline(evs, a["t_cp"], a["t_ready_poll"])
    rt = list(ready.values())
    res["node_ready_s_p50"] = r(pct(rt, 0.5), 2)
    res["node_ready_s_p99"] = r(pct(rt, 0.99), 2)
    res["node_ready_s_max"] = r(max(rt) if rt else None, 2)
    res["node_ready_timed"] = len(rt)
    res["node_ready_unfinished"] = unfinished
    if a.get("pulls"):
        # The pull model's per-node figures, from the kubelet's Pulled events listed now (after
        # the rollout and the MIG change: pods the watch first saw after the rollout are left out).
        events = api_list(d, "/api/v1/namespaces/gpu-operator/events",
                          "fieldSelector=reason%3DPulled")
        pulls = rollout_pulls(events, evs, a["t_cp"], a["t_ready_poll"])
        runs, by_api = validation_runs(evs, a["t_cp"], ready)
        res.update(slack_figures(node_slack(ready, pulls, runs), pulls, r))
        res["validation_runs_counted"] = sum(len(v) for v in runs.values())
        res["validation_runs_timed_by_api_seconds"] = by_api
        res["pulled_events_listed"] = len(events)
    res["stage_timeline_ms"] = {
        st: {k: [r(pct(v, 0.5)), r(pct(v, 0.99))] for k, v in parts.items() if v}
        for st, parts in seg.items()}
    res["rollout_requests_per_node_by_verb"] = {
        k: r(v / n, 2) for k, v in sorted(by_verb(rollout).items(), key=lambda kv: -kv[1])}
    if a.get("t_mig_label"):
        res.update(mig_timing(evs, a["mig_node"], a["t_mig_label"]))
        hops = idle_fleet_hops(evs, a["mig_node"], a["t_mig_label"])
        res["idle_fleet_transitions_ms"] = hops
        res["idle_fleet_transition_ms_max"] = max((h[1] for h in hops), default=None)
    if hist:
        res["transition_delay_buckets"] = [["+Inf" if math.isinf(le) else le, int(c)]
                                           for le, c in hist]
    print(json.dumps(res))


# ---- report ---------------------------------------------------------------------------------


def fit(xs, ys):
    """Least squares y = a + b·x."""
    n = len(xs)
    if n < 2:
        return None, None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None, None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def targets(results):
    """[(what, value, pass/miss/n-a)] of the project's targets."""
    by_n = {r["nodes"]: r for r in results}
    out = []

    def add(what, value, ok):
        out.append((what, value, "n/a" if ok is None else ("pass" if ok else "MISS")))

    # RSS with libcurl, OpenSSL and libmicrohttpd linked: 24 MiB at 1,000 nodes, 48 at 5,000.
    r = by_n.get(1000)
    r5 = by_n.get(5000)
    for x, lim in ((r, 24), (r5, 48)):
        for k, what in (("rss_peak_kib", "peak"), ("rss_settled_kib", "settled")):
            add("RSS <= %d MiB at %s nodes (%s)" % (lim, "1,000" if lim == 24 else "5,000", what),
                "%.1f MiB" % (x[k] / 1024) if x else "not run", x[k] <= lim * 1024 if x else None)
    # Time to ready and requests per GPU node with image pulls off; the event -> write delay.
    for x, n, lim_s, lim_ms in ((r, "1,000", 24, 10), (r5, "5,000", 120, 50)):
        pulls_off = x and not x.get("pull_mbps") and not x.get("pull_latency_ms")
        add("ready <= %d s at %s nodes (image pulls off)" % (lim_s, n),
            "%s s" % x["ready_s"] if pulls_off else "not run",
            x["ready_s"] <= lim_s if pulls_off else None)
        d = x.get("transition_delay_ms_p99") if x else None
        add("event -> write p99 <= %d ms at %s nodes" % (lim_ms, n),
            "%s%s ms" % (">" if x.get("transition_delay_ms_p99_lower_bound") else "", d)
            if d is not None else "not run", d <= lim_ms if d is not None else None)
    # With the pull model on: each node ready within its longest single pull, the sum of its
    # validation runs and 2 s (the rest: transitions, pod starts, waits for the node's puller).
    what = "pull model on: every node ready <= longest pull + validation runs + 2 s"
    pulled = [x for x in results if pulls_on(x)]
    for x in pulled:
        over = x.get("nodes_pull_slack_over_2s")
        add("%s at %d nodes" % (what, x["nodes"]),
            "slack p50 / p99 / max %s / %s / %s s; %d of %d nodes over 2 s" % (
                x["node_pull_slack_s_p50"], x["node_pull_slack_s_p99"],
                x["node_pull_slack_s_max"], over, x["pull_nodes"])
            if over is not None else "no pulls recorded", over == 0 if over is not None else None)
    if not pulled:
        add(what, "image pulls off", None)
    for x in results:
        # Issue 26's figure is per GPU node of a large fleet (9.4 at 1,000 nodes when it was
        # filed): below 1,000 nodes the ~90 requests every rollout makes once (its objects,
        # lists and watches) weigh in.
        if not x.get("pull_mbps") and not x.get("pull_latency_ms") and x["nodes"] >= 1000:
            add("rollout requests <= 8 per GPU node at %d nodes" % x["nodes"],
                "%s" % x["rollout_requests_per_node"], x["rollout_requests_per_node"] <= 8)
    hop = r.get("idle_fleet_transition_ms_max") if r else None
    add("(for reference) one node's transitions in an idle 1,000-node fleet <= 50 ms",
        "max %s ms (outside)" % hop if hop is not None else "not measured",
        hop <= 50 if hop is not None else None)
    for x in results:
        add("idle %d s at %d nodes: 0 writes, 0 LISTs" % (x["idle_window_s"], x["nodes"]),
            "%d writes, %d lists" % (x["idle_writes"], x["idle_lists"]),
            x["idle_writes"] == 0 and x["idle_lists"] == 0)
        per_min = x["idle_cpu_s"] * 60.0 / x["idle_window_s"]
        add("idle CPU < 0.05 s/min at %d nodes" % x["nodes"], "%.2f s/min" % per_min,
            per_min < 0.05)
    xs = [x["nodes"] for x in results]
    ys = [x["rollout_requests"] for x in results]
    a, b = fit(xs, ys)
    if b is not None:
        # Linear (not worse): the marginal requests per added node do not grow with the size.
        marg = [(ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1]) for i in range(1, len(xs))]
        ok = all(marg[i] <= marg[i - 1] * 1.10 for i in range(1, len(marg)))
        add("rollout requests linear in nodes",
            "fit %.0f + %.2f/node; marginal per node %s" %
            (a, b, " -> ".join("%.1f" % m for m in marg)), ok)
    else:
        add("rollout requests linear in nodes", "needs two sizes", None)
    return out, (a, b)


def pulls_on(r):
    return bool(r.get("pull_mbps") or r.get("pull_latency_ms"))


def pull_params(r):
    """(rate, latency, serialized, max parallel) of a result's pull model; None when off."""
    if not pulls_on(r):
        return None
    return (r.get("pull_mbps", 0), r.get("pull_latency_ms", 0), r.get("serialize_pulls", True),
            r.get("max_parallel_pulls"))


def pull_mode(ser, par):
    if ser:
        return "one pull at a time per node"
    return ("at most %d pulls at a time per node" % par if par else
            "parallel pulls per node (no limit)") + ", sharing its link"


def plot(results, outdir, name, pulls=""):
    png = os.path.join(outdir, name + ".png")
    if not shutil.which("gnuplot"):
        print("!!! gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox): "
              "NO PLOT WRITTEN !!!", file=sys.stderr)
        return None
    dat = os.path.join(outdir, name + ".dat")
    title = "gpu-operator on kubesim + nodesim (8x A100-40GB nodes)" + (
        "\\n" + pulls if pulls else "")
    with open(dat, "w") as f:
        f.write("# nodes rss_peak_mib rss_settled_mib ready_s node_ready_p50 node_ready_p99\n")
        for r in results:
            f.write("%d %.2f %.2f %.2f %s %s\n" % (
                r["nodes"], r["rss_peak_kib"] / 1024, r["rss_settled_kib"] / 1024, r["ready_s"],
                "NaN" if r.get("node_ready_s_p50") is None else r["node_ready_s_p50"],
                "NaN" if r.get("node_ready_s_p99") is None else r["node_ready_s_p99"]))
    script = """
set terminal pngcairo size 900,520 noenhanced
set output '%s'
set title "%s"
set logscale x
set xlabel 'nodes'
set ylabel 'operator RSS (MiB)'
set y2label 'ClusterPolicy created -> ready (s)'
set ytics nomirror
set y2tics
set key top left
set grid
plot '%s' using 1:2 with linespoints title 'RSS peak (MiB)', \\
     '%s' using 1:3 with linespoints title 'RSS settled (MiB)', \\
     '%s' using 1:4 axes x1y2 with linespoints title 'time to ready (s)', \\
     '%s' using 1:5 axes x1y2 with points pt 6 title 'per node to ready p50 (s)', \\
     '%s' using 1:6 axes x1y2 with points pt 8 title 'per node to ready p99 (s)'
""" % (png, title, dat, dat, dat, dat, dat)
    p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if p.returncode != 0:
        # pngcairo may be missing: the plain png terminal does the same job.
        p = subprocess.run(["gnuplot"], input=script.replace("pngcairo", "png"), text=True,
                           capture_output=True)
    os.unlink(dat)
    if p.returncode != 0:
        print("bench: gnuplot failed: %s" % p.stderr.strip(), file=sys.stderr)
        return None
    return png


def cmd_report(results_file, outdir, name="latest", opargs=""):
    results = sorted(json.load(open(results_file)), key=lambda r: r["nodes"])
    tg, (a, b) = targets(results)
    if b is not None:
        for r in results:
            r["rollout_requests_fit"] = {"intercept": round(a, 1), "per_node": round(b, 3)}
    os.makedirs(outdir, exist_ok=True)
    for r in results:
        r["operator_args"] = opargs
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(results, f, indent=2)
    pulls = sorted({pull_params(r) for r in results}, key=lambda p: (p is not None, str(p)))
    png = plot(results, outdir, name, "; ".join(
        "image pulls off" if p is None else
        "image pulls %s MB/s per node + %s ms per pull, %s" % (
            p[0], p[1], "serialized" if p[2] else
            "parallel (at most %d)" % p[3] if p[3] else "parallel") for p in pulls))
    cols = [("nodes", "nodes"), ("RSS peak MiB", lambda r: "%.1f" % (r["rss_peak_kib"] / 1024)),
            ("RSS settled MiB", lambda r: "%.1f" % (r["rss_settled_kib"] / 1024)),
            ("ready s", "ready_s"),
            ("node ready p50/p99 s", lambda r: "%s / %s" % (r.get("node_ready_s_p50"),
                                                           r.get("node_ready_s_p99"))),
            ("rollout CPU s", "rollout_cpu_s"),
            ("CPU wait s", lambda r: r.get("operator_rollout_cpu_wait_s")),
            ("delay p50 ms", lambda r: (">" if r.get("transition_delay_ms_p50_lower_bound") else "")
             + str(r.get("transition_delay_ms_p50"))),
            ("delay p99 ms", lambda r: (">" if r.get("transition_delay_ms_p99_lower_bound") else "")
             + str(r.get("transition_delay_ms_p99"))),
            ("queued p50/p99 ms", lambda r: "%s / %s" % (r.get("transition_queued_ms_p50"),
                                                         r.get("transition_queued_ms_p99"))),
            ("applied p50/p99 ms", lambda r: "%s / %s" % (r.get("transition_applied_ms_p50"),
                                                          r.get("transition_applied_ms_p99"))),
            ("outside p50/p99 ms", lambda r: "%s / %s" % (r.get("transition_delay_outside_ms_p50"),
                                                          r.get("transition_delay_outside_ms_p99"))),
            ("requests", "rollout_requests"), ("req/node", "rollout_requests_per_node"),
            ("req/node by verb", lambda r: ", ".join(
                "%s %s" % kv for kv in (r.get("rollout_requests_per_node_by_verb") or {}).items())),
            ("throttled s", "rollout_throttled_s"),
            ("idle writes", "idle_writes"), ("idle LISTs", "idle_lists"),
            ("idle CPU s", "idle_cpu_s"),
            ("one-node hop max ms", lambda r: r.get("idle_fleet_transition_ms_max")),
            ("MIG label→pods ms", lambda r: r.get("mig_label_to_validation_pods_ms")),
            ("MIG success→pods ms", lambda r: r.get("mig_success_to_validation_pods_ms"))]
    pull_text = "; ".join(
        "image pulls off (kubesim's images take no time to pull)" if p is None else
        "image pulls on: %s MB/s per node, %s ms per pull, %s, each image once per node" % (
            p[0], p[1], pull_mode(p[2], p[3])) for p in pulls)
    lines = ["# gpu-operator at scale (bench/run%s)" % (" " + opargs if opargs else ""), "",
             pull_text[0].upper() + pull_text[1:] + ".", "",
             "| " + " | ".join(c[0] for c in cols) + " |",
             "|" + "---|" * len(cols)]
    for r in results:
        lines.append("| " + " | ".join(str(c[1](r) if callable(c[1]) else r.get(c[1]))
                                       for c in cols) + " |")
    segs = [("label_to_operand_ready", "deploy label → operand Ready"),
            ("operand_ready_to_validation_pod", "operand Ready → validation pod"),
            ("validation_pod_run", "validation pod created → Succeeded"),
            ("validated_to_next_label", "validated → next stage's label")]
    lines += ["", "Per-node timeline: time to ready per GPU node, from the ClusterPolicy's "
              "creation (the fleet carries NFD's label before it) to the success of the node's "
              "last stage validation, as a watch from outside saw it; by stage, p50 / p99 in ms "
              "of each step (image pulls fall in the first and third).", "",
              "| nodes | stage | " + " | ".join(t for _, t in segs) + " |",
              "|" + "---|" * (len(segs) + 2)]
    for r in results:
        for st, parts in (r.get("stage_timeline_ms") or {}).items():
            lines.append("| %s%s | %s | %s |" % (
                r["nodes"], " (%s)" % r["variant"] if r.get("variant") else "", st,
                " | ".join("%s / %s" % tuple(parts[k]) if k in parts else "-"
                           for k, _ in segs)))
    pull_lines = []
    if any(r.get("pull_nodes") for r in results):
        pull_lines = [
            "", "Image pulls per GPU node: its longest single pull (the kubelet's Pulled event: "
            "the pull's own time, without its wait for the node's puller), the sum of its "
            "validation runs (each validation pod that succeeded by the node's ready time: "
            "container start → exit), its time to ready (as above) and the slack = ready − "
            "(longest pull + validation runs); the target allows 2 s.", "",
            "| nodes | longest pull p50 / p99 s | validation runs p50 / p99 s | "
            "node ready p50 / p99 s | slack p50 / p99 / max s | nodes with slack > 2 s | "
            "worst node: ready = longest pull + runs + slack s |", "|---|---|---|---|---|---|---|"]
        for r in results:
            if not r.get("pull_nodes"):
                continue
            w = r["node_pull_slack_worst"]
            pull_lines.append("| %s%s | %s / %s | %s / %s | %s / %s | %s / %s / %s | %d of %d | "
                              "%s: %s = %s (%s) + %s + %s |" % (
                                  r["nodes"], " (%s)" % r["variant"] if r.get("variant") else "",
                                  r["node_longest_pull_s_p50"], r["node_longest_pull_s_p99"],
                                  r["node_validation_runs_s_p50"],
                                  r["node_validation_runs_s_p99"], r.get("node_ready_s_p50"),
                                  r.get("node_ready_s_p99"), r["node_pull_slack_s_p50"],
                                  r["node_pull_slack_s_p99"], r["node_pull_slack_s_max"],
                                  r["nodes_pull_slack_over_2s"], r["pull_nodes"], w["node"],
                                  w["ready"], w["longest"], w["image"].rsplit("/", 1)[-1],
                                  w["runs"], w["slack"]))
        for r in results:
            if r.get("pull_s_by_image"):
                pull_lines += ["", "Pull time per image at %d nodes (p50 / max s): %s." % (
                    r["nodes"], ", ".join("%s %s / %s" % (im.rsplit("/", 1)[-1], v["p50"], v["max"])
                                          for im, v in r["pull_s_by_image"].items()))]
    lines += pull_lines
    lines += ["", "Transition delays, from the watch event that allowed a node's transition "
              "(as the operator received it): delay = to the operator's first resulting write "
              "request (gpu_operator_transition_delay_seconds), queued = to the start of the "
              "reconcile that made it (waiting for a free worker), applied = to the API server's "
              "answer to its last write (gpu_operator_transition_applied_seconds: adds the "
              "server's time). Quantiles interpolated linearly within buckets (bounds 0.5, 1.25, "
              "3.1, 7.8, 19.5, 48.8, 122 ms, ...); outside: the same transitions timed by a "
              "watch from outside (includes the server's time and one extra watch delivery).", "",
              "| target | measured | result |", "|---|---|---|"]
    lines += ["| %s | %s | %s |" % t for t in tg]
    if png:
        lines += ["", "![RSS and time to ready](%s.png)" % name]
    with open(os.path.join(outdir, name + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[2:6 + len(results)]))
    if pull_lines:
        print("\n".join(pull_lines))
    print()
    print("targets:")
    for what, value, ok in tg:
        print("  %-4s  %-46s %s" % (ok, what, value))
    return 0


def cmd_compare(results_path, out_path):
    """Before/after table of a --compare-build run: memory, connections, delays, ready."""
    with open(results_path) as f:
        rows = json.load(f)
    mib = lambda k: "%.1f" % (k / 1024.0) if k is not None else "-"
    lines = ["| GPU nodes | operator | RSS MiB (peak) | RssAnon MiB | RssFile MiB | API connections | "
             "delay p99 ms | applied p99 ms | ready s | requests/node |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s | %s |" % (
            r["nodes"], r.get("variant") or "-", mib(r.get("rss_settled_kib")),
            mib(r.get("rss_peak_kib")), mib(r.get("rss_settled_anon_kib")),
            mib(r.get("rss_settled_file_kib")), r.get("api_connections", "-"),
            r.get("transition_delay_ms_p99", "-"), r.get("transition_applied_ms_p99", "-"),
            r.get("ready_s", "-"), r.get("rollout_requests_per_node", "-")))
    # Private memory per GPU node: the growth of RssAnon between the two largest sizes.
    for v in ("before", "after"):
        pts = sorted((r["nodes"], r.get("rss_settled_anon_kib")) for r in rows
                     if r.get("variant") == v and r.get("rss_settled_anon_kib") is not None)
        if len(pts) >= 2 and pts[-1][0] != pts[-2][0]:
            per = (pts[-1][1] - pts[-2][1]) / float(pts[-1][0] - pts[-2][0])
            lines.append("")
            lines.append("%s: private memory per GPU node %.2f KiB (RssAnon, %d → %d nodes)" %
                         (v, per, pts[-2][0], pts[-1][0]))
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


def cmd_selftest():
    """Checks of the pull model's parsing and per-node figures on fixed inputs."""
    fails = []

    def check(what, got, want):
        ok = (abs(got - want) < 1e-9 if isinstance(want, float) and isinstance(got, float)
              else got == want)
        if not ok:
            fails.append("%s: got %r, want %r" % (what, got, want))

    for text, want in (("1.623s", 1.623), ("850ms", 0.85), ("1m2.5s", 62.5), ("0s", 0.0),
                       ("0", 0.0), ("1h2m3s", 3723.0), ("2m0s", 120.0), (".5s", 0.5),
                       ("1.5us", 1.5e-6), ("300\u00b5s", 3e-4), ("42ns", 4.2e-8),
                       ("-1.5s", -1.5), ("1m0.001s", 60.001)):
        check("go_duration_s(%r)" % text, go_duration_s(text), want)
    for text in ("", "1", "s", "1x", "1.2.3s", "ms1", "1s x", "1 s", "+", ".", ".s"):
        try:
            go_duration_s(text)
            fails.append("go_duration_s(%r): no error" % text)
        except ValueError:
            pass
    kubesim = ('Successfully pulled image "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04" in '
               '10.686s (24.2s including waiting). Image size: 1048576000 bytes.')
    check("parse_pulled(kubesim)", parse_pulled(kubesim),
          ("nvcr.io/nvidia/driver:595.91.07-ubuntu22.04", 10.686))
    check("parse_pulled(1.26)", parse_pulled('Successfully pulled image "busybox" in 1m2.5s'),
          ("busybox", 62.5))
    check("parse_pulled(850ms)", parse_pulled(
        'Successfully pulled image "a/b:c" in 850ms (850ms including waiting)'), ("a/b:c", 0.85))
    check("parse_pulled(present)", parse_pulled(
        'Container image "busybox" already present on machine'), None)
    check("rfc3339_s", rfc3339_s("1970-01-01T00:01:02Z"), 62)
    check("rfc3339_s(fraction)", rfc3339_s("1970-01-01T00:00:01.25Z"), 1.25)

    # A rollout from t=100: pods p1, p2 on n1 (p2's event without source.host), p3 on n2, p4
    # on n1 created after the window (the MIG change).
    def pod(t, name, node, typ="MODIFIED", **kw):
        return dict({"t": t, "k": "pod", "type": typ, "name": name, "node": node}, **kw)

    evs = [pod(101, "p1", "n1", "ADDED"), pod(101, "p2", "n1", "ADDED"),
           pod(101, "p3", "n2", "ADDED"), pod(200, "p4", "n1", "ADDED")]

    def pulled(podname, host, msg):
        return {"reason": "Pulled", "message": msg, "involvedObject": {"name": podname},
                "source": {"host": host} if host else {"component": "kubelet"}}

    events = [pulled("p1", "n1", 'Successfully pulled image "drv" in 10.5s (10.5s including '
                     'waiting). Image size: 1 bytes.'),
              pulled("p2", None, 'Successfully pulled image "val" in 700ms (11.2s including '
                     'waiting). Image size: 1 bytes.'),
              pulled("p2", "n1", 'Container image "drv" already present on machine'),
              pulled("p3", "n2", 'Successfully pulled image "val" in 0s (0s including waiting).'
                     ' Image size: 0 bytes.'),
              pulled("p4", "n1", 'Successfully pulled image "big" in 1m0s (1m0s including '
                     'waiting). Image size: 1 bytes.')]
    pulls = rollout_pulls(events, evs, 100, 150)
    check("rollout_pulls", pulls, {"n1": [("drv", 10.5), ("val", 0.7)], "n2": [("val", 0.0)]})
    # Validation pods: v1 on n1 timed by the watch (Running 110.0 -> Succeeded 110.4), v2 on n1
    # only seen Succeeded (the API's 1 s), v3 on n1 Succeeded after the node's ready time, v4 on
    # n2 failed (not counted).
    run = ["1970-01-01T00:01:50Z", "1970-01-01T00:01:51Z"]
    vevs = [pod(110.0, "v1", "n1", val="driver", phase="Running"),
            pod(110.4, "v1", "n1", val="driver", phase="Succeeded", run=run),
            pod(111.0, "v2", "n1", val="container-toolkit", phase="Succeeded", run=run),
            pod(140.0, "v3", "n1", val="mig-manager", phase="Succeeded", run=run),
            pod(105.0, "v4", "n2", val="driver", phase="Running"),
            pod(105.5, "v4", "n2", val="driver", phase="Failed")]
    ready = {"n1": 12.0, "n2": 9.0, "n3": 5.0}
    runs, by_api = validation_runs(vevs, 100, ready)
    check("validation_runs n1", [round(x, 6) for x in runs.get("n1", [])], [0.4, 1.0])
    check("validation_runs n2", runs.get("n2"), None)
    check("validation_runs by API", by_api, 1)
    per = node_slack(ready, pulls, runs)
    check("node_slack nodes", sorted(per), ["n1", "n2"])  # n3 pulled nothing
    check("node_slack n1 longest", per["n1"]["longest"], 10.5)
    check("node_slack n1 image", per["n1"]["image"], "drv")
    check("node_slack n1 slack", round(per["n1"]["slack"], 6), 0.1)  # 12 - (10.5 + 1.4)
    check("node_slack n2 slack", per["n2"]["slack"], 9.0)
    fig = slack_figures(per, pulls, lambda x, nd=1: None if x is None else round(x, nd))
    check("slack_figures over 2 s", fig["nodes_pull_slack_over_2s"], 1)
    check("slack_figures max", fig["node_pull_slack_s_max"], 9.0)
    check("slack_figures worst", fig["node_pull_slack_worst"]["node"], "n2")
    check("slack_figures below longest pull", fig["nodes_ready_below_longest_pull"], 0)
    check("slack_figures empty", slack_figures({}, {}, round), {})
    check("node_slack empty", node_slack(ready, {}, {}), {})

    # targets(): a pass/MISS row with the model on, n/a with it off; no pull figures, no crash.
    base = {"nodes": 10, "idle_window_s": 5, "idle_writes": 0, "idle_lists": 0,
            "idle_cpu_s": 0, "rollout_requests": 100, "ready_s": 1}
    rows = [t for t in targets([dict(base)])[0] if t[0].startswith("pull model on")]
    check("targets pulls off", rows, [("pull model on: every node ready <= longest pull + "
                                       "validation runs + 2 s", "image pulls off", "n/a")])
    on = dict(base, pull_mbps=100, pull_latency_ms=200, **fig)
    rows = [t[2] for t in targets([on])[0] if t[0].startswith("pull model on")]
    check("targets pulls on", rows, ["MISS"])
    rows = [t[2] for t in targets([dict(base, pull_mbps=100)])[0]
            if t[0].startswith("pull model on")]
    check("targets pulls on, nothing recorded", rows, ["n/a"])
    for f in fails:
        print("selftest: FAIL " + f, file=sys.stderr)
    print("selftest: %s" % ("%d failed" % len(fails) if fails else "ok"))
    return 1 if fails else 0


def main(argv):
    if len(argv) >= 4 and argv[0] == "watch":
        cmd_watch(argv[1], argv[2], argv[3], int(argv[4]) if len(argv) > 4 else None)
    elif len(argv) == 2 and argv[0] == "analyze":
        cmd_analyze(argv[1])
    elif len(argv) == 3 and argv[0] == "compare":
        return cmd_compare(argv[1], argv[2])
    elif 3 <= len(argv) <= 5 and argv[0] == "report":
        return cmd_report(*argv[1:])
    elif argv == ["selftest"]:
        return cmd_selftest()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
