/* Tests for ks_pki: the cluster CA and serving certificate, their reuse, and the kubeconfig that
 * libkube's client loads and uses for a verified TLS connection. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kc_client.h"
#include "kc_config.h"
#include "ks_auth.h"
#include "ks_pki.h"
#include "ks_sim.h"
#include "testsrv.h"

static char tdir[64];
static ks_sim sim;

static void setup(void)
{
    snprintf(tdir, sizeof(tdir), "/tmp/kspki.XXXXXX");
    cr_assert_not_null(mkdtemp(tdir));
    memset(&sim, 0, sizeof(sim));
    sim.opts.dir = tdir;
    sim.store = ks_store_new(0);
    cr_assert_not_null(sim.store);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void teardown(void)
{
    ks_auth_free(&sim);
    ks_store_free(sim.store);
    free(sim.ca_pem);
    free(sim.server_url);
    nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(pki, .init = setup, .fini = teardown);

static char *slurp(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", tdir, name);
    char *buf = NULL;
    kc_err e;
    cr_assert_eq(ks_pki_read_file(path, &buf, NULL, &e), KC_OK, "%s", e.msg);
    return buf;
}

static X509 *load_cert(const char *name)
{
    char *pem = slurp(name);
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    free(pem);
    cr_assert_not_null(x, "%s is not a PEM certificate", name);
    return x;
}

static mode_t mode_of(const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", tdir, name);
    cr_assert_eq(stat(path, &st), 0, "%s missing", path);
    return st.st_mode & 0777;
}

static void init_ok(char **crt, char **key)
{
    kc_err e = {0};
    cr_assert_eq(ks_pki_init(&sim, crt, key, &e), KC_OK, "%s", e.msg);
    cr_assert_not_null(*crt);
    cr_assert_not_null(*key);
    cr_assert_not_null(sim.ca_pem);
}

/* Days from now to the certificate's notAfter. */
static int days_left(X509 *x)
{
    int days = 0, secs = 0;
    cr_assert_eq(ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(x)), 1);
    return days;
}

Test(pki, generates_a_verifiable_chain_with_the_sans)
{
    char *crt = NULL, *key = NULL;
    init_ok(&crt, &key);
    cr_assert_eq(mode_of("ca.key"), 0600);
    cr_assert_eq(mode_of("tls.key"), 0600);
    cr_assert_eq(mode_of("ca.crt"), 0644);
    X509 *ca = load_cert("ca.crt");
    X509 *srv = load_cert("tls.crt");
    /* The chain verifies with OpenSSL's own verifier, for the serverAuth purpose. */
    X509_STORE *store = X509_STORE_new();
    X509_STORE_add_cert(store, ca);
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, store, srv, NULL);
    X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
    cr_assert_eq(X509_verify_cert(ctx), 1, "%s",
                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    cr_assert_eq(X509_check_ip_asc(srv, "127.0.0.1", 0), 1);
    const char *names[] = {"localhost", "kubernetes", "kubernetes.default.svc"};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(X509_check_host(srv, names[i], 0, 0, NULL), 1, "SAN %s missing", names[i]);
    cr_assert_neq(X509_check_host(srv, "example.com", 0, 0, NULL), 1);
    cr_assert_eq(X509_check_ca(ca), 1);
    cr_assert_eq(X509_check_ca(srv), 0);
    cr_assert(days_left(ca) > 3640 && days_left(ca) <= 3650, "CA lasts %d days", days_left(ca));
    cr_assert(days_left(srv) > 360 && days_left(srv) <= 365);
    /* The key handed back belongs to the certificate, and sim->ca_pem is ca.crt. */
    BIO *b = BIO_new_mem_buf(key, -1);
    EVP_PKEY *pk = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    BIO_free(b);
    cr_assert_eq(X509_check_private_key(srv, pk), 1);
    char *ca_file = slurp("ca.crt");
    cr_assert_str_eq(sim.ca_pem, ca_file);
    char *crt_file = slurp("tls.crt");
    cr_assert_str_eq(crt, crt_file);
    free(ca_file);
    free(crt_file);
    EVP_PKEY_free(pk);
    X509_free(ca);
    X509_free(srv);
    free(crt);
    free(key);
}

