"""The tool's container: an Apptainer/Singularity image (SIF) holding the
apparatus of the recorded runs, built without Apptainer, and the sandbox
``shournal recombine`` runs it in.

The image's root file system is made of

* every regular file the recorded runs read (programs, libraries,
  interpreter modules, the tool's scripts and configs), at its recorded
  path, with the content the run read, from the apparatus archive
  (``shournal run --apparatus``): the union over the runs, except the
  files their command lines named (the benchmark inputs and outputs) and
  ``/proc``, ``/sys``, ``/dev``;
* for a Python module whose cached bytecode a run read without reading
  its source, the bytecode as a sourceless ``NAME.pyc`` beside it;
* the subdirectories (empty unless they hold files of the image) of every
  directory that holds a file of the image: what a run only looked at
  (``os.path.exists``, a directory walk) is not recorded, only what it
  read, and code such as Python's ``*-nspkg.pth`` files asks whether a
  directory exists;
* the symbolic links that lead to those files on this host (``/lib64``,
  ``libz.so.1 -> libz.so.1.2.13``, ``/usr/bin/python3 -> python3.11``, the
  ELF interpreter a program names), so that they are found as they were;
* ``/bin/sh`` and its libraries, taken from this host when the runs did
  not read them (the wrapper ``rereso-run`` and the runscript are shell
  scripts), and Python's landmark ``lib/pythonX.Y/os.py`` (checked for,
  never read); these are listed in ``/opt/rereso/host-files``;
* the launcher of the tool in :data:`LAUNCHER_DIR` (so that a command's
  name is its invocation), the wrapper at :data:`RUNNER_IN_CONTAINER`,
  Apptainer's ``/.singularity.d`` (runscript and actions), and the empty
  directories :data:`IN_DIR` and :data:`OUT_DIR`, where the sandbox binds
  the benchmark and the output directory.

It is packed as squashfs (``mksquashfs`` from squashfs-tools: root-owned,
timestamps 0, no xattrs) and wrapped in SIF with ``siftool`` as the
primary system partition, with the definition file as its deffile.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import stat
import struct
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from shournal.confined import Confined, ConfinedError, UnsafePath, mirror
from shournal.store.archive import ArchiveError, Contents

# The wrapper every tool bundle carries: `rereso-run N FILE...` runs the
# tool's command N (1 = first in rereso-tool.yml) with FILE... in place of
# its placeholders.  The container's %runscript calls it (`apptainer run
# IMAGE N FILE...`); recombine runs a command's name instead.
RUNNER = "rereso-run"
RUNNER_IN_CONTAINER = "/opt/rereso/rereso-run"
# Where the sandbox (and users of the image) put the benchmark and outputs.
IN_DIR = "/rereso/in"
OUT_DIR = "/rereso/out"
HOST_FILES = "/opt/rereso/host-files"
# Where the launchers that make a command's name its invocation go (first
# on the image's PATH).
LAUNCHER_DIR = "/usr/local/bin"
_SPECIAL = ("/proc/", "/sys/", "/dev/")
# siftool's codes (siftool add --help).
_DATATYPE_DEFFILE = "1"
_DATATYPE_PARTITION = "4"
_PART_PRIMSYS = "2"  # the partition Apptainer runs
_FS_SQUASH = "1"
_ARCH = {"x86_64": "2", "i686": "1", "i386": "1", "armv7l": "3", "aarch64": "4",
         "ppc64": "5", "ppc64le": "6", "s390x": "11", "riscv64": "12"}
MKSQUASHFS_OPTIONS = ("-noappend", "-all-root", "-no-xattrs", "-mkfs-time", "0",
                      "-all-time", "0", "-quiet", "-no-progress")
_PATH = "/usr/local/bin:/usr/bin:/bin"
_PYC = re.compile(r"^(?P<dir>/.*)/__pycache__/(?P<name>[^/.]+)\.[^/.]+\.pyc$")
_PYTHON = re.compile(r"^(?P<prefix>/.*)/bin/python(?P<version>[0-9]+\.[0-9]+)$")


class ImageError(Exception):
    """The image cannot be built or opened (one line)."""


@dataclass(slots=True)
class Rootfs:
    """What goes into the image: path -> archive digest and mode, symlinks,
    and files from this host."""

    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    host: dict[str, int] = field(default_factory=dict)  # path -> mode
    dirs: set[str] = field(default_factory=set)  # empty directories

    def has(self, path: str) -> bool:
        return path in self.files or path in self.host


def want(path: str, mode: int) -> bool:
    """Whether a read file belongs in the image (a canonical absolute path:
    the manifest's paths become paths below the image's root)."""
    canonical = path.startswith("/") and os.path.normpath(path) == path and "\0" not in path
    return canonical and stat.S_ISREG(mode) and not path.startswith(_SPECIAL)


def _link_chain(path: str, links: dict[str, str], depth: int = 0) -> str:
    """The real path of ``path`` on this host, recording into ``links``
    every symbolic link met on the way."""
    if depth > 40:
        return path
    cur = "/"
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        nxt = os.path.join(cur, part)
        if os.path.islink(nxt):
            target = os.readlink(nxt)
            links[nxt] = target
            resolved = os.path.normpath(os.path.join(cur, target))
            rest = "/".join(parts[i + 1:])
            return _link_chain(os.path.join(resolved, rest) if rest else resolved, links,
                               depth + 1)
        cur = nxt
    return cur


def _add_chain(root: Rootfs, path: str) -> str:
    """Add the links leading to ``path`` when it ends at a file of the
    image; the real path."""
    found: dict[str, str] = {}
    real = _link_chain(path, found)
    if root.has(real):
        root.links.update(found)
    return real


def elf_interpreter(data: bytes) -> str | None:
    """The PT_INTERP path of a 64- or 32-bit little-endian ELF file."""
    if len(data) < 52 or data[:4] != b"\x7fELF" or data[5] != 1:
        return None
    wide = data[4] == 2
    try:
        if wide:
            phoff, = struct.unpack_from("<Q", data, 32)
            phentsize, phnum = struct.unpack_from("<HH", data, 54)
        else:
            phoff, = struct.unpack_from("<I", data, 28)
            phentsize, phnum = struct.unpack_from("<HH", data, 42)
        for i in range(phnum):
            off = phoff + i * phentsize
            if struct.unpack_from("<I", data, off)[0] != 3:  # PT_INTERP
                continue
            if wide:
                p_offset, = struct.unpack_from("<Q", data, off + 8)
                p_filesz, = struct.unpack_from("<Q", data, off + 32)
            else:
                p_offset, = struct.unpack_from("<I", data, off + 4)
                p_filesz, = struct.unpack_from("<I", data, off + 16)
            return data[p_offset:p_offset + p_filesz].rstrip(b"\0").decode()
    except (struct.error, UnicodeDecodeError, OverflowError):
        return None
    return None


def _host_libraries(program: str) -> list[str]:
    """The shared libraries (and ELF interpreter) ``program`` loads here."""
    try:
        out = subprocess.run(["ldd", program], capture_output=True, text=True, check=False,
                             stdin=subprocess.DEVNULL).stdout
    except OSError:
        return []
    libs = []
    for line in out.splitlines():
        words = line.split()
        if "=>" in words and len(words) > words.index("=>") + 1:
            cand = words[words.index("=>") + 1]
        elif words and words[0].startswith("/"):
            cand = words[0]
        else:
            continue
        if cand.startswith("/"):
            libs.append(cand)
    return libs


def complete(root: Rootfs, archive: Contents, programs: Iterable[str]) -> list[str]:
    """Add the links and the shell the image needs (see the module's
    doc); ``programs``: the names the wrapper runs (``python3``, an
    absolute path).  The paths taken from this host."""
    for path in list(root.files):
        digest, mode = root.files[path]
        if mode & 0o111:
            head = archive.get(digest)[:1 << 16]
            interp = elf_interpreter(head) if head[:4] == b"\x7fELF" else None
            if interp is None and head[:4] == b"\x7fELF":
                interp = elf_interpreter(archive.get(digest))
            if interp:
                _add_chain(root, interp)
    dirs = {os.path.dirname(p) for p in root.files}
    for d in sorted(dirs):
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                _add_chain(root, entry.path)
            elif entry.is_dir(follow_symlinks=False):
                root.dirs.add(entry.path)
    for prog in programs:
        if "/" in prog:
            _add_chain(root, prog)
            continue
        for d in _PATH.split(":"):
            cand = os.path.join(d, prog)
            if os.path.lexists(cand) and root.has(_add_chain(root, cand)):
                break
    # Python read a module's cached bytecode and only checked its source
    # for changes: the bytecode goes beside the (absent) source too, where
    # Python imports it without a source (sourceless .pyc).
    for path, entry in list(root.files.items()):
        m = _PYC.match(path)
        if m and not root.has(f"{m['dir']}/{m['name']}.py"):
            root.files.setdefault(f"{m['dir']}/{m['name']}.pyc", entry)
    from_host: list[str] = []
    # Python finds its prefix by the landmark lib/pythonX.Y/os.py, which
    # it checks for but does not read (os is a frozen module): this
    # host's, if the runs did not read it.
    for path in list(root.files):
        m = _PYTHON.match(path)
        if m:
            landmark = f"{m['prefix']}/lib/python{m['version']}/os.py"
            if not root.has(landmark) and os.path.isfile(landmark):
                root.host[landmark] = os.stat(landmark).st_mode
                from_host.append(landmark)
    sh = _add_chain(root, "/bin/sh")
    if not root.has(sh) and os.path.isfile(sh):
        for path in (sh, *_host_libraries(sh)):
            real = _link_chain(path, {})
            if not root.has(real) and os.path.isfile(real):
                root.host[real] = os.stat(real).st_mode
                from_host.append(real)
            _add_chain(root, path)
        _add_chain(root, "/bin/sh")
    return from_host


def materialise(root: Rootfs, archive: Contents, root_dir: Path, runner: str,
                from_host: list[str], launchers: dict[str, str] | None = None) -> None:
    """Write the root file system of ``root`` into the empty ``root_dir``,
    never outside it (:mod:`shournal.confined`: the image's symlinks point
    anywhere on this host, and are made last, never written through);
    ``launchers``: name -> script, put in :data:`LAUNCHER_DIR`."""
    try:
        with Confined(root_dir, create=True) as out:
            _materialise(root, archive, out, runner, from_host, launchers or {})
    except (ConfinedError, UnsafePath) as e:
        raise ImageError(str(e)) from None


def _materialise(root: Rootfs, archive: Contents, out: Confined, runner: str,
                 from_host: list[str], launchers: dict[str, str]) -> None:
    for d in ("proc", "sys", "dev", "etc", IN_DIR.lstrip("/"), OUT_DIR.lstrip("/"),
              ".singularity.d/env", ".singularity.d/libs", ".singularity.d/actions"):
        out.mkdirs(d)
    out.mkdirs("tmp")
    with out.directory("tmp") as tmp:
        os.fchmod(tmp, 0o1777)
    for d in sorted(root.dirs):
        out.mkdirs(mirror(d))
    for path, (digest, mode) in sorted(root.files.items()):
        out.write(mirror(path), archive.get(digest), (mode & 0o755) | 0o444)  # never setuid
    for path, mode in sorted(root.host.items()):
        out.write(mirror(path), Path(path).read_bytes(), (mode & 0o755) | 0o444)
    for name, text in sorted(launchers.items()):
        out.write(mirror(f"{LAUNCHER_DIR}/{name}"), text.encode(), 0o755)
    out.write(mirror(RUNNER_IN_CONTAINER), runner.encode(), 0o755)
    out.write(mirror(HOST_FILES), "".join(f"{p}\n" for p in from_host).encode(), 0o644)
    scripts = {
        ".singularity.d/runscript": f'#!/bin/sh\nexec {RUNNER_IN_CONTAINER} "$@"\n',
        ".singularity.d/actions/run": '#!/bin/sh\nexec /.singularity.d/runscript "$@"\n',
        ".singularity.d/actions/exec": '#!/bin/sh\nexec "$@"\n',
        ".singularity.d/env/90-environment.sh": f"export PATH={_PATH}\n",
    }
    for rel, text in scripts.items():
        out.write(rel, text.encode(), 0o755)
    for path, text in sorted(root.links.items()):
        rel = mirror(path)
        if out.lstat(rel) is None:
            out.symlink(text, rel)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pkg = "squashfs-tools" if "squashfs" in name else name
        raise ImageError(f"{name} is not installed (Debian package {pkg})")
    return found


def _call(argv: list[str]) -> None:
    res = subprocess.run(argv, capture_output=True, text=True, check=False,
                         stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        why = " ".join((res.stderr or res.stdout).split())[:300]
        raise ImageError(f"{os.path.basename(argv[0])} failed (exit {res.returncode}): {why}")


def build_sif(root_dir: Path, definition: Path, sif: Path, work: Path) -> None:
    """Pack ``root_dir`` as squashfs and wrap it, with ``definition``, in
    the new SIF file ``sif``; ``work``: a scratch directory."""
    arch = _ARCH.get(platform.machine())
    if arch is None:
        raise ImageError(f"no SIF architecture code for {platform.machine()}")
    squash = work / "rootfs.squashfs"
    _call([_tool("mksquashfs"), str(root_dir), str(squash), *MKSQUASHFS_OPTIONS])
    siftool = _tool("siftool")
    _call([siftool, "new", str(sif)])
    _call([siftool, "add", str(sif), str(definition), "--datatype", _DATATYPE_DEFFILE,
           "--filename", definition.name])
    _call([siftool, "add", str(sif), str(squash), "--datatype", _DATATYPE_PARTITION,
           "--parttype", _PART_PRIMSYS, "--partfs", _FS_SQUASH, "--partarch", arch,
           "--filename", "rootfs.squashfs"])


def partition_id(sif: Path) -> str:
    """The id of the SIF's primary system partition (from ``siftool
    list``)."""
    res = subprocess.run([_tool("siftool"), "list", str(sif)], capture_output=True, text=True,
                         check=False, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        raise ImageError(f"{sif} is not a SIF image: {' '.join(res.stderr.split())[:200]}")
    for line in res.stdout.splitlines():
        words = line.split("|")
        # "2 |NONE |NONE |32768-36864 |FS (Squashfs/*System/amd64)": * is primary
        if words[0].strip().isdigit() and words[-1].strip().startswith("FS (Squashfs/*System"):
            return words[0].strip()
    raise ImageError(f"{sif} has no primary squashfs system partition")


def extract(sif: Path, dest: Path) -> None:
    """Unpack the SIF's squashfs partition into ``dest`` (must not
    exist): ``siftool dump`` and ``unsquashfs``."""
    pid = partition_id(sif)
    with tempfile.TemporaryDirectory(prefix="shournal-sif.") as tmp:
        squash = Path(tmp) / "rootfs.squashfs"
        with open(squash, "wb") as fh:
            res = subprocess.run([_tool("siftool"), "dump", pid, str(sif)], stdout=fh,
                                 stderr=subprocess.PIPE, check=False, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise ImageError(f"siftool dump failed: {' '.join(res.stderr.decode().split())}")
        _call([_tool("unsquashfs"), "-no-xattrs", "-quiet", "-no-progress", "-d", str(dest),
               str(squash)])


def mount_points(rootfs: Path) -> None:
    """Make the folders bubblewrap mounts on in an unpacked image that
    lacks them (an image built by Apptainer has no /rereso).

    :raises ImageError: they cannot be made."""
    try:
        for d in ("proc", "dev", "tmp", IN_DIR.lstrip("/"), OUT_DIR.lstrip("/")):
            target = rootfs / d
            if target.is_dir() and not target.is_symlink():
                continue
            for parent in (rootfs, *reversed(target.relative_to(rootfs).parents)):
                p = rootfs / parent if parent != rootfs else rootfs
                if p.is_dir() and not p.is_symlink() and not os.access(p, os.W_OK):
                    os.chmod(p, stat.S_IMODE(p.stat().st_mode) | stat.S_IWUSR)
            target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ImageError(f"cannot prepare the unpacked image: {e.strerror}: "
                         f"{e.filename}") from None


def sandbox_argv(rootfs: Path, in_dir: Path, out_dir: Path, argv: list[str]) -> list[str]:
    """bubblewrap running ``argv`` in the image's root ``rootfs``: its own
    /proc, /dev and /tmp, no network, only ``in_dir`` (read-only, at
    :data:`IN_DIR`) and ``out_dir`` (at :data:`OUT_DIR`) from the host."""
    return [_tool("bwrap"), "--ro-bind", str(rootfs), "/", "--proc", "/proc", "--dev", "/dev",
            "--tmpfs", "/tmp", "--ro-bind", str(in_dir), IN_DIR, "--bind", str(out_dir),
            OUT_DIR, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--setenv", "PATH", _PATH, "--setenv", "LC_ALL", "C.UTF-8", "--chdir", OUT_DIR,
            "--", *argv]


def blobs_missing(root: Rootfs, archive: Contents) -> list[str]:
    """The image's files whose content the archive does not have."""
    missing = []
    for path, (digest, _mode) in sorted(root.files.items()):
        try:
            if not archive.has(digest):
                missing.append(path)
        except ArchiveError:
            missing.append(path)
    return missing
