# Convenience wrapper over CMake.  `make install PREFIX=DIR` installs
# DIR/bin/{hvdrun,hvd-bench,hvd-train-fashion-mnist,hvd-report},
# DIR/include/hvd{,_nn}.h, DIR/lib/libhvd{,_nn}.{so,a},
# DIR/lib/pkgconfig/hvd{,_nn}.pc and the Python package in
# DIR/lib/python3/dist-packages/hvd.  `make deb` writes hvd_VERSION_ARCH.deb
# here (scripts/make-deb.sh: the same files under /usr).
PREFIX ?= /usr/local
BUILD  ?= build
JOBS   ?= $(shell nproc)

.PHONY: all configure build install deb test train clean

all: build

# Without the test suite: installing needs none of its tools (cmocka,
# pytest).  scripts/test.sh configures its own builds with the tests.
configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DHVD_BUILD_TESTS=OFF \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) -DCMAKE_INSTALL_LIBDIR=lib

build: configure
	cmake --build $(BUILD) -j $(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

deb: build
	scripts/make-deb.sh $(BUILD) .

test:
	scripts/test.sh

train:
	scripts/train.sh

clean:
	rm -rf $(BUILD) build-asan build-tsan
