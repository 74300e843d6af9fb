/* Tests for kc_smp: merge keys of the core kinds, directives, replaced lists, custom resources. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kc_patch.h"

static json_t *J(const char *text)
{
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t e;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &e);
    cr_assert_not_null(v, "bad test JSON %s: %s", text, e.text);
    free(s);
    return v;
}

/* Applies patch to orig for kind and compares with want (all JSON with single quotes). */
static void smp(const char *kind, const char *orig, const char *patch, const char *want)
{
    json_t *o = J(orig), *p = J(patch), *w = J(want), *before = json_deep_copy(o), *out = NULL;
    kc_err e = {0};
    kc_err_clear(&e);
    kc_code rc = kc_smp_apply(o, p, kind, &out, &e);
    cr_assert_eq(rc, KC_OK, "patch %s failed: %s", patch, e.msg);
    char *g = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    cr_assert(json_equal(out, w), "%s: got %s\nwant %s", kind ? kind : "(null)", g, want);
    cr_assert(json_equal(o, before), "original modified");
    free(g);
    json_decref(out);
    json_decref(before);
    json_decref(o);
    json_decref(p);
    json_decref(w);
}

static void smp_fails(const char *kind, const char *orig, const char *patch, kc_code code,
                      const char *msg)
{
    json_t *o = J(orig), *p = J(patch), *out = (json_t *)0x1;
    kc_err e = {0};
    kc_err_clear(&e);
    kc_code rc = kc_smp_apply(o, p, kind, &out, &e);
    cr_assert_eq(rc, code, "rc %d (%s)", rc, e.msg);
    cr_assert_null(out);
    cr_assert(strstr(e.msg, msg), "message \"%s\" lacks \"%s\"", e.msg, msg);
    json_decref(o);
    json_decref(p);
}

#define POD2                                                                                       \
    "{'metadata':{'name':'p'},'spec':{'containers':["                                              \
    "{'name':'a','image':'a:1','env':[{'name':'X','value':'1'},{'name':'Y','value':'2'}],"         \
    "'volumeMounts':[{'name':'v','mountPath':'/v'}]},"                                             \
    "{'name':'b','image':'b:1'}]}}"

Test(smp, container_image_change_keeps_other_containers)
{
    smp("Pod", POD2, "{'spec':{'containers':[{'name':'b','image':'b:2'}]}}",
        "{'metadata':{'name':'p'},'spec':{'containers':["
        "{'name':'a','image':'a:1','env':[{'name':'X','value':'1'},{'name':'Y','value':'2'}],"
        "'volumeMounts':[{'name':'v','mountPath':'/v'}]},"
        "{'name':'b','image':'b:2'}]}}");
    /* A new container is appended. */
    smp("Pod", "{'spec':{'containers':[{'name':'a'}]}}",
        "{'spec':{'containers':[{'name':'c','image':'c'}]}}",
        "{'spec':{'containers':[{'name':'a'},{'name':'c','image':'c'}]}}");
}

Test(smp, env_by_name)
{
    smp("Pod", POD2,
        "{'spec':{'containers':[{'name':'a','env':[{'name':'Y','value':'20'},{'name':'Z',"
        "'value':'3'},{'name':'X','$patch':'delete'}]}]}}",
        "{'metadata':{'name':'p'},'spec':{'containers':["
        "{'name':'a','image':'a:1','env':[{'name':'Y','value':'20'},{'name':'Z','value':'3'}],"
        "'volumeMounts':[{'name':'v','mountPath':'/v'}]},"
        "{'name':'b','image':'b:1'}]}}");
    /* null inside an element deletes that field only. */
    smp("Pod", "{'spec':{'containers':[{'name':'a','env':[{'name':'X','value':'1'}]}]}}",
        "{'spec':{'containers':[{'name':'a','env':[{'name':'X','value':null,"
        "'valueFrom':{'fieldRef':{'fieldPath':'spec.nodeName'}}}]}]}}",
        "{'spec':{'containers':[{'name':'a','env':[{'name':'X',"
        "'valueFrom':{'fieldRef':{'fieldPath':'spec.nodeName'}}}]}]}}");
}

