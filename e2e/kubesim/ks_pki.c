/* ks_pki: kubesim's cluster CA and serving certificate (OpenSSL 3, EC P-256), kept in the state
 * directory and reused across starts while valid, and the admin kubeconfig that points at them. */
#include "ks_pki.h"
#include "ks_auth.h"
#include "ks_sim.h"

#include "kc_base64.h"
#include "kc_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CA_DAYS      3650
#define SERVING_DAYS 365
/* Certificates expiring sooner than this are replaced on start rather than reused. */
#define MIN_LEFT_S (7L * 24 * 3600)
#define MAX_FILE   (16u << 20)

static const char *const serving_dns[] = {"localhost",
                                          "kubernetes",
                                          "kubernetes.default",
                                          "kubernetes.default.svc",
                                          "kubernetes.default.svc.cluster.local",
                                          NULL};
static const char *const serving_ips[] = {"127.0.0.1", "::1", NULL};

/* ---- files ---- */

kc_code ks_pki_mkdirs(const char *path, kc_err *err)
{
    if (!path || !*path)
        return kc_err_set(err, KC_EARG, "empty directory path");
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return kc_err_set(err, KC_EARG, "directory path too long: %s", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return kc_err_set(err, KC_EIO, "cannot create directory %s: %s", buf, strerror(errno));
        struct stat st;
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
            return kc_err_set(err, KC_EIO, "cannot use %s as a directory: it is not one", buf);
        *p = c;
        if (c == '\0')
            break;
    }
    return KC_OK;
}

kc_code ks_pki_write_file(const char *path, const void *data, size_t len, mode_t mode, kc_err *err)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return kc_err_set(err, KC_EARG, "file path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return kc_err_set(err, KC_EIO, "cannot create %s: %s", tmp, strerror(errno));
    kc_code rc = KC_OK;
    /* open() applied the umask; the key files must be exactly 0600 whatever it is. */
    if (fchmod(fd, mode) != 0) {
        rc = kc_err_set(err, KC_EIO, "cannot chmod %s: %s", tmp, strerror(errno));
        goto close_fd;
    }
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = kc_err_set(err, KC_EIO, "cannot write %s: %s", tmp, strerror(errno));
            goto close_fd;
        }
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) != 0) {
        rc = kc_err_set(err, KC_EIO, "cannot sync %s: %s", tmp, strerror(errno));
        goto close_fd;
    }
close_fd:
    if (close(fd) != 0 && rc == KC_OK)
        rc = kc_err_set(err, KC_EIO, "cannot close %s: %s", tmp, strerror(errno));
    if (rc == KC_OK && rename(tmp, path) != 0)
        rc = kc_err_set(err, KC_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc != KC_OK)
        unlink(tmp);
    return rc;
}

kc_code ks_pki_read_file(const char *path, char **out, size_t *len, kc_err *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    FILE *f = fopen(path, "rbe");
    if (!f)
        return kc_err_set(err, errno == ENOENT ? KC_ENOTFOUND : KC_EIO, "cannot read %s: %s", path,
                          strerror(errno));
    kc_code rc = KC_OK;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory reading %s", path);
        goto close_f;
    }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap >= MAX_FILE) {
                rc =
                    kc_err_set(err, KC_EIO, "cannot read %s: larger than %u bytes", path, MAX_FILE);
                goto close_f;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                rc = kc_err_set(err, KC_ENOMEM, "out of memory reading %s", path);
                goto close_f;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) {
            if (ferror(f))
                rc = kc_err_set(err, KC_EIO, "cannot read %s: %s", path, strerror(errno));
            break;
        }
    }
close_f:
    fclose(f);
    if (rc != KC_OK) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return KC_OK;
}

kc_code ks_pki_random_hex(char *buf, size_t buf_size, size_t nbytes, kc_err *err)
{
    unsigned char raw[64];
    if (nbytes > sizeof(raw) || buf_size < 2 * nbytes + 1)
        return kc_err_set(err, KC_EARG, "random token buffer too small");
    if (RAND_bytes(raw, (int)nbytes) != 1)
        return kc_err_set(err, KC_EIO, "the OpenSSL random generator failed");
    for (size_t i = 0; i < nbytes; i++)
        snprintf(buf + 2 * i, 3, "%02x", raw[i]);
    return KC_OK;
}

