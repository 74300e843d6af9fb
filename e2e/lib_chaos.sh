#!/usr/bin/env bash
# Helpers for the chaos suite (e2e/chaos, e2e/chaos.d/*.sh): a seeded random source, the fault's
# end, a checker that decides from the cluster alone whether the operator's work is complete
# (converged) and what is lost, duplicated or wrong, a fresh-operator cross-check of the
# template hashes, and the result file the runner collects. Source after e2e/lib.sh,
# e2e/lib_gpu.sh and e2e/lib_operator.sh.
#
# Result protocol: a scenario writes key=value lines to $CHAOS_RESULT (the runner sets it; default
# $E2E_DIR/chaos-result, also echoed to stdout): scenario, fault, converged (yes/no), seconds (from
# the fault's end to the first passing check), duplicated, lost, wrong (counts), result
# (PASS/FAIL). chaos_init writes a FAIL row first, so a scenario that dies early reports FAIL.

: "${CHAOS_RESULT:=$E2E_DIR/chaos-result}"
# kubesim's admin endpoints (fault injection, the checker's reads) and its pod GC are used.
[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "the chaos suite runs on kubesim only"
CHAOS_NAME=$(basename "$0" .sh)
CHAOS_FAULT=""
CHAOS_EXPECT="$E2E_DIR/chaos-expect"
CHAOS_FAULT_END=""
CHAOS_CONVERGED=no
CHAOS_SECONDS=-
CHAOS_LOST=-
CHAOS_DUP=-
CHAOS_WRONG=-
CHAOS_OPERATOR_ARGS=()
: >"$CHAOS_EXPECT"

# On exit, the scenario's operator, kubesim and nodesim logs are kept in $CHAOS_LOGDIR when set
# (the runner sets it), then lib_operator's exit handling stops everything.
chaos_on_exit() {
    local rc=$?
    set +e # errexit would end this handler at the first failing step, before the cleanup
    if [ -n "${CHAOS_LOGDIR:-}" ]; then
        mkdir -p "$CHAOS_LOGDIR"
        cp "$E2E_DIR"/operator.log "$E2E_DIR"/kubesim.log "$E2E_DIR"/nodesim.log \
            "$E2E_DIR"/chaos-findings "$CHAOS_LOGDIR"/ 2>/dev/null || true
    fi
    (exit $rc)
    operator_on_exit
}
trap chaos_on_exit EXIT

now_s() { date +%s.%N; }
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"; }

# chaos_result_write: the row as it stands.
chaos_result_write() {
    local result=$1
    cat >"$CHAOS_RESULT" <<EOF
scenario=$CHAOS_NAME
fault=$CHAOS_FAULT
converged=$CHAOS_CONVERGED
seconds=$CHAOS_SECONDS
duplicated=$CHAOS_DUP
lost=$CHAOS_LOST
wrong=$CHAOS_WRONG
result=$result
EOF
}

# chaos_init FAULT: names the fault for the report (a FAIL row until chaos_finish).
chaos_init() {
    CHAOS_FAULT=$1
    chaos_result_write FAIL
}

# chaos_fault_describe FAULT: replaces the fault's description (e.g. once counters are known).
chaos_fault_describe() {
    CHAOS_FAULT=$1
    chaos_result_write FAIL
}

# chaos_seed: seeds $RANDOM from $CHAOS_SEED (printed; a new one when unset) for replays.
chaos_seed() {
    : "${CHAOS_SEED:=$(($(date +%s%N) % 1000000))}"
    RANDOM=$CHAOS_SEED
    echo "--- seed $CHAOS_SEED (replay: CHAOS_SEED=$CHAOS_SEED e2e/chaos $CHAOS_NAME)"
}
# chaos_rand MAX: sets CHAOS_RAND to a seeded random integer in [0, MAX] (not in a subshell: bash
# reseeds $RANDOM there, and the sequence would not replay).
chaos_rand() { CHAOS_RAND=$(((RANDOM * 32768 + RANDOM) % ($1 + 1))); }

# chaos_cluster FLEET [cluster_up args...]: kubesim + nodesim on FLEET, the CRD, the namespace.
chaos_cluster() {
    local fleet=$1
    shift
    cluster_up --fleet "$E2E_ROOT/testdata/$fleet" "$@"
    install_crd
    k create namespace "$OPERATOR_NS" >/dev/null
}

# chaos_operator [args...]: starts the operator (the arguments are kept for restarts).
chaos_operator() {
    CHAOS_OPERATOR_ARGS=("$@")
    operator_start "$@"
}
# chaos_kill9: kill -9 of the running operator (no cleanup, no Lease release).
chaos_kill9() {
    kill -9 "$OPERATOR_PID" 2>/dev/null || true
    wait "$OPERATOR_PID" 2>/dev/null || true
    rm -f "$E2E_DIR/operator.pid"
}
chaos_restart() { operator_start "${CHAOS_OPERATOR_ARGS[@]+"${CHAOS_OPERATOR_ARGS[@]}"}"; }

# Expectations beyond what the checker derives from the ClusterPolicy and the nodes:
#   chaos_expect_res NODE "nvidia.com/gpu=8 ..."   exact nvidia.com/ capacity and allocatable
#   chaos_expect_label NODE KEY VALUE              (VALUE - : the label must be absent)
#   chaos_expect_image DAEMONSET IMAGE             an image of its pod template, and its pods'
#   chaos_expect_validation NODE STAGE RESOURCE    a Succeeded validation pod for that resource
#   chaos_expect_gone NODE                         the node is gone and nothing is bound to it
#   chaos_expect_cmdata NAME                       ConfigMap NAME keeps its data as it is now
chaos_expect_res() { echo "res $1 $2" >>"$CHAOS_EXPECT"; }
chaos_expect_label() { echo "label $1 $2 $3" >>"$CHAOS_EXPECT"; }
chaos_expect_image() { echo "image $1 $2" >>"$CHAOS_EXPECT"; }
chaos_expect_validation() { echo "validation $1 $2 $3" >>"$CHAOS_EXPECT"; }
chaos_expect_gone() { echo "gone $1" >>"$CHAOS_EXPECT"; }
chaos_expect_cmdata() {
    local sum
    sum=$(k get configmap -n "$OPERATOR_NS" "$1" -o json | python3 -c '
import hashlib, json, sys
print(hashlib.sha256(json.dumps(json.load(sys.stdin).get("data", {}), sort_keys=True).encode()).hexdigest())')
    echo "cmdata $1 $sum" >>"$CHAOS_EXPECT"
}

# sleep_until EPOCH_S: sleeps until that time (at once when it is past).
sleep_until() {
    local d
    d=$(awk -v e="$1" -v n="$(now_s)" 'BEGIN { d = e - n; printf "%.3f", (d > 0 ? d : 0) }')
    sleep "$d"
}
# s_after EPOCH_S SECONDS: EPOCH_S + SECONDS.
s_after() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a + b }'; }

# chaos_need_faults: sources e2e/lib_faults.sh and fails when this kubesim has no fault injection.
chaos_need_faults() {
    source "$E2E_ROOT/lib_faults.sh"
    k get --raw /kubesim/v1/faults >/dev/null 2>&1 ||
        fail "this kubesim serves no /kubesim/v1/faults (fault injection): rebuild $KUBESIM_BIN"
}
# chaos_fault_counts: "name=injected, ..." of the installed rules (from kubesim's counters).
chaos_fault_counts() { api_fault_counts | awk '{ printf "%s%s=%s", (NR > 1 ? ", " : ""), $1, $2 }'; }

# chaos_fault_end [EPOCH_S]: the fault is over (now, or at the given time); converge time counts
# from here.
chaos_fault_end() { CHAOS_FAULT_END=${1:-$(now_s)}; }

# api_get PATH: GET from kubesim as the admin, with curl (cheaper than kubectl for polling).
api_get() {
    local url
    url=$(sed -n 's/^ *server: *//p' "$KUBECONFIG_E2E" | head -n 1 | tr -d '"')
    curl -sf --max-time 10 --cacert "$E2E_DIR/ca.crt" \
        -H "Authorization: Bearer $(cat "$E2E_DIR/admin.token")" "$url$1"
}

# chaos_dump FILE: what the checker reads (ClusterPolicies, nodes, DaemonSets, pods, ConfigMaps)
# as one list.
chaos_dump() {
    local p
    for p in /apis/nvidia.com/v1/clusterpolicies /api/v1/nodes /apis/apps/v1/daemonsets /api/v1/pods \
        /api/v1/configmaps; do
        api_get "$p" >"$1.$(basename "$p")" || return 1
    done
    python3 - "$1" <<'PY' || return 1
import json, sys
items = []
for k, kind in (("clusterpolicies", "ClusterPolicy"), ("nodes", "Node"), ("daemonsets", "DaemonSet"),
                ("pods", "Pod"), ("configmaps", "ConfigMap")):
    for o in json.load(open(sys.argv[1] + "." + k))["items"]:
        o["kind"] = kind
        items.append(o)
json.dump({"items": items}, open(sys.argv[1], "w"))
PY
}

# chaos_check: one look at the cluster. Sets CHAOS_LOST, CHAOS_DUP, CHAOS_WRONG; the findings are
# in $E2E_DIR/chaos-findings. True when nothing is lost, duplicated or wrong.
chaos_check() {
    local dump="$E2E_DIR/chaos-dump.json" counts
    if ! chaos_dump "$dump" 2>"$E2E_DIR/chaos-findings"; then
        CHAOS_LOST=-; CHAOS_DUP=-; CHAOS_WRONG=-
        return 1
    fi
    python3 - "$dump" "$CHAOS_EXPECT" "$OPERATOR_NS" >"$E2E_DIR/chaos-findings" <<'PY'
import collections, hashlib, json, sys

dump, expect_file, ns = sys.argv[1], sys.argv[2], sys.argv[3]
items = json.load(open(dump))["items"]
kinds = collections.defaultdict(list)
for o in items:
    kinds[o["kind"]].append(o)
lost, dup, wrong = [], [], []


def meta(o):
    return o.get("metadata", {})


def labels(o):
    return meta(o).get("labels") or {}


def live(o):
    return not meta(o).get("deletionTimestamp")


exp = collections.defaultdict(list)
for line in open(expect_file).read().splitlines():
    parts = line.split(" ", 1)
    if len(parts) == 2:
        exp[parts[0]].append(parts[1])

nodes = {meta(n)["name"]: n for n in kinds["Node"]}
gone = {g.strip() for g in exp["gone"]}
for g in gone:
    if g in nodes:
        wrong.append("node %s: still registered (it was deleted)" % g)

# The ClusterPolicy: ready, for its current generation.
cps = [c for c in kinds["ClusterPolicy"] if meta(c).get("name") == "cluster-policy"]
if not cps:
    lost.append("ClusterPolicy cluster-policy")
    cp, spec, status = {}, {}, {}
else:
    cp = cps[0]
    spec, status = cp.get("spec") or {}, cp.get("status") or {}
    if status.get("state") != "ready":
        wrong.append("ClusterPolicy: state %r, want ready" % status.get("state"))
    if status.get("observedGeneration") != meta(cp).get("generation"):
        wrong.append("ClusterPolicy: observedGeneration %s of generation %s"
                     % (status.get("observedGeneration"), meta(cp).get("generation")))
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if not ready or ready[0].get("status") != "True":
        wrong.append("ClusterPolicy: Ready condition not True")
cp_uid = meta(cp).get("uid")


def enabled(section, default):
    v = (spec.get(section) or {}).get("enabled")
    return default if v is None else bool(v)


# state label -> (DaemonSet, deploy label component or None, enabled)
STATES = [
    ("state-driver", "nvidia-driver-daemonset", "driver", enabled("driver", True)),
    ("state-container-toolkit", "nvidia-container-toolkit-daemonset", "container-toolkit",
     enabled("toolkit", True)),
    ("state-operator-validation", "nvidia-operator-validator", "operator-validator", True),
    ("state-device-plugin", "nvidia-device-plugin-daemonset", "device-plugin",
     enabled("devicePlugin", True)),
    ("state-mps-control-daemon", "nvidia-device-plugin-mps-control-daemon", None,
     enabled("devicePlugin", True)),
    ("state-dcgm", "nvidia-dcgm", "dcgm", enabled("dcgm", False)),
    ("state-dcgm-exporter", "nvidia-dcgm-exporter", "dcgm-exporter", enabled("dcgmExporter", True)),
    ("gpu-feature-discovery", "gpu-feature-discovery", "gpu-feature-discovery",
     enabled("gfd", True)),
    ("state-mig-manager", "nvidia-mig-manager", "mig-manager", enabled("migManager", True)),
    ("state-node-status-exporter", "nvidia-node-status-exporter", "node-status-exporter",
     enabled("nodeStatusExporter", False)),
    # The operator's image pre-pull (on unless --image-prepull=false): its label comes and goes
    # with each node's rollout, checked below.
    ("state-image-prepull", "nvidia-image-prepull", None, True),
]
want_states = {s: d for s, d, _, on in STATES if on}

gpu_nodes = sorted(n for n, o in nodes.items()
                   if labels(o).get("feature.node.kubernetes.io/pci-10de.present") == "true")
cpu_nodes = sorted(n for n in nodes if n not in gpu_nodes)

# DaemonSets: exactly one per enabled state, ours, rolled out, one pod per eligible node.
ds_all = [d for d in kinds["DaemonSet"] if meta(d).get("namespace") == ns]
ds_uids = {meta(d)["uid"] for d in ds_all}
by_state = collections.defaultdict(list)
for d in ds_all:
    if labels(d).get("app.kubernetes.io/managed-by") == "gpu-operator" and live(d):
        by_state[labels(d).get("nvidia.com/gpu-operator.state", "?")].append(d)
for st in sorted(set(by_state) - set(want_states)):
    for d in by_state[st]:
        wrong.append("DaemonSet %s: state %s is not enabled, yet it is there" % (meta(d)["name"], st))
pods = kinds["Pod"]
images_want = collections.defaultdict(list)
for e in exp["image"]:
    d, img = e.split(" ", 1)
    images_want[d].append(img)
for st, name in sorted(want_states.items()):
    got = by_state.get(st, [])
    if not got:
        lost.append("DaemonSet %s (%s)" % (name, st))
        continue
    if len(got) > 1:
        dup.append("DaemonSet for %s: %d of them (%s)" % (st, len(got),
                                                        ", ".join(meta(d)["name"] for d in got)))
    d = got[0]
    dn = meta(d)["name"]
    if dn != name:
        wrong.append("DaemonSet for %s is named %s, want %s" % (st, dn, name))
    if not (meta(d).get("annotations") or {}).get("nvidia.com/last-applied-hash"):
        wrong.append("DaemonSet %s: no nvidia.com/last-applied-hash" % dn)
    owners = [r for r in meta(d).get("ownerReferences") or [] if r.get("controller")]
    if not owners or owners[0].get("uid") != cp_uid:
        wrong.append("DaemonSet %s: not owned by the ClusterPolicy" % dn)
    tpl = d["spec"]["template"]
    tpl_images = [c.get("image") for c in tpl["spec"].get("containers", [])]
    for img in images_want.get(dn, []):
        if img not in tpl_images:
            wrong.append("DaemonSet %s: images %s, want %s" % (dn, tpl_images, img))
    dst = d.get("status") or {}
    desired = dst.get("desiredNumberScheduled", 0)
    if (dst.get("observedGeneration", 0) < meta(d).get("generation", 0)
            or dst.get("updatedNumberScheduled", 0) != desired
            or dst.get("numberReady", 0) != desired or dst.get("numberAvailable", 0) != desired):
        wrong.append("DaemonSet %s: not rolled out (%s)" % (dn, json.dumps(dst, sort_keys=True)))
    sel = tpl["spec"].get("nodeSelector") or {}
    eligible = {n for n, o in nodes.items()
                if all(labels(o).get(k) == v for k, v in sel.items())}
    mine = [p for p in pods if live(p) and any(r.get("uid") == meta(d)["uid"]
                                               for r in meta(p).get("ownerReferences") or [])]
    per_node = collections.Counter(p["spec"].get("nodeName") for p in mine)
    for n in sorted(eligible):
        if per_node[n] == 0:
            lost.append("pod of %s on %s" % (dn, n))
        elif per_node[n] > 1:
            dup.append("pods of %s on %s: %d" % (dn, n, per_node[n]))
    for n, c in sorted(per_node.items(), key=lambda x: str(x[0])):
        if n not in eligible:
            wrong.append("pod of %s on %s, which should have none" % (dn, n))
    for p in mine:
        pimgs = [c.get("image") for c in p["spec"].get("containers", [])]
        if pimgs != tpl_images:
            wrong.append("pod %s: images %s, template has %s" % (meta(p)["name"], pimgs, tpl_images))
        elif p.get("status", {}).get("phase") != "Running":
            wrong.append("pod %s: %s" % (meta(p)["name"], p.get("status", {}).get("phase")))

# Pods: none bound to a node that is not there, none left by a DaemonSet that is gone, none of
# ours on a CPU node.
for p in pods:
    n = p["spec"].get("nodeName")
    if n and n not in nodes:
        wrong.append("pod %s/%s bound to missing node %s" % (meta(p)["namespace"], meta(p)["name"], n))
    if meta(p).get("namespace") != ns or not live(p):
        continue
    for r in meta(p).get("ownerReferences") or []:
        if r.get("kind") == "DaemonSet" and r.get("uid") not in ds_uids:
            wrong.append("pod %s: its DaemonSet %s is gone" % (meta(p)["name"], r.get("name")))
    if n in cpu_nodes:
        wrong.append("pod %s on CPU node %s" % (meta(p)["name"], n))

# Validation pods: one live pod per node, stage and resource; every GPU node passed each stage.
vkey = lambda p: (labels(p).get("nvidia.com/gpu-operator.node"),
                  labels(p).get("nvidia.com/gpu-operator.validation"),
                  (meta(p).get("annotations") or {}).get("nvidia.com/gpu-operator.resource", ""))
vpods = [p for p in pods if meta(p).get("namespace") == ns and live(p)
         and "nvidia.com/gpu-operator.validation" in labels(p)]
for key, c in sorted(collections.Counter(vkey(p) for p in vpods).items()):
    if c > 1:
        dup.append("validation pods for node %s stage %s%s: %d"
                   % (key[0], key[1], " resource " + key[2] if key[2] else "", c))
stages = [s for s, on in (("driver", enabled("driver", True)),
                          ("container-toolkit", enabled("toolkit", True)),
                          ("device-plugin", enabled("devicePlugin", True))) if on]
want_v = [(n, s, None) for n in gpu_nodes for s in stages]
for e in exp["validation"]:
    n, s, r = e.split(" ")
    want_v.append((n, s, r))
for n, s, r in want_v:
    got = [p for p in vpods if vkey(p)[0] == n and vkey(p)[1] == s and (r is None or vkey(p)[2] == r)]
    what = "validation of %s on %s%s" % (s, n, " for " + r if r else "")
    if not got:
        lost.append(what)
    elif not any(p.get("status", {}).get("phase") == "Succeeded" for p in got):
        wrong.append("%s: %s" % (what, ",".join(p.get("status", {}).get("phase", "?") for p in got)))
    else:
        # The validator's output (its termination message, which is its log) ends with the
        # sample's verdict.
        for p in got:
            if p.get("status", {}).get("phase") != "Succeeded":
                continue
            msgs = [((c.get("state") or {}).get("terminated") or {}).get("message") or ""
                    for c in p.get("status", {}).get("containerStatuses") or []]
            if not any("Test PASSED" in m for m in msgs):
                wrong.append("%s: pod %s Succeeded without Test PASSED in its output"
                             % (what, meta(p)["name"]))

# Nodes: the labels and capacity the operator and the node components give a GPU node, nothing on
# a CPU node.
comps = {c: on for _, _, c, on in STATES if c}
for n in gpu_nodes:
    lb = labels(nodes[n])
    if lb.get("nvidia.com/gpu.present") != "true":
        (wrong if "nvidia.com/gpu.present" in lb else lost).append(
            "node %s: label nvidia.com/gpu.present=%s" % (n, lb.get("nvidia.com/gpu.present")))
    for c, on in sorted(comps.items()):
        if not on or (c == "mig-manager" and lb.get("nvidia.com/mig.capable") != "true"):
            continue
        key = "nvidia.com/gpu.deploy." + c
        if lb.get(key) != "true":
            (wrong if key in lb else lost).append("node %s: label %s=%s" % (n, key, lb.get(key)))
    if lb.get("nvidia.com/gpu.deploy.image-prepull") == "true":
        wrong.append("node %s: the image pre-pull still runs on it "
                     "(nvidia.com/gpu.deploy.image-prepull=true)" % n)
    want_count = (meta(nodes[n]).get("annotations") or {}).get("nodesim.io/gpus")
    if want_count and lb.get("nvidia.com/gpu.count") != want_count:
        (wrong if "nvidia.com/gpu.count" in lb else lost).append(
            "node %s: label nvidia.com/gpu.count=%s, want %s" % (n, lb.get("nvidia.com/gpu.count"), want_count))
    if not lb.get("nvidia.com/gpu.product"):
        lost.append("node %s: label nvidia.com/gpu.product" % n)
    if comps.get("mig-manager") and lb.get("nvidia.com/mig.capable") == "true":
        if "nvidia.com/mig.config" not in lb:
            lost.append("node %s: label nvidia.com/mig.config" % n)
        elif lb.get("nvidia.com/mig.config.state") != "success":
            wrong.append("node %s: nvidia.com/mig.config.state=%s" % (n, lb.get("nvidia.com/mig.config.state")))
    st = nodes[n].get("status") or {}
    cap = {k: v for k, v in (st.get("capacity") or {}).items() if k.startswith("nvidia.com/")}
    alloc = {k: v for k, v in (st.get("allocatable") or {}).items() if k.startswith("nvidia.com/")}
    if not any(v not in ("0", 0) for v in alloc.values()):
        lost.append("node %s: no nvidia.com/ resource allocatable" % n)
    if cap != alloc:
        wrong.append("node %s: capacity %s, allocatable %s" % (n, cap, alloc))
for n in cpu_nodes:
    lb = labels(nodes[n])
    extra = sorted(k for k in lb if k.startswith("nvidia.com/"))
    if extra:
        wrong.append("CPU node %s: labels %s" % (n, extra))
    cap = sorted(k for k in (nodes[n].get("status") or {}).get("capacity", {}) if k.startswith("nvidia.com/"))
    if cap:
        wrong.append("CPU node %s: capacity %s" % (n, cap))
for e in exp["res"]:
    n, want = e.split(" ", 1)
    if n not in nodes:
        lost.append("node %s" % n)
        continue
    st = nodes[n].get("status") or {}
    for field in ("capacity", "allocatable"):
        c = st.get(field) or {}
        got = " ".join("%s=%s" % (k, c[k]) for k in sorted(c) if k.startswith("nvidia.com/"))
        if got != want.strip():
            wrong.append("node %s: %s [%s], want [%s]" % (n, field, got, want.strip()))
for e in exp["label"]:
    n, key, want = e.split(" ", 2)
    if n not in nodes:
        lost.append("node %s" % n)
        continue
    got = labels(nodes[n]).get(key)
    if want == "-":
        if got is not None:
            wrong.append("node %s: label %s=%s, want none" % (n, key, got))
    elif got is None:
        lost.append("node %s: label %s" % (n, key))
    elif got != want:
        wrong.append("node %s: label %s=%s, want %s" % (n, key, got, want))

# The operator's ConfigMaps (the MIG manager's defaults) and ConfigMaps whose data must be kept.
cms = {meta(c)["name"]: c for c in kinds["ConfigMap"] if meta(c).get("namespace") == ns and live(c)}
mm = spec.get("migManager") or {}
if enabled("migManager", True):
    if ((mm.get("config") or {}).get("name") or "default-mig-parted-config") == "default-mig-parted-config":
        if "default-mig-parted-config" not in cms:
            lost.append("ConfigMap default-mig-parted-config")
    if ((mm.get("gpuClientsConfig") or {}).get("name") or "default-gpu-clients") == "default-gpu-clients":
        if "default-gpu-clients" not in cms:
            lost.append("ConfigMap default-gpu-clients")
for e in exp["cmdata"]:
    name, want = e.split(" ")
    if name not in cms:
        lost.append("ConfigMap %s" % name)
        continue
    got = hashlib.sha256(json.dumps(cms[name].get("data", {}), sort_keys=True).encode()).hexdigest()
    if got != want:
        wrong.append("ConfigMap %s: data differs from before the fault" % name)

# status.nodes counts the nodes as they are.
sn = status.get("nodes") or {}
for key, want in (("gpu", len(gpu_nodes)), ("ready", len(gpu_nodes)), ("failed", 0),
                  ("inProgress", 0), ("reconfiguring", 0)):
    if cp and sn.get(key) != want:
        wrong.append("ClusterPolicy status.nodes.%s=%s, want %s" % (key, sn.get(key), want))

for what, lst in (("lost", lost), ("duplicated", dup), ("wrong", wrong)):
    for x in lst:
        print("%s: %s" % (what, x))
print("counts %d %d %d" % (len(lost), len(dup), len(wrong)))
PY
    counts=$(tail -n 1 "$E2E_DIR/chaos-findings")
    read -r _ CHAOS_LOST CHAOS_DUP CHAOS_WRONG <<<"$counts"
    [ "$CHAOS_LOST" = 0 ] && [ "$CHAOS_DUP" = 0 ] && [ "$CHAOS_WRONG" = 0 ]
}

# chaos_converge TIMEOUT_S: checks until the cluster passes, for up to TIMEOUT_S after the fault's
# end. Sets CHAOS_CONVERGED and CHAOS_SECONDS; prints the last findings when it does not pass.
chaos_converge() {
    local t=$1 end
    [ -n "$CHAOS_FAULT_END" ] || chaos_fault_end
    end=$(awk -v a="$CHAOS_FAULT_END" -v t="$t" 'BEGIN { printf "%.3f", a + t }')
    while :; do
        if chaos_check; then
            CHAOS_CONVERGED=yes
            CHAOS_SECONDS=$(awk -v a="$CHAOS_FAULT_END" -v b="$(now_s)" \
                'BEGIN { d = b - a; if (d < 0) d = 0; printf "%.1f", d }')
            echo "--- converged ${CHAOS_SECONDS}s after the fault's end"
            return 0
        fi
        if awk -v n="$(now_s)" -v e="$end" 'BEGIN { exit !(n > e) }'; then
            CHAOS_CONVERGED=no
            echo "--- not converged ${t}s after the fault's end; the checker found:" >&2
            head -n 40 "$E2E_DIR/chaos-findings" >&2
            return 1
        fi
        sleep 0.5
    done
}

# chaos_objects FILE: every object the operator owns (kind/name hash uid), sorted.
chaos_objects() {
    k get daemonsets,configmaps,services,serviceaccounts,roles,rolebindings -n "$OPERATOR_NS" \
        -l app.kubernetes.io/managed-by=gpu-operator -o json >"$1.ns.json" &&
        k get clusterroles,clusterrolebindings,runtimeclasses \
            -l app.kubernetes.io/managed-by=gpu-operator -o json >"$1.cl.json" &&
        python3 - "$1.ns.json" "$1.cl.json" >"$1" <<'PY'
import json, sys
for f in sys.argv[1:]:
    for o in json.load(open(f))["items"]:
        m = o["metadata"]
        if m.get("deletionTimestamp"):
            continue
        print("%s/%s %s %s" % (o["kind"], m["name"],
                               (m.get("annotations") or {}).get("nvidia.com/last-applied-hash", "-"), m["uid"]))
PY
}

# policy_reconciles: completed policy reconciles of the running operator (from its metrics).
policy_reconciles() {
    curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" 2>/dev/null |
        awk '/^gpu_operator_reconcile_duration_seconds_count\{kind="policy"\}/ { print $2 }'
}
policy_reconciled() {
    local n
    n=$(policy_reconciles)
    [ "${n:-0}" -ge 1 ] && echo yes
}

# chaos_verify_fresh: the expected template hashes are what a fresh operator renders for this
# cluster. Stops the operator, starts a new one, waits for its first full policy reconcile and
# compares the objects it owns: one it had to create was lost, one it deleted was a stray
# (wrong), one whose hash it changed was wrong (the findings are in $E2E_DIR/chaos-fresh). Then
# the cluster must still pass the checker.
chaos_verify_fresh() {
    local before="$E2E_DIR/chaos-objects-before" after="$E2E_DIR/chaos-objects-after" n
    chaos_objects "$before" || fail "cannot list the operator's objects"
    operator_stop
    chaos_restart
    until_eq "a fresh operator reconciled the policy" yes 60 policy_reconciled
    sleep 1
    chaos_objects "$after" || fail "cannot list the operator's objects"
    local diff
    diff=$(python3 - "$before" "$after" <<'PY'
import sys
def load(f):
    d = {}
    for line in open(f).read().splitlines():
        key, h, uid = line.split(" ")
        d[key] = (h, uid)
    return d
b, a = load(sys.argv[1]), load(sys.argv[2])
lost = [k for k in a if k not in b]
stray = [k for k in b if k not in a]
wrong = [k for k in a if k in b and a[k] != b[k]]
for k in lost:
    print("lost: %s (a fresh operator had to create it)" % k)
for k in stray:
    print("wrong: %s (a fresh operator deleted it)" % k)
for k in wrong:
    print("wrong: %s hash %s, a fresh operator renders %s" % (k, b[k][0], a[k][0]))
print("counts %d 0 %d" % (len(lost), len(stray) + len(wrong)))
PY
)
    echo "$diff" >"$E2E_DIR/chaos-fresh"
    echo "$diff" | sed '$d' | sed 's/^/    fresh operator: /'
    local fl fw
    read -r _ fl _ fw <<<"$(tail -n 1 <<<"$diff")"
    if ! chaos_check; then
        echo "--- after a fresh operator reconciled, the checker found:" >&2
        head -n 40 "$E2E_DIR/chaos-findings" >&2
    fi
    CHAOS_LOST=$((CHAOS_LOST + fl))
    CHAOS_WRONG=$((CHAOS_WRONG + fw))
    n=$(wc -l <"$after")
    echo "--- fresh operator: $n objects, $fl lost, $fw wrong"
}

# chaos_finish: writes the row (PASS when converged with nothing lost, duplicated or wrong),
# prints it, and fails the scenario otherwise.
chaos_finish() {
    local result=FAIL
    if [ "$CHAOS_CONVERGED" = yes ] && [ "$CHAOS_LOST" = 0 ] && [ "$CHAOS_DUP" = 0 ] &&
        [ "$CHAOS_WRONG" = 0 ]; then
        result=PASS
    fi
    chaos_result_write "$result"
    local secs="${CHAOS_SECONDS}s"
    [ "$CHAOS_SECONDS" != - ] || secs=-
    echo "chaos: $CHAOS_NAME | $CHAOS_FAULT | converged $CHAOS_CONVERGED | $secs |" \
        "duplicated $CHAOS_DUP | lost $CHAOS_LOST | wrong $CHAOS_WRONG | $result"
    [ "$result" = PASS ] || fail "$CHAOS_NAME: the cluster did not converge to the expected state"
    echo "PASS $CHAOS_NAME"
}

# chaos_state: one line on where the rollout is (for the log of each fault).
chaos_state() {
    api_get /apis/nvidia.com/v1/clusterpolicies/cluster-policy 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin).get("status") or {}
n = s.get("nodes") or {}
print("state=%s ready=%s/%s inProgress=%s reconfiguring=%s failed=%s" % (s.get("state"), n.get("ready"),
      n.get("gpu"), n.get("inProgress"), n.get("reconfiguring"), n.get("failed")))' 2>/dev/null || echo "state=?"
}
# chaos_mig_state NODE: its nvidia.com/mig.config.state ("" when absent, ? when unreadable).
chaos_mig_state() {
    api_get "/api/v1/nodes/$1" 2>/dev/null | python3 -c '
import json, sys
print(json.load(sys.stdin)["metadata"].get("labels", {}).get("nvidia.com/mig.config.state", ""))' 2>/dev/null ||
        echo "?"
}
