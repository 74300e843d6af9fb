/* ks_kubelet_answers: what nodesim, playing the container runtime of its nodes, answers kubesim's
 * kubelet about simulated containers: whether an init container exited ("ok", "exit N: TEXT")
 * and what each probe printed. A real kubelet learns both on the node (CRI, exec probes), with
 * no request to the API server; nodesim hands them over the same way, by PUT to
 * /kubesim/v1/answers/namespaces/NS/pods/NAME (the admin's). A pod's nodesim.io/init and
 * nodesim.io/probes annotations still answer where this channel has not. */
#include "ks_kubelet_int.h"
#include "ks_server_int.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const answer_keys[] = {KL_ANSWER_INIT, KL_ANSWER_PROBES};

kc_code kl_answers_init(struct ks_kubelet *kl, kc_err *err)
{
    unsigned char b[8];
    if (RAND_bytes(b, sizeof(b)) != 1)
        return kc_err_set(err, KC_EIO, "kubelet: no random bytes for its boot id");
    for (size_t i = 0; i < sizeof(b); i++)
        snprintf(kl->boot_id + 2 * i, 3, "%02x", b[i]);
    pthread_mutex_init(&kl->amu, NULL);
    kl->answers = kc_map_new();
    if (!kl->answers)
        return kc_err_set(err, KC_ENOMEM, "out of memory starting the kubelet");
    return KC_OK;
}

static void answers_free(void *v)
{
    json_decref(v);
}

void kl_answers_free(struct ks_kubelet *kl)
{
    if (!kl->answers)
        return;
    kc_map_free(kl->answers, answers_free);
    kl->answers = NULL;
    pthread_mutex_destroy(&kl->amu);
}

void kl_answers_drop(struct ks_kubelet *kl, const char *uid)
{
    pthread_mutex_lock(&kl->amu);
    json_decref(kc_map_remove(kl->answers, uid));
    pthread_mutex_unlock(&kl->amu);
}

bool kl_answer(const kl_pod *p, const char *key, const char *ctr, char *buf, size_t size)
{
    struct ks_kubelet *kl = p->kl;
    bool found = false;
    pthread_mutex_lock(&kl->amu);
    const json_t *all = json_object_get(kc_map_get(kl->answers, p->uid), key);
    const char *v = json_string_value(json_object_get(all, ctr));
    if (all) {
        found = v != NULL;
        if (v)
            snprintf(buf, size, "%s", v);
    }
    pthread_mutex_unlock(&kl->amu);
    if (all)
        return found;
    const char *ann = json_string_value(
        json_object_get(json_object_get(json_object_get(p->obj, "metadata"), "annotations"), key));
    json_t *doc = ann ? json_loads(ann, 0, NULL) : NULL;
    v = json_string_value(json_object_get(doc, ctr));
    if (v)
        snprintf(buf, size, "%s", v);
    json_decref(doc);
    return v != NULL;
}

kc_code ks_answers_parse(const char *body, size_t len, json_t **out, kc_err *err)
{
    *out = NULL;
    json_error_t je;
    json_t *doc = json_loadb(body ? body : "", len, 0, &je);
    if (!doc)
        return kc_err_set(err, KC_EBADREQUEST, "answers: not valid JSON: %s (line %d)", je.text,
                          je.line);
    const char *uid = json_string_value(json_object_get(doc, "uid"));
    const char *key = json_string_value(json_object_get(doc, "key"));
    const json_t *ans = json_object_get(doc, "answers");
    kc_code rc = KC_EBADREQUEST;
    if (!json_is_object(doc) || !uid || !*uid) {
        kc_err_set(err, rc, "answers: uid: Required value");
        goto bad;
    }
    if (!key || (strcmp(key, answer_keys[0]) && strcmp(key, answer_keys[1]))) {
        kc_err_set(err, rc,
                   "answers: key: Unsupported value: \"%s\": supported values: \"%s\", \"%s\"",
                   key ? key : "", answer_keys[0], answer_keys[1]);
        goto bad;
    }
    if (!json_is_object(ans)) {
        kc_err_set(err, rc, "answers: answers: Required value: an object of container names");
        goto bad;
    }
    const char *ctr;
    const json_t *v;
    json_object_foreach((json_t *)ans, ctr, v)
    {
        if (!json_is_string(v)) {
            kc_err_set(err, rc, "answers: answers[%s]: Invalid value: must be a string", ctr);
            goto bad;
        }
    }
    *out = doc;
    return KC_OK;
bad:
    json_decref(doc);
    return rc;
}

