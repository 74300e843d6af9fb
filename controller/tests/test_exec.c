/* Tests for kc_exec: exec credential plugins run from small shell scripts, and their output. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kc_base64.h"
#include "kc_config.h"
#include "kc_exec.h"

#define V1      "client.authentication.k8s.io/v1"
#define V1BETA1 "client.authentication.k8s.io/v1beta1"
#define CA_PEM  "-----BEGIN CERTIFICATE-----\nMIIBcafake\n-----END CERTIFICATE-----\n"

/* Every test gets a fresh directory for its plugins and what they write. */
static char tdir[64];

static void setup(void)
{
    snprintf(tdir, sizeof(tdir), "/tmp/kcexec.XXXXXX");
    cr_assert_not_null(mkdtemp(tdir));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void teardown(void)
{
    nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(exec, .init = setup, .fini = teardown);
TestSuite(exec_parse);

/* tdir/rel, in one of a few static buffers. */
static const char *at(const char *rel)
{
    static char paths[8][256];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 256, "%s/%s", tdir, rel);
    return p;
}

static const char *wfile(const char *rel, const char *content, mode_t mode)
{
    const char *p = at(rel);
    for (char *slash = strchr((char *)p + strlen(tdir) + 1, '/'); slash;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(p, 0700);
        *slash = '/';
    }
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "cannot write %s", p);
    fputs(content, f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(p, mode), 0);
    return p;
}

/* Writes an executable /bin/sh script whose body is body (printf-style, tdir available as $D). */
static const char *plugin(const char *rel, const char *body)
{
    char text[8192];
    snprintf(text, sizeof(text), "#!/bin/sh\nD='%s'\n%s\n", tdir, body);
    return wfile(rel, text, 0755);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A config running command with the given apiVersion and nothing else set. */
static kc_exec_config base(const char *command, const char *api)
{
    return (kc_exec_config){.api_version = (char *)api,
                            .command = (char *)command,
                            .interactive_mode = KC_EXEC_INTERACTIVE_NEVER};
}

static kc_exec_result run_ok(const kc_exec_config *cfg, const char *server, const char *ca)
{
    kc_exec_result r;
    kc_err e;
    kc_err_clear(&e);
    kc_code rc = kc_exec_run(cfg, server, ca, &r, &e);
    cr_assert_eq(rc, KC_OK, "%s", e.msg);
    return r;
}

/* Runs expecting code; returns the message (static). */
static const char *run_err(const kc_exec_config *cfg, kc_code code)
{
    static kc_err e;
    kc_exec_result r;
    kc_err_clear(&e);
    kc_code rc = kc_exec_run(cfg, "https://h", NULL, &r, &e);
    cr_assert_eq(rc, code, "expected %s, got %s: %s", kc_code_name(code), kc_code_name(rc), e.msg);
    cr_assert_eq(e.code, code);
    cr_assert_null(r.token);
    cr_assert_null(r.client_cert_pem);
    cr_assert_null(r.client_key_pem);
    return e.msg;
}

#define CRED_V1(status)                                                                            \
    "{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":" status "}"

Test(exec, token_and_expiry)
{
    const char *p = plugin("p.sh", "echo '" CRED_V1("{\"token\":\"tok-123\"}") "'");
    kc_exec_config cfg = base(p, V1);
    kc_exec_result r = run_ok(&cfg, "https://h", NULL);
    cr_assert_str_eq(r.token, "tok-123");
    cr_assert_null(r.client_cert_pem);
    cr_assert_null(r.client_key_pem);
    cr_assert_eq(r.expires, 0);
    kc_exec_result_free(&r);
    cr_assert_null(r.token);

    p = plugin("p2.sh", "cat <<'EOF'\n"
                        "{\n  \"apiVersion\": \"" V1BETA1 "\",\n  \"kind\": \"ExecCredential\",\n"
                        "  \"spec\": {},\n"
                        "  \"status\": {\"token\": \"t2\", \"expirationTimestamp\": "
                        "\"2026-11-26T18:00:00Z\", \"extra\": 1}\n}\n"
                        "EOF");
    cfg = base(p, V1BETA1);
    r = run_ok(&cfg, "https://h", NULL);
    cr_assert_str_eq(r.token, "t2");
    cr_assert_eq(r.expires, (time_t)1795716000);
    kc_exec_result_free(&r);
    kc_exec_result_free(NULL);
}

