# Penstock's two commands: `make demo` and `make test`. Both bootstrap (install Debian
# packages if missing) and build first.
BUILD ?= build
JOBS ?= 2
PYTHON ?= /usr/bin/python3
PREFIX ?= /usr/local

.PHONY: all bootstrap build install test check-layers unit e2e fuzz demo bench clean

all: build

bootstrap:
	@scripts/bootstrap.sh

build: bootstrap
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@ninja -C $(BUILD) -j$(JOBS)

# Headers, libpenstock.so, penstock.pc, the CMake package and the penstock command under
# $(PREFIX); DESTDIR=dir stages them under dir instead (for packaging).
install: build
	@DESTDIR="$(if $(DESTDIR),$(abspath $(DESTDIR)))" cmake --install $(BUILD) --prefix "$(PREFIX)"

# Layers only point down (docs/architecture.md): a lower layer including a higher one fails.
check-layers:
	$(PYTHON) scripts/check_layers.py

unit: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

e2e: build
	PENSTOCK_BIN=$(abspath $(BUILD))/src/cli/penstock $(PYTHON) -m pytest -v tests/e2e

# Every wire decoder under libFuzzer (clang), a short bounded run each.
fuzz: bootstrap
	fuzz/run.sh 10

test: check-layers unit e2e fuzz

demo: build
	@PENSTOCK_BIN=$(abspath $(BUILD))/src/cli/penstock scripts/demo.sh

bench: build
	PENSTOCK_BIN=$(abspath $(BUILD))/src/cli/penstock $(PYTHON) bench/put_get_vs_fio.py

clean:
	rm -rf $(BUILD)
