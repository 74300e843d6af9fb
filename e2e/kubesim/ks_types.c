/* ks_types: the built-in types kubesim serves (group, version, names, scope, subresources,
 * categories) with the Table columns `kubectl get` shows for them on a real cluster. */
#include "ks_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_sim.h"

const char KS_NAME_COLUMN_DESC[] =
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

const char KS_AGE_COLUMN_DESC[] =
    "CreationTimestamp is a timestamp representing the server time when this object was created. "
    "It is not guaranteed to be set in happens-before order across separate operations. Clients "
    "may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by "
    "the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#metadata";

/* One column: name, type, priority, jsonPath, default (JSON text or NULL), description. */
typedef struct col {
    const char *name, *type;
    int priority;
    const char *path, *dflt, *desc;
} col;

typedef struct builtin {
    const char *group, *version, *resource, *kind;
    bool namespaced, status, scale;
    const char *const *shorts;
    const char *const *cats;
    const col *cols; /* without the leading Name column; {NULL} terminated */
    bool no_name;    /* events: Name is a wide column of their own */
} builtin;

#define S(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ALL    S("all")
#define END                                                                                        \
    {                                                                                              \
        NULL, NULL, 0, NULL, NULL, NULL                                                            \
    }
#define AGE                                                                                        \
    {                                                                                              \
        "Age", "string", 0, "@age", NULL, NULL                                                     \
    }
#define CREATED                                                                                    \
    {                                                                                              \
        "Created At", "date", 0, "@created", NULL, NULL                                            \
    }
#define CONTAINERS(p)                                                                              \
    {"Containers",                                                                                 \
     "string",                                                                                     \
     1,                                                                                            \
     "@join:" p ".containers[*].name",                                                             \
     NULL,                                                                                         \
     "Names of each container in the template."},                                                  \
    {                                                                                              \
        "Images", "string", 1, "@join:" p ".containers[*].image", NULL,                            \
            "Images referenced by each container in the template."                                 \
    }
#define SELECTOR                                                                                   \
    {                                                                                              \
        "Selector", "string", 1, "@selector:.spec.selector", NULL,                                 \
            "Label selector for pods. Existing ReplicaSets whose pods are selected by this will "  \
            "be the ones affected by this deployment."                                             \
    }
#define INT(n, p)                                                                                  \
    {                                                                                              \
        n, "integer", 0, p, "0", NULL                                                              \
    }

static const col POD[] = {
    {"Ready", "string", 0, "@pod.ready", NULL,
     "The aggregate readiness state of this pod for accepting traffic."},
    {"Status", "string", 0, "@pod.status", NULL,
     "The aggregate status of the containers in this pod."},
    {"Restarts", "string", 0, "@pod.restarts", NULL,
     "The number of times the containers in this pod have been restarted and when the last "
     "container in this pod has restarted."},
    AGE,
    {"IP", "string", 1, ".status.podIP", NULL, "IP address allocated to the pod."},
    {"Node", "string", 1, ".spec.nodeName", NULL, "Name of the node the pod is assigned to."},
    {"Nominated Node", "string", 1, ".status.nominatedNodeName", NULL,
     "Name of the node the pod is nominated to."},
    {"Readiness Gates", "string", 1, "@pod.readinessgates", NULL,
     "If specified, all readiness gates will be evaluated for pod readiness."},
    END};
static const col NODE[] = {
    {"Status", "string", 0, "@node.status", NULL, "The status of the node"},
    {"Roles", "string", 0, "@node.roles", NULL, "The roles of the node"},
    AGE,
    {"Version", "string", 0, ".status.nodeInfo.kubeletVersion", "\"\"",
     "Kubelet Version reported by the node."},
    {"Internal-IP", "string", 1, "@node.internalip", NULL,
     "List of addresses reachable to the "
     "node."},
    {"External-IP", "string", 1, "@node.externalip", NULL,
     "List of addresses reachable to the "
     "node."},
    {"OS-Image", "string", 1, ".status.nodeInfo.osImage", "\"<unknown>\"", "OS Image."},
    {"Kernel-Version", "string", 1, ".status.nodeInfo.kernelVersion", "\"<unknown>\"",
     "Kernel Version."},
    {"Container-Runtime", "string", 1, ".status.nodeInfo.containerRuntimeVersion", "\"<unknown>\"",
     "Container Runtime Version."},
    END};
