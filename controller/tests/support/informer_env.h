/* informer_env: a harness for informer tests (fakeapi + client + loop + recording handlers). */
#ifndef INFORMER_ENV_H
#define INFORMER_ENV_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "fakeapi.h"
#include "kc_informer.h"

/* One test's world. The loop runs on the test thread, stepped by ie_wait_for / ie_settle, so
 * handler state needs no locking. */
typedef struct ie_env {
    uv_loop_t loop;
    uv_timer_t tick; /* bounds each UV_RUN_ONCE so predicates are re-checked often */
    fakeapi *api;
    kc_client *c;
    kc_informer *inf;
    /* What the recording handlers saw. */
    int adds, updates, deletes;
    int adds_before_synced; /* add handlers that ran while synced() was still false */
    int bad;                /* handler calls inconsistent with the previous ones */
    char bad_msg[512];
    json_t *mirror;   /* key → object, maintained only from handler calls */
    bool stop_in_add; /* the add handler stops the informer */
} ie_env;

long long ie_now_ms(void);
/* Starts a fakeapi serving res and a client on a fresh loop. */
void ie_init(ie_env *e, const kc_resource *res);
/* Creates e->inf with the recording handlers (not started). */
void ie_informer(ie_env *e, const kc_resource *res, const char *ns, const kc_informer_opts *o);
/* Frees the informer, detaches and closes the loop (asserting nothing is left), frees the rest. */
void ie_fini(ie_env *e);
/* Backoffs of 20 ms → 100 ms so fault tests finish quickly. */
kc_informer_opts ie_fast_opts(void);

/* Steps the loop until pred(e) holds; false on timeout. */
bool ie_wait_for(ie_env *e, bool (*pred)(ie_env *), long timeout_ms);
/* Runs the loop for ms, so that duplicate or late events would show up. */
void ie_settle(ie_env *e, long ms);
bool ie_is_synced(ie_env *e); /* predicate for ie_wait_for */
/* Starts the informer and asserts it syncs. */
void ie_start_synced(ie_env *e);
/* Asserts that handler calls reach n in total. */
void ie_wait_events(ie_env *e, int n);
/* Asserts that the server accepts its n-th watch (counting from the start) and it is open. */
void ie_wait_watches(ie_env *e, unsigned n);

int ie_events(const ie_env *e); /* adds + updates + deletes */
kc_informer_stats ie_stats(ie_env *e);
const char *ie_rv_of(const json_t *obj);
/* True when the cache holds exactly the server's objects at their versions. */
bool ie_cache_matches(ie_env *e);
/* Asserts cache == server == what the handlers reported, and no inconsistent handler call. */
void ie_assert_consistent(ie_env *e);
/* Puts a ConfigMap ns/name with labels app=demo, a managedFields entry and data.v = value. */
uint64_t ie_put_cm(ie_env *e, const char *ns, const char *name, const char *value);

#endif
