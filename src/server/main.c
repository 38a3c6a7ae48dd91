/*
 * main.c: sluiced's start-up and shutdown.
 *
 *   sluiced [--port N] [--http-port N] [--bind ADDR] [--threads N]
 *           [--requirepass SECRET] [--maxclients N] [--max-memory BYTES]
 *           [--max-key-bytes N] [--max-request-bytes N] [--idle-timeout S]
 *           [--snapshot FILE] [--snapshot-interval S] [--config FILE]
 *           [--log-level debug|info|warn|error]
 *
 * The main thread owns the signals and the timers (snapshots, the store's
 * sweep); the workers own the connections. SIGTERM and SIGINT: stop
 * accepting, finish what is in flight, write the snapshot, exit 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy/config.h"
#include "server/log.h"
#include "server/server.h"

/* With --snapshot and no --snapshot-interval: a crash loses at most this
 * many seconds of state, for a write every minute that costs little. */
#define SL_SNAPSHOT_INTERVAL_DEFAULT 60

static int64_t sl_now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sl_usage(FILE *f)
{
    fprintf(f,
            "usage: sluiced [options]\n"
            "  --port N               RESP port (default 7379; 0 = off)\n"
            "  --http-port N          HTTP port (default 7380; 0 = off)\n"
            "  --bind ADDR            address to listen on (default 127.0.0.1)\n"
            "  --threads N            worker threads (default: the number of cores)\n"
            "  --requirepass SECRET   require AUTH SECRET before other commands\n"
            "  --maxclients N         most connections at once (default 10000)\n"
            "  --max-memory BYTES     cap on the store's memory, k/m/g suffixes (default none)\n"
            "  --max-key-bytes N      longest key (default 512)\n"
            "  --max-request-bytes N  largest request (default 65536)\n"
            "  --idle-timeout S       close connections idle this long (default 0 = never)\n"
            "  --snapshot FILE        restore from FILE at start, write it at shutdown\n"
            "  --snapshot-interval S  also write it every S seconds (default 0 = never)\n"
            "  --config FILE          YAML config (policies); flags win over it\n"
            "  --log-level LEVEL      debug, info, warn or error (default info)\n"
            "  --http-auth-header H   forward-auth: the header holding the key (X-Api-Key)\n"
            "  --http-deny-status N   forward-auth: the status of a denial: 429 (default),\n"
            "                         401 or 403 (nginx auth_request passes only 401/403)\n"
            "  --version, --help\n");
}

/* Parses a non-negative integer with an optional k, m or g (powers of 1024). */
static bool sl_parse_size(const char *s, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return false;
    long long mul = 1;
    if (*end == 'k' || *end == 'K')
        mul = 1024, end++;
    else if (*end == 'm' || *end == 'M')
        mul = 1024 * 1024, end++;
    else if (*end == 'g' || *end == 'G')
        mul = 1024LL * 1024 * 1024, end++;
    if ((*end == 'b' || *end == 'B') && mul > 1)
        end++;
    if (*end != '\0' || __builtin_mul_overflow(v, mul, &v) || v > max)
        return false;
    *out = v;
    return true;
}

/* Parses flags into *cfg. `origin` names where they come from in messages
 * ("sluiced" for the command line, "FILE:LINE:COL: server" for the config). */