Test(smp, workload_template_volume_mounts_by_mount_path)
{
    const char *ds = "{'kind':'DaemonSet','spec':{'template':{'spec':{'containers':[{'name':'c',"
                     "'volumeMounts':[{'name':'a','mountPath':'/a'},{'name':'b','mountPath':'/b',"
                     "'readOnly':true}]}],'volumes':[{'name':'a','hostPath':{'path':'/a'}}]}}}}";
    smp("DaemonSet", ds,
        "{'spec':{'template':{'spec':{'containers':[{'name':'c','volumeMounts':["
        "{'name':'b2','mountPath':'/b'},{'name':'d','mountPath':'/d'}]}],"
        "'volumes':[{'name':'d','emptyDir':{}}]}}}}",
        "{'kind':'DaemonSet','spec':{'template':{'spec':{'containers':[{'name':'c',"
        "'volumeMounts':[{'name':'a','mountPath':'/a'},{'name':'b2','mountPath':'/b',"
        "'readOnly':true},{'name':'d','mountPath':'/d'}]}],"
        "'volumes':[{'name':'a','hostPath':{'path':'/a'}},{'name':'d','emptyDir':{}}]}}}}");
    /* A Deployment's ports merge by containerPort, and Services' by port. */
    smp("Deployment",
        "{'spec':{'template':{'spec':{'containers':[{'name':'c','ports':[{'containerPort':80,"
        "'name':'http'}]}]}}}}",
        "{'spec':{'template':{'spec':{'containers':[{'name':'c','ports':[{'containerPort':80,"
        "'protocol':'TCP'},{'containerPort':443}]}]}}}}",
        "{'spec':{'template':{'spec':{'containers':[{'name':'c','ports':[{'containerPort':80,"
        "'name':'http','protocol':'TCP'},{'containerPort':443}]}]}}}}");
    smp("Service", "{'spec':{'ports':[{'port':80,'targetPort':8080},{'port':9090}]}}",
        "{'spec':{'ports':[{'port':80,'targetPort':8081}]}}",
        "{'spec':{'ports':[{'port':80,'targetPort':8081},{'port':9090}]}}");
    /* The same path in a Pod is not under a template: replaced. */
    smp("Pod", "{'spec':{'template':{'spec':{'volumes':[{'name':'a'}]}}}}",
        "{'spec':{'template':{'spec':{'volumes':[{'name':'b'}]}}}}",
        "{'spec':{'template':{'spec':{'volumes':[{'name':'b'}]}}}}");
}

Test(smp, patch_delete_in_list_and_map)
{
    smp("Pod", POD2, "{'spec':{'containers':[{'name':'a','$patch':'delete'}]}}",
        "{'metadata':{'name':'p'},'spec':{'containers':[{'name':'b','image':'b:1'}]}}");
    /* Deleting an element that does not exist is a no-op. */
    smp("Pod", "{'spec':{'volumes':[{'name':'a'}]}}",
        "{'spec':{'volumes':[{'name':'zz','$patch':'delete'}]}}",
        "{'spec':{'volumes':[{'name':'a'}]}}");
    /* $patch: delete on a map removes the map. */
    smp("Pod", "{'spec':{'securityContext':{'runAsUser':0},'hostPID':true}}",
        "{'spec':{'securityContext':{'$patch':'delete'}}}", "{'spec':{'hostPID':true}}");
    /* At the top level it empties the object. */
    smp("ConfigMap", "{'data':{'a':'b'}}", "{'$patch':'delete'}", "{}");
}

Test(smp, patch_replace_map_and_list)
{
    smp("Pod",
        "{'spec':{'containers':[{'name':'a','resources':{'limits':{'cpu':'1','memory':'1Gi'},"
        "'requests':{'cpu':'1'}}}]}}",
        "{'spec':{'containers':[{'name':'a','resources':{'$patch':'replace','limits':{'cpu':'2'}}}"
        "]}}",
        "{'spec':{'containers':[{'name':'a','resources':{'limits':{'cpu':'2'}}}]}}");
    /* A {$patch: replace} element replaces the whole merged list. */
    smp("Pod", POD2, "{'spec':{'containers':[{'$patch':'replace'},{'name':'only','image':'o'}]}}",
        "{'metadata':{'name':'p'},'spec':{'containers':[{'name':'only','image':'o'}]}}");
    /* Explicit merge is the default. */
    smp("ConfigMap", "{'data':{'a':'1'}}", "{'data':{'$patch':'merge','b':'2'}}",
        "{'data':{'a':'1','b':'2'}}");
}