Test(exec, args_env_and_stdin)
{
    setenv("KC_EXEC_TEST_PARENT", "from-parent", 1);
    setenv("KC_EXEC_TEST_OVERRIDE", "parent-value", 1);
    setenv("KUBERNETES_EXEC_INFO", "stale", 1);
    const char *p = plugin("bin/p.sh", "printf '%s|' \"$0\" \"$#\" \"$1\" \"$2\" \"$3\" "
                                       "\"$KC_EXEC_TEST_PARENT\" \"$KC_EXEC_TEST_OVERRIDE\" "
                                       "\"$KC_EXEC_TEST_NEW\" >\"$D/args\"\n"
                                       "cat >\"$D/stdin\"\n"
                                       "echo '" CRED_V1("{\"token\":\"t\"}") "'");
    char *args[] = {"--region", "eu west", ""};
    kc_exec_env env[] = {{"KC_EXEC_TEST_OVERRIDE", "first"},
                         {"KC_EXEC_TEST_NEW", "new"},
                         {"KC_EXEC_TEST_OVERRIDE", "plugin-value"},
                         {"KUBERNETES_EXEC_INFO", "not this"}};
    kc_exec_config cfg = base(p, V1);
    cfg.args = args;
    cfg.n_args = 3;
    cfg.env = env;
    cfg.n_env = 4;
    kc_exec_result r = run_ok(&cfg, "https://h", NULL);
    kc_exec_result_free(&r);
    char *got = slurp(at("args"));
    char want[512];
    snprintf(want, sizeof(want), "%s|3|--region|eu west||from-parent|plugin-value|new|", p);
    cr_assert_str_eq(got, want);
    free(got);
    /* stdin is /dev/null: cat ends at once with nothing. */
    got = slurp(at("stdin"));
    cr_assert_str_eq(got, "");
    free(got);
    /* Our own environment is unchanged. */
    cr_assert_str_eq(getenv("KC_EXEC_TEST_OVERRIDE"), "parent-value");
    cr_assert_str_eq(getenv("KUBERNETES_EXEC_INFO"), "stale");
}

static json_t *exec_info_of(kc_exec_config *cfg, const char *server, const char *ca)
{
    kc_exec_result r = run_ok(cfg, server, ca);
    kc_exec_result_free(&r);
    char *text = slurp(at("info"));
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    cr_assert_not_null(doc, "%s: %s", text, je.text);
    free(text);
    return doc;
}

