"""File safety for the disk store: code read from disk runs with the user's rights, so
whoever can write the file chooses it. This module is the only one that touches the
directory, and guarantees:

- the directory is per user, created 0700, and refused (CacheDirError) when it is a
  symbolic link, is owned by someone else or is open to others;
- every file is opened relative to the directory's descriptor with O_NOFOLLOW (where the OS
  has no O_NOFOLLOW or no dir_fd, after an lstat): a symbolic link planted in the directory
  is never followed, and `read` refuses (Rejected) anything but a regular file of ours;
- writes go to a new private (0600) temporary file, fsync'd, then os.replace'd over the
  target (`replace`): concurrent processes see the old file or the new one, never a mix.

What the files hold and how they are signed is store.py's business.
"""

import contextlib
import errno
import os
import secrets
import stat

from ...errors import AutodiffgenError

TMP = ".tmp-"  # the prefix of files being written (store.py drops stale ones)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_LINK_ERRNOS = {errno.ELOOP, errno.EMLINK}  # O_NOFOLLOW on a link: Linux, FreeBSD
_DIR_FD = (hasattr(os, "O_DIRECTORY") and os.listdir in os.supports_fd
           and {os.open, os.rename, os.unlink, os.stat, os.link} <= os.supports_dir_fd)
_OWNERS = hasattr(os, "geteuid")  # POSIX: owners and modes mean something


class CacheDirError(AutodiffgenError, PermissionError):
    """The cache directory is not one this library may run code from."""


class Rejected(Exception):
    """A file in the cache directory that this library did not write as it is now."""


def resolve(path):
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def open_dir(path):
    """Create the directory (0700) if missing, then open and check it."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise CacheDirError(f"cannot create the autodiffgen disk cache directory {path}: "
                            f"{e.strerror}") from None
    return _Dir(path)


def _check_dir(st, path):
    problem = None
    if stat.S_ISLNK(st.st_mode):
        problem = "it is a symbolic link; point it at a real directory instead"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "it is not a directory"
    elif _OWNERS and st.st_uid != os.geteuid():
        problem = f"it is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
    elif _OWNERS and stat.S_IMODE(st.st_mode) != 0o700:
        problem = (f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0700, so others could "
                   f"change the code it holds; run `chmod 700 {path}`")
    if problem:
        raise CacheDirError(f"refusing the autodiffgen disk cache directory {path}: {problem}")


def _file_problem(st, private):
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if _OWNERS and st.st_uid != os.geteuid():
        return f"it is owned by uid {st.st_uid}, not by you"
    if _OWNERS and private and st.st_mode & 0o077:
        return f"its mode is {stat.S_IMODE(st.st_mode):04o}: others may read it"
    return None


class _Dir:
    """The checked directory, for one operation. Where the OS allows, every name is resolved
    against the directory's descriptor, so swapping the path for a link midway changes
    nothing; elsewhere against the path, after lstat says it is no link."""

    def __init__(self, path):
        self.path, self.fd = path, None
        _check_dir(os.lstat(path), path)
        if _DIR_FD:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _FLAGS)
            try:
                _check_dir(os.fstat(self.fd), path)
            except CacheDirError:
                self.close()
                raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def name(self, name):
        return os.path.join(self.path, name)

    def _at(self, name):
        return (name, {"dir_fd": self.fd}) if self.fd is not None else (self.name(name), {})

    def open(self, name, flags, mode=0o600):
        if not _NOFOLLOW and os.path.islink(self.name(name)):  # no O_NOFOLLOW: lstat first
            raise OSError(errno.ELOOP, "a symbolic link", self.name(name))
        path, at = self._at(name)
        return os.open(path, flags | _NOFOLLOW | _FLAGS, mode, **at)

    def replace(self, src, dst):
        if self.fd is None:
            return os.replace(self.name(src), self.name(dst))
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def link(self, src, dst):
        if self.fd is None:
            return os.link(self.name(src), self.name(dst))
        os.link(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name):
        path, at = self._at(name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path, **at)

    def lstat(self, name):
        path, at = self._at(name)
        return os.stat(path, follow_symlinks=False, **at)

    def touch(self, name):
        """Mark an entry as used, for the size bound."""
        path, at = self._at(name)
        with contextlib.suppress(OSError, NotImplementedError):
            os.utime(path, follow_symlinks=False, **at)

    def listdir(self):
        return os.listdir(self.fd if self.fd is not None else self.path)

    def sync(self):
        """Make a rename durable (POSIX: fsync the directory)."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self.fd)


def read(d, name, private=False):
    """The bytes of a regular file of ours; Rejected if it is a link or anything else."""
    try:
        fd = d.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO never blocks
    except OSError as e:
        if e.errno in _LINK_ERRNOS:
            raise Rejected("it is a symbolic link, which the cache never follows") from None
        raise
    with open(fd, "rb") as f:
        problem = _file_problem(os.fstat(fd), private)
        if problem:
            raise Rejected(problem)
        return f.read()


def write(d, name, data):
    """A new private file, fsync'd; returns its (temporary) name."""
    tmp = f"{TMP}{name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = d.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        d.unlink(tmp)
        raise
    return tmp


def replace(d, name, data):
    """Write `name` atomically: readers see the old file or the new one."""
    tmp = write(d, name, data)
    try:
        d.replace(tmp, name)
    except BaseException:
        d.unlink(tmp)
        raise
    d.sync()
