/* Fuzz target: kubeconfig resolution from arbitrary YAML (files it names fail to read cleanly). */
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
            kc_config *dup = kc_config_dup(cfg);
            kc_config_free(dup);
            kc_config_free(cfg);
        } else if (cfg || (rc != KC_ECONFIG && rc != KC_ENOMEM) || !err.msg[0]) {
            abort();
        }
    }
    return 0;
}
