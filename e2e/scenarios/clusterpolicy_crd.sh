#!/usr/bin/env bash
# The ClusterPolicy CRD (crds/nvidia.com_clusterpolicies.yaml) with the real kubectl: it becomes
# Established, a policy using every spec section is accepted with defaults filled in, printer
# columns and the status subresource work, invalid specs are refused with the API server's field
# messages, unknown fields are refused under `spec` as inside its sections (kubectl's strict field
# validation) and pruned without it, and nulls in non-nullable fields are dropped.
. "$(dirname "$0")/../lib.sh"
cluster_up

CRD="$REPO_ROOT/crds/nvidia.com_clusterpolicies.yaml"
FULL="$E2E_ROOT/testdata/clusterpolicy-full.yaml"
# policy NAME SPEC_YAML: writes a ClusterPolicy manifest to $E2E_DIR/NAME.yaml and prints its path.
policy() {
    printf 'apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: %s}\nspec:\n%s\n' \
        "$1" "$2" >"$E2E_DIR/$1.yaml"
    printf '%s' "$E2E_DIR/$1.yaml"
}
cp_get() { k get clusterpolicy "$1" -o jsonpath="$2"; }

step "the CRD is accepted and Established"
k apply -f "$CRD" >/dev/null
crd_established clusterpolicies.nvidia.com
assert_eq "scope and names" "Cluster ClusterPolicy ClusterPolicyList clusterpolicy" \
    "$(k get crd clusterpolicies.nvidia.com -o jsonpath='{.spec.scope} {.status.acceptedNames.kind} {.status.acceptedNames.listKind} {.status.acceptedNames.singular}')"
assert_eq "stored version" "v1" "$(k get crd clusterpolicies.nvidia.com -o jsonpath='{.status.storedVersions[0]}')"

step "a policy with every spec section is accepted"
out=$(k apply -f "$FULL")
assert_eq "apply" "clusterpolicy.nvidia.com/cluster-policy created" "$out"
want=$(sed -n '/^spec:/,$ s/^  \([A-Za-z_]*\):.*/\1/p' "$FULL" | sort | tr '\n' ' ')
got=$(k get clusterpolicy cluster-policy -o json | jq -r '.spec | keys[]' | sort | tr '\n' ' ')
assert_eq "every section stored" "$want" "$got"
[ "$(wc -w <<<"$got")" -ge 26 ] || fail "expected at least 26 spec sections, got: $got"
assert_eq "nested values kept" "single 2 50% 5555 default-mig-parted-config kata-nvidia-gpu" \
    "$(cp_get cluster-policy '{.spec.mig.strategy} {.spec.driver.upgradePolicy.maxParallelUpgrades} {.spec.driver.upgradePolicy.maxUnavailable} {.spec.dcgm.hostPort} {.spec.migManager.config.name} {.spec.kataManager.config.runtimeClasses[0].name}')"
assert_eq "int-or-string quantities" "1 128Mi" \
    "$(cp_get cluster-policy '{.spec.validator.resources.limits.cpu} {.spec.validator.resources.limits.memory}')"
assert_eq "podSecurityContext" "RuntimeDefault" \
    "$(cp_get cluster-policy '{.spec.daemonsets.podSecurityContext.seccompProfile.type}')"
out=$(k apply -f "$FULL")
assert_eq "re-apply is a no-op" "clusterpolicy.nvidia.com/cluster-policy unchanged" "$out"

step "printer columns: NAME STATUS AGE"
out=$(k get clusterpolicy)
assert_eq "header" "NAME STATUS AGE" "$(head -1 <<<"$out" | tr -s ' ')"
assert_eq "row before any status" "cluster-policy" "$(sed -n 2p <<<"$out" | awk '{print $1}')"

step "status subresource"
k patch clusterpolicy cluster-policy --subresource=status --type merge \
    -p '{"status":{"state":"notReady","namespace":"gpu-operator","conditions":[{"type":"Ready","status":"False","reason":"OperandNotReady","message":"ClusterPolicy is not ready; states not ready: [state-driver]","lastTransitionTime":"2026-01-01T00:00:00Z"}],"stateCounts":{"ready":3}}}' >/dev/null
assert_eq "status written" "notReady gpu-operator OperandNotReady 3" \
    "$(cp_get cluster-policy '{.status.state} {.status.namespace} {.status.conditions[0].reason} {.status.stateCounts.ready}')"
