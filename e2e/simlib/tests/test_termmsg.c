/* The kubelet's termination message rule (kc_termmsg). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kc_termmsg.h"

Test(termmsg, only_a_failed_container_with_fallback_to_logs_gets_its_log)
{
    cr_assert(kc_termmsg_from_log("FallbackToLogsOnError", 2));
    cr_assert_not(kc_termmsg_from_log("FallbackToLogsOnError", 0));
    cr_assert_not(kc_termmsg_from_log("File", 1));
    cr_assert_not(kc_termmsg_from_log(NULL, 1)); /* the default is File */
}

Test(termmsg, a_short_log_is_the_message_whole)
{
    const char *log = "gpu-validator: no NVIDIA driver\nTest FAILED\n";
    cr_assert_eq(kc_termmsg_tail(log), log);
    cr_assert_str_eq(kc_termmsg_tail(NULL), "");
}

Test(termmsg, the_last_80_lines)
{
    static char log[100 * 8];
    size_t n = 0;
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(log + n, sizeof(log) - n, "line%02d\n", i);
    cr_assert_str_eq(kc_termmsg_tail(log), strstr(log, "line20\n"));
    log[n - 1] = '\0'; /* without the final newline: still 80 lines */
    cr_assert_str_eq(kc_termmsg_tail(log), strstr(log, "line20\n"));
}

Test(termmsg, at_most_2048_bytes_of_them)
{
    static char log[4000];
    memset(log, 'x', sizeof(log) - 1);
    log[100] = '\n';
    const char *t = kc_termmsg_tail(log);
    cr_assert_eq(strlen(t), 2048);
    cr_assert_eq(t, log + sizeof(log) - 1 - 2048);
}
