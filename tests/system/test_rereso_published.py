"""`shournal recombine` on the ReReSo authors' published bundles, as the
unprivileged test user with the real setuid helper: their descriptors
(tests/data/rereso-case-studies, CC0-1.0) with small benchmark files made
here in the declared formats, published compressed (`.json.zst` declared
application/json, `.tar.xz` declared application/x-tar).  The heat pump
mining tool runs from a tiny SIF image of stand-in programs (unpacked with
siftool and unsquashfs, run in bubblewrap: no Apptainer here); the DuMux
tools run with --host and stand-ins on PATH.  Every run is journaled."""

from __future__ import annotations

import io
import json
import lzma
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from test_run import commands

from shournal.rereso import image

pytestmark = [pytest.mark.root]

CASES = Path(__file__).resolve().parents[1] / "data" / "rereso-case-studies"
HPM_SETS = ["abbadingo-one", "alfred", "disc", "hadoop", "mit-ar"]
DUMUX_SETS = ["example-benchmarks", "paper-benchmark", "koch2024a-repro"]

# Stand-ins for the heat pump mining programs: each checks that its input
# is the decompressed JSON and that the image's environment was sourced.
_ARGS = """\
while [ $# -gt 0 ]; do
    case "$1" in
    -a) a=$2; shift 2 ;;
    -i) i=$2; shift 2 ;;
    -o) o=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 64 ;;
    esac
done
[ "$HPM_IMAGE" = yes ] || { echo "the image's environment was not sourced" >&2; exit 65; }
read -r first < "$i"
case "$first" in "{"*) ;; *) echo "not JSON: $i" >&2; exit 3 ;; esac
"""
STANDINS = {
    "select-and-merge": _ARGS + 'cat "$i" > "$o"\n',
    "learn": _ARGS + "printf 'digraph learned { s0 -> s1; }\\n' > \"$o\"\n",
    "validate": _ARGS + """\
read -r dot < "$a"
case "$dot" in digraph*) ;; *) echo "not an automaton: $a" >&2; exit 3 ;; esac
printf 'automaton,accepted\\n%s,1\\n' "${a##*/}" > "$o"
""",
    "convert-format": "#!/bin/sh\nexit 1\n",
}
# Apptainer's exec action: source the image's environment, then run.
EXEC_ACTION = """#!/bin/sh
for script in /.singularity.d/env/*.sh; do
    if [ -f "$script" ]; then
        . "$script"
    fi
done
exec "$@"
"""
DUMUX = """#!/bin/sh
# a DuMux stand-in: the benchmark must arrive as an uncompressed tar
[ $# -eq {n} ] || exit 64
{check}
magic=$(dd if="${n}" bs=1 skip=257 count=5 2>/dev/null)
[ "$magic" = ustar ] || {{ echo "not a tar: ${n}" >&2; exit 3; }}
tar -tf "${n}" > listing.txt
printf '\\211HDF\\r\\n\\032\\n' > result.h5
"""


def _logs(name: str) -> bytes:
    return json.dumps({"logs": [{"name": name, "events": [{"time": 0, "event": "on"}]}]},
                      indent=1).encode() + b"\n"


def _tar(name: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        data = f"[Problem]\nName = {name}\n".encode()
        info = tarfile.TarInfo(f"{name}/params.input")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _zstd(data: bytes) -> bytes:
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True,
                          check=True).stdout


def _own(install, top: Path) -> None:
    for root, dirs, files in os.walk(top):
        for n in (*dirs, *files):
            os.lchown(os.path.join(root, n), install.user.pw_uid, install.user.pw_gid)
    os.chown(top, install.user.pw_uid, install.user.pw_gid)


def _copy_bundle(rel: str, dest: Path) -> Path:
    shutil.copytree(CASES / rel, dest)
    return dest


def _hpm_image(sif: Path, work: Path) -> None:
    """A SIF whose squashfs holds /bin/sh, cat and the stand-ins (no /rereso,
    no /proc: as images Apptainer builds from a definition)."""
    root = work / "hpm-rootfs"
    for prog in ("/bin/sh", "/bin/cat"):
        for path in (prog, *image._host_libraries(os.path.realpath(prog))):
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    for name, text in STANDINS.items():
        script = root / "usr/local/bin" / name
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(text if text.startswith("#!") else "#!/bin/sh\n" + text)
        script.chmod(0o755)
    env = root / ".singularity.d/env/90-environment.sh"
    env.parent.mkdir(parents=True)
    env.write_text("export PATH=/usr/local/bin:/usr/bin:/bin\nexport HPM_IMAGE=yes\n")
    action = root / ".singularity.d/actions/exec"
    action.parent.mkdir(parents=True)
    action.write_text(EXEC_ACTION)
    action.chmod(0o755)
    definition = work / "hpm.def"
    definition.write_text("Bootstrap: scratch\n")
    build = work / "hpm-build"
    build.mkdir()
    image.build_sif(root, definition, sif, build)
    shutil.rmtree(root)
    shutil.rmtree(build)