Test(smp, set_element_order)
{
    smp("Pod", "{'spec':{'containers':[{'name':'a'},{'name':'b'},{'name':'c'}]}}",
        "{'spec':{'$setElementOrder/containers':[{'name':'c'},{'name':'b'},{'name':'a'}],"
        "'containers':[{'name':'b','image':'b2'}]}}",
        "{'spec':{'containers':[{'name':'c'},{'name':'b','image':'b2'},{'name':'a'}]}}");
    /* New elements go where the order puts them; unnamed server-only elements keep their slot. */
    smp("Pod", "{'spec':{'volumes':[{'name':'a'},{'name':'srv'},{'name':'b'}]}}",
        "{'spec':{'$setElementOrder/volumes':[{'name':'n'},{'name':'b'},{'name':'a'}],"
        "'volumes':[{'name':'n'}]}}",
        "{'spec':{'volumes':[{'name':'n'},{'name':'srv'},{'name':'b'},{'name':'a'}]}}");
    /* Primitive lists order by value. */
    smp("Pod", "{'metadata':{'finalizers':['x','y']}}",
        "{'metadata':{'$setElementOrder/finalizers':['z','y','x'],'finalizers':['z']}}",
        "{'metadata':{'finalizers':['z','y','x']}}");
}

Test(smp, retain_keys)
{
    smp("Deployment",
        "{'spec':{'strategy':{'type':'RollingUpdate','rollingUpdate':{'maxSurge':1}}}}",
        "{'spec':{'strategy':{'$retainKeys':['type'],'type':'Recreate'}}}",
        "{'spec':{'strategy':{'type':'Recreate'}}}");
    smp("Pod", "{'spec':{'volumes':[{'name':'v','hostPath':{'path':'/x'}}]}}",
        "{'spec':{'volumes':[{'name':'v','$retainKeys':['name','emptyDir'],'emptyDir':{}}]}}",
        "{'spec':{'volumes':[{'name':'v','emptyDir':{}}]}}");
    smp_fails("Pod", "{}", "{'spec':{'$retainKeys':'name'}}", KC_EINVALID,
              "strategic merge patch at \"spec\": $retainKeys must be a list");
}

Test(smp, finalizers_and_owner_references)
{
    smp("ConfigMap", "{'metadata':{'finalizers':['a','b']}}",
        "{'metadata':{'finalizers':['c','a']}}", "{'metadata':{'finalizers':['a','b','c']}}");
    smp("ConfigMap", "{'metadata':{'finalizers':['a','b','c']}}",
        "{'metadata':{'$deleteFromPrimitiveList/finalizers':['b','zz']}}",
        "{'metadata':{'finalizers':['a','c']}}");
    smp("DaemonSet", "{'metadata':{'ownerReferences':[{'uid':'1','name':'x'},{'uid':'2'}]}}",
        "{'metadata':{'ownerReferences':[{'uid':'2','controller':true},{'uid':'3'}]}}",
        "{'metadata':{'ownerReferences':[{'uid':'1','name':'x'},{'uid':'2','controller':true},"
        "{'uid':'3'}]}}");
    /* The pod template's metadata is ObjectMeta too. */
    smp("DaemonSet", "{'spec':{'template':{'metadata':{'finalizers':['a']}}}}",
        "{'spec':{'template':{'metadata':{'finalizers':['b']}}}}",
        "{'spec':{'template':{'metadata':{'finalizers':['a','b']}}}}");
}

