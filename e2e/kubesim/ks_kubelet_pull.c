/* ks_kubelet_pull: images on simulated nodes, as the kubelet and containerd handle them. Before a
 * container starts, its image must be on the node: imagePullPolicy decides whether it is pulled
 * (Always: every start; IfNotPresent: once per node; Never: never). A pull asks the registries
 * (ks_registry): an image that does not exist fails with containerd's error, ErrImagePull, then
 * ImagePullBackOff with the kubelet's doubling back-off. An image pulled once stays on the node.
 *
 * The pull-time model: a pull first takes --pull-latency-ms of its own (not shared), then
 * downloads the image's size over the node's link of --pull-mbps, which the downloads under way
 * on the node share equally (k downloads progress at F/k MB/s each, recomputed whenever one
 * starts or ends). A node runs one pull at a time (the kubelet's default serializeImagePulls),
 * or with --serialize-image-pulls=false up to --max-parallel-image-pulls at once (no limit when
 * unset); the others wait in FIFO order. Events happen at the milliseconds the model gives even
 * when the loop runs late. Within a pod, containers pull one after the other, in order, as the
 * kubelet's SyncPod starts them: while one container's pull is under way, the pod's other
 * container starts wait for it to end (pulled or failed). */
#include "ks_kubelet_int.h"

#include "kc_log.h"
#include "ks_admit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kl_waiter {
    char *pod_key, *uid;
    bool init;
    size_t idx;
} kl_waiter;

/* One image on one node: present, and/or with a pull job queued or running. */
typedef struct kl_img {
    char *key;  /* node "\n" normalized reference */
    char *node; /* node name */
    char *ref;  /* normalized reference (containerd's name) */
    bool present;
    bool job;           /* a pull is queued or running */
    bool running;       /* the job holds one of the node's pull slots */
    bool downloading;   /* running, past its latency: its bytes are coming */
    bool rounded;       /* left_ms went through the sharing arithmetic */
    bool job_fails;     /* the registry does not have it */
    char *fail_msg;     /* containerd's error when job_fails */
    uint64_t size;      /* bytes */
    uint64_t lat_ms;    /* the job's fixed latency */
    double solo_ms;     /* its download alone on the node's link (0: none) */
    double left_ms;     /* what is left of solo_ms (running) */
    uint64_t queued_ms; /* loop time the job was queued */
    uint64_t start_ms;  /* loop time it started running */
    uint64_t ready_ms;  /* start_ms + lat_ms: its download starts */
    uint64_t done_ms;   /* loop time it ends (projected while downloading) */
    kl_waiter *w;
    size_t nw, capw;
    struct kl_img *qnext; /* the node's queue */
} kl_img;

typedef struct kl_pullq {
    char *node;
    kl_img *head, *tail; /* queued jobs, head runs first */
    kl_img **run;        /* running jobs */
    size_t nrun, caprun;
    uint64_t at_ms; /* the downloads' progress is accounted up to this loop time */
    size_t busy_at; /* index in kl->busy + 1; 0: not there (nothing runs) */
} kl_pullq;

static void pullq_free(void *v)
{
    kl_pullq *q = v;
    if (!q)
        return;
    free(q->node);
    free(q->run);
    free(q);
}

static void waiter_free(kl_waiter *w)
{
    free(w->pod_key);
    free(w->uid);
}

static void img_free(void *v)
{
    kl_img *img = v;
    if (!img)
        return;
    for (size_t i = 0; i < img->nw; i++)
        waiter_free(&img->w[i]);
    free(img->w);
    free(img->key);
    free(img->node);
    free(img->ref);
    free(img->fail_msg);
    free(img);
}

bool ks_kubelet_check_pulls(bool serialize, const long *max, char *msg, size_t size)
{
    /* pkg/kubelet/apis/config/validation/validation.go */
    if (max && *max < 1) {
        snprintf(msg, size,
                 "invalid configuration: maxParallelImagePulls %ld must be a positive number",
                 *max);
        return false;
    }
    if (serialize && max && *max > 1) {
        snprintf(msg, size,
                 "invalid configuration: maxParallelImagePulls cannot be larger than 1 unless "
                 "SerializeImagePulls (--serialize-image-pulls) is set to false");
        return false;
    }
    return true;
}

