"""Tenants and API keys end to end: `penstock up --auth`, tenants A and B, isolation of their
containers, refusal without a valid key, revocation. (Forged, expired, wrong-container,
read-only and revoked capability tokens sent raw to a live target are covered by
src/client/security_test.cc.)"""
import json

import pytest


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    from conftest import Cluster
    c = Cluster(tmp_path_factory.mktemp("secure"), targets=2, extra_args=("--auth",))
    c.admin_key = (c.data_dir / "admin.key").read_text().strip()
    assert c.info["admin_key_file"] == str(c.data_dir / "admin.key")
    assert (c.data_dir / "admin.key").stat().st_mode & 0o077 == 0
    yield c
    c.stop()


def tenant(c, name):
    out = c.cli("tenant", "create", name, "--api-key", c.admin_key, "--json").stdout
    t = json.loads(out)
    assert t["name"] == name and t["api_key"].startswith("psk_")
    return t["api_key"]


def test_tenants_isolated(secure, tmp_path):
    a, b = tenant(secure, "alice"), tenant(secure, "bob")
    names = [t["name"] for t in json.loads(secure.cli("tenant", "ls", "--api-key", secure.admin_key,
                                                      "--json").stdout)]
    assert names == ["alice", "bob"]
    secure.cli("container", "create", "ca", "--api-key", a)
    secure.cli("container", "create", "cb", "--api-key", b)
    src = tmp_path / "in.bin"
    src.write_bytes(b"alice's data" * 1000)
    secure.cli("put", str(src), "o", "--container", "ca", "--api-key", a)
    dst = tmp_path / "out.bin"
    secure.cli("get", "o", str(dst), "--container", "ca", "--api-key", a)
    assert dst.read_bytes() == src.read_bytes()

    ls_b = json.loads(secure.cli("container", "ls", "--api-key", b, "--json").stdout)
    assert [c["name"] for c in ls_b] == ["cb"]
    for args in (["ls", "--container", "ca"], ["get", "o", str(tmp_path / "x"), "--container", "ca"],
                 ["stat", "o", "--container", "ca"], ["rm", "o", "--container", "ca"],
                 ["container", "rm", "ca", "--force"]):
        p = secure.cli(*args, "--api-key", b, check=False)
        assert p.returncode == 1, args
        assert "another tenant" in p.stderr, (args, p.stderr)
    assert not (tmp_path / "x").exists()
    # The key can come from the environment too.
    env = dict(secure.env, PENSTOCK_API_KEY=a)
    from conftest import run
    out = run(["ls", "--container", "ca", "--mgmt", secure.mgmt, "--json"], env=env).stdout
    assert [o["name"] for o in json.loads(out)] == ["o"]


def test_no_or_bad_key_refused(secure):
    for key in ([], ["--api-key", "psk_wrong"]):
        p = secure.cli("container", "ls", *key, check=False)
        assert p.returncode == 1
        assert "API key" in p.stderr, p.stderr
    p = secure.cli("container", "create", "nokey", check=False)
    assert p.returncode == 1
    # Tenant administration needs the admin key.
    a = tenant(secure, "carol")
    p = secure.cli("tenant", "ls", "--api-key", a, check=False)
    assert p.returncode == 1 and "admin key" in p.stderr
    # The admin key works for the default tenant's containers.
    secure.cli("container", "create", "admins", "--api-key", secure.admin_key)
    # Status stays open (no key needed).
    st = json.loads(secure.cli("status", "--json").stdout)
    assert st["targets_up"] == 2


def test_revoked_tenant(secure, tmp_path):
    d = tenant(secure, "dave")
    secure.cli("container", "create", "cd", "--api-key", d)
    src = tmp_path / "in.bin"
    src.write_bytes(b"x" * 10000)
    secure.cli("put", str(src), "o", "--container", "cd", "--api-key", d)
    secure.cli("tenant", "rm", "dave", "--api-key", secure.admin_key)
    p = secure.cli("get", "o", str(tmp_path / "out"), "--container", "cd", "--api-key", d, check=False)
    assert p.returncode == 1 and "API key" in p.stderr, p.stderr
    names = [t["name"] for t in json.loads(secure.cli("tenant", "ls", "--api-key", secure.admin_key,
                                                      "--json").stdout)]
    assert "dave" not in names


def test_default_cluster_needs_no_key(cluster_factory, tmp_path):
    c = cluster_factory(targets=1)
    assert not (c.data_dir / "admin.key").exists()
    c.cli("container", "create", "plain")
    src = tmp_path / "in.bin"
    src.write_bytes(b"y" * 5000)
    c.cli("put", str(src), "o", "--container", "plain")
    c.cli("get", "o", str(tmp_path / "out"), "--container", "plain")
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
