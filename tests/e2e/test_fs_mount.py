"""`penstock mount` end to end: a real FUSE mount of a file system container on a 3-target
cluster, driven by coreutils, tar, git, Python and several processes; two mounts of one
container (close-to-open, exactly-one-wins creates); kill -9 of the mount's daemon; read-only
mounts, names too long, and the mount command's own errors.

Skipped as a whole only where /dev/fuse is missing. Every mount made here is unmounted in
teardown (fusermount3 -u, else umount -l) and its daemon killed by PID if still alive."""
import ctypes
import errno
import json
import mmap
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import PENSTOCK, REPO, Cluster, pid_alive

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/fuse"),
                                reason="/dev/fuse is missing: FUSE mounts need it (load the fuse module, or run "
                                       "the container with --device /dev/fuse)")


def mounted(path):
    path = os.path.abspath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def sh(*args, cwd=None, timeout=120):
    """Runs a command; fails the test with its output when it fails."""
    p = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(map(str, args))} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return p.stdout


@pytest.fixture(scope="module")
def fsc(tmp_path_factory):
    """A 3-target cluster with a rep:2 file system container "fs1"."""
    c = Cluster(tmp_path_factory.mktemp("fs-mount-cluster"), targets=3)
    try:
        out = json.loads(c.cli("container", "create", "fs1", "--type", "fs", "--redundancy", "rep:2", "--json").stdout)
        assert out["type"] == "fs"
        yield c
    finally:
        c.stop()


