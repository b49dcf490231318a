"""`penstock fs ls|mkdir|cp|rm|stat|du|format` and `container create --type fs` end to end: a file
system container used without a mount, on a 3-target cluster; --json output of each, and
errors that name the path and the errno. Needs no FUSE."""
import json
import os
from pathlib import Path

import pytest

from conftest import Cluster


@pytest.fixture(scope="module")
def fc(tmp_path_factory):
    """A 3-target cluster with file system container "docs" (rep:2)."""
    c = Cluster(tmp_path_factory.mktemp("fs-cli-cluster"), targets=3)
    try:
        out = c.cli("container", "create", "docs", "--type", "fs", "--redundancy", "rep:2")
        assert "created file system container 'docs'" in out.stdout
        assert "penstock mount docs DIR" in out.stdout
        yield c
    finally:
        c.stop()


def fs(c, *args, check=True):
    return c.cli("fs", *args, "--container", "docs", check=check)


def fs_json(c, *args):
    return json.loads(fs(c, *args, "--json").stdout)


def fails(c, *args):
    """Runs a failing `penstock fs` command: (stderr line, --json error object)."""
    p = fs(c, *args, check=False)
    assert p.returncode == 1, p
    pj = fs(c, *args, "--json", check=False)
    assert pj.returncode == 1, pj
    return p.stderr, json.loads(pj.stdout)["error"]


def test_mkdir_ls_stat(fc):
    fs(fc, "mkdir", "/a")
    assert fs_json(fc, "mkdir", "-p", "/a/b/c", "/x/y") == {"created": ["/a/b/c", "/x/y"]}
    fs(fc, "mkdir", "-p", "/a/b")  # existing: fine with -p
    assert fs(fc, "ls", "/a/b").stdout == "c\n"
    names = {e["name"]: e["type"] for e in fs_json(fc, "ls", "/")}
    assert names["a"] == "directory" and names["x"] == "directory"
    st = fs_json(fc, "stat", "fs:/a/b/c")
    assert st["type"] == "directory" and st["path"] == "/a/b/c" and st["mode"] == "0755", st
    text = fs(fc, "stat", "/a").stdout
    assert "type directory" in text and "mode 0755 (drwxr-xr-x)" in text


def test_cp_file_in_and_out_and_ls_long(fc, tmp_path):
    local = tmp_path / "model.bin"
    data = os.urandom((5 << 20) + 17)  # several stripes and a partial one
    local.write_bytes(data)
    os.chmod(local, 0o640)
    fs(fc, "mkdir", "-p", "/files")
    out = json.loads(fc.cli("fs", "cp", str(local), "fs:/files/", "--container", "docs", "--json").stdout)
    assert out["files"] == 1 and out["bytes"] == len(data) and out["failed"] == 0
    fs(fc, "cp", str(local), "fs:/files/renamed.bin")
    long = fs_json(fc, "ls", "-l", "/files")
    assert {e["name"]: (e["size"], e["mode"]) for e in long} == {
        "model.bin": (len(data), "0640"), "renamed.bin": (len(data), "0640")}
    line = fs(fc, "ls", "-l", "/files/model.bin").stdout
    assert line.startswith("-rw-r-----") and str(len(data)) in line and line.rstrip().endswith("/files/model.bin")
    back = tmp_path / "back.bin"
    fs(fc, "cp", "fs:/files/model.bin", str(back))
    assert back.read_bytes() == data
    (tmp_path / "dir").mkdir()
    fs(fc, "cp", "fs:/files/renamed.bin", str(tmp_path / "dir"))
    assert (tmp_path / "dir/renamed.bin").read_bytes() == data


def make_tree(root):
    files = {}
    for d in range(3):
        for i in range(15):
            rel = f"d{d}/s{i % 3}/f{i}.txt"
            files[rel] = os.urandom(i * 311)
    files["top.bin"] = os.urandom(70_000)
    files["empty"] = b""
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "emptydir").mkdir()
    os.symlink("top.bin", root / "link")
    os.mkfifo(root / "fifo")
    return files