assert_contains "state column" "notReady" "$(k get clusterpolicy cluster-policy --no-headers)"
k patch clusterpolicy cluster-policy --subresource=status --type merge -p '{"status":{"state":"ready"}}' >/dev/null
assert_eq "state ready" "ready" "$(cp_get cluster-policy '{.status.state}')"
assert_eq "state column" "cluster-policy ready" "$(k get clusterpolicy --no-headers | awk '{print $1, $2}')"
k patch clusterpolicy cluster-policy --type merge -p '{"status":{"state":"ignored"},"spec":{"psa":{"enabled":true}}}' >/dev/null
assert_eq "the main resource ignores status" "ready true" "$(cp_get cluster-policy '{.status.state} {.spec.psa.enabled}')"
out=$(assert_fails "status state outside the enum" k patch clusterpolicy cluster-policy --subresource=status --type merge -p '{"status":{"state":"done"}}')
assert_contains "status enum message" 'status.state: Unsupported value: "done": supported values: "ready", "notReady", "ignored", "disabled"' "$out"
out=$(assert_fails "condition without a reason" k patch clusterpolicy cluster-policy --subresource=status --type merge \
    -p '{"status":{"conditions":[{"type":"Ready","status":"Maybe","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}')
assert_contains "condition reason required" 'status.conditions[0].reason: Required value' "$out"
assert_contains "condition status enum" 'status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"' "$out"
cond='{"type":"Ready","status":"True","reason":"Reconciled","message":"","lastTransitionTime":"%s"}'
out=$(assert_fails "two Ready conditions" k patch clusterpolicy cluster-policy --subresource=status --type merge \
    -p "{\"status\":{\"conditions\":[$(printf "$cond" 2026-01-01T00:00:00Z),$(printf "$cond" 2026-01-02T00:00:00Z)]}}")
assert_contains "conditions are a map keyed by type" 'status.conditions[1]: Duplicate value: map[string]interface {}{"type":"Ready"}' "$out"
out=$(assert_fails "a condition time that is no date-time" k patch clusterpolicy cluster-policy --subresource=status --type merge \
    -p "{\"status\":{\"conditions\":[$(printf "$cond" yesterday)]}}")
# The API server names the field from the status root in the second half ("conditions[0]...").
assert_contains "date-time message" 'status.conditions[0].lastTransitionTime: Invalid value: "yesterday": conditions[0].lastTransitionTime in body must be of type date-time: "yesterday"' "$out"
assert_eq "status unchanged" "ready OperandNotReady" "$(cp_get cluster-policy '{.status.state} {.status.conditions[0].reason}')"

step "defaults fill in what a section leaves out"
k apply -f "$(policy defaults '  driver: {upgradePolicy: {drain: {enable: true}}}
  daemonsets: {}
  migManager: {config: {name: custom}}
  hostPaths: {rootFS: /host}')" >/dev/null
assert_eq "upgradePolicy defaults" "1 25% false 300 true 300" \
    "$(cp_get defaults '{.spec.driver.upgradePolicy.maxParallelUpgrades} {.spec.driver.upgradePolicy.maxUnavailable} {.spec.driver.upgradePolicy.autoUpgrade} {.spec.driver.upgradePolicy.drain.timeoutSeconds} {.spec.driver.upgradePolicy.drain.enable} {.spec.driver.upgradePolicy.drain.timeoutSeconds}')"
assert_eq "other defaults" "RollingUpdate all-disabled /var/lib/kubelet auto" \
    "$(cp_get defaults '{.spec.daemonsets.updateStrategy} {.spec.migManager.config.default} {.spec.hostPaths.kubeletRootDir} {.spec.driver.kernelModuleType}')"
assert_eq "absent sections stay absent" "" "$(cp_get defaults '{.spec.cdi}{.spec.toolkit}')"

