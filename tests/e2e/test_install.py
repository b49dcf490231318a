"""The library as a user gets it: `cmake --install` / `make install` into a temporary DESTDIR,
the examples built against that tree with pkg-config and with CMake (the system compiler), and
run against a live cluster started by the installed `penstock`; libpenstock.so exports only the
include/penstock API."""
import os
import re
import subprocess
from pathlib import Path

import pytest

import conftest

REPO = conftest.REPO
BUILD = Path(conftest.PENSTOCK).resolve().parents[2]  # <build>/src/cli/penstock
PREFIX = "/opt/penstock"
EXPORTED_PREFIXES = ("penstock::", "typeinfo for penstock::", "typeinfo name for penstock::",
                     "vtable for penstock::")


def sh(cmd, cwd=None, env=None, timeout=300):
    """Runs `cmd` (a shell line, as the README writes it); fails naming it and its output."""
    proc = subprocess.run(cmd, shell=True, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"`{cmd}` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def cache_value(name):
    for line in (BUILD / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    raise AssertionError(f"{name} not in {BUILD}/CMakeCache.txt: configure the build first")


LIBDIR = cache_value("CMAKE_INSTALL_LIBDIR")
VERSION = cache_value("CMAKE_PROJECT_VERSION")


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """`cmake --install <build> --prefix /opt/penstock` with DESTDIR: the installed prefix."""
    assert (BUILD / f"libpenstock.so.{VERSION}").exists(), \
        f"no libpenstock.so in {BUILD}: build it first (make build, or ninja -C {BUILD})"
    destdir = tmp_path_factory.mktemp("destdir")
    sh(f"cmake --install {BUILD} --prefix {PREFIX}", env={**os.environ, "DESTDIR": str(destdir)})
    return destdir / PREFIX.lstrip("/")


def test_install_holds_headers_library_pkgconfig_cmake_package_and_command(staged):
    headers = sorted(p.name for p in (REPO / "include" / "penstock").glob("*.h"))
    expected = [f"include/penstock/{h}" for h in headers] + [
        f"{LIBDIR}/libpenstock.so", f"{LIBDIR}/libpenstock.so.{VERSION.split('.')[0]}",
        f"{LIBDIR}/libpenstock.so.{VERSION}", f"{LIBDIR}/pkgconfig/penstock.pc",
        f"{LIBDIR}/cmake/Penstock/PenstockConfig.cmake",
        f"{LIBDIR}/cmake/Penstock/PenstockConfigVersion.cmake",
        f"{LIBDIR}/cmake/Penstock/PenstockTargets.cmake", "bin/penstock"]
    have = tree(staged)
    missing = [f for f in expected if f not in have]
    assert not missing, f"not installed: {missing}; installed: {have}"
    # The SONAME chain: libpenstock.so -> libpenstock.so.0 -> libpenstock.so.<version>.
    lib = staged / LIBDIR
    major = VERSION.split(".")[0]
    assert os.readlink(lib / "libpenstock.so") == f"libpenstock.so.{major}"
    assert os.readlink(lib / f"libpenstock.so.{major}") == f"libpenstock.so.{VERSION}"
    dyn = sh(f"readelf -d {lib / 'libpenstock.so'}")
    assert f"Library soname: [libpenstock.so.{major}]" in dyn, dyn
    assert os.access(staged / "bin" / "penstock", os.X_OK)


def test_python_package_imports_from_the_install(staged):
    """The penstock package lands where Debian's python3 looks, and its extension finds the
    installed libpenstock.so by its relative RUNPATH (no LD_LIBRARY_PATH)."""
    site = staged / cache_value("PENSTOCK_PYTHON_DIR")
    assert (site / "penstock" / "__init__.py").exists() and (site / "penstock" / "torch.py").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    out = sh(f"{cache_value('PENSTOCK_PYTHON')} -c 'import penstock; print(penstock.__file__)'", env=env)
    assert out.strip() == str(site / "penstock" / "__init__.py")


def public_names():
    """Names include/penstock marks PENSTOCK_API: classes, and free functions."""
    names = set()
    for header in (REPO / "include" / "penstock").glob("*.h"):
        for line in header.read_text().splitlines():
            if "PENSTOCK_API" not in line or line.startswith(("#", "//")):
                continue
            m = re.search(r"(?:class|struct)\b.*PENSTOCK_API\s+(\w+)", line) or \
                re.search(r"(\w+)\(", line)
            assert m, f"{header.name}: cannot tell what is exported by: {line}"
            names.add(m.group(1))
    return names


def test_library_exports_only_the_public_api(staged):
    out = sh(f"nm -D --defined-only -C {staged / LIBDIR / 'libpenstock.so'}")
    symbols = [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]
    assert symbols, out
    leaked = [s for s in symbols if not s.startswith(EXPORTED_PREFIXES)]
    assert not leaked, f"{len(leaked)} symbols exported beyond include/penstock, e.g. {leaked[:20]}"
    # Each exported symbol belongs to a name include/penstock marks, and each such name is there.
    marked = public_names()
    assert {"Client", "Object", "CompletionQueue", "Status", "ParseRedundancy"} <= marked, marked
    exported = set()
    for s in symbols:
        path = s.split("penstock::", 1)[1].removeprefix("detail::").removeprefix("fs::")
        exported.add(re.match(r"\w+", path).group(0))
    assert exported == marked, f"exported but not marked: {exported - marked}; " \
                               f"marked but not exported: {marked - exported}"


def test_make_install_installs_the_same_tree(staged, tmp_path):
    # `make install` builds first, configuring as `make build` does: on a build tree configured
    # otherwise that would rebuild everything, so this runs on the tree `make test` builds.
    if cache_value("CMAKE_BUILD_TYPE") != "RelWithDebInfo":
        pytest.skip(f"{BUILD} is not configured as `make build` configures it (RelWithDebInfo)")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    sh(f"make -s install BUILD={BUILD} PREFIX={PREFIX} DESTDIR={tmp_path}", cwd=REPO, env=env,
       timeout=900)
    assert tree(tmp_path / PREFIX.lstrip("/")) == tree(staged)


def pkg_config_env(staged):
    env = {**os.environ, "PKG_CONFIG_PATH": str(staged / LIBDIR / "pkgconfig")}
    env.pop("PKG_CONFIG_LIBDIR", None)
    return env


def build_with_pkg_config(staged, example, out_dir):
    """The one-line build of examples/README.md."""
    sh(f"c++ -std=c++20 -O2 {example}/{example}.cc $(pkg-config --cflags --libs penstock) "
       f"-o {out_dir / example}", cwd=REPO / "examples", env=pkg_config_env(staged))
    return out_dir / example


def build_with_cmake(staged, example, out_dir):
    """The CMake build of examples/README.md: find_package(Penstock) from the staged prefix."""
    build = out_dir / f"build-{example}"
    sh(f"cmake -S {REPO / 'examples' / example} -B {build} -DCMAKE_PREFIX_PATH={staged} "
       "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF")
    found = (build / "CMakeCache.txt").read_text()
    assert f"Penstock_DIR:PATH={staged / LIBDIR / 'cmake' / 'Penstock'}" in found, \
        "find_package(Penstock) found another installation"
    sh(f"cmake --build {build}")
    return build / example


def test_pkg_config_asks_only_for_the_library(staged):
    env = pkg_config_env(staged)
    assert sh("pkg-config --modversion penstock", env=env).strip() == VERSION
    libs = sh("pkg-config --libs penstock", env=env).split()
    assert len(libs) == 2 and libs[1] == "-lpenstock", libs
    assert Path(libs[0].removeprefix("-L")).resolve() == (staged / LIBDIR).resolve(), libs
    cflags = sh("pkg-config --cflags penstock", env=env).split()
    assert [Path(f.removeprefix("-I")).resolve() for f in cflags] == [(staged / "include").resolve()]


def check_loads_staged_library(program, staged, env):
    ldd = sh(f"ldd {program}", env=env)
    line = next((x for x in ldd.splitlines() if "libpenstock.so" in x), "")
    assert str((staged / LIBDIR).resolve()) in line or str(staged / LIBDIR) in line, ldd


@pytest.fixture(scope="module")
def examples(staged, tmp_path_factory):
    """examples(how, name): the example built against the staged tree (once per module)."""
    built = {}

    def get(how, name):
        if (how, name) not in built:
            out_dir = tmp_path_factory.mktemp(how)
            builder = build_with_pkg_config if how == "pkg-config" else build_with_cmake
            built[how, name] = builder(staged, name, out_dir)
        return built[how, name]
    return get


@pytest.mark.parametrize("how", ["pkg-config", "cmake"])
def test_examples_build_against_the_installed_tree_and_run(staged, examples, how, cluster_factory,
                                                           monkeypatch):
    put_get, async_read = examples(how, "put_get"), examples(how, "async_read")

    # The cluster runs the installed command.
    monkeypatch.setattr(conftest, "PENSTOCK", str(staged / "bin" / "penstock"))
    c = cluster_factory(targets=3)
    env = {k: v for k, v in c.env.items() if k != "LD_LIBRARY_PATH"}
    if how == "pkg-config":  # no RPATH: the loader is told where the staged library is
        env["LD_LIBRARY_PATH"] = str(staged / LIBDIR)
    check_loads_staged_library(put_get, staged, env)

    # mgmt's address as the argument, then from PENSTOCK_MGMT.
    out = sh(f"{put_get} {c.mgmt}", env=env, timeout=120)
    assert "put and got back 3145733 bytes of examples/hello.bin: identical" in out, out
    assert re.search(r"container examples \((none|rep:\d|ec:\d\+\d)\)", out), out
    out = sh(f"{async_read}", env={**env, "PENSTOCK_MGMT": c.mgmt}, timeout=300)
    m = re.search(r"read 256 MiB \(8 passes over examples/async.bin\) in [\d.]+ s: (\d+) MB/s, "
                  r"16 reads of 1024 KiB in flight", out)
    assert m and int(m.group(1)) > 0, out
    # The objects are there for the CLI too, with the sizes the programs stored.
    ls = c.cli("ls", "--container", "examples").stdout
    assert "hello.bin" in ls and "async.bin" in ls, ls


def test_examples_report_an_unreachable_cluster(staged, examples):
    program = examples("pkg-config", "put_get")
    env = {**os.environ, "LD_LIBRARY_PATH": str(staged / LIBDIR)}
    proc = subprocess.run([str(program), "127.0.0.1:1"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("put_get: connect: unavailable") and "127.0.0.1:1" in proc.stderr, \
        proc.stderr
