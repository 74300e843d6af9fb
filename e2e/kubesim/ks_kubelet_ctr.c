/* ks_kubelet_ctr: one container on a simulated node: simulated containers just run; containers
 * whose image is mapped run a real local process (own process group, output into the pod log),
 * restarted with back-off per restartPolicy. Startup, readiness and liveness probes as the kubelet
 * runs them: HTTP/TCP probes of local processes; probes of simulated containers on nodesim's
 * nodes are answered by nodesim (the pod's nodesim.io/probes annotation), elsewhere they pass. */
#include "ks_kubelet_int.h"

#include "kc_log.h"
#include "kc_termmsg.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DRAIN_MS 300

#define CTR_OF(ptr, field) ((kl_ctr *)((char *)(ptr)-offsetof(kl_ctr, field)))

static const json_t *ctr_spec(const kl_ctr *c)
{
    const json_t *spec = json_object_get(c->p->obj, "spec");
    const json_t *arr = json_object_get(spec, c->init ? "initContainers" : "containers");
    size_t i;
    json_t *it;
    json_array_foreach(arr, i, it)
    {
        const char *n = json_string_value(json_object_get(it, "name"));
        if (n && strcmp(n, c->name) == 0)
            return it;
    }
    return json_array_get(arr, c->idx);
}

static void set_message(kl_ctr *c, const char *msg)
{
    free(c->message);
    c->message = msg ? strdup(msg) : NULL;
}

void kl_ctr_quiesce(kl_ctr *c)
{
    if (!c->timers_on)
        return;
    uv_timer_stop(&c->t_backoff);
    uv_timer_stop(&c->t_sprobe);
    uv_timer_stop(&c->t_rprobe);
    uv_timer_stop(&c->t_lprobe);
}

void kl_ctr_close_timers(kl_ctr *c)
{
    if (!c->timers_on)
        return;
    kl_close(c->p, (uv_handle_t *)&c->t_backoff);
    kl_close(c->p, (uv_handle_t *)&c->t_sprobe);
    kl_close(c->p, (uv_handle_t *)&c->t_rprobe);
    kl_close(c->p, (uv_handle_t *)&c->t_lprobe);
    c->timers_on = false;
}

void kl_ctr_signal(kl_ctr *c, int sig)
{
    kl_run *r = c->run;
    if (!r || r->exited || r->pid <= 0)
        return;
    c->killing = true;
    /* The process leads its own group (setsid); signal the group so its children go too. If the
     * child has not called setsid yet the group does not exist: signal the process itself. */
    if (kill(-r->pid, sig) != 0 && errno == ESRCH)
        kill(r->pid, sig);
}

/* ---- process runs ---- */

static void run_closed(uv_handle_t *h)
{
    kl_run *r = h->data;
    if (--r->handles > 0)
        return;
    struct ks_kubelet *kl = r->p->kl;
    kl_pod *p = r->p;
    free(r);
    kl->runs--;
    kl_pod_unref(p);
    kl_runs_changed(kl);
}

static void run_close(kl_run *r, uv_handle_t *h)
{
    if (uv_is_closing(h))
        return;
    h->data = r;
    uv_close(h, run_closed);
}

static void restart_or_stay(kl_ctr *c);

/* Both the exit status and the output are in (or the drain timeout passed). */
static void run_finish(kl_run *r)
{
    if (r->finished)
        return;
    r->finished = true;
    run_close(r, (uv_handle_t *)&r->drain);
    if (r->pipes_open) {
        run_close(r, (uv_handle_t *)&r->out);
        run_close(r, (uv_handle_t *)&r->err);
        r->pipes_open = 0;
    }
    kl_ctr *c = r->c;
    if (c->run != r)
        return;
    c->run = NULL;
    if (r->p->removed)
        return;
    char now[32];
    ks_now_rfc3339(now);
    c->exit_code = r->term_signal ? 128 + r->term_signal : (int)r->status;
    c->state = CS_TERMINATED;
    c->ready = false;
    snprintf(c->reason, sizeof(c->reason), "%s", c->exit_code == 0 ? "Completed" : "Error");
    set_message(c, NULL);
    snprintf(c->finished_at, sizeof(c->finished_at), "%s", now);
    kl_ctr_quiesce(c);
    restart_or_stay(c);
}

