"""A lab for the tests: PostgreSQL in a network namespace of its own, and
two "hosts" -- two more network namespaces, each joined to the server's by
a veth pair (made with pyroute2) -- whose commands run as two different
unprivileged users.

The server listens only on the two links; pg_hba lets the members of the
lab store's users' role in over TCP with a scram-sha-256 password (from
each user's ~/.pgpass) and the superuser in over the unix socket only
(`Lab.admin`).  The lab store is made by `shournal server init` and
`shournal server add-user`, as an administrator would.  Every wait is on
a condition (links up, the server accepting connections from each host).

Register with ``pytest_plugins = ["fixtures_lab"]`` (after fixtures_shell,
whose `install` it uses).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fixtures_pg import PG_BIN, PG_SUPERUSER, _as_server_user, _run
from fixtures_shell import Install, wait_for

NETNS_DIR = Path("/var/run/netns")
DATABASE = "shournal_lab"
SHARE_ROLE = "lab"
# The lab's two links: server .1, host .2.
SUBNETS = ("10.229.1", "10.229.2")


def _netns_run(ns: str, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["nsenter", f"--net={NETNS_DIR / ns}", *argv],
        capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw,
    )  # fmt: skip


@dataclass
class LabHost:
    """One host of the lab: its network namespace, the link to the server
    and the user whose commands run there."""

    netns: str
    server_netns: str
    link: str  # the server's end of this host's veth pair
    server_ip: str
    user: pwd.struct_passwd
    home: Path
    install: Install
    # A host name of its own (a UTS namespace): several "hosts" in one
    # network namespace, such as a cluster's nodes sharing a spool_dir.
    hostname: str = ""

    def _uts(self) -> list[str]:
        if not self.hostname:
            return []
        return ["unshare", "--uts", "sh", "-c",
                'echo "$0" > /proc/sys/kernel/hostname && exec "$@"', self.hostname]

    @property
    def name(self) -> str:
        return self.user.pw_name

    @property
    def url(self) -> str:
        """The store's URL as the user configures it: no password (~/.pgpass)."""
        return f"postgresql+psycopg://{self.name}@{self.server_ip}/{DATABASE}"

    def env(self, **extra: str) -> dict[str, str]:
        env = self.install.env(self.home)
        env.update(
            USER=self.name,
            LOGNAME=self.name,
            SHOURNAL_DB_URL=self.url,
            PGPASSFILE=str(self.home / ".pgpass"),
            PGCONNECT_TIMEOUT="10",
        )
        env.update(extra)
        return env

    def run(self, *argv: str, input: str | None = None, cwd: Path | None = None,
            **env: str) -> subprocess.CompletedProcess[str]:
        """`argv` on this host as its user, the environment cleared."""
        return _netns_run(
            self.netns,
            [*self._uts(), "runuser", "-u", self.name, "--", "env", "-i",
             *[f"{k}={v}" for k, v in self.env(**env).items()], *argv],
            input=input, cwd=cwd or self.home / "work",
        )  # fmt: skip

    def shournal(self, *argv: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.install.cli), *argv, **kw)

    def psql(self, sql: str) -> subprocess.CompletedProcess[str]:
        """`sql` through psql as this host's user, over TCP with its password."""
        return self.run(
            "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
            "-h", self.server_ip, "-U", self.name, "-d", DATABASE, "-c", sql,
        )  # fmt: skip

    def link_up(self) -> bool:
        from pyroute2 import NetNS

        with NetNS(self.server_netns) as ns:
            (idx,) = ns.link_lookup(ifname=self.link)
            return ns.get_links(idx)[0].get("IFLA_OPERSTATE") == "UP"

    def set_link(self, up: bool) -> None:
        """Cut (`up` false) or restore this host's link to the server: its
        veth pair, both ends (the host sees its carrier go)."""
        from pyroute2 import NetNS

        with NetNS(self.server_netns) as ns:
            (idx,) = ns.link_lookup(ifname=self.link)
            ns.link("set", index=idx, state="up" if up else "down")
        wait_for(lambda: self.link_up() == up, f"the link to {self.netns} {'up' if up else 'down'}")

    def shell(self, **env: str) -> Any:
        """A real interactive bash of this host's user on a pty, in this
        host's network namespace, recording through the setuid helper and
        the store daemon into the lab store."""
        from fixtures_shell import Shell

        return Shell("bash", self.install, self.home, extra_env=self.env(**env),
                     user=self.user,
                     wrap=["nsenter", f"--net={NETNS_DIR / self.netns}", *self._uts()])

    def accepts(self) -> bool:
        """The server answers this host."""
        res = _netns_run(
            self.netns, [str(PG_BIN / "pg_isready"), "-q", "-h", self.server_ip, "-t", "2"]
        )
        return res.returncode == 0


