"""Which journal: :func:`resolve_url` decides it once for everyone, so the
recorder that writes and the commands that read always agree.  Standard
library only until a config file must be parsed: every `shournal query`
and every recorded command line asks."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from shournal.config import Config

__all__ = ["URL_VARIABLE", "resolve_url"]

# The variable that overrides the configured journal (scripts, tests, direnv).
URL_VARIABLE = "SHOURNAL_DB_URL"


def resolve_url(url: str | None = None, *, config: Config | None = None) -> str | None:
    """The SQLAlchemy URL of the journal to use: ``url`` if given, else
    ``$SHOURNAL_DB_URL``, else ``[store] url`` of the config file (or of
    ``config``), else None: the SQLite file in the data directory.

    :raises shournal.store.StoreUnavailable: the config file cannot be read,
        so which journal is meant is unknown.
    """
    if url:
        return url
    from_env = os.environ.get(URL_VARIABLE)
    if from_env:
        return from_env
    if config is None:
        if _default_config_in_use():
            return None
        from shournal.config import ConfigError, load_config

        try:
            config = load_config(create=False)
        except ConfigError as exc:
            from shournal.errors import ConfigUnusable

            raise ConfigUnusable(f"cannot tell which journal to use: {exc}") from None
    return config.store.url or None


def _default_config_in_use() -> bool:
    """Whether the config file is absent or the commented default text
    shournal writes, so that no ``[store] url`` is set (load_config would
    say the same), told without importing shournal.config: its parser and
    schema cost every `shournal query` ~20 ms."""
    from shournal import _paths
    from shournal._default_config import DEFAULT_CONFIG_TEXT

    try:
        with open(_paths.config_file_text(), "rb") as f:
            raw = f.read(len(DEFAULT_CONFIG_TEXT) + 1)
    except FileNotFoundError:
        return True
    except OSError:  # load_config says what is wrong
        return False
    return raw == DEFAULT_CONFIG_TEXT.encode()
