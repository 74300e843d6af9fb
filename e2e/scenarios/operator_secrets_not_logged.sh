#!/usr/bin/env bash
# Credentials never reach the operator's log or its metrics: the operator at its most verbose
# (-v, KC_LOG_LEVEL=debug) installs a ClusterPolicy to ready with the admin's token, then runs
# with a token the API server refuses (401) and with a client certificate and key it does not
# accept, then is started on broken kubeconfigs that hold a token and a key; the token strings,
# the key's PEM body and any Authorization value appear in none of its output.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "uses kubesim's admin token and kubeconfig"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml"
install_crd
k create namespace gpu-operator >/dev/null
export KC_LOG_LEVEL=debug
TOKEN=$(cat "$E2E_DIR/admin.token")
[ ${#TOKEN} -ge 16 ] || fail "the admin token is too short to search for: [$TOKEN]"

# no_secret WHAT FILE SECRET...: none of the secrets (nor an Authorization value) is in FILE.
no_secret() {
    local what=$1 file=$2 s
    shift 2
    [ -s "$file" ] || fail "$what: $file is empty (nothing was checked)"
    for s in "$@"; do
        ! grep -qF -- "$s" "$file" || fail "$what: a secret appears in $file: $(grep -nF -- "$s" "$file" | head -3 | cut -c1-200)"
    done
    ! grep -qiE "authorization[\"']?[:=] *[\"']?(bearer|basic) " "$file" ||
        fail "$what: an Authorization value appears in $file"
    ! grep -qiE "bearer [A-Za-z0-9._-]{8,}" "$file" || fail "$what: a bearer token appears in $file"
}

step "install to ready at debug level; the log and /metrics hold no token"
operator_start -v
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "ready" "ready" 180 cp_state
curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$E2E_DIR/metrics.txt" || fail "metrics"
assert_contains "debug lines were written" "DEBUG" "$(cat "$E2E_DIR/operator.log")"
operator_stop
no_secret "install log" "$E2E_DIR/operator.log" "$TOKEN"
no_secret "metrics" "$E2E_DIR/metrics.txt" "$TOKEN"

# run_bad NAME KUBECONFIG SECONDS: the operator on KUBECONFIG for SECONDS (or until it exits),
# its output in $E2E_DIR/NAME.log.
run_bad() {
    local name=$1 kc=$2 t=$3 port
    port=$(free_port)
    OPERATOR_NAMESPACE=gpu-operator timeout -s TERM "$t" "$OPERATOR_BIN" -v --kubeconfig "$kc" \
        --states-dir "$REPO_ROOT/states" --metrics-bind-address "127.0.0.1:$port" \
        --health-probe-bind-address 0 >"$E2E_DIR/$name.log" 2>&1 &
    local pid=$!
    sleep 3
    curl -s "http://127.0.0.1:$port/metrics" >"$E2E_DIR/$name.metrics" 2>/dev/null || true
    wait "$pid" || true
}

step "a token the API server refuses (401): logged as such, the token is not"
BAD_TOKEN="bad-token-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
sed "s|$TOKEN|$BAD_TOKEN|" "$KUBECONFIG_E2E" >"$E2E_DIR/kc-bad-token"
grep -qF "$BAD_TOKEN" "$E2E_DIR/kc-bad-token" || fail "the kubeconfig holds no token to replace"
run_bad bad-token "$E2E_DIR/kc-bad-token" 6
# Its first discovery request gets 401: it stops, saying so (not "kind not served").
grep -qE "discovering [a-z0-9.]+/v[0-9a-z]+: .*(Unauthorized|401)" "$E2E_DIR/bad-token.log" ||
    fail "the refusal is not reported as such: $(tail -3 "$E2E_DIR/bad-token.log")"
! grep -q "not served" "$E2E_DIR/bad-token.log" || fail "a refused request was taken for a kind not served"
no_secret "401 log" "$E2E_DIR/bad-token.log" "$BAD_TOKEN" "$TOKEN"
[ ! -s "$E2E_DIR/bad-token.metrics" ] || no_secret "401 metrics" "$E2E_DIR/bad-token.metrics" "$BAD_TOKEN"

step "a client certificate and key the API server does not accept"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=intruder" \
    -keyout "$E2E_DIR/client.key" -out "$E2E_DIR/client.crt" >/dev/null 2>&1 || fail "openssl"
KEY_B64=$(base64 -w0 "$E2E_DIR/client.key")
CERT_B64=$(base64 -w0 "$E2E_DIR/client.crt")
# A line from the middle of the key's PEM body: any echo of the key shows it.
KEY_LINE=$(sed -n 5p "$E2E_DIR/client.key")
python3 - "$KUBECONFIG_E2E" "$CERT_B64" "$KEY_B64" >"$E2E_DIR/kc-client-cert" <<'PY'
import sys, yaml
kc = yaml.safe_load(open(sys.argv[1]))
for u in kc["users"]:
    u["user"] = {"client-certificate-data": sys.argv[2], "client-key-data": sys.argv[3]}
yaml.safe_dump(kc, sys.stdout)
PY
run_bad client-cert "$E2E_DIR/kc-client-cert" 6
grep -qE "Unauthorized|401|not serve" "$E2E_DIR/client-cert.log" || fail "the refusal left no trace in the log"
no_secret "client-key log" "$E2E_DIR/client-cert.log" "$KEY_B64" "$KEY_LINE" "PRIVATE KEY" "$TOKEN"

step "kubeconfig errors name the field, never its value"
# A key that is not PEM, with a token: the TLS setup fails naming the client key.
python3 - "$KUBECONFIG_E2E" "$TOKEN" >"$E2E_DIR/kc-bad-key" <<'PY'
import base64, sys, yaml
kc = yaml.safe_load(open(sys.argv[1]))
for u in kc["users"]:
    u["user"] = {"token": sys.argv[2], "client-certificate-data": base64.b64encode(b"not a cert " + sys.argv[2].encode()).decode(),
                 "client-key-data": base64.b64encode(b"not a key " + sys.argv[2].encode()).decode()}
yaml.safe_dump(kc, sys.stdout)
PY
run_bad bad-key "$E2E_DIR/kc-bad-key" 5
no_secret "bad key" "$E2E_DIR/bad-key.log" "$TOKEN"
# Bad base64 in client-key-data next to the token.
python3 - "$KUBECONFIG_E2E" "$TOKEN" >"$E2E_DIR/kc-bad-b64" <<'PY'
import sys, yaml
kc = yaml.safe_load(open(sys.argv[1]))
for u in kc["users"]:
    u["user"] = {"token": sys.argv[2], "client-certificate-data": "%%" + sys.argv[2], "client-key-data": "%%" + sys.argv[2]}
yaml.safe_dump(kc, sys.stdout)
PY
run_bad bad-b64 "$E2E_DIR/kc-bad-b64" 5
assert_contains "the field is named" "client-" "$(cat "$E2E_DIR/bad-b64.log")"
no_secret "bad base64" "$E2E_DIR/bad-b64.log" "$TOKEN"
# A YAML syntax error on the token's line.
printf 'apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: %s, ]\n' "$TOKEN" >"$E2E_DIR/kc-bad-yaml"
run_bad bad-yaml "$E2E_DIR/kc-bad-yaml" 5
assert_contains "the file is named" "kc-bad-yaml" "$(cat "$E2E_DIR/bad-yaml.log")"
no_secret "bad YAML" "$E2E_DIR/bad-yaml.log" "$TOKEN"
echo "PASS operator_secrets_not_logged"
