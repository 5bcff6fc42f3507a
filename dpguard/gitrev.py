"""Read files as they were at a git revision, for `dpguard review --baseline REV`.

Only the `git` command, through subprocess (no library dependency), and only commands that read:
``rev-parse``, ``ls-tree`` and ``cat-file --batch`` (the base files, a few processes in all) and
``diff --name-status`` for git's own rename detection. Nothing here touches the index, the work
tree or the history.

No file name reaches a line-based protocol: names go to git as literal pathspecs in argv and
come back NUL-separated, and `cat-file --batch` is fed object ids only. A committed file named
``a\nHEAD:m.yaml`` is one more file, not a second request.

Every way this can fail for a reason the user can fix (no git, not a repository, an unknown
revision, a shallow clone without the base commit, a path outside the repository) is a
`RevisionError`: one message naming the revision and what to fetch, exit 2.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dpguard.errors import DpguardError

GIT_TIMEOUT = 120  # seconds; a `git diff` over a large repository's work tree is the slowest
# Paths per `git ls-tree`, and their bytes: far below Linux's 2 MiB of argv and environment, and
# few enough that git's matching of every tree entry against every pathspec stays cheap.
LS_TREE_PATHS = 1000
LS_TREE_BYTES = 256 * 1024


class RevisionError(DpguardError):
    """The baseline revision or the repository cannot be read as asked (exit 2)."""


def _git(cwd: Path | str, *argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    # A hook or CI job may export GIT_DIR / GIT_WORK_TREE for another repository; the
    # repository here is the one holding the files, found from `cwd`.
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # `git diff` may refresh the index otherwise: read only
    # A path is a file's name, never a pattern: `*.yaml` or `:!x` name files called that.
    env["GIT_LITERAL_PATHSPECS"] = "1"
    try:
        return subprocess.run(
            ["git", *argv],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            env=env,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        raise RevisionError("--baseline needs git, and no `git` command was found") from None
    except subprocess.TimeoutExpired:
        raise RevisionError(f"git {argv[0]} took longer than {GIT_TIMEOUT} s") from None


def _stderr(done: subprocess.CompletedProcess) -> str:
    """git's last line of complaint (the one that says what went wrong)."""
    lines = bytes(done.stderr).decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"git exited with {done.returncode}"


