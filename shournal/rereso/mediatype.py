"""Media types (RFC 2046) of recorded files, for ReReSo data formats.

From the content through libmagic (the ``python-magic`` binding; Debian's
libmagic1) when libmagic names a specific type; from the file name's
extension when it only says "some text" or "some bytes" or when there is
no content; ``application/octet-stream`` with a notice when neither knows.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

UNKNOWN = "application/octet-stream"

# What libmagic answers when it cannot be specific: the extension, when it
# is known, says more.
_GENERIC = frozenset({"text/plain", UNKNOWN, "application/x-empty", "inode/x-empty"})

# Extensions research data commonly has that Python's built-in table lacks
# or names differently (the built-in table only: /etc/mime.types differs
# between machines, and a descriptor must not).
_EXTRA_EXTENSIONS = {
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    ".json5": "application/json5",
    ".jsonl": "application/jsonl",
    ".yml": "application/yaml",
    ".yaml": "application/yaml",
    ".h5": "application/x-hdf5",
    ".hdf5": "application/x-hdf5",
    ".onnx": "application/x-onnx",
    ".parquet": "application/vnd.apache.parquet",
    ".npy": "application/x-npy",
    ".py": "text/x-python",
    ".r": "text/x-r",
    ".md": "text/markdown",
}

# The schemas' simple-media-type: no parameters.
_SIMPLE = re.compile(r"^[!#$%&'*+.^`|~\-\w]+/[!#$%&'*+.^`|~\-\w]+$")

BY_CONTENT = "content"
BY_EXTENSION = "extension"
BY_NOTHING = "unknown"


@dataclass(frozen=True, slots=True)
class MediaType:
    value: str  # e.g. text/csv
    by: str  # BY_CONTENT, BY_EXTENSION or BY_NOTHING

    @property
    def unknown(self) -> bool:
        return self.by == BY_NOTHING


@functools.cache
def _builtin_types() -> object:
    import mimetypes

    # A private table from Python's built-in defaults only.
    return mimetypes.MimeTypes(filenames=())


def by_extension(name: str) -> str | None:
    """The media type the file name's extension implies, or None."""
    dot = name.rfind(".")
    if dot <= 0 or "/" in name[dot:]:
        return None
    ext = name[dot:].lower()
    known = _EXTRA_EXTENSIONS.get(ext)
    if known is not None:
        return known
    guessed, _enc = _builtin_types().guess_type("f" + ext, strict=False)  # type: ignore[attr-defined]
    return guessed if guessed and _SIMPLE.match(guessed) else None


def by_content(data: bytes) -> str | None:
    """libmagic's media type for ``data`` (parameters dropped), or None
    when libmagic is unusable."""
    try:
        import magic

        found = magic.from_buffer(data, mime=True)
    except Exception:  # no libmagic, or a broken magic database
        return None
    found = str(found).split(";", 1)[0].strip().lower()
    return found if _SIMPLE.match(found) else None


def detect(name: str, data: bytes | None) -> MediaType:
    """The media type of the file called ``name`` with content ``data``
    (None: content unknown)."""
    magic_type = by_content(data) if data is not None else None
    if magic_type is not None and magic_type not in _GENERIC:
        return MediaType(magic_type, BY_CONTENT)
    ext_type = by_extension(name)
    if ext_type is not None:
        return MediaType(ext_type, BY_EXTENSION)
    if magic_type is not None and magic_type != UNKNOWN and data:
        return MediaType(magic_type, BY_CONTENT)  # text/plain, nothing better
    return MediaType(UNKNOWN, BY_NOTHING)


def unknown_notice(name: str) -> str:
    """The one line said when a file's type is unknown."""
    return f"{name}: media type unknown, using {UNKNOWN}"
