/* kc_smp_keys: the patch strategies (merge keys) of the built-in Kubernetes kinds' list fields. */
#include "kc_patch.h"

#include <string.h>

typedef struct list_rule {
    const char *path; /* relative to the table's root, list positions left out */
    kc_smp_list strategy;
    const char *key;
} list_rule;

#define KEYED(p, k)                                                                                \
    {                                                                                              \
        p, KC_SMP_LIST_MERGE_KEY, k                                                                \
    }
#define PRIM(p)                                                                                    \
    {                                                                                              \
        p, KC_SMP_LIST_MERGE_PRIMITIVE, NULL                                                       \
    }

/* Lists of a PodSpec tagged patchStrategy:"merge" in k8s.io/api/core/v1. Everything else in a
 * pod spec (tolerations, args, command, envFrom, readinessGates, ...) is replaced. */
static const list_rule pod_spec_rules[] = {
    KEYED("containers", "name"),
    KEYED("containers.env", "name"),
    KEYED("containers.ports", "containerPort"),
    KEYED("containers.volumeMounts", "mountPath"),
    KEYED("containers.volumeDevices", "devicePath"),
    KEYED("initContainers", "name"),
    KEYED("initContainers.env", "name"),
    KEYED("initContainers.ports", "containerPort"),
    KEYED("initContainers.volumeMounts", "mountPath"),
    KEYED("initContainers.volumeDevices", "devicePath"),
    KEYED("ephemeralContainers", "name"),
    KEYED("ephemeralContainers.env", "name"),
    KEYED("ephemeralContainers.ports", "containerPort"),
    KEYED("ephemeralContainers.volumeMounts", "mountPath"),
    KEYED("ephemeralContainers.volumeDevices", "devicePath"),
    KEYED("volumes", "name"),
    KEYED("imagePullSecrets", "name"),
    KEYED("hostAliases", "ip"),
    KEYED("topologySpreadConstraints", "topologyKey"),
    KEYED("schedulingGates", "name"),
    KEYED("resourceClaims", "name"),
    {NULL, KC_SMP_LIST_REPLACE, NULL},
};

/* ObjectMeta, wherever it appears. */
static const list_rule meta_rules[] = {
    KEYED("ownerReferences", "uid"),
    PRIM("finalizers"),
    {NULL, KC_SMP_LIST_REPLACE, NULL},
};

static const list_rule pod_rules[] = {
    KEYED("status.conditions", "type"),
    KEYED("status.podIPs", "ip"),
    KEYED("status.hostIPs", "ip"),
    {NULL, KC_SMP_LIST_REPLACE, NULL},
};

static const list_rule node_rules[] = {
    PRIM("spec.podCIDRs"),
    KEYED("status.addresses", "type"),
    KEYED("status.conditions", "type"),
    {NULL, KC_SMP_LIST_REPLACE, NULL},
};

static const list_rule service_rules[] = {
    KEYED("spec.ports", "port"),
    KEYED("status.conditions", "type"),
    {NULL, KC_SMP_LIST_REPLACE, NULL},
};

static const list_rule service_account_rules[] = {
    KEYED("secrets", "name"),
    {NULL, KC_SMP_LIST_REPLACE, NULL},
};

/* Workloads, PVCs, namespaces and most other status types merge conditions by type. */
static const list_rule conditions_rules[] = {
    KEYED("status.conditions", "type"),
    {NULL, KC_SMP_LIST_REPLACE, NULL},
};

static const list_rule no_rules[] = {
    {NULL, KC_SMP_LIST_REPLACE, NULL},
};

typedef struct kind_info {
    const char *kind;
    const char *pod_spec;  /* where a PodSpec sits, or NULL */
    const char *pod_meta;  /* where the pod template's ObjectMeta sits, or NULL */
    const char *more_meta; /* another embedded ObjectMeta (CronJob's job template), or NULL */
    const list_rule *rules;
} kind_info;