Test(pki, reuses_valid_material)
{
    char *crt1, *key1, *crt2, *key2;
    init_ok(&crt1, &key1);
    char *ca1 = strdup(sim.ca_pem);
    init_ok(&crt2, &key2);
    cr_assert_str_eq(crt1, crt2);
    cr_assert_str_eq(key1, key2);
    cr_assert_str_eq(ca1, sim.ca_pem);
    free(ca1);
    free(crt1);
    free(key1);
    free(crt2);
    free(key2);
}

Test(pki, replaces_a_serving_key_that_does_not_match_but_keeps_the_ca)
{
    char *crt1, *key1, *crt2, *key2;
    init_ok(&crt1, &key1);
    char *ca1 = strdup(sim.ca_pem);
    /* Swap in another key: the pair no longer matches. */
    EVP_PKEY *other = EVP_EC_gen("P-256");
    BIO *b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(b, other, NULL, NULL, 0, NULL, NULL);
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char path[256];
    snprintf(path, sizeof(path), "%s/tls.key", tdir);
    cr_assert_eq(ks_pki_write_file(path, data, (size_t)n, 0600, NULL), KC_OK);
    BIO_free(b);
    EVP_PKEY_free(other);
    init_ok(&crt2, &key2);
    cr_assert_str_neq(crt1, crt2);
    cr_assert_str_eq(ca1, sim.ca_pem);
    free(ca1);
    free(crt1);
    free(key1);
    free(crt2);
    free(key2);
}

Test(pki, a_corrupt_ca_replaces_everything)
{
    char *crt1, *key1, *crt2, *key2;
    init_ok(&crt1, &key1);
    char *ca1 = strdup(sim.ca_pem);
    char path[256];
    snprintf(path, sizeof(path), "%s/ca.crt", tdir);
    cr_assert_eq(ks_pki_write_file(path, "garbage\n", 8, 0644, NULL), KC_OK);
    init_ok(&crt2, &key2);
    cr_assert_str_neq(ca1, sim.ca_pem);
    cr_assert_str_neq(crt1, crt2);
    X509 *ca = load_cert("ca.crt");
    X509 *srv = load_cert("tls.crt");
    cr_assert_eq(X509_verify(srv, X509_get0_pubkey(ca)), 1);
    X509_free(ca);
    X509_free(srv);
    free(ca1);
    free(crt1);
    free(key1);
    free(crt2);
    free(key2);
}

Test(pki, an_unusable_directory_is_an_error_naming_it)
{
    char file[256];
    snprintf(file, sizeof(file), "%s/plainfile", tdir);
    cr_assert_eq(ks_pki_write_file(file, "x", 1, 0644, NULL), KC_OK);
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/sub", file);
    sim.opts.dir = dir;
    char *crt = NULL, *key = NULL;
    kc_err e = {0};
    cr_assert_eq(ks_pki_init(&sim, &crt, &key, &e), KC_EIO);
    cr_assert_not_null(strstr(e.msg, "plainfile"), "%s", e.msg);
    cr_assert_null(crt);
    cr_assert_null(key);
    sim.opts.dir = tdir;
}

Test(pki, random_hex_is_hex_and_differs)
{
    char a[33], b[33];
    cr_assert_eq(ks_pki_random_hex(a, sizeof(a), 16, NULL), KC_OK);
    cr_assert_eq(ks_pki_random_hex(b, sizeof(b), 16, NULL), KC_OK);
    cr_assert_eq(strlen(a), 32);
    cr_assert_eq(strspn(a, "0123456789abcdef"), 32);
    cr_assert_str_neq(a, b);
    cr_assert_eq(ks_pki_random_hex(a, 8, 16, NULL), KC_EARG);
}

Test(pki, kubeconfig_needs_url_ca_and_token)
{
    kc_err e = {0};
    cr_assert_eq(ks_pki_write_kubeconfig(&sim, NULL, &e), KC_EARG);
    cr_assert_not_null(strstr(e.msg, "kubeconfig"), "%s", e.msg);
}

typedef struct seen {
    char auth[256];
} seen;

