"""The config file shournal writes on first use (every setting commented
out, showing its default): :data:`shournal.config.DEFAULT_CONFIG_TEXT`.
Apart from :mod:`shournal.config` so that `shournal query` can tell the
untouched default file (no ``[store] url``: the default journal) without
importing the config parser and its schema (~20 ms).
"""

DEFAULT_CONFIG_TEXT = """\
# shournal configuration (TOML).
#
# Every setting below is commented out and shows its default; uncomment a
# line and edit it to change the setting.  Unknown sections and keys are
# errors.  Paths must be absolute and may start with $HOME or ~; a path
# covers everything below it, "/" covers everything.  exclude_hidden skips
# files whose path contains a component starting with "." unless they lie
# below an explicitly included hidden path.

[write_events]
# Directories whose written files are recorded.
# include_paths = ["/"]
# Directories whose written files are not recorded.
# exclude_paths = []
# Skip hidden files and everything below hidden directories.
# exclude_hidden = true
# Most written files recorded per command (0 = unlimited); the rest are counted.
# max_event_count = 5000

[read_events]
# Record files a command read or executed.
# enable = true
# Record only read files you may also write (others are rarely of interest).
# only_writable = true
# Directories whose read files are recorded.
# include_paths = ["$HOME"]
# Directories whose read files are not recorded.
# exclude_paths = []
# Skip hidden files and everything below hidden directories.
# exclude_hidden = true
# Most read files recorded per command (0 = unlimited); the rest are counted.
# max_event_count = 5000

[script_archive]
# Store the content of read scripts in the database.
# enable = true
# Archive only files you may also write.
# only_writable = true
# Largest file archived: a byte count or a size such as "500KiB", "2M" (base 1024).
# max_size = "500KiB"
# Most files archived per command (the first ones read).
# max_count_of_files = 3
# Directories whose read files may be archived.
# include_paths = ["/"]
# Directories whose read files are never archived.
# exclude_paths = []
# Never archive hidden files or files below hidden directories.
# exclude_hidden = true
# Extensions (no dot, case-sensitive) of archived files; [] archives any file.
# include_file_extensions = ["sh", "bash", "zsh", "py", "R", "r", "pl", "awk", "sed", "jl", "m", "ipynb", "smk", "nf", "yaml", "yml", "toml", "json", "ini", "cfg"]
# Whole file names (without a dot) archived too, for files without an extension.
# include_file_names = ["Makefile", "Snakefile"]

[ignore_commands]
# Commands not recorded: "cmd arg ..." exactly, "cmd*" with any arguments.
# A rule drops only a line that is that one command: a line that also runs
# or redirects anything else (;, &&, |, >, $(...)) is recorded in full.
# Built in, on top of this list: "mount*", "shournal*", "shournal-run*".
# commands = []

[mounts]
# Mount points whose files are never recorded, on top of the built-in ones.
# exclude_paths = []

[hash]
# Store a partial XXH64 hash per file, to find files by content later.
# enable = true
# Bytes per sampled chunk (8 to 40960); change only with a fresh database.
# chunk_size = 256
# Chunks sampled per file (at least 1); change only with a fresh database.
# max_count_of_reads = 3

[store]
# Database URL such as "postgresql://host/db"; empty: SQLite in the data directory.
# url = ""
# Seconds the store daemon stays without a command line before it exits.
# daemon_idle_seconds = 600
# A lab store on PostgreSQL (docs/lab.md): roles whose members may read (never
# change) your commands, e.g. ["lab"]; [] shares nothing.
# share_with = []
# A folder on shared storage, for hosts that never reach a lab server (cluster
# compute nodes): each host spools to <spool_dir>/<host>/ and any host of yours
# that reaches the server pushes them all (docs/lab.md). Empty: the data directory.
# spool_dir = ""

[apparatus]
# Largest file whose content a record with its apparatus archives.
# max_file_size = "64MiB"
# Most new archive bytes per command; what does not fit is counted, not archived.
# max_command_size = "1GiB"
# Archive the content of written files too (not only their digests).
# archive_outputs = false
# Environment variables whose values are replaced by [REDACTED:secret-name]
# (name patterns; PWD and OLDPWD never are; the secrets [redact] finds in
# the other values always are).
# secret_env_names = ["*TOKEN*", "*SECRET*", "*PASS*", "*PWD*", "*CREDENTIAL*", "*AUTH*", "*COOKIE*", "*_KEY", "*APIKEY*", "*PRIVATE_KEY*"]
# Shell command lines run in these directories (or below) are recorded with
# their apparatus, as after `shournal apparatus on` (e.g. ["~/projects/paper2"]).
# paths = []

[redact]
# Your own secret patterns, redacted in command lines, archived scripts and
# recorded environments on top of the built-in ones (tokens and keys of AWS,
# GitHub, GitLab, Slack, Stripe, npm, private keys, JWTs, password
# arguments, URL passwords).  Each: a name (the kind in the marker
# [REDACTED:name]) and a Python regex; a group named "secret" limits what is
# replaced.  `shournal redact` applies new patterns to what is stored.  E.g.
# [{name = "acme-key", regex = "acme_[0-9a-f]{32}"}].
# patterns = []
"""  # noqa: E501 (one TOML line per setting: the test uncomments them)
