//! `ferrokv-server [/path/to/ferrokv.conf] [--option value ...]`

use ferrokv_server::alloc::CountingAlloc;
use ferrokv_server::config::{Config, LogLevel};
use ferrokv_server::net::reactor::Reactor;
use ferrokv_server::server::Server;
use tracing::{error, info, warn};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn usage() -> ! {
    eprintln!(
        "Usage: ./ferrokv-server [/path/to/ferrokv.conf] [options]\n       \
         ./ferrokv-server -v or --version\n       \
         ./ferrokv-server -h or --help\n       \
         ./ferrokv-server --check-aof <appendonlydir/appendonly.aof.manifest>\n\n\
         Examples:\n       \
         ./ferrokv-server (run the server with default conf: 127.0.0.1:6379, data in ./data)\n       \
         ./ferrokv-server /etc/ferrokv/6379.conf\n       \
         ./ferrokv-server --port 7777\n       \
         ./ferrokv-server /etc/myferrokv.conf --loglevel verbose --requirepass secret"
    );
    std::process::exit(1)
}

fn init_logging(cfg: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FERROKV_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(cfg.loglevel.filter()));
    // A log line that cannot be written (a full disk, a closed stderr) is
    // dropped: the default reports it with `eprintln!`, which panics when
    // stderr itself fails — and a panic aborts the server.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .log_internal_errors(false);
    // `CONFIG SET loglevel` swaps the filter through this hook (set up
    // last: the reload layer's type depends on the writer).
    macro_rules! install {
        ($builder:expr) => {{
            let builder = $builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            ferrokv_server::config::set_log_level_hook(Box::new(move |level: LogLevel| {
                let _ = handle.reload(tracing_subscriber::EnvFilter::new(level.filter()));
            }));
        }};
    }
    if cfg.logfile.is_empty() {
        // Colours only for a terminal: a log piped to a file or a
        // supervisor stays plain text that log checks can match.
        let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
        install!(builder.with_ansi(tty));
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cfg.logfile)
        {
            Ok(f) => {
                let builder = builder
                    .with_ansi(false)
                    .with_writer(std::sync::Mutex::new(f));
                install!(builder)
            }
            Err(e) => {
                eprintln!("Can't open the log file {}: {e}", cfg.logfile);
                std::process::exit(1);
            }
        }
    }
}

/// Fits maxclients to `RLIMIT_NOFILE`, logging what Redis logs.
fn adjust_open_files_limit(cfg: &mut Config) {
    use ferrokv_server::fdlimit::{fit_open_files, Fit, RESERVED_FDS};
    let want = cfg.maxclients + RESERVED_FDS;
    match fit_open_files(cfg.maxclients) {
        Fit::Already => {}
        Fit::Raised { from } => info!(
            "Increased maximum number of open files to {want} (it was originally set to {from})."
        ),
        Fit::Unknown(e) => {
            cfg.maxclients = 1024 - RESERVED_FDS;
            warn!("Unable to obtain the current NOFILE limit ({e}), assuming 1024 and setting the max clients configuration accordingly.");
        }
        Fit::Reduced { limit, error } => {
            if limit <= RESERVED_FDS {
                error!(
                    "Your current 'ulimit -n' of {limit} is not enough for the server to start. Please increase your open file limit to at least {}. Exiting.",
                    RESERVED_FDS + 1
                );
                std::process::exit(1);
            }
            let requested = cfg.maxclients;
            cfg.maxclients = limit - RESERVED_FDS;
            warn!("You requested maxclients of {requested} requiring at least {want} max file descriptors.");
            if let Some(e) = error {
                warn!("Server can't set maximum open files to {want} because of OS error: {e}.");
            }
            warn!(
                "Current maximum open files is {limit}. maxclients has been reduced to {} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
                cfg.maxclients
            );
        }
    }
}