static const kind_info kinds[] = {
    {"Pod", "spec", NULL, NULL, pod_rules},
    {"PodTemplate", "template.spec", "template.metadata", NULL, no_rules},
    {"Deployment", "spec.template.spec", "spec.template.metadata", NULL, conditions_rules},
    {"DaemonSet", "spec.template.spec", "spec.template.metadata", NULL, conditions_rules},
    {"StatefulSet", "spec.template.spec", "spec.template.metadata", NULL, conditions_rules},
    {"ReplicaSet", "spec.template.spec", "spec.template.metadata", NULL, conditions_rules},
    {"ReplicationController", "spec.template.spec", "spec.template.metadata", NULL,
     conditions_rules},
    {"Job", "spec.template.spec", "spec.template.metadata", NULL, conditions_rules},
    {"CronJob", "spec.jobTemplate.spec.template.spec", "spec.jobTemplate.spec.template.metadata",
     "spec.jobTemplate.metadata", no_rules},
    {"Node", NULL, NULL, NULL, node_rules},
    {"Service", NULL, NULL, NULL, service_rules},
    {"ServiceAccount", NULL, NULL, NULL, service_account_rules},
    {"Namespace", NULL, NULL, NULL, conditions_rules},
    {"PersistentVolumeClaim", NULL, NULL, NULL, conditions_rules},
    {"ConfigMap", NULL, NULL, NULL, no_rules},
    {"Secret", NULL, NULL, NULL, no_rules},
    {"Endpoints", NULL, NULL, NULL, no_rules},
    {"Event", NULL, NULL, NULL, no_rules},
    {"PersistentVolume", NULL, NULL, NULL, no_rules},
    {"LimitRange", NULL, NULL, NULL, no_rules},
    {"ResourceQuota", NULL, NULL, NULL, no_rules},
    {"Lease", NULL, NULL, NULL, no_rules},
    {"Role", NULL, NULL, NULL, no_rules},
    {"ClusterRole", NULL, NULL, NULL, no_rules},
    {"RoleBinding", NULL, NULL, NULL, no_rules},
    {"ClusterRoleBinding", NULL, NULL, NULL, no_rules},
    {"PriorityClass", NULL, NULL, NULL, no_rules},
    {"RuntimeClass", NULL, NULL, NULL, no_rules},
    {"StorageClass", NULL, NULL, NULL, no_rules},
    {"PodDisruptionBudget", NULL, NULL, NULL, conditions_rules},
    {"HorizontalPodAutoscaler", NULL, NULL, NULL, conditions_rules},
    {"NetworkPolicy", NULL, NULL, NULL, no_rules},
    {"ControllerRevision", NULL, NULL, NULL, no_rules},
    {"CSIDriver", NULL, NULL, NULL, no_rules},
    {"CSINode", NULL, NULL, NULL, no_rules},
};

static const kind_info *find_kind(const char *kind)
{
    if (!kind)
        return NULL;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (strcmp(kinds[i].kind, kind) == 0)
            return &kinds[i];
    return NULL;
}

int kc_smp_kind_known(const char *kind)
{
    return find_kind(kind) != NULL;
}

/* Looks `rel` up in a table; returns 1 when found. */
static int lookup(const list_rule *rules, const char *rel, kc_smp_list *s, const char **key)
{
    for (; rules->path; rules++) {
        if (strcmp(rules->path, rel) == 0) {
            *s = rules->strategy;
            *key = rules->key;
            return 1;
        }
    }
    return 0;
}

/* When path is `root` + "." + rest, returns rest; otherwise NULL. */
static const char *under(const char *path, const char *root)
{
    if (!root)
        return NULL;
    size_t n = strlen(root);
    if (strncmp(path, root, n) == 0 && path[n] == '.')
        return path + n + 1;
    return NULL;
}

kc_smp_list kc_smp_list_strategy(const char *kind, const char *path, const char **merge_key)
{
    const kind_info *k = find_kind(kind);
    kc_smp_list s = KC_SMP_LIST_REPLACE;
    const char *key = NULL, *rel;
    if (!k || !path)
        goto out;
    if (lookup(k->rules, path, &s, &key))
        goto out;
    if ((rel = under(path, k->pod_spec)) && lookup(pod_spec_rules, rel, &s, &key))
        goto out;
    if ((rel = under(path, "metadata")) || (rel = under(path, k->pod_meta)) ||
        (rel = under(path, k->more_meta)))
        lookup(meta_rules, rel, &s, &key);
out:
    if (merge_key)
        *merge_key = s == KC_SMP_LIST_MERGE_KEY ? key : NULL;
    return s;
}
