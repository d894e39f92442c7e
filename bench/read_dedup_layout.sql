-- A journal with reads deduplicated as in the original (read_file once,
-- read_file_cmd per command); writes and everything else unchanged.
PRAGMA journal_mode=OFF;
PRAGMA synchronous=OFF;
PRAGMA cache_size=-1000000;
ATTACH '/var/tmp/shournal-bench/journal-1M.sqlite' AS src;
CREATE TABLE env AS SELECT * FROM src.env;
CREATE TABLE hash_setting AS SELECT * FROM src.hash_setting;
CREATE TABLE shell_session (id INTEGER PRIMARY KEY, uuid BLOB UNIQUE);
INSERT INTO shell_session SELECT * FROM src.shell_session;
CREATE TABLE directory (id INTEGER PRIMARY KEY, path BLOB UNIQUE);
INSERT INTO directory SELECT * FROM src.directory;
CREATE TABLE content (id INTEGER PRIMARY KEY, algorithm TEXT, digest BLOB, data BLOB, UNIQUE (digest, algorithm));
INSERT INTO content SELECT * FROM src.content;
CREATE TABLE command (id INTEGER PRIMARY KEY, text TEXT, return_value INTEGER, start_time DATETIME, end_time DATETIME, working_dir TEXT, session_id INTEGER, env_id INTEGER, hash_setting_id INTEGER, dropped_writes INTEGER, dropped_reads INTEGER, lost_events INTEGER);
CREATE INDEX ix_command_start_time ON command (start_time);
INSERT INTO command SELECT * FROM src.command ORDER BY id;
CREATE TABLE file_event (id INTEGER PRIMARY KEY, command_id INTEGER, kind SMALLINT, directory_id INTEGER, basename BLOB, size BIGINT, mtime_ns BIGINT, hash BLOB, mode INTEGER, content_id INTEGER);
CREATE INDEX ix_file_event_hash_size ON file_event (hash, size);
CREATE INDEX ix_file_event_command_id ON file_event (command_id);
INSERT INTO file_event SELECT * FROM src.file_event WHERE kind = 0 ORDER BY id;
CREATE TABLE read_file (id INTEGER PRIMARY KEY, directory_id INTEGER, basename BLOB, size BIGINT, mtime_ns BIGINT, hash BLOB, mode INTEGER, content_id INTEGER);
CREATE INDEX ix_read_file_hash_size ON read_file (hash, size);
CREATE TABLE read_file_cmd (command_id INTEGER, read_file_id INTEGER, PRIMARY KEY (command_id, read_file_id)) WITHOUT ROWID;
-- first appearance order, as a growing journal would insert them
CREATE TEMP TABLE firsts AS SELECT min(id) AS first, directory_id, basename, size, mtime_ns, hash, mode, max(content_id) AS content_id FROM src.file_event WHERE kind = 1 GROUP BY directory_id, basename, size, mtime_ns, hash, mode;
INSERT INTO read_file (directory_id, basename, size, mtime_ns, hash, mode, content_id) SELECT directory_id, basename, size, mtime_ns, hash, mode, content_id FROM firsts ORDER BY first;
CREATE TEMP TABLE lookup AS SELECT id, directory_id, basename, size, mtime_ns, hash, mode FROM read_file;
CREATE INDEX temp.ix_lookup ON lookup (hash, size, mtime_ns, directory_id, basename, mode);
INSERT OR IGNORE INTO read_file_cmd SELECT e.command_id, l.id FROM src.file_event e JOIN lookup l ON l.hash = e.hash AND l.size = e.size AND l.mtime_ns = e.mtime_ns AND l.directory_id = e.directory_id AND l.basename = e.basename AND l.mode = e.mode WHERE e.kind = 1 ORDER BY e.id;
SELECT 'read_file', count(*) FROM read_file;
SELECT 'read_file_cmd', count(*) FROM read_file_cmd;
