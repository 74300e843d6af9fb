#!/usr/bin/env bash
# states/: every manifest is YAML that kubectl accepts, the states apply in the operator's order to
# a live API server and delete again, NVIDIA's object names, pod labels, deploy-label node
# selectors, tolerations, ready-file waits and env contracts hold, and the default mig-parted
# config is byte-identical to what nodesim serves.
source "$(dirname "$0")/../lib.sh"

STATES="${STATES_DIR:-$REPO_ROOT/states}"  # STATES_DIR: check another copy
NS=gpu-operator
NODESIM="${NODESIM_BIN:-$BUILD_DIR/nodesim}"
[ -x "$NODESIM" ] || fail "nodesim not built at $NODESIM (run: ninja -C $BUILD_DIR nodesim)"

# The order the operator walks the states (states/README.md).
ORDER=(pre-requisites state-operator-metrics state-driver state-container-toolkit
    state-operator-validation state-device-plugin state-mps-control-daemon state-dcgm
    state-dcgm-exporter gpu-feature-discovery state-mig-manager state-node-status-exporter
    state-image-prepull)

# Each DaemonSet and the node selector it must carry (keys sorted, as go-template prints maps).
declare -A SELECTOR=(
    [nvidia-driver-daemonset]="nvidia.com/gpu.deploy.driver=true"
    [nvidia-container-toolkit-daemonset]="nvidia.com/gpu.deploy.container-toolkit=true"
    [nvidia-operator-validator]="nvidia.com/gpu.deploy.operator-validator=true"
    [nvidia-device-plugin-daemonset]="nvidia.com/gpu.deploy.device-plugin=true"
    [nvidia-device-plugin-mps-control-daemon]="nvidia.com/gpu.deploy.device-plugin=true nvidia.com/mps.capable=true"
    [nvidia-dcgm]="nvidia.com/gpu.deploy.dcgm=true"
    [nvidia-dcgm-exporter]="nvidia.com/gpu.deploy.dcgm-exporter=true"
    [gpu-feature-discovery]="nvidia.com/gpu.deploy.gpu-feature-discovery=true"
    [nvidia-mig-manager]="nvidia.com/gpu.deploy.mig-manager=true"
    [nvidia-node-status-exporter]="nvidia.com/gpu.deploy.node-status-exporter=true"
    [nvidia-image-prepull]="nvidia.com/gpu.deploy.image-prepull=true"
)
VALIDATOR_IMAGE=ghcr.io/gpu-operator/gpu-operator-validator