void kl_ctr_sim_exit(kl_ctr *c, int code, const char *msg)
{
    char now[32];
    ks_now_rfc3339(now);
    c->exit_code = code;
    c->state = CS_TERMINATED;
    c->ready = false;
    snprintf(c->reason, sizeof(c->reason), "%s", code == 0 ? "Completed" : "Error");
    /* msg is what the container printed: its log, and its message only when the kubelet is
     * asked to take it (FallbackToLogsOnError) and the container failed. */
    if (msg && *msg) {
        ks_kl_logs_append(c->p->kl->logs, c->p->ns, c->p->name, c->name, msg, strlen(msg));
        if (msg[strlen(msg) - 1] != '\n')
            ks_kl_logs_append(c->p->kl->logs, c->p->ns, c->p->name, c->name, "\n", 1);
    }
    const char *pol = json_string_value(json_object_get(ctr_spec(c), "terminationMessagePolicy"));
    set_message(c, kc_termmsg_from_log(pol, code) ? kc_termmsg_tail(msg) : NULL);
    snprintf(c->finished_at, sizeof(c->finished_at), "%s", now);
    kl_ctr_quiesce(c);
    restart_or_stay(c);
}

static void on_drain(uv_timer_t *t)
{
    run_finish(t->data);
}

/* ---- local processes across restarts ----
 * Each local process has a file <dir>/procs/<pid> holding its start time (/proc/<pid>/stat field
 * 22) while it runs. A kubesim killed with SIGKILL cannot stop them; the next start on the same
 * directory does (its kubelet starts the pods' containers again), so no operator runs twice. */

static unsigned long long proc_start_time(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    unsigned long long start = 0;
    if (p && sscanf(p + 2,
                    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                    "%*d %*d %llu",
                    &start) != 1)
        start = 0;
    return start;
}

static void proc_file(const struct ks_kubelet *kl, long pid, char *out, size_t size)
{
    const char *dir = kl->sim->opts.dir;
    if (pid > 0)
        snprintf(out, size, "%s/procs/%ld", dir, pid);
    else
        snprintf(out, size, "%s/procs", dir);
}

static void proc_track(struct ks_kubelet *kl, long pid)
{
    if (!kl->sim->opts.dir || !*kl->sim->opts.dir)
        return;
    char path[PATH_MAX];
    proc_file(kl, 0, path, sizeof(path));
    mkdir(path, 0700);
    proc_file(kl, pid, path, sizeof(path));
    FILE *f = fopen(path, "we");
    if (f) {
        fprintf(f, "%llu\n", proc_start_time(pid));
        fclose(f);
    }
}

static void proc_untrack(struct ks_kubelet *kl, long pid)
{
    if (!kl->sim->opts.dir || !*kl->sim->opts.dir || pid <= 0)
        return;
    char path[PATH_MAX];
    proc_file(kl, pid, path, sizeof(path));
    unlink(path);
}

void kl_reap_orphans(struct ks_kubelet *kl)
{
    if (!kl->sim->opts.dir || !*kl->sim->opts.dir)
        return;
    char path[PATH_MAX];
    proc_file(kl, 0, path, sizeof(path));
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (pid <= 0 || *end)
            continue;
        proc_file(kl, pid, path, sizeof(path));
        unsigned long long want = 0;
        FILE *f = fopen(path, "re");
        if (f) {
            if (fscanf(f, "%llu", &want) != 1)
                want = 0;
            fclose(f);
        }
        /* The same process (not a recycled pid) and its group: a local process is the leader of
         * a session of its own. */
        if (want && proc_start_time(pid) == want) {
            kill(-(pid_t)pid, SIGKILL);
            kc_info("kubelet: stopped a local process left by an earlier kubesim", "pid=%ld", pid);
        }
        unlink(path);
    }
    closedir(d);
}