Test(exec, exec_info)
{
    const char *p = plugin("p.sh", "printf '%s' \"$KUBERNETES_EXEC_INFO\" >\"$D/info\"\n"
                                   "echo '" CRED_V1("{\"token\":\"t\"}") "'");
    kc_exec_config cfg = base(p, V1);
    json_t *doc = exec_info_of(&cfg, "https://h:6443", CA_PEM);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "apiVersion")), V1);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "kind")), "ExecCredential");
    json_t *spec = json_object_get(doc, "spec");
    cr_assert(json_is_false(json_object_get(spec, "interactive")));
    /* No cluster without provideClusterInfo. */
    cr_assert_null(json_object_get(spec, "cluster"));
    cr_assert_eq(json_object_size(spec), 1);
    json_decref(doc);

    cfg.provide_cluster_info = true;
    cfg.interactive_mode = KC_EXEC_INTERACTIVE_IF_AVAILABLE;
    doc = exec_info_of(&cfg, "https://h:6443", CA_PEM);
    json_t *cluster = json_object_get(json_object_get(doc, "spec"), "cluster");
    cr_assert(json_is_false(json_object_get(json_object_get(doc, "spec"), "interactive")));
    cr_assert_str_eq(json_string_value(json_object_get(cluster, "server")), "https://h:6443");
    char *ca64 = kc_base64_encode((const unsigned char *)CA_PEM, strlen(CA_PEM));
    cr_assert_str_eq(json_string_value(json_object_get(cluster, "certificate-authority-data")),
                     ca64);
    free(ca64);
    /* Empty fields are left out, as client-go leaves them out. */
    cr_assert_eq(json_object_size(cluster), 2, "%zu", json_object_size(cluster));
    json_decref(doc);

    cfg.api_version = V1BETA1;
    p = plugin("p.sh", "printf '%s' \"$KUBERNETES_EXEC_INFO\" >\"$D/info\"\n"
                       "echo '{\"apiVersion\":\"" V1BETA1
                       "\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'");
    cfg.cluster = (kc_exec_cluster){.tls_server_name = "api.internal",
                                    .insecure_skip_tls_verify = true,
                                    .proxy_url = "http://proxy:3128",
                                    .disable_compression = true,
                                    .config_json = "{\"audience\":\"x\"}"};
    doc = exec_info_of(&cfg, "https://h", NULL);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "apiVersion")), V1BETA1);
    cluster = json_object_get(json_object_get(doc, "spec"), "cluster");
    cr_assert_str_eq(json_string_value(json_object_get(cluster, "server")), "https://h");
    cr_assert_null(json_object_get(cluster, "certificate-authority-data"));
    cr_assert_str_eq(json_string_value(json_object_get(cluster, "tls-server-name")),
                     "api.internal");
    cr_assert(json_is_true(json_object_get(cluster, "insecure-skip-tls-verify")));
    cr_assert_str_eq(json_string_value(json_object_get(cluster, "proxy-url")), "http://proxy:3128");
    cr_assert(json_is_true(json_object_get(cluster, "disable-compression")));
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(cluster, "config"), "audience")), "x");
    json_decref(doc);
}

Test(exec, exit_status_and_signal)
{
    const char *p = plugin("fail.sh", "echo 'plugin: not logged in' >&2\nexit 3");
    kc_exec_config cfg = base(p, V1);
    char want[512];
    snprintf(want, sizeof(want),
             "exec plugin \"%s\": exited with status 3 (its stderr is passed on to ours)", p);
    cr_assert_str_eq(run_err(&cfg, KC_EIO), want);
    p = plugin("sig.sh", "kill -TERM $$");
    cfg.command = (char *)p;
    snprintf(want, sizeof(want), "exec plugin \"%s\": killed by signal 15 (SIGTERM)", p);
    cr_assert_str_eq(run_err(&cfg, KC_EIO), want);
}