/* ---- certificates ---- */

static kc_code ssl_fail(kc_err *err, const char *what)
{
    char msg[256] = "";
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, msg, sizeof(msg));
    ERR_clear_error();
    return kc_err_set(err, KC_ETLS, "%s failed%s%s", what, *msg ? ": " : "", msg);
}

static char *pem_of(int (*write)(BIO *, const void *), const void *obj)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (!b)
        return NULL;
    if (write(b, obj) == 1) {
        char *data;
        long n = BIO_get_mem_data(b, &data);
        out = malloc((size_t)n + 1);
        if (out) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

static int write_cert(BIO *b, const void *x)
{
    return PEM_write_bio_X509(b, (X509 *)x);
}

static int write_key(BIO *b, const void *k)
{
    return PEM_write_bio_PrivateKey(b, (EVP_PKEY *)k, NULL, NULL, 0, NULL, NULL);
}

static X509 *cert_from_pem(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return x;
}

static EVP_PKEY *key_from_pem(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return k;
}

static bool add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return false;
    int ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok == 1;
}

/* Issues a certificate for key, signed by issuer/issuer_key (NULL: self-signed CA). */
static kc_code issue(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, long days,
                     X509 **out, kc_err *err)
{
    kc_code rc = KC_OK;
    X509 *x = X509_new();
    BIGNUM *serial = BN_new();
    if (!x || !serial) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory creating a certificate");
        goto free_all;
    }
    /* Positive 127-bit random serial, as RFC 5280 asks for unpredictable serials. */
    if (!X509_set_version(x, 2) || !BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
        !BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), days * 24 * 3600) || !X509_set_pubkey(x, key)) {
        rc = ssl_fail(err, "filling the certificate");
        goto free_all;
    }
    X509_NAME *name = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"kubesim", -1,
                                    -1, 0) ||
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
                                    0) ||
        !X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name)) {
        rc = ssl_fail(err, "naming the certificate");
        goto free_all;
    }
    bool ok;
    if (!issuer) {
        ok = add_ext(x, NULL, NID_basic_constraints, "critical,CA:TRUE") &&
             add_ext(x, NULL, NID_key_usage, "critical,digitalSignature,keyCertSign,cRLSign") &&
             add_ext(x, NULL, NID_subject_key_identifier, "hash");
    } else {
        char san[512] = "";
        size_t len = 0;
        for (int i = 0; serving_dns[i]; i++)
            len += (size_t)snprintf(san + len, sizeof(san) - len, "%sDNS:%s", len ? "," : "",
                                    serving_dns[i]);
        for (int i = 0; serving_ips[i]; i++)
            len += (size_t)snprintf(san + len, sizeof(san) - len, ",IP:%s", serving_ips[i]);
        ok = add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE") &&
             add_ext(x, issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
             add_ext(x, issuer, NID_ext_key_usage, "serverAuth") &&
             add_ext(x, issuer, NID_subject_key_identifier, "hash") &&
             add_ext(x, issuer, NID_authority_key_identifier, "keyid:always") &&
             add_ext(x, issuer, NID_subject_alt_name, san);
    }
    if (!ok) {
        rc = ssl_fail(err, "adding certificate extensions");
        goto free_all;
    }
    if (!X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256())) {
        rc = ssl_fail(err, "signing the certificate");
        goto free_all;
    }
    *out = x;
    x = NULL;
free_all:
    BN_free(serial);
    X509_free(x);
    return rc;
}

static bool lasts(X509 *x, long seconds)
{
    time_t t = time(NULL) + seconds;
    return X509_cmp_time(X509_get0_notAfter(x), &t) > 0;
}

static bool ca_usable(X509 *ca, EVP_PKEY *key)
{
    return ca && key && X509_check_private_key(ca, key) == 1 && X509_check_ca(ca) >= 1 &&
           lasts(ca, MIN_LEFT_S);
}

