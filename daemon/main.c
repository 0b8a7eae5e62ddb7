// SPDX-License-Identifier: MIT
/*
 * btguardd start-up: the command line, the root check, the signal mask, and
 * the listening socket (handed over by systemd socket activation, or our own
 * at --socket / $BTGUARD_SOCKET / /run/btguard/btguard.sock), then the event
 * loop in server.c.  Runs in the foreground; never forks.
 *
 * Exit status: 0 orderly stop, 1 runtime failure, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "proto.h"
#include "log.h"
#include "nodefacts.h"
#include "pin.h"
#include "policy.h"
#include "ptrace.h"
#include "server.h"

#define DEFAULT_SOCKET PROTO_DEFAULT_SOCKET
#define LISTEN_BACKLOG 128
/* Keeps idle_exit_s * 1000 inside an int, the unit of epoll timeouts. */
#define IDLE_EXIT_MAX_S  2000000u

enum {
	EXIT_ORDERLY = 0,
	EXIT_RUNTIME = 1,
	EXIT_USAGE   = 2,
};

struct options {
	const char *socket_path;   /* NULL: not given */
	unsigned    idle_exit_s;
	bool        verbose;
	const char *config;        /* --config; NULL: the default path, optional */
	bool        check_config;  /* --check-config: read the policy, say what is wrong, exit */
};

/* The socket we made ourselves, so we remove exactly that file on exit. */
struct own_socket {
	char  path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev;
	ino_t ino;
	bool  created;
};

