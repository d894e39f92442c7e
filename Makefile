# shournal: `make install` (as root) sets up everything on Debian 12;
# `make test` (as root: it creates a test user and setuid copies) runs the
# whole test suite from a fresh clone.
PREFIX ?= /usr/local
PYTHON ?= /usr/bin/python3
GROUP ?= shournal
LIBEXECDIR = $(PREFIX)/libexec/shournal
LIBDIR = $(PREFIX)/lib/shournal
SHAREDIR = $(PREFIX)/share/shournal
BASHCOMPDIR = $(PREFIX)/share/bash-completion/completions
# Debian's zsh searches $(PREFIX)/share/zsh/site-functions for /usr/local
ZSHCOMPDIR = $(PREFIX)/share/zsh/site-functions
MAN1DIR = $(PREFIX)/share/man/man1
VENV = $(LIBDIR)/venv
DEVVENV = .venv
PYTEST_ARGS ?=
# Parallel test processes: most tests wait on shells, daemons and PostgreSQL,
# not on the CPU, so more workers than cores (docs/development.md).
TEST_WORKERS ?= 4
PYTEST = $(DEVVENV)/bin/python -m pytest

all: native

deps:
	sh scripts/apt-deps.sh

native:
	mkdir -p build/native
	$(MAKE) -C native BUILD=$(CURDIR)/build/native PREFIX=$(PREFIX) GROUP=$(GROUP)

# install: also bash/zsh completion and a man page per command, generated
# from the installed command tree (scripts/shell_docs.py).
install: deps native
	getent group $(GROUP) >/dev/null || groupadd --system $(GROUP)
	$(MAKE) -C native install BUILD=$(CURDIR)/build/native PREFIX=$(PREFIX) GROUP=$(GROUP) DESTDIR=$(DESTDIR)
	$(PYTHON) -m venv --clear $(DESTDIR)$(VENV)
	$(DESTDIR)$(VENV)/bin/pip install -q --no-cache-dir "$(CURDIR)[postgresql]"
	$(DESTDIR)$(VENV)/bin/python scripts/write_installed.py $(PREFIX)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SHAREDIR)
	ln -sf $(VENV)/bin/shournal $(DESTDIR)$(PREFIX)/bin/shournal
	ln -sf $(VENV)/bin/shournal-listener $(DESTDIR)$(LIBEXECDIR)/shournal-listener
	ln -sf $(VENV)/bin/shournal-daemon $(DESTDIR)$(LIBEXECDIR)/shournal-daemon
	for f in shell/shournal.bash shell/shournal.zsh; do \
	    sed -e 's|@PRELOAD_LIB@|$(LIBDIR)/libshournal_preload.so|g' -e 's|@SHELL_DIR@|$(SHAREDIR)|g' \
	        $$f > $(DESTDIR)$(SHAREDIR)/$$(basename $$f); done
	chmod 644 $(DESTDIR)$(SHAREDIR)/*
	rm -rf build/share
	$(DESTDIR)$(VENV)/bin/python scripts/shell_docs.py build/share
	install -D -m 644 build/share/bash-completion/completions/shournal $(DESTDIR)$(BASHCOMPDIR)/shournal
	install -D -m 644 build/share/zsh/vendor-completions/_shournal $(DESTDIR)$(ZSHCOMPDIR)/_shournal
	install -d $(DESTDIR)$(MAN1DIR)
	install -m 644 build/share/man/man1/*.1 $(DESTDIR)$(MAN1DIR)/
	@echo "shournal installed. Add to ~/.bashrc:  source $(SHAREDIR)/shournal.bash; SHOURNAL_ENABLE"

uninstall:
	rm -rf $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(SHAREDIR) $(DESTDIR)$(PREFIX)/bin/shournal
	rm -f $(DESTDIR)$(BASHCOMPDIR)/shournal $(DESTDIR)$(ZSHCOMPDIR)/_shournal \
	    $(DESTDIR)$(MAN1DIR)/shournal.1 $(DESTDIR)$(MAN1DIR)/shournal-*.1

dev: deps native $(DEVVENV)/.installed

# (re)installed only when pyproject.toml changed: the install is editable, and
# a reinstall meanwhile would pull the package from under a running test
$(DEVVENV)/.installed: pyproject.toml
	test -x $(DEVVENV)/bin/python || $(PYTHON) -m venv $(DEVVENV)
	$(DEVVENV)/bin/pip install -q -e ".[test]"
	touch $@

# Two passes, both always run: every test but those marked `serial` in
# parallel workers (a test file stays in one worker), then the serial ones
# alone.  Either failing fails; status 5 (PYTEST_ARGS selected none of a
# pass's tests) does not.
test: dev
	$(DEVVENV)/bin/ruff check .
	st=0; \
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile -m "not serial" --durations=30 $(PYTEST_ARGS) \
	    || st=$$?; \
	[ $$st -ne 5 ] || st=0; \
	$(PYTEST) -n 0 -m serial --durations=10 $(PYTEST_ARGS) \
	    || { s=$$?; [ $$s -eq 5 ] || st=$$s; }; \
	exit $$st

lint: dev
	$(DEVVENV)/bin/ruff check .

clean:
	rm -rf build

.PHONY: all deps native install uninstall dev test lint clean
