/*
 * cluster_driver: the cluster transport (src/backend/cluster.c) on a libuv
 * loop, driven through stdin, for tests/backend/test_cluster_transport.py.
 *
 *   cluster_driver [--user U] [--password P] [--connect-timeout-ms N] SEEDS
 *
 * Each line of stdin is a command, words split at blanks ("double quotes"
 * keep blanks, \" and \\ inside them), sent at once without waiting for the
 * replies of the lines before (so several are in flight). The slot is the
 * first key's: EVAL and EVALSHA name it after numkeys, SL.DECIDE after its
 * op, lease and numkeys, a few commands have none (PING, CLUSTER, INFO...),
 * others have it first. Line n (from 1, blank lines and directives not
 * counted) is command n; its answer is one JSON line on stdout:
 *
 *   {"id":n,"type":"string"|"status"|"integer"|"nil"|"array"|"error","value":...}
 *   {"id":n,"err":"..."}      the transport's error (no reply)
 *
 * Directives: "#stats" prints {"epoch":N,"ready":true|false}; "#close"
 * closes the transport at once (every pending command is answered) and
 * stops reading; "#close-on N" does the same from within the cb that
 * answers command N. At the end of stdin the driver waits for every answer,
 * closes the transport, and exits 0; it aborts when a command is answered
 * twice, and exits 3 when one never was.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/cluster.h"

#define LINE_MAX_BYTES 65536
#define ARGS_MAX 256

static uv_loop_t *loop;
static sl_transport *tr;
static uv_pipe_t in;
static char line[LINE_MAX_BYTES];
static size_t line_len;
static bool line_too_long;
static unsigned char *answered; /* per command id: how many answers */
static size_t n_cmds, cap_cmds, outstanding;
static bool eof, closed;
static size_t close_on; /* the command whose answer closes the transport; 0: none */

/* Stops reading stdin for good. */
static void close_input(void)
{
    if (!uv_is_closing((uv_handle_t *)&in)) {
        uv_read_stop((uv_stream_t *)&in);
        uv_close((uv_handle_t *)&in, NULL);
    }
}

static void json_string(const char *s, size_t len)
{
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void json_value(const redisReply *r)
{
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        json_string(r->str, r->len);
        break;
    case REDIS_REPLY_INTEGER:
        printf("%lld", r->integer);
        break;
    case REDIS_REPLY_ARRAY:
        putchar('[');
        for (size_t i = 0; i < r->elements; i++) {
            if (i)
                putchar(',');
            json_value(r->element[i]);
        }
        putchar(']');
        break;
    default:
        printf("null");
    }
}

static const char *type_name(int type)
{
    switch (type) {
    case REDIS_REPLY_STRING: return "string";
    case REDIS_REPLY_STATUS: return "status";
    case REDIS_REPLY_INTEGER: return "integer";
    case REDIS_REPLY_ARRAY: return "array";
    case REDIS_REPLY_ERROR: return "error";
    default: return "nil";
    }
}

static void finish_if_done(void);

static void on_answer(void *priv, redisReply *reply, const char *err)
{
    size_t id = (size_t)(uintptr_t)priv;
    if (id == 0 || id > n_cmds || answered[id - 1]++) {
        fprintf(stderr, "cluster_driver: command %zu answered twice\n", id);
        abort();
    }
    outstanding--;
    if (reply) {
        printf("{\"id\":%zu,\"type\":\"%s\",\"value\":", id, type_name(reply->type));
        json_value(reply);
        printf("}\n");
    } else {
        printf("{\"id\":%zu,\"err\":", id);
        json_string(err ? err : "(none)", strlen(err ? err : "(none)"));
        printf("}\n");
    }
    fflush(stdout);
    if (id == close_on && !closed) {
        closed = true;
        close_input();
        tr->ops->close(tr);
        return;
    }
    finish_if_done();
}

/* Splits line into words; returns their count, or -1 on an unclosed quote
 * or too many words. The words point into line, which is rewritten. */
static int split(char *s, char **argv, size_t *lens)
{
    int argc = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            break;
        if (argc == ARGS_MAX)
            return -1;
        char *out = s;
        argv[argc] = out;
        if (*s == '"') {
            s++;
            while (*s && *s != '"') {
                if (*s == '\\' && (s[1] == '"' || s[1] == '\\'))
                    s++;
                *out++ = *s++;
            }
            if (*s != '"')
                return -1;
            s++;
        } else {
            while (*s && *s != ' ' && *s != '\t')
                *out++ = *s++;
        }
        lens[argc] = (size_t)(out - argv[argc]);
        argc++;
        /* Read the blank after the word before the word's end overwrites it. */
        char *after = *s ? s + 1 : s;
        *out = '\0';
        s = after;
    }
    return argc;
}

