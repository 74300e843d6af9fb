/* Fuzz target: fleet files and fault specs must parse or fail cleanly, never crash or leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ns_fault.h"
#include "ns_fleet.h"
#include "ns_node.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ns_fleet *f = NULL;
    kc_err err;
    if (ns_fleet_parse((const char *)data, size, "fuzz", &f, &err) == KC_OK) {
        for (size_t i = 0; i < f->n_groups && i < 4; i++) {
            json_t *n = ns_node_object(&f->groups[i], "n", (unsigned)i);
            json_decref(n);
        }
        ns_fleet_free(f);
    }
    /* The same bytes as a fault spec. */
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    ns_faults faults;
    ns_fault_parse(s, 8, &faults, &err);
    free(s);
    return 0;
}
