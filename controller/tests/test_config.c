/* Tests for kc_config (kubeconfig and in-cluster loading) and kc_base64. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kc_base64.h"
#include "kc_config.h"
#include "testutil.h"

#define CA_PEM   "-----BEGIN CERTIFICATE-----\nMIIBcafake\n-----END CERTIFICATE-----\n"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nMIIBclientfake\n-----END CERTIFICATE-----\n"
#define KEY_PEM  "-----BEGIN PRIVATE KEY-----\nMIIBkeyfake\n-----END PRIVATE KEY-----\n"

/* Every test gets a fresh directory; files are written under it by relative name. */
static char tdir[64];

static void setup(void)
{
    snprintf(tdir, sizeof(tdir), "/tmp/kccfg.XXXXXX");
    cr_assert_not_null(mkdtemp(tdir));
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("KC_INCLUSTER_ROOT");
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void teardown(void)
{
    nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(config, .init = setup, .fini = teardown);
TestSuite(incluster, .init = setup, .fini = teardown);
TestSuite(config_default, .init = setup, .fini = teardown);

/* Writes content to tdir/rel (creating subdirectories) and returns the path (static storage). */
static const char *wfile(const char *rel, const char *content)
{
    static char paths[8][256];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 256, "%s/%s", tdir, rel);
    /* mkdir -p of every directory below tdir. */
    for (char *slash = strchr(p + strlen(tdir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(p, 0700);
        *slash = '/';
    }
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "cannot write %s", p);
    fputs(content, f);
    fclose(f);
    return p;
}

static char *b64(const char *s)
{
    char *r = kc_base64_encode((const unsigned char *)s, strlen(s));
    cr_assert_not_null(r);
    return r;
}

static kc_config *load_ok(const char *path, const char *context)
{
    kc_config *cfg = NULL;
    kc_err e = {0};
    kc_err_clear(&e);
    kc_code rc = kc_config_load_kubeconfig(path, context, &cfg, &e);
    cr_assert_eq(rc, KC_OK, "load %s: %s", path ? path : "(null)", e.msg);
    cr_assert_not_null(cfg);
    return cfg;
}

/* Loads expecting a KC_ECONFIG and returns the message (static). */
static const char *load_err(const char *path, const char *context)
{
    static kc_err e;
    kc_config *cfg = (kc_config *)0x1;
    kc_err_clear(&e);
    kc_code rc = kc_config_load_kubeconfig(path, context, &cfg, &e);
    cr_assert_eq(rc, KC_ECONFIG, "expected a config error for %s, got %d (%s)", path, rc, e.msg);
    cr_assert_eq(e.code, KC_ECONFIG);
    cr_assert_null(cfg);
    return e.msg;
}

/* Formats a message expectation with the test directory substituted for %s. */
static const char *at(const char *fmt)
{
    static char buf[1024];
    snprintf(buf, sizeof(buf), fmt, tdir, tdir, tdir);
    return buf;
}

static const char *basic_kubeconfig(void)
{
    static char buf[4096];
    char *ca = b64(CA_PEM), *cert = b64(CERT_PEM), *key = b64(KEY_PEM);
    snprintf(buf, sizeof(buf),
             "apiVersion: v1\n"
             "kind: Config\n"
             "current-context: dev\n"
             "clusters:\n"
             "- name: c1\n"
             "  cluster:\n"
             "    server: https://10.0.0.1:6443/\n"
             "    certificate-authority-data: %s\n"
             "    tls-server-name: kubernetes.default\n"
             "- name: c2\n"
             "  cluster:\n"
             "    server: http://localhost:8080\n"
             "contexts:\n"
             "- name: dev\n"
             "  context: {cluster: c1, user: u1, namespace: team-a}\n"
             "- name: prod\n"
             "  context: {cluster: c2, user: u2}\n"
             "- name: anon\n"
             "  context: {cluster: c2}\n"
             "users:\n"
             "- name: u1\n"
             "  user:\n"
             "    token: abc.def\n"
             "- name: u2\n"
             "  user:\n"
             "    client-certificate-data: %s\n"
             "    client-key-data: |\n"
             "      %s\n",
             ca, cert, key);
    free(ca);
    free(cert);
    free(key);
    return buf;
}

Test(config, current_context_and_fields)
{
    const char *path = wfile("config", basic_kubeconfig());
    kc_config *cfg = load_ok(path, NULL);
    cr_assert_str_eq(cfg->server, "https://10.0.0.1:6443");
    cr_assert_eq(cfg->ca_pem_len, strlen(CA_PEM));
    cr_assert_str_eq(cfg->ca_pem, CA_PEM);
    cr_assert_str_eq(cfg->tls_server_name, "kubernetes.default");
    cr_assert_not(cfg->insecure_skip_tls_verify);
    cr_assert_str_eq(cfg->token, "abc.def");
    cr_assert_null(cfg->token_file);
    cr_assert_null(cfg->client_cert_pem);
    cr_assert_str_eq(cfg->namespace_, "team-a");
    cr_assert_str_eq(cfg->context, "dev");
    cr_assert_str_eq(cfg->source, path);
    kc_config_free(cfg);
}

Test(config, explicit_context_and_client_cert)
{
    const char *path = wfile("config", basic_kubeconfig());
    kc_config *cfg = load_ok(path, "prod");
    cr_assert_str_eq(cfg->server, "http://localhost:8080");
    cr_assert_null(cfg->ca_pem);
    cr_assert_null(cfg->token);
    cr_assert_eq(cfg->client_cert_pem_len, strlen(CERT_PEM));
    cr_assert_str_eq(cfg->client_cert_pem, CERT_PEM);
    cr_assert_str_eq(cfg->client_key_pem, KEY_PEM);
    cr_assert_str_eq(cfg->namespace_, "default");
    cr_assert_str_eq(cfg->context, "prod");
    kc_config_free(cfg);
    /* A context without a user authenticates as nobody. */
    cfg = load_ok(path, "anon");
    cr_assert_null(cfg->token);
    cr_assert_null(cfg->client_cert_pem);
    kc_config_free(cfg);
}

Test(config, missing_context)
{
    const char *path = wfile("config", basic_kubeconfig());
    cr_assert_str_eq(load_err(path, "staging"), at("kubeconfig %s/config: context \"staging\" not "
                                                   "found"));
    path = wfile("nocur", "clusters: []\ncontexts: []\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/nocur: no context given and current-context is not set"));
    path = wfile("empty", "");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/empty: no context given and current-context is not set"));
    path = wfile("emptycur", "current-context: \"\"\n");
    cr_assert(strstr(load_err(path, NULL), "current-context is not set"));
}

Test(config, missing_cluster_or_user)
{
    const char *path = wfile("config", "current-context: dev\n"
                                       "contexts:\n"
                                       "- name: dev\n"
                                       "  context: {cluster: c1, user: u}\n"
                                       "- name: nocluster\n"
                                       "  context: {user: u}\n"
                                       "- name: nouser\n"
                                       "  context: {cluster: c2, user: ghost}\n"
                                       "clusters:\n"
                                       "- name: c2\n"
                                       "  cluster: {server: 'https://h'}\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: context \"dev\": cluster \"c1\" not found"));
    cr_assert_str_eq(load_err(path, "nocluster"),
                     at("kubeconfig %s/config: context \"nocluster\": no cluster set"));
    cr_assert_str_eq(load_err(path, "nouser"),
                     at("kubeconfig %s/config: context \"nouser\": user \"ghost\" not found"));
}

