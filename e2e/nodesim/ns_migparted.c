/* ns_migparted: the default mig-parted config. */
#include "ns_migparted.h"

/* default_yaml: the config.yaml block of the ConfigMap in
 * states/state-mig-manager/0400_configmap_mig_parted_config.yaml, made a C string by
 * CMakeLists.txt. */
#include "ns_default_mig_config.h"

const char *ns_migparted_default_yaml(void)
{
    return default_yaml;
}