static void on_proc_exit(uv_process_t *proc, int64_t status, int term_signal)
{
    kl_run *r = proc->data;
    proc_untrack(r->p->kl, (long)r->pid);
    r->exited = true;
    r->status = status;
    r->term_signal = term_signal;
    run_close(r, (uv_handle_t *)proc);
    if (r->pipes_open == 0)
        run_finish(r);
    else
        uv_timer_start(&r->drain, on_drain, DRAIN_MS, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    kl_run *r = h->data;
    *buf = uv_buf_init(r->buf, sizeof(r->buf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    kl_run *r = s->data;
    if (n > 0) {
        if (!r->p->removed)
            ks_kl_logs_append(r->p->kl->logs, r->p->ns, r->p->name, r->c->name, buf->base,
                              (size_t)n);
        return;
    }
    if (n == 0)
        return;
    if (r->finished)
        return;
    run_close(r, (uv_handle_t *)s);
    if (--r->pipes_open == 0 && r->exited)
        run_finish(r);
}

/* ---- start, exit, restart ---- */

static void emit_started(kl_ctr *c)
{
    kl_pod *p = c->p;
    if (!p->kl->reg) /* else the puller said what it did */
        kl_event(p->kl, p, c, "Normal", "Pulled",
                 "Container image \"%s\" already present on machine", c->image);
    kl_event(p->kl, p, c, "Normal", "Created", "Created container %s", c->name);
    kl_event(p->kl, p, c, "Normal", "Started", "Started container %s", c->name);
}

static void mark_running(kl_ctr *c)
{
    kl_pod *p = c->p;
    c->state = CS_RUNNING;
    c->reason[0] = '\0';
    set_message(c, NULL);
    c->ready = false;
    c->killing = false;
    c->s_fail = c->r_ok = c->r_fail = c->l_fail = 0;
    c->started = !c->sprobe.kind;
    ks_now_rfc3339(c->started_at);
    ks_proc_container_id(p->uid, c->name, c->restarts, c->cid, sizeof(c->cid));
    int delay = p->kl->sim->opts.pod_ready_ms;
    c->ready_at_ms = kl_now(p->kl) + (uint64_t)(delay > 0 ? delay : 0);
}

static void on_sprobe(uv_timer_t *t);
static void on_rprobe(uv_timer_t *t);
static void on_lprobe(uv_timer_t *t);

/* A probe's seconds as loop milliseconds; periods are at least 1 ms. --probe-scale applies to
 * simulated containers, whose components run on nodesim's (scaled) timings; a local process
 * starts in real time, so its probes keep the seconds the spec gives. */
static uint64_t probe_ms(const kl_ctr *c, int seconds, bool period)
{
    double f = c->map ? 1.0 : c->p->kl->sim->opts.probe_scale;
    double ms = (double)seconds * 1000.0 * (f > 0 ? f : 1.0);
    return ms < 1.0 ? (period ? 1 : 0) : (uint64_t)ms;
}

/* Readiness and liveness probes start once the startup probe passed; their initial delays count
 * from the container's start, as the kubelet's probe workers do. */
static void start_rl_probes(kl_ctr *c)
{
    uint64_t ran = kl_now(c->p->kl) - c->run_since_ms;
    const ks_probe_spec *r = &c->rprobe, *l = &c->lprobe;
    if (r->kind) {
        uint64_t d = probe_ms(c, r->initial_delay_s, false);
        uv_timer_start(&c->t_rprobe, on_rprobe, d > ran ? d - ran : 0,
                       probe_ms(c, r->period_s, true));
    }
    if (l->kind) {
        uint64_t d = probe_ms(c, l->initial_delay_s, false);
        uv_timer_start(&c->t_lprobe, on_lprobe, d > ran ? d - ran : 0,
                       probe_ms(c, l->period_s, true));
    }
}

void kl_ctr_probes_start(kl_ctr *c)
{
    if (!c->timers_on)
        return;
    kl_ctr_quiesce(c);
    c->s_fail = c->r_ok = c->r_fail = c->l_fail = 0;
    c->ready = false;
    c->started = !c->sprobe.kind;
    c->run_since_ms = kl_now(c->p->kl);
    if (c->sprobe.kind)
        uv_timer_start(&c->t_sprobe, on_sprobe, probe_ms(c, c->sprobe.initial_delay_s, false),
                       probe_ms(c, c->sprobe.period_s, true));
    else
        start_rl_probes(c);
}

/* A container that could not start: CreateContainerConfigError (env) waits and retries,
 * StartError (exec) counts as an exit with code 128, as containerd reports it. */
static void start_failed(kl_ctr *c, const char *reason, const char *msg, bool as_exit)
{
    kl_pod *p = c->p;
    kl_event(p->kl, p, c, "Warning", "Failed", "Error: %s", msg);
    if (as_exit) {
        char now[32];
        ks_now_rfc3339(now);
        c->state = CS_TERMINATED;
        c->exit_code = 128;
        snprintf(c->reason, sizeof(c->reason), "%s", reason);
        set_message(c, msg);
        snprintf(c->started_at, sizeof(c->started_at), "%s", now);
        snprintf(c->finished_at, sizeof(c->finished_at), "%s", now);
        restart_or_stay(c);
        return;
    }
    c->state = CS_WAITING;
    snprintf(c->reason, sizeof(c->reason), "%s", reason);
    set_message(c, msg);
    restart_or_stay(c);
}

static bool spawn(kl_ctr *c)
{
    kl_pod *p = c->p;
    struct ks_kubelet *kl = p->kl;
    kc_err e = {0};
    char **env = NULL, **argv = NULL;
    size_t prog = 0; /* argv[prog]: the container's program */
    bool ok = false;
    if (!p->sa_root && ks_proc_write_sa(kl->sim, p->obj, &p->sa_root, &e) != KC_OK) {
        start_failed(c, "CreateContainerConfigError", e.msg, false);
        return false;
    }
    /* The downward API must see the IPs this start assigns, before they are written. */
    json_t *view = json_deep_copy(p->obj);
    json_t *st = json_object_get(view, "status");
    if (!json_is_object(st)) {
        st = json_object();
        json_object_set_new(view, "status", st);
    }
    json_object_set_new(st, "podIP", json_string(p->ip));
    json_object_set_new(st, "hostIP", json_string(p->host_ip));
    kc_code rc = ks_proc_build_env(kl->sim, view, ctr_spec(c), c->map, p->sa_root, &env, &e);
    json_decref(view);
    if (rc != KC_OK) {
        start_failed(c, "CreateContainerConfigError", e.msg, false);
        goto out;
    }
    ks_runas ra;
    if (ks_runas_resolve(p->obj, ctr_spec(c), c->map, &ra, &e) != KC_OK) {
        start_failed(c, "CreateContainerConfigError", e.msg, false);
        goto out;
    }
    argv = ks_proc_build_argv(ctr_spec(c), c->map, env);
    const char *helper = ks_runas_helper();
    if (argv && geteuid() == 0 && access(helper, X_OK) != 0) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "kubesim cannot apply the securityContext: helper %s: %s",
                 helper, strerror(errno));
        start_failed(c, "StartError", msg, true);
        goto out;
    } else if (argv && geteuid() == 0) {
        /* The helper drops to the container's credentials and execs the program. */
        char **wrapped = ks_runas_wrap(&ra, helper, p->sa_root, c->map, argv, &prog);
        ks_proc_strv_free(argv);
        argv = wrapped;
        for (char **v = env; v && *v && argv; v++)
            if (!strncmp(*v, "KC_INCLUSTER_ROOT=", 18)) {
                char *x = strdup("KC_INCLUSTER_ROOT=" KS_RUNAS_SA_PATH);
                if (x) {
                    free(*v);
                    *v = x;
                }
            }
    } else if (argv && (ra.uid != geteuid() || ra.gid != getegid())) {
        /* Without root kubesim cannot change credentials: the process runs as kubesim does. */
        static atomic_bool warned;
        if (!atomic_exchange(&warned, true))
            kc_warn("kubelet: kubesim is not root, local processes ignore their securityContext",
                    "pod=%s container=%s uid=%u", p->key, c->name, ra.uid);
    }
    kl_run *r = argv ? calloc(1, sizeof(*r)) : NULL;
    if (!r) {
        start_failed(c, "StartError", "out of memory", true);
        goto out;
    }
    r->p = p;
    r->c = c;
    kl_pod_ref(p);
    kl->runs++;
    uv_pipe_init(&kl->loop, &r->out, 0);
    uv_pipe_init(&kl->loop, &r->err, 0);
    uv_timer_init(&kl->loop, &r->drain);
    r->out.data = r->err.data = r->drain.data = r->proc.data = r;
    r->handles = 4;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->err},
    };
    /* The process keeps kubesim's working directory, so relative paths given to kubesim (and
     * to tools wrapping it, such as valgrind's option files) stay valid. */
    uv_process_options_t o = {.exit_cb = on_proc_exit,
                              .file = argv[0],
                              .args = argv,
                              .env = env,
                              .flags = UV_PROCESS_DETACHED,
                              .stdio_count = 3,
                              .stdio = stdio};
    int uvr = uv_spawn(&kl->loop, &r->proc, &o);
    r->proc.data = r;
    if (uvr != 0) {
        r->finished = true;
        run_close(r, (uv_handle_t *)&r->proc);
        run_close(r, (uv_handle_t *)&r->out);
        run_close(r, (uv_handle_t *)&r->err);
        run_close(r, (uv_handle_t *)&r->drain);
        char msg[1024];
        snprintf(msg, sizeof(msg),
                 "failed to create containerd task: failed to start %s: exec: \"%s\": %s", c->name,
                 argv[0], uv_strerror(uvr));
        start_failed(c, "StartError", msg, true);
        goto out;
    }
    r->pid = r->proc.pid;
    proc_track(kl, (long)r->pid);
    r->pipes_open = 2;
    uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&r->err, on_alloc, on_read);
    c->run = r;
    kc_info("kubelet: started process", "pod=%s container=%s pid=%d program=%s uid=%u gid=%u",
            p->key, c->name, r->pid, argv[prog], ra.uid, ra.gid);
    ok = true;
