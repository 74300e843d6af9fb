/* ns_reauth: nodesim's bearer token kept in step with its kubeconfig (ns_reauth.h). */
#include "ns_reauth.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kc_log.h"

struct ns_reauth {
    char *kubeconfig; /* the file to watch */
    char *context;    /* the context it was loaded with, or NULL */
    char *server;     /* the API server it was loaded with */
    char *token;      /* the token now in token_file */
    char token_file[PATH_MAX];
    struct stat seen; /* the kubeconfig as last read */
    bool moved_said;
    long period_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop;
};

/* Writes token to path through a new file (a new inode: the client notices the change). */
static bool write_token(const char *path, const char *token)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    size_t n = strlen(token);
    bool ok = write(fd, token, n) == (ssize_t)n;
    ok = close(fd) == 0 && ok;
    if (ok && rename(tmp, path) == 0)
        return true;
    unlink(tmp);
    return false;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

bool ns_reauth_check(ns_reauth *r)
{
    struct stat st;
    if (!r || stat(r->kubeconfig, &st) != 0 || same_file(&st, &r->seen))
        return false;
    kc_config *cfg = NULL;
    kc_err err = {0};
    if (kc_config_load_kubeconfig(r->kubeconfig, r->context, &cfg, &err) != KC_OK) {
        /* Being rewritten, perhaps: read it again next time. */
        return false;
    }
    r->seen = st;
    bool changed = false;
    if (cfg->server && strcmp(cfg->server, r->server) != 0 && !r->moved_said) {
        kc_warn("nodesim: the kubeconfig names another API server now; restart nodesim to follow "
                "it",
                "was=%s now=%s", r->server, cfg->server);
        r->moved_said = true;
    }
    if (cfg->token && *cfg->token && strcmp(cfg->token, r->token) != 0) {
        char *t = strdup(cfg->token);
        if (t && write_token(r->token_file, t)) {
            free(r->token);
            r->token = t;
            changed = true;
            kc_info("nodesim: the kubeconfig holds a new token: authenticating with it",
                    "kubeconfig=%s", r->kubeconfig);
        } else {
            free(t);
            kc_warn("nodesim: cannot write the new token", "file=%s", r->token_file);
        }
    }
    kc_config_free(cfg);
    return changed;
}

static void *watch_main(void *arg)
{
    ns_reauth *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += r->period_ms / 1000;
        ts.tv_nsec += (r->period_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->cond, &r->mu, &ts);
        if (r->stop)
            break;
        pthread_mutex_unlock(&r->mu);
        ns_reauth_check(r);
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void reauth_free(ns_reauth *r)
{
    if (r->token_file[0])
        unlink(r->token_file);
    free(r->kubeconfig);
    free(r->context);
    free(r->server);
    free(r->token);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    free(r);
}

kc_code ns_reauth_start(kc_config *cfg, long period_ms, ns_reauth **out, kc_err *err)
{
    *out = NULL;
    struct stat st;
    if (!cfg || !cfg->token || !*cfg->token || cfg->token_file || !cfg->source || !cfg->server ||
        stat(cfg->source, &st) != 0 || !S_ISREG(st.st_mode))
        return KC_OK;
    ns_reauth *r = calloc(1, sizeof(*r));
    if (!r)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->period_ms = period_ms > 0 ? period_ms : 1000;
    r->seen = st;
    r->kubeconfig = strdup(cfg->source);
    r->context = cfg->context ? strdup(cfg->context) : NULL;
    r->server = strdup(cfg->server);
    r->token = strdup(cfg->token);
    const char *tmpdir = getenv("TMPDIR");
    snprintf(r->token_file, sizeof(r->token_file), "%s/nodesim-token.XXXXXX",
             tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(r->token_file);
    if (fd >= 0)
        close(fd);
    char *tf = fd >= 0 ? strdup(r->token_file) : NULL;
    if (fd < 0)
        r->token_file[0] = '\0';
    if (!r->kubeconfig || (cfg->context && !r->context) || !r->server || !r->token || !tf ||
        !write_token(r->token_file, r->token)) {
        kc_code rc =
            fd < 0 ? kc_err_set(err, KC_EIO, "cannot create a token file: %s", strerror(errno))
                   : kc_err_set(err, KC_ENOMEM, "cannot set up the token file");
        free(tf);
        reauth_free(r);
        return rc;
    }
    if (pthread_create(&r->thread, NULL, watch_main, r) != 0) {
        free(tf);
        reauth_free(r);
        return kc_err_set(err, KC_ENOMEM, "cannot start the kubeconfig watcher");
    }
    free(cfg->token);
    cfg->token = NULL;
    cfg->token_file = tf;
    *out = r;
    return KC_OK;
}

void ns_reauth_stop(ns_reauth *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    reauth_free(r);
}