Test(exec, stderr_passes_through)
{
    const char *p = plugin("p.sh", "echo 'a prompt on stderr' >&2\n"
                                   "echo '" CRED_V1("{\"token\":\"t\"}") "'");
    kc_exec_config cfg = base(p, V1);
    /* Our stderr goes to a file for the run. */
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(at("stderr"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(saved >= 0 && fd >= 0);
    cr_assert_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    close(fd);
    kc_exec_result r;
    kc_err e;
    kc_code rc = kc_exec_run(&cfg, "https://h", NULL, &r, &e);
    dup2(saved, STDERR_FILENO);
    close(saved);
    cr_assert_eq(rc, KC_OK, "%s", e.msg);
    cr_assert_str_eq(r.token, "t");
    kc_exec_result_free(&r);
    char *got = slurp(at("stderr"));
    cr_assert_str_eq(got, "a prompt on stderr\n");
    free(got);
}

Test(exec, not_found_uses_install_hint)
{
    setenv("PATH", at("bin"), 1);
    kc_exec_config cfg = base("kc-no-such-plugin", V1);
    cfg.install_hint = "kc-no-such-plugin is required.\n  Install it with:\n\n  brew install x\n";
    cr_assert_str_eq(run_err(&cfg, KC_ECONFIG),
                     "exec plugin \"kc-no-such-plugin\": not found in PATH; install hint: "
                     "kc-no-such-plugin is required. Install it with: brew install x");
    cfg.install_hint = NULL;
    cr_assert_str_eq(run_err(&cfg, KC_ECONFIG),
                     "exec plugin \"kc-no-such-plugin\": not found in PATH");
    /* Found in PATH: a directory and a file that is not executable on the way are skipped;
     * relative directories are never searched. */
    mkdir(at("bin"), 0700);
    mkdir(at("bin/kc-plugin"), 0700);
    wfile("bin2/kc-plugin", "#!/bin/sh\nexit 9\n", 0644);
    plugin("bin3/kc-plugin", "echo '" CRED_V1("{\"token\":\"from-path\"}") "'");
    plugin("kc-plugin", "exit 7");
    /* The current directory (tdir) holds a kc-plugin that exits 7: "." and "" must not find
     * it, and tdir itself comes after bin3. */
    char path[1024];
    snprintf(path, sizeof(path), ".:bin::%s:%s:%s:%s", at("bin"), at("bin2"), at("bin3"), tdir);
    setenv("PATH", path, 1);
    cr_assert_eq(chdir(tdir), 0);
    cfg.command = "kc-plugin";
    kc_exec_result r = run_ok(&cfg, "https://h", NULL);
    cr_assert_str_eq(r.token, "from-path");
    kc_exec_result_free(&r);
    unsetenv("PATH");
    cr_assert_str_eq(run_err(&cfg, KC_ECONFIG), "exec plugin \"kc-plugin\": not found in PATH");

    /* A path: missing, a directory, not executable. */
    char want[512];
    cfg.command = (char *)at("missing/plugin");
    cfg.install_hint = "see docs";
    snprintf(want, sizeof(want), "exec plugin \"%s\": not found; install hint: see docs",
             cfg.command);
    cr_assert_str_eq(run_err(&cfg, KC_ECONFIG), want);
    cfg.command = (char *)at("bin");
    snprintf(want, sizeof(want),
             "exec plugin \"%s\": cannot run it: Is a directory; install "
             "hint: see docs",
             cfg.command);
    cr_assert_str_eq(run_err(&cfg, KC_ECONFIG), want);
    if (geteuid() != 0) {
        /* root may execute anything with an x bit, but this file has none. */
        cfg.command = (char *)at("bin2/kc-plugin");
        snprintf(want, sizeof(want),
                 "exec plugin \"%s\": cannot run it: not executable; install hint: see docs",
                 cfg.command);
        cr_assert_str_eq(run_err(&cfg, KC_ECONFIG), want);
    }
}

Test(exec, bad_output)
{
    static const struct {
        const char *out, *want;
    } cases[] = {
        {"{\"kind\": \"ExecCredential\",", "invalid JSON at line 1, column 26: unexpected end of "
                                           "input"},
        {"{\n\"status\": {\"token\": \"s3cr3t-tok}}",
         "invalid JSON at line 2, column 33: unexpected end of input"},
        {"{\"status\": {\"token\": s3cr3t-tok}}",
         "invalid JSON at line 1, column 22: invalid JSON syntax"},
        {"", "the output is empty (expected an ExecCredential in JSON)"},
        {"[1]", "expected an ExecCredential object, got an array"},
        {"{\"apiVersion\":\"" V1 "\",\"status\":{\"token\":\"s3cr3t\"}}",
         "kind is missing (expected \"ExecCredential\")"},
        {"{\"kind\":\"Credential\",\"apiVersion\":\"" V1 "\"}",
         "kind is \"Credential\", expected \"ExecCredential\""},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1BETA1 "\"}",
         "apiVersion is \"client.authentication.k8s.io/v1beta1\", expected "
         "\"client.authentication.k8s.io/v1\""},
        {CRED_V1("null"), "status is missing"},
        {CRED_V1("{\"token\":\"\"}"),
         "status holds neither a token nor clientCertificateData and clientKeyData"},
        {CRED_V1("{\"token\":\"s3cr3t\",\"expirationTimestamp\":\"tomorrow\"}"),
         "status.expirationTimestamp \"tomorrow\" is not an RFC 3339 time (such as "
         "2026-11-26T18:00:00Z)"},
    };
    const char *p = plugin("p.sh", "printf '%s' \"$OUT\"");
    kc_exec_config cfg = base(p, V1);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        setenv("OUT", cases[i].out, 1);
        char want[1024];
        snprintf(want, sizeof(want), "exec plugin \"%s\": stdout: %s", p, cases[i].want);
        const char *msg = run_err(&cfg, KC_EPARSE);
        cr_assert_str_eq(msg, want, "case %zu", i);
        cr_assert_null(strstr(msg, "s3cr3t"), "%s", msg);
    }
}

