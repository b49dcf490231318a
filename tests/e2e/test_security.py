"""Tenants and API keys end to end: `penstock up --auth`, tenants A and B, isolation of their
containers, refusal without a valid key, revocation. TLS on the control plane: `penstock up
--tls`, clients with the generated certificate, and plaintext / certificate-less / foreign
clients refused with one line. (Forged, expired, wrong-container,
read-only and revoked capability tokens sent raw to a live target are covered by
src/client/security_test.cc.)"""
import json
import os
import subprocess

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


def test_target_without_the_admin_key_cannot_join(secure, tmp_path):
    """A target receives the cluster keys, so on an --auth cluster only one holding the admin
    key registers; `penstock up --auth` gives its targets the key file."""
    from conftest import PENSTOCK
    argv = [PENSTOCK, "target", "--data-dir", str(tmp_path / "rogue"), "--mgmt", secure.mgmt,
            "--port", "0", "--metrics-port", "0", "--capacity", "64M", "--segment-size", "4M"]
    env = {k: v for k, v in secure.env.items() if k != "PENSTOCK_ADMIN_KEY"}
    for extra in ([], ["--admin-key", "psk_wrong"], ["--admin-key", tenant(secure, "erin")]):
        p = subprocess.run(argv + extra, env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 1, p.stderr
        assert "admin API key" in p.stderr and "--admin-key-file" in p.stderr, p.stderr
    st = json.loads(secure.cli("status", "--json").stdout)
    assert len(st["targets"]) == 2
    assert all("--admin-key-file" in d["argv"] for d in secure.record["daemons"] if d["name"] != "mgmt")


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


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    from conftest import Cluster
    c = Cluster(tmp_path_factory.mktemp("tls"), targets=2, tls=True)
    yield c
    c.stop()


def test_tls_cluster_put_get(tls_cluster, tmp_path):
    c = tls_cluster
    tls_dir = c.data_dir / "tls"
    for name in ("ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key"):
        assert (tls_dir / name).stat().st_size > 0, name
    for name in ("ca.key", "server.key", "client.key"):
        assert (tls_dir / name).stat().st_mode & 0o077 == 0, name
    assert c.info["tls"] == {"ca": str(tls_dir / "ca.pem"), "cert": str(tls_dir / "client.pem"),
                             "key": str(tls_dir / "client.key")}
    assert c.record["tls"] == c.info["tls"]
    mgmt_argv = c.daemon("mgmt")["argv"]
    assert "--tls-ca" in mgmt_argv and "--tls-cert" in mgmt_argv
    assert "--tls-cert" in c.daemon("target-1")["argv"]

    st = json.loads(c.cli("status", "--json").stdout)
    assert st["targets_up"] == 2
    c.cli("container", "create", "sec")
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    c.cli("put", str(src), "obj", "--container", "sec")
    dst = tmp_path / "out.bin"
    c.cli("get", "obj", str(dst), "--container", "sec")
    assert dst.read_bytes() == src.read_bytes()

    # The credentials can come from the environment, as `up --tls` suggests.
    from conftest import run
    t = c.info["tls"]
    env = dict(c.env, PENSTOCK_MGMT=c.mgmt, PENSTOCK_TLS_CA=t["ca"], PENSTOCK_TLS_CERT=t["cert"],
               PENSTOCK_TLS_KEY=t["key"])
    out = run(["ls", "--container", "sec", "--json"], env=env).stdout
    assert [o["name"] for o in json.loads(out)] == ["obj"]
    # A restarted target comes back with the TLS flags `up` recorded.
    c.kill9("target-2")
    c.restart("target-2")
    c.wait_targets_up(2)


def one_line_refusal(p, *hints):
    assert p.returncode == 1, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("penstock: error: mgmt at "), p.stderr
    for h in hints:
        assert h in lines[0], (h, p.stderr)


def test_tls_cluster_refuses_plaintext_and_foreign_clients(tls_cluster, tmp_path):
    from conftest import run
    c = tls_cluster
    t = c.info["tls"]
    # Plaintext.
    p = run(["status", "--mgmt", c.mgmt], env=c.env, check=False)
    one_line_refusal(p, c.mgmt, "--tls-ca")
    p = run(["container", "ls", "--mgmt", c.mgmt], env=c.env, check=False)
    one_line_refusal(p, c.mgmt, "--tls-ca")
    # TLS without a client certificate.
    p = run(["container", "ls", "--mgmt", c.mgmt, "--tls-ca", t["ca"]], env=c.env, check=False)
    one_line_refusal(p, c.mgmt, "--tls-cert")
    # A certificate from another CA (another `up --tls` cluster's).
    from conftest import Cluster
    other = Cluster(tmp_path / "other", targets=1, tls=True)
    try:
        o = other.info["tls"]
        p = run(["container", "ls", "--mgmt", c.mgmt, "--tls-ca", t["ca"], "--tls-cert", o["cert"],
                 "--tls-key", o["key"]], env=c.env, check=False)
        one_line_refusal(p, c.mgmt, "--tls-cert")
        # And mgmt's certificate is not from the CA this client trusts.
        p = run(["status", "--mgmt", c.mgmt, *other.tls_args], env=c.env, check=False)
        one_line_refusal(p, c.mgmt, "--tls-ca")
    finally:
        other.stop()
    # A missing file is named.
    p = run(["status", "--mgmt", c.mgmt, "--tls-ca", str(tmp_path / "nope.pem")], env=c.env, check=False)
    assert p.returncode == 1 and "nope.pem' (--tls-ca) does not exist" in p.stderr, p.stderr
    # The refusals are in mgmt's log, not on the clients' terminals.
    assert "Handshake failed" in open(c.daemon("mgmt")["log"]).read()
