"""Workload 2: `git checkout` between two distant commits of a large
repository, monitored vs unmonitored, cold and warm page cache.

The repository is built once from the linux-source-6.1 tree (see
copy_tree.py): commit A is the whole tree (78,579 files); commit B deletes
--delete files and edits --edit others (a fixed random choice).  The repo
is then packed with `git gc`.  Every run starts from B (a forced,
unobserved `git checkout` of B) and times `git checkout -q bench-a`, which
recreates the deleted files and rewrites the edited ones.

Full runs are checked: the stored writes below the work tree (outside
.git) must equal the number of files that differ between A and B.

Target (issue): overhead at most 3%.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as c  # noqa: E402
import copy_tree  # noqa: E402


def git(bench: c.Bench, repo: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return bench.user_run(["git", *args], repo, **kw)


def ensure_repo(bench: c.Bench, tree: Path, n_delete: int, n_edit: int) -> Path:
    root = c.user_dir(bench.work / "git", bench.user)
    repo = root / "repo"
    done = root / f".built-{n_delete}-{n_edit}"
    if done.exists():
        return repo
    for old in root.glob(".built-*"):
        old.unlink()
    if repo.exists():
        shutil.rmtree(repo)
    c.log(f"building {repo} from {tree}")
    bench.user_run(["cp", "-a", str(tree), str(repo)], root)
    ident = ["-c", "user.name=shournal bench", "-c", "user.email=bench@localhost"]
    git(bench, repo, "init", "-q")
    # No automatic gc in the background: neither during the set-up nor
    # during a timed checkout.
    git(bench, repo, "config", "gc.auto", "0")
    git(bench, repo, "config", "maintenance.auto", "false")
    # -f: Debian's linux-source tree ignores everything in its .gitignore.
    git(bench, repo, "add", "-f", "-A")
    git(bench, repo, *ident, "commit", "-q", "-m", "A: linux-source-6.1")
    git(bench, repo, "tag", "bench-a")
    files = sorted(
        git(bench, repo, "ls-files", "-z", capture_output=True).stdout.decode().split("\0")[:-1]
    )
    files = [f for f in files if (repo / f).is_file() and not (repo / f).is_symlink()]
    rng = random.Random(42)
    chosen = rng.sample(files, n_delete + n_edit)
    to_delete, to_edit = chosen[:n_delete], chosen[n_delete:]
    for rel in to_delete:
        (repo / rel).unlink()
    for rel in to_edit:
        with open(repo / rel, "ab") as f:
            f.write(b"\n/* edited by bench/git_checkout.py */\n")
    git(bench, repo, "add", "-A")
    git(bench, repo, *ident, "commit", "-q", "-m", f"B: delete {n_delete}, edit {n_edit}")
    git(bench, repo, "tag", "bench-b")
    c.log("git gc (packing the repository)")
    git(bench, repo, "gc", "-q")
    done.touch()
    return repo


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    c.common_args(p, reps=7)
    p.add_argument("--delete", type=int, default=2000, help="files deleted by commit B")
    p.add_argument("--edit", type=int, default=2000, help="files edited by commit B")
    args = p.parse_args(argv)
    t_start = time.time()
    user, work = c.bench_user(args)
    tree = copy_tree.ensure_tree(work, user)
    repo = work / "git" / "repo"
    bench = c.Bench(
        user, work, "git_checkout", read_includes=["$HOME", str(repo)], nofile=args.nofile,
        profile=args.profile, listener_cpu=args.listener_cpu, cpu_share=args.cpu_share,
    )
    ensure_repo(bench, tree, args.delete, args.edit)
    changed = len(
        git(bench, repo, "diff", "--name-only", "-z", "bench-b", "bench-a", capture_output=True)
        .stdout.split(b"\0")[:-1]
    )
    c.log(f"{repo}: {changed} files differ between bench-b and bench-a")
    body = "git checkout -q bench-a"

    def prepare() -> None:
        git(bench, repo, "checkout", "-q", "-f", "bench-b")

    def check_full(rec: dict) -> None:
        js = c.journal_stats(
            rec["journal"],
            {"writes_below_repo": (0, str(repo)), "writes_below_git": (0, str(repo / ".git"))},
        )
        if js.get("exists"):
            js["writes_worktree"] = js["writes_below_repo"] - js["writes_below_git"]
        c.judge_full(rec, js, js.get("writes_worktree") == changed, lambda: (
            f"stored {js.get('file_events')} events ({js.get('writes_worktree')}/{changed} "
            f"work-tree writes, lost {js.get('lost_events')})"
        ), args.profile)

    records, summaries = c.run_caches(
        bench, args, body=body, cwd=repo, prepare=prepare, check_full=check_full
    )

    c.print_table(
        f"git_checkout: bench-b -> bench-a ({changed} files differ), "
        f"nofile={args.nofile or 'inherited'}",
        summaries,
        "full <= +3%",
    )
    c.print_problems(records)
    c.write_run(args, "git_checkout", t_start, {
        "command": body,
        "changed_files": changed,
        "summaries": summaries,
        "runs": records,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