static void version_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    seen *s = ud;
    snprintf(s->auth, sizeof(s->auth), "%s", req->authorization ? req->authorization : "");
    ts_respond(conn, 200, "application/json", "{\"gitVersion\":\"v1.32.0\"}", NULL);
}

/* The kubeconfig loads with libkube and its CA verifies a server using the serving cert. */
Test(pki, kubeconfig_drives_a_verified_tls_client)
{
    kc_err e = {0};
    cr_assert_eq(ks_auth_new(&sim, &e), KC_OK, "%s", e.msg);
    char *crt, *key;
    init_ok(&crt, &key);
    ts_pki pki = {.ca_pem = sim.ca_pem, .cert_pem = crt, .key_pem = key};
    seen s = {0};
    ts_server *srv = ts_start(version_handler, &s, &pki);
    cr_assert_not_null(srv);
    sim.server_url = strdup(ts_url(srv));
    char path[256];
    snprintf(path, sizeof(path), "%s/nested/dir/kubeconfig", tdir);
    cr_assert_eq(ks_pki_write_kubeconfig(&sim, path, &e), KC_OK, "%s", e.msg);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    kc_config *cfg = NULL;
    cr_assert_eq(kc_config_load_kubeconfig(path, NULL, &cfg, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(cfg->server, sim.server_url);
    cr_assert_str_eq(cfg->token, ks_auth_admin_token(&sim));
    cr_assert_str_eq(cfg->context, "kubesim");
    cr_assert_str_eq(cfg->namespace_, "default");
    cr_assert_eq(cfg->ca_pem_len, strlen(sim.ca_pem));
    cr_assert_eq(memcmp(cfg->ca_pem, sim.ca_pem, cfg->ca_pem_len), 0);
    kc_client *c = NULL;
    kc_client_opts co = {.max_retries = -1};
    cr_assert_eq(kc_client_new(cfg, &co, &c, &e), KC_OK, "%s", e.msg);
    kc_request req = {.method = "GET", .path = "/version"};
    kc_response resp = {0};
    cr_assert_eq(kc_client_do(c, &req, &resp, &e), KC_OK, "%s", e.msg);
    cr_assert_eq(resp.status, 200);
    char want[128];
    snprintf(want, sizeof(want), "Bearer %s", ks_auth_admin_token(&sim));
    cr_assert_str_eq(s.auth, want);
    kc_response_free(&resp);
    kc_client_free(c);
    kc_config_free(cfg);
    ts_stop(srv);
    free(crt);
    free(key);
}

/* A kubeconfig whose CA is another cluster's fails verification: the SANs/CA really matter. */
Test(pki, a_foreign_ca_fails_verification)
{
    kc_err e = {0};
    cr_assert_eq(ks_auth_new(&sim, &e), KC_OK, "%s", e.msg);
    char *crt, *key;
    init_ok(&crt, &key);
    ts_pki *other = ts_pki_generate("other-ca");
    ts_pki pki = {.ca_pem = other->ca_pem, .cert_pem = other->cert_pem, .key_pem = other->key_pem};
    seen s = {0};
    ts_server *srv = ts_start(version_handler, &s, &pki);
    cr_assert_not_null(srv);
    sim.server_url = strdup(ts_url(srv));
    cr_assert_eq(ks_pki_write_kubeconfig(&sim, NULL, &e), KC_OK, "%s", e.msg);
    char path[256];
    snprintf(path, sizeof(path), "%s/kubeconfig", tdir);
    kc_config *cfg = NULL;
    cr_assert_eq(kc_config_load_kubeconfig(path, NULL, &cfg, &e), KC_OK, "%s", e.msg);
    kc_client *c = NULL;
    kc_client_opts co = {.max_retries = -1};
    cr_assert_eq(kc_client_new(cfg, &co, &c, &e), KC_OK, "%s", e.msg);
    kc_request req = {.method = "GET", .path = "/version"};
    cr_assert_eq(kc_client_do(c, &req, NULL, &e), KC_ETLS, "%s", e.msg);
    kc_client_free(c);
    kc_config_free(cfg);
    ts_stop(srv);
    ts_pki_free(other);
    free(crt);
    free(key);
}