Test(exec, cert_and_key)
{
    const char *p = plugin(
        "p.sh", "cat <<'EOF'\n" CRED_V1("{\"clientCertificateData\":\"-----BEGIN "
                                        "CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n\","
                                        "\"clientKeyData\":\"-----BEGIN PRIVATE "
                                        "KEY-----\\nMIIK\\n-----END PRIVATE KEY-----\\n\","
                                        "\"expirationTimestamp\":\"2024-02-29T23:59:59.123456789Z\""
                                        "}") "\nEOF");
    kc_exec_config cfg = base(p, V1);
    kc_exec_result r = run_ok(&cfg, "https://h", NULL);
    cr_assert_null(r.token);
    cr_assert_str_eq(r.client_cert_pem, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END "
                                        "CERTIFICATE-----\n");
    cr_assert_eq(r.client_cert_pem_len, strlen(r.client_cert_pem));
    cr_assert_str_eq(r.client_key_pem, "-----BEGIN PRIVATE KEY-----\nMIIK\n-----END PRIVATE "
                                       "KEY-----\n");
    cr_assert_eq(r.client_key_pem_len, strlen(r.client_key_pem));
    cr_assert_eq(r.expires, (time_t)1709251199);
    kc_exec_result_free(&r);

    p = plugin("k.sh", "echo '" CRED_V1("{\"clientKeyData\":\"k\",\"token\":\"t\"}") "'");
    cfg.command = (char *)p;
    char want[512];
    snprintf(want, sizeof(want),
             "exec plugin \"%s\": stdout: status.clientKeyData is set but "
             "status.clientCertificateData is not",
             p);
    cr_assert_str_eq(run_err(&cfg, KC_EPARSE), want);
}

Test(exec, timeout_kills)
{
    const char *p = plugin("slow.sh", "exec sleep 30");
    kc_exec_config cfg = base(p, V1);
    cfg.timeout_ms = 300;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char want[512];
    snprintf(want, sizeof(want), "exec plugin \"%s\": did not finish within 300 ms and was killed",
             p);
    cr_assert_str_eq(run_err(&cfg, KC_ETIMEDOUT), want);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_assert(s >= 0.29 && s < 10, "took %.3f s", s);
    /* Whole seconds are said in seconds; output before the timeout changes nothing. */
    p = plugin("slow2.sh", "echo '" CRED_V1("{\"token\":\"t\"}") "'\nexec sleep 30");
    cfg.command = (char *)p;
    cfg.timeout_ms = 1000;
    snprintf(want, sizeof(want), "exec plugin \"%s\": did not finish within 1 s and was killed", p);
    cr_assert_str_eq(run_err(&cfg, KC_ETIMEDOUT), want);
}