int ks_answer_init_parse(const char *v, int *code, char *msg, size_t size)
{
    if (!v)
        return 0;
    if (strcmp(v, "ok") == 0)
        return 1;
    char *end = NULL;
    long n = !strncmp(v, "exit ", 5) ? strtol(v + 5, &end, 10) : 0;
    if (end && end[0] == ':' && n > 0 && n < 256) {
        *code = (int)n;
        snprintf(msg, size, "%s", end[1] == ' ' ? end + 2 : end + 1);
        return -1;
    }
    return 0;
}

static enum MHD_Result reply_answers(ks_req *r, struct ks_kubelet *kl, const char *uid)
{
    pthread_mutex_lock(&kl->amu);
    const json_t *cur = kc_map_get(kl->answers, uid);
    json_t *copy = cur ? json_deep_copy(cur) : json_object();
    pthread_mutex_unlock(&kl->amu);
    return ks_reply_json(
        r, 200, json_pack("{s:s, s:s, s:o}", "bootID", kl->boot_id, "uid", uid, "answers", copy),
        NULL);
}

enum MHD_Result ks_kubelet_answers_handle(ks_req *r)
{
    struct ks_kubelet *kl = r->sim->kubelet;
    if (!kl)
        return ks_reply_status(r, 503, "ServiceUnavailable", "kubesim runs no kubelet",
                               json_object());
    /* seg: kubesim v1 answers [namespaces NS pods NAME] */
    if (r->nseg == 3) {
        if (strcmp(r->method, "GET"))
            return ks_reply_status(r, 405, "MethodNotAllowed", "/kubesim/v1/answers takes GET",
                                   json_object());
        return ks_reply_json(r, 200, json_pack("{s:s}", "bootID", kl->boot_id), NULL);
    }
    if (r->nseg != 7 || strcmp(r->seg[3], "namespaces") || strcmp(r->seg[5], "pods"))
        return ks_reply_not_found(r);
    const char *ns = r->seg[4], *name = r->seg[6];
    json_t *pod = NULL;
    kc_err err;
    kc_err_clear(&err);
    if (ks_get(kl->st, kl->t_pods, ns, name, &pod, &err) != KC_OK)
        return ks_reply_error(r, &err);
    const char *uid = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
    char puid[64];
    snprintf(puid, sizeof(puid), "%s", uid ? uid : "");
    json_decref(pod);
    if (!strcmp(r->method, "GET"))
        return reply_answers(r, kl, puid);
    if (strcmp(r->method, "PUT"))
        return ks_reply_status(r, 405, "MethodNotAllowed",
                               "/kubesim/v1/answers/namespaces/NS/pods/NAME takes GET and PUT",
                               json_object());
    json_t *doc = NULL;
    if (ks_answers_parse(r->body, r->body_len, &doc, &err) != KC_OK)
        return ks_reply_status(r, 400, "BadRequest", err.msg, json_object());
    char msg[600];
    const char *uid_in = json_string_value(json_object_get(doc, "uid"));
    if (strcmp(uid_in, puid) != 0) {
        /* As the API server's precondition failure on a uid. */
        snprintf(msg, sizeof(msg),
                 "Precondition failed: UID in precondition: %s, UID in object meta: %s", uid_in,
                 puid);
        json_decref(doc);
        return ks_reply_status(r, 409, "Conflict", msg, json_object());
    }
    pthread_mutex_lock(&kl->amu);
    json_t *cur = kc_map_get(kl->answers, puid);
    bool ok = true;
    if (!cur) {
        cur = json_object();
        ok = cur && kc_map_put(kl->answers, puid, cur, NULL) == KC_OK;
        if (!ok)
            json_decref(cur);
    }
    if (ok)
        ok = json_object_set(cur, json_string_value(json_object_get(doc, "key")),
                             json_object_get(doc, "answers")) == 0;
    pthread_mutex_unlock(&kl->amu);
    json_decref(doc);
    if (!ok)
        return ks_reply_status(r, 500, "InternalError", "out of memory", json_object());
    char key[600];
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    kl_push_answered(kl, key);
    return reply_answers(r, kl, puid);
}