static int sl_parse_args(int argc, char **argv, sl_server_config *cfg, const char *origin)
{
    enum {
        O_PORT = 256, O_HTTP_PORT, O_BIND, O_THREADS, O_REQUIREPASS, O_MAXCLIENTS, O_MAXMEM,
        O_MAXKEY, O_MAXREQ, O_IDLE, O_SNAPSHOT, O_SNAPINT, O_CONFIG, O_LOGLEVEL, O_VERSION, O_HELP,
        O_STORE, O_SPLIT, O_PEERS, O_ONERR, O_AUTH_HEADER, O_DENY_STATUS
    };
    static const struct option opts[] = {
        {"port", required_argument, NULL, O_PORT},
        {"http-port", required_argument, NULL, O_HTTP_PORT},
        {"bind", required_argument, NULL, O_BIND},
        {"threads", required_argument, NULL, O_THREADS},
        {"requirepass", required_argument, NULL, O_REQUIREPASS},
        {"maxclients", required_argument, NULL, O_MAXCLIENTS},
        {"max-memory", required_argument, NULL, O_MAXMEM},
        {"max-key-bytes", required_argument, NULL, O_MAXKEY},
        {"max-request-bytes", required_argument, NULL, O_MAXREQ},
        {"idle-timeout", required_argument, NULL, O_IDLE},
        {"snapshot", required_argument, NULL, O_SNAPSHOT},
        {"snapshot-interval", required_argument, NULL, O_SNAPINT},
        {"config", required_argument, NULL, O_CONFIG},
        {"log-level", required_argument, NULL, O_LOGLEVEL},
        {"store", required_argument, NULL, O_STORE},
        {"split", required_argument, NULL, O_SPLIT},
        {"peers", required_argument, NULL, O_PEERS},
        {"on-store-error", required_argument, NULL, O_ONERR},
        {"http-auth-header", required_argument, NULL, O_AUTH_HEADER},
        {"http-deny-status", required_argument, NULL, O_DENY_STATUS},
        {"version", no_argument, NULL, O_VERSION},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    int o;
    long long v;
    opterr = 0;
    optind = 0; /* glibc: start afresh, this may be the second list parsed */
    int index = -1;
    while ((o = getopt_long(argc, argv, "", opts, &index)) != -1) {
        char name[64];
        if (index >= 0 && o >= O_PORT)
            snprintf(name, sizeof name, "--%s", opts[index].name);
        else
            snprintf(name, sizeof name, "%.60s", optind > 0 && optind <= argc ? argv[optind - 1] : "?");
        index = -1;
        switch (o) {
        case O_PORT:
        case O_HTTP_PORT:
            if (!sl_parse_size(optarg, 65535, &v))
                goto bad;
            *(o == O_PORT ? &cfg->port : &cfg->http_port) = (int)v;
            break;
        case O_BIND: cfg->bind = optarg; break;
        case O_THREADS:
            if (!sl_parse_size(optarg, 256, &v) || v < 1)
                goto bad;
            cfg->threads = (int)v;
            break;
        case O_REQUIREPASS:
            if (!*optarg)
                goto bad;
            cfg->requirepass = optarg;
            break;
        case O_MAXCLIENTS:
            if (!sl_parse_size(optarg, 1000000, &v) || v < 1)
                goto bad;
            cfg->maxclients = (int)v;
            break;
        case O_MAXMEM:
            if (!sl_parse_size(optarg, (long long)1 << 50, &v))
                goto bad;
            cfg->max_memory = (size_t)v;
            break;
        case O_MAXKEY:
            if (!sl_parse_size(optarg, 65535, &v) || v < 1)
                goto bad;
            cfg->max_key_bytes = (size_t)v;
            break;
        case O_MAXREQ:
            if (!sl_parse_size(optarg, 512LL * 1024 * 1024, &v) || v < 1024)
                goto bad;
            cfg->max_request_bytes = (size_t)v;
            break;
        case O_IDLE:
            if (!sl_parse_size(optarg, 365LL * 86400, &v))
                goto bad;
            cfg->idle_timeout_s = (int)v;
            break;
        case O_SNAPSHOT: cfg->snapshot = optarg; break;
        case O_SNAPINT:
            if (!sl_parse_size(optarg, 365LL * 86400, &v))
                goto bad;
            cfg->snapshot_interval_s = (int)v;
            break;
        case O_CONFIG: cfg->config_path = optarg; break;
        case O_AUTH_HEADER:
            if (!*optarg || strlen(optarg) > 64 || strpbrk(optarg, " :\t\r\n"))
                goto bad;
            cfg->http_auth_header = optarg;
            break;
        case O_DENY_STATUS:
            if (!sl_parse_size(optarg, 999, &v) || (v != 429 && v != 401 && v != 403))
                goto bad;
            cfg->http_deny_status = (int)v;
            break;
        case O_LOGLEVEL:
            if (!strcmp(optarg, "debug")) cfg->log_level = SL_LOG_DEBUG;
            else if (!strcmp(optarg, "info")) cfg->log_level = SL_LOG_INFO;
            else if (!strcmp(optarg, "warn")) cfg->log_level = SL_LOG_WARN;
            else if (!strcmp(optarg, "error")) cfg->log_level = SL_LOG_ERROR;
            else goto bad;
            break;
        case O_STORE:
            if (strcmp(optarg, "memory://") != 0) {
                fprintf(stderr, "%s: --store %s: only memory:// is available in this version\n",
                        origin, optarg);
                return 2;
            }
            break;
        case O_SPLIT:
        case O_PEERS:
        case O_ONERR:
            fprintf(stderr, "%s: %s is not available in this version\n", origin, name);
            return 2;
        case O_VERSION: printf("sluiced %s\n", SLUICE_VERSION); exit(0);
        case O_HELP: sl_usage(stdout); exit(0);
        default:
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n", origin, name);
            sl_usage(stderr);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "%s: invalid value '%s' for %s\n", origin, optarg, name);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", origin, argv[optind]);
        return 2;
    }
    return 0;
}

static sl_server sl_srv;
static uv_signal_t sl_sigterm, sl_sigint, sl_sighup;
static uv_timer_t sl_snapshot_timer, sl_sweep_timer;

/* Writes the snapshot, if there is one to write; returns SL_OK or the
 * store's error, logged with the path and errno's reason. */
static int sl_snapshot_write(sl_server *srv, const char *why)
{
    if (!srv->cfg.snapshot)
        return SL_OK;
    int rc = sl_store_snapshot_save(srv->store, srv->cfg.snapshot, sl_now_mono(), sl_now_wall());
    if (rc == SL_OK)
        sl_log(SL_LOG_INFO, "snapshot written to %s (%s)", srv->cfg.snapshot, why);
    else
        sl_log(SL_LOG_ERROR, "snapshot %s: %s: %s", srv->cfg.snapshot, sl_strerror(rc),
               strerror(errno));
    return rc;
}

/* Checks at start that the snapshot can be written where it is to go, so
 * that a path that cannot be is refused now, and not found out at
 * shutdown, when the state it should keep is about to be lost. The store
 * writes a temporary file beside the path and renames it over the path:
 * this creates and removes such a file, and refuses a path that is there
 * but is not a regular file. Returns 0, or -1 with the reason printed. */
static int sl_snapshot_check(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "sluiced: --snapshot %s: not a regular file\n", path);
        return -1;
    }
    size_t len = strlen(path);
    char *tmp = malloc(len + sizeof ".tmpXXXXXX");
    if (!tmp) {
        fprintf(stderr, "sluiced: --snapshot %s: out of memory\n", path);
        return -1;
    }
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmpXXXXXX", sizeof ".tmpXXXXXX");
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "sluiced: --snapshot %s: cannot create a file in its directory: %s\n", path,
                strerror(errno));
        free(tmp);
        return -1;
    }
    close(fd);
    unlink(tmp);
    free(tmp);
    return 0;
}