# Every manifest file, states in ORDER, files in name order.
files=()
for s in "${ORDER[@]}"; do
    for f in "$STATES/$s"/*; do files+=("$f"); done
done

step "layout: the folders are exactly the ordered states, each named in the README"
assert_eq "state folders" "$(printf '%s\n' "${ORDER[@]}" | sort)" \
    "$(find "$STATES" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)"
for s in "${ORDER[@]}"; do
    grep -q "\`$s\`" "$STATES/README.md" || fail "states/README.md does not name $s"
done
for f in "${files[@]}"; do
    case "$f" in *.yaml) ;; *) fail "not a .yaml manifest: $f" ;; esac
    ! grep -q $'\t' "$f" || fail "tab in $f"
done
echo "${#files[@]} manifest files"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-small.yaml" --plain-nodes

step "ServiceMonitor CRD and namespace"
k apply -f "$E2E_ROOT/testdata/servicemonitor-crd.yaml" >/dev/null
crd_established servicemonitors.monitoring.coreos.com
k create namespace "$NS" >/dev/null

step "every file is one or more YAML documents kubectl accepts (client dry run)"
total=0
for f in "${files[@]}"; do
    out=$(k apply --dry-run=client -f "$f" -o name 2>&1) || fail "kubectl refuses $f: $out"
    docs=$(grep -c '^kind:' "$f")
    assert_eq "objects in $f" "$docs" "$(grep -c . <<<"$out")"
    total=$((total + docs))
done

step "apply in order: every object created, where it belongs"
for f in "${files[@]}"; do
    out=$(k apply -f "$f" 2>&1) || fail "apply $f: $out"
    assert_eq "created from $f" "$(grep -c '^kind:' "$f")" "$(grep -c ' created$' <<<"$out")"
    while read -r kind ns name; do
        case "$kind" in
        ClusterRole | ClusterRoleBinding | RuntimeClass) want="<none>" ;;
        *) want=$NS ;;
        esac
        assert_eq "namespace of $kind/$name ($f)" "$want" "$ns"
    done < <(k get -f "$f" -o custom-columns=K:.kind,NS:.metadata.namespace,N:.metadata.name --no-headers)
done
echo "$total objects"

step "applying again changes nothing"
for f in "${files[@]}"; do
    out=$(k apply -f "$f")
    assert_eq "unchanged on re-apply of $f" "" "$(grep -v ' unchanged$' <<<"$out" || true)"
done

step "DaemonSets: names, pod labels, selectors, node selectors, tolerations, priority, accounts"
tmpl='{{range .items}}{{.metadata.name}}|{{.spec.selector.matchLabels.app}}|{{.spec.template.metadata.labels.app}}|{{range $k, $v := .spec.template.spec.nodeSelector}}{{$k}}={{$v}} {{end}}|{{range .spec.template.spec.tolerations}}{{.key}}:{{.operator}}:{{.effect}} {{end}}|{{.spec.template.spec.priorityClassName}}|{{.spec.template.spec.serviceAccountName}}|{{.spec.updateStrategy.type}}{{"\n"}}{{end}}'
rows=$(k get ds -n "$NS" -o go-template="$tmpl")
assert_eq "DaemonSets" "$(printf '%s\n' "${!SELECTOR[@]}" | sort)" "$(cut -d'|' -f1 <<<"$rows" | sort)"
while IFS='|' read -r name sel app nodesel tols prio sa strategy; do
    assert_eq "$name selector app" "$name" "$sel"
    assert_eq "$name pod label app" "$name" "$app"
    assert_eq "$name nodeSelector" "${SELECTOR[$name]}" "${nodesel% }"
    assert_contains "$name nodeSelector key" "nvidia.com/gpu.deploy." "$nodesel"
    assert_contains "$name tolerations" "nvidia.com/gpu:Exists:NoSchedule" "$tols"
    assert_eq "$name priorityClassName" "system-node-critical" "$prio"
    k get sa -n "$NS" "$sa" >/dev/null 2>&1 || fail "$name: serviceAccountName $sa has no ServiceAccount"
    if [ "$name" = nvidia-driver-daemonset ]; then
        assert_eq "$name updateStrategy" "OnDelete" "$strategy"
    else
        assert_eq "$name updateStrategy" "RollingUpdate" "$strategy"
    fi
done <<<"$rows"

# ds_get NAME JSONPATH: one field of a DaemonSet.
ds_get() { k get ds -n "$NS" "$1" -o jsonpath="$2"; }
# ctr_env_names DS CONTAINER: the env names of a container or init container, space-separated.
ctr_env_names() {
    ds_get "$1" "{.spec.template.spec.containers[?(@.name==\"$2\")].env[*].name} {.spec.template.spec.initContainers[?(@.name==\"$2\")].env[*].name}"
}
# ctr_env DS CONTAINER VAR: a container's (or init container's) env value.
ctr_env() {
    local v
    v=$(ds_get "$1" "{.spec.template.spec.containers[?(@.name==\"$2\")].env[?(@.name==\"$3\")].value}")
    [ -n "$v" ] || v=$(ds_get "$1" "{.spec.template.spec.initContainers[?(@.name==\"$2\")].env[?(@.name==\"$3\")].value}")
    printf '%s' "$v"
}

step "images: NVIDIA's for the components, ours for every validator container"
imgs=$(k get ds -n "$NS" -o go-template='{{range .items}}{{$ds := .metadata.name}}{{range .spec.template.spec.initContainers}}{{$ds}} {{.name}} {{.image}} {{index .command 0}}{{"\n"}}{{end}}{{range .spec.template.spec.containers}}{{$ds}} {{.name}} {{.image}} {{if .command}}{{index .command 0}}{{else}}-{{end}}{{"\n"}}{{end}}{{end}}')
while read -r ds ctr img cmd; do
    case "$img" in
    nvcr.io/nvidia/*:*) ;;
    "$VALIDATOR_IMAGE":*) ;;
    *) fail "$ds/$ctr: image $img is neither nvcr.io/nvidia/... nor $VALIDATOR_IMAGE" ;;
    esac
    if [ "$cmd" = gpu-validator ] || [ "${ctr%-validation}" != "$ctr" ]; then
        assert_eq "$ds/$ctr validator image" "$VALIDATOR_IMAGE" "${img%:*}"
    fi
done <<<"$imgs"
assert_eq "validator init containers" "driver-validation toolkit-validation cuda-validation" \
    "$(ds_get nvidia-operator-validator '{.spec.template.spec.initContainers[*].name}')"
for c in driver toolkit cuda; do
    assert_eq "validator $c command" '["gpu-validator"]' \
        "$(ds_get nvidia-operator-validator "{.spec.template.spec.initContainers[?(@.name==\"$c-validation\")].command}")"
    assert_contains "validator $c writes its ready file" "/run/nvidia/validations/$c-ready" \
        "$(ds_get nvidia-operator-validator "{.spec.template.spec.initContainers[?(@.name==\"$c-validation\")].args}")"
done

step "ready-file gates: toolkit validates the driver, GPU clients wait for toolkit-ready"
first_init() { ds_get "$1" '{.spec.template.spec.initContainers[0].name} {.spec.template.spec.initContainers[0].command} {.spec.template.spec.initContainers[0].args}'; }
out=$(first_init nvidia-container-toolkit-daemonset)
assert_contains "toolkit gate" 'driver-validation ["gpu-validator"]' "$out"
assert_contains "toolkit gate file" "/run/nvidia/validations/driver-ready" "$out"
for ds in nvidia-device-plugin-daemonset nvidia-device-plugin-mps-control-daemon nvidia-dcgm \
    nvidia-dcgm-exporter gpu-feature-discovery nvidia-mig-manager; do
    out=$(first_init "$ds")
    assert_contains "$ds gate" "toolkit-validation" "$out"
    assert_contains "$ds gate file" "[ -f /run/nvidia/validations/toolkit-ready ]" "$out"
done

step "device plugin and GFD: MIG strategy, config-manager, the config volume"
for pair in nvidia-device-plugin-daemonset:nvidia-device-plugin gpu-feature-discovery:gpu-feature-discovery \
    nvidia-device-plugin-mps-control-daemon:mps-control-daemon-ctr; do
    ds=${pair%%:*} main=${pair#*:}
    assert_eq "$ds MIG_STRATEGY" "single" "$(ctr_env "$ds" "$main" MIG_STRATEGY)"
    assert_eq "$ds CONFIG_FILE" "/config/config.yaml" "$(ctr_env "$ds" "$main" CONFIG_FILE)"
    assert_contains "$ds containers" "config-manager" "$(ds_get "$ds" '{.spec.template.spec.containers[*].name}')"
    assert_contains "$ds init containers" "config-manager-init" "$(ds_get "$ds" '{.spec.template.spec.initContainers[*].name}')"
    for c in config-manager config-manager-init; do
        assert_eq "$ds $c NODE_LABEL" "nvidia.com/device-plugin.config" "$(ctr_env "$ds" "$c" NODE_LABEL)"
        assert_eq "$ds $c CONFIG_FILE_SRCDIR" "/available-configs" "$(ctr_env "$ds" "$c" CONFIG_FILE_SRCDIR)"
        assert_contains "$ds $c env" " DEFAULT_CONFIG " " $(ctr_env_names "$ds" "$c") "
        # Nodes without a label or default run the plugin without a config (plain GPUs).
        assert_eq "$ds $c FALLBACK_STRATEGIES" "empty" "$(ctr_env "$ds" "$c" FALLBACK_STRATEGIES)"
    done
    assert_eq "$ds config volume is a ConfigMap" "device-plugin-config" \
        "$(ds_get "$ds" '{.spec.template.spec.volumes[?(@.name=="config")].configMap.name}')"
done
assert_eq "config-manager signals the plugin" "nvidia-device-plugin" \
    "$(ctr_env nvidia-device-plugin-daemonset config-manager PROCESS_TO_SIGNAL)"

step "mig-manager: env contract, ConfigMap volumes, RBAC to pause clients"
mm=nvidia-mig-manager
assert_eq "CONFIG_FILE" "/mig-parted-config/config.yaml" "$(ctr_env $mm $mm CONFIG_FILE)"
assert_eq "GPU_CLIENTS_FILE" "/gpu-clients/clients.yaml" "$(ctr_env $mm $mm GPU_CLIENTS_FILE)"
assert_eq "WITH_REBOOT" "false" "$(ctr_env $mm $mm WITH_REBOOT)"
assert_eq "WITH_SHUTDOWN_HOST_GPU_CLIENTS" "false" "$(ctr_env $mm $mm WITH_SHUTDOWN_HOST_GPU_CLIENTS)"
assert_eq "NODE_NAME from the downward API" "spec.nodeName" \
    "$(ds_get $mm '{.spec.template.spec.containers[0].env[?(@.name=="NODE_NAME")].valueFrom.fieldRef.fieldPath}')"
assert_eq "DEFAULT_GPU_CLIENTS_NAMESPACE from the downward API" "metadata.namespace" \
    "$(ds_get $mm '{.spec.template.spec.containers[0].env[?(@.name=="DEFAULT_GPU_CLIENTS_NAMESPACE")].valueFrom.fieldRef.fieldPath}')"
assert_eq "mig-parted-config volume" "default-mig-parted-config" \
    "$(ds_get $mm '{.spec.template.spec.volumes[?(@.name=="mig-parted-config")].configMap.name}')"
assert_eq "mig-parted-config mount" "/mig-parted-config" \
    "$(ds_get $mm '{.spec.template.spec.containers[0].volumeMounts[?(@.name=="mig-parted-config")].mountPath}')"
assert_eq "gpu-clients volume" "default-gpu-clients" \
    "$(ds_get $mm '{.spec.template.spec.volumes[?(@.name=="gpu-clients")].configMap.name}')"
clients=$(k get cm -n "$NS" default-gpu-clients -o jsonpath='{.data.clients\.yaml}')
assert_eq "clients.yaml version" "version: v1" "$(head -1 <<<"$clients")"
assert_contains "clients.yaml services" $'systemd-services:\n  - nvsm.service' "$clients"
for verb in patch update; do
    assert_contains "mig-manager may $verb nodes" "yes" \
        "$(k auth can-i "$verb" nodes --as=system:serviceaccount:$NS:nvidia-mig-manager 2>&1 || true)"
done
assert_contains "mig-manager may delete pods" "yes" \
    "$(k auth can-i delete pods -n $NS --as=system:serviceaccount:$NS:nvidia-mig-manager 2>&1 || true)"
assert_contains "mig-manager may not delete nodes" "no" \
    "$(k auth can-i delete nodes --as=system:serviceaccount:$NS:nvidia-mig-manager 2>&1 || true)"

step "default mig-parted config is byte-identical to nodesim default-mig-config"
k get cm -n "$NS" default-mig-parted-config -o jsonpath='{.data.config\.yaml}' >"$E2E_DIR/cm-config.yaml"
"$NODESIM" default-mig-config >"$E2E_DIR/nodesim-config.yaml"
if ! cmp -s "$E2E_DIR/nodesim-config.yaml" "$E2E_DIR/cm-config.yaml"; then
    diff -u "$E2E_DIR/nodesim-config.yaml" "$E2E_DIR/cm-config.yaml" | head -n 40 >&2 || true
    fail "states/state-mig-manager default-mig-parted-config differs from 'nodesim default-mig-config'"
fi
[ -s "$E2E_DIR/cm-config.yaml" ] || fail "default-mig-parted-config config.yaml is empty"
grep -q '^  all-balanced:$' "$E2E_DIR/cm-config.yaml" || fail "mig-parted config has no all-balanced"

step "Services, ServiceMonitors and the RuntimeClass agree"
svc_ports() { k get svc -n "$NS" "$1" -o jsonpath='{range .spec.ports[*]}{.name}:{.port} {end}'; }
assert_eq "operator metrics port" "gpu-operator-metrics:8080 " "$(svc_ports gpu-operator)"
assert_eq "dcgm-exporter port" "gpu-metrics:9400 " "$(svc_ports nvidia-dcgm-exporter)"
assert_eq "dcgm port" "dcgm:5555 " "$(svc_ports nvidia-dcgm)"
assert_eq "node-status-exporter port" "node-status:8000 " "$(svc_ports nvidia-node-status-exporter)"
for sm in $(k get servicemonitors -n "$NS" -o jsonpath='{.items[*].metadata.name}'); do
    app=$(k get servicemonitor -n "$NS" "$sm" -o jsonpath='{.spec.selector.matchLabels.app}')
    port=$(k get servicemonitor -n "$NS" "$sm" -o jsonpath='{.spec.endpoints[0].port}')
    svc=$(k get svc -n "$NS" -l "app=$app" -o jsonpath='{.items[*].metadata.name}')
    [ -n "$svc" ] || fail "ServiceMonitor $sm selects app=$app: no Service has that label"
    assert_contains "ServiceMonitor $sm port on Service $svc" " $port:" " $(svc_ports "$svc")"
done
assert_eq "ServiceMonitors" "gpu-operator nvidia-dcgm-exporter nvidia-node-status-exporter" \
    "$(k get servicemonitors -n "$NS" -o jsonpath='{.items[*].metadata.name}' | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')"
assert_eq "RuntimeClass handler" "nvidia" "$(k get runtimeclass nvidia -o jsonpath='{.handler}')"

step "validator privileges: only the modes that need it run privileged"
# gpu-validator --mode driver (before the toolkit: opens the GPUs through the host's driver root)
# and --mode metrics (node status exporter: the host root, outside the runtime) are privileged;
# toolkit and cuda (through the nvidia runtime), the waits for a result file and the validator's
# main container are not: no privilege escalation, no capabilities, no Bidirectional mounts.
python3 - "$STATES" <<'PY' || fail "a validator container has privileges its mode does not need"
import glob, os, sys, yaml
NEED = {"driver", "metrics"}
bad, rows = [], []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*", "*.yaml"))):
    for d in yaml.safe_load_all(open(f)):
        if not d or d.get("kind") != "DaemonSet":
            continue
        spec = d["spec"]["template"]["spec"]
        for c in (spec.get("initContainers") or []) + spec["containers"]:
            if "gpu-operator-validator" not in c.get("image", ""):
                continue
            args = c.get("args") or []
            if c.get("command") == ["gpu-validator"]:
                mode = args[args.index("--mode") + 1]
            elif any("until [ -f" in a for a in args):
                mode = "(wait for a file)"
            else:
                mode = "(hold the pod)"
            sc = c.get("securityContext") or {}
            where = "%s %s (%s)" % (os.path.relpath(f, sys.argv[1]), c["name"], mode)
            rows.append("  %-18s %-48s %s" % (mode, os.path.relpath(f, sys.argv[1]) + " " + c["name"], sc))
            if bool(sc.get("privileged")) != (mode in NEED):
                bad.append("%s: privileged=%s" % (where, sc.get("privileged", False)))
            if mode not in NEED:
                if sc.get("allowPrivilegeEscalation") is not False or (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
                    bad.append(where + ": not allowPrivilegeEscalation false with capabilities drop [ALL]")
                bad += ["%s: Bidirectional mount %s" % (where, m["name"]) for m in c.get("volumeMounts") or []
                        if m.get("mountPropagation") == "Bidirectional"]
print("validator containers by mode:\n" + "\n".join(sorted(rows)))
modes = {r.split()[0] for r in rows}
for m in ("driver", "toolkit", "cuda", "metrics"):
    if m not in modes:
        bad.append("no container runs --mode " + m + " (the check lost track of the manifests)")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY

step "placement: no pod without deploy labels; a labelled, GPU-tainted node gets the driver pod"
for ds in "${!SELECTOR[@]}"; do
    assert_eq "$ds desired before labels" "0" "$(ds_get "$ds" '{.status.desiredNumberScheduled}')"
done
node=$(k get nodes -o jsonpath='{.items[0].metadata.name}')
k taint node "$node" nvidia.com/gpu=present:NoSchedule >/dev/null
k label node "$node" nvidia.com/gpu.deploy.driver=true >/dev/null
until_eq "driver pod on $node" "$node" 30 \
    k get pods -n "$NS" -l app=nvidia-driver-daemonset -o jsonpath='{.items[*].spec.nodeName}'
assert_eq "no toolkit pod without its label" "" \
    "$(k get pods -n "$NS" -l app=nvidia-container-toolkit-daemonset -o name)"
k label node "$node" nvidia.com/gpu.deploy.driver- >/dev/null
k taint node "$node" nvidia.com/gpu=present:NoSchedule- >/dev/null

step "delete in reverse order: everything goes"
for ((i = ${#files[@]} - 1; i >= 0; i--)); do
    k delete -f "${files[$i]}" --wait=false >/dev/null
done
for f in "${files[@]}"; do
    until_eq "objects of $f gone" "" 30 sh -c "kubectl --kubeconfig '$KUBECONFIG_E2E' --cache-dir '$KCACHE' get -f '$f' -o name --ignore-not-found"
done
echo "states manifests: ok (${#files[@]} files, $total objects)"
