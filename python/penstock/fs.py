"""FileSystem: the files of an fs container (include/penstock/fs.h) through the same file
objects as objects (penstock.ObjectFile), and its namespace by path. Paths are absolute
("/a/b") or from the root. Errors are penstock errors that are also OSErrors with the POSIX
errno (NotFound: ENOENT, AlreadyExists: EEXIST, ...). Survives a fork: each process uses its
own connection."""
from .files import ObjectFile, parse_mode

READ, WRITE, CREATE, EXCLUSIVE, TRUNCATE, APPEND = 1, 2, 4, 8, 16, 32
_FLAGS = {"r": READ, "w": WRITE | CREATE | TRUNCATE, "r+": READ | WRITE, "a": WRITE | CREATE | APPEND}


class FileSystem:
    def __init__(self, client, container, format=False):
        self.client, self.container = client, container
        client._fs_native(container, format)  # opens now: errors show here

    @property
    def _native(self):
        return self.client._fs_native(self.container)

    def open(self, path, mode="rb", perm=0o644):
        kind = parse_mode(mode)
        f = ObjectFile(self.client, self._native.open(path, _FLAGS[kind], perm), f"{self.container}:{path}", mode)
        if kind == "a":
            f.seek(0, 2)
        return f

    def listdir(self, path="/"):
        """Names in the directory (without "." and ".."), every page of them."""
        return self._native.listdir(path)

    def stat(self, path):
        """FileAttr: type ("file", "dir", "symlink"), is_dir, size, mode, mtime, ..."""
        return self._native.stat(path)

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def mkdir(self, path, mode=0o755, parents=False):
        self._native.mkdir(path, mode, parents)

    def makedirs(self, path, mode=0o755):
        self._native.mkdir(path, mode, True)

    def remove(self, path):
        self._native.remove(path)

    def rmdir(self, path):
        self._native.rmdir(path)

    def rename(self, src, dst):
        self._native.rename(src, dst)

    def read_many(self, paths):
        """One Future per path, of each file's bytes, all in flight at once."""
        return self._native.read_many(list(paths))

    def walk_files(self, top="/"):
        """Every regular file under `top`, as sorted paths."""
        out, todo = [], [top.rstrip("/") or "/"]
        while todo:
            d = todo.pop()
            for name, is_dir in self._native.scandir(d):
                (todo if is_dir else out).append(d.rstrip("/") + "/" + name)
        return sorted(out)
