/* SPDX-License-Identifier: Apache-2.0 */
#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int http_request(http_reply *out, uint16_t port, const char *method, const char *path,
                 const char *body)
{
    return http_request_at(out, "127.0.0.1", port, method, path, body);
}

int http_request_at(http_reply *out, const char *ip, uint16_t port, const char *method,
                    const char *path, const char *body)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(out, 0, sizeof(*out));
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        sl = sizeof(*s4);
    } else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        sl = sizeof(*s6);
    } else {
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* a hung server fails the test instead of hanging it */
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&ss, sl) != 0) {
        close(fd);
        return -1;
    }
    char req[512];
    size_t blen = body != NULL ? strlen(body) : 0;
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, blen);
    if (n < 0 || (size_t)n >= sizeof(req) || send_all(fd, req, (size_t)n) != 0 ||
        (blen > 0 && send_all(fd, body, blen) != 0)) {
        close(fd);
        return -1;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (buf == NULL) {
        close(fd);
        return -1;
    }
    for (;;) {
        if (len + 1024 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    int major, minor, status;
    if (end == NULL || sscanf(buf, "HTTP/%d.%d %d", &major, &minor, &status) != 3) {
        free(buf);
        return -1;
    }
    size_t hlen = (size_t)(end - buf) + 2;
    out->headers = malloc(hlen + 1);
    out->body_len = len - hlen - 2;
    out->body = malloc(out->body_len + 1);
    if (out->headers == NULL || out->body == NULL) {
        free(buf);
        return -1;
    }
    memcpy(out->headers, buf, hlen);
    out->headers[hlen] = '\0';
    memcpy(out->body, end + 4, out->body_len);
    out->body[out->body_len] = '\0';
    out->status = status;
    free(buf);
    return 0;
}

void http_reply_free(http_reply *r)
{
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof(*r));
}

const char *http_header(const http_reply *r, const char *name, char *buf, size_t len)
{
    if (r->headers == NULL)
        return NULL;
    size_t nl = strlen(name);
    for (const char *line = strstr(r->headers, "\r\n"); line != NULL;
         line = strstr(line + 2, "\r\n")) {
        const char *h = line + 2;
        if (strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
            const char *v = h + nl + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            size_t vl = e != NULL ? (size_t)(e - v) : strlen(v);
            if (vl >= len)
                vl = len - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return buf;
        }
    }
    return NULL;
}