static const col NAMESPACE[] = {
    {"Status", "string", 0, ".status.phase", NULL, "The status of the namespace"}, AGE, END};
static const col SERVICE[] = {
    {"Type", "string", 0, ".spec.type", NULL, "The type of the service."},
    {"Cluster-IP", "string", 0, ".spec.clusterIP", "\"<none>\"", "The cluster ip of the service."},
    {"External-IP", "string", 0, "@svc.externalip", NULL, "The external ip of the service."},
    {"Port(s)", "string", 0, "@svc.ports", NULL, "The ports of the service."},
    AGE,
    {"Selector", "string", 1, "@map:.spec.selector", NULL, "The selectors of the service."},
    END};
static const col ENDPOINTS[] = {
    {"Endpoints", "string", 0, "@endpoints", NULL, "Endpoints of the service"}, AGE, END};
static const col CONFIGMAP[] = {
    {"Data", "integer", 0, "@count:.data,.binaryData", NULL, "Number of keys in the config map"},
    AGE,
    END};
static const col SECRET[] = {
    {"Type", "string", 0, ".type", "\"\"", "The type of the secret"},
    {"Data", "integer", 0, "@count:.data", NULL, "Number of keys in the secret"},
    AGE,
    END};
static const col SA[] = {
    {"Secrets", "integer", 0, "@count:.secrets", NULL, "Number of secrets"}, AGE, END};
static const col EVENT[] = {
    {"Last Seen", "string", 0, "@event.lastseen", NULL,
     "The time at which the most recent occurrence of this event was recorded."},
    {"Type", "string", 0, ".type", NULL, "Type of this event (Normal, Warning)"},
    {"Reason", "string", 0, ".reason", NULL, "short, machine understandable string"},
    {"Object", "string", 0, "@event.object", NULL, "The object that this event is about."},
    {"Subobject", "string", 1, "@event.subobject", NULL, "The field of the object."},
    {"Source", "string", 1, "@event.source", NULL, "The component reporting this event."},
    {"Message", "string", 0, ".message", "\"\"",
     "A human-readable description of the status "
     "of this operation."},
    {"First Seen", "string", 1, "@event.firstseen", NULL,
     "The time at which the event was first recorded."},
    {"Count", "string", 1, "@event.count", NULL, "The number of times this event has occurred."},
    {"Name", "string", 1, ".metadata.name", NULL, KS_NAME_COLUMN_DESC},
    END};
static const col EVENT_V1[] = {
    {"Last Seen", "string", 0, "@event.lastseen", NULL,
     "The time at which the most recent occurrence of this event was recorded."},
    {"Type", "string", 0, ".type", NULL, "Type of this event (Normal, Warning)"},
    {"Reason", "string", 0, ".reason", NULL, "short, machine understandable string"},
    {"Object", "string", 0, "@event.object", NULL, "The object that this event is about."},
    {"Subobject", "string", 1, "@event.subobject", NULL, "The field of the object."},
    {"Source", "string", 1, "@event.source", NULL, "The component reporting this event."},
    {"Message", "string", 0, ".note", "\"\"",
     "A human-readable description of the status of "
     "this operation."},
    {"First Seen", "string", 1, "@event.firstseen", NULL,
     "The time at which the event was first recorded."},
    {"Count", "string", 1, "@event.count", NULL, "The number of times this event has occurred."},
    {"Name", "string", 1, ".metadata.name", NULL, KS_NAME_COLUMN_DESC},
    END};