bool kl_pull_init(struct ks_kubelet *kl, kc_err *err)
{
    const ks_opts *o = &kl->sim->opts;
    long max = o->max_parallel_pulls;
    char msg[256];
    if (!ks_kubelet_check_pulls(!o->parallel_pulls, max ? &max : NULL, msg, sizeof(msg))) {
        kc_err_set(err, KC_EINVALID, "%s", msg);
        return false;
    }
    if (o->any_image)
        return true;
    kl->reg = ks_registry_new();
    kl->imgs = kc_map_new();
    kl->pullqs = kc_map_new();
    if (!kl->reg || !kl->imgs || !kl->pullqs) {
        kc_err_set(err, KC_ENOMEM, "out of memory starting the kubelet's image puller");
        return false;
    }
    for (size_t i = 0; i < KS_OPTS_MAX_IMAGES_FILES && kl->sim->opts.images_files[i]; i++)
        if (ks_registry_load(kl->reg, kl->sim->opts.images_files[i], err) != KC_OK)
            return false;
    return true;
}

void kl_pull_free(struct ks_kubelet *kl)
{
    ks_registry_free(kl->reg);
    kc_map_free(kl->imgs, img_free);
    kc_map_free(kl->pullqs, pullq_free);
    free(kl->busy);
    kl->reg = NULL;
    kl->imgs = kl->pullqs = NULL;
    kl->busy = NULL;
    kl->n_busy = kl->cap_busy = 0;
}

/* Go's time.Duration formatting of milliseconds ("0s", "850ms", "1.25s", "2m3.5s"). */
static void go_duration(uint64_t ms, char *out, size_t size)
{
    if (ms == 0) {
        snprintf(out, size, "0s");
        return;
    }
    if (ms < 1000) {
        snprintf(out, size, "%llums", (unsigned long long)ms);
        return;
    }
    char sec[32];
    unsigned long long s = (ms / 1000) % 60, frac = ms % 1000;
    if (frac) {
        snprintf(sec, sizeof(sec), "%llu.%03llu", s, frac);
        char *e = sec + strlen(sec) - 1;
        while (*e == '0')
            *e-- = '\0';
    } else {
        snprintf(sec, sizeof(sec), "%llu", s);
    }
    if (ms >= 60000)
        snprintf(out, size, "%llum%ss", (unsigned long long)(ms / 60000), sec);
    else
        snprintf(out, size, "%ss", sec);
}

static const char *pull_policy(const kl_ctr *c)
{
    const json_t *spec = json_object_get(c->p->obj, "spec");
    const json_t *arr = json_object_get(spec, c->init ? "initContainers" : "containers");
    const char *pol =
        json_string_value(json_object_get(json_array_get(arr, c->idx), "imagePullPolicy"));
    return pol ? pol : ks_default_pull_policy(c->image); /* a pod admission did not default */
}

static void set_waiting(kl_ctr *c, const char *reason, const char *msg)
{
    c->state = CS_WAITING;
    snprintf(c->reason, sizeof(c->reason), "%s", reason);
    free(c->message);
    c->message = msg ? strdup(msg) : NULL;
}

static kl_pullq *node_queue(struct ks_kubelet *kl, const char *node)
{
    kl_pullq *q = kc_map_get(kl->pullqs, node);
    if (q)
        return q;
    q = calloc(1, sizeof(*q));
    if (q && (!(q->node = strdup(node)) || kc_map_put(kl->pullqs, node, q, NULL) != KC_OK)) {
        pullq_free(q);
        q = NULL;
    }
    return q;
}

/* Pulls a node runs at once: 1 when serialized (the kubelet's default), else the limit. */
static size_t pull_slots(const struct ks_kubelet *kl)
{
    const ks_opts *o = &kl->sim->opts;
    if (!o->parallel_pulls)
        return 1;
    return o->max_parallel_pulls > 0 ? (size_t)o->max_parallel_pulls : SIZE_MAX;
}

static bool busy_add(struct ks_kubelet *kl, kl_pullq *q)
{
    if (q->busy_at)
        return true;
    if (kl->n_busy == kl->cap_busy) {
        size_t cap = kl->cap_busy ? kl->cap_busy * 2 : 64;
        kl_pullq **a = realloc(kl->busy, cap * sizeof(*a));
        if (!a)
            return false;
        kl->busy = a;
        kl->cap_busy = cap;
    }
    kl->busy[kl->n_busy++] = q;
    q->busy_at = kl->n_busy;
    return true;
}

static void busy_remove(struct ks_kubelet *kl, kl_pullq *q)
{
    if (!q->busy_at)
        return;
    size_t i = q->busy_at - 1;
    kl_pullq *last = kl->busy[--kl->n_busy];
    kl->busy[i] = last;
    last->busy_at = i + 1;
    q->busy_at = 0;
}

