-- shournal journal schema 1 (models at 08c8489) on sqlite

CREATE TABLE content (
	id INTEGER NOT NULL,
	algorithm TEXT NOT NULL,
	digest BLOB NOT NULL,
	data BLOB NOT NULL,
	CONSTRAINT pk_content PRIMARY KEY (id),
	CONSTRAINT uq_content_digest_algorithm UNIQUE (digest, algorithm)
);

CREATE TABLE directory (
	id INTEGER NOT NULL,
	path BLOB NOT NULL,
	CONSTRAINT pk_directory PRIMARY KEY (id),
	CONSTRAINT uq_directory_path UNIQUE (path)
);

CREATE TABLE env (
	id INTEGER NOT NULL,
	hostname TEXT NOT NULL,
	username TEXT NOT NULL,
	CONSTRAINT pk_env PRIMARY KEY (id),
	CONSTRAINT uq_env_hostname_username UNIQUE (hostname, username)
);

CREATE TABLE hash_setting (
	id INTEGER NOT NULL,
	chunk_size INTEGER NOT NULL,
	max_reads INTEGER NOT NULL,
	CONSTRAINT pk_hash_setting PRIMARY KEY (id),
	CONSTRAINT uq_hash_setting_chunk_size_max_reads UNIQUE (chunk_size, max_reads)
);

CREATE TABLE schema_version (
	id INTEGER NOT NULL,
	version INTEGER NOT NULL,
	CONSTRAINT pk_schema_version PRIMARY KEY (id)
);

CREATE TABLE shell_session (
	id INTEGER NOT NULL,
	uuid BLOB NOT NULL,
	CONSTRAINT pk_shell_session PRIMARY KEY (id),
	CONSTRAINT uq_shell_session_uuid UNIQUE (uuid)
);

CREATE TABLE command (
	id INTEGER NOT NULL,
	text TEXT NOT NULL,
	return_value INTEGER NOT NULL,
	start_time DATETIME NOT NULL,
	end_time DATETIME NOT NULL,
	working_dir TEXT NOT NULL,
	session_id INTEGER,
	env_id INTEGER NOT NULL,
	hash_setting_id INTEGER,
	dropped_writes INTEGER NOT NULL,
	dropped_reads INTEGER NOT NULL,
	lost_events INTEGER NOT NULL,
	CONSTRAINT pk_command PRIMARY KEY (id),
	CONSTRAINT fk_command_session_id_shell_session FOREIGN KEY(session_id) REFERENCES shell_session (id),
	CONSTRAINT fk_command_env_id_env FOREIGN KEY(env_id) REFERENCES env (id),
	CONSTRAINT fk_command_hash_setting_id_hash_setting FOREIGN KEY(hash_setting_id) REFERENCES hash_setting (id)
);

CREATE INDEX ix_command_start_time ON command (start_time);

CREATE TABLE file_event (
	id INTEGER NOT NULL,
	command_id INTEGER NOT NULL,
	kind SMALLINT NOT NULL,
	directory_id INTEGER NOT NULL,
	basename BLOB NOT NULL,
	size BIGINT NOT NULL,
	mtime_ns BIGINT NOT NULL,
	hash BLOB NOT NULL,
	mode INTEGER NOT NULL,
	content_id INTEGER,
	CONSTRAINT pk_file_event PRIMARY KEY (id),
	CONSTRAINT ck_file_event_kind CHECK (kind IN (0, 1)),
	CONSTRAINT ck_file_event_hash_length CHECK (length(hash) IN (0, 8)),
	CONSTRAINT fk_file_event_command_id_command FOREIGN KEY(command_id) REFERENCES command (id) ON DELETE CASCADE,
	CONSTRAINT fk_file_event_directory_id_directory FOREIGN KEY(directory_id) REFERENCES directory (id),
	CONSTRAINT fk_file_event_content_id_content FOREIGN KEY(content_id) REFERENCES content (id)
);

CREATE INDEX ix_file_event_command_id ON file_event (command_id);

CREATE INDEX ix_file_event_hash ON file_event (hash);

