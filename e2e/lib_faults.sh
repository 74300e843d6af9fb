#!/usr/bin/env bash
# Helpers for scenarios that inject API faults into kubesim (/kubesim/v1/faults, see the "Fault
# injection" section of e2e/kubesim/README.md) with the real kubectl. Source after e2e/lib.sh.
# On a real cluster there is no such endpoint: guard their use with kubesim_only/skip_scenario.

# api_fault JSON: installs the rule set JSON ({"rules": [...]}), replacing the current one.
api_fault() {
    local f="$e2e_tmp/faults.$$.$RANDOM.json" out
    printf '%s\n' "$1" >"$f"
    if ! out=$(k create --raw /kubesim/v1/faults -f "$f" 2>&1); then
        rm -f "$f"
        fail "api_fault: kubesim refused the rules: $out"
    fi
    rm -f "$f"
}

# api_fault_clear: removes every rule.
api_fault_clear() {
    local out
    out=$(k delete --raw /kubesim/v1/faults 2>&1) || fail "api_fault_clear: $out"
}

# api_fault_counts: "name injected", one line per installed rule.
api_fault_counts() {
    local out
    out=$(k get --raw /kubesim/v1/faults 2>&1) || fail "api_fault_counts: $out"
    printf '%s\n' "$out" | python3 -c 'import json, sys
for c in json.load(sys.stdin)["counters"]:
    print(c["name"], c["injected"])'
}