out:
    ks_proc_strv_free(env);
    ks_proc_strv_free(argv);
    return ok;
}

void kl_ctr_start(kl_ctr *c)
{
    if (kl_pull_before_start(c))
        return;
    if (c->map && !spawn(c))
        return;
    mark_running(c);
    kl_ctr_probes_start(c);
    emit_started(c);
}

static void on_backoff(uv_timer_t *t)
{
    kl_ctr *c = CTR_OF(t, t_backoff);
    kl_pod *p = c->p;
    if (p->removed || p->stage == ST_DONE || p->stage == ST_DELETING)
        return;
    if (c->run) {
        /* Used as the kill timer after a liveness failure: the grace period is over. */
        kl_ctr_signal(c, SIGKILL);
        return;
    }
    /* A container that never ran (configuration error) does not count a restart. */
    if (strcmp(c->reason, "CrashLoopBackOff") == 0)
        c->restarts++;
    kl_ctr_start(c);
    kl_pod_ctr_changed(p, c);
}

static bool should_restart(const kl_ctr *c)
{
    const char *pol =
        json_string_value(json_object_get(json_object_get(c->p->obj, "spec"), "restartPolicy"));
    if (!pol)
        pol = "Always";
    if (c->state == CS_WAITING) /* could not start: retry unless the pod may never restart */
        return true;
    if (c->init)
        return c->exit_code != 0 && strcmp(pol, "Never") != 0;
    if (strcmp(pol, "Always") == 0)
        return true;
    return strcmp(pol, "OnFailure") == 0 && c->exit_code != 0;
}

