#!/usr/bin/env python3
"""Compares the RBAC a Helm release grants its ServiceAccounts with what they used.

Inputs: the release's rendered objects (`helm get manifest` plus `helm get hooks`), kubesim's
authorization decision log (<dir>/auth-decisions.jsonl: one line per distinct user, verb, group,
resource, subresource, namespace, name and outcome; a denied decision is a 403 reply), the states'
Roles and ClusterRoles (states/*/0200_role.yaml, 0210_clusterrole.yaml) and a justification file.

Fails (exit 1) when
  - a request by one of the release's ServiceAccounts was denied for a permission the release
    does not grant (a denial of a granted permission can only come after helm deleted the
    release's RBAC, as `helm uninstall` does while the operator's pod is still stopping: noted);
  - a verb granted to them (per role, apiGroup and resource) was never used and the justification
    file does not explain it;
  - a justification is no longer needed (the grant is used, or no longer granted) or is false (an
    `escalation` entry that no state's Role/ClusterRole needs);
  - a rule of a state's Role/ClusterRole is not held by the operator: a real API server refuses to
    let it create or bind that role (RBAC escalation prevention; kubesim does not check this).
With --denied-only, only the first check runs (for every chart scenario); --manifest may then be
the chart rendered for any namespace (`helm template`), --sa-names naming the ServiceAccounts.

Justification file (YAML): `unused: [{role: ClusterRole/NAME | Role/NAME, apiGroup, resource,
verbs: [...], escalation: true|false, why: TEXT}]`. `escalation: true` claims that a state's role
holds that permission, so the operator must hold it too (checked here); otherwise `why` names the
path the scenario did not take.
"""
import argparse
import json
import os
import sys

import yaml

SA_PREFIX = "system:serviceaccount:"


def load_docs(paths):
    docs = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            docs += [d for d in yaml.safe_load_all(f) if isinstance(d, dict)]
    return docs


def key_of(kind, name, ns):
    return (kind, ns if kind == "Role" else "", name)


class Grant:
    """One (role, rule, apiGroup, resource, verb) bound to a ServiceAccount in a scope."""

    def __init__(self, sa, role, scope, group, resource, verb, names):
        self.sa, self.role, self.scope = sa, role, scope  # scope: namespace, or None = cluster
        self.group, self.resource, self.verb, self.names = group, resource, verb, names

    def matches(self, d):
        if self.scope is not None and d["namespace"] != self.scope:
            return False
        res = d["resource"] + ("/" + d["subresource"] if d["subresource"] else "")
        return (self.group in ("*", d["group"]) and self.resource in ("*", res) and
                self.verb in ("*", d["verb"]) and (not self.names or d["name"] in self.names))

    def covers(self, group, resource, verb, names, ns):
        """Whether this grant holds a rule's permission (ns None: cluster-wide)."""
        if self.scope is not None and self.scope != ns:
            return False
        if self.names and (not names or not set(names) <= set(self.names)):
            return False
        return (self.group in ("*", group) and self.resource in ("*", resource) and
                self.verb in ("*", verb))


