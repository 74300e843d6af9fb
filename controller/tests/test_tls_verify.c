/* Security tests: TLS verification is never off by default. A kubeconfig is loaded from a file
 * and used against a TLS test server: a certificate from an unknown CA is refused unless the
 * kubeconfig itself says insecure-skip-tls-verify: true; the in-cluster config always verifies
 * with the service account's ca.crt. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kc_base64.h"
#include "kc_client.h"
#include "kc_config.h"
#include "testsrv.h"
#include "testsrv_script.h"
#include "testutil.h"

static char tdir[512];
static ts_pki *pki, *other;
static ts_server *srv;
static ts_script sc;
static const ts_canned ok[] = {{200, NULL, "{\"kind\":\"Status\"}", NULL}};

static void setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tdir, sizeof(tdir), "%s/kctls.XXXXXX", t && *t ? t : P_tmpdir);
    cr_assert_not_null(mkdtemp(tdir));
    pki = ts_pki_generate("tls-verify-ca");
    other = ts_pki_generate("tls-unknown-ca");
    cr_assert(pki && other);
    ts_script_init(&sc, ok, 1);
    srv = ts_start(ts_script_handler, &sc, pki);
    cr_assert_not_null(srv);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void teardown(void)
{
    ts_stop(srv);
    ts_script_free(&sc);
    ts_pki_free(pki);
    ts_pki_free(other);
    nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(tls_verify, .init = setup, .fini = teardown);

/* Writes content to tdir/name; returns the path (static storage, one at a time). */
static const char *wfile(const char *name, const char *content)
{
    static char p[256];
    snprintf(p, sizeof(p), "%s/%s", tdir, name);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "%s", p);
    fputs(content, f);
    fclose(f);
    return p;
}

/* A kubeconfig for the test server; cluster_extra is appended to the cluster's fields. */
static const char *kubeconfig(const char *cluster_extra)
{
    char *buf = NULL;
    int n = asprintf(&buf,
                     "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                     "clusters: [{name: k, cluster: {server: '%s'%s}}]\n"
                     "users: [{name: u, user: {token: tls-test-token}}]\n"
                     "contexts: [{name: c, context: {cluster: k, user: u}}]\n",
                     ts_url(srv), cluster_extra);
    cr_assert(n > 0);
    const char *p = wfile("kubeconfig", buf);
    free(buf);
    return p;
}

static char *ca_field(const char *pem)
{
    char *b64 = kc_base64_encode((const unsigned char *)pem, strlen(pem));
    cr_assert_not_null(b64);
    char *out = NULL;
    cr_assert(asprintf(&out, ", certificate-authority-data: %s", b64) > 0);
    free(b64);
    return out;
}

/* Loads the kubeconfig and does one GET with it; returns the code, the message in msg. */
static kc_code get_with(kc_config *cfg, char *msg, size_t size)
{
    static const kc_client_opts fast = {.qps = -1, .backoff_base_ms = 10, .backoff_max_ms = 40};
    kc_client *c = NULL;
    kc_err err;
    kc_err_clear(&err);
    kc_code rc = kc_client_new(cfg, &fast, &c, &err);
    if (rc == KC_OK) {
        kc_request req = {.method = "GET", .path = "/api"};
        rc = kc_client_do(c, &req, NULL, &err);
    }
    snprintf(msg, size, "%s", err.msg);
    kc_client_free(c);
    return rc;
}

static kc_code load_and_get(const char *cluster_extra, bool *insecure, char *msg, size_t size)
{
    kc_config *cfg = NULL;
    kc_err err;
    cr_assert_eq(kc_config_load_kubeconfig(kubeconfig(cluster_extra), NULL, &cfg, &err), KC_OK,
                 "%s", err.msg);
    *insecure = cfg->insecure_skip_tls_verify;
    kc_code rc = get_with(cfg, msg, size);
    kc_config_free(cfg);
    return rc;
}

