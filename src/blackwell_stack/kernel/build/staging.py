"""The build's inputs at one fixed path, so that a checkout anywhere gives the same wheel.

nvcc names a translation unit's internal-linkage entities after the real absolute path of its .cu file
(`_INTERNAL_<hash of the path>_...`), and no prefix map reaches that name; a symbolic link does not help either
(nvcc hashes the resolved path: measured, docs/sgl-kernel.md). Headers are different: their paths reach the
libraries only through __FILE__, which -ffile-prefix-map rewrites. So the files nvcc compiles (the sgl-kernel tree
and the FetchContent sources) are placed under STAGE_ROOT, the same path on every host, as Nix's sandbox places
every build under /build, and everything else (torch's headers, the CUDA toolkit, the build directory) is
prefix-mapped.

The stage belongs to one build at a time: a lock file beside it, taken without waiting (another build gets a clear
error), and a directory that must be this user's own. The sgl-kernel tree is copied (the patches are applied to the
copy; the checkout is never changed), read-only sources are hard-linked where the file system allows it, and the
whole stage is removed when the build ends.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack.errors import StackError

STAGE_ROOT = Path("/tmp/blackwell-stack-sgl-kernel")
# The env var tests use to keep their builds apart from a user's; a build under another root is not
# the reference configuration's (its paths differ), and the plan says so.
ROOT_VARIABLE = "BLACKWELL_STACK_KERNEL_STAGE"


@dataclass(frozen=True)
class Layout:
    """Where each input lies inside the stage."""

    root: Path

    @property
    def kernel_dir(self) -> Path:
        return self.root / "sgl-kernel"

    @property
    def sources_dir(self) -> Path:
        return self.root / "fc"  # the FetchContent sources

    @property
    def build_dir(self) -> Path:
        return self.root / "build"

    @property
    def lock_path(self) -> Path:
        return self.root.with_name(self.root.name + ".lock")


def layout() -> Layout:
    return Layout(Path(os.environ.get(ROOT_VARIABLE) or STAGE_ROOT))


def _refuse_foreign(path: Path) -> None:
    """A path in a shared directory (/tmp) that is a link, or another user's, is never used."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
        raise StackError(
            f"{path} exists and is {'a symbolic link' if stat.S_ISLNK(st.st_mode) else 'owned by another user'}: "
            "the build will not stage its sources there",
            f"remove it (it belongs to no build of yours), or build as that user; {ROOT_VARIABLE} moves the stage, "
            "at the cost of a wheel that differs from the reference",
        )


@contextmanager
def acquire(where: Layout) -> Iterator[Layout]:
    """The stage, empty and locked for this build; removed afterwards."""
    where.root.parent.mkdir(parents=True, exist_ok=True)
    _refuse_foreign(where.lock_path)
    try:
        fd = os.open(where.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StackError(f"cannot open the stage's lock {where.lock_path}: {exc.strerror}",
                         "check the permissions of its directory") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StackError(f"another `kernel build` holds {where.lock_path}: it is staging or building in "
                                 f"{where.root}", "wait until it has finished, then run this build again") from None
            raise
        _refuse_foreign(where.root)
        shutil.rmtree(where.root, ignore_errors=True)  # what an interrupted build left
        where.root.mkdir(mode=0o700)
        try:
            yield where
        finally:
            shutil.rmtree(where.root, ignore_errors=True)
    finally:
        os.close(fd)  # releases the lock


def link_tree(source: Path, dest: Path, ignore: Callable[[str, list[str]], set[str]] | None = None) -> None:
    """A read-only source placed by hard links (a copy where links cannot cross file systems); `ignore` leaves out
    what its pin does not cover (kernel/inputs/source_filter.py)."""

    def place(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    try:
        shutil.copytree(source, dest, symlinks=True, copy_function=place, ignore=ignore)
    except (OSError, shutil.Error) as exc:
        raise StackError(f"cannot place {source} at {dest}: {exc}",
                         f"free space under {dest.parent} (the sources are staged there)") from None
