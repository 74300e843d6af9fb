/* ns_migparted: the default mig-parted config nodesim's MIG manager falls back to; the parser,
 * validator and resolver of the format are the operator's (kc_migparted.h), so the simulated MIG
 * manager and the operator's checks apply the same rules. */
#ifndef NS_MIGPARTED_H
#define NS_MIGPARTED_H

#include "kc_migparted.h"

/* The default config NVIDIA's GPU Operator ships (ConfigMap default-mig-parted-config, key
 * config.yaml; v26.7.0): all-disabled, all-enabled, all-balanced with an entry per device id and
 * the all-<profile> configs, most of them for every GPU (`devices: all`). A static string. */
const char *ns_migparted_default_yaml(void);

#endif