@dataclass(frozen=True)
class Baseline:
    """A resolved revision of one repository."""

    root: Path  # the repository's top-level directory (resolved)
    name: str  # the revision as the user wrote it
    commit: str  # its full commit id

    def relative(self, path: str) -> str:
        """`path` (as given, relative to the current directory) relative to the repository
        root, with forward slashes; RevisionError when it lies outside the repository."""
        absolute = Path(os.path.abspath(path))
        try:
            # Resolve the directory, not the file: a deleted file has no target to resolve.
            resolved = absolute.parent.resolve() / absolute.name
            return resolved.relative_to(self.root).as_posix()
        except ValueError:
            raise RevisionError(
                f"{path}: outside the git repository at {self.root}; --baseline {self.name} "
                "reads files from that repository's history only"
            ) from None

    def display(self, relative: str) -> str:
        """A repository path as the user would write it from the current directory."""
        return os.path.relpath(self.root / relative)

    def read(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        """The content of each repository path at this revision (None: not there, or not a
        file): `git ls-tree` maps the paths to blob ids, one `git cat-file --batch` reads them."""
        wanted = list(dict.fromkeys(paths))
        blobs = self._blob_ids([p for p in wanted if _tree_path(p)])
        contents = self._blobs(sorted(set(blobs.values())), blobs)
        return {p: contents[blobs[p]] if p in blobs else None for p in wanted}

    def _blob_ids(self, paths: list[str]) -> dict[str, str]:
        """{path: blob id} for those of `paths` that are files (blobs) at this revision."""
        out: dict[str, str] = {}
        for chunk in _chunks(paths):
            done = _git(self.root, "ls-tree", "-z", "--full-tree", self.commit, "--", *chunk)
            if done.returncode:
                raise RevisionError(
                    f"cannot list files at {self.name} ({self.commit[:12]}): {_stderr(done)}"
                )
            # A pathspec also matches what lies under a directory of that name: keep exact names.
            asked = {os.fsencode(p): p for p in chunk}
            for kind, oid, name in _ls_tree_entries(bytes(done.stdout)):
                if kind == b"blob" and name in asked:
                    out[asked[name]] = oid.decode("ascii")
        return out

    def _blobs(self, oids: list[str], blobs: dict[str, str]) -> dict[str, bytes]:
        """{blob id: content}, from one `git cat-file --batch` fed ids only (hex, no names)."""
        if not oids:
            return {}
        stdin = "".join(f"{oid}\n" for oid in oids).encode("ascii")
        done = _git(self.root, "cat-file", "--batch", stdin=stdin)
        if done.returncode:
            raise RevisionError(
                f"cannot read files at {self.name} ({self.commit[:12]}): {_stderr(done)}"
            )
        out: dict[str, bytes] = {}
        data, at = bytes(done.stdout), 0
        for oid in oids:
            end = data.find(b"\n", at)
            header = data[at:end].split() if end >= 0 else []
            if header == [oid.encode("ascii"), b"missing"]:
                # The tree names the object but the clone lacks it (a damaged or partial one):
                # reporting the file as absent at the base would call it added.
                path = next(p for p, o in blobs.items() if o == oid)
                raise RevisionError(
                    f"cannot read {path} at {self.name} ({self.commit[:12]}): object {oid} "
                    "is missing from this clone; fetch the base commit again"
                )
            size = int(header[2]) if len(header) == 3 and header[2].isdigit() else -1
            whole = size >= 0 and end + 1 + size < len(data)  # the content, then its newline
            if header[:2] != [oid.encode("ascii"), b"blob"] or not whole:
                raise RevisionError(
                    f"cannot read files at {self.name} ({self.commit[:12]}): unexpected "
                    f"answer from git cat-file for {oid}: {data[at:end][:200]!r}"
                )
            out[oid] = data[end + 1 : end + 1 + size]
            at = end + 1 + size + 1  # the content, then a newline
        return out

    def files_under(self, directory: str) -> list[str]:
        """The repository paths of the files under `directory` (as given) at this revision."""
        prefix = self.relative(directory).rstrip("/")
        done = _git(self.root, "ls-tree", "-r", "-z", "--name-only", self.commit, "--", prefix)
        if done.returncode:
            raise RevisionError(f"cannot list {directory} at {self.name}: {_stderr(done)}")
        names = bytes(done.stdout).decode("utf-8", "surrogateescape").split("\0")
        return sorted(name for name in names if name)

    def renames(self) -> dict[str, str]:
        """{path now: path at the revision} for files git's rename detection pairs between this
        revision and the work tree."""
        done = _git(
            self.root, "diff", "--no-ext-diff", "-M", "--name-status", "-z", self.commit, "--"
        )
        if done.returncode:
            raise RevisionError(f"cannot compare the work tree with {self.name}: {_stderr(done)}")
        fields = bytes(done.stdout).decode("utf-8", "surrogateescape").split("\0")
        out: dict[str, str] = {}
        i = 0
        while i < len(fields) and fields[i]:
            status = fields[i]
            if status.startswith(("R", "C")):
                if status.startswith("R"):
                    out[fields[i + 2]] = fields[i + 1]
                i += 3
            else:
                i += 2
        return out


def _tree_path(path: str) -> bool:
    """Whether `path` can name an entry of a git tree: no empty, `.` or `..` component (which
    git would also read as a pathspec for a whole directory, or refuse) and no NUL."""
    return "\0" not in path and all(part not in ("", ".", "..") for part in path.split("/"))


def _chunks(paths: list[str]) -> Iterator[list[str]]:
    """`paths` in runs that fit one command line (see LS_TREE_PATHS)."""
    chunk: list[str] = []
    size = 0
    for path in paths:
        length = len(os.fsencode(path)) + 1
        if chunk and (len(chunk) == LS_TREE_PATHS or size + length > LS_TREE_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(path)
        size += length
    if chunk:
        yield chunk


def _ls_tree_entries(output: bytes) -> Iterator[tuple[bytes, bytes, bytes]]:
    """(type, object id, name) of each entry of `git ls-tree -z`: `<mode> SP <type> SP <id>
    TAB <name> NUL`, the name unquoted (it may hold any byte but NUL, tabs and newlines too)."""
    for record in output.split(b"\0"):
        if record:
            meta, _, name = record.partition(b"\t")
            _mode, kind, oid = meta.split(b" ")
            yield kind, oid, name


def repository(start: Path | str) -> Path:
    """The top-level directory of the repository holding `start`."""
    done = _git(start, "rev-parse", "--show-toplevel")
    if done.returncode:
        raise RevisionError(
            f"{os.path.abspath(start)} is not inside a git repository: --baseline compares "
            "with a revision of the repository that holds the files"
        )
    return Path(bytes(done.stdout).decode("utf-8").strip()).resolve()


def resolve(revision: str, start: Path | str = ".") -> Baseline:
    """`revision` of the repository holding `start`, or RevisionError saying what to fetch."""
    root = repository(start)
    if revision.startswith("-"):  # never let a revision be read as an option
        raise RevisionError(f"--baseline {revision!r}: a revision cannot start with '-'")
    done = _git(
        root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"
    )
    if done.returncode == 0:
        return Baseline(root, revision, bytes(done.stdout).decode().strip())
    shallow = _git(root, "rev-parse", "--is-shallow-repository")
    if bytes(shallow.stdout).strip() == b"true":
        raise RevisionError(
            f"revision {revision!r} is not in this clone of {root}: it is shallow, so the base "
            f"commit was never fetched; fetch it (`git fetch --unshallow`, or `git fetch "
            f"--depth=1 origin {revision}` for just that commit; in GitHub Actions "
            "actions/checkout with fetch-depth: 0; in GitLab CI GIT_DEPTH: 0)"
        )
    raise RevisionError(
        f"unknown revision {revision!r} in {root}: no commit, branch or tag by that name "
        "here; fetch it first (`git fetch origin BRANCH` for a branch of the remote, "
        "`git fetch origin COMMIT` for a commit) or name one that `git log` shows"
    )
