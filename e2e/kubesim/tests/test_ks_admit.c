/* Tests for ks_admit: the defaults clients read back (workloads, pods, services, secrets,
 * namespaces), validation errors worded exactly as the API server words them with their
 * details.causes, update rules (immutable selectors, pod spec, clusterIP), and the Service
 * clusterIP/nodePort allocators. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ks_admit.h"
#include "ks_sim.h"

/* JSON with single quotes for readability: J("{'a':1}"). */
static json_t *J(const char *text)
{
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    cr_assert_not_null(j, "bad test JSON: %s: %s", je.text, s);
    free(s);
    return j;
}

static ks_rtype rtype(const char *group, const char *kind)
{
    ks_rtype t = {.group = group, .version = "v1", .kind = kind, .resource = "x"};
    return t;
}

static kc_code admit(ks_sim *sim, const char *group, const char *kind, const json_t *old,
                     json_t *obj, kc_err *e)
{
    ks_rtype t = rtype(group, kind);
    kc_err_clear(e);
    return ks_admit(sim, &t, old, obj, false, e);
}

/* Admits obj expecting success; returns obj. */
static json_t *ok(const char *group, const char *kind, json_t *obj)
{
    kc_err e;
    cr_assert_eq(admit(NULL, group, kind, NULL, obj, &e), KC_OK, "%s", e.msg);
    return obj;
}

/* Admits obj (freed) expecting a 422 with exactly msg. */
static void invalid(const char *group, const char *kind, const json_t *old, json_t *obj,
                    const char *msg)
{
    kc_err e;
    cr_assert_eq(admit(NULL, group, kind, old, obj, &e), KC_EINVALID, "accepted: want %s", msg);
    cr_assert_str_eq(ks_admit_message(&e), msg);
    /* kc_err.msg holds what fits of it */
    cr_assert_eq(strncmp(e.msg, msg, strlen(e.msg)), 0);
    cr_assert_eq(strlen(e.msg), strlen(msg) < KC_ERR_MSG_MAX ? strlen(msg) : KC_ERR_MSG_MAX - 1);
    cr_assert_eq(e.http_status, 422);
    cr_assert_str_eq(e.reason, "Invalid");
    json_decref(obj);
}

static const char *str_at(const json_t *obj, const char *path)
{
    json_t *cur = (json_t *)obj;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *tok = strtok(buf, "/"); tok && cur; tok = strtok(NULL, "/")) {
        if (json_is_array(cur))
            cur = json_array_get(cur, (size_t)atoi(tok));
        else
            cur = json_object_get(cur, tok);
    }
    return json_string_value(cur);
}

static json_t *at(const json_t *obj, const char *path)
{
    json_t *cur = (json_t *)obj;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *tok = strtok(buf, "/"); tok && cur; tok = strtok(NULL, "/")) {
        if (json_is_array(cur))
            cur = json_array_get(cur, (size_t)atoi(tok));
        else
            cur = json_object_get(cur, tok);
    }
    return cur;
}

#define DEPLOY(sel, labels, containers)                                                            \
    "{'apiVersion':'apps/v1','kind':'Deployment','metadata':{'name':'web','namespace':'default'}," \
    "'spec':{" sel "'template':{'metadata':{'labels':" labels "},'spec':{'containers':" containers \
    "}}}}"

Test(ks_admit, deployment_defaults)
{
    json_t *d =
        ok("apps", "Deployment",
           J(DEPLOY("'selector':{'matchLabels':{'app':'web'}},", "{'app':'web'}",
                    "[{'name':'a','image':'nginx','ports':[{'containerPort':80}]},"
                    "{'name':'b','image':'reg:5000/x:1.25'},{'name':'c','image':'x:latest'},"
                    "{'name':'d','image':'x@sha256:abc'}]")));
    cr_assert_eq(json_integer_value(at(d, "spec/replicas")), 1);
    cr_assert_str_eq(str_at(d, "spec/strategy/type"), "RollingUpdate");
    cr_assert_str_eq(str_at(d, "spec/strategy/rollingUpdate/maxUnavailable"), "25%");
    cr_assert_str_eq(str_at(d, "spec/strategy/rollingUpdate/maxSurge"), "25%");
    cr_assert_eq(json_integer_value(at(d, "spec/revisionHistoryLimit")), 10);
    cr_assert_eq(json_integer_value(at(d, "spec/progressDeadlineSeconds")), 600);
    json_t *ps = at(d, "spec/template/spec");
    cr_assert_str_eq(str_at(ps, "restartPolicy"), "Always");
    cr_assert_eq(json_integer_value(at(ps, "terminationGracePeriodSeconds")), 30);
    cr_assert_str_eq(str_at(ps, "dnsPolicy"), "ClusterFirst");
    cr_assert_str_eq(str_at(ps, "schedulerName"), "default-scheduler");
    cr_assert_null(at(ps, "serviceAccountName"), "templates get no service account default");
    cr_assert_str_eq(str_at(ps, "containers/0/imagePullPolicy"), "Always");
    cr_assert_str_eq(str_at(ps, "containers/1/imagePullPolicy"), "IfNotPresent");
    cr_assert_str_eq(str_at(ps, "containers/2/imagePullPolicy"), "Always");
    cr_assert_str_eq(str_at(ps, "containers/3/imagePullPolicy"), "IfNotPresent");
    cr_assert_str_eq(str_at(ps, "containers/0/terminationMessagePath"), "/dev/termination-log");
    cr_assert_str_eq(str_at(ps, "containers/0/terminationMessagePolicy"), "File");
    cr_assert_str_eq(str_at(ps, "containers/0/ports/0/protocol"), "TCP");
    json_decref(d);

    /* Recreate gets no rollingUpdate; given values are kept. */
    d = ok("apps", "Deployment",
           J("{'metadata':{'name':'r'},'spec':{'replicas':0,'strategy':{'type':'Recreate'},"
             "'selector':{'matchLabels':{'a':'b'}},'template':{'metadata':{'labels':{'a':'b'}},"
             "'spec':{'containers':[{'name':'c','image':'i'}]}}}}"));
    cr_assert_null(at(d, "spec/strategy/rollingUpdate"));
    cr_assert_eq(json_integer_value(at(d, "spec/replicas")), 0);
    json_decref(d);
}