static void restart_or_stay(kl_ctr *c)
{
    kl_pod *p = c->p;
    if (p->stage == ST_DELETING || p->stage == ST_DONE || !c->timers_on || !should_restart(c)) {
        kl_pod_ctr_changed(p, c);
        return;
    }
    struct ks_kubelet *kl = p->kl;
    int max = atomic_load(&kl->backoff_max_ms);
    c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : atomic_load(&kl->backoff_ms);
    if (c->backoff_ms > max)
        c->backoff_ms = max;
    if (c->state == CS_TERMINATED) {
        json_decref(c->last_term);
        c->last_term = json_pack("{s:i, s:s, s:s, s:s, s:s}", "exitCode", c->exit_code, "reason",
                                 c->reason, "startedAt", c->started_at, "finishedAt",
                                 c->finished_at, "containerID", c->cid);
        if (c->last_term && c->message && *c->message)
            json_object_set_new(c->last_term, "message", json_string(c->message));
        char msg[600];
        snprintf(msg, sizeof(msg), "back-off %ds restarting failed container=%s pod=%s_%s(%s)",
                 (c->backoff_ms + 999) / 1000, c->name, p->name, p->ns, p->uid);
        c->state = CS_WAITING;
        snprintf(c->reason, sizeof(c->reason), "CrashLoopBackOff");
        set_message(c, msg);
        kl_event(kl, p, c, "Warning", "BackOff",
                 "Back-off restarting failed container %s in pod %s_%s(%s)", c->name, p->name,
                 p->ns, p->uid);
    }
    uv_timer_start(&c->t_backoff, on_backoff, (uint64_t)c->backoff_ms, 0);
    kl_pod_ctr_changed(p, c);
}

