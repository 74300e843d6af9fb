#!/usr/bin/env bash
# A DaemonSet on 100 nodes rolls a template change with maxUnavailable 10%: never more than 10
# nodes unavailable, and at the end the status fields helm's --wait reads all agree.
. "$(dirname "$0")/../lib.sh"
cluster_up --fleet "$E2E_ROOT/testdata/fleet-100.yaml"
assert_eq "nodes" "100" "$(k get nodes --no-headers | wc -l | tr -d ' ')"
cat >"$E2E_DIR/ds.yaml" <<'YAML'
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: "10%"}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
        - name: agent
          image: registry.example/agent:1.0
YAML
k apply -f "$E2E_DIR/ds.yaml" >/dev/null
k rollout status ds/agent --timeout=120s >/dev/null
assert_eq "ready before roll" "100" "$(k get ds agent -o jsonpath='{.status.numberReady}')"

step "roll a template change, sampling numberUnavailable on every status change"
k get ds agent -w -o jsonpath='{.status.numberUnavailable}{"\n"}' >"$E2E_DIR/samples" 2>/dev/null &
watcher=$!
sleep 1
k set image ds/agent agent=registry.example/agent:2.0 >/dev/null
k rollout status ds/agent --timeout=180s >/dev/null
sleep 0.5
kill $watcher 2>/dev/null || true
wait $watcher 2>/dev/null || true
samples=$(grep -c . "$E2E_DIR/samples" || true)
max=$(sort -n "$E2E_DIR/samples" | tail -1)
echo "status samples: $samples, max numberUnavailable: ${max:-0}"
[ "$samples" -ge 5 ] || fail "too few status samples ($samples) to judge the roll"
[ "${max:-0}" -le 10 ] || fail "numberUnavailable reached $max (> 10)"
[ "${max:-0}" -ge 1 ] || fail "the roll never made a node unavailable: was the template change applied?"

step "final status"
gen=$(k get ds agent -o jsonpath='{.metadata.generation}')
assert_eq "observedGeneration" "$gen" "$(k get ds agent -o jsonpath='{.status.observedGeneration}')"
for f in desiredNumberScheduled currentNumberScheduled updatedNumberScheduled numberReady numberAvailable; do
    assert_eq "$f" "100" "$(k get ds agent -o jsonpath="{.status.$f}")"
done
assert_eq "numberUnavailable" "" "$(k get ds agent -o jsonpath='{.status.numberUnavailable}' | sed 's/^0$//')"
assert_eq "every pod on the new image" "100" \
    "$(k get pods -l app=agent -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}' | grep -c 'agent:2.0')"
echo "daemonset rollout: ok"