Test(ks_admit, daemonset_replicaset_statefulset_job_defaults)
{
    const char *tmpl = "'template':{'metadata':{'labels':{'a':'b'}},'spec':{'containers':["
                       "{'name':'c','image':'i'}]}}";
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{'metadata':{'name':'ds'},'spec':{'selector':{'matchLabels':{'a':"
             "'b'}},%s}}",
             tmpl);
    json_t *ds = ok("apps", "DaemonSet", J(buf));
    cr_assert_str_eq(str_at(ds, "spec/updateStrategy/type"), "RollingUpdate");
    cr_assert_eq(json_integer_value(at(ds, "spec/updateStrategy/rollingUpdate/maxUnavailable")), 1);
    cr_assert_eq(json_integer_value(at(ds, "spec/updateStrategy/rollingUpdate/maxSurge")), 0);
    cr_assert_eq(json_integer_value(at(ds, "spec/revisionHistoryLimit")), 10);
    json_decref(ds);

    snprintf(buf, sizeof(buf),
             "{'metadata':{'name':'ds'},'spec':{'updateStrategy':{'type':"
             "'OnDelete'},'selector':{'matchLabels':{'a':'b'}},%s}}",
             tmpl);
    ds = ok("apps", "DaemonSet", J(buf));
    cr_assert_str_eq(str_at(ds, "spec/updateStrategy/type"), "OnDelete");
    cr_assert_null(at(ds, "spec/updateStrategy/rollingUpdate"));
    json_decref(ds);

    snprintf(buf, sizeof(buf),
             "{'metadata':{'name':'ds'},'spec':{'updateStrategy':{"
             "'rollingUpdate':{'maxUnavailable':'10%%'}},'selector':{"
             "'matchLabels':{'a':'b'}},%s}}",
             tmpl);
    ds = ok("apps", "DaemonSet", J(buf));
    cr_assert_str_eq(str_at(ds, "spec/updateStrategy/rollingUpdate/maxUnavailable"), "10%");
    cr_assert_eq(json_integer_value(at(ds, "spec/updateStrategy/rollingUpdate/maxSurge")), 0);
    json_decref(ds);

    snprintf(buf, sizeof(buf),
             "{'metadata':{'name':'rs'},'spec':{'selector':{'matchLabels':{'a':"
             "'b'}},%s}}",
             tmpl);
    json_t *rs = ok("apps", "ReplicaSet", J(buf));
    cr_assert_eq(json_integer_value(at(rs, "spec/replicas")), 1);
    json_decref(rs);
    json_t *sts = ok("apps", "StatefulSet", J(buf));
    cr_assert_str_eq(str_at(sts, "spec/podManagementPolicy"), "OrderedReady");
    cr_assert_eq(json_integer_value(at(sts, "spec/updateStrategy/rollingUpdate/partition")), 0);
    cr_assert_str_eq(str_at(sts, "spec/persistentVolumeClaimRetentionPolicy/whenDeleted"),
                     "Retain");
    json_decref(sts);

    json_t *job = ok("batch", "Job",
                     J("{'metadata':{'name':'j','uid':'u-1'},'spec':{'template':{'spec':{"
                       "'restartPolicy':'Never','containers':[{'name':'c','image':'i'}]}}}}"));
    cr_assert_eq(json_integer_value(at(job, "spec/completions")), 1);
    cr_assert_eq(json_integer_value(at(job, "spec/parallelism")), 1);
    cr_assert_eq(json_integer_value(at(job, "spec/backoffLimit")), 6);
    json_t *ml = at(job, "spec/selector/matchLabels");
    cr_assert_str_eq(json_string_value(json_object_get(ml, "batch.kubernetes.io/controller-uid")),
                     "u-1");
    json_t *tl = at(job, "spec/template/metadata/labels");
    cr_assert_str_eq(json_string_value(json_object_get(tl, "job-name")), "j");
    json_decref(job);

    /* A Job template without restartPolicy is defaulted to Always, which Jobs reject. */
    invalid("batch", "Job", NULL,
            J("{'metadata':{'name':'j','uid':'u'},'spec':{'template':{'spec':{'containers':[{"
              "'name':'c','image':'i'}]}}}}"),
            "Job.batch \"j\" is invalid: spec.template.spec.restartPolicy: Required value: valid "
            "values: \"OnFailure\", \"Never\"");
}

/* EnvVar.value is omitempty on the real server: `value: ""` is not stored, other values are. */
Test(ks_admit, empty_env_value_is_not_stored)
{
    json_t *ds = ok("apps", "DaemonSet",
                    J("{'metadata':{'name':'ds'},'spec':{'selector':{'matchLabels':{'a':'b'}},"
                      "'template':{'metadata':{'labels':{'a':'b'}},'spec':{'containers':[{"
                      "'name':'c','image':'i','env':[{'name':'E','value':''},"
                      "{'name':'F','value':'x'}]}]}}}}"));
    json_t *env = at(ds, "spec/template/spec/containers/0/env");
    cr_assert_eq(json_array_size(env), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(env, 0), "name")), "E");
    cr_assert_null(json_object_get(json_array_get(env, 0), "value"));
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(env, 1), "value")), "x");
    json_decref(ds);
}