/* ---- probes ---- */

enum { PR_STARTUP, PR_READINESS, PR_LIVENESS };

static const char *const probe_names[] = {"Startup", "Readiness", "Liveness"};

static const ks_probe_spec *probe_spec(const kl_ctr *c, int which)
{
    return which == PR_STARTUP ? &c->sprobe : which == PR_READINESS ? &c->rprobe : &c->lprobe;
}

static bool *probe_busy(kl_ctr *c, int which)
{
    return which == PR_STARTUP ? &c->s_busy : which == PR_READINESS ? &c->r_busy : &c->l_busy;
}

/* A probe of a simulated container. On nodesim's nodes nodesim is the container runtime: its
 * answer per container is in the pod's nodesim.io/probes annotation ("ok" or what the probe
 * printed when it failed); no answer is a failure. Elsewhere nothing runs in the container and
 * the probe passes. */
static bool sim_probe(const kl_ctr *c, char *msg, size_t size)
{
    kl_pod *p = c->p;
    kl_node *n = kl_node_get(p->kl, p->node);
    if (!n || !n->nodesim)
        return true;
    if (!kl_answer(p, KL_ANSWER_PROBES, c->name, msg, size)) {
        snprintf(msg, size, "no answer from the container yet");
        return false;
    }
    return strcmp(msg, "ok") == 0;
}

/* The container failed its startup or liveness probe failureThreshold times: it is killed and
 * started again, with the back-off of any container that ended (CrashLoopBackOff). A local
 * process gets SIGTERM (SIGKILL after the grace period) and restarts when it exits; a simulated
 * container ends at once, exit code 137. */
static void probe_kill(kl_ctr *c, int which)
{
    kl_pod *p = c->p;
    kl_event(p->kl, p, c, "Normal", "Killing", "Container %s failed %s probe, will be restarted",
             c->name, which == PR_STARTUP ? "startup" : "liveness");
    uv_timer_stop(&c->t_sprobe);
    uv_timer_stop(&c->t_rprobe);
    uv_timer_stop(&c->t_lprobe);
    c->ready = false;
    if (c->map) {
        kl_ctr_signal(c, SIGTERM);
        uv_timer_start(&c->t_backoff, on_backoff, (uint64_t)atomic_load(&p->kl->grace_cap_ms), 0);
        kl_pod_ctr_changed(p, c);
        return;
    }
    ks_now_rfc3339(c->finished_at);
    c->state = CS_TERMINATED;
    c->exit_code = 137;
    snprintf(c->reason, sizeof(c->reason), "Error");
    restart_or_stay(c);
}

