"""The dataset CLI end to end: `put -r` / `get -r` of directory trees (in parallel, what is
skipped and what fails), `put -` / `get -` through pipes, `ls --prefix` and `ls -l`, `stat`'s
time, and where `get` may write (never replacing anything but a regular file)."""
import json
import os
import re
import signal
import socket
import stat
import subprocess
import threading
import time

import pytest

from conftest import PENSTOCK, Cluster

ISO_LOCAL = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$")


@pytest.fixture(scope="module")
def dc(tmp_path_factory):
    """One 3-target cluster with a rep:2 container "ds", shared by the tests of this module."""
    c = Cluster(tmp_path_factory.mktemp("dataset-cluster"), targets=3)
    try:
        c.cli("container", "create", "ds", "--redundancy", "rep:2")
        yield c
    finally:
        c.stop()


def make_tree(root, files):
    """`files`: relative path -> bytes."""
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def read_tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def popen(c, *args, **kw):
    return subprocess.Popen([PENSTOCK, *args, "--mgmt", c.mgmt], env=c.env, **kw)


def test_put_get_tree_roundtrip_in_parallel(dc, tmp_path):
    files = {f"d{i % 7}/sub{i % 3}/f{i}.bin": os.urandom(i * 997) for i in range(120)}
    files["empty"] = b""
    files["big/one.bin"] = os.urandom((3 << 20) + 5)  # several stripes
    files["name with spaces/ü.txt"] = b"unicode"
    src = tmp_path / "src"
    make_tree(src, files)
    out = json.loads(dc.cli("put", "-r", str(src), "train/v1", "--container", "ds", "--jobs", "8",
                            "--json").stdout)
    assert out["files"] == len(files) and out["failed"] == 0 and out["skipped"] == 0, out
    assert out["bytes"] == sum(len(v) for v in files.values())
    assert out["seconds"] > 0 and out["files_per_s"] > 0 and out["mb_per_s"] > 0

    names = {o["name"] for o in json.loads(dc.cli("ls", "--container", "ds", "--prefix", "train/v1/",
                                                  "--json").stdout)}
    assert names == {"train/v1/" + k for k in files}

    dst = tmp_path / "dst"
    p = dc.cli("get", "-r", "train/v1", str(dst), "--container", "ds", "--jobs", "16")
    assert read_tree(dst) == files
    # Not a terminal: no bar, a summary line.
    assert "\r" not in p.stderr
    assert re.search(rf"get {len(files)} files, .* MB/s, .* files/s; 0 failed, 0 skipped", p.stderr), p.stderr
    # Nothing left beside the files.
    assert not [p for p in dst.rglob(".*penstock-*")]

    # Again over an existing tree: regular files are replaced.
    (dst / "empty").write_bytes(b"old")
    dc.cli("get", "-r", "train/v1/", str(dst), "--container", "ds", "--quiet")
    assert read_tree(dst) == files


def test_put_tree_skips_links_and_special_files(dc, tmp_path):
    src = tmp_path / "src"
    make_tree(src, {"a/real": b"x" * 100, "b": b"yy"})
    os.symlink("a/real", src / "link")
    os.symlink(str(src / "a"), src / "dirlink")
    os.mkfifo(src / "a" / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(src / "sock"))
    try:
        p = dc.cli("put", "-r", str(src), "skip", "--container", "ds", "--json", check=False)
    finally:
        sock.close()
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["files"] == 2 and out["failed"] == 0 and out["skipped"] == 4, out
    why = {os.path.basename(s["path"]): s["why"] for s in out["skipped_files"]}
    assert "symbolic link" in why["link"] and "symbolic link" in why["dirlink"]
    assert "FIFO" in why["fifo"] and "socket" in why["sock"]
    for name in ("link", "dirlink", "fifo", "sock"):
        assert f"skipped '{src}" in p.stderr and name in p.stderr
    names = {o["name"] for o in json.loads(dc.cli("ls", "--container", "ds", "--prefix", "skip/",
                                                  "--json").stdout)}
    assert names == {"skip/a/real", "skip/b"}


def test_get_tree_one_failure_does_not_stop_the_others(dc, tmp_path):
    src = tmp_path / "src"
    files = {f"f{i}": os.urandom(1000 + i) for i in range(20)}
    make_tree(src, files)
    dc.cli("put", "-r", str(src), "partial", "--container", "ds")
    dst = tmp_path / "dst"
    (dst / "f7").mkdir(parents=True)  # a directory in the way of one object
    p = dc.cli("get", "-r", "partial", str(dst), "--container", "ds", "--json", check=False)
    assert p.returncode == 1
    out = json.loads(p.stdout)
    assert out["files"] == 19 and out["failed"] == 1, out
    assert out["failures"][0]["name"] == "partial/f7" and "directory" in out["failures"][0]["error"]
    assert "partial/f7" in p.stderr and "directory" in p.stderr
    got = read_tree(dst)
    assert got == {k: v for k, v in files.items() if k != "f7"}