static bool serving_usable(X509 *x, EVP_PKEY *key, X509 *ca, EVP_PKEY *ca_key)
{
    if (!x || !key || X509_check_private_key(x, key) != 1 || !lasts(x, MIN_LEFT_S))
        return false;
    if (X509_verify(x, ca_key) != 1 ||
        X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(ca)) != 0)
        return false;
    for (int i = 0; serving_dns[i]; i++)
        if (X509_check_host(x, serving_dns[i], 0, X509_CHECK_FLAG_NO_WILDCARDS, NULL) != 1)
            return false;
    for (int i = 0; serving_ips[i]; i++)
        if (X509_check_ip_asc(x, serving_ips[i], 0) != 1)
            return false;
    return true;
}

/* Loads a cert/key pair from dir; leaves NULLs for what is missing or unreadable. */
static void load_pair(const char *dir, const char *crt, const char *keyf, X509 **x, EVP_PKEY **k)
{
    char path[PATH_MAX];
    char *pem = NULL;
    *x = NULL;
    *k = NULL;
    if (!dir)
        return;
    snprintf(path, sizeof(path), "%s/%s", dir, crt);
    if (ks_pki_read_file(path, &pem, NULL, NULL) == KC_OK)
        *x = cert_from_pem(pem);
    free(pem);
    pem = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, keyf);
    if (ks_pki_read_file(path, &pem, NULL, NULL) == KC_OK)
        *k = key_from_pem(pem);
    free(pem);
    ERR_clear_error();
}

static kc_code save_pem(const char *dir, const char *file, const char *pem, mode_t mode,
                        kc_err *err)
{
    if (!dir)
        return KC_OK;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    return ks_pki_write_file(path, pem, strlen(pem), mode, err);
}

static kc_code new_key(EVP_PKEY **out, kc_err *err)
{
    *out = EVP_EC_gen("P-256");
    return *out ? KC_OK : ssl_fail(err, "generating an EC P-256 key");
}

kc_code ks_pki_init(ks_sim *sim, char **cert_pem, char **key_pem, kc_err *err)
{
    if (!sim || !cert_pem || !key_pem)
        return kc_err_set(err, KC_EARG, "ks_pki_init: missing argument");
    *cert_pem = *key_pem = NULL;
    const char *dir = sim->opts.dir && *sim->opts.dir ? sim->opts.dir : NULL;
    kc_code rc = KC_OK;
    X509 *ca = NULL, *srv = NULL;
    EVP_PKEY *ca_key = NULL, *srv_key = NULL;
    char *ca_pem = NULL, *ca_key_pem = NULL, *crt = NULL, *key = NULL;
    if (dir && (rc = ks_pki_mkdirs(dir, err)) != KC_OK)
        return rc;

    load_pair(dir, "ca.crt", "ca.key", &ca, &ca_key);
    bool new_ca = !ca_usable(ca, ca_key);
    if (new_ca) {
        X509_free(ca);
        EVP_PKEY_free(ca_key);
        ca = NULL;
        if ((rc = new_key(&ca_key, err)) != KC_OK)
            goto free_all;
        if ((rc = issue(ca_key, "kubesim-ca", NULL, NULL, CA_DAYS, &ca, err)) != KC_OK)
            goto free_all;
    }
    load_pair(dir, "tls.crt", "tls.key", &srv, &srv_key);
    bool new_srv = new_ca || !serving_usable(srv, srv_key, ca, ca_key);
    if (new_srv) {
        X509_free(srv);
        EVP_PKEY_free(srv_key);
        srv = NULL;
        if ((rc = new_key(&srv_key, err)) != KC_OK)
            goto free_all;
        if ((rc = issue(srv_key, "kube-apiserver", ca, ca_key, SERVING_DAYS, &srv, err)) != KC_OK)
            goto free_all;
    }
    ca_pem = pem_of(write_cert, ca);
    ca_key_pem = pem_of(write_key, ca_key);
    crt = pem_of(write_cert, srv);
    key = pem_of(write_key, srv_key);
    if (!ca_pem || !ca_key_pem || !crt || !key) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory encoding certificates");
        goto free_all;
    }
    /* Keys first: a crash between writes then leaves a mismatched pair, which the checks
     * above detect and replace, rather than a certificate whose key is lost. */
    if (new_ca && ((rc = save_pem(dir, "ca.key", ca_key_pem, 0600, err)) != KC_OK ||
                   (rc = save_pem(dir, "ca.crt", ca_pem, 0644, err)) != KC_OK))
        goto free_all;
    if (new_srv && ((rc = save_pem(dir, "tls.key", key, 0600, err)) != KC_OK ||
                    (rc = save_pem(dir, "tls.crt", crt, 0644, err)) != KC_OK))
        goto free_all;
    if (dir)
        kc_debug("pki ready", "dir=%s new_ca=%d new_serving=%d", dir, new_ca, new_srv);
    free(sim->ca_pem);
    sim->ca_pem = ca_pem;
    ca_pem = NULL;
    *cert_pem = crt;
    *key_pem = key;
    crt = key = NULL;
