/* Fuzz target: kubeconfig resolution from arbitrary YAML (files it names fail to read cleanly);
 * exec plugins are only read, never run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kc_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const contexts[] = {NULL, "dev"};
    for (size_t i = 0; i < 2; i++) {
        kc_config *cfg = NULL;
        kc_err err = {0};
        /* A directory that does not exist, so relative paths in the input resolve nowhere. */
        kc_code rc = kc_config_parse_kubeconfig(
            (const char *)data, size, "/nonexistent-kc-fuzz/config", contexts[i], &cfg, &err);
        if (rc == KC_OK) {
            if (!cfg || !cfg->server || strncasecmp(cfg->server, "http", 4) != 0 ||
                !cfg->namespace_)
                abort();
            if (cfg->proxy_url && strncasecmp(cfg->proxy_url, "http://", 7) != 0 &&
                strncasecmp(cfg->proxy_url, "https://", 8) != 0 &&
                strncasecmp(cfg->proxy_url, "socks5://", 9) != 0)
                abort();
            const kc_exec_config *e = cfg->exec;
            if (e && (!e->command || !e->command[0] || !e->api_version ||
                      (strcmp(e->api_version, KC_EXEC_API_V1) != 0 &&
                       strcmp(e->api_version, KC_EXEC_API_V1BETA1) != 0) ||
                      e->interactive_mode == KC_EXEC_INTERACTIVE_ALWAYS ||
                      (strchr(e->command, '/') && e->command[0] != '/') || cfg->token ||
                      cfg->token_file || cfg->client_cert_pem))
                abort();
            for (size_t j = 0; e && j < e->n_env; j++)
                if (!e->env[j].name[0] || strchr(e->env[j].name, '=') || !e->env[j].value)
                    abort();
            kc_config *dup = kc_config_dup(cfg);
            kc_config_free(dup);
            kc_config_free(cfg);
        } else if (cfg || (rc != KC_ECONFIG && rc != KC_ENOMEM) || !err.msg[0]) {
            abort();
        }
    }
    return 0;
}