static int slot_of_command(int argc, char **argv, const size_t *lens)
{
    static const char *const keyless[] = {"PING", "ECHO", "CLUSTER", "INFO", "SCRIPT",
                                          "DBSIZE", "TIME", "COMMAND", "HELLO", "CONFIG",
                                          "MODULE", "FUNCTION"};
    for (size_t i = 0; i < sizeof keyless / sizeof *keyless; i++)
        if (strcasecmp(argv[0], keyless[i]) == 0)
            return -1;
    int k = 1;
    if (strcasecmp(argv[0], "EVAL") == 0 || strcasecmp(argv[0], "EVALSHA") == 0)
        k = argc > 2 && atoi(argv[2]) > 0 ? 3 : -1;
    else if (strcasecmp(argv[0], "SL.DECIDE") == 0)
        k = 4;
    return k > 0 && k < argc ? sl_slot_of(argv[k], lens[k]) : -1;
}

static void do_line(char *s)
{
    if (!*s || closed)
        return;
    if (strcmp(s, "#stats") == 0) {
        printf("{\"epoch\":%llu,\"ready\":%s}\n", (unsigned long long)tr->epoch,
               tr->ops->ready(tr) ? "true" : "false");
        fflush(stdout);
        return;
    }
    if (strcmp(s, "#close") == 0) {
        closed = true;
        close_input();
        tr->ops->close(tr);
        return;
    }
    if (strncmp(s, "#close-on ", 10) == 0) {
        close_on = (size_t)strtoull(s + 10, NULL, 10);
        return;
    }
    char *argv[ARGS_MAX];
    size_t lens[ARGS_MAX];
    int argc = split(s, argv, lens);
    if (n_cmds == cap_cmds) {
        cap_cmds = cap_cmds ? cap_cmds * 2 : 1024;
        answered = realloc(answered, cap_cmds);
        if (!answered)
            abort();
    }
    size_t id = ++n_cmds;
    answered[id - 1] = 0;
    char *cmd = NULL;
    int len = argc > 0 ? redisFormatCommandArgv(&cmd, argc, (const char **)argv, lens) : -1;
    if (len <= 0) {
        answered[id - 1] = 1;
        printf("{\"id\":%zu,\"err\":\"the driver cannot parse this line\"}\n", id);
        fflush(stdout);
        return;
    }
    outstanding++;
    int slot = slot_of_command(argc, argv, lens);
    if (tr->ops->send(tr, slot, cmd, (size_t)len, on_answer, (void *)(uintptr_t)id) != 0) {
        outstanding--;
        answered[id - 1] = 1;
        printf("{\"id\":%zu,\"err\":\"send refused\"}\n", id);
        fflush(stdout);
    }
    free(cmd);
}

static void finish_if_done(void)
{
    if (eof && !closed && outstanding == 0) {
        closed = true;
        tr->ops->close(tr);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char chunk[65536];
    buf->base = chunk;
    buf->len = sizeof chunk;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    if (nread < 0) {
        eof = true;
        close_input();
        finish_if_done();
        return;
    }
    for (ssize_t i = 0; i < nread && !closed; i++) {
        char ch = buf->base[i];
        if (ch == '\n') {
            line[line_len] = '\0';
            if (line_len && line[line_len - 1] == '\r')
                line[line_len - 1] = '\0';
            if (line_too_long) {
                fprintf(stderr, "cluster_driver: a line over %d bytes\n", LINE_MAX_BYTES);
                exit(2);
            }
            do_line(line);
            line_len = 0;
        } else if (line_len + 1 < sizeof line) {
            line[line_len++] = ch;
        } else {
            line_too_long = true;
        }
    }
}

int main(int argc, char **argv)
{
    sl_transport_config cfg = {0};
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--user") == 0)
            cfg.user = argv[i + 1];
        else if (strcmp(argv[i], "--password") == 0)
            cfg.password = argv[i + 1];
        else if (strcmp(argv[i], "--connect-timeout-ms") == 0)
            cfg.connect_timeout_ms = atoi(argv[i + 1]);
        else
            break;
    }
    if (i + 1 != argc) {
        fprintf(stderr, "usage: cluster_driver [--user U] [--password P] "
                        "[--connect-timeout-ms N] HOST:PORT[,HOST:PORT...]\n");
        return 2;
    }
    cfg.hosts = argv[i];
    /* hiredis writes with write(2): a node that died must be an EPIPE, as
     * it is in sluiced, not the end of the process. */
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    tr = sl_transport_cluster(loop, &cfg);
    if (!tr) {
        fprintf(stderr, "cluster_driver: bad seeds '%s'\n", cfg.hosts);
        return 2;
    }
    if (uv_pipe_init(loop, &in, 0) != 0 || uv_pipe_open(&in, 0) != 0 ||
        uv_read_start((uv_stream_t *)&in, on_alloc, on_read) != 0) {
        fprintf(stderr, "cluster_driver: stdin must be a pipe\n");
        return 2;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(loop);
    if (rc != 0)
        fprintf(stderr, "cluster_driver: handles left open at the end\n");
    size_t missing = 0;
    for (size_t k = 0; k < n_cmds; k++)
        missing += answered[k] == 0;
    free(answered);
    if (missing) {
        fprintf(stderr, "cluster_driver: %zu commands never answered\n", missing);
        return 3;
    }
    return rc ? 4 : 0;
}