step "invalid specs are refused with the API server's messages"
msg_prefix='The ClusterPolicy "bad" is invalid: '
out=$(assert_fails "mig.strategy bogus" k apply -f "$(policy bad '  mig: {strategy: bogus}')")
assert_contains "enum message" "${msg_prefix}spec.mig.strategy: Unsupported value: \"bogus\": supported values: \"none\", \"single\", \"mixed\"" "$out"
out=$(assert_fails "negative count" k apply -f "$(policy bad '  driver: {upgradePolicy: {maxParallelUpgrades: -1}}')")
assert_contains "minimum message" "${msg_prefix}spec.driver.upgradePolicy.maxParallelUpgrades: Invalid value: -1: spec.driver.upgradePolicy.maxParallelUpgrades in body should be greater than or equal to 0" "$out"
out=$(assert_fails "negative timeout" k apply -f "$(policy bad '  driver: {upgradePolicy: {drain: {timeoutSeconds: -5}}}')")
assert_contains "nested minimum" 'spec.driver.upgradePolicy.drain.timeoutSeconds: Invalid value: -5' "$out"
out=$(assert_fails "version with a space" k apply -f "$(policy bad '  driver: {version: "550.90 .07"}')")
assert_contains "pattern message" "${msg_prefix}spec.driver.version: Invalid value: \"550.90 .07\": spec.driver.version in body should match '^\\S*\$'" "$out"
out=$(assert_fails "string for a bool" k apply -f "$(policy bad '  devicePlugin: {enabled: "yes"}')")
assert_contains "type message" "${msg_prefix}spec.devicePlugin.enabled: Invalid value: \"string\": spec.devicePlugin.enabled in body must be of type boolean: \"string\"" "$out"
out=$(assert_fails "several at once" k apply -f "$(policy bad '  mig: {strategy: all}
  daemonsets: {updateStrategy: Recreate}
  sandboxWorkloads: {defaultWorkload: vm}
  toolkit: {imagePullPolicy: Sometimes}
  driver: {resources: {limits: {memory: lots}}}')")
assert_eq "every error listed, one per line" "5" "$(grep -c '^\* spec\.' <<<"$out")"
assert_contains "updateStrategy" '* spec.daemonsets.updateStrategy: Unsupported value: "Recreate": supported values: "RollingUpdate", "OnDelete"' "$out"
assert_contains "defaultWorkload" '* spec.sandboxWorkloads.defaultWorkload: Unsupported value: "vm": supported values: "container", "vm-passthrough", "vm-vgpu"' "$out"
assert_contains "imagePullPolicy" '* spec.toolkit.imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"' "$out"
assert_contains "quantity" '* spec.driver.resources.limits.memory: Invalid value: "lots"' "$out"
out=$(assert_fails "list where a string is expected" k apply -f "$(policy bad '  daemonsets: {rollingUpdate: {maxUnavailable: [1]}}')")
assert_contains "array type" 'spec.daemonsets.rollingUpdate.maxUnavailable: Invalid value: "array": spec.daemonsets.rollingUpdate.maxUnavailable in body must be of type string: "array"' "$out"
out=$(assert_fails "env without a name" k apply -f "$(policy bad '  gfd: {env: [{value: x}]}')")
assert_contains "required env name" "${msg_prefix}spec.gfd.env[0].name: Required value" "$out"
assert_eq "nothing created" "" "$(k get clusterpolicy bad -o name --ignore-not-found)"
out=$(assert_fails "invalid update" k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"mig":{"strategy":"bogus"}}}')
assert_contains "update refused" 'The ClusterPolicy "cluster-policy" is invalid: spec.mig.strategy: Unsupported value: "bogus"' "$out"
assert_eq "unchanged" "single" "$(cp_get cluster-policy '{.spec.mig.strategy}')"

step "unknown sections and unknown fields of known sections are refused (strict), pruned without"
out=$(assert_fails "unknown section" k apply -f "$(policy extra '  mig: {strategy: mixed}
  futureSection: {enabled: true, knobs: {depth: 3}}')")
assert_contains "strict decoding" 'strict decoding error: unknown field "spec.futureSection"' "$out"
out=$(k apply --validate=false -f "$E2E_DIR/extra.yaml")
assert_eq "accepted without strict validation" "clusterpolicy.nvidia.com/extra created" "$out"
assert_eq "unknown section pruned" " mixed" "$(cp_get extra '{.spec.futureSection.enabled} {.spec.mig.strategy}')"
out=$(assert_fails "unknown field in a known section" k apply -f "$(policy typo '  driver: {enabeld: true}')")
assert_contains "strict decoding" 'strict decoding error: unknown field "spec.driver.enabeld"' "$out"

step "nulls in non-nullable fields are dropped, as the API server's decoder prunes them"
out=$(k apply -f "$(policy nulls '  driver: {enabled: true, version: null, licensingConfig: null}
  mig: {strategy: null}')")
assert_eq "accepted" "clusterpolicy.nvidia.com/nulls created" "$out"
assert_eq "nulls dropped" '{"enabled":true,"kernelModuleType":"auto"} {}' "$(cp_get nulls '{.spec.driver} {.spec.mig}')"
# kubectl drops nulls itself; a raw body reaches the server with them (as other clients send).
printf '%s' '{"apiVersion":"nvidia.com/v1","kind":"ClusterPolicy","metadata":{"name":"raw-nulls"},
  "spec":{"driver":{"enabled":true,"version":null,"certConfig":null,"upgradePolicy":{"maxParallelUpgrades":null}},
  "daemonsets":{"labels":{"a":null,"b":"x"}},"mig":{"strategy":null}}}' >"$E2E_DIR/raw.json"
k create --raw /apis/nvidia.com/v1/clusterpolicies -f "$E2E_DIR/raw.json" >/dev/null
assert_eq "raw nulls pruned, defaults applied" \
    '{"daemonsets":{"labels":{"b":"x"},"updateStrategy":"RollingUpdate"},"driver":{"enabled":true,"kernelModuleType":"auto","upgradePolicy":{"autoUpgrade":false,"maxParallelUpgrades":1,"maxUnavailable":"25%"}},"mig":{}}' \
    "$(k get clusterpolicy raw-nulls -o json | jq -cS .spec)"

k delete clusterpolicy --all >/dev/null
assert_eq "all deleted" "" "$(k get clusterpolicy -o name)"
echo "clusterpolicy crd: ok"