Test(config, bad_base64)
{
    const char *path = wfile("config", "current-context: dev\n"
                                       "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                                       "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                                       "users:\n"
                                       "- name: u\n"
                                       "  user:\n"
                                       "    client-certificate-data: QUJD\n"
                                       "    client-key-data: 'QU*D'\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: context \"dev\": user \"u\": client-key-data: "
                        "invalid base64: '*' at position 3 is not in the base64 alphabet"));
    path = wfile("config2", "current-context: dev\n"
                            "contexts: [{name: dev, context: {cluster: c}}]\n"
                            "clusters: [{name: c, cluster: {server: 'https://h', "
                            "certificate-authority-data: QUJ}}]\n");
    cr_assert_str_eq(
        load_err(path, NULL),
        at("kubeconfig %s/config2: context \"dev\": cluster \"c\": "
           "certificate-authority-data: invalid base64: 3 characters is not a multiple "
           "of 4 (missing '=' padding or truncated)"));
}

Test(config, relative_and_absolute_paths)
{
    wfile("sub/certs/ca.crt", CA_PEM);
    wfile("sub/certs/client.crt", CERT_PEM);
    const char *key = wfile("key.pem", KEY_PEM);
    char text[2048];
    snprintf(text, sizeof(text),
             "current-context: dev\n"
             "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
             "clusters: [{name: c, cluster: {server: 'https://h:1', certificate-authority: "
             "certs/ca.crt}}]\n"
             "users: [{name: u, user: {client-certificate: ./certs/client.crt, client-key: %s}}]\n",
             key);
    const char *path = wfile("sub/config", text);
    kc_config *cfg = load_ok(path, NULL);
    cr_assert_str_eq(cfg->ca_pem, CA_PEM);
    cr_assert_eq(cfg->ca_pem_len, strlen(CA_PEM));
    cr_assert_str_eq(cfg->client_cert_pem, CERT_PEM);
    cr_assert_str_eq(cfg->client_key_pem, KEY_PEM);
    kc_config_free(cfg);

    /* A relative kubeconfig path: references resolve against its directory, not the cwd. */
    char *cwd = getcwd(NULL, 0);
    cr_assert_eq(chdir(tdir), 0);
    cfg = load_ok("sub/config", NULL);
    cr_assert_str_eq(cfg->ca_pem, CA_PEM);
    kc_config_free(cfg);
    cr_assert_eq(chdir(cwd), 0);
    free(cwd);
}

Test(config, missing_referenced_file_names_field_and_file)
{
    const char *path = wfile("config", "current-context: dev\n"
                                       "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                                       "clusters: [{name: c, cluster: {server: 'https://h', "
                                       "certificate-authority: nope/ca.crt}}]\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: context \"dev\": cluster \"c\": "
                        "certificate-authority: cannot read %s/nope/ca.crt: No such file or "
                        "directory"));
    path = wfile("config2", "current-context: dev\n"
                            "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                            "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                            "users: [{name: u, user: {client-certificate: c.crt, client-key: "
                            "/}}]\n");
    wfile("c.crt", CERT_PEM);
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config2: context \"dev\": user \"u\": client-key: cannot "
                        "read /: is a directory"));
}

Test(config, token_file)
{
    wfile("tok/token", "  s3cret\n");
    const char *path = wfile("config", "current-context: dev\n"
                                       "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                                       "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                                       "users: [{name: u, user: {tokenFile: tok/token}}]\n");
    kc_config *cfg = load_ok(path, NULL);
    cr_assert_null(cfg->token);
    char want[256];
    snprintf(want, sizeof(want), "%s/tok/token", tdir);
    cr_assert_str_eq(cfg->token_file, want);
    kc_config_free(cfg);

    wfile("tok/token", " \n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: context \"dev\": user \"u\": tokenFile: "
                        "%s/tok/token is empty"));
    unlink(want);
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: context \"dev\": user \"u\": tokenFile: cannot read "
                        "%s/tok/token: No such file or directory"));

    /* A static token wins over tokenFile (which then need not exist), as in client-go. */
    path = wfile("config2", "current-context: dev\n"
                            "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                            "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                            "users: [{name: u, user: {token: t, tokenFile: missing}}]\n");
    cfg = load_ok(path, NULL);
    cr_assert_str_eq(cfg->token, "t");
    cr_assert_null(cfg->token_file);
    kc_config_free(cfg);

    /* An unquoted all-digit token is a YAML number, not a string. */
    path = wfile("config3", "current-context: dev\n"
                            "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                            "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                            "users: [{name: u, user: {token: 12345}}]\n");
    cr_assert_str_eq(load_err(path, NULL), at("kubeconfig %s/config3: context \"dev\": user \"u\": "
                                              "token: expected a string, got a number"));
}

Test(config, insecure_flag)
{
    const char *path = wfile("config", "current-context: dev\n"
                                       "contexts: [{name: dev, context: {cluster: c}}]\n"
                                       "clusters: [{name: c, cluster: {server: 'https://h', "
                                       "insecure-skip-tls-verify: true}}]\n");
    kc_config *cfg = load_ok(path, NULL);
    cr_assert(cfg->insecure_skip_tls_verify);
    cr_assert_null(cfg->ca_pem);
    kc_config_free(cfg);
    path = wfile("config2", "current-context: dev\n"
                            "contexts: [{name: dev, context: {cluster: c}}]\n"
                            "clusters: [{name: c, cluster: {server: 'https://h', "
                            "insecure-skip-tls-verify: 'true'}}]\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config2: context \"dev\": cluster \"c\": "
                        "insecure-skip-tls-verify: expected true or false, got a string"));
    path = wfile("config3", "current-context: dev\n"
                            "contexts: [{name: dev, context: {cluster: c}}]\n"
                            "clusters: [{name: c, cluster: {server: 'https://h', "
                            "insecure-skip-tls-verify: yes, certificate-authority-data: QUJD}}]\n");
    cr_assert_str_eq(
        load_err(path, NULL),
        at("kubeconfig %s/config3: context \"dev\": cluster \"c\": "
           "insecure-skip-tls-verify cannot be combined with a certificate-authority"));
}

