/* ks_store_persist: the store's committed state on disk, as etcd keeps it. store.snap holds every
 * object at one resourceVersion; store.log every commit after it, one JSON line each, appended
 * (write(2)) under the store's write lock before the write returns, so a killed kubesim loses no
 * acknowledged write. A thread syncs the log to the disk once a second and folds it into a new
 * snapshot (written to a temporary file, synced, renamed) when it has grown. On open, the snapshot
 * is loaded and the log replayed: resourceVersions, uids, timestamps and generations are the
 * stored ones, the commits of the log become the watch history again (a watch resuming from a
 * resourceVersion at or after the snapshot's gets the events, an older one 410 Gone), and new
 * commits continue from the last resourceVersion. */
#include "ks_store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kc_log.h"

#define SNAP_NAME "store.snap"
#define LOG_NAME  "store.log"
/* The log is folded into a new snapshot when it is larger than this and than the snapshot. */
#define COMPACT_MIN_BYTES (32u << 20)

struct ks_persist {
    int fd; /* the log, O_APPEND */
    char *dir;
    uint64_t log_bytes, snap_bytes;
    bool dirty;  /* written since the last sync (atomics) */
    bool failed; /* a log write failed: said once */
    pthread_t thread;
    bool thread_on;
    pthread_mutex_t mu; /* the sync thread's sleep and stop */
    pthread_cond_t cond;
    pthread_mutex_t cmu; /* one snapshot at a time: compactions run under the read lock */
    bool stop;
    size_t compact_min;
    char *buf; /* the line being written (write lock held) */
    size_t cap;
    ks_persist_stats stats;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool put(ks_persist *p, const char *s, size_t n, size_t *len)
{
    if (*len + n + 1 > p->cap) {
        size_t ncap = p->cap ? p->cap : 4096;
        while (ncap < *len + n + 1)
            ncap *= 2;
        char *nb = realloc(p->buf, ncap);
        if (!nb)
            return false;
        p->buf = nb;
        p->cap = ncap;
    }
    memcpy(p->buf + *len, s, n);
    *len += n;
    return true;
}

static int dump_cb(const char *s, size_t n, void *ud)
{
    void **a = ud;
    return put(a[0], s, n, a[1]) ? 0 : -1;
}

/* One record in p->buf: {"rv":N,"e":"A|M|D","g":G,"r":R,"c":namespaced,"s":ns,"n":name,"o":obj}
 * (no "o" for D). Returns its length, 0 when out of memory. */
static size_t format(ks_persist *p, char e, const ks_bucket *b, const json_t *obj, uint64_t rv)
{
    size_t len = 0;
    json_t *hdr = json_pack("{s:I, s:s#, s:s, s:s, s:b, s:s, s:s}", "rv", (json_int_t)rv, "e", &e,
                            (size_t)1, "g", b->group, "r", b->resource, "c", b->namespaced, "s",
                            kss_meta_str(obj, "namespace"), "n", kss_meta_str(obj, "name"));
    if (!hdr)
        return 0;
    void *ud[2] = {p, &len};
    bool ok = json_dump_callback(hdr, dump_cb, ud, JSON_COMPACT | JSON_PRESERVE_ORDER) == 0;
    json_decref(hdr);
    if (!ok || len == 0)
        return 0;
    len--; /* reopen the object */
    if (e != 'D') {
        ok = put(p, ",\"o\":", 5, &len) && json_dump_callback(obj, dump_cb, ud, JSON_COMPACT) == 0;
        if (!ok)
            return 0;
    }
    return put(p, "}\n", 2, &len) ? len : 0;
}

static bool write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

void kss_persist_append(ks_store *st, ks_event_type type, ks_bucket *b, const json_t *obj,
                        uint64_t rv)
{
    ks_persist *p = st->persist;
    if (!p || type == KS_BOOKMARK)
        return;
    uint64_t t0 = now_ns();
    char e = type == KS_ADDED ? 'A' : type == KS_MODIFIED ? 'M' : 'D';
    size_t len = format(p, e, b, obj, rv);
    if (len == 0 || !write_all(p->fd, p->buf, len)) {
        if (!p->failed)
            kc_error("kubesim: cannot append to the store log: this and later writes may be "
                     "lost on restart",
                     "dir=%s err=\"%s\"", p->dir, len ? strerror(errno) : "out of memory");
        p->failed = true;
        return;
    }
    __atomic_add_fetch(&p->log_bytes, len, __ATOMIC_RELAXED);
    __atomic_store_n(&p->dirty, true, __ATOMIC_RELEASE);
    p->stats.records++;
    p->stats.bytes += len;
    p->stats.ns += now_ns() - t0;
}

/* ---- loading ---- */

static void path_of(const ks_persist *p, const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", p->dir, name);
}

/* Drops every object the fresh store holds (its bootstrap namespaces) and its history. */
static void clear_store(ks_store *st)
{
    for (size_t i = 0; i < st->nbuckets; i++) {
        ks_bucket *b = st->buckets[i];
        while (b->n > 0) {
            ks_obj *o = b->sorted[b->n - 1];
            kss_index_remove(b, o);
            kss_obj_free(o);
        }
    }
    kss_history_clear(st);
}

/* Applies one record. publish: record it in the watch history (log records; snapshot ones are
 * not events). */
static kc_code apply(ks_store *st, json_t *rec, bool publish, uint64_t *rv_out, kc_err *err)
{
    json_int_t rv = json_integer_value(json_object_get(rec, "rv"));
    const char *e = json_string_value(json_object_get(rec, "e"));
    const char *g = json_string_value(json_object_get(rec, "g"));
    const char *r = json_string_value(json_object_get(rec, "r"));
    const char *ns = json_string_value(json_object_get(rec, "s"));
    const char *name = json_string_value(json_object_get(rec, "n"));
    json_t *obj = json_object_get(rec, "o");
    if (rv <= 0 || !e || !g || !r || !ns || !name || !*name || (*e != 'D' && !json_is_object(obj)))
        return kss_err(err, KC_EINVALID, 500, "malformed record");
    ks_bucket *b = kss_bucket_get(st, g, r, json_is_true(json_object_get(rec, "c")));
    if (!b)
        return kss_err(err, KC_ENOMEM, 500, "out of memory");
    ks_obj *o = kss_find(b, ns, name);
    *rv_out = (uint64_t)rv;
    if (*e == 'D') {
        if (!o)
            return KC_OK;
        kss_index_remove(b, o);
        if (publish) {
            json_t *final = json_copy(o->obj);
            json_t *meta = json_copy(json_object_get(o->obj, "metadata"));
            if (final && meta) {
                char buf[24];
                snprintf(buf, sizeof(buf), "%lld", (long long)rv);
                json_object_set_new(meta, "resourceVersion", json_string(buf));
                json_object_set(final, "metadata", meta);
                kss_publish(st, KS_DELETED, NULL, b, o->obj, final, (uint64_t)rv);
            }
            json_decref(meta);
            json_decref(final);
        }
        kss_obj_free(o);
        return KC_OK;
    }
    json_incref(obj);
    if (o) {
        json_t *old = o->obj;
        if (b->oidx)
            kss_oidx_remove(b, o, old);
        o->obj = obj;
        if (b->oidx)
            kss_oidx_add(b, o);
        if (publish)
            kss_publish(st, KS_MODIFIED, NULL, b, old, obj, (uint64_t)rv);
        json_decref(old);
        return KC_OK;
    }
    o = calloc(1, sizeof(*o));
    if (!o) {
        json_decref(obj);
        return kss_err(err, KC_ENOMEM, 500, "out of memory");
    }
    o->obj = obj;
    o->ns = strdup(ns);
    o->name = strdup(name);
    if (!o->ns || !o->name || kss_index_add(b, o) != KC_OK) {
        kss_obj_free(o);
        return kss_err(err, KC_ENOMEM, 500, "out of memory");
    }
    if (publish)
        kss_publish(st, KS_ADDED, NULL, b, NULL, obj, (uint64_t)rv);
    return KC_OK;
}

/* Loads one file of records. Snapshot: the first line is {"rv":N} and *rv is set from it. Log:
 * records at or below *rv are skipped (already in the snapshot); a torn last line (a write cut
 * short by a crash of the machine) is dropped and *good_end says where the log is valid. */
static kc_code load_file(ks_store *st, const char *path, bool snapshot, uint64_t *rv,
                         off_t *good_end, size_t *count, kc_err *err)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT)
            return KC_ENOTFOUND;
        return kss_err(err, KC_EIO, 500, "cannot read %s: %s", path, strerror(errno));
    }
    kc_code rc = KC_OK;
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t n;
    off_t off = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        json_error_t je;
        bool complete = line[n - 1] == '\n';
        json_t *rec = complete ? json_loadb(line, (size_t)n, 0, &je) : NULL;
        if (!rec) {
            if (!snapshot && (!complete || getc(f) == EOF)) {
                kc_warn("kubesim: dropping a torn last record of the store log", "path=%s line=%zu",
                        path, lineno);
                break;
            }
            rc = kss_err(err, KC_EINVALID, 500, "%s:%zu: not a record: %s", path, lineno,
                         complete ? je.text : "truncated");
            break;
        }
        if (snapshot && lineno == 1) {
            json_int_t v = json_integer_value(json_object_get(rec, "rv"));
            json_decref(rec);
            if (v <= 0) {
                rc = kss_err(err, KC_EINVALID, 500, "%s: no resourceVersion in the header", path);
                break;
            }
            *rv = (uint64_t)v;
            off += n;
            continue;
        }
        uint64_t rrv = 0;
        if (snapshot || (uint64_t)json_integer_value(json_object_get(rec, "rv")) > *rv) {
            rc = apply(st, rec, !snapshot, &rrv, err);
            if (rc == KC_OK && !snapshot)
                *rv = rrv;
            (*count)++;
        }
        json_decref(rec);
        if (rc != KC_OK) {
            kc_err_prefix(err, "%s:%zu", path, lineno);
            break;
        }
        off += n;
    }
    if (rc == KC_OK && snapshot && lineno == 0)
        rc = kss_err(err, KC_EINVALID, 500, "%s is empty", path);
    free(line);
    fclose(f);
    if (good_end)
        *good_end = off;
    return rc;
}

