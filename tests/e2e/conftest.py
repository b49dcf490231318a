"""Fixtures for end-to-end tests: real `penstock` daemons on loopback, started by the test
and stopped by PID."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PENSTOCK = os.environ.get("PENSTOCK_BIN", str(REPO / "build" / "src" / "cli" / "penstock"))

# UCX settings the data plane is tested over: TCP, and UCX's shared-memory transport, which
# Penstock uses only when asked (UCX_MM_ERROR_HANDLING=y: a peer killed while sending stalls the
# others; by default processes on one host talk over loopback tcp with direct copies for bulk).
# (UCX 1.13 needs tcp for the socket-address connection manager; the transport adds it and keeps
# the data on shared memory, see src/transport/README.md.)
TRANSPORTS = {
    "tcp": {"UCX_TLS": "tcp"},
    "shm": {"UCX_TLS": "posix,cma", "UCX_MM_ERROR_HANDLING": "y"},
}


def run(args, env=None, check=True, timeout=300, **kw):
    """Runs the penstock binary; returns the CompletedProcess (text mode)."""
    proc = subprocess.run([PENSTOCK, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"penstock {' '.join(args)} failed ({proc.returncode}):\n"
                             f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not alive.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Cluster:
    """A local cluster started with `penstock up`."""

    def __init__(self, data_dir: Path, targets=3, transport="tcp", capacity="512M",
                 extra_args=(), heartbeat_timeout_ms=3000, tls=False):
        self.data_dir = data_dir
        self.env = dict(os.environ)
        for var in ("UCX_TLS", "UCX_MM_ERROR_HANDLING"):
            self.env.pop(var, None)
        # "default": UCX's own choice, as a user who sets nothing gets.
        self.env.update({} if transport == "default" else TRANSPORTS[transport])
        for var in ("PENSTOCK_MGMT", "PENSTOCK_TLS_CA", "PENSTOCK_TLS_CERT", "PENSTOCK_TLS_KEY"):
            self.env.pop(var, None)
        if tls:
            extra_args = (*extra_args, "--tls")
        self._restarted = {}
        self._procs = []
        out = run(["up", "--targets", str(targets), "--data-dir", str(data_dir), "--base-port", "0",
                   "--capacity", capacity, "--heartbeat-timeout-ms", str(heartbeat_timeout_ms), "--json",
                   *extra_args], env=self.env, timeout=120)
        self.info = json.loads(out.stdout)
        self.mgmt = self.info["mgmt"]
        # `up --tls`: client commands present the generated client certificate.
        t = self.info.get("tls")
        self.tls_args = ["--tls-ca", t["ca"], "--tls-cert", t["cert"], "--tls-key", t["key"]] if t else []

    @property
    def record(self):
        return json.loads((self.data_dir / "cluster.json").read_text())

    def daemon(self, name):
        return next(d for d in self.record["daemons"] if d["name"] == name)

    def cli(self, *args, check=True, timeout=300):
        return run([*args, "--mgmt", self.mgmt, *self.tls_args], env=self.env, check=check,
                   timeout=timeout)

    def kill9(self, name):
        pid = self.current_pid(name)
        os.kill(pid, signal.SIGKILL)
        deadline = time.time() + 10
        while pid_alive(pid) and time.time() < deadline:
            time.sleep(0.05)
        return pid

    def current_pid(self, name):
        """PID of daemon `name`: the latest restart's, else the recorded one."""
        return self._restarted.get(name, self.daemon(name)["pid"])

    def restart(self, name):
        """Starts daemon `name` again with its recorded command line; the test owns the PID."""
        d = self.daemon(name)
        log = open(d["log"], "ab")
        proc = subprocess.Popen(d["argv"], env=self.env, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self._restarted[name] = proc.pid
        self._procs.append(proc)
        return proc

    def wait_targets_up(self, count, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            st = json.loads(self.cli("status", "--json").stdout)
            if st["targets_up"] >= count:
                return st
            time.sleep(0.2)
        raise AssertionError(f"fewer than {count} targets up after {timeout}s: {st}")

    def stop(self):
        run(["down", "--data-dir", str(self.data_dir)], env=self.env, check=False, timeout=60)
        for proc in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        # Anything recorded that is still alive is killed by PID.
        try:
            for d in json.loads((self.data_dir / "cluster.json").read_text())["daemons"]:
                if pid_alive(d["pid"]):
                    os.kill(d["pid"], signal.SIGKILL)
        except FileNotFoundError:
            pass
        # The targets' data files are large and preallocated; logs and indexes stay for debugging.
        for img in self.data_dir.glob("*/data.img"):
            img.unlink()


@pytest.fixture
def cluster_factory(tmp_path):
    clusters = []

    def make(**kw):
        c = Cluster(tmp_path / f"cluster{len(clusters)}", **kw)
        clusters.append(c)
        return c

    yield make
    for c in clusters:
        c.stop()


@pytest.fixture(scope="module", params=sorted(TRANSPORTS))
def cluster(request, tmp_path_factory):
    """One 3-target cluster per transport, shared by the tests of a module."""
    c = Cluster(tmp_path_factory.mktemp(f"cluster-{request.param}"), transport=request.param)
    c.transport = request.param
    c.cli("container", "create", "data", "--redundancy", "none")
    yield c
    c.stop()
