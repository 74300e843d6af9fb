/* ks_rest_select: the label and field selectors of list, watch and deletecollection requests,
 * with the field labels the API server supports per type. */
#include "ks_server_int.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * selectors
 */

static const char *const META_FIELDS[] = {"metadata.name", "metadata.namespace", NULL};
static const char *const POD_FIELDS[] = {"metadata.name",
                                         "metadata.namespace",
                                         "spec.nodeName",
                                         "spec.restartPolicy",
                                         "spec.schedulerName",
                                         "spec.serviceAccountName",
                                         "spec.hostNetwork",
                                         "status.phase",
                                         "status.podIP",
                                         "status.nominatedNodeName",
                                         NULL};
static const char *const EVENT_FIELDS[] = {"metadata.name",
                                           "metadata.namespace",
                                           "involvedObject.kind",
                                           "involvedObject.namespace",
                                           "involvedObject.name",
                                           "involvedObject.uid",
                                           "involvedObject.apiVersion",
                                           "involvedObject.resourceVersion",
                                           "involvedObject.fieldPath",
                                           "reason",
                                           "reportingComponent",
                                           "source",
                                           "source.component",
                                           "type",
                                           NULL};
static const char *const NODE_FIELDS[] = {"metadata.name", "metadata.namespace",
                                          "spec.unschedulable", NULL};
static const char *const SECRET_FIELDS[] = {"metadata.name", "metadata.namespace", "type", NULL};
static const char *const NS_FIELDS[] = {"metadata.name", "metadata.namespace", "status.phase",
                                        NULL};
static const char *const RS_FIELDS[] = {"metadata.name", "metadata.namespace", "status.replicas",
                                        NULL};

static const char *const *supported_fields(const ks_rtype *t)
{
    if (t->crd_name)
        return META_FIELDS;
    bool core = t->group[0] == '\0';
    if (core && !strcmp(t->resource, "pods"))
        return POD_FIELDS;
    if (core && !strcmp(t->resource, "events"))
        return EVENT_FIELDS;
    if (core && !strcmp(t->resource, "nodes"))
        return NODE_FIELDS;
    if (core && !strcmp(t->resource, "secrets"))
        return SECRET_FIELDS;
    if (core && !strcmp(t->resource, "namespaces"))
        return NS_FIELDS;
    if (!strcmp(t->group, "apps") && !strcmp(t->resource, "replicasets"))
        return RS_FIELDS;
    return META_FIELDS;
}

/* Event "source" is the field label of source.component: rewrite it so the dotted-path matcher
 * sees the string. */
static kc_code rewrite_event_source(kc_field_selector **sel, kc_err *err)
{
    size_t n = kc_field_selector_count(*sel);
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        const char *f = NULL;
        kc_field_selector_term(*sel, i, &f, NULL, NULL);
        any = any || (f && strcmp(f, "source") == 0);
    }
    if (!any)
        return KC_OK;
    size_t cap = 64;
    for (size_t i = 0; i < n; i++) {
        const char *f = NULL, *v = NULL;
        kc_field_selector_term(*sel, i, &f, NULL, &v);
        cap += strlen(f ? f : "") + 2 * strlen(v ? v : "") + 24;
    }
    char *s = malloc(cap);
    if (!s)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const char *f = NULL, *v = NULL;
        kc_field_op op = KC_FIELD_EQ;
        kc_field_selector_term(*sel, i, &f, &op, &v);
        if (!f)
            continue;
        len += (size_t)snprintf(s + len, cap - len, "%s%s%s", len ? "," : "",
                                strcmp(f, "source") == 0 ? "source.component" : f,
                                op == KC_FIELD_NEQ ? "!=" : "=");
        for (const char *c = v ? v : ""; *c; c++) {
            if (*c == ',' || *c == '=' || *c == '\\')
                s[len++] = '\\';
            s[len++] = *c;
        }
        s[len] = '\0';
    }
    kc_field_selector *nsel = NULL;
    kc_code rc = kc_field_selector_parse(s, &nsel, err);
    free(s);
    if (rc != KC_OK)
        return rc;
    kc_field_selector_free(*sel);
    *sel = nsel;
    return KC_OK;
}

kc_code ks_selectors_parse(ks_req *r, ks_selectors *sel, kc_err *err)
{
    memset(sel, 0, sizeof(*sel));
    const char *ls = ks_req_arg(r, "labelSelector");
    const char *fs = ks_req_arg(r, "fieldSelector");
    kc_code rc;
    if (ls && ls[0] && (rc = kc_label_selector_parse(ls, &sel->labels, err)) != KC_OK) {
        if (err)
            err->code = KC_EBADREQUEST;
        return KC_EBADREQUEST;
    }
    if (fs && fs[0]) {
        if ((rc = kc_field_selector_parse(fs, &sel->fields, err)) != KC_OK) {
            if (err)
                err->code = KC_EBADREQUEST;
            ks_selectors_free(sel);
            return KC_EBADREQUEST;
        }
        const ks_rtype *t = r->route.t;
        if ((rc = kc_field_selector_require(sel->fields, supported_fields(t), err)) != KC_OK) {
            ks_selectors_free(sel);
            return rc;
        }
        if (!t->crd_name && t->group[0] == '\0' && !strcmp(t->resource, "events") &&
            (rc = rewrite_event_source(&sel->fields, err)) != KC_OK) {
            ks_selectors_free(sel);
            return rc;
        }
    }
    return KC_OK;
}

void ks_selectors_free(ks_selectors *sel)
{
    kc_label_selector_free(sel->labels);
    kc_field_selector_free(sel->fields);
    sel->labels = NULL;
    sel->fields = NULL;
}