static void sl_on_snapshot_timer(uv_timer_t *t)
{
    sl_snapshot_write(t->data, "periodic");
}

static void sl_on_sweep_timer(uv_timer_t *t)
{
    sl_server *srv = t->data;
    sl_store_sweep(srv->store, sl_now_mono(), 4096);
}

static void sl_on_stop_signal(uv_signal_t *s, int signum)
{
    sl_log(SL_LOG_INFO, "%s: shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    uv_stop(s->loop);
}

static uv_timer_t sl_retire_timer;

/* Frees the old config once every worker has seen the new epoch. */
static void sl_on_retire_timer(uv_timer_t *t)
{
    sl_server *srv = t->data;
    uint64_t epoch = atomic_load(&srv->epoch);
    for (int i = 0; i < srv->nworkers; i++)
        if (atomic_load(&srv->workers[i].seen_epoch) != epoch)
            return;
    sl_config_free(srv->retired);
    srv->retired = NULL;
    uv_timer_stop(t);
}

/* SIGHUP: load the config file again. A bad file is refused with where and
 * why, and the old policies stay. Server settings take effect at restart. */
static void sl_on_sighup(uv_signal_t *s, int signum)
{
    sl_server *srv = s->data;
    if (!srv->cfg.config_path) {
        sl_log(SL_LOG_INFO, "SIGHUP: no config file to reload");
        return;
    }
    if (srv->retired) {
        sl_log(SL_LOG_WARN, "SIGHUP: the previous reload is still being applied; try again");
        return;
    }
    sl_config *next;
    char err[512];
    if (sl_config_load(srv->cfg.config_path, &next, err, sizeof err) != 0) {
        sl_log(SL_LOG_ERROR, "SIGHUP: config refused, keeping the old policies: %s", err);
        return;
    }
    srv->retired = atomic_exchange(&srv->config, next);
    sl_metrics_reset_policies(srv); /* the indexes now name other policies */
    atomic_fetch_add(&srv->epoch, 1);
    sl_workers_wake(srv);
    uv_timer_start(&sl_retire_timer, sl_on_retire_timer, 10, 10);
    sl_log(SL_LOG_INFO, "SIGHUP: reloaded %s: %zu policies", srv->cfg.config_path,
           next->npolicies);
}

/* The value of --config in argv, or NULL. */
static const char *sl_find_config_flag(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            path = argv[i] + 9;
    }
    return path;
}