def test_get_tree_never_leaves_the_directory(dc, tmp_path):
    """Names that are not paths under DIR are refused; a link inside DIR is not followed."""
    blob = tmp_path / "blob"
    blob.write_bytes(b"escape")
    dc.cli("put", str(blob), "esc/../../outside", "--container", "ds")
    dc.cli("put", str(blob), "esc/lnk/x", "--container", "ds")
    dc.cli("put", str(blob), "esc/ok", "--container", "ds")
    dst = tmp_path / "dst"
    dst.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(str(elsewhere), dst / "lnk")
    p = dc.cli("get", "-r", "esc", str(dst), "--container", "ds", "--json", check=False)
    assert p.returncode == 1
    out = json.loads(p.stdout)
    assert out["files"] == 1 and out["failed"] == 2, out
    assert (dst / "ok").read_bytes() == b"escape"
    assert not (tmp_path / "outside").exists() and list(elsewhere.iterdir()) == []


def test_get_tree_with_nothing_to_get(dc, tmp_path):
    p = dc.cli("get", "-r", "no-such-prefix", str(tmp_path / "d"), "--container", "ds", check=False)
    assert p.returncode != 0
    assert "no-such-prefix" in p.stderr and "ls --container ds --prefix" in p.stderr


def test_put_directory_without_r_says_how(dc, tmp_path):
    p = dc.cli("put", str(tmp_path), "x", "--container", "ds", check=False)
    assert p.returncode == 2 and "put -r" in p.stderr, p.stderr


