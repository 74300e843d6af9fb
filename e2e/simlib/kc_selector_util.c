/* kc_selector_util: the string builder and message quoting the selector sources share. */
#include "kc_selector_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kc_sb_putn(kc_sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void kc_sb_puts(kc_sbuf *b, const char *s)
{
    kc_sb_putn(b, s, strlen(s));
}

void kc_sb_putc(kc_sbuf *b, char c)
{
    kc_sb_putn(b, &c, 1);
}

char *kc_sb_finish(kc_sbuf *b)
{
    if (!b->oom && !b->p)
        kc_sb_putn(b, "", 0);
    if (b->oom) {
        free(b->p);
        b->p = NULL;
        return NULL;
    }
    char *p = b->p;
    b->p = NULL;
    return p;
}

void kc_sel_quote(char *buf, size_t size, const char *kind, const char *s)
{
    /* Long selectors are cut so that the "at position N" part of a message is not truncated. */
    const int max = 120;
    if (strlen(s) > (size_t)max)
        snprintf(buf, size, "%s \"%.*s...\"", kind, max, s);
    else
        snprintf(buf, size, "%s \"%s\"", kind, s);
}
