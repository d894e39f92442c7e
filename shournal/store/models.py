"""The journal's schema: typed SQLAlchemy models that run unchanged on SQLite
and PostgreSQL.

Why it looks like this (narrow event rows, deduplicated reads, directories
and working directories, the indexes, how paths, modes, hashes and times
are stored): docs/design.md, "Schema notes".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from shournal.hashing import CONTENT_DIGEST_ALGORITHM as CONTENT_DIGEST_ALGORITHM
from shournal.store.reader import COMMON_MODE as COMMON_MODE
from shournal.store.reader import KIND_READ as KIND_READ
from shournal.store.reader import KIND_WRITE as KIND_WRITE
from shournal.store.reader import hash_from_bytes as hash_from_bytes
from shournal.store.reader import hash_to_bytes as hash_to_bytes
from shournal.store.reader import path_hash as path_hash
from shournal.store.reader import safe_text as safe_text

# SQLite auto-assigns ids only for a column declared exactly INTEGER PRIMARY
# KEY; elsewhere ids are 64 bit.
Id = BigInteger().with_variant(Integer(), "sqlite")

# The schema version and its history: shournal.store.migrations.

# The condition of the partial index of hashless writes; queries must spell
# it exactly so (not as a bound parameter) for either backend to use it.
HASHLESS = text("length(hash) = 0")

# The condition of the partial index of imported commands' keys.
IMPORTED = text("import_key IS NOT NULL")



class UtcDateTime(TypeDecorator[datetime]):
    """Aware datetimes in, aware UTC datetimes out.

    SQLite has no zone support, so UTC is stored as naive ISO text there;
    the fixed zone keeps lexical order equal to time order.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; the journal stores UTC only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class SafeText(TypeDecorator[str]):
    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else safe_text(value)


def stored_mode(mode: int) -> int | None:
    """How a file mode is stored: NULL for :data:`COMMON_MODE`."""
    return None if mode == COMMON_MODE else mode


class FileMode(TypeDecorator[int]):
    """A file's st_mode; the common 0o100644 is stored as NULL (see
    docs/design.md, "Schema notes"), transparently both ways."""

    impl = Integer
    cache_ok = True

    def process_bind_param(self, value: int | None, dialect: Dialect) -> int | None:
        return None if value is None else stored_mode(value)

    def process_result_value(self, value: int | None, dialect: Dialect) -> int:
        return COMMON_MODE if value is None else value