Test(ks_admit, pod_defaults)
{
    json_t *p = ok("", "Pod",
                   J("{'metadata':{'name':'p','namespace':'d','uid':'abc'},'spec':{'containers':[{"
                     "'name':'c','image':'busybox:1.36','resources':{'limits':{'cpu':'1',"
                     "'memory':'1Gi'}},'readinessProbe':{'httpGet':{'port':8080}},'env':[{"
                     "'name':'N','valueFrom':{'fieldRef':{'fieldPath':'spec.nodeName'}}}]}],"
                     "'volumes':[{'name':'cfg','configMap':{'name':'x'}}]}}"));
    json_t *s = at(p, "spec");
    cr_assert_str_eq(str_at(s, "serviceAccountName"), "default");
    cr_assert_str_eq(str_at(s, "serviceAccount"), "default");
    cr_assert_eq(json_integer_value(at(s, "priority")), 0);
    cr_assert_str_eq(str_at(p, "status/phase"), "Pending");
    cr_assert_str_eq(str_at(p, "status/qosClass"), "Guaranteed");
    cr_assert_str_eq(str_at(s, "containers/0/resources/requests/cpu"), "1");
    cr_assert_eq(json_integer_value(at(s, "containers/0/readinessProbe/periodSeconds")), 10);
    cr_assert_str_eq(str_at(s, "containers/0/readinessProbe/httpGet/scheme"), "HTTP");
    cr_assert_str_eq(str_at(s, "containers/0/env/0/valueFrom/fieldRef/apiVersion"), "v1");
    cr_assert_eq(json_integer_value(at(s, "volumes/0/configMap/defaultMode")), 420);
    /* the service-account token volume and its mount */
    const char *vname = str_at(s, "volumes/1/name");
    cr_assert(vname && strncmp(vname, "kube-api-access-", 16) == 0 && strlen(vname) == 21);
    cr_assert_str_eq(str_at(s, "containers/0/volumeMounts/0/mountPath"),
                     "/var/run/secrets/kubernetes.io/serviceaccount");
    cr_assert_str_eq(str_at(s, "containers/0/volumeMounts/0/name"), vname);
    cr_assert_str_eq(str_at(s, "tolerations/0/key"), "node.kubernetes.io/not-ready");
    cr_assert_eq(json_integer_value(at(s, "tolerations/1/tolerationSeconds")), 300);
    json_decref(p);

    /* No automount, an own not-ready toleration, no resources: BestEffort. */
    p = ok("", "Pod",
           J("{'metadata':{'name':'p'},'spec':{'automountServiceAccountToken':false,"
             "'tolerations':[{'key':'node.kubernetes.io/not-ready','operator':'Exists'}],"
             "'containers':[{'name':'c','image':'i'}]}}"));
    cr_assert_null(at(p, "spec/volumes"));
    cr_assert_eq(json_array_size(at(p, "spec/tolerations")), 2);
    cr_assert_str_eq(str_at(p, "status/qosClass"), "BestEffort");
    json_decref(p);
}

Test(ks_admit, pod_validation_messages_and_causes)
{
    kc_err e;
    json_t *p = J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'c'}]}}");
    cr_assert_eq(admit(NULL, "", "Pod", NULL, p, &e), KC_EINVALID);
    cr_assert_str_eq(e.msg, "Pod \"p\" is invalid: spec.containers[0].image: Required value");
    json_t *causes = ks_admit_causes(&e);
    cr_assert_not_null(causes);
    json_t *want = J("[{'reason':'FieldValueRequired','message':'Required value',"
                     "'field':'spec.containers[0].image'}]");
    cr_assert(json_equal(causes, want));
    json_decref(want);
    json_decref(causes);
    json_decref(p);
    /* Another error record (not admission's) gets no causes. */
    kc_err other = {.code = KC_EINVALID};
    snprintf(other.msg, sizeof(other.msg), "something else");
    cr_assert_null(ks_admit_causes(&other));
    cr_assert_null(ks_admit_causes(NULL));
    cr_assert_str_eq(ks_admit_message(&other), "something else");
    cr_assert_str_eq(ks_admit_message(NULL), "");

    invalid("", "Pod", NULL, J("{'metadata':{'name':'p'},'spec':{}}"),
            "Pod \"p\" is invalid: spec.containers: Required value");
    invalid("", "Pod", NULL,
            J("{'metadata':{'name':'p'},'spec':{'restartPolicy':'Sometimes','containers':[{"
              "'name':'c','image':'i','ports':[{'containerPort':70000,'protocol':'tcp'}]},{"
              "'name':'c','image':'i','volumeMounts':[{'name':'nope','mountPath':'/x'}]}]}}"),
            "Pod \"p\" is invalid: [spec.containers[0].ports[0].containerPort: Invalid value: "
            "70000: must be between 1 and 65535, inclusive, spec.containers[0].ports[0].protocol: "
            "Unsupported value: \"tcp\": supported values: \"SCTP\", \"TCP\", \"UDP\", "
            "spec.containers[1].name: Duplicate value: \"c\", "
            "spec.containers[1].volumeMounts[0].name: Not found: \"nope\", spec.restartPolicy: "
            "Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", "
            "\"Never\"]");
    invalid("", "Pod", NULL,
            J("{'metadata':{'name':'Bad_Name'},'spec':{'containers':[{'name':'c','image':'i'}]}}"),
            "Pod \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase "
            "RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'example.com', regex "
            "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9]"
            ")?)*')");
}

