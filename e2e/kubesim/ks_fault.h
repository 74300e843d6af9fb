/* ks_fault: kubesim's fault injection: JSON rule sets, switched at runtime through
 * /kubesim/v1/faults or given at start (--faults FILE), that make chosen API requests fail, slow
 * down, lose their watch, expire, meet a conflict, or find the server gone for a while. */
#ifndef KS_FAULT_H
#define KS_FAULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "kc_error.h"
#include "ks_server_int.h"
#include "ks_sim.h"

#define KS_FAULT_MAX_RULES 64

typedef struct ks_faults ks_faults;       /* a server's fault state */
typedef struct ks_fault_set ks_fault_set; /* a parsed rule set */

/* Parses and validates a rule set ({"rules": [...]}). On error, err's message names the field
 * (`rules[1].action: unknown action "eror" (want ...)`) and nothing is left to free. */
kc_code ks_fault_parse(const json_t *doc, ks_fault_set **out, kc_err *err);
void ks_fault_set_free(ks_fault_set *fs);
size_t ks_fault_set_len(const ks_fault_set *fs);

/* Installs a rule set on the running server, replacing the current one (an empty "rules" array
 * clears). KC_EBADREQUEST with the parser's message when invalid; the old set stays then. */
kc_code ks_faults_install(ks_sim *sim, const json_t *doc, kc_err *err);
/* Reads a rule set from a JSON file and installs it. */
kc_code ks_faults_load_file(ks_sim *sim, const char *path, kc_err *err);
/* Clears every rule (and a refusal not yet begun). */
void ks_faults_clear(ks_sim *sim);
/* {"rules": [...as installed...], "counters": [{"name", "action", "matched", "injected",
 * "active"}]} (new reference). */
json_t *ks_faults_status(ks_sim *sim);

/* ---- the server's side (ks_server.c, ks_watch_http.c) ---- */

/* Creates the state and its refusal thread; NULL when out of resources. */
ks_faults *ks_faults_new(struct ks_server *srv);
/* Stops the refusal thread (an outage in progress is not ended: the listeners stay down). Must
 * be called before the daemons are stopped for good, never from a connection thread. */
void ks_faults_shutdown(ks_faults *f);
void ks_faults_free(ks_faults *f);

/* GET/POST/DELETE /kubesim/v1/faults (the caller checked the user is the admin). */
enum MHD_Result ks_fault_handle_admin(ks_req *r);

/* For a routed, authorized resource request: applies the matching rules. Delays happen here;
 * returns true when a fault answered the request (*ret is the result for MHD). */
bool ks_fault_on_request(ks_req *r, enum MHD_Result *ret);

/* A watch stream's view of the cutWatch rules. The stream counts its events in `events`. */
typedef struct ks_fault_watch {
    struct ks_server *srv;
    char user[256], ua[256], resource[128], group[128], ns[256];
    unsigned gen;       /* rule-set generation last looked at */
    uint64_t evaluated; /* bit per rule: already decided for this stream */
    int64_t recheck_ms; /* when a rule not yet active becomes active */
    uint64_t events;    /* events handed to the stream so far */
    uint64_t base;      /* events when the cutting rule chose this stream */
    int64_t limit;      /* events allowed after base; -1: not to be cut */
    int rule;           /* the cutting rule's index */
    char rule_name[128];
} ks_fault_watch;

/* Fills fw for a watch request (r routed). */
void ks_fault_watch_init(ks_req *r, ks_fault_watch *fw);
/* Whether the stream must be cut now (counts the injection once). */
bool ks_fault_watch_cut(ks_fault_watch *fw);
/* Whether the stream has had all the events it may send (no lock, no side effect). */
static inline bool ks_fault_watch_full(const ks_fault_watch *fw)
{
    return fw->limit >= 0 && fw->events - fw->base >= (uint64_t)fw->limit;
}

#endif