static void print_help(FILE *f)
{
	fputs(
"NAME\n"
"    btguardd - guard glibc backtrace() in running processes (the daemon)\n"
"\n"
"SYNOPSIS\n"
"    btguardd [--socket PATH] [--idle-exit SECONDS] [--config PATH] [--verbose]\n"
"    btguardd --check-config [--config PATH]\n"
"    btguardd --help | --version\n"
"\n"
"DESCRIPTION\n"
"    btguardd serves requests from btguardctl over a Unix stream socket.\n"
"    For each target PID it can guard (patch backtrace() to return 0 frames\n"
"    in the running process, via ptrace, only when no thread is executing or\n"
"    returning into the bytes it changes), unguard (restore the original\n"
"    bytes) or report status (read only; the target is never stopped).\n"
"    Every request is authorized from the peer's credentials (SO_PEERCRED):\n"
"    root may act on any process, any other user only on processes it could\n"
"    ptrace itself; nobody may act on the daemon or on kernel threads.\n"
"    It stays in the foreground and logs one line per action.\n"
"\n"
"OPTIONS\n"
"    -s, --socket PATH\n"
"        Listen on PATH instead of the default.  The parent directory is\n"
"        created (mode 0755) if missing; a stale socket left by a dead\n"
"        daemon is replaced; a live one, or any file that is not a socket,\n"
"        is left alone and btguardd exits with status 1.  The socket is\n"
"        made mode 0666: authorization is per request, not by file mode.\n"
"        Ignored under socket activation.\n"
"    -i, --idle-exit SECONDS\n"
"        Exit (status 0) after SECONDS with no client connected and no work\n"
"        pending.  0, the default, means never.  Meant for socket activation,\n"
"        where systemd starts the daemon again on the next connection.\n"
"        Never while the policy has a guard rule: it is watching then.\n"
"    -c, --config PATH\n"
"        Read the auto-guard policy from PATH and PATH.d/*.conf instead of\n"
"        " POLICY_DEFAULT_PATH " (and its .d).  The default file may be\n"
"        missing (no policy); PATH must exist.  If a file is wrong or not\n"
"        trusted, btguardd still starts and serves manual requests, with no\n"
"        policy rules in force, and says why (FILE:LINE) in its log, in\n"
"        every btguardctl status and in btguardctl policy, until a reload\n"
"        succeeds.  See btguardd.conf(5).\n"
"    -t, --check-config\n"
"        Read the policy (--config PATH, or the default) with the same code\n"
"        and checks as the daemon, print what is wrong as FILE:LINE: reason\n"
"        on stderr, and exit: 0 valid, 1 not.  Needs no socket and changes\n"
"        nothing; for administrators after an edit and for ExecReload=.\n"
"    -v, --verbose\n"
"        Also log debug messages (connections, protocol details).\n"
"    -h, --help\n"
"        Show this help and exit.\n"
"    -V, --version\n"
"        Show the version and exit.\n"
"\n"
"ENVIRONMENT\n"
"    BTGUARD_SOCKET\n"
"        Socket path when --socket is not given.\n"
"    LISTEN_FDS, LISTEN_PID\n"
"        Set by systemd for socket activation (see below).\n"
"    NOTIFY_SOCKET\n"
"        When set, readiness and status are reported with sd_notify(3):\n"
"        READY=1 once serving, STATUS= with client and request counts,\n"
"        STOPPING=1 on the way out.\n"
"    WATCHDOG_USEC, WATCHDOG_PID\n"
"        Set by systemd for WatchdogSec=: WATCHDOG=1 is sent every half\n"
"        interval, also while one operation retries, so a daemon that hangs\n"
"        or is stopped is killed and the kernel releases its targets.\n"
"    JOURNAL_STREAM\n"
"        When it names our stderr, log records go to the journal with\n"
"        structured fields (BTGUARD_ACTION, BTGUARD_TARGET_PID,\n"
"        BTGUARD_REQUESTER_UID, BTGUARD_RESULT, BTGUARD_ERROR, ...);\n"
"        otherwise they are \"btguardd: LEVEL: message\" lines on stderr.\n"
"    BTGUARD_ALLOW_NONROOT=1\n"
"        Start without root.  Only for testing option handling: without\n"
"        privileges the daemon can act on nothing useful.\n"
"\n"
"SOCKET ACTIVATION\n"
"    When systemd (or systemd-socket-activate) passes exactly one listening\n"
"    Unix stream socket, btguardd serves on it and never creates, changes or\n"
"    removes a socket file itself.  Passing more than one socket, or one of\n"
"    another kind, is an error (status 1).  See btguardd.socket and\n"
"    btguardd.service (Type=notify).\n"
"\n"
"SIGNALS\n"
"    SIGTERM, SIGINT\n"
"        Stop: the operation in progress is finished and answered, every\n"
"        target still queued is answered with the error \"shutdown\"\n"
"        (nothing was done to it), replies are flushed for at most 2\n"
"        seconds, and btguardd exits with status 0.\n"
"    SIGHUP\n"
"        Read the policy again (as btguardctl reload).  If it is wrong, the\n"
"        error is logged with FILE:LINE and the policy in force stays.\n"
"\n"
"EXIT STATUS\n"
"    0   orderly stop (signal or --idle-exit); --check-config: the policy is valid\n"
"    1   runtime failure (not root, socket in use or unusable, ...);\n"
"        --check-config: the policy is not valid\n"
"    2   usage error\n"
"\n"
"FILES\n"
"    " DEFAULT_SOCKET "\n"
"        The default control socket.\n"
"\n"
"SEE ALSO\n"
"    btguardctl(1), systemd.socket(5), sd_notify(3)\n", f);
}

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("btguardd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'btguardd --help' for more information.\n", stderr);
	exit(EXIT_USAGE);
}