/* The next loop time a running job changes: its latency ends, or its download. */
static uint64_t job_next(const kl_img *img)
{
    return img->downloading ? img->done_ms : img->ready_ms;
}

static uint64_t queue_next(const kl_pullq *q)
{
    uint64_t next = UINT64_MAX;
    for (size_t i = 0; i < q->nrun; i++)
        if (job_next(q->run[i]) < next)
            next = job_next(q->run[i]);
    return next;
}

/* Accounts the downloads' progress up to t: over the time since the last account, each of the k
 * downloads under way got 1/k of the link. */
static void progress(kl_pullq *q, uint64_t t)
{
    if (t <= q->at_ms)
        return;
    size_t k = 0;
    for (size_t i = 0; i < q->nrun; i++)
        k += q->run[i]->downloading;
    double got = k ? (double)(t - q->at_ms) / (double)k : 0;
    for (size_t i = 0; i < q->nrun; i++)
        if (q->run[i]->downloading) {
            q->run[i]->left_ms -= got;
            q->run[i]->rounded = true;
        }
    q->at_ms = t;
}

/* Projects each download's end from t (the progress accounted up to t): with k downloads on the
 * link, what is left takes k times as long. Rounded up to the millisecond: no pull ends before
 * its last byte could have arrived; a download alone from its start ends exactly as
 * --pull-mbps says, others ignore the sharing arithmetic's rounding noise. */
static void reshare(kl_pullq *q, uint64_t t)
{
    size_t k = 0;
    for (size_t i = 0; i < q->nrun; i++)
        k += q->run[i]->downloading;
    for (size_t i = 0; i < q->nrun; i++) {
        kl_img *img = q->run[i];
        if (!img->downloading)
            continue;
        double x = img->left_ms * (double)k;
        if (k > 1 || img->rounded)
            x -= 1e-6;
        img->done_ms = t + (x > 0 ? (uint64_t)ceil(x) : 0);
    }
}

/* Runs q's jobs forward to now, event by event at the loop times the model gives them (a latency
 * ending: the download starts; a download ending), however late the loop is. The jobs that
 * ended leave q for ended[] (room for q->nrun); returns how many. */
static size_t advance(kl_pullq *q, uint64_t now, kl_img **ended)
{
    size_t n = 0;
    for (uint64_t t; (t = queue_next(q)) <= now;) {
        progress(q, t);
        for (size_t i = 0; i < q->nrun;) {
            kl_img *img = q->run[i];
            bool end = false;
            if (img->downloading)
                end = img->done_ms <= t;
            else if (img->ready_ms <= t) {
                img->downloading = img->left_ms > 0;
                end = !img->downloading; /* nothing to download (a refresh, a failure) */
            }
            if (!end) {
                i++;
                continue;
            }
            img->done_ms = t;
            q->run[i] = q->run[--q->nrun];
            ended[n++] = img;
        }
        reshare(q, t);
    }
    return n;
}

static void arm_timer(struct ks_kubelet *kl)
{
    uint64_t next = UINT64_MAX, now = kl_now(kl);
    for (size_t i = 0; i < kl->n_busy; i++) {
        uint64_t t = queue_next(kl->busy[i]);
        if (t < next)
            next = t;
    }
    if (next == UINT64_MAX)
        uv_timer_stop(&kl->t_pull);
    else
        uv_timer_start(&kl->t_pull, kl_pull_on_timer, next > now ? next - now : 0, 0);
}

static void finish_job(struct ks_kubelet *kl, kl_img *img);

/* Starts the node's queued jobs while it has free pull slots. Jobs that take no time finish at
 * once (without a timer), so a cluster without the pull-time model starts pods as before. */
