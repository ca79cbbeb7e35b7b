# pagededupfs - build, test and benchmark entry points.
#
#   make            release build (build/release): libpagededup.a, pagededup, pagededupfs
#   make check      debug build with ASan+UBSan (build/debug), then every test
#   make stress     the long crash, soak and load runs
#   make bench*     benchmarks (bench-core, bench ...)
#   make deps       install the Debian packages that are missing
#   make install    install the release binaries under $(PREFIX)

MODE ?= release
BUILD := build/$(MODE)
PREFIX ?= /usr/local

PKGS := fuse3 lmdb libxxhash openssl
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CORE_LIBS = -llmdb -lxxhash -lzstd -lcrypto -lpthread -lm
TEST_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-format-truncation
CFLAGS_release := -O2
CFLAGS_debug := -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS_debug := -fsanitize=address,undefined
CFLAGS := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -g -pthread -MMD -MP $(WARN) \
	$(CFLAGS_$(MODE)) -Icore $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(LDFLAGS_$(MODE))

CORE_SRC := $(wildcard core/*/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
FS_SRC := $(wildcard fs/*.c)
FS_OBJ := $(FS_SRC:%.c=$(BUILD)/%.o)
TOOLS_SRC := $(wildcard tools/*.c)
TOOLS_OBJ := $(TOOLS_SRC:%.c=$(BUILD)/%.o)
# Unit tests sit in tests/unit/<subsystem>/ as core/ does; each builds to
# $(BUILD)/tests/test_<name>, shared helpers in tests/unit/*.c.
UNIT_SRC := $(wildcard tests/unit/*/test_*.c)
UNIT_BIN := $(foreach s,$(UNIT_SRC),$(BUILD)/tests/$(basename $(notdir $(s))))
UNIT_HELPERS := $(wildcard tests/unit/*.c)
UNIT_HELPERS_OBJ := $(UNIT_HELPERS:%.c=$(BUILD)/%.o)
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)

LIB := $(BUILD)/libpagededup.a
BINS := $(BUILD)/pagededup $(if $(FS_SRC),$(BUILD)/pagededupfs)

.SECONDARY:

STORE ?= /var/lib/pagededup/store
MOUNTPOINT ?= /srv/pages

.PHONY: all build deps check unit stress test-format1 bench bench-core bench-fsck bench-filter bench-near bench-near-features bench-scale install mount clean
all: deps
	@$(MAKE) --no-print-directory build MODE=release

build: $(LIB) $(BINS) $(UNIT_BIN) $(BENCH_BIN)

deps:
	@sh tools/install-deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@$(AR) rcs $@ $^

$(BUILD)/pagededup: $(TOOLS_OBJ) $(LIB)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $(TOOLS_OBJ) $(LIB) $(CORE_LIBS)

$(BUILD)/pagededupfs: $(FS_OBJ) $(LIB)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $(FS_OBJ) $(LIB) $(PKG_LIBS) $(CORE_LIBS)

$(BUILD)/tests/unit/%.o: CFLAGS += -Itests/unit

define unit_test_rule
$(BUILD)/tests/$(basename $(notdir $(1))): $(BUILD)/$(1:.c=.o) $(UNIT_HELPERS_OBJ) $(LIB)
	@mkdir -p $$(dir $$@)
	@echo "  LD      $$@"
	@$$(CC) $$(LDFLAGS) -o $$@ $$< $(UNIT_HELPERS_OBJ) $(LIB) $$(CORE_LIBS) $$(TEST_LIBS)
endef
$(foreach s,$(UNIT_SRC),$(eval $(call unit_test_rule,$(s))))

$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(CORE_LIBS) $(BENCH_LIBS)

# bench_nullfs is a FUSE daemon of its own (the floor of bench-fs.sh), with
# the daemon's transport (/dev/fuse hooks, FUSE over io_uring).
NULLFS_IO := $(BUILD)/fs/kernel_io.o $(BUILD)/fs/uring_io.o
$(BUILD)/bench/bench_nullfs: $(NULLFS_IO)
$(BUILD)/bench/bench_nullfs: BENCH_LIBS = $(NULLFS_IO) $(shell pkg-config --libs fuse3 2>/dev/null || echo -lfuse3)

# The README's test command: debug build under the sanitizers, every test.
check: deps
	@$(MAKE) --no-print-directory build MODE=debug
	@bash tests/run.sh build/debug

unit: deps
	@$(MAKE) --no-print-directory build MODE=debug
	@bash tests/run.sh build/debug unit

# A store made by the landed format 1 code, converted (tests/fs/run-format1.sh).
test-format1: deps
	@$(MAKE) --no-print-directory build MODE=debug
	@bash tests/fs/run-format1.sh build/debug

stress: all
	@bash tests/run.sh build/release stress

bench-core: all
	@bash tests/bench/bench-core.sh build/release

bench: all
	@bash tests/bench/bench-fs.sh build/release
	@bash tests/bench/bench-packs.sh build/release

bench-fsck: all
	@bash tests/bench/bench-fsck.sh build/release

bench-filter: all
	@bash tests/bench/bench-filter.sh build/release

bench-near: all
	@bash tests/bench/bench-near.sh build/release
	@bash tests/bench/bench-near-speed.sh build/release

bench-near-features: all
	@bash tests/bench/bench-near-features.sh build/release

# Millions of pages through the mount (PD_SCALE_PAGES, default 5,000,000).
bench-scale: all
	@bash tests/bench/bench-scale.sh build/release

install: all
	@install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 build/release/pagededup build/release/pagededupfs $(DESTDIR)$(PREFIX)/bin

# Install, then mount an archive on the default embedded store (made on
# first mount). Unmount with: fusermount3 -u $(MOUNTPOINT)
mount: install
	@mkdir -p $(MOUNTPOINT) $(dir $(STORE))
	@mountpoint -q $(MOUNTPOINT) && echo "$(MOUNTPOINT) is already mounted" || \
		$(PREFIX)/bin/pagededupfs $(STORE) $(MOUNTPOINT) -o allow_other
	@echo "archive mounted on $(MOUNTPOINT) (store $(STORE))"

clean:
	rm -rf build

-include $(wildcard build/*/core/*/*.d build/*/fs/*.d build/*/tools/*.d build/*/tests/*/*.d build/*/tests/*/*/*.d)
