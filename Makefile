# Convenience wrapper over CMake.  `make install PREFIX=DIR` installs
# DIR/bin/hvdrun, DIR/include/hvd.h, DIR/lib/libhvd.{so,a} and
# DIR/lib/pkgconfig/hvd.pc.
PREFIX ?= /usr/local
BUILD  ?= build
JOBS   ?= $(shell nproc)

.PHONY: all build install test demo clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) -DCMAKE_INSTALL_LIBDIR=lib
	cmake --build $(BUILD) -j $(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

test:
	scripts/test.sh

demo:
	scripts/demo.sh

clean:
	rm -rf $(BUILD) build-asan build-tsan