Test(config, server_validation)
{
    static const struct {
        const char *server, *want;
    } cases[] = {
        {"h:6443", "is not an http(s) URL"},
        {"ftp://h", "the scheme must be https or http"},
        {"https://h/?x=1", "must not contain a query"},
        {"https://h/#f", "must not contain a fragment"},
        {"https://u:p@h/", "must not contain credentials"},
        {"https://h w", "is not an http(s) URL"},
    };
    char text[512];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text),
                 "current-context: dev\n"
                 "contexts: [{name: dev, context: {cluster: c}}]\n"
                 "clusters: [{name: c, cluster: {server: '%s'}}]\n",
                 cases[i].server);
        const char *msg = load_err(wfile("config", text), NULL);
        cr_assert(strstr(msg, cases[i].want), "%s: %s", cases[i].server, msg);
        cr_assert(strstr(msg, "context \"dev\": cluster \"c\": server \""), "%s", msg);
    }
    const char *path = wfile("config", "current-context: dev\n"
                                       "contexts: [{name: dev, context: {cluster: c}}]\n"
                                       "clusters: [{name: c, cluster: {}}]\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: context \"dev\": cluster \"c\": no server set"));
    path = wfile("config",
                 "current-context: dev\n"
                 "contexts: [{name: dev, context: {cluster: c}}]\n"
                 "clusters: [{name: c, cluster: {server: 'HTTPS://[::1]:6443/k8s/c1//'}}]\n");
    kc_config *cfg = load_ok(path, NULL);
    cr_assert_str_eq(cfg->server, "HTTPS://[::1]:6443/k8s/c1");
    kc_config_free(cfg);
}

Test(config, unsupported_auth_names_the_user)
{
    static const struct {
        const char *user, *want;
    } cases[] = {
        {"{auth-provider: {name: gcp}}", "auth-provider plugins are not supported"},
        {"{username: a, password: b}", "basic authentication (username/password) is not supported"},
        {"{password: b}", "basic authentication (username/password) is not supported"},
        {"{as: admin}", "impersonation (as) is not supported"},
        {"{token: t, as-uid: '1'}", "impersonation (as-uid) is not supported"},
        {"{as-groups: [a]}", "impersonation (as-groups) is not supported"},
        {"{as-user-extra: {k: [v]}}", "impersonation (as-user-extra) is not supported"},
    };
    char text[512];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text),
                 "current-context: dev\n"
                 "contexts: [{name: dev, context: {cluster: c, user: eks}}]\n"
                 "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                 "users: [{name: eks, user: %s}]\n",
                 cases[i].user);
        const char *msg = load_err(wfile("config", text), NULL);
        char want[512];
        snprintf(want, sizeof(want),
                 "kubeconfig %s/config: context \"dev\": user \"eks\": %s (use token, tokenFile, "
                 "exec or client-certificate/client-key)",
                 tdir, cases[i].want);
        cr_assert_str_eq(msg, want);
    }
}

Test(config, client_cert_pairs)
{
    const char *path =
        wfile("config", "current-context: dev\n"
                        "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                        "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                        "users: [{name: u, user: {client-certificate-data: QUJD}}]\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: context \"dev\": user \"u\": client-certificate is "
                        "set but client-key is not"));
    path = wfile("config", "current-context: dev\n"
                           "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                           "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                           "users: [{name: u, user: {client-key-data: QUJD}}]\n");
    cr_assert(strstr(load_err(path, NULL), "client-key is set but client-certificate is not"));
    path = wfile("config", "current-context: dev\n"
                           "contexts: [{name: dev, context: {cluster: c}}]\n"
                           "clusters: [{name: c, cluster: {server: 'https://h', "
                           "certificate-authority: ca, certificate-authority-data: QUJD}}]\n");
    cr_assert(strstr(load_err(path, NULL), "cluster \"c\": certificate-authority and "
                                           "certificate-authority-data are both set; use one"));
}

Test(config, malformed_documents)
{
    const char *msg = load_err(wfile("config", "clusters: [\n"), NULL);
    cr_assert(strstr(msg, at("kubeconfig %s/config: line ")), "%s", msg);
    msg = load_err(wfile("config", "- a\n- b\n"), NULL);
    cr_assert_str_eq(msg, at("kubeconfig %s/config: expected a mapping at the top level, got a "
                             "list"));
    msg = load_err(wfile("config", "just text\n"), NULL);
    cr_assert_str_eq(msg, at("kubeconfig %s/config: expected a mapping at the top level, got a "
                             "string"));
    msg = load_err(wfile("config", "a: 1\n---\nb: 2\n"), NULL);
    cr_assert(strstr(msg, "expected one YAML document, found 2"), "%s", msg);
    msg = load_err(wfile("config", "clusters: {c: 1}\n"), NULL);
    cr_assert_str_eq(msg, at("kubeconfig %s/config: clusters: expected a list, got a mapping"));
    msg = load_err(wfile("config", "users: [1]\n"), NULL);
    cr_assert_str_eq(msg, at("kubeconfig %s/config: users[0]: expected a mapping, got a number"));
    msg = load_err(wfile("config", "contexts: [{context: {}}]\n"), NULL);
    cr_assert_str_eq(msg,
                     at("kubeconfig %s/config: contexts[0]: name: expected a non-empty string, "
                        "got none"));
    msg = load_err(wfile("config", "clusters: [{name: a}, {name: b}, {name: a}]\n"), NULL);
    cr_assert_str_eq(msg, at("kubeconfig %s/config: clusters: duplicate name \"a\""));
    msg = load_err(wfile("config", "current-context: [x]\n"), NULL);
    cr_assert_str_eq(msg, at("kubeconfig %s/config: current-context: expected a string, got a "
                             "list"));
    msg = load_err(
        wfile("config", "current-context: d\ncontexts: [{name: d, context: {cluster: 7}}]\n"),
        NULL);
    cr_assert_str_eq(msg, at("kubeconfig %s/config: context \"d\": cluster: expected a string, got "
                             "a number"));
    msg = load_err(at("%s/does-not-exist"), NULL);
    cr_assert_str_eq(msg,
                     at("kubeconfig %s/does-not-exist: cannot read: No such file or directory"));
    msg = load_err(tdir, NULL);
    cr_assert(strstr(msg, "cannot read: is a directory"), "%s", msg);
}