free_all:
    if (rc != KC_OK)
        kc_err_prefix(err, "setting up the cluster certificates%s%s", dir ? " in " : "",
                      dir ? dir : "");
    free(ca_pem);
    free(ca_key_pem);
    free(crt);
    free(key);
    X509_free(ca);
    X509_free(srv);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(srv_key);
    return rc;
}

kc_code ks_pki_write_kubeconfig(ks_sim *sim, const char *path, kc_err *err)
{
    char def[PATH_MAX];
    if (!sim)
        return kc_err_set(err, KC_EARG, "ks_pki_write_kubeconfig: no simulator");
    if (!path)
        path = sim->opts.kubeconfig;
    if (!path) {
        if (!sim->opts.dir)
            return kc_err_set(err, KC_EARG, "no kubeconfig path and no state directory given");
        snprintf(def, sizeof(def), "%s/kubeconfig", sim->opts.dir);
        path = def;
    }
    const char *token = ks_auth_admin_token(sim);
    if (!sim->server_url || !sim->ca_pem || !token)
        return kc_err_set(err, KC_EARG,
                          "cannot write the kubeconfig %s before the server URL, the CA and the "
                          "admin token exist (start auth, pki and the server first)",
                          path);
    /* Both values are plain ASCII without quotes or backslashes (a URL we built, hex), so a
     * double-quoted YAML scalar holds them verbatim. */
    if (strpbrk(sim->server_url, "\"\\\n") || strpbrk(token, "\"\\\n"))
        return kc_err_set(err, KC_EARG, "server URL or token holds characters not allowed here");
    char *ca64 = kc_base64_encode((const unsigned char *)sim->ca_pem, strlen(sim->ca_pem));
    if (!ca64)
        return kc_err_set(err, KC_ENOMEM, "out of memory writing the kubeconfig");
    char *text = NULL;
    int n = asprintf(&text,
                     "apiVersion: v1\n"
                     "kind: Config\n"
                     "clusters:\n"
                     "- cluster:\n"
                     "    certificate-authority-data: %s\n"
                     "    server: \"%s\"\n"
                     "  name: kubesim\n"
                     "contexts:\n"
                     "- context:\n"
                     "    cluster: kubesim\n"
                     "    namespace: default\n"
                     "    user: admin\n"
                     "  name: kubesim\n"
                     "current-context: kubesim\n"
                     "preferences: {}\n"
                     "users:\n"
                     "- name: admin\n"
                     "  user:\n"
                     "    token: \"%s\"\n",
                     ca64, sim->server_url, token);
    free(ca64);
    if (n < 0)
        return kc_err_set(err, KC_ENOMEM, "out of memory writing the kubeconfig");
    kc_code rc = KC_OK;
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        rc = ks_pki_mkdirs(parent, err);
    }
    if (rc == KC_OK)
        rc = ks_pki_write_file(path, text, (size_t)n, 0600, err);
    if (rc != KC_OK)
        kc_err_prefix(err, "writing the kubeconfig");
    free(text);
    return rc;
}
