/* Tests for op_crd_apply: where the chart's --apply-crd hook finds the CRD file. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "op_crd_apply.h"

#define CRD "nvidia.com_clusterpolicies.yaml"

Test(op_crd_resolve, bare_name_is_found_in_the_crds_dir)
{
    char buf[4096];
    cr_assert_str_eq(op_crd_resolve(CRD, KC_SOURCE_DIR "/crds", buf, sizeof(buf)),
                     KC_SOURCE_DIR "/crds/" CRD);
}

Test(op_crd_resolve, crds_dir_from_the_environment)
{
    char buf[4096];
    setenv("CRDS_DIR", KC_SOURCE_DIR "/crds", 1);
    cr_assert_str_eq(op_crd_resolve(CRD, NULL, buf, sizeof(buf)), KC_SOURCE_DIR "/crds/" CRD);
    unsetenv("CRDS_DIR");
}

Test(op_crd_resolve, paths_are_taken_as_given)
{
    char buf[4096];
    cr_assert_str_eq(op_crd_resolve("/etc/x.yaml", KC_SOURCE_DIR "/crds", buf, sizeof(buf)),
                     "/etc/x.yaml");
    cr_assert_str_eq(op_crd_resolve("./" CRD, KC_SOURCE_DIR "/crds", buf, sizeof(buf)), "./" CRD);
}

Test(op_crd_resolve, a_name_found_nowhere_is_kept_for_the_error_message)
{
    char buf[4096];
    cr_assert_str_eq(op_crd_resolve("missing.yaml", KC_SOURCE_DIR "/crds", buf, sizeof(buf)),
                     "missing.yaml");
}