Test(ks_admit, pod_updates)
{
    kc_err e;
    json_t *old = ok("", "Pod",
                     J("{'metadata':{'name':'p','uid':'u'},'spec':{'containers':[{'name':'c',"
                       "'image':'i:1'}]}}"));
    /* image, nodeName of an unbound pod and tolerations may change */
    json_t *upd = json_deep_copy(old);
    json_object_set_new(json_array_get(at(upd, "spec/containers"), 0), "image", json_string("i:2"));
    json_object_set_new(at(upd, "spec"), "nodeName", json_string("n1"));
    cr_assert_eq(admit(NULL, "", "Pod", old, upd, &e), KC_OK, "%s", e.msg);
    /* a bound pod cannot move, and the command cannot change */
    json_t *moved = json_deep_copy(upd);
    json_object_set_new(at(moved, "spec"), "nodeName", json_string("n2"));
    invalid("", "Pod", upd, moved,
            "Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than "
            "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec."
            "activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
            "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
            "negative)");
    json_t *cmd = json_deep_copy(upd);
    json_object_set_new(json_array_get(at(cmd, "spec/containers"), 0), "command", J("[\"sh\"]"));
    cr_assert_eq(admit(NULL, "", "Pod", upd, cmd, &e), KC_EINVALID);
    json_decref(cmd);
    /* status writes are not admission's business for built-ins */
    ks_rtype t = rtype("", "Pod");
    json_t *bad = J("{'metadata':{'name':'p'},'spec':{}}");
    cr_assert_eq(ks_admit(NULL, &t, old, bad, true, &e), KC_OK);
    json_decref(bad);
    json_decref(upd);
    json_decref(old);
}