def read_tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def test_cp_r_round_trip_du_and_rm_r(fc, tmp_path):
    src = tmp_path / "tree"
    files = make_tree(src)
    p = fc.cli("fs", "cp", "-r", str(src), "fs:/", "--container", "docs", "--jobs", "4")
    assert "skipped 'tree/fifo'" in p.stderr.replace(str(tmp_path) + "/", "") or "fifo" in p.stderr, p.stderr
    assert f"cp {len(files)} files" in p.stderr and "1 skipped" in p.stderr, p.stderr
    ls = {e["name"]: e for e in fs_json(fc, "ls", "-l", "/tree")}
    assert set(ls) == {"d0", "d1", "d2", "top.bin", "empty", "emptydir", "link"}
    assert ls["link"]["type"] == "symlink" and ls["link"]["target"] == "top.bin"

    du = fs_json(fc, "du", "/tree")
    assert du == {"path": "/tree", "bytes": sum(map(len, files.values())), "files": len(files),
                  "directories": 1 + 3 + 9 + 1, "symlinks": 1}
    assert f"{du['bytes']} bytes in {len(files)} files" in fs(fc, "du", "/tree").stdout

    out = tmp_path / "out"
    res = json.loads(fc.cli("fs", "cp", "-r", "fs:/tree", str(out), "--container", "docs", "--json").stdout)
    assert res["files"] == len(files) and res["symlinks"] == 1 and res["failed"] == 0
    assert read_tree(out) == files
    assert os.readlink(out / "link") == "top.bin" and (out / "emptydir").is_dir()

    err, j = fails(fc, "rm", "/tree")
    assert "'/tree': EISDIR" in err and "-r" in err, err
    assert j["errno"] == "EISDIR"
    assert fs_json(fc, "rm", "-r", "/tree") == {"removed": ["/tree"]}
    assert "tree" not in {e["name"] for e in fs_json(fc, "ls", "/")}


def test_rm_files_force_and_errors(fc, tmp_path):
    (tmp_path / "f").write_text("x")
    fs(fc, "mkdir", "-p", "/rm")
    fs(fc, "cp", str(tmp_path / "f"), "fs:/rm/f")
    fs(fc, "rm", "/rm/f")
    err, j = fails(fc, "rm", "/rm/f")
    assert "'/rm/f': ENOENT" in err and j["errno"] == "ENOENT", (err, j)
    fs(fc, "rm", "-f", "/rm/f")  # missing, but -f
    err, j = fails(fc, "ls", "/no/such/dir")
    assert "'/no/such/dir': ENOENT" in err and j["errno"] == "ENOENT"
    err, j = fails(fc, "mkdir", "/no/parent")
    assert "'/no/parent': ENOENT" in err
    err, j = fails(fc, "mkdir", "/rm/" + "n" * 256)
    assert "ENAMETOOLONG" in err and j["errno"] == "ENAMETOOLONG", err
    fs(fc, "mkdir", "/rm/full")
    fs(fc, "cp", str(tmp_path / "f"), "fs:/rm/full/f")
    err, j = fails(fc, "mkdir", "/rm/full/f/below")
    assert "ENOTDIR" in err and j["errno"] == "ENOTDIR"
    err, _ = fails(fc, "cp", str(tmp_path / "nothing"), "fs:/rm/x")
    assert "nothing" in err and "No such file" in err
    err, _ = fails(fc, "cp", "-r", "fs:/rm/missing", str(tmp_path / "o"))
    assert "'/rm/missing': ENOENT" in err
    err, _ = fails(fc, "cp", "fs:/rm/full", str(tmp_path / "o"))
    assert "is a directory; copy trees with -r" in err


def test_usage_errors_and_containers_without_a_file_system(fc, tmp_path):
    p = fc.cli("fs", "cp", "a", "b", "--container", "docs", check=False)
    assert p.returncode == 2 and "mark exactly one of SRC and DST with fs:" in p.stderr
    p = fc.cli("container", "create", "bad", "--type", "block", check=False)
    assert p.returncode == 2 and "block" in p.stderr
    fc.cli("container", "create", "plain", "--redundancy", "none")
    p = fc.cli("fs", "ls", "/", "--container", "plain", check=False)
    assert p.returncode == 1 and "--type fs" in p.stderr and "fs format --container plain" in p.stderr, p.stderr
    p = fc.cli("fs", "ls", "/", "--container", "nosuch", check=False)
    assert p.returncode == 1 and "nosuch" in p.stderr
    # An empty object container can be formatted afterwards; a formatted one cannot again.
    fc.cli("fs", "format", "--container", "plain")
    assert fc.cli("fs", "ls", "/", "--container", "plain").stdout == ""
    p = fc.cli("fs", "format", "--container", "plain", "--json", check=False)
    assert p.returncode == 1 and json.loads(p.stdout)["error"]["errno"] == "EEXIST"