@dataclass
class Lab:
    admin_socket: Path
    hosts: tuple[LabHost, LabHost]
    # the certificate of the CA that signed the server's (TLS is on; the
    # users' ~/ca.crt is a copy)
    ca_cert: Path
    server_netns: str = ""
    data: Path | None = None  # the server's data directory
    server_options: str = ""

    def _pg_ctl(self, *argv: str) -> None:
        assert self.data is not None
        res = _netns_run(self.server_netns, _as_server_user(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), *argv]))  # fmt: skip
        if res.returncode != 0:
            raise RuntimeError(f"pg_ctl {argv} failed: {res.stdout}{res.stderr}")

    def stop_server(self) -> None:
        """A fast shutdown (sessions ended, as an administrator's restart)."""
        self._pg_ctl("-m", "fast", "-w", "stop")

    def start_server(self) -> None:
        assert self.data is not None
        self._pg_ctl("-l", str(self.data.parent / "server.log"), "-o", self.server_options,
                     "-w", "start")
        for h in self.hosts:
            wait_for(h.accepts, f"the server accepting connections from {h.netns}", 60)

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://{PG_SUPERUSER}@/{DATABASE}?host={self.admin_socket}"

    def admin(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """`sql` as the superuser (who bypasses row-level security)."""
        import psycopg

        with psycopg.connect(
            host=str(self.admin_socket), user=PG_SUPERUSER, dbname=DATABASE, autocommit=True
        ) as conn:
            cur = conn.execute(sql, params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def clear(self) -> None:
        """Every recorded row and every share gone (between tests)."""
        from shournal.store.lab import SHARE_TABLE, data_tables

        tables = ", ".join([*data_tables(), SHARE_TABLE])
        self.admin(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")


def make_ca(where: Path, name: str) -> tuple[Path, Path]:
    """A certificate authority made with openssl: (certificate, key)."""
    cert, key = where / f"{name}.crt", where / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def _server_certificate(where: Path, ca: tuple[Path, Path], ips: list[str]) -> tuple[Path, Path]:
    """The server's certificate, signed by `ca`, naming the addresses the
    hosts reach it at (what sslmode=verify-full checks)."""
    cert, key, csr = where / "server.crt", where / "server.key", where / "server.csr"
    subprocess.run(
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=db.lab.test",
         "-keyout", str(key), "-out", str(csr)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    ext = where / "san.ext"
    ext.write_text("subjectAltName=" + ",".join(f"IP:{ip}" for ip in ips) + "\n")
    subprocess.run(
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
         "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def _make_home(user: pwd.struct_passwd, server_ips: list[str], password: str) -> Path:
    home = Path(tempfile.mkdtemp(prefix="shournal-lab-", dir="/var/tmp"))
    for sub in ("run", "work"):
        (home / sub).mkdir()
    pgpass = home / ".pgpass"
    pgpass.write_text(
        "".join(f"{ip}:5432:{DATABASE}:{user.pw_name}:{password}\n" for ip in server_ips)
    )
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(home)], check=True)
    home.chmod(0o755)
    (home / "run").chmod(0o700)
    pgpass.chmod(0o600)
    return home


def _link_pair(server_ns: str, host_ns: str, server_if: str, subnet: str) -> None:
    """A veth pair from the server's namespace to a host's, addressed
    SUBNET.1 (server) and SUBNET.2 (host), both ends and lo up."""
    from pyroute2 import NetNS

    with NetNS(server_ns) as ns:
        ns.link("add", ifname=server_if, kind="veth", peer={"ifname": "eth0", "net_ns_fd": host_ns})
        (idx,) = ns.link_lookup(ifname=server_if)
        ns.addr("add", index=idx, address=f"{subnet}.1", prefixlen=24)
        ns.link("set", index=idx, state="up")
    with NetNS(host_ns) as ns:
        (idx,) = ns.link_lookup(ifname="eth0")
        ns.addr("add", index=idx, address=f"{subnet}.2", prefixlen=24)
        ns.link("set", index=idx, state="up")


def _lo_up(name: str) -> None:
    from pyroute2 import NetNS

    with NetNS(name) as ns:
        (lo,) = ns.link_lookup(ifname="lo")
        ns.link("set", index=lo, state="up")


@pytest.fixture(scope="session")
def lab(install: Install) -> Iterator[Lab]:
    """The lab: server, two hosts, the lab store initialised, both test
    users added (with passwords) and members of role `lab`."""
    try:
        from pyroute2 import netns
    except ImportError:
        pytest.skip("pyroute2 is not installed")
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN}")
    if shutil.which("psql") is None or shutil.which("nsenter") is None:
        pytest.skip("psql and nsenter are needed")
    tag = f"shl{os.getpid()}"
    server_ns, host_ns = f"{tag}-srv", (f"{tag}-h1", f"{tag}-h2")
    users = (install.user, install.other)
    passwords = tuple(secrets.token_urlsafe(16) for _ in users)
    base = Path(tempfile.mkdtemp(prefix="shj-lab-", dir="/tmp"))
    data, log = base / "data", base / "server.log"
    created: list[str] = []
    homes: list[Path] = []
    started = False
    try:
        for name in (server_ns, *host_ns):
            netns.create(name)
            created.append(name)
            _lo_up(name)
        links = ("h1", "h2")
        for host, link, subnet in zip(host_ns, links, SUBNETS, strict=True):
            _link_pair(server_ns, host, link, subnet)
        hosts = tuple(
            LabHost(h, server_ns, link, f"{subnet}.1", user,
                    _make_home(user, [f"{s}.1" for s in SUBNETS], pw), install)
            for h, link, subnet, user, pw in zip(host_ns, links, SUBNETS, users, passwords,
                                                  strict=True)
        )  # fmt: skip
        homes.extend(h.home for h in hosts)
        for h in hosts:
            wait_for(h.link_up, f"the link to {h.netns}")

        owner = pwd.getpwnam("nobody")
        os.chown(base, owner.pw_uid, owner.pw_gid)
        tls = base / "tls"
        tls.mkdir()
        ca = make_ca(tls, "lab-ca")
        server_cert, server_key = _server_certificate(tls, ca, [f"{s}.1" for s in SUBNETS])
        os.chown(server_key, owner.pw_uid, owner.pw_gid)
        server_key.chmod(0o600)
        for h in hosts:
            shutil.copyfile(ca[0], h.home / "ca.crt")
            os.chown(h.home / "ca.crt", h.user.pw_uid, h.user.pw_gid)
        _run([str(PG_BIN / "initdb"), "-D", str(data), "-U", PG_SUPERUSER, "--auth-local=trust",
              "--auth-host=reject", "--encoding=UTF8", "--no-sync"])  # fmt: skip
        # The superuser only through the socket; the users only over TCP,
        # only as members of the users' role, only with their password.
        (data / "pg_hba.conf").write_text(
            f"local all {PG_SUPERUSER} trust\n"
            + "".join(
                f"host {DATABASE} +shournal_users {s}.0/24 scram-sha-256\n" for s in SUBNETS
            )
        )
        listen = ",".join(f"{s}.1" for s in SUBNETS)
        options = (
            f"-c listen_addresses='{listen}' -c unix_socket_directories='{base}' "
            "-c password_encryption=scram-sha-256 "
            f"-c ssl=on -c ssl_cert_file='{server_cert}' -c ssl_key_file='{server_key}' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        res = _netns_run(server_ns, _as_server_user(
            [str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w",
             "start"]))  # fmt: skip
        if res.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {res.stdout}{res.stderr}\n"
                               f"{log.read_text(errors='replace')[-2000:]}")
        started = True
        lab = Lab(base, hosts, ca[0], server_ns, data, options)  # type: ignore[arg-type]
        lab_admin_db(base)
        admin = [str(install.cli), "server"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOURNAL_")}
        for argv, stdin in [
            ([*admin, "init", lab.admin_url], None),
            *[([*admin, "add-user", lab.admin_url, h.name, "--password-stdin"], pw + "\n")
              for h, pw in zip(hosts, passwords, strict=True)],
        ]:  # fmt: skip
            done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env,
                                  timeout=120)  # fmt: skip
            assert done.returncode == 0, done.stderr
        lab.admin(f'CREATE ROLE "{SHARE_ROLE}" NOLOGIN')
        lab.admin(f'GRANT "{SHARE_ROLE}" TO "{hosts[0].name}", "{hosts[1].name}"')
        for h in hosts:
            wait_for(h.accepts, f"the server accepting connections from {h.netns}", 60)
        yield lab
    finally:
        if started:
            subprocess.run(
                _as_server_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate",
                                 "-w", "stop"]),
                capture_output=True, check=False, timeout=60,
            )  # fmt: skip
        for name in created:
            netns.remove(name)  # its links go with it
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)


def lab_admin_db(socket_dir: Path) -> None:
    import psycopg

    with psycopg.connect(
        host=str(socket_dir), user=PG_SUPERUSER, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f"CREATE DATABASE {DATABASE}")  # type: ignore[arg-type]


@pytest.fixture
def lab_clean(lab: Lab) -> Iterator[Lab]:
    """The lab with an empty store."""
    lab.clear()
    yield lab
