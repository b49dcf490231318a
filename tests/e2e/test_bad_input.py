"""Bad input gets a one-line error naming the thing and the fix, a non-zero exit code, and
no crash."""
import json
import os
import socket
import subprocess

from conftest import PENSTOCK, run


def one_line_error(proc, *needles):
    assert proc.returncode != 0, proc
    assert proc.returncode < 128, f"crashed: {proc.returncode}"
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("penstock"), err
    for n in needles:
        assert n in err, (n, err)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_mgmt():
    port = free_port()
    for args in (["status"], ["ls", "--container", "x"], ["container", "ls"]):
        r = run([*args, "--mgmt", f"127.0.0.1:{port}"], check=False, timeout=60)
        one_line_error(r, f"127.0.0.1:{port}", "--mgmt")


def test_bad_flags():
    r = run(["up", "--targets", "0", "--data-dir", "/tmp/x"], check=False)
    assert r.returncode == 2 and "--targets" in r.stderr
    r = run(["put"], check=False)
    assert r.returncode == 2 and "LOCAL" in r.stderr
    r = run(["frobnicate"], check=False)
    assert r.returncode == 2
    r = run(["target", "--data-dir", "/tmp/x", "--port", "70000"], check=False)
    assert r.returncode == 2 and "--port" in r.stderr
    r = run(["container", "create", "c", "--stripe-unit", "12Q", "--mgmt", "127.0.0.1:1"], check=False)
    one_line_error(r, "--stripe-unit")


def test_bad_config_file(tmp_path):
    cfg = tmp_path / "target.toml"
    cfg.write_text("data-dir = \"/tmp/x\"\nprot = 5\n")
    r = run(["target", "--config", str(cfg)], check=False)
    assert r.returncode == 2 and "prot" in r.stderr and str(cfg) in r.stderr
    cfg.write_text("data-dir = \"/tmp/x\"\nport = \"many\"\n")
    r = run(["target", "--config", str(cfg)], check=False)
    assert r.returncode == 2 and "port" in r.stderr
    r = run(["target", "--config", str(tmp_path / "missing.toml")], check=False)
    assert r.returncode == 2 and "missing.toml" in r.stderr


def test_env_config_and_flags_precedence(tmp_path):
    # The env var names the mgmt; an unreachable one proves it was used.
    port = free_port()
    env = dict(os.environ, PENSTOCK_MGMT=f"127.0.0.1:{port}")
    r = run(["status"], env=env, check=False, timeout=60)
    one_line_error(r, f"127.0.0.1:{port}")
    other = free_port()
    r = run(["status", "--mgmt", f"127.0.0.1:{other}"], env=env, check=False, timeout=60)
    one_line_error(r, f"127.0.0.1:{other}")


def test_data_dir_not_writable():
    r = run(["up", "--data-dir", "/proc/penstock-test", "--base-port", "0"], check=False)
    one_line_error(r, "/proc/penstock-test", "--data-dir")


def test_port_in_use(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        r = run(["up", "--data-dir", str(tmp_path / "c"), "--base-port", str(port)], check=False)
        one_line_error(r, str(port), "--base-port")
        r = run(["mgmt", "--data-dir", str(tmp_path / "m"), "--listen", f"127.0.0.1:{port}",
                 "--metrics-listen", "127.0.0.1:0"], check=False, timeout=30)
        assert r.returncode == 1 and str(port) in r.stderr and "--listen" in r.stderr
        # Its metrics port taken: the error names mgmt's own flag for it.
        r = run(["mgmt", "--data-dir", str(tmp_path / "m2"), "--listen", "127.0.0.1:0",
                 "--metrics-listen", f"127.0.0.1:{port}"], check=False, timeout=30)
        assert r.returncode == 1 and str(port) in r.stderr and "--metrics-listen" in r.stderr, r.stderr
    finally:
        s.close()


def test_target_with_unreachable_mgmt(tmp_path):
    port = free_port()
    r = subprocess.run([PENSTOCK, "target", "--data-dir", str(tmp_path / "t"), "--mgmt",
                        f"127.0.0.1:{port}", "--port", "0", "--metrics-port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert f"127.0.0.1:{port}" in r.stderr and "--mgmt" in r.stderr


def test_down_without_cluster(tmp_path):
    # Nothing to stop is not an error (test_cli_polish.py has the rest).
    r = run(["down", "--data-dir", str(tmp_path)], check=False)
    assert r.returncode == 0 and "nothing to stop" in r.stderr, r.stderr


def test_second_up_in_same_dir_refused(cluster_factory):
    c = cluster_factory(targets=1)
    r = run(["up", "--data-dir", str(c.data_dir), "--base-port", "0"], check=False)
    one_line_error(r, "already running", "penstock down")
    # The original cluster is untouched.
    st = json.loads(c.cli("status", "--json").stdout)
    assert st["targets_up"] == 1