Test(config, kubeconfig_merge)
{
    wfile("b/ca.crt", CA_PEM);
    const char *a =
        wfile("a/config", "current-context: dev\n"
                          "contexts: [{name: dev, context: {cluster: shared, user: u}}]\n"
                          "clusters: [{name: shared, cluster: {server: 'https://a'}}]\n");
    const char *b =
        wfile("b/config", "current-context: other\n"
                          "contexts: [{name: dev, context: {cluster: ignored}},\n"
                          "           {name: other, context: {cluster: onlyb, namespace: nb}}]\n"
                          "clusters: [{name: shared, cluster: {server: 'https://b'}},\n"
                          "           {name: onlyb, cluster: {server: 'https://onlyb', "
                          "certificate-authority: ca.crt}}]\n"
                          "users: [{name: u, user: {token: from-b}}]\n");
    char list[1024];
    snprintf(list, sizeof(list), "%s/missing::%s:%s:%s", tdir, a, b, a);
    setenv("KUBECONFIG", list, 1);
    kc_config *cfg = load_ok(NULL, NULL);
    /* current-context and the context from a, the cluster of the same name from a, the user only
     * defined in b. */
    cr_assert_str_eq(cfg->context, "dev");
    cr_assert_str_eq(cfg->server, "https://a");
    cr_assert_str_eq(cfg->token, "from-b");
    cr_assert_str_eq(cfg->source, a);
    kc_config_free(cfg);
    /* A context only b defines; its relative CA path resolves against b's directory. */
    cfg = load_ok(NULL, "other");
    cr_assert_str_eq(cfg->server, "https://onlyb");
    cr_assert_str_eq(cfg->namespace_, "nb");
    cr_assert_str_eq(cfg->ca_pem, CA_PEM);
    cr_assert_str_eq(cfg->source, b);
    kc_config_free(cfg);
    /* The context "dev" from a refers to user u which only b defines; messages name the file of
     * each part. */
    snprintf(list, sizeof(list), "%s:%s", b, a);
    setenv("KUBECONFIG", list, 1);
    cr_assert_str_eq(load_err(NULL, "dev"),
                     at("kubeconfig %s/b/config: context \"dev\": cluster \"ignored\" not found"));
    cr_assert_str_eq(load_err(NULL, "nope"),
                     at("kubeconfig %s/b/config:%s/a/config: context \"nope\" not found"));
    /* An explicit path ignores KUBECONFIG: alone, a lacks the user b defines. */
    cr_assert_str_eq(load_err(a, NULL),
                     at("kubeconfig %s/a/config: context \"dev\": user \"u\" not found"));
    /* No file of the list exists. */
    snprintf(list, sizeof(list), "%s/x:%s/y", tdir, tdir);
    setenv("KUBECONFIG", list, 1);
    cr_assert_str_eq(load_err(NULL, NULL),
                     at("KUBECONFIG=\"%s/x:%s/y\": none of the listed files exists"));
    /* A broken file in the list is an error, not skipped. */
    snprintf(list, sizeof(list), "%s:%s", a, wfile("bad", "[1"));
    setenv("KUBECONFIG", list, 1);
    cr_assert(strstr(load_err(NULL, NULL), at("kubeconfig %s/bad: ")));
}

Test(config, home_kube_config)
{
    wfile(".kube/config", "current-context: h\n"
                          "contexts: [{name: h, context: {cluster: c}}]\n"
                          "clusters: [{name: c, cluster: {server: 'https://home'}}]\n");
    setenv("HOME", tdir, 1);
    kc_config *cfg = load_ok(NULL, NULL);
    cr_assert_str_eq(cfg->server, "https://home");
    kc_config_free(cfg);
    setenv("KUBECONFIG", "", 1);
    cfg = load_ok(NULL, NULL);
    cr_assert_str_eq(cfg->server, "https://home");
    kc_config_free(cfg);
    unsetenv("HOME");
    cr_assert(strstr(load_err(NULL, NULL), "HOME is not set"));
}

Test(config, parse_from_memory)
{
    const char *text = "current-context: m\n"
                       "contexts: [{name: m, context: {cluster: c, user: u}}]\n"
                       "clusters: [{name: c, cluster: {server: 'https://mem'}}]\n"
                       "users: [{name: u, user: {tokenFile: t}}]\n";
    kc_config *cfg = NULL;
    kc_err e = {0};
    char name[256];
    snprintf(name, sizeof(name), "%s/virtual", tdir);
    wfile("t", "tok");
    cr_assert_eq(kc_config_parse_kubeconfig(text, strlen(text), name, NULL, &cfg, &e), KC_OK, "%s",
                 e.msg);
    cr_assert_str_eq(cfg->source, name);
    kc_config_free(cfg);
    cfg = (kc_config *)0x1;
    cr_assert_eq(kc_config_parse_kubeconfig(text, strlen(text), NULL, "zz", &cfg, &e), KC_ECONFIG);
    cr_assert_null(cfg);
    cr_assert_str_eq(e.msg, "kubeconfig <memory>: context \"zz\" not found");
    cr_assert_eq(kc_config_parse_kubeconfig(NULL, 0, NULL, NULL, &cfg, &e), KC_ECONFIG);
    cr_assert_eq(kc_config_parse_kubeconfig(NULL, 3, NULL, NULL, &cfg, &e), KC_EARG);
    cr_assert_eq(kc_config_parse_kubeconfig("x", 1, NULL, NULL, NULL, NULL), KC_EARG);
    /* Errors without an error record still return the code. */
    cr_assert_eq(kc_config_parse_kubeconfig("- 1", 3, NULL, NULL, &cfg, NULL), KC_ECONFIG);
    const char *bad = "current-context: m\n"
                      "contexts: [{name: m, context: {cluster: c}}]\n"
                      "clusters: [{name: c, cluster: {server: 'https://mem', "
                      "certificate-authority-data: '!!!!'}}]\n";
    cr_assert_eq(kc_config_parse_kubeconfig(bad, strlen(bad), NULL, NULL, &cfg, NULL), KC_ECONFIG);
}

Test(config, dup_is_deep)
{
    const char *path = wfile("config", basic_kubeconfig());
    kc_config *cfg = load_ok(path, "prod");
    kc_config *d = kc_config_dup(cfg);
    cr_assert_not_null(d);
    cr_assert_neq(d->client_key_pem, cfg->client_key_pem);
    cr_assert_str_eq(d->client_key_pem, KEY_PEM);
    cr_assert_eq(d->client_key_pem_len, cfg->client_key_pem_len);
    cr_assert_str_eq(d->server, cfg->server);
    cr_assert_str_eq(d->context, "prod");
    cr_assert_null(d->ca_pem);
    kc_config_free(cfg);
    cr_assert_str_eq(d->client_cert_pem, CERT_PEM);
    kc_config_free(d);
    cr_assert_null(kc_config_dup(NULL));
    kc_config_free(NULL);
}

