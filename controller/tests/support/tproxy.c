/* tproxy: a CONNECT proxy for client tests (one thread per tunnel, relaying with poll). */
#include "tproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TP_MAX_TUNNELS 64

struct tproxy {
    int lfd;
    char url[64];
    pthread_t acceptor;
    atomic_bool stopping;
    pthread_mutex_t mu;
    int tunnels;
    char last[300];
    pthread_t threads[TP_MAX_TUNNELS];
    int fds[TP_MAX_TUNNELS];
    int nthreads;
};

typedef struct tunnel {
    tproxy *p;
    int fd;
} tunnel;

static int dial(const char *target)
{
    char host[256], port[16];
    const char *colon = strrchr(target, ':');
    if (!colon || (size_t)(colon - target) >= sizeof(host) || strlen(colon + 1) >= sizeof(port))
        return -1;
    memcpy(host, target, (size_t)(colon - target));
    host[colon - target] = '\0';
    snprintf(port, sizeof(port), "%s", colon + 1);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static void relay(int a, int b)
{
    char buf[16384];
    struct pollfd pf[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
    for (;;) {
        if (poll(pf, 2, 200) < 0 && errno != EINTR)
            return;
        for (int i = 0; i < 2; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(pf[i].fd, buf, sizeof(buf));
            if (n <= 0)
                return;
            for (ssize_t off = 0; off < n;) {
                ssize_t w = write(pf[1 - i].fd, buf + off, (size_t)(n - off));
                if (w <= 0)
                    return;
                off += w;
            }
        }
    }
}

static void *serve(void *arg)
{
    tunnel *t = arg;
    tproxy *p = t->p;
    char head[4096] = "";
    size_t len = 0;
    while (len < sizeof(head) - 1 && !strstr(head, "\r\n\r\n")) {
        ssize_t n = read(t->fd, head + len, sizeof(head) - 1 - len);
        if (n <= 0)
            goto out;
        len += (size_t)n;
        head[len] = '\0';
    }
    char target[300];
    if (sscanf(head, "CONNECT %299s HTTP/1.1", target) != 1) {
        const char *bad = "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n";
        (void)!write(t->fd, bad, strlen(bad));
        goto out;
    }
    int up = dial(target);
    if (up < 0) {
        const char *bad = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
        (void)!write(t->fd, bad, strlen(bad));
        goto out;
    }
    pthread_mutex_lock(&p->mu);
    p->tunnels++;
    snprintf(p->last, sizeof(p->last), "%s", target);
    pthread_mutex_unlock(&p->mu);
    const char *ok = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (write(t->fd, ok, strlen(ok)) == (ssize_t)strlen(ok))
        relay(t->fd, up);
    close(up);
out:
    shutdown(t->fd, SHUT_RDWR);
    free(t);
    return NULL;
}

static void *accept_loop(void *arg)
{
    tproxy *p = arg;
    while (!atomic_load(&p->stopping)) {
        int fd = accept(p->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        tunnel *t = malloc(sizeof(*t));
        pthread_mutex_lock(&p->mu);
        bool room = t && p->nthreads < TP_MAX_TUNNELS;
        if (room) {
            t->p = p;
            t->fd = fd;
            p->fds[p->nthreads] = fd;
            if (pthread_create(&p->threads[p->nthreads], NULL, serve, t) == 0)
                p->nthreads++;
            else
                room = false;
        }
        pthread_mutex_unlock(&p->mu);
        if (!room) {
            free(t);
            close(fd);
        }
    }
    return NULL;
}

tproxy *tproxy_start(void)
{
    tproxy *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(p->lfd, 16) != 0 || getsockname(p->lfd, (struct sockaddr *)&a, &al) != 0 ||
        pthread_create(&p->acceptor, NULL, accept_loop, p) != 0) {
        if (p->lfd >= 0)
            close(p->lfd);
        free(p);
        return NULL;
    }
    snprintf(p->url, sizeof(p->url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    return p;
}

const char *tproxy_url(const tproxy *p)
{
    return p->url;
}

int tproxy_tunnels(tproxy *p, char *last, unsigned long size)
{
    pthread_mutex_lock(&p->mu);
    int n = p->tunnels;
    if (last)
        snprintf(last, size, "%s", p->last);
    pthread_mutex_unlock(&p->mu);
    return n;
}

void tproxy_stop(tproxy *p)
{
    if (!p)
        return;
    atomic_store(&p->stopping, true);
    shutdown(p->lfd, SHUT_RDWR); /* wakes accept() */
    pthread_join(p->acceptor, NULL);
    close(p->lfd);
    for (int i = 0; i < p->nthreads; i++) {
        shutdown(p->fds[i], SHUT_RDWR); /* ends the relay's reads */
        pthread_join(p->threads[i], NULL);
        close(p->fds[i]);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}
