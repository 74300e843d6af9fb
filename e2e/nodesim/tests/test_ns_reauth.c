/* Tests for ns_reauth: a static token becomes a token file that follows the kubeconfig when
 * kubesim writes it again with another token; a kubeconfig without one is left alone. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ns_reauth.h"

static char dir[64], path[128];

static void write_kubeconfig(const char *server, const char *token)
{
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
            "clusters:\n- name: sim\n  cluster:\n    server: %s\n"
            "    insecure-skip-tls-verify: true\n"
            "users:\n- name: admin\n  user:\n    token: \"%s\"\n"
            "contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: admin\n",
            server, token);
    fclose(f);
    cr_assert_eq(rename(tmp, path), 0);
}

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "r");
    if (!f)
        return NULL;
    static char buf[256];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/ns_reauth.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/kubeconfig", dir);
    setenv("TMPDIR", dir, 1);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(reauth, .init = setup, .fini = teardown);

Test(reauth, the_token_follows_the_kubeconfig)
{
    write_kubeconfig("https://127.0.0.1:6443", "aaaa");
    kc_config *cfg = NULL;
    kc_err err = {0};
    cr_assert_eq(kc_config_load_kubeconfig(path, NULL, &cfg, &err), KC_OK, "%s", err.msg);
    ns_reauth *r = NULL;
    cr_assert_eq(ns_reauth_start(cfg, 60000, &r, &err), KC_OK, "%s", err.msg);
    cr_assert_not_null(r);
    cr_assert_null(cfg->token, "the static token became a token file");
    cr_assert_not_null(cfg->token_file);
    char tf[PATH_MAX];
    snprintf(tf, sizeof(tf), "%s", cfg->token_file);
    cr_assert_str_eq(slurp(tf), "aaaa");
    cr_assert_not(ns_reauth_check(r), "nothing changed");
    /* kubesim starts again on a reset directory: same server, new token. */
    sleep(1); /* a new mtime even on coarse clocks */
    write_kubeconfig("https://127.0.0.1:6443", "bbbb");
    cr_assert(ns_reauth_check(r));
    cr_assert_str_eq(slurp(tf), "bbbb");
    cr_assert_not(ns_reauth_check(r), "read once");
    ns_reauth_stop(r);
    cr_assert_eq(access(tf, F_OK), -1, "the token file is removed");
    kc_config_free(cfg);
}

Test(reauth, nothing_to_follow_without_a_static_token)
{
    kc_config cfg = {0};
    ns_reauth *r = (ns_reauth *)1;
    cr_assert_eq(ns_reauth_start(&cfg, 1000, &r, NULL), KC_OK);
    cr_assert_null(r);
    ns_reauth_stop(NULL);
}
