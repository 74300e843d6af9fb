/* kc_termmsg: the kubelet's rule for a terminated container's message, for the simulators. */
#ifndef KC_TERMMSG_H
#define KC_TERMMSG_H

#include <stdbool.h>

/* At most this many last lines, and of them at most this many last bytes, as the kubelet reads
 * a failed container's log for FallbackToLogsOnError (kubelet MaxContainerTerminationMessageLog
 * Lines and Length). */
#define KC_TERMMSG_LINES 80
#define KC_TERMMSG_BYTES 2048

/* Whether the kubelet fills a terminated container's message from its log: a non-zero exit of
 * a container whose terminationMessagePolicy is FallbackToLogsOnError (policy NULL: the default,
 * File). Nothing the simulators run writes a termination-log file. */
bool kc_termmsg_from_log(const char *policy, int exit_code);

/* The message the kubelet takes from a log: a suffix of log (its last KC_TERMMSG_LINES lines,
 * at most KC_TERMMSG_BYTES bytes of them), or "" for NULL. */
const char *kc_termmsg_tail(const char *log);

#endif
