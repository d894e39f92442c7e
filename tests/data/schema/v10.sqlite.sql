-- shournal journal schema 10 (models at 245ee57) on sqlite

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
	path_hash BIGINT NOT NULL,
	CONSTRAINT pk_directory PRIMARY KEY (id)
);

CREATE INDEX ix_directory_path_hash ON directory (path_hash);

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

CREATE TABLE tag (
	id INTEGER NOT NULL,
	name TEXT NOT NULL,
	CONSTRAINT pk_tag PRIMARY KEY (id),
	CONSTRAINT uq_tag_name UNIQUE (name)
);

CREATE TABLE working_dir (
	id INTEGER NOT NULL,
	path TEXT NOT NULL,
	CONSTRAINT pk_working_dir PRIMARY KEY (id),
	CONSTRAINT uq_working_dir_path UNIQUE (path)
);

CREATE TABLE command (
	id INTEGER NOT NULL,
	text TEXT NOT NULL,
	return_value INTEGER NOT NULL,
	start_time DATETIME NOT NULL,
	end_time DATETIME NOT NULL,
	cwd_id INTEGER NOT NULL,
	session_id INTEGER,
	env_id INTEGER NOT NULL,
	hash_setting_id INTEGER,
	dropped_writes INTEGER NOT NULL,
	dropped_reads INTEGER NOT NULL,
	lost_events INTEGER NOT NULL,
	lost_overflow INTEGER DEFAULT '0' NOT NULL,
	lost_unreadable INTEGER DEFAULT '0' NOT NULL,
	lost_path INTEGER DEFAULT '0' NOT NULL,
	lost_relay INTEGER DEFAULT '0' NOT NULL,
	incomplete BOOLEAN DEFAULT 0 NOT NULL,
	imported_from TEXT,
	import_key BLOB,
	CONSTRAINT pk_command PRIMARY KEY (id),
	CONSTRAINT fk_command_cwd_id_working_dir FOREIGN KEY(cwd_id) REFERENCES working_dir (id),
	CONSTRAINT fk_command_session_id_shell_session FOREIGN KEY(session_id) REFERENCES shell_session (id),
	CONSTRAINT fk_command_env_id_env FOREIGN KEY(env_id) REFERENCES env (id),
	CONSTRAINT fk_command_hash_setting_id_hash_setting FOREIGN KEY(hash_setting_id) REFERENCES hash_setting (id)
);

CREATE INDEX ix_command_cwd_id ON command (cwd_id);

CREATE UNIQUE INDEX ix_command_import_key ON command (import_key) WHERE import_key IS NOT NULL;

CREATE INDEX ix_command_session_id ON command (session_id);

CREATE INDEX ix_command_start_time ON command (start_time);

CREATE TABLE read_file (
	id INTEGER NOT NULL,
	directory_id INTEGER NOT NULL,
	basename BLOB NOT NULL,
	size BIGINT NOT NULL,
	mtime_ns BIGINT NOT NULL,
	hash BLOB NOT NULL,
	mode INTEGER,
	content_id INTEGER,
	CONSTRAINT pk_read_file PRIMARY KEY (id),
	CONSTRAINT ck_read_file_hash_length CHECK (length(hash) IN (0, 8)),
	CONSTRAINT fk_read_file_directory_id_directory FOREIGN KEY(directory_id) REFERENCES directory (id),
	CONSTRAINT fk_read_file_content_id_content FOREIGN KEY(content_id) REFERENCES content (id)
);

CREATE INDEX ix_read_file_hash_size_mtime_ns ON read_file (hash, size, mtime_ns);

CREATE TABLE apparatus (
	command_id INTEGER NOT NULL,
	manifest BLOB NOT NULL,
	derived_from INTEGER,
	CONSTRAINT pk_apparatus PRIMARY KEY (command_id),
	CONSTRAINT fk_apparatus_command_id_command FOREIGN KEY(command_id) REFERENCES command (id) ON DELETE CASCADE
);

CREATE TABLE command_note (
	command_id INTEGER NOT NULL,
	text TEXT NOT NULL,
	CONSTRAINT pk_command_note PRIMARY KEY (command_id),
	CONSTRAINT fk_command_note_command_id_command FOREIGN KEY(command_id) REFERENCES command (id) ON DELETE CASCADE
);

CREATE TABLE command_tag (
	command_id INTEGER NOT NULL,
	tag_id INTEGER NOT NULL,
	CONSTRAINT pk_command_tag PRIMARY KEY (command_id, tag_id),
	CONSTRAINT fk_command_tag_command_id_command FOREIGN KEY(command_id) REFERENCES command (id) ON DELETE CASCADE,
	CONSTRAINT fk_command_tag_tag_id_tag FOREIGN KEY(tag_id) REFERENCES tag (id)
)
 WITHOUT ROWID;

CREATE INDEX ix_command_tag_tag_id_command_id ON command_tag (tag_id, command_id);

CREATE TABLE read_event (
	command_id INTEGER NOT NULL,
	read_file_id INTEGER NOT NULL,
	CONSTRAINT pk_read_event PRIMARY KEY (command_id, read_file_id),
	CONSTRAINT fk_read_event_command_id_command FOREIGN KEY(command_id) REFERENCES command (id) ON DELETE CASCADE,
	CONSTRAINT fk_read_event_read_file_id_read_file FOREIGN KEY(read_file_id) REFERENCES read_file (id)
)
 WITHOUT ROWID;

CREATE INDEX ix_read_event_read_file_id_command_id ON read_event (read_file_id, command_id);

CREATE TABLE redaction (
	command_id INTEGER NOT NULL,
	kind TEXT NOT NULL,
	count INTEGER NOT NULL,
	CONSTRAINT pk_redaction PRIMARY KEY (command_id, kind),
	CONSTRAINT fk_redaction_command_id_command FOREIGN KEY(command_id) REFERENCES command (id) ON DELETE CASCADE
)
 WITHOUT ROWID;

CREATE TABLE write_event (
	id INTEGER NOT NULL,
	command_id INTEGER NOT NULL,
	directory_id INTEGER NOT NULL,
	basename BLOB NOT NULL,
	size BIGINT NOT NULL,
	mtime_ns BIGINT NOT NULL,
	hash BLOB NOT NULL,
	mode INTEGER,
	CONSTRAINT pk_write_event PRIMARY KEY (id),
	CONSTRAINT ck_write_event_hash_length CHECK (length(hash) IN (0, 8)),
	CONSTRAINT fk_write_event_command_id_command FOREIGN KEY(command_id) REFERENCES command (id) ON DELETE CASCADE,
	CONSTRAINT fk_write_event_directory_id_directory FOREIGN KEY(directory_id) REFERENCES directory (id)
);

CREATE INDEX ix_write_event_command_id ON write_event (command_id);

CREATE INDEX ix_write_event_hash_size ON write_event (hash, size);

CREATE INDEX ix_write_event_hashless_mtime_ns ON write_event (mtime_ns) WHERE length(hash) = 0;