Test(exec, descendant_holding_stdout_does_not_block)
{
    /* The plugin exits at once, but leaves a process with its stdout open. */
    const char *p =
        plugin("p.sh", "sleep 3 2>/dev/null &\necho '" CRED_V1("{\"token\":\"t\"}") "'");
    kc_exec_config cfg = base(p, V1);
    cfg.timeout_ms = 20000;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kc_exec_result r = run_ok(&cfg, "https://h", NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_assert_str_eq(r.token, "t");
    kc_exec_result_free(&r);
    cr_assert(t1.tv_sec - t0.tv_sec < 10);
}

Test(exec, output_too_large)
{
    const char *p = plugin("big.sh", "head -c 2000000 /dev/zero | tr '\\0' x");
    kc_exec_config cfg = base(p, V1);
    char want[512];
    snprintf(want, sizeof(want),
             "exec plugin \"%s\": printed more than 1048576 bytes on stdout (an ExecCredential "
             "expected); it was stopped",
             p);
    cr_assert_str_eq(run_err(&cfg, KC_EPARSE), want);
}

Test(exec, refused_configs)
{
    const char *p = plugin("p.sh", "echo '" CRED_V1("{\"token\":\"t\"}") "'");
    kc_exec_config cfg = base(p, V1);
    cfg.interactive_mode = KC_EXEC_INTERACTIVE_ALWAYS;
    cr_assert(strstr(run_err(&cfg, KC_ECONFIG), "interactiveMode Always is not supported: the "
                                                "operator has no terminal"));
    cfg = base(p, "client.authentication.k8s.io/v1alpha1");
    cr_assert(strstr(run_err(&cfg, KC_ECONFIG),
                     "apiVersion \"client.authentication.k8s.io/v1alpha1\" is not supported"));
    cfg = base(p, V1);
    kc_exec_env env[] = {{"A=B", "x"}};
    cfg.env = env;
    cfg.n_env = 1;
    cr_assert(strstr(run_err(&cfg, KC_EARG), "env[0] has no valid name or value"));
    cr_assert_eq(kc_exec_run(NULL, NULL, NULL, NULL, NULL), KC_EARG);
    cfg = base("", V1);
    kc_exec_result r;
    cr_assert_eq(kc_exec_run(&cfg, NULL, NULL, &r, NULL), KC_EARG);
}

Test(exec, from_kubeconfig)
{
    /* End to end: the relative command resolves against the kubeconfig's directory. */
    plugin("kube/bin/plugin", "printf '%s' \"$KUBERNETES_EXEC_INFO\" >\"$D/info\"\n"
                              "echo \"{\\\"apiVersion\\\":\\\"" V1BETA1
                              "\\\",\\\"kind\\\":\\\"ExecCredential\\\",\\\"status\\\":"
                              "{\\\"token\\\":\\\"$1-$TEAM\\\"}}\"");
    char *ca64 = kc_base64_encode((const unsigned char *)CA_PEM, strlen(CA_PEM));
    char text[2048];
    snprintf(text, sizeof(text),
             "current-context: dev\n"
             "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
             "clusters: [{name: c, cluster: {server: 'https://h:6443', "
             "certificate-authority-data: %s, proxy-url: 'http://p:1'}}]\n"
             "users: [{name: u, user: {exec: {apiVersion: " V1BETA1 ", command: bin/plugin, "
             "args: [gpu], env: [{name: TEAM, value: ops}], provideClusterInfo: true}}}]\n",
             ca64);
    free(ca64);
    const char *path = wfile("kube/config", text, 0600);
    kc_config *kc = NULL;
    kc_err e;
    cr_assert_eq(kc_config_load_kubeconfig(path, NULL, &kc, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(kc->exec->command, at("kube/bin/plugin"));
    kc_exec_result r = run_ok(kc->exec, kc->server, kc->ca_pem);
    cr_assert_str_eq(r.token, "gpu-ops");
    kc_exec_result_free(&r);
    char *info = slurp(at("info"));
    json_t *doc = json_loads(info, 0, NULL);
    free(info);
    json_t *cluster = json_object_get(json_object_get(doc, "spec"), "cluster");
    cr_assert_str_eq(json_string_value(json_object_get(cluster, "server")), "https://h:6443");
    cr_assert_str_eq(json_string_value(json_object_get(cluster, "proxy-url")), "http://p:1");
    cr_assert_not_null(json_object_get(cluster, "certificate-authority-data"));
    json_decref(doc);
    kc_config_free(kc);
}

/* ---- kc_exec_parse_credential and kc_exec_parse_time, no processes ------------------------ */

static const char *parse_err(const char *text, const char *api)
{
    static kc_err e;
    kc_exec_result r;
    kc_err_clear(&e);
    cr_assert_eq(kc_exec_parse_credential(text, strlen(text), api, &r, &e), KC_EPARSE, "%s", text);
    cr_assert_null(r.token);
    cr_assert_eq(r.expires, 0);
    return e.msg;
}

Test(exec_parse, shapes)
{
    kc_exec_result r;
    kc_err e;
    const char *ok = "  " CRED_V1("{\"token\":\"a b\"}") "\n\n";
    cr_assert_eq(kc_exec_parse_credential(ok, strlen(ok), V1, &r, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(r.token, "a b");
    kc_exec_result_free(&r);
    cr_assert_str_eq(parse_err(CRED_V1("{\"token\":\"a\\nb\"}"), V1),
                     "status.token holds a control character");
    cr_assert_str_eq(parse_err(CRED_V1("{\"token\":\"a\\u0000b\"}"), V1),
                     "invalid JSON at line 1, column 100: NUL character");
    cr_assert_str_eq(parse_err(CRED_V1("{\"token\":\"a\",\"token\":\"b\"}"), V1),
                     "invalid JSON at line 1, column 101: duplicate object key");
    cr_assert_str_eq(parse_err(CRED_V1("{\"token\":1}"), V1),
                     "status.token: expected a string, got a number");
    cr_assert_str_eq(parse_err(CRED_V1("[]"), V1), "status: expected an object, got an array");
    cr_assert_str_eq(parse_err(CRED_V1("{\"token\":\"t\"}") " x", V1),
                     "invalid JSON at line 1, column 97: unexpected text after the JSON value");
    cr_assert_str_eq(parse_err("{\"kind\":\"ExecCredential\"}", V1),
                     "apiVersion is missing (expected \"client.authentication.k8s.io/v1\")");
    cr_assert_str_eq(parse_err("{\"kind\":\"Exec\\nCredential\"}", V1),
                     "kind is not \"ExecCredential\"");
    cr_assert_str_eq(parse_err(CRED_V1("{\"clientCertificateData\":\"c\"}"), V1),
                     "status.clientCertificateData is set but status.clientKeyData is not");
    cr_assert_str_eq(parse_err(" \n ", V1),
                     "the output is empty (expected an ExecCredential in JSON)");
    cr_assert_eq(kc_exec_parse_credential(NULL, 1, V1, &r, NULL), KC_EARG);
    cr_assert_eq(kc_exec_parse_credential("{}", 2, V1, &r, NULL), KC_EPARSE);
    /* Bytes after a NUL are part of the input, not ignored. */
    cr_assert_eq(kc_exec_parse_credential("{}\0{", 4, V1, &r, NULL), KC_EPARSE);
}

Test(exec_parse, rfc3339)
{
    static const struct {
        const char *s;
        long long want;
    } good[] = {
        {"2026-11-26T18:00:00Z", 1795716000LL},
        {"2026-11-26t18:00:00z", 1795716000LL},
        {"2026-11-26T18:00:00.5Z", 1795716000LL},
        {"2026-11-26T18:00:00.123456789123Z", 1795716000LL},
        {"2026-11-26T18:00:00+05:30", 1795696200LL},
        {"2026-11-26T12:30:00-05:30", 1795716000LL},
        {"2024-02-29T23:59:59Z", 1709251199LL},
        {"1970-01-01T00:00:00Z", 0},
        {"1969-12-31T23:59:59Z", -1},
        {"2000-03-01T00:00:00Z", 951868800LL},
        {"2100-03-01T00:00:00Z", 4107542400LL},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        time_t t = 42;
        cr_assert(kc_exec_parse_time(good[i].s, &t), "%s", good[i].s);
        cr_assert_eq((long long)t, good[i].want, "%s: %lld", good[i].s, (long long)t);
    }
    static const char *const bad[] = {
        "2026-11-26T18:00:00",
        "2026-11-26 18:00:00Z",
        "2026-13-26T18:00:00Z",
        "2026-00-26T18:00:00Z",
        "2025-02-29T18:00:00Z",
        "2100-02-29T00:00:00Z",
        "2026-11-31T18:00:00Z",
        "2026-11-26T24:00:00Z",
        "2026-11-26T18:60:00Z",
        "2026-11-26T18:00:60Z",
        "2026-11-26T18:00:00.Z",
        "2026-11-26T18:00:00+0530",
        "2026-11-26T18:00:00+24:00",
        "2026-11-26T18:00:00Zx",
        "26-11-26T18:00:00Z",
        "2026-11-26T18:00:00+05:3",
        "",
        "2026-11-26T1:00:00Z",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        time_t t;
        cr_assert_not(kc_exec_parse_time(bad[i], &t), "%s", bad[i]);
    }
    cr_assert_not(kc_exec_parse_time(NULL, NULL));
    /* An expiry at the epoch is in the past, not "never". */
    kc_exec_result r;
    const char *text =
        CRED_V1("{\"token\":\"t\",\"expirationTimestamp\":\"1970-01-01T00:00:00Z\"}");
    cr_assert_eq(kc_exec_parse_credential(text, strlen(text), V1, &r, NULL), KC_OK);
    cr_assert_eq(r.expires, 1);
    kc_exec_result_free(&r);
}

Test(exec_parse, config_dup)
{
    char *args[] = {"a", "b"};
    kc_exec_env env[] = {{"N", "v"}};
    kc_exec_config cfg = base("cmd", V1);
    cfg.args = args;
    cfg.n_args = 2;
    cfg.env = env;
    cfg.n_env = 1;
    cfg.install_hint = "hint";
    cfg.provide_cluster_info = true;
    cfg.timeout_ms = 5;
    cfg.cluster.proxy_url = "socks5://p:1";
    cfg.cluster.config_json = "{}";
    kc_exec_config *d = kc_exec_config_dup(&cfg);
    cr_assert_not_null(d);
    cr_assert_str_eq(d->command, "cmd");
    cr_assert_neq(d->command, cfg.command);
    cr_assert_eq(d->n_args, 2);
    cr_assert_str_eq(d->args[1], "b");
    cr_assert_eq(d->n_env, 1);
    cr_assert_str_eq(d->env[0].name, "N");
    cr_assert_str_eq(d->env[0].value, "v");
    cr_assert_str_eq(d->install_hint, "hint");
    cr_assert(d->provide_cluster_info);
    cr_assert_eq(d->timeout_ms, 5);
    cr_assert_eq(d->interactive_mode, KC_EXEC_INTERACTIVE_NEVER);
    cr_assert_str_eq(d->cluster.proxy_url, "socks5://p:1");
    cr_assert_null(d->cluster.tls_server_name);
    cr_assert_str_eq(d->cluster.config_json, "{}");
    kc_exec_config_free(d);
    cr_assert_null(kc_exec_config_dup(NULL));
    kc_exec_config_free(NULL);
}
