/* ks_admit_fmt: how the API server words validation errors: Go's rendering of values (%q, %v,
 * %#v of maps, slices and label selectors) and the name/key format rules with their messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_admit.h"

/* ---- Go value rendering ------------------------------------------------------------------- */

static void quote_into(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
            p++;
        } else if (c >= 0x20 && c < 0x7f) {
            fputc(c, f);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            static const char esc[] = "abtnvfr";
            if (c >= 7 && c <= 13)
                fprintf(f, "\\%c", esc[c - 7]);
            else
                fprintf(f, "\\x%02x", c);
            p++;
        } else {
            /* Multi-byte UTF-8: printable sequences are kept, invalid bytes escaped. */
            int len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            if (c >= 0xf5)
                len = 0;
            int ok = len;
            for (int i = 1; i < len && ok; i++)
                if ((p[i] & 0xc0) != 0x80)
                    ok = 0;
            if (!ok) {
                fprintf(f, "\\x%02x", c);
                p++;
            } else if (len == 2 && c == 0xc2 && p[1] < 0xa0) {
                fprintf(f, "\\u%04x", p[1]); /* C1 control characters */
                p += 2;
            } else {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            }
        }
    }
    fputc('"', f);
}

char *ks_go_quote(const char *s)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    quote_into(f, s ? s : "");
    fclose(f);
    return out;
}

/* Go's %v of a float64: the shortest representation that reads back, in %e form when the
 * exponent is < -4 or >= 6 (strconv 'g' with the shortest precision). */
static void go_float(FILE *f, double d)
{
    char buf[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec - 1, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    char *e = strchr(buf, 'e');
    if (!e) { /* inf/nan cannot come from JSON */
        fputs(buf, f);
        return;
    }
    int exp = atoi(e + 1);
    if (exp < -4 || exp >= 6) {
        /* mantissa digits, then e±dd as Go prints it */
        *e = '\0';
        fprintf(f, "%se%c%02d", buf, exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return;
    }
    int decimals = prec - 1 - exp;
    fprintf(f, "%.*f", decimals > 0 ? decimals : 0, d);
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys of obj sorted (Go prints maps with sorted keys); NULL with *n 0 for none. */
static const char **sorted_keys(const json_t *obj, size_t *n)
{
    *n = json_object_size(obj);
    if (*n == 0)
        return NULL;
    const char **keys = malloc(*n * sizeof(*keys));
    if (!keys) {
        *n = 0;
        return NULL;
    }
    size_t i = 0;
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)obj, k, val)
    {
        (void)val;
        keys[i++] = k;
    }
    qsort(keys, *n, sizeof(*keys), cmp_keys);
    return keys;
}

static void go_value_into(FILE *f, const json_t *v, bool nested)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        quote_into(f, json_string_value(v));
        break;
    case JSON_INTEGER:
        fprintf(f, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        go_float(f, json_real_value(v));
        break;
    case JSON_TRUE:
        fputs("true", f);
        break;
    case JSON_FALSE:
        fputs("false", f);
        break;
    case JSON_OBJECT: {
        size_t n;
        const char **keys = sorted_keys(v, &n);
        fputs("map[string]interface {}{", f);
        for (size_t i = 0; i < n; i++) {
            if (i)
                fputs(", ", f);
            quote_into(f, keys[i]);
            fputc(':', f);
            go_value_into(f, json_object_get(v, keys[i]), true);
        }
        fputc('}', f);
        free(keys);
        break;
    }
    case JSON_ARRAY: {
        fputs("[]interface {}{", f);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                fputs(", ", f);
            go_value_into(f, json_array_get(v, i), true);
        }
        fputc('}', f);
        break;
    }
    default:
        fputs(nested ? "interface {}(nil)" : "null", f);
    }
}

char *ks_go_value(const json_t *v)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    if (!v)
        fputs("null", f);
    else
        go_value_into(f, v, false);
    fclose(f);
    return out;
}

