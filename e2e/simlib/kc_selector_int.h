/* kc_selector_int: helpers shared by the label and field selector sources (not a public API). */
#ifndef KC_SELECTOR_INT_H
#define KC_SELECTOR_INT_H

#include <stdbool.h>
#include <stddef.h>

/* A growable string; on allocation failure it remembers the failure and sb_finish returns NULL,
 * so builders can append without checking every call. */
typedef struct kc_sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} kc_sbuf;

void kc_sb_putn(kc_sbuf *b, const char *s, size_t n);
void kc_sb_puts(kc_sbuf *b, const char *s);
void kc_sb_putc(kc_sbuf *b, char c);
/* Returns the NUL-terminated string (owned by the caller, "" when nothing was appended) or NULL
 * after an allocation failure (the buffer is freed either way). */
char *kc_sb_finish(kc_sbuf *b);

/* Writes `<kind> "<s>"` shortened so the position that follows in a message stays visible. */
void kc_sel_quote(char *buf, size_t size, const char *kind, const char *s);

#endif