Test(smp, conditions_and_addresses_by_type)
{
    smp("Node",
        "{'status':{'conditions':[{'type':'Ready','status':'False'},{'type':'DiskPressure',"
        "'status':'False'}],'addresses':[{'type':'InternalIP','address':'10.0.0.1'}]}}",
        "{'status':{'conditions':[{'type':'Ready','status':'True','reason':'KubeletReady'}],"
        "'addresses':[{'type':'Hostname','address':'n1'}]}}",
        "{'status':{'conditions':[{'type':'Ready','status':'True','reason':'KubeletReady'},"
        "{'type':'DiskPressure','status':'False'}],'addresses':[{'type':'InternalIP',"
        "'address':'10.0.0.1'},{'type':'Hostname','address':'n1'}]}}");
    smp("Pod", "{'status':{'conditions':[{'type':'Ready','status':'False'}]}}",
        "{'status':{'conditions':[{'type':'PodScheduled','status':'True'}]}}",
        "{'status':{'conditions':[{'type':'Ready','status':'False'},"
        "{'type':'PodScheduled','status':'True'}]}}");
}

Test(smp, lists_without_merge_key_are_replaced)
{
    smp("Pod",
        "{'spec':{'tolerations':[{'key':'a','operator':'Exists'}],'containers':[{'name':'c',"
        "'args':['--x','--y'],'command':['/bin/a']}]}}",
        "{'spec':{'tolerations':[{'key':'b','operator':'Exists'}],'containers':[{'name':'c',"
        "'args':['--z']}]}}",
        "{'spec':{'tolerations':[{'key':'b','operator':'Exists'}],'containers':[{'name':'c',"
        "'args':['--z'],'command':['/bin/a']}]}}");
    smp("Node", "{'spec':{'taints':[{'key':'a','effect':'NoSchedule'}]}}", "{'spec':{'taints':[]}}",
        "{'spec':{'taints':[]}}");
}

Test(smp, nulls_and_scalars)
{
    smp("ConfigMap", "{'data':{'a':'1','b':'2'},'metadata':{'labels':{'x':'y'}}}",
        "{'data':{'a':null,'c':'3'},'metadata':{'labels':null}}",
        "{'data':{'b':'2','c':'3'},'metadata':{}}");
    /* An object patch over a scalar starts from {} (and drops nulls and directives). */
    smp("ConfigMap", "{'data':'x'}", "{'data':{'a':'1','b':null}}", "{'data':{'a':'1'}}");
    /* NULL original is {}. */
    json_t *p = J("{'metadata':{'name':'n'}}"), *out = NULL;
    cr_assert_eq(kc_smp_apply(NULL, p, "ConfigMap", &out, NULL), KC_OK);
    cr_assert(json_equal(out, p));
    json_decref(out);
    json_decref(p);
}

Test(smp, custom_resource_kind_is_a_merge_patch)
{
    const char *orig = "{'spec':{'items':[{'name':'a','v':1},{'name':'b'}],'m':{'x':1}}}";
    const char *patch = "{'spec':{'items':[{'name':'a','v':2}],'m':{'x':null,'y':2}}}";
    const char *want = "{'spec':{'items':[{'name':'a','v':2}],'m':{'y':2}}}";
    smp("ClusterPolicy", orig, patch, want);
    smp(NULL, orig, patch, want);
    /* Directives are literal keys to a merge patch. */
    smp("ClusterPolicy", "{}", "{'a':{'$patch':'delete'}}", "{'a':{'$patch':'delete'}}");
    /* The same containers patch merges by name for a known kind. */
    smp("Pod", "{'spec':{'containers':[{'name':'a'},{'name':'b'}]}}",
        "{'spec':{'containers':[{'name':'a','image':'x'}]}}",
        "{'spec':{'containers':[{'name':'a','image':'x'},{'name':'b'}]}}");
    smp("NvidiaDriver", "{'spec':{'containers':[{'name':'a'},{'name':'b'}]}}",
        "{'spec':{'containers':[{'name':'a','image':'x'}]}}",
        "{'spec':{'containers':[{'name':'a','image':'x'}]}}");
}