/* Applies the config file's server settings with the flags' own parser. */
static int sl_apply_settings(const sl_config *conf, const char *path, sl_server_config *cfg)
{
    for (size_t i = 0; i < conf->nsettings; i++) {
        const sl_config_setting *st = &conf->settings[i];
        char flag[80], origin[600];
        snprintf(flag, sizeof flag, "--%s", st->name);
        snprintf(origin, sizeof origin, "sluiced: %s:%d:%d: server", path, st->line, st->column);
        if (strcmp(st->name, "config") == 0) {
            fprintf(stderr, "%s: config cannot name another config file\n", origin);
            return 2;
        }
        char *args[] = {(char *)"sluiced", flag, st->value, NULL};
        int rc = sl_parse_args(3, args, cfg, origin);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    sl_server *srv = &sl_srv;
    /* Hold the signals until their handlers are in place: a SIGTERM that
     * arrives while the store loads must still shut down cleanly. The
     * worker threads inherit the mask and never take them. */
    sigset_t held;
    sigemptyset(&held);
    sigaddset(&held, SIGTERM);
    sigaddset(&held, SIGINT);
    sigaddset(&held, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &held, NULL);

    srv->cfg = (sl_server_config){
        .bind = "127.0.0.1",
        .port = 7379,
        .http_port = 7380,
        .maxclients = 10000,
        .max_request_bytes = 64 * 1024,
        .max_key_bytes = 512,
        .log_level = SL_LOG_INFO,
        .http_auth_header = "X-Api-Key",
        .http_deny_status = 429,
        .snapshot_interval_s = -1,
    };
    /* The config file first, then the flags: a flag wins over the file. */
    int rc;
    const char *config_path = sl_find_config_flag(argc, argv);
    if (config_path) {
        sl_config *conf;
        char err[512];
        if (sl_config_load(config_path, &conf, err, sizeof err) != 0) {
            fprintf(stderr, "sluiced: %s\n", err);
            return 2;
        }
        atomic_store(&srv->config, conf);
        rc = sl_apply_settings(conf, config_path, &srv->cfg);
        if (rc != 0)
            return rc;
    }
    rc = sl_parse_args(argc, argv, &srv->cfg, "sluiced");
    if (rc != 0)
        return rc;
    sl_log_set_level((enum sl_log_level)srv->cfg.log_level);
    if (srv->cfg.threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        srv->cfg.threads = n > 0 ? (int)n : 1;
    }
    srv->nworkers = srv->cfg.threads;
    signal(SIGPIPE, SIG_IGN);
    if (srv->cfg.port == 0 && srv->cfg.http_port == 0) {
        fprintf(stderr, "sluiced: --port 0 and --http-port 0 turn both listeners off: "
                        "nothing to serve\n");
        return 2;
    }
    if (srv->cfg.port == srv->cfg.http_port) {
        char addr[SL_LOG_ADDR_MAX];
        fprintf(stderr, "sluiced: cannot listen on %s for both RESP and HTTP (--port and "
                        "--http-port are the same): Address already in use\n",
                sl_log_addr(addr, srv->cfg.bind, srv->cfg.port));
        return 2;
    }
    if (srv->cfg.snapshot && sl_snapshot_check(srv->cfg.snapshot) != 0)
        return 2;
    /* The ports first: a second server on a port is refused before it
     * spends any time loading a snapshot. */
    if (sl_listeners_open(srv) != 0)
        return 1;

    if (getrandom(srv->lease_key, sizeof srv->lease_key, 0) != sizeof srv->lease_key) {
        sl_log(SL_LOG_ERROR, "getrandom: %s", strerror(errno));
        return 1;
    }
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
        seed = (uint64_t)sl_now_wall();
    sl_store_config scfg = {.max_memory = srv->cfg.max_memory,
                            .max_key_len = srv->cfg.max_key_bytes,
                            .seed = seed};
    rc = sl_store_new(&scfg, &srv->store);
    if (rc != SL_OK) {
        sl_log(SL_LOG_ERROR, "cannot create the store: %s", sl_strerror(rc));
        return 1;
    }
    if (srv->cfg.snapshot && access(srv->cfg.snapshot, F_OK) != 0) {
        sl_log(SL_LOG_INFO, "no snapshot at %s yet: starting empty", srv->cfg.snapshot);
    } else if (srv->cfg.snapshot) {
        size_t loaded = 0;
        rc = sl_store_snapshot_load(srv->store, srv->cfg.snapshot, sl_now_mono(), sl_now_wall(),
                                    &loaded);
        if (rc != SL_OK) {
            sl_log(SL_LOG_ERROR, "snapshot %s refused: %s", srv->cfg.snapshot, sl_strerror(rc));
            return 1;
        }
        sl_log(SL_LOG_INFO, "restored %zu keys from %s", loaded, srv->cfg.snapshot);
    }

    srv->started_mono = sl_now_mono();
    if (sl_workers_start(srv) != 0)
        return 1;
    sl_config *conf = atomic_load(&srv->config);
    char resp[SL_LOG_ADDR_MAX + 8] = "off", http[SL_LOG_ADDR_MAX + 8] = "off";
    char addr[SL_LOG_ADDR_MAX];
    if (srv->cfg.port)
        snprintf(resp, sizeof resp, "on %s", sl_log_addr(addr, srv->cfg.bind, srv->cfg.port));
    if (srv->cfg.http_port)
        snprintf(http, sizeof http, "on %s", sl_log_addr(addr, srv->cfg.bind, srv->cfg.http_port));
    sl_log(SL_LOG_INFO, "sluiced %s: RESP %s, HTTP %s, %d threads, store memory://, %zu policies",
           SLUICE_VERSION, resp, http, srv->nworkers, conf ? conf->npolicies : 0);

    uv_loop_t *loop = uv_default_loop();
    uv_signal_init(loop, &sl_sigterm);
    uv_signal_init(loop, &sl_sigint);
    uv_signal_init(loop, &sl_sighup);
    sl_sighup.data = srv;
    uv_signal_start(&sl_sigterm, sl_on_stop_signal, SIGTERM);
    uv_signal_start(&sl_sigint, sl_on_stop_signal, SIGINT);
    uv_signal_start(&sl_sighup, sl_on_sighup, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &held, NULL);
    uv_timer_init(loop, &sl_retire_timer);
    sl_retire_timer.data = srv;
    uv_timer_init(loop, &sl_sweep_timer);
    sl_sweep_timer.data = srv;
    uv_timer_start(&sl_sweep_timer, sl_on_sweep_timer, 1000, 1000);
    if (srv->cfg.snapshot && srv->cfg.snapshot_interval_s < 0)
        srv->cfg.snapshot_interval_s = SL_SNAPSHOT_INTERVAL_DEFAULT;
    if (srv->cfg.snapshot && srv->cfg.snapshot_interval_s > 0)
        sl_log(SL_LOG_INFO, "snapshot %s: written every %d s and at shutdown", srv->cfg.snapshot,
               srv->cfg.snapshot_interval_s);
    else if (srv->cfg.snapshot)
        sl_log(SL_LOG_INFO, "snapshot %s: written at shutdown only", srv->cfg.snapshot);
    if (srv->cfg.snapshot && srv->cfg.snapshot_interval_s > 0) {
        uint64_t ms = (uint64_t)srv->cfg.snapshot_interval_s * 1000;
        uv_timer_init(loop, &sl_snapshot_timer);
        sl_snapshot_timer.data = srv;
        uv_timer_start(&sl_snapshot_timer, sl_on_snapshot_timer, ms, ms);
    }
    uv_run(loop, UV_RUN_DEFAULT);

    sl_workers_stop(srv);
    /* A final snapshot that fails loses the state: the exit status says so,
     * so that a service manager does not see a clean stop. */
    int status = sl_snapshot_write(srv, "shutdown") == SL_OK ? 0 : 1;
    sl_store_free(srv->store);
    sl_config_free(atomic_load(&srv->config));
    sl_config_free(srv->retired);
    sl_log(SL_LOG_INFO, status == 0 ? "bye" : "bye, without the final snapshot");
    return status;
}