Test(tls_verify, kubeconfig_without_ca_refuses_an_unknown_ca)
{
    char msg[KC_ERR_MSG_MAX];
    bool insecure = true;
    /* No CA in the kubeconfig: the system's trust store, which does not hold the test CA. */
    cr_assert_eq(load_and_get("", &insecure, msg, sizeof(msg)), KC_ETLS, "%s", msg);
    cr_assert_not(insecure);
    cr_assert(strstr(msg, "certificate"), "%s", msg);
    cr_assert_eq(ts_request_count(srv), 0, "no request may reach an unverified server");
}

Test(tls_verify, kubeconfig_with_another_ca_or_explicit_false_refuses)
{
    char msg[KC_ERR_MSG_MAX];
    bool insecure = true;
    char *wrong = ca_field(other->ca_pem);
    cr_assert_eq(load_and_get(wrong, &insecure, msg, sizeof(msg)), KC_ETLS, "%s", msg);
    cr_assert_not(insecure);
    cr_assert_eq(load_and_get(", insecure-skip-tls-verify: false", &insecure, msg, sizeof(msg)),
                 KC_ETLS, "%s", msg);
    cr_assert_not(insecure);
    free(wrong);
    cr_assert_eq(ts_request_count(srv), 0);
}

Test(tls_verify, kubeconfig_with_the_ca_verifies_and_insecure_only_when_it_says_so)
{
    char msg[KC_ERR_MSG_MAX];
    bool insecure = true;
    char *right = ca_field(pki->ca_pem);
    cr_assert_eq(load_and_get(right, &insecure, msg, sizeof(msg)), KC_OK, "%s", msg);
    cr_assert_not(insecure);
    free(right);
    cr_assert_eq(ts_request_count(srv), 1);
    /* The only way to skip verification: the kubeconfig asks for it. */
    cr_assert_eq(load_and_get(", insecure-skip-tls-verify: true", &insecure, msg, sizeof(msg)),
                 KC_OK, "%s", msg);
    cr_assert(insecure);
    cr_assert_eq(ts_request_count(srv), 2);
}

Test(tls_verify, incluster_always_verifies_with_the_service_account_ca)
{
    char root[128], msg[KC_ERR_MSG_MAX];
    snprintf(root, sizeof(root), "%s", tdir);
    wfile("token", "incluster-token");
    wfile("namespace", "gpu-operator");
    wfile("ca.crt", other->ca_pem);
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    char port[16];
    snprintf(port, sizeof(port), "%d", ts_port(srv));
    setenv("KUBERNETES_SERVICE_PORT", port, 1);
    kc_config *cfg = NULL;
    kc_err err;
    cr_assert_eq(kc_config_load_incluster(root, &cfg, &err), KC_OK, "%s", err.msg);
    cr_assert_not(cfg->insecure_skip_tls_verify);
    cr_assert_str_eq(cfg->ca_pem, other->ca_pem);
    cr_assert_eq(get_with(cfg, msg, sizeof(msg)), KC_ETLS, "a server the CA did not sign: %s", msg);
    kc_config_free(cfg);
    cr_assert_eq(ts_request_count(srv), 0);

    wfile("ca.crt", pki->ca_pem);
    cr_assert_eq(kc_config_load_incluster(root, &cfg, &err), KC_OK, "%s", err.msg);
    cr_assert_not(cfg->insecure_skip_tls_verify);
    cr_assert_eq(get_with(cfg, msg, sizeof(msg)), KC_OK, "%s", msg);
    kc_config_free(cfg);
    cr_assert_eq(ts_request_count(srv), 1);

    /* Without ca.crt there is no in-cluster config at all (never an unverified one). */
    char ca[160];
    snprintf(ca, sizeof(ca), "%s/ca.crt", tdir);
    cr_assert_eq(unlink(ca), 0);
    cfg = NULL;
    cr_assert_eq(kc_config_load_incluster(root, &cfg, &err), KC_ECONFIG);
    cr_assert_null(cfg);
    cr_assert(strstr(err.msg, "ca.crt"), "%s", err.msg);
}