static void run_queue(struct ks_kubelet *kl, const char *node)
{
    for (;;) {
        kl_pullq *q = kc_map_get(kl->pullqs, node);
        uint64_t now = kl_now(kl);
        /* A job that ended already (the loop is late) leaves first: the timer ends it. */
        if (!q || !q->head || q->nrun >= pull_slots(kl) || queue_next(q) <= now)
            break;
        kl_img *img = q->head;
        q->head = img->qnext;
        if (!q->head)
            q->tail = NULL;
        img->qnext = NULL;
        img->running = true;
        img->start_ms = now;
        img->ready_ms = now + img->lat_ms;
        img->left_ms = img->solo_ms;
        img->rounded = false;
        img->downloading = false;
        if (img->lat_ms == 0 && img->solo_ms <= 0) {
            img->done_ms = now;
            finish_job(kl, img);
            continue;
        }
        if (q->nrun == q->caprun) {
            size_t cap = q->caprun ? q->caprun * 2 : 4;
            kl_img **a = realloc(q->run, cap * sizeof(*a));
            if (a) {
                q->run = a;
                q->caprun = cap;
            }
        }
        if (q->nrun == q->caprun || !busy_add(kl, q)) {
            img->done_ms = now;
            finish_job(kl, img); /* no memory to wait: finish it now */
            continue;
        }
        progress(q, now); /* the downloads so far, before one more shares the link */
        img->downloading = img->ready_ms == now;
        q->run[q->nrun++] = img;
        reshare(q, now);
    }
    arm_timer(kl);
}

/* The container the pod's start waits for has its pull ended (pulled or failed): the pod's next
 * waiting start goes on, in container order (init containers first), until one pulls. */
static void pod_next_start(kl_pod *p)
{
    while (!p->removed && p->stage != ST_DONE && p->stage != ST_DELETING && !p->pull_ctr) {
        kl_ctr *next = NULL;
        for (size_t i = 0; !next && i < p->n_init; i++)
            if (p->init[i].pull_defer)
                next = &p->init[i];
        for (size_t i = 0; !next && i < p->n_ctrs; i++)
            if (p->ctrs[i].pull_defer)
                next = &p->ctrs[i];
        if (!next)
            return;
        next->pull_defer = false;
        kl_pod_ctr_pulled(p, next);
    }
}

static kl_ctr *waiter_ctr(struct ks_kubelet *kl, const kl_waiter *w)
{
    kl_pod *p = kc_map_get(kl->pods, w->pod_key);
    if (!p || p->removed || strcmp(p->uid, w->uid) != 0 || p->stage == ST_DONE ||
        p->stage == ST_DELETING)
        return NULL;
    if (w->init ? w->idx >= p->n_init : w->idx >= p->n_ctrs)
        return NULL;
    kl_ctr *c = w->init ? &p->init[w->idx] : &p->ctrs[w->idx];
    return c->pull_wait ? c : NULL;
}

static void on_pull_backoff(uv_timer_t *t);

/* The job ended: every container waiting for it starts, or fails to pull. */
static void finish_job(struct ks_kubelet *kl, kl_img *img)
{
    uint64_t now = kl_now(kl);
    img->job = img->running = false;
    if (!img->job_fails)
        img->present = true;
    kl_waiter *w = img->w;
    size_t nw = img->nw;
    img->w = NULL;
    img->nw = img->capw = 0;
    char *fail = img->job_fails ? img->fail_msg : NULL;
    img->fail_msg = NULL;
    uint64_t pulled_ms = img->done_ms - img->start_ms, size = img->size, queued = img->queued_ms;
    if (img->job_fails && !img->present) {
        kc_map_remove(kl->imgs, img->key);
        img_free(img);
    }
    for (size_t i = 0; i < nw; i++) {
        kl_ctr *c = waiter_ctr(kl, &w[i]);
        waiter_free(&w[i]);
        if (!c)
            continue;
        kl_pod *p = c->p;
        c->pull_wait = false;
        if (p->pull_ctr == c)
            p->pull_ctr = NULL;
        /* The start that asked goes on by itself, then the pod's next ones. */
        bool sync = kl->pull_sync == c;
        if (fail) {
            kl_event(kl, p, c, "Warning", "Failed", "Failed to pull image \"%s\": %s", c->image,
                     fail);
            kl_event(kl, p, c, "Warning", "Failed", "Error: ErrImagePull");
            set_waiting(c, "ErrImagePull", fail);
            free(c->pull_err);
            c->pull_err = strdup(fail);
            int max = atomic_load(&kl->backoff_max_ms);
            c->pull_backoff_ms =
                c->pull_backoff_ms ? c->pull_backoff_ms * 2 : atomic_load(&kl->backoff_ms);
            if (c->pull_backoff_ms > max)
                c->pull_backoff_ms = max;
            /* ErrImagePull until the next sync, ImagePullBackOff for the rest of the back-off. */
            c->pull_phase = 1;
            uv_timer_start(&c->t_backoff, on_pull_backoff, (uint64_t)c->pull_backoff_ms / 2, 0);
            kl_pod_ctr_changed(p, c);
            if (!sync)
                pod_next_start(p); /* the kubelet goes on to the pod's next container */
            continue;
        }
        char took[32], total[32];
        go_duration(pulled_ms, took, sizeof(took));
        go_duration(now - queued, total, sizeof(total));
        kl_event(kl, p, c, "Normal", "Pulled",
                 "Successfully pulled image \"%s\" in %s (%s including waiting). Image size: %llu "
                 "bytes.",
                 c->image, took, total, (unsigned long long)size);
        c->pull_backoff_ms = 0;
        c->pulled = true;
        if (!sync) {
            kl_pod_ctr_pulled(p, c);
            pod_next_start(p);
        }
    }
    free(w);
    free(fail);
}