static unsigned parse_seconds(const char *arg)
{
	unsigned long v;
	char *end;

	errno = 0;
	if (arg[0] < '0' || arg[0] > '9')
		usage_error("--idle-exit wants a whole number of seconds, not '%s'", arg);
	v = strtoul(arg, &end, 10);
	if (errno || *end || v > IDLE_EXIT_MAX_S)
		usage_error("--idle-exit: '%s' is not a number of seconds from 0 to 2000000", arg);
	return (unsigned)v;
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	static const struct option longopts[] = {
		{ "socket",    required_argument, NULL, 's' },
		{ "idle-exit", required_argument, NULL, 'i' },
		{ "config",    required_argument, NULL, 'c' },
		{ "check-config", no_argument,    NULL, 't' },
		{ "verbose",   no_argument,       NULL, 'v' },
		{ "help",      no_argument,       NULL, 'h' },
		{ "version",   no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	/* We print our own diagnostics, in the same form as the others. */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:i:c:tvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (!optarg[0])
				usage_error("--config wants a path");
			opt->config = optarg;
			break;
		case 't':
			opt->check_config = true;
			break;
		case 's':
			if (!optarg[0])
				usage_error("--socket wants a path");
			opt->socket_path = optarg;
			break;
		case 'i':
			opt->idle_exit_s = parse_seconds(optarg);
			break;
		case 'v':
			opt->verbose = true;
			break;
		case 'h':
			print_help(stdout);
			exit(EXIT_ORDERLY);
		case 'V':
			printf("btguardd %s (protocol %u)\n", BTGUARD_VERSION, PROTO_VERSION);
			exit(EXIT_ORDERLY);
		case ':':
			usage_error("option '%s' needs an argument", argv[optind - 1]);
			break;
		default:
			if (optopt)
				usage_error("unknown option '-%c'", optopt);
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s' (btguardd takes options only)", argv[optind]);
}

/*
 * SIGTERM/SIGINT/SIGHUP are read through a signalfd in server.c, and the
 * ptrace code reads SIGCHLD through a signalfd of its own; a signalfd only
 * sees blocked signals, so all four are blocked from the start.  SIGCHLD
 * must not be SIG_IGN: that would make the kernel reap children and drop
 * the notifications ptrace relies on.  SIGPIPE is ignored so a vanished
 * client is an EPIPE, not our death (sends also pass MSG_NOSIGNAL).
 * SIGALRM is ptrace.c's (through unstick.c), handled and never blocked.
 */
static int setup_signals(void)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	if (sigaction(SIGPIPE, &sa, NULL) < 0)
		return -errno;
	return ptrace_setup();
}

/*
 * 1024 clients, our own descriptors (epoll, signalfd, /proc files while
 * acting) and a pidfd for every target of every queued request (pin.h) do
 * not fit the usual soft limit of 1024.  Raising the soft limit up to the
 * hard one needs no privilege; pin.c sizes its budget from what we got.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t want = PIN_MAX + PIN_FD_RESERVE + PIN_SWEEP_FDS;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
		want = rl.rlim_max;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= want)
		return;
	if (rl.rlim_cur == RLIM_INFINITY)
		return;
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		log_msg(LOG_DEBUG, "cannot raise the open file limit to %llu: %s",
			(unsigned long long)want, strerror(errno));
}

/* Returns the activated fd, -1 when not activated, or -errno. */
static int activated_socket(void)
{
	int n, flags;

	n = sd_listen_fds(1);
	if (n < 0) {
		log_msg(LOG_ERR, "socket activation: %s", strerror(-n));
		return n;
	}
	if (n == 0)
		return -1;
	if (n > 1) {
		log_msg(LOG_ERR, "socket activation passed %d sockets; btguardd serves exactly one", n);
		return -EINVAL;
	}
	if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0) {
		log_msg(LOG_ERR, "socket activation passed fd %d, which is not a listening "
			"Unix stream socket", SD_LISTEN_FDS_START);
		return -EINVAL;
	}
	flags = fcntl(SD_LISTEN_FDS_START, F_GETFL);
	if (flags < 0 || fcntl(SD_LISTEN_FDS_START, F_SETFL, flags | O_NONBLOCK) < 0 ||
	    fcntl(SD_LISTEN_FDS_START, F_SETFD, FD_CLOEXEC) < 0) {
		n = -errno;
		log_msg(LOG_ERR, "socket activation: cannot set up fd %d: %s",
			SD_LISTEN_FDS_START, strerror(-n));
		return n;
	}
	return SD_LISTEN_FDS_START;
}

/* Creates the socket's parent directory when missing (one level, mode 0755). */
static int make_parent_dir(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0755) < 0) {
		if (errno == EEXIST)
			return 0;
		log_msg(LOG_ERR, "cannot create directory %s: %s", dir, strerror(errno));
		return -errno;
	}
	/* mkdir obeys the umask; clients of every user must reach the socket. */
	if (chmod(dir, 0755) < 0)
		log_msg(LOG_WARNING, "cannot chmod 0755 %s: %s", dir, strerror(errno));
	log_msg(LOG_INFO, "created directory %s", dir);
	return 0;
}

