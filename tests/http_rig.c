/*
 * The loopback HTTP server of tests/http_rig.h.
 */
#include "http_rig.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char server_py[] =
    "import http.server, os, signal, sys, threading, time\n"
    "root, portfile, logfile, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])\n"
    "counts, lock = {}, threading.Lock()\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    protocol_version = 'HTTP/1.1'\n"
    "    def log_message(self, *a):\n"
    "        pass\n"
    "    def do_GET(self):\n"
    "        with lock:\n"
    "            with open(logfile, 'a') as f:\n"
    "                f.write(self.path + '\\n')\n"
    "            counts[self.path] = n = counts.get(self.path, 0) + 1\n"
    "        parts = self.path.split('/')\n"
    "        mode, name = parts[1], parts[-1]\n"
    "        path = os.path.join(root, name)\n"
    "        if mode == 'flaky' and n <= int(parts[2]):\n"
    "            self.send_error(503)\n"
    "            return\n"
    "        if not os.path.isfile(path):\n"
    "            self.send_error(404)\n"
    "            return\n"
    "        data = open(path, 'rb').read()\n"
    "        self.send_response(200)\n"
    "        self.send_header('Content-Length', str(len(data)))\n"
    "        self.end_headers()\n"
    "        if mode == 'stall':\n"
    "            self.wfile.write(data[:len(data) // 2])\n"
    "            self.wfile.flush()\n"
    "            time.sleep(120)\n"
    "            return\n"
    "        if mode == 'slow':\n"
    "            step = (len(data) + 7) // 8\n"
    "            for i in range(0, len(data), step):\n"
    "                self.wfile.write(data[i:i + step])\n"
    "                self.wfile.flush()\n"
    "                time.sleep(float(parts[2]) / 1000)\n"
    "            return\n"
    "        marker = path + '.died'\n"
    "        if mode == 'die' and not os.path.exists(marker):\n"
    "            open(marker, 'w').close()\n"
    "            self.wfile.write(data[:len(data) // 2])\n"
    "            self.wfile.flush()\n"
    "            os.kill(os.getpid(), signal.SIGKILL)\n"
    "        self.wfile.write(data)\n"
    "srv = http.server.ThreadingHTTPServer(('127.0.0.1', port), H)\n"
    "with open(portfile + '.tmp', 'w') as f:\n"
    "    f.write(str(srv.server_address[1]))\n"
    "os.rename(portfile + '.tmp', portfile)\n"
    "srv.serve_forever()\n";

void http_start(http_server_t *s, const char *root, int port)
{
    snprintf(s->root, sizeof(s->root), "%s", root);
    snprintf(s->script, sizeof(s->script), "%s/.http_server.py", root);
    snprintf(s->portfile, sizeof(s->portfile), "%s/.http_port", root);
    snprintf(s->log, sizeof(s->log), "%s/.http_log", root);
    FILE *f = fopen(s->script, "w");
    cr_assert_not_null(f);
    fputs(server_py, f);
    fclose(f);
    unlink(s->portfile);
    char portarg[16];
    snprintf(portarg, sizeof(portarg), "%d", port);
    s->pid = fork();
    cr_assert_geq(s->pid, 0);
    if (s->pid == 0) {
        execlp("python3", "python3", s->script, s->root, s->portfile, s->log, portarg,
               (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) { /* 10 s */
        f = fopen(s->portfile, "r");
        if (f) {
            int ok = fscanf(f, "%d", &s->port) == 1;
            fclose(f);
            if (ok)
                return;
        }
        cr_assert(http_alive(s), "the HTTP server (python3 http.server) exited at start");
        usleep(10000);
    }
    http_stop(s);
    cr_assert_fail("the HTTP server did not start within 10 s");
}

int http_alive(http_server_t *s)
{
    if (s->pid <= 0)
        return 0;
    int status;
    if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
        s->pid = 0;
        return 0;
    }
    return 1;
}

void http_stop(http_server_t *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    s->pid = 0;
}

int http_count(const http_server_t *s, const char *path)
{
    FILE *f = fopen(s->log, "r");
    if (!f)
        return 0;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        n += !strcmp(line, path);
    }
    fclose(f);
    return n;
}

const char *http_url(const http_server_t *s, const char *path)
{
    static char urls[8][512];
    static unsigned next;
    char *u = urls[next++ % 8];
    snprintf(u, 512, "http://127.0.0.1:%d%s", s->port, path);
    return u;
}