class Mounts:
    """Mounts made by one test, all undone in teardown."""

    def __init__(self, cluster, root):
        self.cluster, self.root = cluster, root
        self.made = []  # (mountpoint, pid)

    def mount(self, name, container="fs1", *extra, at=None):
        mp = Path(at) if at else self.root / name
        mp.mkdir(exist_ok=True)
        out = self.cluster.cli("mount", container, str(mp), "--json", "--log-file", str(self.root / f"{name}.log"),
                               *extra)
        pid = json.loads(out.stdout)["pid"]
        self.made.append((mp, pid))
        assert mounted(mp), f"{mp} is not mounted after `penstock mount` returned"
        return mp, pid

    def unmount(self, mp):
        subprocess.run(["fusermount3", "-u", str(mp)], capture_output=True, timeout=30)
        if mounted(mp):
            subprocess.run(["umount", "-l", str(mp)], capture_output=True, timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()

    def cleanup(self):
        # Shown by pytest when the test failed: what each daemon said (a crash's backtrace).
        for log in sorted(self.root.glob("*.log")):
            text = log.read_text(errors="replace")
            if text:
                print(f"--- {log.name} ---\n{text[-4000:]}")
        for mp, pid in self.made:
            if mounted(mp):
                self.unmount(mp)
        for _, pid in self.made:
            deadline = time.time() + 10
            while pid_alive(pid) and time.time() < deadline:
                time.sleep(0.05)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def mounts(fsc, tmp_path):
    with Mounts(fsc, tmp_path) as m:
        yield m


def test_coreutils_on_the_mount(mounts, tmp_path):
    mp, _ = mounts.mount("m")
    base = mp / "core"
    sh("mkdir", "-p", f"{base}/a/b/c")
    assert (base / "a/b/c").is_dir()

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    os.chmod(src / "run.sh", 0o755)
    (src / "sub/data.bin").write_bytes(os.urandom(200_000))
    os.symlink("sub/data.bin", src / "link")
    os.utime(src / "sub/data.bin", ns=(1_500_000_000_123_456_789, 1_500_000_000_123_456_789))
    sh("cp", "-a", str(src), f"{base}/a/b/c/")
    copy = base / "a/b/c/src"
    assert (copy / "sub/data.bin").read_bytes() == (src / "sub/data.bin").read_bytes()
    assert os.stat(copy / "run.sh").st_mode & 0o7777 == 0o755
    assert os.stat(copy / "sub/data.bin").st_mtime_ns == 1_500_000_000_123_456_789
    assert os.readlink(copy / "link") == "sub/data.bin"
    assert (copy / "link").read_bytes() == (src / "sub/data.bin").read_bytes()
    assert sh(str(copy / "run.sh")) == "hi\n"

    sh("mv", f"{copy}/run.sh", f"{base}/moved.sh")
    sh("mv", f"{copy}/sub", f"{base}/a/sub2")
    assert not (copy / "run.sh").exists() and (base / "moved.sh").read_bytes().startswith(b"#!/bin/sh")
    assert (base / "a/sub2/data.bin").stat().st_size == 200_000

    sh("ln", "-s", "moved.sh", f"{base}/sym")
    assert os.readlink(base / "sym") == "moved.sh" and (base / "sym").read_bytes().startswith(b"#!")
    sh("ln", f"{base}/moved.sh", f"{base}/hard")
    st1, st2 = os.stat(base / "moved.sh"), os.stat(base / "hard")
    assert st1.st_ino == st2.st_ino and st1.st_nlink == 2
    with open(base / "hard", "ab") as f:
        f.write(b"# more\n")
    assert (base / "moved.sh").read_bytes().endswith(b"# more\n")

    sh("touch", "-d", "2020-01-02 03:04:05 UTC", f"{base}/moved.sh")
    assert int(os.stat(base / "moved.sh").st_mtime) == 1577934245
    sh("chmod", "640", f"{base}/moved.sh")
    assert os.stat(base / "hard").st_mode & 0o7777 == 0o640
    sh("truncate", "-s", "100000", f"{base}/t")
    assert (base / "t").read_bytes() == b"\0" * 100000
    (base / "t").write_bytes(b"0123456789abcdef")
    sh("truncate", "-s", "10", f"{base}/t")
    assert (base / "t").read_bytes() == b"0123456789"
    assert sh("stat", "-c", "%s %a %h %F", f"{base}/t") == "10 644 1 regular file\n"
    with open(base / "t", "rb") as reader:  # cut while another process has it open to read
        sh("truncate", "-s", "4", f"{base}/t")
        assert reader.read() == b"0123"
    with open(base / "t", "r+b") as writer:  # and while open to write, with bytes not yet closed
        writer.write(b"abcdefgh")
        writer.flush()
        sh("truncate", "-s", "6", f"{base}/t")
        assert os.fstat(writer.fileno()).st_size == 6
    assert (base / "t").read_bytes() == b"abcdef"

    df = sh("df", "-B1", str(mp)).splitlines()[1].split()
    assert df[0] == "penstock:fs1" and int(df[1]) > 0 and int(df[3]) > 0
    assert int(sh("stat", "-f", "-c", "%l", str(mp))) == 255  # max name length

    sh("rm", "-r", f"{base}/a")
    assert not (base / "a").exists()
    assert sorted(os.listdir(base)) == ["hard", "moved.sh", "sym", "t"]


def test_permissions_are_enforced_and_owners_come_from_the_caller(mounts):
    """default_permissions: the kernel checks the stored modes; a file made by another user
    is owned by that user (uid/gid of the request)."""
    # Under a directory every user may pass through (pytest's own are root's alone).
    top = Path(tempfile.mkdtemp(prefix="penstock-perm-"))
    os.chmod(top, 0o755)
    try:
        mp, _ = mounts.mount("m", "fs1", "-o", "allow_other", at=top / "m")
        shared = mp / "shared"
        shared.mkdir()
        os.chmod(shared, 0o1777)
        (shared / "secret").write_text("root only\n")
        os.chmod(shared / "secret", 0o600)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        sh(*nobody, "sh", "-c", f"echo mine > {shared}/theirs && mkdir {shared}/theirdir")
        for name in ("theirs", "theirdir"):
            st = os.stat(shared / name)
            assert (st.st_uid, st.st_gid) == (65534, 65534), name
        p = subprocess.run([*nobody, "cat", str(shared / "secret")], capture_output=True, text=True)
        assert p.returncode != 0 and "Permission denied" in p.stderr, p.stderr
        p = subprocess.run([*nobody, "rm", "-f", str(shared / "secret")], capture_output=True, text=True)
        assert p.returncode != 0 and "not permitted" in p.stderr, p.stderr  # sticky directory
        with pytest.raises(PermissionError):
            os.mkfifo(shared / "fifo")  # only regular files, directories and symlinks are kept
    finally:
        if mounted(top / "m"):
            mounts.unmount(top / "m")
        shutil.rmtree(top, ignore_errors=True)


def test_tar_round_trip_of_the_source_tree(mounts, tmp_path):
    mp, _ = mounts.mount("m")
    sh("sh", "-c", f"tar -C {REPO} -cf - src | tar -C {mp} -xf -", timeout=300)
    out = tmp_path / "out"
    out.mkdir()
    sh("sh", "-c", f"tar -C {mp} -cf - src | tar -C {out} -xf -", timeout=300)
    sh("diff", "-r", str(REPO / "src"), str(out / "src"))
    sh("diff", "-r", str(REPO / "src"), str(mp / "src"))
    shutil.rmtree(mp / "src")


def test_rsync_in_and_out(mounts, tmp_path):
    if shutil.which("rsync") is None:
        pytest.skip("rsync is not installed on this machine (dpkg -l rsync): its round trip is not run")
    mp, _ = mounts.mount("m")
    sh("rsync", "-a", "--checksum", f"{REPO}/src/fuse/", f"{mp}/rs/")
    sh("rsync", "-a", "--checksum", f"{mp}/rs/", f"{tmp_path}/back/")
    sh("diff", "-r", str(REPO / "src/fuse"), str(tmp_path / "back"))


def test_git_init_add_commit_inside_the_mount(mounts):
    # Several repositories in a row: git opens and closes directories while it lists them, which
    # once had releasedir free a directory handle whose lock a readdir still held (a heap
    # corruption that crashed the daemon within a few repositories).
    mp, _ = mounts.mount("m")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@e", "-c", "init.defaultBranch=main"]
    for k in range(4):
        repo = mp / f"repo{k}"
        repo.mkdir()
        for i in range(20):
            (repo / f"file{i}.txt").write_text(f"line {i}\n" * (i + 1))
        (repo / "dir").mkdir()
        (repo / "dir/nested.py").write_text("print('x')\n")
        sh(*git, "init", "-q", cwd=repo)
        sh(*git, "add", ".", cwd=repo)
        sh(*git, "commit", "-q", "-m", "first", cwd=repo)
        (repo / "file3.txt").write_text("changed\n")
        sh(*git, "commit", "-q", "-am", "second", cwd=repo)
        assert sh(*git, "status", "--porcelain", cwd=repo) == ""
        assert len(sh(*git, "log", "--oneline", cwd=repo).splitlines()) == 2
        sh(*git, "fsck", "--strict", cwd=repo)
        assert sh(*git, "show", "HEAD~1:file3.txt", cwd=repo) == "line 3\n" * 4


def test_os_walk_over_thousands_of_files(fsc, mounts, tmp_path):
    src = tmp_path / "tree"
    expect = {}
    for d in range(14):
        (src / f"d{d:02}" / "sub").mkdir(parents=True)
        for i in range(100):
            rel = f"d{d:02}/{'sub/' if i % 4 == 0 else ''}f{i:03}"
            (src / rel).write_bytes(b"x" * (i % 7))
            expect[rel] = i % 7
    (src / "wide").mkdir()  # more entries than one page of the mount's directory listing (512)
    for i in range(600):
        (src / f"wide/w{i:04}").write_bytes(b"")
        expect[f"wide/w{i:04}"] = 0
    # Stored without the mount (penstock fs cp -r, 16 files at once), walked through it.
    fsc.cli("fs", "cp", "-r", "--jobs", "16", "--quiet", str(src), "fs:/walk", "--container", "fs1")
    mp, _ = mounts.mount("m")
    start = time.time()
    seen = {}
    for root, dirs, files in os.walk(mp / "walk"):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), mp / "walk")
            seen[rel] = None
    walk_s = time.time() - start
    assert set(seen) == set(expect), f"{len(seen)} files walked, {len(expect)} stored"
    for rel in list(expect)[::97]:
        assert os.stat(mp / "walk" / rel).st_size == expect[rel]
    assert sorted(os.listdir(mp / "walk/wide")) == [f"w{i:04}" for i in range(600)]
    assert sh("ls", "-U", str(mp / "walk/wide")).count("\n") == 600
    print(f"os.walk of {len(seen)} files: {walk_s:.2f} s")