/// Turns transparent huge pages off for this process, as Redis does with
/// `disable-thp yes`: the allocator's arenas are madvised for huge pages,
/// and with THP on, half-used 2 MB pages inflated the resident set of 1 M
/// small keys by a third (196 MB against 147 MB).
fn disable_transparent_huge_pages() {
    // SAFETY: prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) only sets a flag on this
    // process's memory descriptor; it takes no pointers.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        tracing::warn!(
            "Could not disable transparent huge pages: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => {
            println!(
                "ferrokv server v={} (Redis protocol {})",
                ferrokv_server::VERSION,
                ferrokv_server::REDIS_COMPAT_VERSION
            );
            return;
        }
        Some("-h" | "--help") => usage(),
        // Offline verification of an AOF directory's checksums, beside
        // redis-check-aof (docs/aof-checksums.md).
        Some("--check-aof") => {
            let Some(manifest) = args.get(1) else {
                eprintln!(
                    "Usage: ./ferrokv-server --check-aof <appendonlydir/appendonly.aof.manifest>"
                );
                std::process::exit(2);
            };
            match ferrokv_server::persistence::aofsum::check_manifest(std::path::Path::new(
                manifest,
            )) {
                Ok((report, ok)) => {
                    print!("{report}");
                    std::process::exit(if ok { 0 } else { 1 });
                }
                Err(e) => {
                    eprintln!("{e}");
                    std::process::exit(2);
                }
            }
        }
        _ => {}
    }
    let mut cfg = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    init_logging(&cfg);
    disable_transparent_huge_pages();
    adjust_open_files_limit(&mut cfg);
    if let Err(e) = std::fs::create_dir_all(&cfg.dir) {
        error!("Can't create the data directory {}: {e}", cfg.dir);
        std::process::exit(1);
    }
    if !cfg.pidfile.is_empty() {
        if let Err(e) = std::fs::write(&cfg.pidfile, format!("{}\n", std::process::id())) {
            error!("Failed to write PID file {}: {e}", cfg.pidfile);
        }
    }
    info!(
        "ferrokv {} starting, pid={}, Redis protocol {}",
        ferrokv_server::VERSION,
        std::process::id(),
        ferrokv_server::REDIS_COMPAT_VERSION
    );
    let mut server = Server::new(cfg);
    if let Err(e) = server.load_acl_at_startup() {
        error!("{e}");
        std::process::exit(1);
    }
    // The listeners first, then the data: while it loads, clients (and
    // Sentinel) are answered -LOADING instead of refused. A bind error
    // still stops start-up before any loading.
    let mut reactor = match Reactor::bind(server) {
        Ok(r) => r,
        Err(e) => {
            error!("{e}");
            std::process::exit(1);
        }
    };
    if reactor.srv.config.metrics_port != 0 {
        let (bind, port) = (
            reactor.srv.config.metrics_bind.clone(),
            reactor.srv.config.metrics_port,
        );
        match ferrokv_server::metrics::spawn(&bind, port) {
            Ok(m) => {
                info!("Metrics endpoint on http://{}/metrics", m.addr);
                reactor.srv.metrics = Some(m);
                reactor.srv.publish_metrics();
            }
            Err(e) => {
                error!("Could not create the metrics listening socket {bind}:{port}: {e}");
                std::process::exit(1);
            }
        }
    }
    // Before loading: a SIGTERM during the load ends it cleanly too.
    ferrokv_server::signals::install();
    if let Err(e) = reactor.srv.load_at_startup() {
        error!("Fatal error loading the DB: {e}. Exiting.");
        // (Closing the listeners removes the Unix socket's file.)
        reactor.srv.listeners.clear();
        std::process::exit(1);
    }
    if reactor.srv.shutdown_requested {
        info!("ferrokv is now ready to exit, bye bye...");
    } else {
        info!("Ready to accept connections tcp on port {}", reactor.port());
        if let Err(e) = reactor.run() {
            error!("Event loop failed: {e}");
            std::process::exit(1);
        }
    }
    if reactor
        .srv
        .listeners
        .iter()
        .any(|l| l.unix_path().is_some())
    {
        info!("Removing the unix socket file.");
    }
    // Closing the listeners removes the Unix socket's file.
    reactor.srv.listeners.clear();
    let pidfile = &reactor.srv.config.pidfile;
    if !pidfile.is_empty() {
        let _ = std::fs::remove_file(pidfile);
    }
}