static const col PVC[] = {
    {"Status", "string", 0, ".status.phase", NULL, "The status of the volume claim"},
    {"Volume", "string", 0, ".spec.volumeName", "\"\"", "The volume bound to the claim"},
    {"Capacity", "string", 0, ".status.capacity.storage", "\"\"", "The capacity of the claim"},
    {"Access Modes", "string", 0, "@pvc.accessmodes", NULL, "The access modes of the claim"},
    {"StorageClass", "string", 0, ".spec.storageClassName", "\"\"", "The storage class"},
    {"VolumeAttributesClass", "string", 0, ".spec.volumeAttributesClassName", "\"<unset>\"",
     "The volume attributes class"},
    AGE,
    {"VolumeMode", "string", 1, ".spec.volumeMode", NULL, "The volume mode"},
    END};
static const col CREATED_ONLY[] = {CREATED, END};
static const col QUOTA[] = {AGE,
                            {"Request", "string", 0, "@quota.request", NULL, "Request"},
                            {"Limit", "string", 0, "@quota.limit", NULL, "Limit"},
                            END};
static const col DEPLOYMENT[] = {
    {"Ready", "string", 0, "@ratio:.status.readyReplicas,.spec.replicas", NULL,
     "Number of the pod with ready state"},
    {"Up-to-date", "integer", 0, ".status.updatedReplicas", "0",
     "Total number of non-terminated pods targeted by this deployment that have the desired "
     "template spec."},
    {"Available", "integer", 0, ".status.availableReplicas", "0",
     "Total number of available pods (ready for at least minReadySeconds) targeted by this "
     "deployment."},
    AGE,
    CONTAINERS(".spec.template.spec"),
    SELECTOR,
    END};
static const col REPLICASET[] = {INT("Desired", ".spec.replicas"),
                                 INT("Current", ".status.replicas"),
                                 INT("Ready", ".status.readyReplicas"),
                                 AGE,
                                 CONTAINERS(".spec.template.spec"),
                                 SELECTOR,
                                 END};
static const col DAEMONSET[] = {
    INT("Desired", ".status.desiredNumberScheduled"),
    INT("Current", ".status.currentNumberScheduled"),
    INT("Ready", ".status.numberReady"),
    INT("Up-to-date", ".status.updatedNumberScheduled"),
    INT("Available", ".status.numberAvailable"),
    {"Node Selector", "string", 0, "@map:.spec.template.spec.nodeSelector", NULL,
     "NodeSelector is a selector which must be true for the pod to fit on a node."},
    AGE,
    CONTAINERS(".spec.template.spec"),
    SELECTOR,
    END};
static const col STATEFULSET[] = {{"Ready", "string", 0,
                                   "@ratio:.status.readyReplicas,.spec.replicas", NULL,
                                   "Number of the pod with ready state"},
                                  AGE,
                                  CONTAINERS(".spec.template.spec"),
                                  END};
static const col CONTROLLERREVISION[] = {
    {"Controller", "string", 0, "@owner", NULL, "Controller of the object"},
    INT("Revision", ".revision"),
    AGE,
    END};
static const col JOB[] = {
    {"Status", "string", 0, "@job.status", NULL, "Status of the job."},
    {"Completions", "string", 0, "@job.completions", NULL,
     "The completion status of the job as <successful>/<desired>"},
    {"Duration", "string", 0, "@job.duration", NULL, "Time required to complete the job."},
    AGE,
    CONTAINERS(".spec.template.spec"),
    SELECTOR,
    END};
static const col LEASE[] = {
    {"Holder", "string", 0, ".spec.holderIdentity", "\"\"", "The holder of the lease."}, AGE, END};
static const col BINDING[] = {
    {"Role", "string", 0, "@binding.role", NULL, "Role to which the binding refers."},
    AGE,
    {"Users", "string", 1, "@binding.subjects:User", NULL, "Users in the binding."},
    {"Groups", "string", 1, "@binding.subjects:Group", NULL, "Groups in the binding."},
    {"ServiceAccounts", "string", 1, "@binding.subjects:ServiceAccount", NULL,
     "ServiceAccounts in the binding."},
    END};