Test(smp, errors)
{
    smp_fails("Pod", "{}", "[{'op':'add'}]", KC_EINVALID,
              "a strategic merge patch must be a JSON object, not an array");
    smp_fails("ClusterPolicy", "{}", "'x'", KC_EINVALID, "not a scalar");
    smp_fails("Pod", "{}", "{'spec':{'$frobnicate':1}}", KC_EINVALID,
              "strategic merge patch at \"spec\": unknown directive \"$frobnicate\"");
    smp_fails("Pod", "{}", "{'spec':{'$patch':'explode'}}", KC_EINVALID,
              "unknown $patch value \"explode\"");
    smp_fails("Pod", "{}", "{'$patch':5}", KC_EINVALID, "at \"(top level)\": unknown $patch");
    smp_fails("Pod", "{'spec':{'containers':[{'name':'a'}]}}",
              "{'spec':{'containers':[{'image':'x'}]}}", KC_EINVALID,
              "strategic merge patch at \"spec.containers\": element 0 does not contain the merge "
              "key \"name\"");
    /* An error inside a new element (nothing to merge into) frees what was built. */
    smp_fails("Pod", "{}", "{'spec':{'containers':[{'name':'new','env':[{'value':'x'}]}]}}",
              KC_EINVALID,
              "at \"spec.containers.env\": element 0 does not contain the merge key \"name\"");
    smp_fails("Pod", "{}", "{'spec':{'volumes':['a']}}", KC_EINVALID,
              "element 0 of a list merged by key \"name\" is not an object");
    smp_fails("Pod", "{}", "{'spec':{'$setElementOrder/volumes':{}}}", KC_EINVALID,
              "$setElementOrder/volumes needs a field name and a list value");
    json_t *o = J("[]"), *p = J("{}"), *out;
    cr_assert_eq(kc_smp_apply(o, p, "Pod", &out, NULL), KC_EARG);
    cr_assert_eq(kc_smp_apply(p, p, "Pod", NULL, NULL), KC_EARG);
    json_decref(o);
    json_decref(p);
}

Test(smp, strategy_table)
{
    const char *key = "x";
    cr_assert_eq(kc_smp_list_strategy("Pod", "spec.containers.env", &key), KC_SMP_LIST_MERGE_KEY);
    cr_assert_str_eq(key, "name");
    cr_assert_eq(
        kc_smp_list_strategy("Deployment", "spec.template.spec.initContainers.volumeMounts", &key),
        KC_SMP_LIST_MERGE_KEY);
    cr_assert_str_eq(key, "mountPath");
    cr_assert_eq(
        kc_smp_list_strategy("CronJob", "spec.jobTemplate.spec.template.spec.volumes", &key),
        KC_SMP_LIST_MERGE_KEY);
    cr_assert_eq(kc_smp_list_strategy("Pod", "spec.hostAliases", &key), KC_SMP_LIST_MERGE_KEY);
    cr_assert_str_eq(key, "ip");
    cr_assert_eq(kc_smp_list_strategy("Pod", "spec.topologySpreadConstraints", &key),
                 KC_SMP_LIST_MERGE_KEY);
    cr_assert_str_eq(key, "topologyKey");
    cr_assert_eq(kc_smp_list_strategy("Pod", "spec.imagePullSecrets", NULL), KC_SMP_LIST_MERGE_KEY);
    cr_assert_eq(kc_smp_list_strategy("Pod", "spec.tolerations", &key), KC_SMP_LIST_REPLACE);
    cr_assert_null(key);
    cr_assert_eq(kc_smp_list_strategy("Node", "metadata.finalizers", NULL),
                 KC_SMP_LIST_MERGE_PRIMITIVE);
    cr_assert_eq(kc_smp_list_strategy("Node", "spec.taints", NULL), KC_SMP_LIST_REPLACE);
    cr_assert_eq(kc_smp_list_strategy("MyCR", "metadata.finalizers", NULL), KC_SMP_LIST_REPLACE);
    cr_assert_eq(kc_smp_list_strategy(NULL, "spec.containers", NULL), KC_SMP_LIST_REPLACE);
    cr_assert(kc_smp_kind_known("DaemonSet"));
    cr_assert_not(kc_smp_kind_known("daemonset"));
    cr_assert_not(kc_smp_kind_known(NULL));
}