/* ---- proxy-url, disable-compression, unknown fields -------------------------------------- */

/* A kubeconfig with one context "dev" whose cluster mapping is {server: https://h, <cluster>} and
 * whose user mapping is user (NULL: no user). */
static const char *kc_with(const char *cluster, const char *user)
{
    static char text[4096];
    snprintf(text, sizeof(text),
             "current-context: dev\n"
             "contexts: [{name: dev, context: {cluster: c%s}}]\n"
             "clusters: [{name: c, cluster: {server: 'https://h'%s%s}}]\n"
             "users: [{name: u, user: %s}]\n",
             user ? ", user: u" : "", cluster ? ", " : "", cluster ? cluster : "",
             user ? user : "{}");
    return wfile("config", text);
}

Test(config, proxy_url)
{
    static const char *const good[] = {"http://proxy:3128", "https://proxy.example/",
                                       "socks5://127.0.0.1:1080", "SOCKS5://[::1]:1080",
                                       "http://user:pa%40ss@proxy:3128"};
    char cluster[256];
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(cluster, sizeof(cluster), "proxy-url: '%s'", good[i]);
        kc_config *cfg = load_ok(kc_with(cluster, NULL), NULL);
        cr_assert_str_eq(cfg->proxy_url, good[i]);
        kc_config *d = kc_config_dup(cfg);
        cr_assert_not_null(d);
        cr_assert_str_eq(d->proxy_url, good[i]);
        cr_assert_neq(d->proxy_url, cfg->proxy_url);
        kc_config_free(d);
        kc_config_free(cfg);
    }
    kc_config *cfg = load_ok(kc_with(NULL, NULL), NULL);
    cr_assert_null(cfg->proxy_url);
    kc_config_free(cfg);

    static const struct {
        const char *url, *want;
    } bad[] = {
        {"ftp://proxy:21", "proxy-url: the scheme \"ftp\" is not supported (use http, https or "
                           "socks5)"},
        {"socks4://p:1080", "proxy-url: the scheme \"socks4\" is not supported"},
        {"proxy:3128", "proxy-url: not a URL of the form scheme://host[:port]"},
        {"http://", "proxy-url: no host"},
        {"http://user:secret@/", "proxy-url: no host"},
        {"http://pro xy:1", "proxy-url: contains a space or a control character"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(cluster, sizeof(cluster), "proxy-url: '%s'", bad[i].url);
        const char *msg = load_err(kc_with(cluster, NULL), NULL);
        cr_assert(strstr(msg, at("kubeconfig %s/config: context \"dev\": cluster \"c\": ")), "%s",
                  msg);
        cr_assert(strstr(msg, bad[i].want), "%s: %s", bad[i].url, msg);
        /* Proxy URLs can carry a password: never quoted. */
        cr_assert_null(strstr(msg, "secret"), "%s", msg);
    }
    cr_assert_str_eq(load_err(kc_with("proxy-url: 8080", NULL), NULL),
                     at("kubeconfig %s/config: context \"dev\": cluster \"c\": proxy-url: expected "
                        "a string, got a number"));
}

Test(config, disable_compression_and_extensions)
{
    kc_config *cfg = load_ok(kc_with("disable-compression: true, extensions: [{name: x, "
                                     "extension: {a: 1}}]",
                                     NULL),
                             NULL);
    cr_assert(cfg->disable_compression);
    kc_config *d = kc_config_dup(cfg);
    cr_assert(d->disable_compression);
    kc_config_free(d);
    kc_config_free(cfg);
    cfg = load_ok(kc_with("disable-compression: false", NULL), NULL);
    cr_assert_not(cfg->disable_compression);
    kc_config_free(cfg);
    cr_assert_str_eq(load_err(kc_with("disable-compression: 'yes'", NULL), NULL),
                     at("kubeconfig %s/config: context \"dev\": cluster \"c\": "
                        "disable-compression: expected true or false, got a string"));
    /* extensions and preferences are skipped wherever kubeconfig allows them. */
    const char *path = wfile("config", "apiVersion: v1\nkind: Config\npreferences: {colors: true}\n"
                                       "extensions: [{name: e, extension: {}}]\n"
                                       "current-context: dev\n"
                                       "contexts: [{name: dev, context: {cluster: c, user: u, "
                                       "extensions: [{name: e}]}}]\n"
                                       "clusters: [{name: c, cluster: {server: 'https://h', "
                                       "extensions: []}}]\n"
                                       "users: [{name: u, user: {token: t, extensions: "
                                       "[{name: e, extension: 1}]}}]\n");
    cfg = load_ok(path, NULL);
    cr_assert_str_eq(cfg->token, "t");
    cr_assert_null(cfg->exec);
    kc_config_free(cfg);
}

Test(config, unknown_fields_are_named)
{
    cr_assert_str_eq(load_err(kc_with("certificate-authority-dta: QUJD", NULL), NULL),
                     at("kubeconfig %s/config: context \"dev\": cluster \"c\": unsupported field "
                        "\"certificate-authority-dta\""));
    cr_assert_str_eq(load_err(kc_with(NULL, "{token: t, tokenfile: f}"), NULL),
                     at("kubeconfig %s/config: context \"dev\": user \"u\": unsupported field "
                        "\"tokenfile\""));
    /* A field with a null value is as if absent, as Go reads it. */
    kc_config *cfg = load_ok(kc_with("color: null", "{token: t, bogus: ~}"), NULL);
    kc_config_free(cfg);
    const char *path = wfile("config", "current-context: dev\n"
                                       "contexts: [{name: dev, context: {cluster: c, "
                                       "namespce: x}}]\n"
                                       "clusters: [{name: c, cluster: {server: 'https://h'}}]\n");
    cr_assert_str_eq(load_err(path, NULL), at("kubeconfig %s/config: context \"dev\": unsupported "
                                              "field \"namespce\""));
    /* Next to an entry's name and mapping: named by its place in the list. */
    path = wfile("config", "current-context: dev\n"
                           "contexts: [{name: dev, context: {cluster: c}}]\n"
                           "clusters: [{name: other, cluster: {server: 'https://o'}},\n"
                           "           {name: c, server: 'https://h', cluster: {server: "
                           "'https://h'}}]\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: unsupported field \"clusters[1].server\""));
    /* A user that is not a mapping is not "no credentials". */
    path = wfile("config", "current-context: dev\n"
                           "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                           "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                           "users: [{name: u, user: 'token'}]\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: users[0].user: expected a mapping, got a string"));
    path = wfile("config", "current-context: dev\n"
                           "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                           "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                           "users: [{name: u, user: null}]\n");
    cfg = load_ok(path, NULL);
    cr_assert_null(cfg->token);
    kc_config_free(cfg);
    path = wfile("config", "current-context: dev\n"
                           "contexts: [{name: dev, context: {cluster: c}}]\n"
                           "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                           "current_context: dev\n");
    cr_assert_str_eq(load_err(path, NULL),
                     at("kubeconfig %s/config: unsupported field \"current_context\""));
    /* Entries the context does not use are not checked (kubectl does not read them either). */
    path = wfile("config", "current-context: dev\n"
                           "contexts: [{name: dev, context: {cluster: c}}]\n"
                           "clusters: [{name: c, cluster: {server: 'https://h'}},\n"
                           "           {name: d, cluster: {server: 'https://d', weird: 1}}]\n");
    cfg = load_ok(path, NULL);
    kc_config_free(cfg);
}