static const col PRIORITYCLASS[] = {
    INT("Value", ".value"),
    {"Global-Default", "boolean", 0, ".globalDefault", "false",
     "globalDefault specifies whether this PriorityClass should be considered as the default "
     "priority."},
    AGE,
    {"PreemptionPolicy", "string", 0, ".preemptionPolicy", "\"\"",
     "PreemptionPolicy is the Policy for preempting pods with lower priority."},
    END};
static const col RUNTIMECLASS[] = {
    {"Handler", "string", 0, ".handler", "\"\"", "Handler specifies the underlying runtime."},
    AGE,
    END};
static const col PDB[] = {{"Min Available", "string", 0, ".spec.minAvailable", "\"N/A\"",
                           "The minimum number of pods that must be available."},
                          {"Max Unavailable", "string", 0, ".spec.maxUnavailable", "\"N/A\"",
                           "The maximum number of pods that may be unavailable."},
                          INT("Allowed Disruptions", ".status.disruptionsAllowed"),
                          AGE,
                          END};

static const builtin BUILTINS[] = {
    {"", "v1", "namespaces", "Namespace", false, true, false, S("ns"), NULL, NAMESPACE, false},
    {"", "v1", "nodes", "Node", false, true, false, S("no"), NULL, NODE, false},
    {"", "v1", "pods", "Pod", true, true, false, S("po"), ALL, POD, false},
    {"", "v1", "services", "Service", true, true, false, S("svc"), ALL, SERVICE, false},
    {"", "v1", "endpoints", "Endpoints", true, false, false, S("ep"), NULL, ENDPOINTS, false},
    {"", "v1", "configmaps", "ConfigMap", true, false, false, S("cm"), NULL, CONFIGMAP, false},
    {"", "v1", "secrets", "Secret", true, false, false, NULL, NULL, SECRET, false},
    {"", "v1", "serviceaccounts", "ServiceAccount", true, false, false, S("sa"), NULL, SA, false},
    {"", "v1", "events", "Event", true, false, false, S("ev"), NULL, EVENT, true},
    {"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, true, false, S("pvc"), NULL,
     PVC, false},
    {"", "v1", "limitranges", "LimitRange", true, false, false, S("limits"), NULL, CREATED_ONLY,
     false},
    {"", "v1", "resourcequotas", "ResourceQuota", true, true, false, S("quota"), NULL, QUOTA,
     false},
    {"apps", "v1", "daemonsets", "DaemonSet", true, true, false, S("ds"), ALL, DAEMONSET, false},
    {"apps", "v1", "deployments", "Deployment", true, true, true, S("deploy"), ALL, DEPLOYMENT,
     false},
    {"apps", "v1", "replicasets", "ReplicaSet", true, true, true, S("rs"), ALL, REPLICASET, false},
    {"apps", "v1", "statefulsets", "StatefulSet", true, true, true, S("sts"), ALL, STATEFULSET,
     false},
    {"apps", "v1", "controllerrevisions", "ControllerRevision", true, false, false, NULL, NULL,
     CONTROLLERREVISION, false},
    {"batch", "v1", "jobs", "Job", true, true, false, NULL, ALL, JOB, false},
    {"coordination.k8s.io", "v1", "leases", "Lease", true, false, false, NULL, NULL, LEASE, false},
    {"rbac.authorization.k8s.io", "v1", "roles", "Role", true, false, false, NULL, NULL,
     CREATED_ONLY, false},
    {"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, false, false, NULL,
     NULL, BINDING, false},
    {"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, false, false, NULL,
     NULL, CREATED_ONLY, false},
    {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, false,
     false, NULL, NULL, BINDING, false},
    {"scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", false, false, false, S("pc"),
     NULL, PRIORITYCLASS, false},
    {"node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", false, false, false, NULL, NULL,
     RUNTIMECLASS, false},
    {"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, true, false, S("pdb"),
     NULL, PDB, false},
    {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false,
     true, false, S("crd", "crds"), S("api-extensions"), CREATED_ONLY, false},
    {"events.k8s.io", "v1", "events", "Event", true, false, false, S("ev"), NULL, EVENT_V1, true},
};