Test(ks_admit, workload_selectors)
{
    invalid("apps", "Deployment", NULL,
            J(DEPLOY("", "{'app':'web'}", "[{'name':'c','image':'i'}]")),
            "Deployment.apps \"web\" is invalid: [spec.selector: Required value, "
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: "
            "`selector` does not match template `labels`]");
    invalid("apps", "Deployment", NULL,
            J(DEPLOY("'selector':{'matchLabels':{'app':'x'}},", "{'app':'web','tier':'a'}",
                     "[{'name':'c','image':'i'}]")),
            "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: "
            "map[string]string{\"app\":\"web\", \"tier\":\"a\"}: `selector` does not match "
            "template `labels`");
    invalid("apps", "Deployment", NULL,
            J(DEPLOY("'selector':{},", "{'app':'web'}", "[{'name':'c','image':'i'}]")),
            "Deployment.apps \"web\" is invalid: spec.selector: Invalid value: "
            "v1.LabelSelector{MatchLabels:map[string]string(nil), "
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for "
            "deployment");
    /* set-based selectors match too */
    json_t *d = ok("apps", "Deployment",
                   J(DEPLOY("'selector':{'matchExpressions':[{'key':'app','operator':'In',"
                            "'values':['web','api']}]},",
                            "{'app':'web'}", "[{'name':'c','image':'i'}]")));
    /* the selector is immutable */
    json_t *upd = json_deep_copy(d);
    json_object_set_new(at(upd, "spec"), "selector", J("{'matchLabels':{'app':'web'}}"));
    invalid("apps", "Deployment", d, upd,
            "Deployment.apps \"web\" is invalid: spec.selector: Invalid value: "
            "v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\"}, "
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable");
    /* ... but an explicit empty list equals an absent one */
    json_t *same = json_deep_copy(d);
    json_object_set_new(at(same, "spec/selector"), "matchLabels", json_object());
    kc_err e;
    cr_assert_eq(admit(NULL, "apps", "Deployment", d, same, &e), KC_OK, "%s", e.msg);
    json_decref(same);
    json_decref(d);

    invalid("apps", "DaemonSet", NULL,
            J("{'metadata':{'name':'ds'},'spec':{'template':{'metadata':{'labels':{'a':'b'}},"
              "'spec':{'restartPolicy':'Never','containers':[{'name':'c','image':'i'}]}}}}"),
            "DaemonSet.apps \"ds\" is invalid: [spec.template.metadata.labels: Invalid value: "
            "map[string]string{\"a\":\"b\"}: `selector` does not match template `labels`, "
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: "
            "\"Always\"]");
}

Test(ks_admit, rolling_update_parameters)
{
    invalid("apps", "DaemonSet", NULL,
            J("{'metadata':{'name':'ds'},'spec':{'updateStrategy':{'rollingUpdate':{"
              "'maxUnavailable':0}},'selector':{'matchLabels':{'a':'b'}},'template':{'metadata':{"
              "'labels':{'a':'b'}},'spec':{'containers':[{'name':'c','image':'i'}]}}}}"),
            "DaemonSet.apps \"ds\" is invalid: spec.updateStrategy.rollingUpdate.maxUnavailable: "
            "Required value: cannot be 0 when maxSurge is 0");
    invalid("apps", "DaemonSet", NULL,
            J("{'metadata':{'name':'ds'},'spec':{'updateStrategy':{'type':'Sometimes'},"
              "'selector':{'matchLabels':{'a':'b'}},'template':{'metadata':{'labels':{'a':'b'}},"
              "'spec':{'containers':[{'name':'c','image':'i'}]}}}}"),
            "DaemonSet.apps \"ds\" is invalid: spec.updateStrategy: Unsupported value: "
            "apps.DaemonSetUpdateStrategy{Type:\"Sometimes\", "
            "RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: "
            "\"RollingUpdate\", \"OnDelete\"");
    invalid("apps", "Deployment", NULL,
            J("{'metadata':{'name':'web'},'spec':{'strategy':{'rollingUpdate':{'maxUnavailable':"
              "'110%','maxSurge':'x'}},'selector':{'matchLabels':{'a':'b'}},'template':{"
              "'metadata':{'labels':{'a':'b'}},'spec':{'containers':[{'name':'c','image':'i'}]}}}"
              "}"),
            "Deployment.apps \"web\" is invalid: [spec.strategy.rollingUpdate.maxUnavailable: "
            "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"110%\"}: must not be "
            "greater than 100%, spec.strategy.rollingUpdate.maxSurge: Invalid value: "
            "intstr.IntOrString{Type:1, IntVal:0, StrVal:\"x\"}: must be an integer or percentage "
            "(e.g '5%')]");
}

Test(ks_admit, metadata_rules)
{
    invalid("", "Namespace", NULL, J("{'metadata':{'name':'a.b'}}"),
            "Namespace \"a.b\" is invalid: metadata.name: Invalid value: \"a.b\": must not "
            "contain dots");
    invalid("", "Service", NULL, J("{'metadata':{'name':'1svc'},'spec':{'ports':[{'port':80}]}}"),
            "Service \"1svc\" is invalid: metadata.name: Invalid value: \"1svc\": a DNS-1035 "
            "label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
            "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')");
    json_t *r = ok("rbac.authorization.k8s.io", "ClusterRole",
                   J("{'metadata':{'name':'system:controller:x'},'rules':[{'verbs':['get'],"
                     "'resources':['pods'],'apiGroups':['']}]}"));
    json_decref(r);
    invalid("rbac.authorization.k8s.io", "Role", NULL,
            J("{'metadata':{'name':'a/b'},'rules':[{'resources':['pods']}]}"),
            "Role.rbac.authorization.k8s.io \"a/b\" is invalid: [metadata.name: Invalid value: "
            "\"a/b\": may not contain '/', rules[0].verbs: Required value: verbs must contain at "
            "least one value]");
    invalid("", "ConfigMap", NULL, J("{'metadata':{'name':'c','labels':{'bad key':'v','k':'-x'}}}"),
            "ConfigMap \"c\" is invalid: [metadata.labels: Invalid value: \"bad key\": name part "
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
            "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), "
            "metadata.labels: Invalid value: \"-x\": a valid label must be an empty string or "
            "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
            "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]");
    invalid("", "ConfigMap", NULL,
            J("{'metadata':{'name':'c','finalizers':['a/b/c'],'ownerReferences':[{'apiVersion':"
              "'v1','kind':'X','name':'n'}]}}"),
            "ConfigMap \"c\" is invalid: [metadata.ownerReferences.uid: Invalid value: \"\": uid "
            "must not be empty, metadata.finalizers: Invalid value: \"a/b/c\": a qualified name "
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
            "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional "
            "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')]");
    /* a generateName may end in '-'; a missing name is required */
    json_t *g = ok("", "ConfigMap", J("{'metadata':{'name':'web-x7k2p','generateName':'web-'}}"));
    json_decref(g);
    invalid("", "ConfigMap", NULL, J("{'metadata':{}}"),
            "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is "
            "required");
    /* annotations: 256 KiB in all */
    json_t *big = J("{'metadata':{'name':'c','annotations':{}}}");
    char *val = malloc(300 * 1024);
    memset(val, 'x', 300 * 1024 - 1);
    val[300 * 1024 - 1] = '\0';
    json_object_set_new(at(big, "metadata/annotations"), "a", json_string(val));
    free(val);
    invalid("", "ConfigMap", NULL, big,
            "ConfigMap \"c\" is invalid: metadata.annotations: Too long: may not be more than "
            "262144 bytes");
}

Test(ks_admit, services_and_allocation)
{
    ks_sim sim = {0};
    kc_err e;
    json_t *a =
        J("{'metadata':{'name':'a'},'spec':{'selector':{'app':'a'},'ports':[{'port':80}]}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, a, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(str_at(a, "spec/clusterIP"), "10.96.1.1");
    cr_assert_str_eq(str_at(a, "spec/clusterIPs/0"), "10.96.1.1");
    cr_assert_str_eq(str_at(a, "spec/type"), "ClusterIP");
    cr_assert_str_eq(str_at(a, "spec/sessionAffinity"), "None");
    cr_assert_str_eq(str_at(a, "spec/ports/0/protocol"), "TCP");
    cr_assert_eq(json_integer_value(at(a, "spec/ports/0/targetPort")), 80);
    cr_assert_str_eq(str_at(a, "spec/ipFamilies/0"), "IPv4");
    cr_assert_str_eq(str_at(a, "spec/internalTrafficPolicy"), "Cluster");
    cr_assert(json_is_object(at(a, "status/loadBalancer")));

    json_t *b = J("{'metadata':{'name':'b'},'spec':{'ports':[{'port':80,'targetPort':'http'}]}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, b, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(str_at(b, "spec/clusterIP"), "10.96.1.2");
    cr_assert_str_eq(str_at(b, "spec/ports/0/targetPort"), "http");

    /* explicit addresses: kept, and never handed out twice */
    json_t *k = J("{'metadata':{'name':'kubernetes'},'spec':{'clusterIP':'10.96.0.1','ports':[{"
                  "'name':'https','port':443,'targetPort':6443}]}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, k, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(str_at(k, "spec/clusterIPs/0"), "10.96.0.1");
    json_t *dup =
        J("{'metadata':{'name':'d'},'spec':{'clusterIP':'10.96.0.1','ports':[{'port':1}]}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, dup, &e), KC_EINVALID);
    cr_assert_str_eq(e.msg, "Service \"d\" is invalid: spec.clusterIPs: Invalid value: "
                            "[]string{\"10.96.0.1\"}: failed to allocate IP 10.96.0.1: provided "
                            "IP is already allocated");
    json_decref(dup);
    dup = J("{'metadata':{'name':'d'},'spec':{'clusterIP':'192.168.0.1','ports':[{'port':1}]}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, dup, &e), KC_EINVALID);
    cr_assert(strstr(e.msg, "is not in the valid range. The range of valid IPs is 10.96.0.0/12"));
    json_decref(dup);
    json_t *h = J("{'metadata':{'name':'h'},'spec':{'clusterIP':'None'}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, h, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(str_at(h, "spec/clusterIPs/0"), "None");
    json_t *x = J("{'metadata':{'name':'x'},'spec':{'type':'ExternalName','externalName':'a.b'}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, x, &e), KC_OK, "%s", e.msg);
    cr_assert_null(at(x, "spec/clusterIP"));

    /* updates keep the address when the client leaves it out, and refuse a new one */
    json_t *upd =
        J("{'metadata':{'name':'a'},'spec':{'selector':{'app':'b'},'ports':[{'port':81}]}}");
    cr_assert_eq(admit(&sim, "", "Service", a, upd, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(str_at(upd, "spec/clusterIP"), "10.96.1.1");
    json_t *chg = J("{'metadata':{'name':'a'},'spec':{'clusterIP':'10.96.0.9','clusterIPs':["
                    "'10.96.0.9'],'ports':[{'port':81}]}}");
    cr_assert_eq(admit(&sim, "", "Service", a, chg, &e), KC_EINVALID);
    cr_assert_str_eq(e.msg, "Service \"a\" is invalid: spec.clusterIPs[0]: Invalid value: "
                            "[]string{\"10.96.0.9\"}: may not change once set");
    json_decref(chg);

    /* node ports */
    json_t *np = J("{'metadata':{'name':'np'},'spec':{'type':'NodePort','ports':[{'name':'a',"
                   "'port':80},{'name':'b','port':81,'nodePort':30001}]}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, np, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(json_integer_value(at(np, "spec/ports/0/nodePort")), 30000);
    cr_assert_eq(json_integer_value(at(np, "spec/ports/1/nodePort")), 30001);
    cr_assert_str_eq(str_at(np, "spec/externalTrafficPolicy"), "Cluster");
    json_t *np2 = J("{'metadata':{'name':'np2'},'spec':{'type':'NodePort','ports':[{'port':80,"
                    "'nodePort':30001}]}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, np2, &e), KC_EINVALID);
    cr_assert_str_eq(e.msg, "Service \"np2\" is invalid: spec.ports[0].nodePort: Invalid value: "
                            "30001: provided port is already allocated");
    /* after the first Service is released its addresses are free again */
    ks_admit_release_service(&sim, np);
    json_decref(np2);
    np2 = J("{'metadata':{'name':'np2'},'spec':{'type':'NodePort','ports':[{'port':80,"
            "'nodePort':30001}]}}");
    cr_assert_eq(admit(&sim, "", "Service", NULL, np2, &e), KC_OK, "%s", e.msg);

    invalid("", "Service", NULL,
            J("{'metadata':{'name':'v'},'spec':{'type':'Magic','ports':[{'port':80},{'port':0}]}}"),
            "Service \"v\" is invalid: [spec.type: Unsupported value: \"Magic\": supported "
            "values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\", "
            "spec.ports[0].name: Required value, spec.ports[1].name: Required value, "
            "spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive]");
    invalid("", "Service", NULL, J("{'metadata':{'name':'v'},'spec':{}}"),
            "Service \"v\" is invalid: spec.ports: Required value");
    json_t *objs[] = {a, b, k, h, x, upd, np, np2};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
        json_decref(objs[i]);
    ks_admit_free(&sim);
    cr_assert_null(sim.admit);
}

Test(ks_admit, secrets_and_configmaps)
{
    kc_err e;
    json_t *s = ok("", "Secret",
                   J("{'metadata':{'name':'s'},'data':{'a':'eA=='},'stringData':{'b':'hello',"
                     "'a':'y'}}"));
    cr_assert_str_eq(str_at(s, "type"), "Opaque");
    cr_assert_str_eq(str_at(s, "data/a"), "eQ==");
    cr_assert_str_eq(str_at(s, "data/b"), "aGVsbG8=");
    cr_assert_null(at(s, "stringData"));
    /* type and (when immutable) data cannot change */
    json_t *s2 = J("{'metadata':{'name':'s'},'type':'Other','data':{'a':'eQ=='}}");
    invalid("", "Secret", s, s2,
            "Secret \"s\" is invalid: type: Invalid value: \"Other\": field is immutable");
    json_object_set_new(s, "immutable", json_true());
    s2 = J("{'metadata':{'name':'s'},'type':'Opaque','immutable':true,'data':{'a':'eA=='}}");
    invalid("", "Secret", s, s2,
            "Secret \"s\" is invalid: data: Forbidden: field is immutable when `immutable` is "
            "set");
    json_decref(s);
    invalid("", "Secret", NULL,
            J("{'metadata':{'name':'t'},'type':'kubernetes.io/tls','data':{'bad/key':''}}"),
            "Secret \"t\" is invalid: [data[bad/key]: Invalid value: \"bad/key\": a valid config "
            "key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
            "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+'), "
            "data[tls.crt]: Required value, data[tls.key]: Required value]");
    json_t *bad = J("{'metadata':{'name':'s'},'data':{'a':'not base64!'}}");
    cr_assert_eq(admit(NULL, "", "Secret", NULL, bad, &e), KC_EBADREQUEST);
    cr_assert(strstr(e.msg, "illegal base64 data"), "%s", e.msg);
    json_decref(bad);

    invalid("", "ConfigMap", NULL,
            J("{'metadata':{'name':'c'},'data':{'x':'1','..y':'2'},'binaryData':{'x':'AA=='}}"),
            "ConfigMap \"c\" is invalid: [data[x]: Invalid value: \"x\": duplicate of key present "
            "in binaryData, data[..y]: Invalid value: \"..y\": must not start with '..', "
            "binaryData[x]: Invalid value: \"x\": duplicate of key present in data]");
    json_t *c =
        ok("", "ConfigMap", J("{'metadata':{'name':'c'},'immutable':true,'data':{'a':'1'}}"));
    json_t *c2 = J("{'metadata':{'name':'c'},'data':{'a':'1'}}");
    invalid("", "ConfigMap", c, c2,
            "ConfigMap \"c\" is invalid: immutable: Forbidden: field is immutable when "
            "`immutable` is set");
    json_decref(c);
}

Test(ks_admit, namespaces_rbac_priorityclasses)
{
    kc_err e;
    json_t *ns = ok("", "Namespace", J("{'metadata':{'name':'team'}}"));
    cr_assert_str_eq(json_string_value(
                         json_object_get(at(ns, "metadata/labels"), "kubernetes.io/metadata.name")),
                     "team");
    cr_assert_str_eq(str_at(ns, "status/phase"), "Active");
    cr_assert_str_eq(str_at(ns, "spec/finalizers/0"), "kubernetes");
    /* the namespace controller empties spec.finalizers: an update must not put it back */
    json_t *upd = json_deep_copy(ns);
    json_object_set_new(at(upd, "spec"), "finalizers", json_array());
    cr_assert_eq(admit(NULL, "", "Namespace", ns, upd, &e), KC_OK);
    cr_assert_eq(json_array_size(at(upd, "spec/finalizers")), 0);
    json_decref(upd);
    json_decref(ns);

    json_t *rb = ok("rbac.authorization.k8s.io", "RoleBinding",
                    J("{'metadata':{'name':'rb'},'roleRef':{'apiGroup':"
                      "'rbac.authorization.k8s.io','kind':'Role','name':'r'},'subjects':[{"
                      "'kind':'ServiceAccount','name':'sa','namespace':'d'}]}"));
    json_t *rb2 = json_deep_copy(rb);
    json_object_set_new(at(rb2, "roleRef"), "name", json_string("other"));
    invalid("rbac.authorization.k8s.io", "RoleBinding", rb, rb2,
            "RoleBinding.rbac.authorization.k8s.io \"rb\" is invalid: roleRef: Invalid value: "
            "rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", "
            "Name:\"other\"}: cannot change roleRef");
    json_decref(rb);
    invalid("rbac.authorization.k8s.io", "ClusterRoleBinding", NULL,
            J("{'metadata':{'name':'crb'},'roleRef':{'kind':'Role','name':'r'},'subjects':[{"
              "'kind':'ServiceAccount','name':'sa'}]}"),
            "ClusterRoleBinding.rbac.authorization.k8s.io \"crb\" is invalid: [roleRef.kind: "
            "Unsupported value: \"Role\": supported values: \"ClusterRole\", "
            "subjects[0].namespace: Required value]");
    json_t *pc =
        ok("scheduling.k8s.io", "PriorityClass", J("{'metadata':{'name':'high'},'value':1000}"));
    cr_assert_str_eq(str_at(pc, "preemptionPolicy"), "PreemptLowerPriority");
    json_decref(pc);
}

Test(ks_admit, go_rendering)
{
    struct {
        const char *json, *want;
    } cases[] = {
        {"1.5", "1.5"},
        {"1000000.0", "1e+06"},
        {"123456.0", "123456"},
        {"0.0001", "0.0001"},
        {"0.00001", "1e-05"},
        {"-2.5e-7", "-2.5e-07"},
        {"42", "42"},
        {"true", "true"},
        {"null", "null"},
        {"\"a\\\"b\\n\\u0001\\u00e9\"", "\"a\\\"b\\n\\x01\u00e9\""},
        {"{\"b\":[1,\"x\",null],\"a\":{\"c\":false}}",
         "map[string]interface {}{\"a\":map[string]interface {}{\"c\":false}, \"b\":[]interface "
         "{}{1, \"x\", interface {}(nil)}}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *v = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);
        cr_assert_not_null(v, "%s", cases[i].json);
        char *s = ks_go_value(v);
        cr_assert_str_eq(s, cases[i].want);
        free(s);
        json_decref(v);
    }
    char *s = ks_go_string_slice(NULL);
    cr_assert_str_eq(s, "[]string(nil)");
    free(s);
    json_t *sel = J("{'matchExpressions':[{'key':'k','operator':'In','values':['a']}]}");
    s = ks_go_label_selector(sel);
    cr_assert_str_eq(s,
                     "v1.LabelSelector{MatchLabels:map[string]string(nil), "
                     "MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{"
                     "Key:\"k\", Operator:\"In\", Values:[]string{\"a\"}}}}");
    free(s);
    json_decref(sel);
}

#define QNAME_MSG                                                                                  \
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "  \
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for " \
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"

/* A resource name with a '+' (a MIG profile such as 1g.5gb+me, unconverted) is not a qualified
 * name: refused in a Node's status, whose writes come through the status subresource, and in a
 * container's limits, as the API server's validateResourceName refuses it. */
Test(ks_admit, resource_names)
{
    ks_rtype t = rtype("", "Node");
    kc_err e;
    json_t *node = J("{'metadata':{'name':'n1'},'status':{'capacity':{'cpu':'8',"
                     "'nvidia.com/mig-1g.5gb+me':'8','nvidia.com/mig-1g.5gb.me':'8'},"
                     "'allocatable':{'nvidia.com/mig-1g.5gb.me':'8'}}}");
    kc_err_clear(&e);
    cr_assert_eq(ks_admit(NULL, &t, node, node, true, &e), KC_EINVALID);
    cr_assert_str_eq(ks_admit_message(&e),
                     "Node \"n1\" is invalid: status.capacity[nvidia.com/mig-1g.5gb+me]: Invalid "
                     "value: \"nvidia.com/mig-1g.5gb+me\": " QNAME_MSG);
    cr_assert_eq(e.http_status, 422);
    json_object_del(json_object_get(json_object_get(node, "status"), "capacity"),
                    "nvidia.com/mig-1g.5gb+me");
    kc_err_clear(&e);
    cr_assert_eq(ks_admit(NULL, &t, node, node, true, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(admit(NULL, "", "Node", NULL, node, &e), KC_OK, "%s", e.msg);
    json_decref(node);
    invalid("", "Pod", NULL,
            J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'c','image':'i',"
              "'resources':{'limits':{'nvidia.com/mig-1g.5gb+me':'1'}}}]}}"),
            "Pod \"p\" is invalid: [spec.containers[0].resources.limits[nvidia.com/mig-1g.5gb+me]: "
            "Invalid value: \"nvidia.com/mig-1g.5gb+me\": " QNAME_MSG
            ", spec.containers[0].resources.limits[nvidia.com/mig-1g.5gb+me]: Invalid value: "
            "\"nvidia.com/mig-1g.5gb+me\": doesn't follow extended resource name standard, "
            /* requests default to the limits before validation */
            "spec.containers[0].resources.requests[nvidia.com/mig-1g.5gb+me]: Invalid value: "
            "\"nvidia.com/mig-1g.5gb+me\": " QNAME_MSG
            ", spec.containers[0].resources.requests[nvidia.com/mig-1g.5gb+me]: Invalid value: "
            "\"nvidia.com/mig-1g.5gb+me\": doesn't follow extended resource name standard]");
    json_decref(ok("", "Pod",
                   J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'c','image':'i',"
                     "'resources':{'limits':{'nvidia.com/mig-1g.5gb.me':'1'}}}]}}")));
}
