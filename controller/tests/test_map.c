/* Tests for kc_map: put/get/replace/remove, growth, and removal keeping probe chains intact. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_map.h"

#define V(n) ((void *)(uintptr_t)(n))

Test(map, put_get_replace_remove)
{
    kc_map *m = kc_map_new();
    cr_assert_not_null(m);
    cr_assert_null(kc_map_get(m, "a"));
    void *old = V(99);
    cr_assert_eq(kc_map_put(m, "a", V(1), &old), KC_OK);
    cr_assert_null(old);
    cr_assert_eq(kc_map_put(m, "b", V(2), NULL), KC_OK);
    cr_assert_eq(kc_map_size(m), 2);
    cr_assert_eq(kc_map_get(m, "a"), V(1));
    cr_assert_eq(kc_map_put(m, "a", V(3), &old), KC_OK);
    cr_assert_eq(old, V(1));
    cr_assert_eq(kc_map_size(m), 2, "replacing must not add an entry");
    cr_assert_eq(kc_map_get(m, "a"), V(3));
    cr_assert_eq(kc_map_remove(m, "a"), V(3));
    cr_assert_null(kc_map_remove(m, "a"));
    cr_assert_null(kc_map_get(m, "a"));
    cr_assert_eq(kc_map_size(m), 1);
    cr_assert_eq(kc_map_put(m, "c", NULL, NULL), KC_EARG, "NULL values are refused");
    cr_assert_eq(kc_map_put(m, NULL, V(1), NULL), KC_EARG);
    kc_map_free(m, NULL);
    kc_map_free(NULL, NULL);
    cr_assert_null(kc_map_get(NULL, "a"));
    cr_assert_eq(kc_map_size(NULL), 0);
}

Test(map, many_keys_with_interleaved_removal)
{
    kc_map *m = kc_map_new();
    char key[32];
    const int n = 5000;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "ns/pod-%d", i);
        cr_assert_eq(kc_map_put(m, key, V(i + 1), NULL), KC_OK);
    }
    cr_assert_eq(kc_map_size(m), (size_t)n);
    /* Remove every third key; the rest must stay reachable (backward shift correctness). */
    for (int i = 0; i < n; i += 3) {
        snprintf(key, sizeof(key), "ns/pod-%d", i);
        cr_assert_eq(kc_map_remove(m, key), V(i + 1));
    }
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "ns/pod-%d", i);
        if (i % 3 == 0)
            cr_assert_null(kc_map_get(m, key), "%s should be gone", key);
        else
            cr_assert_eq(kc_map_get(m, key), V(i + 1), "%s lost", key);
    }
    /* Iteration visits each remaining entry exactly once. */
    size_t pos = 0, seen = 0;
    const char *k;
    void *v;
    uintptr_t sum = 0, want = 0;
    while (kc_map_next(m, &pos, &k, &v)) {
        seen++;
        sum += (uintptr_t)v;
        cr_assert_eq(kc_map_get(m, k), v);
    }
    for (int i = 0; i < n; i++)
        if (i % 3)
            want += (uintptr_t)(i + 1);
    cr_assert_eq(seen, kc_map_size(m));
    cr_assert_eq(sum, want);
    kc_map_free(m, NULL);
}

Test(map, free_releases_values)
{
    kc_map *m = kc_map_new();
    for (int i = 0; i < 100; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", i);
        char *val = strdup(key);
        cr_assert_eq(kc_map_put(m, key, val, NULL), KC_OK);
    }
    cr_assert_str_eq(kc_map_get(m, "k42"), "k42");
    kc_map_free(m, free); /* valgrind/ASan verify nothing leaks */
}