static void string_map_into(FILE *f, const json_t *obj)
{
    if (!json_is_object(obj)) {
        fputs("map[string]string(nil)", f);
        return;
    }
    size_t n;
    const char **keys = sorted_keys(obj, &n);
    fputs("map[string]string{", f);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputs(", ", f);
        quote_into(f, keys[i]);
        fputc(':', f);
        quote_into(f, ks_str(obj, keys[i]));
    }
    fputc('}', f);
    free(keys);
}

static void string_slice_into(FILE *f, const json_t *arr)
{
    if (!json_is_array(arr)) {
        fputs("[]string(nil)", f);
        return;
    }
    fputs("[]string{", f);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (i)
            fputs(", ", f);
        quote_into(f, s ? s : "");
    }
    fputc('}', f);
}

char *ks_go_string_map(const json_t *obj)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    string_map_into(f, obj);
    fclose(f);
    return out;
}

char *ks_go_string_slice(const json_t *arr)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    string_slice_into(f, arr);
    fclose(f);
    return out;
}

char *ks_go_label_selector(const json_t *sel)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    if (!json_is_object(sel)) {
        fputs("null", f);
        fclose(f);
        return out;
    }
    fputs("v1.LabelSelector{MatchLabels:", f);
    string_map_into(f, json_object_get(sel, "matchLabels"));
    fputs(", MatchExpressions:", f);
    const json_t *exprs = json_object_get(sel, "matchExpressions");
    if (!json_is_array(exprs)) {
        fputs("[]v1.LabelSelectorRequirement(nil)", f);
    } else {
        fputs("[]v1.LabelSelectorRequirement{", f);
        for (size_t i = 0; i < json_array_size(exprs); i++) {
            const json_t *e = json_array_get(exprs, i);
            fputs(i ? ", v1.LabelSelectorRequirement{Key:" : "v1.LabelSelectorRequirement{Key:", f);
            quote_into(f, ks_str(e, "key"));
            fputs(", Operator:", f);
            quote_into(f, ks_str(e, "operator"));
            fputs(", Values:", f);
            string_slice_into(f, json_object_get(e, "values"));
            fputc('}', f);
        }
        fputc('}', f);
    }
    fputc('}', f);
    fclose(f);
    return out;
}