/* ---- exec ---------------------------------------------------------------------------------- */

Test(config, exec_v1_fields)
{
    const char *path =
        wfile("sub/config", "current-context: dev\n"
                            "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
                            "clusters:\n"
                            "- name: c\n"
                            "  cluster:\n"
                            "    server: https://h:6443\n"
                            "    tls-server-name: api.internal\n"
                            "    proxy-url: socks5://p:1080\n"
                            "    disable-compression: true\n"
                            "    extensions:\n"
                            "    - name: other\n"
                            "      extension: {x: 1}\n"
                            "    - name: client.authentication.k8s.io/exec\n"
                            "      extension: {audience: sts, n: 2}\n"
                            "users:\n"
                            "- name: u\n"
                            "  user:\n"
                            "    exec:\n"
                            "      apiVersion: client.authentication.k8s.io/v1\n"
                            "      command: ./bin/get-token\n"
                            "      args: [--cluster, prod, '']\n"
                            "      env:\n"
                            "      - {name: AWS_PROFILE, value: prod}\n"
                            "      - {name: EMPTY}\n"
                            "      interactiveMode: Never\n"
                            "      provideClusterInfo: true\n"
                            "      installHint: |\n"
                            "        get-token is needed:\n"
                            "        brew install get-token\n");
    kc_config *cfg = load_ok(path, NULL);
    const kc_exec_config *e = cfg->exec;
    cr_assert_not_null(e);
    cr_assert_null(cfg->token);
    cr_assert_null(cfg->token_file);
    cr_assert_null(cfg->client_cert_pem);
    cr_assert_str_eq(e->api_version, "client.authentication.k8s.io/v1");
    cr_assert_str_eq(e->command, at("%s/sub/./bin/get-token"));
    cr_assert_eq(e->n_args, 3);
    cr_assert_str_eq(e->args[0], "--cluster");
    cr_assert_str_eq(e->args[1], "prod");
    cr_assert_str_eq(e->args[2], "");
    cr_assert_eq(e->n_env, 2);
    cr_assert_str_eq(e->env[0].name, "AWS_PROFILE");
    cr_assert_str_eq(e->env[0].value, "prod");
    cr_assert_str_eq(e->env[1].name, "EMPTY");
    cr_assert_str_eq(e->env[1].value, "");
    cr_assert_eq(e->interactive_mode, KC_EXEC_INTERACTIVE_NEVER);
    cr_assert(e->provide_cluster_info);
    cr_assert_str_eq(e->install_hint, "get-token is needed:\nbrew install get-token\n");
    cr_assert_str_eq(e->cluster.tls_server_name, "api.internal");
    cr_assert_str_eq(e->cluster.proxy_url, "socks5://p:1080");
    cr_assert(e->cluster.disable_compression);
    cr_assert_not(e->cluster.insecure_skip_tls_verify);
    cr_assert_str_eq(e->cluster.config_json, "{\"audience\":\"sts\",\"n\":2}");
    cr_assert_eq(e->timeout_ms, 0);

    kc_config *d = kc_config_dup(cfg);
    cr_assert_not_null(d);
    kc_config_free(cfg);
    e = d->exec;
    cr_assert_str_eq(e->command, at("%s/sub/./bin/get-token"));
    cr_assert_str_eq(e->args[1], "prod");
    cr_assert_str_eq(e->env[0].value, "prod");
    cr_assert_str_eq(e->install_hint, "get-token is needed:\nbrew install get-token\n");
    cr_assert_str_eq(e->cluster.config_json, "{\"audience\":\"sts\",\"n\":2}");
    cr_assert(e->provide_cluster_info);
    kc_config_free(d);
}

Test(config, exec_v1beta1_defaults)
{
    kc_config *cfg = load_ok(kc_with("insecure-skip-tls-verify: true",
                                     "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                                     "command: aws, args: null, env: null}}"),
                             NULL);
    const kc_exec_config *e = cfg->exec;
    cr_assert_str_eq(e->api_version, "client.authentication.k8s.io/v1beta1");
    /* A bare name stays bare: PATH is searched when it runs. */
    cr_assert_str_eq(e->command, "aws");
    cr_assert_eq(e->n_args, 0);
    cr_assert_eq(e->n_env, 0);
    cr_assert_eq(e->interactive_mode, KC_EXEC_INTERACTIVE_IF_AVAILABLE);
    cr_assert_not(e->provide_cluster_info);
    cr_assert_null(e->install_hint);
    cr_assert(e->cluster.insecure_skip_tls_verify);
    cr_assert_null(e->cluster.config_json);
    kc_config *d = kc_config_dup(cfg);
    cr_assert_str_eq(d->exec->command, "aws");
    kc_config_free(d);
    kc_config_free(cfg);
    cfg = load_ok(kc_with(NULL, "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                                "command: /opt/bin/p, interactiveMode: IfAvailable}}"),
                  NULL);
    cr_assert_str_eq(cfg->exec->command, "/opt/bin/p");
    cr_assert_eq(cfg->exec->interactive_mode, KC_EXEC_INTERACTIVE_IF_AVAILABLE);
    kc_config_free(cfg);
}

