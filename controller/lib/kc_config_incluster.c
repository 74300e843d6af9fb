/* kc_config_incluster: the in-cluster configuration and the file reading kubeconfigs share. */
#include "kc_config.h"
#include "kc_config_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SA_ROOT      "/var/run/secrets/kubernetes.io/serviceaccount"
#define SA_MAX_BYTES (4u << 20)

kc_code kc_config_read_file(const char *path, size_t max, char **buf, size_t *len, int *errno_out,
                            char *why, size_t why_size)
{
    int e = 0;
    char *data = NULL;
    kc_code rc = KC_EIO;
    *buf = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; non-regular files are refused below.
     */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        e = errno;
        snprintf(why, why_size, "%s", strerror(e));
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        e = errno;
        snprintf(why, why_size, "%s", strerror(e));
        goto close_fd;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, why_size, "%s",
                 S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
        goto close_fd;
    }
    if ((unsigned long long)st.st_size > max) {
        snprintf(why, why_size, "larger than %zu bytes", max);
        goto close_fd;
    }
    data = malloc((size_t)st.st_size + 1);
    if (!data) {
        rc = KC_ENOMEM;
        snprintf(why, why_size, "out of memory");
        goto close_fd;
    }
    /* Read up to the size seen by fstat; a file growing meanwhile is cut there. */
    size_t n = 0;
    while (n < (size_t)st.st_size) {
        ssize_t r = read(fd, data + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            e = errno;
            snprintf(why, why_size, "%s", strerror(e));
            goto free_data;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    data[n] = '\0';
    *buf = data;
    *len = n;
    data = NULL;
    rc = KC_OK;
free_data:
    free(data);
close_fd:
    close(fd);
out:
    if (errno_out)
        *errno_out = e;
    return rc;
}

char *kc_config_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == path)
        return strdup("/");
    if (slash && path[0] == '/')
        return strndup(path, (size_t)(slash - path));
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return strdup(".");
    char *r = NULL;
    if (!slash) {
        r = cwd;
        cwd = NULL;
    } else if (asprintf(&r, "%s/%.*s", cwd, (int)(slash - path), path) < 0) {
        r = NULL;
    }
    free(cwd);
    return r;
}

static bool port_valid(const char *p)
{
    if (!p[0] || strlen(p) > 5)
        return false;
    for (const char *c = p; *c; c++)
        if (*c < '0' || *c > '9')
            return false;
    long v = strtol(p, NULL, 10);
    return v >= 1 && v <= 65535;
}

/* Reads root/name; an optional file that does not exist gives KC_OK with *buf NULL. */
static kc_code read_sa_file(const char *root, const char *name, bool optional, char **buf,
                            size_t *len, char **path_out, kc_err *err)
{
    char *path = NULL, why[160];
    int e = 0;
    if (asprintf(&path, "%s/%s", root, name) < 0)
        return kc_err_set(err, KC_ENOMEM, "in-cluster config: out of memory");
    kc_code rc = kc_config_read_file(path, SA_MAX_BYTES, buf, len, &e, why, sizeof(why));
    if (rc == KC_ENOMEM) {
        rc = kc_err_set(err, KC_ENOMEM, "in-cluster config: out of memory");
    } else if (rc && optional && e == ENOENT) {
        rc = KC_OK;
    } else if (rc) {
        rc = kc_err_set(err, KC_ECONFIG, "in-cluster config: %s: cannot read: %s", path, why);
    }
    if (!rc && path_out)
        *path_out = path;
    else
        free(path);
    return rc;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && strchr(" \t\r\n", s[n - 1]))
        s[--n] = '\0';
    size_t lead = strspn(s, " \t\r\n");
    memmove(s, s + lead, n - lead + 1);
}

kc_code kc_config_load_incluster(const char *root, kc_config **out, kc_err *err)
{
    if (!out)
        return kc_err_set(err, KC_EARG, "kc_config_load_incluster: NULL out");
    *out = NULL;
    /* kubesim's kubelet runs pods as local processes whose service-account files cannot live at
     * the standard path: it names their directory in KC_INCLUSTER_ROOT. */
    const char *env_root = getenv("KC_INCLUSTER_ROOT");
    if (!root || !root[0])
        root = env_root && env_root[0] ? env_root : SA_ROOT;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !host[0])
        return kc_err_set(err, KC_ECONFIG,
                          "in-cluster config: KUBERNETES_SERVICE_HOST is not set (not running in "
                          "a pod?)");
    if (!port || !port[0])
        return kc_err_set(err, KC_ECONFIG, "in-cluster config: KUBERNETES_SERVICE_PORT is not set");
    if (!port_valid(port))
        return kc_err_set(
            err, KC_ECONFIG,
            "in-cluster config: KUBERNETES_SERVICE_PORT=\"%.40s\" is not a port number", port);
    if (strpbrk(host, "/?#@ []"))
        return kc_err_set(
            err, KC_ECONFIG,
            "in-cluster config: KUBERNETES_SERVICE_HOST=\"%.100s\" is not a host name "
            "or address",
            host);
    kc_code rc = KC_OK;
    char *tok = NULL, *ns = NULL;
    size_t tok_len = 0, ns_len = 0;
    kc_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return kc_err_set(err, KC_ENOMEM, "in-cluster config: out of memory");
    /* An IPv6 address needs brackets to be told apart from the port. */
    bool v6 = strchr(host, ':') != NULL;
    if (asprintf(&cfg->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0) {
        cfg->server = NULL;
        goto oom;
    }
    rc = read_sa_file(root, "token", false, &tok, &tok_len, &cfg->token_file, err);
    if (rc)
        goto fail;
    trim(tok);
    bool empty = tok[0] == '\0';
    explicit_bzero(tok, tok_len);
    free(tok);
    if (empty) {
        rc = kc_err_set(err, KC_ECONFIG, "in-cluster config: %s: the token file is empty",
                        cfg->token_file);
        goto fail;
    }
    rc = read_sa_file(root, "ca.crt", false, &cfg->ca_pem, &cfg->ca_pem_len, &cfg->ca_file, err);
    if (rc)
        goto fail;
    rc = read_sa_file(root, "namespace", true, &ns, &ns_len, NULL, err);
    if (rc)
        goto fail;
    if (ns)
        trim(ns);
    if (ns && ns[0]) {
        cfg->namespace_ = ns;
        ns = NULL;
    } else {
        cfg->namespace_ = strdup("default");
    }
    free(ns);
    cfg->source = strdup("in-cluster");
    if (!cfg->namespace_ || !cfg->source)
        goto oom;
    *out = cfg;
    return KC_OK;
oom:
    rc = kc_err_set(err, KC_ENOMEM, "in-cluster config: out of memory");
fail:
    kc_config_free(cfg);
    return rc;
}