/* ---- names and keys ----------------------------------------------------------------------- */

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? over s[0..n) */
static bool match_label(const char *s, size_t n)
{
    if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

static bool match_subdomain(const char *s)
{
    size_t n = strlen(s), start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (!match_label(s + start, i - start))
                return false;
            start = i + 1;
        }
    }
    return true;
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] */
static bool match_qualified(const char *s, size_t n)
{
    if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

#define RX_LABEL     "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define RX_SUBDOMAIN RX_LABEL "(\\." RX_LABEL ")*"
#define RX_QNAME     "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

static const char MSG_LABEL[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '" RX_LABEL "')";
static const char MSG_SUBDOMAIN[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '" RX_SUBDOMAIN "')";
static const char MSG_1035[] =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
static const char MSG_QNAME[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '" RX_QNAME "')";

static int max_len(ks_vmsg msgs[2], int n, size_t len, size_t max)
{
    if (len > max)
        snprintf(msgs[n++], sizeof(ks_vmsg), "must be no more than %zu characters", max);
    return n;
}

int ks_valid_dns1123_label(const char *s, ks_vmsg msgs[2])
{
    size_t n = strlen(s);
    int k = max_len(msgs, 0, n, 63);
    if (!match_label(s, n))
        snprintf(msgs[k++], sizeof(ks_vmsg), "%s",
                 match_subdomain(s) ? "must not contain dots" : MSG_LABEL);
    return k;
}

int ks_valid_dns1123_subdomain(const char *s, ks_vmsg msgs[2])
{
    int k = max_len(msgs, 0, strlen(s), 253);
    if (!match_subdomain(s))
        snprintf(msgs[k++], sizeof(ks_vmsg), "%s", MSG_SUBDOMAIN);
    return k;
}

int ks_valid_dns1035_label(const char *s, ks_vmsg msgs[2])
{
    size_t n = strlen(s);
    int k = max_len(msgs, 0, n, 63);
    if (!match_label(s, n) || !(s[0] >= 'a' && s[0] <= 'z'))
        snprintf(msgs[k++], sizeof(ks_vmsg), "%s", MSG_1035);
    return k;
}

int ks_valid_qualified_name(const char *s, ks_vmsg msgs[2])
{
    int k = 0;
    const char *slash = strchr(s, '/');
    const char *name = s;
    if (slash && strchr(slash + 1, '/')) {
        snprintf(msgs[0], sizeof(ks_vmsg),
                 "a qualified name %s with an optional DNS subdomain prefix and '/' (e.g. "
                 "'example.com/MyName')",
                 MSG_QNAME);
        return 1;
    }
    if (slash) {
        size_t plen = (size_t)(slash - s);
        char prefix[256];
        if (plen == 0) {
            snprintf(msgs[k++], sizeof(ks_vmsg), "prefix part must be non-empty");
        } else if (plen > 253) {
            snprintf(msgs[k++], sizeof(ks_vmsg), "prefix part must be no more than 253 characters");
        } else {
            memcpy(prefix, s, plen);
            prefix[plen] = '\0';
            if (!match_subdomain(prefix))
                snprintf(msgs[k++], sizeof(ks_vmsg), "prefix part %s", MSG_SUBDOMAIN);
        }
        name = slash + 1;
    }
    size_t n = strlen(name);
    if (k < 2 && n == 0)
        snprintf(msgs[k++], sizeof(ks_vmsg), "name part must be non-empty");
    else if (k < 2 && n > 63)
        snprintf(msgs[k++], sizeof(ks_vmsg), "name part must be no more than 63 characters");
    if (k < 2 && !match_qualified(name, n))
        snprintf(msgs[k++], sizeof(ks_vmsg), "name part %s", MSG_QNAME);
    return k;
}

int ks_valid_label_value(const char *s, ks_vmsg msgs[2])
{
    size_t n = strlen(s);
    int k = max_len(msgs, 0, n, 63);
    if (n > 0 && !match_qualified(s, n))
        snprintf(msgs[k++], sizeof(ks_vmsg),
                 "a valid label must be an empty string or consist of alphanumeric characters, "
                 "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                 "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                 "'(" RX_QNAME ")?')");
    return k;
}

int ks_valid_config_key(const char *s, ks_vmsg msgs[2])
{
    size_t n = strlen(s);
    int k = max_len(msgs, 0, n, 253);
    bool ok = n > 0;
    for (size_t i = 0; i < n && ok; i++)
        ok = is_alnum(s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.';
    if (!ok)
        snprintf(msgs[k++], sizeof(ks_vmsg),
                 "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                 "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                 "'[-._a-zA-Z0-9]+')");
    if (k < 2 && strcmp(s, ".") == 0)
        snprintf(msgs[k++], sizeof(ks_vmsg), "must not be '.'");
    else if (k < 2 && strcmp(s, "..") == 0)
        snprintf(msgs[k++], sizeof(ks_vmsg), "must not be '..'");
    else if (k < 2 && strncmp(s, "..", 2) == 0)
        snprintf(msgs[k++], sizeof(ks_vmsg), "must not start with '..'");
    return k;
}

/* Path-segment names (RBAC objects): anything but "." and "..", without '/' or '%'. */
static int valid_path_segment(const char *s, ks_vmsg msgs[2])
{
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
        snprintf(msgs[0], sizeof(ks_vmsg), "may not be '%s'", s);
        return 1;
    }
    int k = 0;
    if (strchr(s, '/'))
        snprintf(msgs[k++], sizeof(ks_vmsg), "may not contain '/'");
    if (strchr(s, '%'))
        snprintf(msgs[k++], sizeof(ks_vmsg), "may not contain '%%'");
    return k;
}

int ks_valid_name(char rule, const char *s, ks_vmsg msgs[2])
{
    switch (rule) {
    case 's':
        return ks_valid_dns1123_subdomain(s, msgs);
    case 'l':
        return ks_valid_dns1123_label(s, msgs);
    case '1':
        return ks_valid_dns1035_label(s, msgs);
    case 'p':
        return valid_path_segment(s, msgs);
    default:
        return 0;
    }
}
