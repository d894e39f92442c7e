"""The setuid helper's limits and defaults, as the native side defines them
(native/shournal_protocol.h; tests/unit/test_protocol.py holds the two
equal): facts of what a recorded line can be, below both the recorder and
the settings that check a config against them."""

MAX_EXCLUDES = 64
MAX_ARCHIVE_EXT = 32
MAX_EXT_LEN = 32
HASH_CHUNK_MIN = 8
HASH_CHUNK_MAX = 40 * 1024
HASH_READS_MIN = 1
HASH_READS_MAX = 2**31 - 1
DEFAULT_HASH_CHUNK = 256
DEFAULT_HASH_READS = 3
DEFAULT_ARCHIVE_MAX = 500 * 1024