void kl_pull_on_timer(uv_timer_t *t)
{
    struct ks_kubelet *kl = t->data;
    uint64_t now = kl_now(kl);
    /* Collect the ended jobs first: finishing one starts containers, which may queue more. */
    size_t total = 0, n = 0;
    for (size_t i = 0; i < kl->n_busy; i++)
        total += kl->busy[i]->nrun;
    kl_img **ended = calloc(total + 1, sizeof(*ended));
    for (size_t i = 0; ended && i < kl->n_busy;) {
        kl_pullq *q = kl->busy[i];
        n += advance(q, now, ended + n);
        if (q->nrun == 0)
            busy_remove(kl, q); /* the last one moves to i */
        else
            i++;
    }
    for (size_t i = 0; i < n; i++) {
        char *node = strdup(ended[i]->node);
        finish_job(kl, ended[i]);
        if (node)
            run_queue(kl, node);
        free(node);
    }
    free(ended);
    arm_timer(kl);
}

static void on_pull_backoff(uv_timer_t *t)
{
    kl_ctr *c = (kl_ctr *)((char *)t - offsetof(kl_ctr, t_backoff));
    kl_pod *p = c->p;
    if (p->removed || p->stage == ST_DONE || p->stage == ST_DELETING)
        return;
    if (c->pull_phase == 1) {
        char msg[2048];
        snprintf(msg, sizeof(msg), "Back-off pulling image \"%s\": ErrImagePull: %s", c->image,
                 c->pull_err ? c->pull_err : "");
        kl_event(p->kl, p, c, "Normal", "BackOff", "Back-off pulling image \"%s\"", c->image);
        kl_event(p->kl, p, c, "Warning", "Failed", "Error: ImagePullBackOff");
        set_waiting(c, "ImagePullBackOff", msg);
        c->pull_phase = 2;
        uv_timer_start(&c->t_backoff, on_pull_backoff,
                       (uint64_t)(c->pull_backoff_ms - c->pull_backoff_ms / 2), 0);
        kl_pod_ctr_changed(p, c);
        return;
    }
    c->pull_phase = 0;
    kl_pod_ctr_pulled(p, c); /* try the pull again */
}

static bool add_waiter(kl_img *img, const kl_ctr *c)
{
    if (img->nw == img->capw) {
        size_t cap = img->capw ? img->capw * 2 : 4;
        kl_waiter *w = realloc(img->w, cap * sizeof(*w));
        if (!w)
            return false;
        img->w = w;
        img->capw = cap;
    }
    kl_waiter *w = &img->w[img->nw];
    w->pod_key = strdup(c->p->key);
    w->uid = strdup(c->p->uid);
    w->init = c->init;
    w->idx = c->idx;
    if (!w->pod_key || !w->uid) {
        waiter_free(w);
        return false;
    }
    img->nw++;
    return true;
}

/* A pull's download of `size` bytes alone on the node's link, in (fractional) milliseconds. */
static double download_ms(const struct ks_kubelet *kl, uint64_t size, bool refresh)
{
    double mbps = kl->sim->opts.pull_mbps;
    return !refresh && mbps > 0 ? (double)size / (mbps * 1e6) * 1000.0 : 0;
}