/* ---- snapshots ---- */

static kc_code sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return KC_EIO;
    int r = fsync(fd);
    close(fd);
    return r == 0 ? KC_OK : KC_EIO;
}

/* Writes every object at the current resourceVersion to store.snap and empties the log. The
 * caller holds the store's lock (read or write: no commit runs meanwhile). */
static kc_code compact_locked(ks_store *st, kc_err *err)
{
    ks_persist *p = st->persist;
    uint64_t t0 = now_ns();
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    path_of(p, SNAP_NAME, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return kss_err(err, KC_EIO, 500, "cannot create %s: %s", tmp, strerror(errno));
    kc_code rc = KC_OK;
    uint64_t bytes = 0;
    char hdr[64];
    int hl = snprintf(hdr, sizeof(hdr), "{\"rv\":%llu,\"kubesim-store\":1}\n",
                      (unsigned long long)st->rv);
    if (!write_all(fd, hdr, (size_t)hl))
        goto io;
    bytes += (uint64_t)hl;
    for (size_t i = 0; i < st->nbuckets; i++) {
        ks_bucket *b = st->buckets[i];
        for (size_t j = 0; j < b->n; j++) {
            const json_t *obj = b->sorted[j]->obj;
            uint64_t orv = strtoull(kss_meta_str(obj, "resourceVersion"), NULL, 10);
            size_t len = format(p, 'A', b, obj, orv ? orv : st->rv);
            if (len == 0) {
                rc = kss_err(err, KC_ENOMEM, 500, "out of memory writing %s", tmp);
                goto fail;
            }
            if (!write_all(fd, p->buf, len))
                goto io;
            bytes += len;
        }
    }
    if (fsync(fd) != 0)
        goto io;
    if (close(fd) != 0) {
        fd = -1;
        goto io;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto io;
    sync_dir(p->dir);
    /* The snapshot holds everything the log did: start it afresh. */
    if (ftruncate(p->fd, 0) != 0 || fsync(p->fd) != 0)
        goto io;
    __atomic_store_n(&p->log_bytes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->snap_bytes, bytes, __ATOMIC_RELAXED);
    p->stats.compactions++;
    p->stats.last_compact_ns = now_ns() - t0;
    return KC_OK;
io:
    rc = kss_err(err, KC_EIO, 500, "cannot write %s: %s", tmp, strerror(errno));
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return rc;
}

kc_code ks_store_persist_compact(ks_store *st, kc_err *err)
{
    if (!st->persist)
        return kss_err(err, KC_EARG, 500, "the store is not persisted");
    pthread_rwlock_rdlock(&st->lock);
    pthread_mutex_lock(&st->persist->cmu);
    kc_code rc = compact_locked(st, err);
    pthread_mutex_unlock(&st->persist->cmu);
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

static void *sync_main(void *arg)
{
    ks_store *st = arg;
    ks_persist *p = st->persist;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&p->cond, &p->mu, &ts);
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->mu);
        if (__atomic_exchange_n(&p->dirty, false, __ATOMIC_ACQ_REL))
            fdatasync(p->fd);
        uint64_t lb = __atomic_load_n(&p->log_bytes, __ATOMIC_RELAXED);
        if (lb > p->compact_min && lb > __atomic_load_n(&p->snap_bytes, __ATOMIC_RELAXED)) {
            kc_err e = {0};
            if (ks_store_persist_compact(st, &e) != KC_OK)
                kc_warn("kubesim: store snapshot failed", "err=\"%s\"", e.msg);
        }
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void kss_persist_close(ks_store *st)
{
    ks_persist *p = st->persist;
    if (!p)
        return;
    if (p->thread_on) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
    }
    if (p->fd >= 0) {
        fdatasync(p->fd);
        close(p->fd);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->cmu);
    pthread_cond_destroy(&p->cond);
    free(p->buf);
    free(p->dir);
    free(p);
    st->persist = NULL;
}

kc_code ks_store_persist_open(ks_store *st, const char *dir, ks_persist_info *info, kc_err *err)
{
    if (info)
        memset(info, 0, sizeof(*info));
    if (!st || !dir || !*dir)
        return kss_err(err, KC_EARG, 500, "ks_store_persist_open: a directory is required");
    if (st->persist)
        return kss_err(err, KC_EARG, 500, "the store is already persisted");
    uint64_t t0 = now_ns();
    ks_persist *p = calloc(1, sizeof(*p));
    if (!p || !(p->dir = strdup(dir))) {
        free(p);
        return kss_err(err, KC_ENOMEM, 500, "out of memory");
    }
    p->fd = -1;
    p->compact_min = COMPACT_MIN_BYTES;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->cmu, NULL);
    pthread_cond_init(&p->cond, NULL);
    pthread_rwlock_wrlock(&st->lock);
    st->persist = p;
    char snap[PATH_MAX], logp[PATH_MAX];
    path_of(p, SNAP_NAME, snap, sizeof(snap));
    path_of(p, LOG_NAME, logp, sizeof(logp));
    uint64_t snap_rv = 0, rv = 0;
    size_t nsnap = 0, nlog = 0;
    off_t good = 0;
    struct stat sb;
    kc_code rc;
    bool have = stat(snap, &sb) == 0;
    if (have) {
        clear_store(st);
        st->persist = NULL; /* nothing applied is written back */
        rc = load_file(st, snap, true, &snap_rv, NULL, &nsnap, err);
        p->snap_bytes = (uint64_t)sb.st_size;
        st->hfloor = snap_rv;
        st->rv = snap_rv;
        rv = snap_rv;
        if (rc == KC_OK) {
            rc = load_file(st, logp, false, &rv, &good, &nlog, err);
            if (rc == KC_ENOTFOUND)
                rc = KC_OK;
        }
        st->persist = p;
        if (rc != KC_OK)
            goto fail;
        st->rv = rv;
        st->delivered_rv = rv;
    }
    p->fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (p->fd < 0) {
        rc = kss_err(err, KC_EIO, 500, "cannot open %s: %s", logp, strerror(errno));
        goto fail;
    }
    if (have) {
        /* A torn record at the end is cut off so the next one starts on its own line. */
        if (fstat(p->fd, &sb) == 0 && sb.st_size > good && ftruncate(p->fd, good) != 0) {
            rc = kss_err(err, KC_EIO, 500, "cannot truncate %s: %s", logp, strerror(errno));
            goto fail;
        }
        p->log_bytes = (uint64_t)good;
    } else {
        /* A new state: the snapshot of what the store was created with (its namespaces). */
        if (ftruncate(p->fd, 0) != 0) {
            rc = kss_err(err, KC_EIO, 500, "cannot truncate %s: %s", logp, strerror(errno));
            goto fail;
        }
        if ((rc = compact_locked(st, err)) != KC_OK)
            goto fail;
    }
    if (pthread_create(&p->thread, NULL, sync_main, st) == 0)
        p->thread_on = true;
    if (info) {
        info->restored = have;
        info->objects = 0;
        for (size_t i = 0; i < st->nbuckets; i++)
            info->objects += st->buckets[i]->n;
        info->snapshot_records = nsnap;
        info->log_records = nlog;
        info->rv = st->rv;
        info->snapshot_rv = have ? snap_rv : st->rv;
        info->load_ms = (double)(now_ns() - t0) / 1e6;
    }
    pthread_rwlock_unlock(&st->lock);
    return KC_OK;
fail:
    pthread_rwlock_unlock(&st->lock);
    kc_err_prefix(err, "restoring the store from %s", dir);
    kss_persist_close(st);
    return rc;
}

void ks_store_persist_stats(ks_store *st, ks_persist_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!st->persist)
        return;
    pthread_rwlock_rdlock(&st->lock);
    *out = st->persist->stats;
    out->log_bytes = st->persist->log_bytes;
    pthread_rwlock_unlock(&st->lock);
}