/* One probe result for the container's current run. */
static void probe_result(kl_ctr *c, int which, bool ok, const char *msg)
{
    kl_pod *p = c->p;
    if (p->removed || c->state != CS_RUNNING || p->stage == ST_DELETING || p->stage == ST_DONE)
        return;
    const ks_probe_spec *s = probe_spec(c, which);
    if (!ok)
        kl_event(p->kl, p, c, "Warning", "Unhealthy", "%s probe failed: %s", probe_names[which],
                 msg && *msg    ? msg
                 : s->kind == 1 ? "HTTP probe failed"
                                : "probe failed");
    switch (which) {
    case PR_STARTUP:
        if (ok) {
            c->started = true;
            uv_timer_stop(&c->t_sprobe);
            start_rl_probes(c);
            kl_pod_ctr_changed(p, c);
        } else if (++c->s_fail >= s->failure_threshold) {
            probe_kill(c, which);
        }
        break;
    case PR_READINESS: {
        bool was = c->ready;
        if (ok) {
            c->r_fail = 0;
            if (++c->r_ok >= s->success_threshold)
                c->ready = true;
        } else {
            c->r_ok = 0;
            if (++c->r_fail >= s->failure_threshold)
                c->ready = false;
        }
        if (was != c->ready)
            kl_pod_ctr_changed(p, c);
        break;
    }
    default:
        if (ok)
            c->l_fail = 0;
        else if (++c->l_fail >= s->failure_threshold)
            probe_kill(c, which);
    }
}

typedef struct probe_work {
    uv_work_t req;
    kl_pod *p;
    kl_ctr *c;
    kl_run *run;
    int which;
    bool ok;
    ks_probe_spec spec;
} probe_work;

static void probe_do(uv_work_t *req)
{
    probe_work *w = req->data;
    w->ok = ks_probe_run(&w->spec);
}

static void probe_done(uv_work_t *req, int status)
{
    probe_work *w = req->data;
    kl_pod *p = w->p;
    kl_ctr *c = w->c;
    *probe_busy(c, w->which) = false;
    /* Only results for the run that is still current count. */
    if (status == 0 && !p->removed && c->run == w->run && c->run)
        probe_result(c, w->which, w->ok, NULL);
    free(w);
    kl_pod_unref(p);
}

static void probe_start(kl_ctr *c, int which)
{
    bool *busy = probe_busy(c, which);
    if (*busy || c->p->removed || c->state != CS_RUNNING)
        return;
    if (!c->map) {
        char msg[512] = "";
        bool ok = sim_probe(c, msg, sizeof(msg));
        probe_result(c, which, ok, msg);
        return;
    }
    if (!c->run)
        return;
    probe_work *w = calloc(1, sizeof(*w));
    if (!w)
        return;
    w->p = c->p;
    w->c = c;
    w->run = c->run;
    w->which = which;
    w->spec = *probe_spec(c, which);
    w->req.data = w;
    kl_pod_ref(c->p);
    if (uv_queue_work(&c->p->kl->loop, &w->req, probe_do, probe_done) != 0) {
        kl_pod_unref(c->p);
        free(w);
        return;
    }
    *busy = true;
}

static void on_sprobe(uv_timer_t *t)
{
    probe_start(CTR_OF(t, t_sprobe), PR_STARTUP);
}

static void on_rprobe(uv_timer_t *t)
{
    probe_start(CTR_OF(t, t_rprobe), PR_READINESS);
}

static void on_lprobe(uv_timer_t *t)
{
    probe_start(CTR_OF(t, t_lprobe), PR_LIVENESS);
}