Test(config, exec_refusals)
{
    static const struct {
        const char *exec, *want;
    } cases[] = {
        {"{command: aws, interactiveMode: Never}",
         "exec.apiVersion: not set (use client.authentication.k8s.io/v1 or "
         "client.authentication.k8s.io/v1beta1)"},
        {"{apiVersion: client.authentication.k8s.io/v1alpha1, command: aws}",
         "exec.apiVersion: \"client.authentication.k8s.io/v1alpha1\" is not supported (use "
         "client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1)"},
        {"{apiVersion: client.authentication.k8s.io/v1, command: aws}",
         "exec.interactiveMode: required with client.authentication.k8s.io/v1 (use Never or "
         "IfAvailable)"},
        {"{apiVersion: client.authentication.k8s.io/v1, command: aws, interactiveMode: Always}",
         "exec.interactiveMode: Always is not supported: the operator runs without a terminal, so "
         "a plugin that must prompt cannot work (use Never or IfAvailable)"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, interactiveMode: "
         "Always}",
         "exec.interactiveMode: Always is not supported"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, interactiveMode: "
         "never}",
         "exec.interactiveMode: \"never\" is not one of Never, IfAvailable or Always"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1}", "exec.command: not set"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, args: [a, 1]}",
         "exec.args[1]: expected a string, got a number"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, args: a}",
         "exec.args: expected a list, got a string"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, env: [{value: v}]}",
         "exec.env[0].name: not set"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, env: [{name: 'A=B'}]}",
         "exec.env[0].name: \"A=B\" contains '='"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, env: [{name: A, "
         "value: 1}]}",
         "exec.env[0].value: expected a string, got a number"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, env: [{name: A, "
         "vaule: x}]}",
         "unsupported field \"exec.env[0].vaule\""},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, env: [x]}",
         "exec.env[0]: expected a mapping, got a string"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, provideClusterInfo: "
         "'true'}",
         "exec.provideClusterInfo: expected true or false, got a string"},
        {"{apiVersion: client.authentication.k8s.io/v1beta1, command: aws, config: {}}",
         "unsupported field \"exec.config\""},
        {"aws", "exec: expected a mapping, got a string"},
    };
    char user[512];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(user, sizeof(user), "{exec: %s}", cases[i].exec);
        const char *msg = load_err(kc_with(NULL, user), NULL);
        cr_assert(strstr(msg, at("kubeconfig %s/config: context \"dev\": user \"u\": ")), "%s",
                  msg);
        cr_assert(strstr(msg, cases[i].want), "%s: %s", cases[i].exec, msg);
    }
    /* A static credential next to exec: kubectl would silently never run the plugin. */
    cr_assert_str_eq(
        load_err(kc_with(NULL, "{token: t, exec: {apiVersion: "
                               "client.authentication.k8s.io/v1beta1, command: aws}}"),
                 NULL),
        at("kubeconfig %s/config: context \"dev\": user \"u\": exec cannot be combined with token "
           "(kubectl would use token and never run the plugin; keep one)"));
    cr_assert(strstr(load_err(kc_with(NULL, "{client-key-data: QUJD, exec: {apiVersion: "
                                            "client.authentication.k8s.io/v1beta1, command: aws}}"),
                              NULL),
                     "exec cannot be combined with client-key-data"));
    /* exec: null is no exec. */
    kc_config *cfg = load_ok(kc_with(NULL, "{token: t, exec: null}"), NULL);
    cr_assert_null(cfg->exec);
    kc_config_free(cfg);
}

/* ---- in-cluster --------------------------------------------------------------------------- */

static void sa_files(const char *token, const char *ns)
{
    wfile("sa/token", token);
    wfile("sa/ca.crt", CA_PEM);
    if (ns)
        wfile("sa/namespace", ns);
}

static const char *sa_root(void)
{
    static char r[128];
    snprintf(r, sizeof(r), "%s/sa", tdir);
    return r;
}

static const char *incluster_err(void)
{
    static kc_err e;
    kc_config *cfg = (kc_config *)0x1;
    kc_err_clear(&e);
    cr_assert_eq(kc_config_load_incluster(sa_root(), &cfg, &e), KC_ECONFIG, "%s", e.msg);
    cr_assert_null(cfg);
    return e.msg;
}