/*
 * A socket file already at the path is either a live daemon's (leave it and
 * fail) or a stale one left by a crash (replace it).  Asking it is the only
 * reliable test.  A non-blocking connect cannot hang on a full backlog: that
 * answers EAGAIN, which also means somebody is listening.
 */
static int clear_stale_socket(const struct sockaddr_un *addr)
{
	struct stat st;
	int fd, r;

	if (lstat(addr->sun_path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		log_msg(LOG_ERR, "cannot inspect %s: %s", addr->sun_path, strerror(errno));
		return -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		log_msg(LOG_ERR, "%s exists and is not a socket; not touching it", addr->sun_path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	r = connect(fd, (const struct sockaddr *)addr, sizeof(*addr));
	r = r < 0 ? -errno : 0;
	close(fd);
	if (r == 0 || r == -EAGAIN || r == -EINPROGRESS) {
		log_msg(LOG_ERR, "another btguardd is listening on %s", addr->sun_path);
		return -EADDRINUSE;
	}
	if (r == -ENOENT)
		return 0;  /* it went away meanwhile */
	if (r != -ECONNREFUSED) {
		log_msg(LOG_ERR, "cannot probe existing socket %s: %s", addr->sun_path, strerror(-r));
		return r;
	}
	if (unlink(addr->sun_path) < 0 && errno != ENOENT) {
		log_msg(LOG_ERR, "cannot remove stale socket %s: %s", addr->sun_path, strerror(errno));
		return -errno;
	}
	log_msg(LOG_INFO, "removed stale socket %s (nobody was listening)", addr->sun_path);
	return 0;
}

static int own_listen_socket(const char *path, struct own_socket *own)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, r;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		log_msg(LOG_ERR, "socket path is longer than %zu bytes: %s",
			sizeof(addr.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	memcpy(addr.sun_path, path, strlen(path) + 1);

	r = make_parent_dir(path);
	if (r < 0)
		return r;
	r = clear_stale_socket(&addr);
	if (r < 0)
		return r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = -errno;
		log_msg(LOG_ERR, "socket: %s", strerror(-r));
		return r;
	}
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		r = -errno;
		log_msg(LOG_ERR, "cannot bind %s: %s", path, strerror(-r));
		goto out_close;
	}
	/* From here on the file is ours to remove. */
	snprintf(own->path, sizeof(own->path), "%s", path);
	own->created = true;
	if (stat(path, &st) == 0) {
		own->dev = st.st_dev;
		own->ino = st.st_ino;
	}
	/* Authorization is per request from SO_PEERCRED, not by file mode. */
	if (chmod(path, 0666) < 0) {
		r = -errno;
		log_msg(LOG_ERR, "cannot chmod 0666 %s: %s", path, strerror(-r));
		goto out_close;
	}
	if (listen(fd, LISTEN_BACKLOG) < 0) {
		r = -errno;
		log_msg(LOG_ERR, "cannot listen on %s: %s", path, strerror(-r));
		goto out_close;
	}
	return fd;

out_close:
	close(fd);
	return r;
}

/* Removes our socket file, unless somebody replaced it meanwhile. */
static void remove_own_socket(const struct own_socket *own)
{
	struct stat st;

	if (!own->created)
		return;
	if (lstat(own->path, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    st.st_dev != own->dev || st.st_ino != own->ino)
		return;
	if (unlink(own->path) < 0)
		log_msg(LOG_WARNING, "cannot remove %s: %s", own->path, strerror(errno));
}

/*
 * --check-config: policy_load(), the very code a start or a reload runs,
 * and nothing else - no root needed, no socket, no log set-up.
 */
static int check_config(const char *path, bool required)
{
	struct policy_error perr;
	struct policy *p;
	char why[PATH_MAX + 300];
	int r = policy_load(path, required, &p, &perr);

	if (r < 0) {
		policy_error_format(&perr, why, sizeof(why));
		fprintf(stderr, "%s\n", why);
		return EXIT_RUNTIME;
	}
	printf("%s: valid: %zu rule(s), %zu guard rule(s), sweep every %u ms\n", path, p->nrules,
	       p->nguard, p->interval_ms);
	policy_unref(p);
	return EXIT_ORDERLY;
}

int main(int argc, char **argv)
{
	struct options opt = { 0 };
	struct own_socket own = { .created = false };
	struct server_config cfg = { .listen_fd = -1 };
	const char *path, *allow, *policy_path;
	struct policy_error perr;
	static char policy_why[PATH_MAX + 300];
	int fd, r;

	parse_options(argc, argv, &opt);
	policy_path = opt.config ? opt.config : POLICY_DEFAULT_PATH;
	if (opt.check_config)
		return check_config(policy_path, opt.config != NULL);

	allow = getenv("BTGUARD_ALLOW_NONROOT");
	if (geteuid() != 0 && !(allow && strcmp(allow, "1") == 0)) {
		fprintf(stderr, "btguardd: must run as root (it attaches to other users' "
			"processes with ptrace); try sudo\n");
		return EXIT_RUNTIME;
	}

	log_setup(opt.verbose);
	/* First: what the node's namespaces are, before anything else runs. */
	nodefacts_init();
	/*
	 * Each guard allocates ~1 MiB of stack-walk cache and frees it.  glibc
	 * would raise its mmap threshold after the first free and serve later
	 * ones from a heap that never shrinks; a fixed threshold keeps such
	 * buffers mmap'ed, and the daemon's resident size at its idle level.
	 */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	r = setup_signals();
	if (r < 0) {
		log_msg(LOG_ERR, "cannot set up signals: %s", strerror(-r));
		return EXIT_RUNTIME;
	}

	/*
	 * A wrong policy file must not leave the node without a daemon (a
	 * typo before a reboot would): we serve manual requests with no rules
	 * in force, and say why in the log now and in every STATUS and
	 * POLICY answer (watch_problem()) until a reload succeeds.
	 */
	r = policy_load(policy_path, opt.config != NULL, &cfg.policy, &perr);
	if (r == -ENOMEM) {
		log_msg(LOG_ERR, "cannot read the policy: %s", strerror(-r));
		return EXIT_RUNTIME;
	}
	if (r < 0) {
		policy_error_format(&perr, policy_why, sizeof(policy_why));
		log_msg(LOG_CRIT, "policy not loaded: %s; serving manual requests with no policy "
			"rules in force (fix it, then: btguardctl reload)", policy_why);
		cfg.policy = policy_new();
		if (!cfg.policy)
			return EXIT_RUNTIME;
		cfg.policy_error = policy_why;
	}
	if (cfg.policy->nrules)
		log_msg(LOG_INFO, "policy from %s: %zu rule(s), %zu guard rule(s), sweep every %u ms",
			policy_path, cfg.policy->nrules, cfg.policy->nguard, cfg.policy->interval_ms);
	cfg.config_path = policy_path;
	cfg.config_required = opt.config != NULL;

	raise_fd_limit();
	fd = activated_socket();
	if (fd < -1)
		return EXIT_RUNTIME;
	if (fd >= 0) {
		if (opt.socket_path)
			log_msg(LOG_NOTICE, "socket activated: ignoring --socket %s", opt.socket_path);
		log_msg(LOG_INFO, "serving on the socket passed by systemd");
	} else {
		path = opt.socket_path;
		if (!path) {
			path = getenv("BTGUARD_SOCKET");
			if (!path || !*path)
				path = DEFAULT_SOCKET;
		}
		fd = own_listen_socket(path, &own);
		if (fd < 0) {
			remove_own_socket(&own);
			return EXIT_RUNTIME;
		}
		log_msg(LOG_INFO, "listening on %s", path);
	}

	cfg.listen_fd = fd;
	cfg.idle_exit_s = opt.idle_exit_s;
	cfg.notify = getenv("NOTIFY_SOCKET") != NULL;
	r = server_run(&cfg);

	remove_own_socket(&own);
	close(fd);
	if (r < 0) {
		log_msg(LOG_ERR, "event loop failed: %s", strerror(-r));
		return EXIT_RUNTIME;
	}
	log_msg(LOG_INFO, "stopped");
	return EXIT_ORDERLY;
}
