/* ks_kubelet_log: container logs kept in memory (the last `cap` bytes per container, cut at a
 * line start) for `kubectl logs`, and appended to <dir>/logs/<ns>_<pod>_<container>.log. */
#include "ks_kubelet.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct log_buf {
    char *data;
    size_t len, cap;
    int fd; /* the file copy, -1 when none */
} log_buf;

struct ks_kl_logs {
    pthread_mutex_t mu;
    kc_map *m; /* "ns/pod/container" → log_buf */
    char *dir; /* NULL: memory only */
    size_t cap;
};

static void buf_free(void *v)
{
    log_buf *b = v;
    if (!b)
        return;
    if (b->fd >= 0)
        close(b->fd);
    free(b->data);
    free(b);
}

ks_kl_logs *ks_kl_logs_new(const char *dir, size_t cap)
{
    ks_kl_logs *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->m = kc_map_new();
    l->dir = dir ? strdup(dir) : NULL;
    l->cap = cap ? cap : (1u << 20);
    if (!l->m || (dir && !l->dir)) {
        kc_map_free(l->m, NULL);
        free(l->dir);
        free(l);
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    return l;
}

void ks_kl_logs_free(ks_kl_logs *l)
{
    if (!l)
        return;
    kc_map_free(l->m, buf_free);
    free(l->dir);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void ks_kl_logs_set_cap(ks_kl_logs *l, size_t cap)
{
    if (!l || !cap)
        return;
    pthread_mutex_lock(&l->mu);
    l->cap = cap;
    pthread_mutex_unlock(&l->mu);
}

/* Drops the oldest bytes so that `extra` more fit in cap, starting the kept part at a line. */
static void make_room(log_buf *b, size_t extra, size_t cap)
{
    if (b->len + extra <= cap)
        return;
    size_t drop = b->len + extra - cap;
    if (drop >= b->len) {
        b->len = 0;
        return;
    }
    const char *nl = memchr(b->data + drop, '\n', b->len - drop);
    if (nl && (size_t)(nl - b->data) + 1 < b->len)
        drop = (size_t)(nl - b->data) + 1;
    memmove(b->data, b->data + drop, b->len - drop);
    b->len -= drop;
}

static void file_append(ks_kl_logs *l, log_buf *b, const char *ns, const char *pod, const char *ctr,
                        const char *text, size_t len)
{
    if (!l->dir)
        return;
    if (b->fd < 0) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s_%s_%s.log", l->dir, ns, pod, ctr);
        b->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (b->fd < 0)
            return;
    }
    while (len) {
        ssize_t n = write(b->fd, text, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        text += n;
        len -= (size_t)n;
    }
}

void ks_kl_logs_append(ks_kl_logs *l, const char *ns, const char *pod, const char *container,
                       const char *text, size_t len)
{
    if (!l || !len)
        return;
    char key[1024];
    snprintf(key, sizeof(key), "%s/%s/%s", ns, pod, container);
    pthread_mutex_lock(&l->mu);
    log_buf *b = kc_map_get(l->m, key);
    if (!b) {
        b = calloc(1, sizeof(*b));
        if (!b)
            goto unlock;
        b->fd = -1;
        if (kc_map_put(l->m, key, b, NULL) != KC_OK) {
            free(b);
            goto unlock;
        }
    }
    file_append(l, b, ns, pod, container, text, len);
    const char *keep = text;
    size_t klen = len;
    if (klen > l->cap) {
        keep = text + (klen - l->cap);
        klen = l->cap;
    }
    make_room(b, klen, l->cap);
    if (b->len + klen > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + klen)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            goto unlock;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, keep, klen);
    b->len += klen;
unlock:
    pthread_mutex_unlock(&l->mu);
}

bool ks_kl_logs_get(ks_kl_logs *l, const char *ns, const char *pod, const char *container,
                    long tail_lines, char **out, size_t *len)
{
    char key[1024];
    snprintf(key, sizeof(key), "%s/%s/%s", ns, pod, container);
    bool found = false;
    pthread_mutex_lock(&l->mu);
    log_buf *b = kc_map_get(l->m, key);
    if (!b)
        goto unlock;
    size_t start = 0;
    if (tail_lines >= 0) {
        /* Walk back over tail_lines line ends (a final partial line counts as a line). */
        size_t i = b->len;
        long lines = 0;
        if (i > 0 && b->data[i - 1] == '\n')
            i--;
        while (i > 0) {
            if (b->data[i - 1] == '\n' && ++lines == tail_lines)
                break;
            i--;
        }
        start = tail_lines == 0 ? b->len : i;
    }
    size_t n = b->len - start;
    char *copy = malloc(n + 1);
    if (!copy)
        goto unlock;
    memcpy(copy, b->data + start, n);
    copy[n] = '\0';
    *out = copy;
    if (len)
        *len = n;
    found = true;
unlock:
    pthread_mutex_unlock(&l->mu);
    return found;
}

void ks_kl_logs_drop_pod(ks_kl_logs *l, const char *ns, const char *pod)
{
    if (!l)
        return;
    char prefix[1024];
    int plen = snprintf(prefix, sizeof(prefix), "%s/%s/", ns, pod);
    pthread_mutex_lock(&l->mu);
    for (;;) {
        const char *k, *hit = NULL;
        size_t pos = 0;
        while (kc_map_next(l->m, &pos, &k, NULL))
            if (strncmp(k, prefix, (size_t)plen) == 0) {
                hit = k;
                break;
            }
        if (!hit)
            break;
        buf_free(kc_map_remove(l->m, hit));
    }
    pthread_mutex_unlock(&l->mu);
}