class Blob(TypeDecorator[bytes]):
    """LargeBinary without the generic bind wrapper: both supported drivers
    (sqlite3, psycopg) take ``bytes`` as is, and wrapping every value in the
    DBAPI's Binary() costs about a third of the insert time of a large
    command."""

    impl = LargeBinary
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        return None


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class SchemaVersion(Base):
    """One row (id 1): the schema version this journal was written with."""

    __tablename__ = "schema_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class Env(Base):
    __tablename__ = "env"
    __table_args__ = (UniqueConstraint("hostname", "username"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    hostname: Mapped[str] = mapped_column(SafeText)
    username: Mapped[str] = mapped_column(SafeText)


class HashSetting(Base):
    __tablename__ = "hash_setting"
    __table_args__ = (UniqueConstraint("chunk_size", "max_reads"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    chunk_size: Mapped[int] = mapped_column(Integer)
    max_reads: Mapped[int] = mapped_column(Integer)


class ShellSession(Base):
    __tablename__ = "shell_session"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    uuid: Mapped[bytes] = mapped_column(Blob(16), unique=True)


class Command(Base):
    __tablename__ = "command"
    __table_args__ = (
        Index(None, "start_time"),
        Index(None, "session_id"),
        Index(None, "cwd_id"),
        # One row per imported entry; partial, so recorded commands (NULL)
        # cost it nothing.  Queries must spell IMPORTED exactly so.
        Index(
            "ix_command_import_key",
            "import_key",
            unique=True,
            sqlite_where=IMPORTED,
            postgresql_where=IMPORTED,
        ),
        # One row per recorded command line (CommandRecord.uuid): storing
        # it again inserts nothing (shournal.store.writer).  NULLs (older
        # and imported commands) never conflict.
        Index("ix_command_uuid", "uuid", unique=True),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    text: Mapped[str] = mapped_column(SafeText)
    return_value: Mapped[int] = mapped_column(Integer)
    start_time: Mapped[datetime] = mapped_column(UtcDateTime)
    end_time: Mapped[datetime] = mapped_column(UtcDateTime)
    cwd_id: Mapped[int] = mapped_column(ForeignKey("working_dir.id"))
    session_id: Mapped[int | None] = mapped_column(ForeignKey("shell_session.id"))
    env_id: Mapped[int] = mapped_column(ForeignKey("env.id"))
    hash_setting_id: Mapped[int | None] = mapped_column(ForeignKey("hash_setting.id"))
    dropped_writes: Mapped[int] = mapped_column(Integer, default=0)
    dropped_reads: Mapped[int] = mapped_column(Integer, default=0)
    lost_events: Mapped[int] = mapped_column(Integer, default=0)
    # lost_events by reason (shournal.record.LOST_REASONS); journals of
    # schema 4 and older have 0 in all of them (reason not recorded)
    lost_overflow: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    lost_unreadable: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    lost_path: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    lost_relay: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # shournal.record.CommandRecord.incomplete
    incomplete: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # shournal.record.CommandRecord.imported_from and import_key
    imported_from: Mapped[str | None] = mapped_column(SafeText, nullable=True, default=None)
    import_key: Mapped[bytes | None] = mapped_column(Blob, nullable=True, default=None)
    # shournal.record.CommandRecord.uuid: 16 bytes (the writer checks), NULL
    # for commands of journals older than schema 11 and imported ones
    uuid: Mapped[bytes | None] = mapped_column(Blob, nullable=True, default=None)


class WorkingDir(Base):
    """A working directory of commands, as text (docs/design.md, "Schema notes")."""

    __tablename__ = "working_dir"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    path: Mapped[str] = mapped_column(SafeText, unique=True)


def _default_path_hash(context: Any) -> int:
    return path_hash(context.get_current_parameters()["path"])


class Directory(Base):
    """A directory of file events, with its trailing slash.  Found by
    ``path_hash`` (docs/design.md, "Schema notes"); the path is not indexed."""

    __tablename__ = "directory"
    __table_args__ = (Index(None, "path_hash"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    path: Mapped[bytes] = mapped_column(Blob)
    path_hash: Mapped[int] = mapped_column(BigInteger, default=_default_path_hash)


class Content(Base):
    """Archived file content (scripts), deduplicated by a full-content digest
    rather than by the partial hash, so edited scripts never merge."""

    __tablename__ = "content"
    __table_args__ = (UniqueConstraint("digest", "algorithm"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    algorithm: Mapped[str] = mapped_column(Text)
    digest: Mapped[bytes] = mapped_column(Blob)
    data: Mapped[bytes] = mapped_column(Blob)


class WriteEvent(Base):
    """One file a command wrote (closed after writing), as it was then."""

    __tablename__ = "write_event"
    __table_args__ = (
        CheckConstraint("length(hash) IN (0, 8)", name="hash_length"),
        Index(None, "hash", "size"),
        Index(None, "command_id"),
        # Writes without a hash (empty files, hashing off) by mtime: --wfile
        # of an empty file.  Partial, so it costs only those rows.
        Index(
            "ix_write_event_hashless_mtime_ns",
            "mtime_ns",
            sqlite_where=HASHLESS,
            postgresql_where=HASHLESS,
        ),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    command_id: Mapped[int] = mapped_column(ForeignKey("command.id", ondelete="CASCADE"))
    directory_id: Mapped[int] = mapped_column(ForeignKey("directory.id"))
    basename: Mapped[bytes] = mapped_column(Blob)
    size: Mapped[int] = mapped_column(BigInteger)
    mtime_ns: Mapped[int] = mapped_column(BigInteger)
    hash: Mapped[bytes] = mapped_column(Blob(8))
    mode: Mapped[int] = mapped_column(FileMode, nullable=True)


class ReadFile(Base):
    """One version of a file that commands read, stored once however many
    commands read it (see :class:`ReadEvent`).  Its id is the id users see
    for read events (JSON ``id``, ``shournal restore --file-id``)."""

    __tablename__ = "read_file"
    __table_args__ = (
        CheckConstraint("length(hash) IN (0, 8)", name="hash_length"),
        # The content index (--rfile) and the writer's lookup of known
        # versions; not unique (docs/design.md, "Schema notes").
        Index(None, "hash", "size", "mtime_ns"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    directory_id: Mapped[int] = mapped_column(ForeignKey("directory.id"))
    basename: Mapped[bytes] = mapped_column(Blob)
    size: Mapped[int] = mapped_column(BigInteger)
    mtime_ns: Mapped[int] = mapped_column(BigInteger)
    hash: Mapped[bytes] = mapped_column(Blob(8))
    mode: Mapped[int] = mapped_column(FileMode, nullable=True)
    content_id: Mapped[int | None] = mapped_column(ForeignKey("content.id"))


# The identity of a read file version (what the writer looks up before it
# inserts one; not a unique constraint, see above).
READ_FILE_KEY = ("hash", "size", "mtime_ns", "directory_id", "basename", "mode")


class ReadEvent(Base):
    """Command ``command_id`` read file version ``read_file_id``."""

    __tablename__ = "read_event"
    __table_args__ = (
        # Which commands read a file version: --rfile and the other read
        # criteria, and garbage collection of read files on delete.
        Index(None, "read_file_id", "command_id"),
        {"sqlite_with_rowid": False},
    )

    command_id: Mapped[int] = mapped_column(
        ForeignKey("command.id", ondelete="CASCADE"), primary_key=True
    )
    read_file_id: Mapped[int] = mapped_column(ForeignKey("read_file.id"), primary_key=True)


class Apparatus(Base):
    """The apparatus of a command recorded with it (`shournal run
    --apparatus`): its manifest, zlib-compressed JSON written and read by
    shournal.capture.apparatus.recording (read and written files with their
    full-content digests, environment, ids, host); the contents are in the
    archive beside the journal (shournal.store.archive)."""

    __tablename__ = "apparatus"

    command_id: Mapped[int] = mapped_column(
        ForeignKey("command.id", ondelete="CASCADE"), primary_key=True
    )
    manifest: Mapped[bytes] = mapped_column(Blob)
    # The recorded command this one was derived from (`shournal rerun`);
    # no foreign key: the origin may be deleted, the link stays as history.
    derived_from: Mapped[int | None] = mapped_column(Id, nullable=True, default=None)


# -- what users add to a command (shournal note, shournal tag) ---------------------------


class CommandNote(Base):
    """The user's note on a command (at most one): the command's description
    in the outputs and the RO-Crate and PROV exports."""

    __tablename__ = "command_note"

    command_id: Mapped[int] = mapped_column(
        ForeignKey("command.id", ondelete="CASCADE"), primary_key=True
    )
    text: Mapped[str] = mapped_column(SafeText)


class Tag(Base):
    """A tag name (shournal.data.check_tag says which names are tags)."""

    __tablename__ = "tag"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(SafeText, unique=True)


class CommandTag(Base):
    """Command ``command_id`` carries tag ``tag_id``."""

    __tablename__ = "command_tag"
    __table_args__ = (
        # the commands of a tag (query --tag), and the tag's collection on delete
        Index(None, "tag_id", "command_id"),
        {"sqlite_with_rowid": False},
    )

    command_id: Mapped[int] = mapped_column(
        ForeignKey("command.id", ondelete="CASCADE"), primary_key=True
    )
    tag_id: Mapped[int] = mapped_column(ForeignKey("tag.id"), primary_key=True)


# The tables of notes and tags, in creation order (the schema 7 -> 8 migration).
LABEL_TABLES = ("command_note", "tag", "command_tag")


class Redaction(Base):
    """How many secrets of ``kind`` (shournal.redact) were replaced by their
    markers in command ``command_id``: in its text and its archived
    scripts (on the way in, or by `shournal redact`), and in the
    environment of its apparatus manifest.  Rows with a count only."""

    __tablename__ = "redaction"
    # (the key is the row: one B-tree, no second one for the key's index)
    __table_args__ = ({"sqlite_with_rowid": False},)

    command_id: Mapped[int] = mapped_column(
        ForeignKey("command.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    count: Mapped[int] = mapped_column(Integer)


def split_path(path: bytes) -> tuple[bytes, bytes]:
    """(directory with trailing slash, basename); dir + base == path."""
    cut = path.rfind(b"/") + 1
    return path[:cut], path[cut:]