def test_close_to_open_between_two_mounts(mounts):
    a, _ = mounts.mount("a")
    b, _ = mounts.mount("b")
    # A name made on A is found on B at once (no negative entries are cached).
    with pytest.raises(FileNotFoundError):
        os.stat(b / "c2o.bin")
    (a / "c2o.bin").write_bytes(b"first")
    assert (b / "c2o.bin").read_bytes() == b"first"
    for rnd in range(4):
        os.stat(b / "c2o.bin")  # B holds the old attributes in its cache
        data = os.urandom((1 << 20) + 12345 * (rnd + 1) if rnd % 2 == 0 else 1000 + rnd)
        with open(a / "c2o.bin", "wb") as f:
            f.write(data)
        with open(b / "c2o.bin", "rb") as f:
            got = f.read()
        assert len(got) == len(data) and got == data, f"round {rnd}: B read {len(got)} bytes, A wrote {len(data)}"


RANGE_WORKER = r"""
import os, sys
path, k, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY)
data = bytes([65 + k]) * chunk
for piece in range(0, chunk, 256 * 1024):  # in pieces, interleaving with the other writers
    os.pwrite(fd, data[piece:piece + 256 * 1024], k * chunk + piece)
os.close(fd)
"""


def test_four_processes_write_disjoint_ranges_of_one_file(mounts):
    mp, _ = mounts.mount("m")
    path = mp / "ranges.bin"
    path.write_bytes(b"")
    chunk = (1 << 20) + 4096
    procs = [subprocess.Popen([sys.executable, "-c", RANGE_WORKER, str(path), str(k), str(chunk)])
             for k in (3, 1, 0, 2)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    got = path.read_bytes()
    assert len(got) == 4 * chunk
    for k in range(4):
        assert got[k * chunk:(k + 1) * chunk] == bytes([65 + k]) * chunk, f"range {k}"


EXCL_WORKER = r"""
import os, sys, time
d, start, names = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
for n in range(names):
    while time.time() < start + n * 0.25:
        time.sleep(0.001)
    try:
        fd = os.open(os.path.join(d, f"excl{n}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        print(n, "won", flush=True)
    except FileExistsError:
        print(n, "exists", flush=True)
"""


def test_exclusive_create_from_four_processes_over_two_mounts(mounts):
    a, _ = mounts.mount("a")
    b, _ = mounts.mount("b")
    names = 6
    start = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, "-c", EXCL_WORKER, str(d), str(start), str(names)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for d in (a, b, a, b)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        results.append(dict(line.split() for line in out.splitlines()))
    for n in range(names):
        outcomes = [r[str(n)] for r in results]
        assert outcomes.count("won") == 1, f"excl{n}: {outcomes}"
        winner = procs[outcomes.index("won")].pid
        assert (a / f"excl{n}").read_text() == str(winner) == (b / f"excl{n}").read_text()


def test_kill9_of_the_daemon_then_remount(mounts):
    mp, pid = mounts.mount("k")
    data = os.urandom(3 << 20)
    with open(mp / "kept.bin", "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    (mp / "small.txt").write_text("closed before the kill\n")
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 10
    while pid_alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    # Not a hang: the kernel answers at once (run apart, so a hang fails on timeout). A request
    # that races the kernel's teardown of the dead connection gets ECONNABORTED ("Software
    # caused connection abort"); every one after it ENOTCONN.
    p = subprocess.run(["stat", str(mp / "kept.bin")], capture_output=True, text=True, timeout=20)
    assert p.returncode != 0, p.stdout
    assert ("Transport endpoint is not connected" in p.stderr or "Software caused connection abort" in p.stderr), p.stderr
    p = subprocess.run(["ls", str(mp)], capture_output=True, text=True, timeout=20)
    assert p.returncode != 0 and "Transport endpoint is not connected" in p.stderr, p.stderr
    with pytest.raises(OSError) as e:
        os.listdir(mp)
    assert e.value.errno == errno.ENOTCONN
    sh("fusermount3", "-u", str(mp))
    assert not mounted(mp)
    mp2, _ = mounts.mount("k")
    assert (mp2 / "kept.bin").read_bytes() == data
    assert (mp2 / "small.txt").read_text() == "closed before the kill\n"


def test_names_over_255_bytes_are_refused(mounts):
    mp, _ = mounts.mount("m")
    d = mp / "names"
    d.mkdir()
    long_name = "n" * 256
    for make in (lambda p: os.open(p, os.O_CREAT | os.O_WRONLY, 0o644), os.mkdir, lambda p: os.symlink("x", p)):
        with pytest.raises(OSError) as e:
            make(str(d / long_name))
        assert e.value.errno == errno.ENAMETOOLONG
    (d / "ok").write_text("x")
    with pytest.raises(OSError) as e:
        os.rename(d / "ok", d / long_name)
    assert e.value.errno == errno.ENAMETOOLONG
    (d / ("m" * 255)).write_text("fits")
    assert sorted(os.listdir(d)) == ["m" * 255, "ok"]


def test_read_only_mount_refuses_every_change(mounts):
    rw, _ = mounts.mount("rw")
    (rw / "ro-test").mkdir(exist_ok=True)
    (rw / "ro-test/f").write_text("readable\n")
    ro, _ = mounts.mount("ro", "fs1", "--read-only")
    base = ro / "ro-test"
    assert (base / "f").read_text() == "readable\n"
    changes = [
        lambda: open(base / "f", "a"),
        lambda: open(base / "new", "w"),
        lambda: os.mkdir(base / "d"),
        lambda: os.unlink(base / "f"),
        lambda: os.rename(base / "f", base / "g"),
        lambda: os.chmod(base / "f", 0o600),
        lambda: os.truncate(base / "f", 0),
        lambda: os.symlink("f", base / "s"),
        lambda: os.setxattr(base / "f", "user.k", b"v"),
    ]
    for i, change in enumerate(changes):
        with pytest.raises(OSError) as e:
            change()
        assert e.value.errno == errno.EROFS, f"change {i}: {e.value}"
    assert (rw / "ro-test/f").read_text() == "readable\n"


def test_xattrs_with_size_probe_and_erange(mounts):
    mp, _ = mounts.mount("m")
    f = mp / "x.txt"
    f.write_text("x")
    os.setxattr(f, "user.color", b"blue")
    with pytest.raises(FileExistsError):
        os.setxattr(f, "user.color", b"red", os.XATTR_CREATE)
    with pytest.raises(OSError) as e:
        os.setxattr(f, "user.none", b"v", os.XATTR_REPLACE)
    assert e.value.errno == errno.ENODATA
    assert os.getxattr(f, "user.color") == b"blue"
    assert os.listxattr(f) == ["user.color"]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.getxattr.restype = ctypes.c_ssize_t
    path = str(f).encode()
    assert libc.getxattr(path, b"user.color", None, ctypes.c_size_t(0)) == 4  # the size probe
    buf = ctypes.create_string_buffer(2)
    assert libc.getxattr(path, b"user.color", buf, ctypes.c_size_t(2)) == -1
    assert ctypes.get_errno() == errno.ERANGE
    os.removexattr(f, "user.color")
    with pytest.raises(OSError) as e:
        os.getxattr(f, "user.color")
    assert e.value.errno == errno.ENODATA


def test_unlink_while_open_and_rename_flags(mounts):
    mp, _ = mounts.mount("m")
    with open(mp / "tmp.bin", "w+b") as f:
        f.write(b"still here")
        os.unlink(mp / "tmp.bin")
        assert not (mp / "tmp.bin").exists()
        f.seek(0)
        assert f.read() == b"still here"
        f.write(b" and more")
        f.flush()
        assert os.fstat(f.fileno()).st_size == 19
    assert "tmp.bin" not in os.listdir(mp)

    libc = ctypes.CDLL(None, use_errno=True)
    at_cwd = -100
    (mp / "one").write_text("1")
    (mp / "two").write_text("2")
    rename_noreplace, rename_exchange = 1, 2
    assert libc.renameat2(at_cwd, str(mp / "one").encode(), at_cwd, str(mp / "two").encode(), rename_noreplace) == -1
    assert ctypes.get_errno() == errno.EEXIST
    assert libc.renameat2(at_cwd, str(mp / "one").encode(), at_cwd, str(mp / "two").encode(), rename_exchange) == 0
    assert (mp / "one").read_text() == "2" and (mp / "two").read_text() == "1"
    os.rename(mp / "one", mp / "two")  # over an existing name
    assert (mp / "two").read_text() == "2" and not (mp / "one").exists()


def test_large_sequential_io(mounts):
    mp, _ = mounts.mount("m")
    data = os.urandom(24 << 20)
    start = time.time()
    with open(mp / "big.bin", "wb") as f:
        for off in range(0, len(data), 4 << 20):
            f.write(data[off:off + (4 << 20)])
    w = time.time() - start
    start = time.time()
    got = (mp / "big.bin").read_bytes()
    r = time.time() - start
    assert got == data
    with open(mp / "big.bin", "r+b") as f:  # a write in the middle, read back at an odd offset
        f.seek(5_000_001)
        f.write(b"MID")
        f.seek(4_999_999)
        assert f.read(7) == data[4_999_999:5_000_001] + b"MID" + data[5_000_004:5_000_006]
    with open(mp / "big.bin", "r+b") as f:  # a shared writable mapping, written back on msync
        m = mmap.mmap(f.fileno(), 0)
        m[(8 << 20) - 2:(8 << 20) + 3] = b"MMAP!"
        m.flush()
        m.close()
    with open(mp / "big.bin", "rb") as f:
        f.seek((8 << 20) - 2)
        assert f.read(5) == b"MMAP!"
    print(f"24 MiB: write {24 / w:.0f} MiB/s, read {24 / r:.0f} MiB/s")


def test_sigterm_ends_a_foreground_mount_cleanly(fsc, tmp_path):
    mp = tmp_path / "fg"
    mp.mkdir()
    p = subprocess.Popen([PENSTOCK, "mount", "fs1", str(mp), "-f", "--mgmt", fsc.mgmt], env=fsc.env,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        assert "serving 'fs1'" in line, line
        (mp / "fg.txt").write_text("written in the foreground\n")
        fd = os.open(mp / "fg-open.txt", os.O_CREAT | os.O_WRONLY)  # still open at SIGTERM
        os.write(fd, b"open")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0, p.stderr.read()
        assert not mounted(mp)
        # The daemon closed (flushed) the file on its way out; the descriptor is left with a
        # detached mount that has nobody to answer.
        with pytest.raises(OSError) as e:
            os.close(fd)
        assert e.value.errno == errno.ENOTCONN
        out = fsc.cli("fs", "ls", "/", "--container", "fs1", "--json").stdout
        assert {"fg.txt", "fg-open.txt"} <= {e["name"] for e in json.loads(out)}
        assert fsc.cli("fs", "stat", "/fg-open.txt", "--container", "fs1", "--json").stdout.count('"size":4') == 1
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if mounted(mp):
            subprocess.run(["umount", "-l", str(mp)], capture_output=True)


def test_mount_and_umount_errors_name_the_fix(fsc, mounts, tmp_path):
    def fails(*args):
        p = fsc.cli(*args, check=False)
        assert p.returncode == 1, p
        return p.stderr

    assert "does not exist; create it with `mkdir -p" in fails("mount", "fs1", str(tmp_path / "nowhere"))
    (tmp_path / "file").write_text("x")
    assert "is not a directory" in fails("mount", "fs1", str(tmp_path / "file"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full/x").write_text("x")
    assert "is not empty" in fails("mount", "fs1", str(tmp_path / "full"))
    fsc.cli("container", "create", "objects", "--redundancy", "none")
    (tmp_path / "e").mkdir()
    err = fails("mount", "objects", str(tmp_path / "e"))
    assert "penstock container create objects --type fs" in err, err
    assert not mounted(tmp_path / "e")
    mp, _ = mounts.mount("m")
    assert "already a mount point" in fails("mount", "fs1", str(mp))
    p = subprocess.run([PENSTOCK, "umount", str(tmp_path / "e")], capture_output=True, text=True)
    assert p.returncode == 1 and "is not a mount point" in p.stderr
    sh(PENSTOCK, "umount", str(mp))
    assert not mounted(mp)


def test_no_dev_fuse_is_said_plainly(fsc, tmp_path):
    """/dev hidden under an empty tmpfs in a private mount namespace: no /dev/fuse."""
    (tmp_path / "e").mkdir()
    cmd = (f"mount -t tmpfs none /dev && exec {PENSTOCK} mount fs1 {tmp_path / 'e'} --mgmt {fsc.mgmt}")
    p = subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True, text=True, timeout=30)
    if "unshare failed" in p.stderr or "Operation not permitted" in p.stderr:
        pytest.skip(f"cannot make a mount namespace here: {p.stderr.strip()}")
    assert p.returncode == 1, p
    assert "FUSE is unavailable: /dev/fuse is missing; load the fuse module" in p.stderr, p.stderr
