/* fuzz_watch: arbitrary bytes through the watch-stream decoder, split into fuzzer-chosen chunks. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kc_watch.h"

typedef struct fz {
    unsigned events;
    unsigned stop_after; /* 0: never stop; else the callback refuses that event */
} fz;

static kc_code on_event(kc_watch_type type, json_t *obj, void *ud, kc_err *err)
{
    fz *f = ud;
    f->events++;
    /* Exercise what a consumer does with events: read metadata, decode ERROR statuses. */
    json_t *md = json_object_get(obj, "metadata");
    (void)json_string_value(json_object_get(md, "resourceVersion"));
    if (type == KC_WATCH_ERROR) {
        kc_err e;
        kc_code rc = kc_watch_status_error(obj, &e);
        if (rc == KC_OK)
            __builtin_trap(); /* an ERROR event must never decode to success */
    }
    if (f->stop_after && f->events == f->stop_after)
        return kc_err_set(err, KC_ECANCELED, "fuzz stop");
    return KC_OK;
}

/* Layout: byte 0 picks options (small line cap, callback stop), byte 1 seeds the chunk sizes,
 * the rest is the body. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t opt = data[0];
    uint32_t rng = data[1] * 2654435761u + 1;
    data += 2;
    size -= 2;

    fz f = {.stop_after = (opt & 0x70) >> 4};
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, (opt & 1) ? 64 + (opt & 0x0e) * 16 : 0, on_event, &f);
    size_t off = 0;
    kc_code rc = KC_OK;
    while (off < size) {
        rng = rng * 1103515245u + 12345u;
        size_t n = ((rng >> 16) % 97) + ((opt & 0x80) ? 0 : 1);
        if (n > size - off)
            n = size - off;
        kc_err err;
        kc_code r = kc_watch_decoder_feed(&d, (const char *)data + off, n, &err);
        /* Once failed, every later call must report the same code. */
        if (rc != KC_OK && r != rc)
            __builtin_trap();
        if (r != KC_OK && err.code != r)
            __builtin_trap();
        rc = r;
        off += n;
        if (n == 0 && (rng & 7) == 0)
            off++; /* empty feeds are legal; skip a byte now and then so the loop ends */
    }
    kc_code fr = kc_watch_decoder_finish(&d, NULL);
    if (rc != KC_OK && fr != rc)
        __builtin_trap();
    kc_watch_decoder_free(&d);
    return 0;
}