def _recombine(install, home: Path, *argv: str, path: Path | None = None,
               ) -> subprocess.CompletedProcess[str]:
    env = install.env(home)
    if path is not None:
        env["PATH"] = f"{path}:{env['PATH']}"
    return subprocess.run(
        ["runuser", "-u", install.user.pw_name, "--", "env", "-i",
         *[f"{k}={v}" for k, v in env.items()], str(install.cli), "recombine", *argv],
        cwd=home / "work", capture_output=True, text=True, timeout=600)


def test_heat_pump_mining_tool_in_its_image_on_the_log_benchmarks(install, user_home):
    work = user_home / "work"
    tool = _copy_bundle("hpm/native-tools", work / "native-tools")
    _hpm_image(tool / "hpm.sif", work)
    sets = []
    for name in HPM_SETS:
        _copy_bundle(f"hpm/other-log-benchmarks/{name}", work / name)
        sets.append(name)
    logs = {"hadoop-PageRank": _logs("PageRank"), "hadoop-WordCount": _logs("WordCount"),
            "mit-ar": _logs("mit-ar")}
    for stem, data in logs.items():
        s = work / ("mit-ar" if stem == "mit-ar" else "hadoop")
        (s / f"{stem}.json.zst").write_bytes(_zstd(data))
    (work / "alfred" / "alfred.json.zst").write_bytes(_zstd(_logs("alfred")))
    _own(install, work)

    # The plan: nothing is run, nothing written.
    res = _recombine(install, user_home, "native-tools", *sets, "--plan")
    assert res.returncode == 0, res.stderr
    assert ("hadoop x command 4 (validate -a [automaton.dot] -i [validation.json] -o "
            "[result.csv]): needs --input automaton.dot=PATH (text/vnd.graphviz)") in res.stdout
    assert "hadoop/hadoop-PageRank.json.zst: zstd-compressed, decompressed for each run" in (
        res.stdout)
    assert not (work / "results").exists()

    res = _recombine(install, user_home, "native-tools", *sets, "-o", "results",
                     "--output-format", "json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    ran = {(r["benchmark"], r["command"].split()[0]): r for r in report["runs"]}
    assert set(ran) == {(f"{s}/{stem}.json.zst", c)
                        for stem, s in (("hadoop-PageRank", "hadoop"),
                                        ("hadoop-WordCount", "hadoop"), ("mit-ar", "mit-ar"))
                        for c in ("select-and-merge", "learn")}
    assert all(r["exit_status"] == 0 for r in ran.values()), res.stderr
    merged = ran["hadoop/hadoop-PageRank.json.zst", "select-and-merge"]
    out = work / "results/hadoop/hadoop-PageRank/command-2/output.json"
    assert merged["outputs"] == [str(out)]
    assert merged["invocation"] == ["select-and-merge", "-i",
                                    "/rereso/in/hadoop-PageRank.json", "-o",
                                    "/rereso/out/output.json"]
    assert out.read_bytes() == logs["hadoop-PageRank"]  # the decompressed benchmark
    dot = work / "results/mit-ar/mit-ar/command-3/automaton.dot"
    assert ran["mit-ar/mit-ar.json.zst", "learn"]["outputs"] == [str(dot)]
    assert dot.read_text().startswith("digraph")
    # Journaled: the run read the published file and wrote the output.
    (cmd,) = commands(user_home, wfile=out)
    assert "shournal.rereso.sandbox bwrap" in cmd.text and cmd.return_value == 0
    assert f"|{tool / 'hpm.sif'}" in cmd.text  # the image it ran in, for its run record
    assert str(work / "hadoop/hadoop-PageRank.json.zst").encode() in {e.path for e in cmd.reads}
    # Every pair not run has its reason.
    reasons = {(n["set"], n["command"].split()[0]): n["reason"] for n in report["not_run"]}
    assert reasons["hadoop", "validate"] == (
        "needs --input automaton.dot=PATH (text/vnd.graphviz)")
    assert reasons["alfred", "learn"].startswith("no match: the set does not declare the "
                                                 "schemas")
    assert len(reasons) == len(HPM_SETS) * 4 - 4

    # validate runs once its second input is given.
    res = _recombine(install, user_home, "native-tools", "hadoop", "-o", "validated",
                     "--input", f"automaton.dot={dot}", "--output-format", "json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    checked = [r for r in report["runs"] if r["command"].startswith("validate")]
    assert [(r["benchmark"], r["exit_status"]) for r in checked] == [
        ("hadoop/hadoop-PageRank.json.zst", 0), ("hadoop/hadoop-WordCount.json.zst", 0)]
    (csv,) = checked[0]["outputs"]
    assert Path(csv).name == "result.csv"
    assert Path(csv).read_text() == "automaton,accepted\nautomaton.dot,1\n"


def test_dumux_tools_on_the_host_on_the_tar_benchmarks(install, user_home):
    work = user_home / "work"
    for rel in ("dumux/ci-tools/dumux-3.9.0-dune-2.10", "dumux/ci-tools/runtest",
                "dumux/koch2024a-repro", "hpm/nfc-tool"):
        _copy_bundle(rel, work / rel.replace("/", "_"))
    for name in DUMUX_SETS:
        _copy_bundle(f"dumux/{name}", work / name)
    # Two of the fifteen example benchmarks are here; the others are missing.
    for s, stem in (("example-benchmarks", "example_1ptracer"),
                    ("example-benchmarks", "example_diffusion"),
                    ("paper-benchmark", "Koch2024a"),
                    ("koch2024a-repro", "flow_one_compartment")):
        (work / s / f"{stem}.tar.xz").write_bytes(lzma.compress(_tar(stem)))
    bin_dir = work / "standins"
    bin_dir.mkdir()
    (bin_dir / "run-rereso-dumux-benchmark").write_text(DUMUX.format(n=1, check=""))
    (bin_dir / "unpack-and-run").write_text(DUMUX.format(
        n=2, check='[ "$1" = flow_one_compartment ] || exit 66'))
    for p in bin_dir.iterdir():
        p.chmod(0o755)
    _own(install, work)

    res = _recombine(install, user_home, "dumux_ci-tools_dumux-3.9.0-dune-2.10", *DUMUX_SETS,
                     "--host", "-o", "results", "--output-format", "json", path=bin_dir)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert [(r["benchmark"], r["exit_status"]) for r in report["runs"]] == [
        ("example-benchmarks/example_1ptracer.tar.xz", 0),
        ("example-benchmarks/example_diffusion.tar.xz", 0),
        ("paper-benchmark/Koch2024a.tar.xz", 0),
        ("koch2024a-repro/flow_one_compartment.tar.xz", 0)]
    first = report["runs"][0]
    where = work / "results/example-benchmarks/example_1ptracer"
    assert first["outputs"] == [str(where / "listing.txt"), str(where / "result.h5")]
    assert (where / "listing.txt").read_text() == "example_1ptracer/params.input\n"
    assert first["invocation"][0] == "run-rereso-dumux-benchmark"
    assert first["invocation"][1].endswith("/example_1ptracer.tar")
    missing = [n for n in report["not_run"] if n["benchmark"]]
    assert len(missing) == 13
    assert missing[0]["reason"] == "example_1p_rotationsymmetry.tar.xz is missing"
    (cmd,) = commands(user_home, wfile=where / "result.h5")
    assert str(work / "example-benchmarks/example_1ptracer.tar.xz").encode() in {
        e.path for e in cmd.reads}

    # The Koch2024a artifact names its input [input.zip] but declares x-tar:
    # the declaration rules.
    res = _recombine(install, user_home, "dumux_koch2024a-repro", "koch2024a-repro", "--host",
                     "-o", "koch", path=bin_dir)
    assert res.returncode == 0, res.stderr
    assert (work / "koch/koch2024a-repro/flow_one_compartment/result.h5").exists()

    # Without --host the container is needed, and it is not published here.
    res = _recombine(install, user_home, "dumux_koch2024a-repro", "koch2024a-repro", "--plan")
    assert res.returncode == 0 and res.stdout.splitlines()[-1] == (
        f"note: {work / 'dumux_koch2024a-repro'}: the container Koch2024a.sif is missing; "
        "use --host to run the host's programs"), res.stdout
    res = _recombine(install, user_home, "dumux_koch2024a-repro", "koch2024a-repro", "-o",
                     "no-image")
    assert res.returncode == 2
    assert res.stderr == (f"shournal: {work / 'dumux_koch2024a-repro'}: the container "
                          "Koch2024a.sif is missing; use --host to run the host's programs\n")
    assert not (work / "no-image").exists()

    # Tools that run on nothing say why, on stderr.
    for tool, why in (("dumux_ci-tools_runtest", "cannot run: it needs 2 inputs"),
                      ("hpm_nfc-tool", "no match: it declares no input or output formats")):
        res = _recombine(install, user_home, tool, *DUMUX_SETS, "-o", "nothing", "--host")
        assert res.returncode == 1 and res.stdout == "", res.stderr
        lines = res.stderr.splitlines()
        assert lines[0] == ("shournal: no benchmark set matches a command of the tool: "
                            "nothing was run")
        assert len(lines) == 4 and all(why in line for line in lines[1:]), res.stderr
        assert "Traceback" not in res.stderr
