#!/usr/bin/env bash
# Server-side field validation of custom objects with the real kubectl: `kubectl apply` sends
# fieldValidation=Strict, so a field the CRD's schema does not declare is refused with the API
# server's message; --validate=warn prints a warning and the field is pruned; --validate=false
# prunes it silently. Server-side apply fails on an undeclared field whatever the validation
# level: 500 with "field not declared in schema" (the applied configuration cannot be typed).
. "$(dirname "$0")/../lib.sh"
cluster_up

k apply -f "$E2E_ROOT/testdata/widget-crd.yaml" >/dev/null
crd_established widgets.example.com
widget() { printf 'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {%s}\n' "$1" >"$E2E_DIR/w.yaml"; }

step "Strict (kubectl's default): create refused"
widget "mode: mixed, size: 2, extra: 1"
out=$(assert_fails "apply with an unknown field" k apply -f "$E2E_DIR/w.yaml")
assert_contains "strict create" 'Error from server (BadRequest): error when creating' "$out"
assert_contains "strict message" 'Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.extra"' "$out"
assert_eq "nothing created" "" "$(k get widgets -o name)"
widget "mode: mixed, size: 2, extra: 1, other: [1]"
out=$(assert_fails "two unknown fields" k create -f "$E2E_DIR/w.yaml")
assert_contains "both named" 'strict decoding error: unknown field "spec.extra", unknown field "spec.other"' "$out"

step "Warn: created with a warning, the field pruned"
widget "mode: mixed, size: 2, extra: 1"
out=$(k apply -f "$E2E_DIR/w.yaml" --validate=warn 2>&1)
assert_contains "warning" 'Warning: unknown field "spec.extra"' "$out"
assert_contains "created" "widget.example.com/w1 created" "$out"
assert_eq "pruned" '{"mode":"mixed","size":2}' "$(k get widget w1 -o jsonpath='{.spec}')"

step "Strict on update (a merge patch), Ignore prunes silently"
widget "mode: single, size: 3, extra: 1"
out=$(assert_fails "apply update with an unknown field" k apply -f "$E2E_DIR/w.yaml")
assert_contains "strict patch" 'strict decoding error: unknown field "spec.extra"' "$out"
assert_eq "unchanged" "mixed" "$(k get widget w1 -o jsonpath='{.spec.mode}')"
out=$(k apply -f "$E2E_DIR/w.yaml" --validate=false 2>&1)
assert_eq "ignore: no warning" "widget.example.com/w1 configured" "$out"
assert_eq "updated and pruned" '{"mode":"single","size":3}' "$(k get widget w1 -o jsonpath='{.spec}')"
step "server-side apply: an undeclared field fails the apply (500), even with --validate=false"
widget "mode: mixed, size: 2, extra: 1"
out=$(assert_fails "server-side apply with an undeclared field" k apply --server-side -f "$E2E_DIR/w.yaml")
assert_eq "the API server's message" 'Error from server: failed to create typed patch object (/w1; example.com/v1, Kind=Widget): .spec.extra: field not declared in schema' "$out"
out=$(assert_fails "even without validation" k apply --server-side --validate=false -f "$E2E_DIR/w.yaml")
assert_contains "same refusal" 'field not declared in schema' "$out"
widget "mode: mixed, size: 2"
assert_eq "declared fields apply" "widget.example.com/w1 serverside-applied" "$(k apply --server-side --force-conflicts -f "$E2E_DIR/w.yaml" 2>&1)"
echo "crd field validation: ok"