Test(incluster, loads_service_account)
{
    sa_files("eyJtoken\n", "gpu-operator\n");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    kc_config *cfg = NULL;
    kc_err e = {0};
    cr_assert_eq(kc_config_load_incluster(sa_root(), &cfg, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(cfg->server, "https://10.96.0.1:443");
    cr_assert_null(cfg->token);
    char want[256];
    snprintf(want, sizeof(want), "%s/sa/token", tdir);
    cr_assert_str_eq(cfg->token_file, want);
    cr_assert_str_eq(cfg->ca_pem, CA_PEM);
    cr_assert_eq(cfg->ca_pem_len, strlen(CA_PEM));
    cr_assert_str_eq(cfg->namespace_, "gpu-operator");
    cr_assert_null(cfg->context);
    cr_assert_str_eq(cfg->source, "in-cluster");
    kc_config_free(cfg);
}

Test(incluster, ipv6_and_default_namespace)
{
    sa_files("t", NULL);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    kc_config *cfg = NULL;
    kc_err e = {0};
    cr_assert_eq(kc_config_load_incluster(sa_root(), &cfg, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(cfg->server, "https://[fd00::1]:6443");
    cr_assert_str_eq(cfg->namespace_, "default");
    kc_config_free(cfg);
    /* A blank namespace file also means "default". */
    wfile("sa/namespace", "\n");
    cr_assert_eq(kc_config_load_incluster(sa_root(), &cfg, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(cfg->namespace_, "default");
    kc_config_free(cfg);
}

Test(incluster, errors_name_env_and_files)
{
    cr_assert_str_eq(incluster_err(), "in-cluster config: KUBERNETES_SERVICE_HOST is not set (not "
                                      "running in a pod?)");
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    cr_assert_str_eq(incluster_err(), "in-cluster config: KUBERNETES_SERVICE_PORT is not set");
    setenv("KUBERNETES_SERVICE_PORT", "https", 1);
    cr_assert_str_eq(incluster_err(),
                     "in-cluster config: KUBERNETES_SERVICE_PORT=\"https\" is not a port number");
    setenv("KUBERNETES_SERVICE_PORT", "70000", 1);
    cr_assert(strstr(incluster_err(), "is not a port number"));
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    setenv("KUBERNETES_SERVICE_HOST", "a/b", 1);
    cr_assert(strstr(incluster_err(), "KUBERNETES_SERVICE_HOST=\"a/b\" is not a host name"));
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    cr_assert_str_eq(incluster_err(), at("in-cluster config: %s/sa/token: cannot read: No such "
                                         "file or directory"));
    wfile("sa/token", " \n");
    cr_assert_str_eq(incluster_err(),
                     at("in-cluster config: %s/sa/token: the token file is empty"));
    wfile("sa/token", "tok");
    cr_assert_str_eq(incluster_err(), at("in-cluster config: %s/sa/ca.crt: cannot read: No such "
                                         "file or directory"));
    wfile("sa/ca.crt", CA_PEM);
    char nsdir[256];
    snprintf(nsdir, sizeof(nsdir), "%s/sa/namespace", tdir);
    cr_assert_eq(mkdir(nsdir, 0700), 0);
    cr_assert_str_eq(incluster_err(), at("in-cluster config: %s/sa/namespace: cannot read: is a "
                                         "directory"));
    rmdir(nsdir);
    kc_config *cfg = NULL;
    cr_assert_eq(kc_config_load_incluster(sa_root(), &cfg, NULL), KC_OK);
    kc_config_free(cfg);
    cr_assert_eq(kc_config_load_incluster(sa_root(), NULL, NULL), KC_EARG);
}

Test(incluster, root_from_kc_incluster_root)
{
    /* kubesim's local pods: the service-account files are where KC_INCLUSTER_ROOT says. */
    sa_files("envtoken", "from-env\n");
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    setenv("KC_INCLUSTER_ROOT", sa_root(), 1);
    kc_config *cfg = NULL;
    kc_err e = {0};
    cr_assert_eq(kc_config_load_incluster(NULL, &cfg, &e), KC_OK, "%s", e.msg);
    char want[256];
    snprintf(want, sizeof(want), "%s/sa/token", tdir);
    cr_assert_str_eq(cfg->token_file, want);
    cr_assert_str_eq(cfg->namespace_, "from-env");
    cr_assert_str_eq(cfg->ca_pem, CA_PEM);
    kc_config_free(cfg);
    /* "" is "not given" too. */
    cr_assert_eq(kc_config_load_incluster("", &cfg, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(cfg->namespace_, "from-env");
    kc_config_free(cfg);
    /* An explicit root wins over the variable. */
    wfile("other/token", "t2");
    wfile("other/ca.crt", CA_PEM);
    wfile("other/namespace", "explicit");
    char other[256];
    snprintf(other, sizeof(other), "%s/other", tdir);
    cr_assert_eq(kc_config_load_incluster(other, &cfg, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(cfg->namespace_, "explicit");
    kc_config_free(cfg);
    /* Errors name the files under the variable's directory. */
    setenv("KC_INCLUSTER_ROOT", other, 1);
    cr_assert_eq(unlink(wfile("other/ca.crt", "")), 0);
    cr_assert_eq(kc_config_load_incluster(NULL, &cfg, &e), KC_ECONFIG);
    cr_assert_str_eq(e.msg, at("in-cluster config: %s/other/ca.crt: cannot read: No such file or "
                               "directory"));
    /* Set but empty: the standard path. */
    setenv("KC_INCLUSTER_ROOT", "", 1);
    cr_assert_eq(kc_config_load_incluster(NULL, &cfg, &e), KC_ECONFIG);
    cr_assert(strstr(e.msg, "/var/run/secrets/kubernetes.io/serviceaccount/token"), "%s", e.msg);
}

/* ---- load_default order ------------------------------------------------------------------- */

static const char *cfg_with_server(const char *rel, const char *server)
{
    char text[512];
    snprintf(text, sizeof(text),
             "current-context: x\n"
             "contexts: [{name: x, context: {cluster: c}}]\n"
             "clusters: [{name: c, cluster: {server: '%s'}}]\n",
             server);
    return wfile(rel, text);
}

static char *default_server(const char *flag)
{
    kc_config *cfg = NULL;
    kc_err e = {0};
    kc_err_clear(&e);
    cr_assert_eq(kc_config_load_default(flag, NULL, &cfg, &e), KC_OK, "%s", e.msg);
    char *s = strdup(cfg->server);
    kc_config_free(cfg);
    return s;
}

Test(config_default, order)
{
    const char *flag = cfg_with_server("flag", "https://flag");
    const char *env = cfg_with_server("env", "https://env");
    cfg_with_server(".kube/config", "https://home");
    setenv("HOME", tdir, 1);
    setenv("KUBECONFIG", env, 1);
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    char *s = default_server(flag);
    cr_assert_str_eq(s, "https://flag");
    free(s);
    s = default_server("");
    cr_assert_str_eq(s, "https://env");
    free(s);
    /* With KUBECONFIG unset, in-cluster comes before ~/.kube/config; the default service-account
     * directory does not exist here, so the error says so. */
    unsetenv("KUBECONFIG");
    kc_config *cfg = (kc_config *)0x1;
    kc_err e = {0};
    cr_assert_eq(kc_config_load_default(NULL, NULL, &cfg, &e), KC_ECONFIG);
    cr_assert_null(cfg);
    cr_assert(strstr(e.msg, "in-cluster config: /var/run/secrets/kubernetes.io/serviceaccount/"),
              "%s", e.msg);
    /* ... and from KC_INCLUSTER_ROOT when kubesim's kubelet sets it. */
    sa_files("tok", "ns-from-env");
    setenv("KC_INCLUSTER_ROOT", sa_root(), 1);
    cr_assert_eq(kc_config_load_default(NULL, NULL, &cfg, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(cfg->server, "https://10.0.0.1:443");
    cr_assert_str_eq(cfg->source, "in-cluster");
    cr_assert_str_eq(cfg->namespace_, "ns-from-env");
    kc_config_free(cfg);
    /* The variable alone does not make a pod: without KUBERNETES_SERVICE_HOST, ~/.kube/config. */
    unsetenv("KUBERNETES_SERVICE_HOST");
    s = default_server(NULL);
    cr_assert_str_eq(s, "https://home");
    free(s);
}

Test(config_default, nothing_found)
{
    setenv("HOME", tdir, 1);
    kc_config *cfg = NULL;
    kc_err e = {0};
    cr_assert_eq(kc_config_load_default(NULL, NULL, &cfg, &e), KC_ECONFIG);
    cr_assert_str_eq(e.msg,
                     at("no configuration found (pass --kubeconfig, set KUBECONFIG, run in a "
                        "cluster or create ~/.kube/config): kubeconfig %s/.kube/config: "
                        "cannot read: No such file or directory"));
    cr_assert_eq(kc_config_load_default(NULL, NULL, NULL, &e), KC_EARG);
    cr_assert_eq(kc_config_load_kubeconfig(NULL, NULL, NULL, &e), KC_EARG);
}

Test(config, tu_write_tmp_kubeconfig)
{
    /* A kubeconfig next to its CA in /tmp, named by the bare file name. */
    char *ca = tu_write_tmp(CA_PEM);
    cr_assert_not_null(ca);
    char text[512];
    snprintf(text, sizeof(text),
             "current-context: t\n"
             "contexts: [{name: t, context: {cluster: c}}]\n"
             "clusters: [{name: c, cluster: {server: 'https://t', certificate-authority: %s}}]\n",
             strrchr(ca, '/') + 1);
    char *path = tu_write_tmp(text);
    cr_assert_not_null(path);
    kc_config *cfg = load_ok(path, NULL);
    cr_assert_str_eq(cfg->ca_pem, CA_PEM);
    kc_config_free(cfg);
    tu_remove_tmp(path);
    tu_remove_tmp(ca);
}
