/* kc_error: the error codes and error record every fallible library call reports through. */
#ifndef KC_ERROR_H
#define KC_ERROR_H

#include <stdarg.h>

/* Every fallible library function returns a kc_code (KC_OK on success) and, when given a non-NULL
 * kc_err, fills it with a message a user can act on. API errors map from the HTTP status and the
 * reason of the server's Status object. */
typedef enum kc_code {
    KC_OK = 0,
    KC_ENOMEM,           /* allocation failed */
    KC_EARG,             /* caller passed an invalid argument */
    KC_EPARSE,           /* malformed input (JSON, YAML, selector, patch, watch stream) */
    KC_ECONFIG,          /* kubeconfig or in-cluster configuration missing or malformed */
    KC_EIO,              /* connection failed, reset or refused; file I/O failed */
    KC_ETIMEDOUT,        /* client-side timeout */
    KC_ETLS,             /* TLS handshake or certificate verification failed */
    KC_ECANCELED,        /* operation canceled (shutdown) */
    KC_EPATCHTEST,       /* a JSON patch "test" operation did not match */
    KC_EBADREQUEST,      /* 400 BadRequest */
    KC_EUNAUTHORIZED,    /* 401 Unauthorized */
    KC_EFORBIDDEN,       /* 403 Forbidden */
    KC_ENOTFOUND,        /* 404 NotFound */
    KC_EMETHOD,          /* 405 MethodNotAllowed */
    KC_EALREADYEXISTS,   /* 409 AlreadyExists */
    KC_ECONFLICT,        /* 409 Conflict (stale resourceVersion) */
    KC_EEXPIRED,         /* 410 Expired / Gone (resourceVersion too old) */
    KC_EUNSUPPORTED,     /* 415 UnsupportedMediaType */
    KC_EINVALID,         /* 422 Invalid */
    KC_ETOOMANYREQUESTS, /* 429 TooManyRequests */
    KC_ESERVER,          /* 500 InternalError and other unclassified 5xx */
    KC_EUNAVAILABLE,     /* 503 ServiceUnavailable */
    KC_ESERVERTIMEOUT,   /* 504 / Timeout from the server */
    KC_EHTTP,            /* any other unexpected HTTP status */
    KC_CODE_COUNT
} kc_code;

#define KC_ERR_MSG_MAX 512

typedef struct kc_err {
    kc_code code;
    int http_status; /* 0 when the error did not come from an HTTP response */
    char reason[48]; /* the Status reason from the server ("NotFound"), else the code's name */
    char msg[KC_ERR_MSG_MAX];
    int retry_after_s; /* Retry-After seconds the server asked for, 0 when absent */
} kc_err;

/* Returns the stable name of a code, e.g. "NotFound" or "ParseError". */
const char *kc_code_name(kc_code code);

/* Clears an error record to KC_OK. Accepts NULL. */
void kc_err_clear(kc_err *err);

/* Sets code and a printf-style message (no-op for a NULL err); returns code for `return
 * kc_err_set(...)`. */
kc_code kc_err_set(kc_err *err, kc_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
kc_code kc_err_vset(kc_err *err, kc_code code, const char *fmt, va_list ap);

/* Prepends context to an existing message: "context: old message". Returns nothing on purpose:
 * with a NULL err there is no code to hand back, so callers keep and return their own code. */
void kc_err_prefix(kc_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Maps an HTTP status code to the closest kc_code (used when no Status reason is available). */
kc_code kc_code_from_http(int status);

/* Maps a Kubernetes Status reason ("AlreadyExists") plus HTTP status to a kc_code. */
kc_code kc_code_from_reason(const char *reason, int status);

#endif
