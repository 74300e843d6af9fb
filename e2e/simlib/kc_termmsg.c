/* kc_termmsg: the kubelet's rule for a terminated container's message, for the simulators. */
#include "kc_termmsg.h"

#include <string.h>

bool kc_termmsg_from_log(const char *policy, int exit_code)
{
    return exit_code != 0 && policy && strcmp(policy, "FallbackToLogsOnError") == 0;
}

const char *kc_termmsg_tail(const char *log)
{
    if (!log)
        return "";
    size_t len = strlen(log);
    const char *start = log + (len > KC_TERMMSG_BYTES ? len - KC_TERMMSG_BYTES : 0);
    /* The last KC_TERMMSG_LINES lines: a trailing newline ends the last line, it starts none. */
    size_t end = len && log[len - 1] == '\n' ? len - 1 : len;
    int lines = 0;
    for (size_t i = end; i > 0; i--)
        if (log[i - 1] == '\n' && ++lines == KC_TERMMSG_LINES) {
            if (log + i > start)
                start = log + i;
            break;
        }
    return start;
}