bool kl_pull_before_start(kl_ctr *c)
{
    kl_pod *p = c->p;
    struct ks_kubelet *kl = p->kl;
    if (!kl->reg)
        return false;
    if (c->pulled) { /* the pull this start waited for is done */
        c->pulled = false;
        return false;
    }
    if (c->pull_wait || c->pull_phase)
        return true; /* a pull or its back-off is under way */
    if (p->pull_ctr && p->pull_ctr != c) {
        c->pull_defer = true; /* after that pull, in order (pod_next_start) */
        return true;
    }
    c->pull_defer = false;
    ks_image_ref ref;
    kc_err e;
    if (ks_image_ref_parse(c->image, &ref, &e) != KC_OK) {
        char msg[1200];
        snprintf(msg, sizeof(msg), "Failed to apply default image tag \"%s\": %s", c->image, e.msg);
        kl_event(kl, p, c, "Warning", "InspectFailed", "%s", msg);
        kl_event(kl, p, c, "Warning", "Failed", "Error: InvalidImageName");
        set_waiting(c, "InvalidImageName", msg);
        kl_pod_ctr_changed(p, c);
        return true;
    }
    char key[1200];
    snprintf(key, sizeof(key), "%s\n%s", p->node, ref.full);
    kl_img *img = kc_map_get(kl->imgs, key);
    bool present = img && img->present;
    const char *pol = pull_policy(c);
    if (!strcmp(pol, "Never") || (present && !strcmp(pol, "IfNotPresent"))) {
        if (present) {
            kl_event(kl, p, c, "Normal", "Pulled",
                     "Container image \"%s\" already present on machine", c->image);
            return false;
        }
        char msg[1200];
        snprintf(msg, sizeof(msg),
                 "Container image \"%s\" is not present with pull policy of Never", c->image);
        kl_event(kl, p, c, "Warning", "ErrImageNeverPull", "%s", msg);
        kl_event(kl, p, c, "Warning", "Failed", "Error: ErrImageNeverPull");
        set_waiting(c, "ErrImageNeverPull", msg);
        kl_pod_ctr_changed(p, c);
        return true;
    }
    kl_event(kl, p, c, "Normal", "Pulling", "Pulling image \"%s\"", c->image);
    if (!img) {
        img = calloc(1, sizeof(*img));
        if (!img || !(img->key = strdup(key)) || !(img->node = strdup(p->node)) ||
            !(img->ref = strdup(ref.full)) || kc_map_put(kl->imgs, key, img, NULL) != KC_OK) {
            img_free(img);
            return false; /* out of memory: start without the model */
        }
    }
    if (!img->job) {
        /* Mapped images are the project's, built on this machine: they exist. */
        uint64_t size = 0;
        char msg[1500] = "";
        bool exists = ks_registry_resolve(kl->reg, &ref, &size, msg, sizeof(msg)) == KC_OK;
        if (!exists && c->map) {
            exists = true;
            size = 45ull << 20;
        }
        img->job = true;
        img->job_fails = !exists;
        free(img->fail_msg);
        img->fail_msg = exists ? NULL : strdup(msg);
        img->size = size;
        int lat = kl->sim->opts.pull_latency_ms;
        img->lat_ms = (uint64_t)(lat > 0 ? lat : 0);
        img->solo_ms = download_ms(kl, size, img->present || !exists);
        img->queued_ms = kl_now(kl);
        kl_pullq *q = node_queue(kl, p->node);
        if (!q) {
            img->job = false;
            return false;
        }
        if (q->tail)
            q->tail->qnext = img;
        else
            q->head = img;
        q->tail = img;
    }
    if (!add_waiter(img, c))
        return false;
    c->pull_wait = true;
    p->pull_ctr = c;
    /* A retry keeps the last pull error in the status, as the kubelet's reason cache does: the
     * pod never shows ContainerCreating again between ErrImagePull and ImagePullBackOff. */
    if (!c->pull_backoff_ms)
        set_waiting(c, c->init ? "PodInitializing" : "ContainerCreating", NULL);
    kl_ctr *outer = kl->pull_sync;
    kl->pull_sync = c;
    run_queue(kl, p->node);
    kl->pull_sync = outer;
    if (c->pulled) { /* pulled at once (no pull-time model): start now */
        c->pulled = false;
        return false;
    }
    return true;
}

void kl_pull_node_gone(struct ks_kubelet *kl, const char *node)
{
    if (!kl->reg)
        return;
    kl_pullq *q = kc_map_remove(kl->pullqs, node);
    if (q)
        busy_remove(kl, q);
    pullq_free(q);
    size_t nlen = strlen(node), pos = 0, n = 0;
    kl_img *img;
    kl_img **gone = calloc(kc_map_size(kl->imgs) + 1, sizeof(*gone));
    while (gone && kc_map_next(kl->imgs, &pos, NULL, (void **)&img))
        if (!strncmp(img->key, node, nlen) && img->key[nlen] == '\n')
            gone[n++] = img;
    for (size_t i = 0; i < n; i++) {
        kc_map_remove(kl->imgs, gone[i]->key);
        img_free(gone[i]);
    }
    free(gone);
    arm_timer(kl);
}
