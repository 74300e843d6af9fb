/* kc_error: error codes, their names, and the mapping from HTTP statuses and Status reasons. */
#include "kc_error.h"

#include <stdio.h>
#include <string.h>

static const char *const names[KC_CODE_COUNT] = {
    [KC_OK] = "OK",
    [KC_ENOMEM] = "OutOfMemory",
    [KC_EARG] = "InvalidArgument",
    [KC_EPARSE] = "ParseError",
    [KC_ECONFIG] = "ConfigError",
    [KC_EIO] = "ConnectionError",
    [KC_ETIMEDOUT] = "ClientTimeout",
    [KC_ETLS] = "TLSError",
    [KC_ECANCELED] = "Canceled",
    [KC_EPATCHTEST] = "PatchTestFailed",
    [KC_EBADREQUEST] = "BadRequest",
    [KC_EUNAUTHORIZED] = "Unauthorized",
    [KC_EFORBIDDEN] = "Forbidden",
    [KC_ENOTFOUND] = "NotFound",
    [KC_EMETHOD] = "MethodNotAllowed",
    [KC_EALREADYEXISTS] = "AlreadyExists",
    [KC_ECONFLICT] = "Conflict",
    [KC_EEXPIRED] = "Expired",
    [KC_EUNSUPPORTED] = "UnsupportedMediaType",
    [KC_EINVALID] = "Invalid",
    [KC_ETOOMANYREQUESTS] = "TooManyRequests",
    [KC_ESERVER] = "InternalError",
    [KC_EUNAVAILABLE] = "ServiceUnavailable",
    [KC_ESERVERTIMEOUT] = "Timeout",
    [KC_EHTTP] = "UnexpectedHTTPStatus",
};

const char *kc_code_name(kc_code code)
{
    if ((int)code < 0 || code >= KC_CODE_COUNT)
        return "Unknown";
    return names[code];
}

void kc_err_clear(kc_err *err)
{
    if (err)
        memset(err, 0, sizeof(*err));
}

kc_code kc_err_vset(kc_err *err, kc_code code, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    /* A fresh record each time: callers that know more (HTTP status, server reason) set it after.
     */
    err->code = code;
    err->http_status = 0;
    err->retry_after_s = 0;
    snprintf(err->reason, sizeof(err->reason), "%s", kc_code_name(code));
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    return code;
}

kc_code kc_err_set(kc_err *err, kc_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kc_err_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void kc_err_prefix(kc_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[KC_ERR_MSG_MAX];
    char old[KC_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
}

kc_code kc_code_from_http(int status)
{
    switch (status) {
    case 400:
        return KC_EBADREQUEST;
    case 401:
        return KC_EUNAUTHORIZED;
    case 403:
        return KC_EFORBIDDEN;
    case 404:
        return KC_ENOTFOUND;
    case 405:
        return KC_EMETHOD;
    case 409:
        return KC_ECONFLICT;
    case 410:
        return KC_EEXPIRED;
    case 415:
        return KC_EUNSUPPORTED;
    case 422:
        return KC_EINVALID;
    case 429:
        return KC_ETOOMANYREQUESTS;
    case 500:
        return KC_ESERVER;
    case 503:
        return KC_EUNAVAILABLE;
    case 504:
        return KC_ESERVERTIMEOUT;
    default:
        if (status >= 200 && status < 300)
            return KC_OK;
        if (status >= 500)
            return KC_ESERVER;
        return KC_EHTTP;
    }
}

kc_code kc_code_from_reason(const char *reason, int status)
{
    static const struct {
        const char *reason;
        kc_code code;
    } map[] = {
        {"NotFound", KC_ENOTFOUND},
        {"AlreadyExists", KC_EALREADYEXISTS},
        {"Conflict", KC_ECONFLICT},
        {"Invalid", KC_EINVALID},
        {"Expired", KC_EEXPIRED},
        {"Gone", KC_EEXPIRED},
        {"Forbidden", KC_EFORBIDDEN},
        {"Unauthorized", KC_EUNAUTHORIZED},
        {"TooManyRequests", KC_ETOOMANYREQUESTS},
        {"BadRequest", KC_EBADREQUEST},
        {"MethodNotAllowed", KC_EMETHOD},
        {"UnsupportedMediaType", KC_EUNSUPPORTED},
        {"InternalError", KC_ESERVER},
        {"ServiceUnavailable", KC_EUNAVAILABLE},
        {"Timeout", KC_ESERVERTIMEOUT},
        {"ServerTimeout", KC_ESERVERTIMEOUT},
    };
    if (reason && reason[0]) {
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
            if (strcmp(map[i].reason, reason) == 0)
                return map[i].code;
    }
    return kc_code_from_http(status);
}