static json_t *column_json(const col *c)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s}", "name", c->name, "type", c->type,
                          "format", "", "description", c->desc ? c->desc : "", "priority",
                          c->priority, "jsonPath", c->path);
    if (!j)
        return NULL;
    if (strcmp(c->path, ".metadata.name") == 0)
        json_object_set_new(j, "format", json_string("name"));
    if (strcmp(c->path, "@age") == 0)
        json_object_set_new(j, "description", json_string(KS_AGE_COLUMN_DESC));
    if (strcmp(c->path, "@created") == 0)
        json_object_set_new(j, "description", json_string(KS_AGE_COLUMN_DESC));
    if (c->dflt) {
        json_t *d = json_loads(c->dflt, JSON_DECODE_ANY, NULL);
        if (!d) {
            json_decref(j);
            return NULL;
        }
        json_object_set_new(j, "default", d);
    }
    return j;
}

static json_t *columns_json(const builtin *b)
{
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    if (!b->no_name) {
        const col name = {"Name", "string", 0, ".metadata.name", NULL, KS_NAME_COLUMN_DESC};
        if (json_array_append_new(arr, column_json(&name)) != 0)
            goto fail;
    }
    for (const col *c = b->cols; c->name; c++)
        if (json_array_append_new(arr, column_json(c)) != 0)
            goto fail;
    return arr;
fail:
    json_decref(arr);
    return NULL;
}

static void lower_into(char *dst, size_t size, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < size; i++)
        dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] - 'A' + 'a' : src[i]);
    dst[i] = '\0';
}

/* Whether the API server keeps metadata.generation for a built-in kind: only the strategies of
 * kinds with a spec that controllers reconcile set it (custom resources always have it). */
static bool tracks_generation(const builtin *b)
{
    static const char *const kinds[][2] = {
        {"apps", "daemonsets"},
        {"apps", "deployments"},
        {"apps", "replicasets"},
        {"apps", "statefulsets"},
        {"batch", "jobs"},
        {"policy", "poddisruptionbudgets"},
        {"apiextensions.k8s.io", "customresourcedefinitions"},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (!strcmp(b->group, kinds[i][0]) && !strcmp(b->resource, kinds[i][1]))
            return true;
    return false;
}

kc_code ks_types_register_builtin(ks_store *st, kc_err *err)
{
    if (!st)
        return kc_err_set(err, KC_EARG, "ks_types_register_builtin: no store");
    for (size_t i = 0; i < sizeof(BUILTINS) / sizeof(BUILTINS[0]); i++) {
        const builtin *b = &BUILTINS[i];
        char singular[64];
        lower_into(singular, sizeof(singular), b->kind);
        json_t *cols = columns_json(b);
        if (!cols)
            return kc_err_set(err, KC_ENOMEM, "registering %s: out of memory", b->resource);
        ks_rtype t = {
            .group = b->group,
            .version = b->version,
            .resource = b->resource,
            .kind = b->kind,
            .singular = singular,
            .namespaced = b->namespaced,
            .has_status = b->status,
            .has_scale = b->scale,
            .short_names = b->shorts,
            .categories = b->cats,
            .printer_columns = cols,
            .no_generation = !tracks_generation(b),
        };
        const ks_rtype *r = ks_store_register(st, &t);
        json_decref(cols);
        if (!r)
            return kc_err_set(err, KC_ENOMEM, "registering %s%s%s/%s: the store refused it",
                              b->group, *b->group ? "/" : "", b->version, b->resource);
    }
    return KC_OK;
}