def release_grants(docs):
    """The chart's ServiceAccounts ("ns/name") and what their bindings grant them."""
    sas = {f"{d['metadata'].get('namespace', '')}/{d['metadata']['name']}"
           for d in docs if d.get("kind") == "ServiceAccount"}
    roles = {key_of(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", "")): d
             for d in docs if d.get("kind") in ("Role", "ClusterRole")}
    grants = []
    for b in docs:
        if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        bns = b["metadata"].get("namespace", "") if b["kind"] == "RoleBinding" else None
        ref = b["roleRef"]
        role = roles.get(key_of(ref["kind"], ref["name"], bns or ""))
        if role is None:
            sys.exit(f"rbac_usage: {b['kind']} {b['metadata']['name']} refers to {ref['kind']} "
                     f"{ref['name']}, which the release does not contain")
        for s in b.get("subjects") or []:
            sa = f"{s.get('namespace', '')}/{s['name']}"
            if s.get("kind") != "ServiceAccount" or sa not in sas:
                continue
            for rule in role.get("rules") or []:
                for g in rule.get("apiGroups") or []:
                    for r in rule.get("resources") or []:
                        for v in rule.get("verbs") or []:
                            grants.append(Grant(sa, f"{ref['kind']}/{ref['name']}", bns, g, r, v,
                                                rule.get("resourceNames") or []))
    return sas, grants


def granted_at(g, d, sas):
    """Whether grant g covers denied decision d, the release namespace mapped to d's (the
    manifest may be rendered for another namespace than the one a scenario used)."""
    g_ns, g_name = g.sa.split("/", 1)
    d_ns, d_name = d["sa"].split("/", 1)
    if g_name != d_name:
        return False
    scope = g.scope if g.scope != g_ns else d_ns
    return Grant(d["sa"], g.role, scope, g.group, g.resource, g.verb, g.names).matches(d)


def load_decisions(path, sas, names):
    """The decisions about the ServiceAccounts "ns/name" in sas or named one of names."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("review"):
                continue  # `kubectl auth can-i` asked; no request was made
            user = d["user"]
            if not user.startswith(SA_PREFIX):
                continue
            sa = user[len(SA_PREFIX):].replace(":", "/", 1)
            if sa in sas or sa.split("/", 1)[-1] in names:
                d["sa"] = sa
                out.append(d)
    if len(out) and sum(1 for _ in open(path, encoding="utf-8")) >= 20000:
        sys.exit("rbac_usage: the decision log is full (kubesim keeps 20000 entries): incomplete")
    return out


def state_rules(states_dir, release_ns):
    """(role, group, resource, verb, resourceNames, namespace or None) of every state's role."""
    out = []
    for state in sorted(os.listdir(states_dir)):
        for fname in ("0200_role.yaml", "0210_clusterrole.yaml"):
            p = os.path.join(states_dir, state, fname)
            if not os.path.exists(p):
                continue
            for d in load_docs([p]):
                ns = release_ns if d["kind"] == "Role" else None
                role = f"{d['kind']}/{d['metadata']['name']}"
                for rule in d.get("rules") or []:
                    for g in rule.get("apiGroups") or []:
                        for r in rule.get("resources") or []:
                            for v in rule.get("verbs") or []:
                                out.append((role, g, r, v, rule.get("resourceNames") or [], ns))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", action="append", default=[],
                    help="rendered release objects (helm get manifest / hooks); repeatable")
    ap.add_argument("--sa-names", help="with --denied-only, in place of --manifest: the "
                    "ServiceAccount names (comma-separated, any namespace) to check")
    ap.add_argument("--decisions", required=True, help="kubesim's auth-decisions.jsonl")
    ap.add_argument("--denied-only", action="store_true")
    ap.add_argument("--states", help="the states/ directory")
    ap.add_argument("--justification", help="the justification YAML")
    ap.add_argument("--namespace", default="gpu-operator", help="the release namespace")
    a = ap.parse_args()

    sas, grants = release_grants(load_docs(a.manifest))
    names = set(a.sa_names.split(",")) if a.sa_names and a.denied_only else set()
    if not sas and not names:
        sys.exit("rbac_usage: no ServiceAccount to check (--manifest, or --sa-names)")
    decisions = load_decisions(a.decisions, sas, names)
    problems, notes = [], []
    for d in decisions:
        if d["allowed"]:
            continue
        text = (f"denied (403): {d['sa']} {d['verb']} {d['group'] or 'core'}/{d['resource']}"
                f"{'/' + d['subresource'] if d['subresource'] else ''} ns={d['namespace'] or '-'}"
                f" name={d['name'] or '-'} x{d['count']}: {d['reason']}")
        if any(granted_at(g, d, sas) for g in grants):
            # The release grants it: the request came after helm removed the release's RBAC
            # (uninstall deletes bindings while the operator's pod is still stopping).
            notes.append(text + " [granted by the release: its RBAC was already deleted]")
        else:
            problems.append(text)
    for n in notes:
        print("note: " + n)
    if a.denied_only:
        for p in problems:
            print(p)
        return 1 if problems else 0
    if not a.states or not a.justification:
        sys.exit("rbac_usage: --states and --justification are needed unless --denied-only")

    allowed = [d for d in decisions if d["allowed"]]
    used = set()
    for g in grants:
        if any(d["sa"] == g.sa and g.matches(d) for d in allowed):
            used.add((g.role, g.group, g.resource, g.verb))
    unused = {}  # (role, group, resource, verb) → Grant
    for g in grants:
        k = (g.role, g.group, g.resource, g.verb)
        if k not in used:
            unused.setdefault(k, g)

    srules = state_rules(a.states, a.namespace)
    for role, grp, res, verb, names, ns in srules:
        if not any(g.sa.endswith("/gpu-operator") and g.covers(grp, res, verb, names, ns)
                   for g in grants):
            problems.append(f"not held by the operator: {role} (state) grants {verb} on "
                            f"{grp or 'core'}/{res}{' ' + str(names) if names else ''}: a real "
                            "API server refuses to let the operator create or bind that role")

    with open(a.justification, encoding="utf-8") as f:
        just = (yaml.safe_load(f) or {}).get("unused") or []
    justified = set()
    for e in just:
        for verb in e["verbs"]:
            k = (e["role"], e["apiGroup"], e["resource"], verb)
            label = f"{e['role']} {verb} {e['apiGroup'] or 'core'}/{e['resource']}"
            if k in justified:
                problems.append(f"justified twice: {label}")
            justified.add(k)
            if k not in unused:
                problems.append(f"stale justification (used or no longer granted): {label}")
                continue
            if e.get("escalation"):
                g = unused[k]
                need = sorted({r[0] for r in srules if g.covers(r[1], r[2], r[3], r[4], r[5])})
                if not need:
                    problems.append(f"false justification: no state's role needs {label}")
            elif not str(e.get("why", "")).strip():
                problems.append(f"justification without a why: {label}")
    for k in sorted(unused):
        if k not in justified:
            problems.append(f"unused and not justified: {k[0]} {k[3]} {k[1] or 'core'}/{k[2]}")

    print(f"rbac_usage: {len(decisions)} decisions for {', '.join(sorted(sas))}; "
          f"{len(grants)} grants, {len(unused)} unused ({len(justified & set(unused))} justified)")
    for k in sorted(unused):
        print(f"  unused: {k[0]} {k[3]} {k[1] or 'core'}/{k[2]}")
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