def test_stdin_and_stdout_are_binary_safe(dc, tmp_path):
    data = os.urandom((5 << 20) + 3) + b"\0\n\r\xff"
    p = popen(dc, "put", "-", "piped", "--container", "ds", stdin=subprocess.PIPE,
              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(data, timeout=120)
    assert p.returncode == 0, err
    assert out == b""
    p = popen(dc, "get", "piped", "-", "--container", "ds", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert out == data  # nothing else on stdout
    assert not (tmp_path / "-").exists() and not os.path.exists("-")
    # Standard input that is a regular file is stored as is.
    f = tmp_path / "in.bin"
    f.write_bytes(data[:12345])
    with open(f, "rb") as stdin:
        subprocess.run([PENSTOCK, "put", "-", "fromfile", "--container", "ds", "--mgmt", dc.mgmt], env=dc.env,
                       stdin=stdin, check=True, capture_output=True)
    p = popen(dc, "get", "fromfile", "-", "--container", "ds", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.communicate(timeout=120)[0] == data[:12345]
    # An empty stdin is an empty object.
    subprocess.run([PENSTOCK, "put", "-", "nothing", "--container", "ds", "--mgmt", dc.mgmt], env=dc.env,
                   input=b"", check=True, capture_output=True)
    assert json.loads(dc.cli("stat", "nothing", "--container", "ds", "--json").stdout)["size"] == 0


def test_get_writes_devices_and_fifos_in_place(dc, tmp_path):
    data = os.urandom(2 << 20)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    dc.cli("put", str(src), "dev", "--container", "ds")
    # /dev/null, and a link to it: both stay what they are.
    dc.cli("get", "dev", "/dev/null", "--container", "ds")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    link = tmp_path / "to-null"
    os.symlink("/dev/null", link)
    dc.cli("get", "dev", str(link), "--container", "ds")
    assert os.path.islink(link) and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    # /dev/stdout with stdout a pipe: the bytes come through the pipe, the link stays.
    p = popen(dc, "get", "dev", "/dev/stdout", "--container", "ds", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.communicate(timeout=120)[0] == data and p.returncode == 0
    assert os.path.islink("/dev/stdout")
    # /dev/stdout with stdout redirected to a file: the file gets the bytes, nothing is renamed.
    redirected = tmp_path / "redirected"
    with open(redirected, "wb") as f:
        subprocess.run([PENSTOCK, "get", "dev", "/dev/stdout", "--container", "ds", "--mgmt", dc.mgmt],
                       env=dc.env, stdout=f, stderr=subprocess.PIPE, check=True)
    assert redirected.read_bytes() == data and os.path.islink("/dev/stdout")
    # A FIFO: written in place, read by another thread.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    dc.cli("get", "dev", str(fifo), "--container", "ds")
    reader.join(60)
    assert got == [data] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_get_refuses_other_kinds_by_name(dc, tmp_path):
    src = tmp_path / "in.bin"
    src.write_bytes(b"abc")
    dc.cli("put", str(src), "kinds", "--container", "ds")
    p = dc.cli("get", "kinds", str(tmp_path), "--container", "ds", check=False)
    assert p.returncode != 0 and "is a directory" in p.stderr, p.stderr
    sock_path = tmp_path / "s"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        p = dc.cli("get", "kinds", str(sock_path), "--container", "ds", check=False)
    finally:
        sock.close()
    assert p.returncode != 0 and "is a socket" in p.stderr, p.stderr
    assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    dangling = tmp_path / "dangling"
    os.symlink(tmp_path / "nowhere", dangling)
    p = dc.cli("get", "kinds", str(dangling), "--container", "ds", check=False)
    assert p.returncode != 0 and "symbolic link" in p.stderr, p.stderr
    assert not (tmp_path / "nowhere").exists()


def test_get_replaces_regular_files_atomically(dc, tmp_path):
    data = os.urandom(3 << 20)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    dc.cli("put", str(src), "reg", "--container", "ds")
    dst = tmp_path / "dst"
    dst.write_bytes(b"old")
    os.chmod(dst, 0o640)
    dc.cli("get", "reg", str(dst), "--container", "ds")
    assert dst.read_bytes() == data and stat.S_IMODE(os.stat(dst).st_mode) == 0o640
    # A link to a regular file: the file is replaced, the link kept.
    link = tmp_path / "link"
    os.symlink(dst.name, link)
    dst.write_bytes(b"old")
    dc.cli("get", "reg", str(link), "--container", "ds")
    assert os.path.islink(link) and dst.read_bytes() == data
    # A failed get leaves the old file and no temporary file.
    dst.write_bytes(b"old")
    p = dc.cli("get", "no-such-object", str(dst), "--container", "ds", check=False)
    assert p.returncode != 0 and dst.read_bytes() == b"old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["dst", "in.bin", "link"]


def test_ls_prefix_long_and_stat_time(dc, tmp_path):
    src = tmp_path / "in.bin"
    src.write_bytes(b"12345")
    for name in ("lsp/a", "lsp/b/c", "lsq/d"):
        dc.cli("put", str(src), name, "--container", "ds")
    lines = dc.cli("ls", "--container", "ds", "--prefix", "lsp/").stdout.splitlines()
    assert [ln.split()[-1] for ln in lines] == ["lsp/a", "lsp/b/c"]
    long = dc.cli("ls", "-l", "--container", "ds", "--prefix", "lsp").stdout.splitlines()
    assert len(long) == 2
    size, when, name = long[0].split()
    assert size == "5" and name == "lsp/a" and ISO_LOCAL.match(when), long[0]
    js = json.loads(dc.cli("ls", "--container", "ds", "--prefix", "lsq", "--json").stdout)
    assert [o["name"] for o in js] == ["lsq/d"] and isinstance(js[0]["mtime_ms"], int)
    assert ISO_LOCAL.match(js[0]["mtime"])
    assert dc.cli("ls", "--container", "ds", "--prefix", "nothing/").stdout == ""
    st = dc.cli("stat", "lsp/a", "--container", "ds").stdout
    assert re.search(r"^mtime \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$", st, re.M), st
    assert "mtime_ms" not in st
    sj = json.loads(dc.cli("stat", "lsp/a", "--container", "ds", "--json").stdout)
    assert abs(sj["mtime_ms"] / 1000 - os.path.getmtime(src)) < 600 and ISO_LOCAL.match(sj["mtime"])


def test_local_time_follows_tz(dc, tmp_path):
    src = tmp_path / "in.bin"
    src.write_bytes(b"t")
    dc.cli("put", str(src), "tz", "--container", "ds")
    env = dict(dc.env, TZ="IST-5:30")
    p = subprocess.run([PENSTOCK, "stat", "tz", "--container", "ds", "--mgmt", dc.mgmt], env=env,
                       capture_output=True, text=True, check=True)
    assert re.search(r"^mtime \S+\+05:30$", p.stdout, re.M), p.stdout


def test_ctrl_c_stops_a_put_from_stdin_and_a_get_into_a_fifo(dc, tmp_path):
    """Ctrl-C while stdin is still open stores nothing; while a FIFO's reader stalls it stops
    the get, says so, and exits 130."""
    p = popen(dc, "put", "-", "never", "--container", "ds", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
              stderr=subprocess.PIPE)
    p.stdin.write(b"partial data")
    p.stdin.flush()
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=30)  # stops by itself, stdin still open
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and b"interrupted; nothing was stored" in err, err
    assert dc.cli("stat", "never", "--container", "ds", check=False).returncode != 0

    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(8 << 20))
    dc.cli("put", str(src), "stall", "--container", "ds")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that never reads
    try:
        p = popen(dc, "get", "stall", str(fifo), "--container", "ds", stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
        time.sleep(1.5)
        assert p.poll() is None
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        os.close(reader)
    assert p.returncode == 130 and b"interrupted; part of the object was written" in err, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
