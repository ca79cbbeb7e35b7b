# pagededupfs - build, test and benchmark entry points.
#
#   make            release build (build/release): libpagededup.a, pagededup, pagededupfs
#   make check      debug build with ASan+UBSan (build/debug), then every test
#   make stress     the long crash, soak and load runs, and over io_uring the
#                   scripts make check runs on /dev/fuse only
#   make bench*     benchmarks (bench-core, bench ...)
#   make deps       install the Debian packages that are missing (all of them)
#   make install    install the programs, man pages, bash completion and an
#                   example systemd mount unit under $(DESTDIR)$(PREFIX);
#                   installs and builds only what the programs need
#   make uninstall  remove what make install installed
#   make mount      install, make the store if there is none, mount it

MODE ?= release
# The version (core/base/version.h): the file VERSION, tagged vX.Y.Z in git.
PD_VERSION := $(shell cat VERSION)
BUILD := build/$(MODE)
PREFIX ?= /usr/local

PKGS := fuse3 lmdb libxxhash openssl zlib
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CORE_LIBS = -llmdb -lxxhash -lzstd -lhiredis -lcrypto -lz -lpthread -lm
TEST_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-format-truncation
CFLAGS_release := -O2
CFLAGS_debug := -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS_debug := -fsanitize=address,undefined
CFLAGS := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -g -pthread -MMD -MP $(WARN) \
	$(CFLAGS_$(MODE)) -Icore $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(LDFLAGS_$(MODE)) $(EXTRA_LDFLAGS)

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

.PHONY: all build programs deps deps-build install-files uninstall check unit stress test-format1 bench bench-core bench-fsck bench-filter bench-near bench-near-features bench-compact bench-disk bench-scale bench-warc install mount clean
all: deps
	@$(MAKE) --no-print-directory build MODE=release

build: $(LIB) $(BINS) $(UNIT_BIN) $(BENCH_BIN)

deps:
	@sh tools/install-deps.sh

deps-build:
	@sh tools/install-deps.sh build

# The programs and their man pages, nothing of the tests (debian/rules
# builds this).
MANPAGES := $(BUILD)/man/pagededup.1 $(BUILD)/man/pagededupfs.8
programs: $(LIB) $(BINS) $(MANPAGES)

$(BUILD)/man/%: docs/%.in VERSION
	@mkdir -p $(dir $@)
	@sed -e 's/@VERSION@/$(PD_VERSION)/g' $< >$@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -c $< -o $@

# Only this object sees the version: a new number rebuilds one file.
$(BUILD)/core/base/version.o: CFLAGS += -DPD_VERSION='"$(PD_VERSION)"'
$(BUILD)/core/base/version.o: VERSION

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

# What a store takes on disk against a plain copy (pagededup stats' figures),
# for each of DISK_INPUTS.
DISK_INPUTS ?= /usr/share/doc
bench-disk: all
	@bash tests/bench/bench-diskuse.sh build/release $(DISK_INPUTS)

bench-warc: all
	@nice bash tests/bench/bench-warc.sh build/release

# The compactor: space given back, MB/s moved, a writer beside it.
bench-compact: all
	@nice bash tests/bench/bench-compact.sh build/release

bench-near-features: all
	@bash tests/bench/bench-near-features.sh build/release

# Millions of pages through the mount (PD_SCALE_PAGES, default 5,000,000).
bench-scale: all
	@bash tests/bench/bench-scale.sh build/release

BINDIR = $(DESTDIR)$(PREFIX)/bin
MANDIR = $(DESTDIR)$(PREFIX)/share/man
COMPDIR = $(DESTDIR)$(PREFIX)/share/bash-completion/completions
EXAMPLEDIR = $(DESTDIR)$(PREFIX)/share/doc/pagededup/examples
INSTALLED = $(BINDIR)/pagededup $(BINDIR)/pagededupfs $(MANDIR)/man1/pagededup.1.gz \
	$(MANDIR)/man8/pagededupfs.8.gz $(COMPDIR)/pagededup $(COMPDIR)/pagededupfs \
	$(EXAMPLEDIR)/srv-pages.mount

install: deps-build
	@$(MAKE) --no-print-directory programs MODE=release
	@$(MAKE) --no-print-directory install-files MODE=release

# Copy what `programs` built (MODE=release); no build, no packages.
install-files:
	install -d $(BINDIR) $(MANDIR)/man1 $(MANDIR)/man8 $(COMPDIR) $(EXAMPLEDIR)
	install -m 755 $(BUILD)/pagededup $(BUILD)/pagededupfs $(BINDIR)
	gzip -9n <$(BUILD)/man/pagededup.1 >$(MANDIR)/man1/pagededup.1.gz
	gzip -9n <$(BUILD)/man/pagededupfs.8 >$(MANDIR)/man8/pagededupfs.8.gz
	chmod 644 $(MANDIR)/man1/pagededup.1.gz $(MANDIR)/man8/pagededupfs.8.gz
	install -m 644 tools/pagededup.bash $(COMPDIR)/pagededup
	install -m 644 tools/pagededup.bash $(COMPDIR)/pagededupfs
	install -m 644 docs/examples/srv-pages.mount $(EXAMPLEDIR)/srv-pages.mount

uninstall:
	rm -f $(INSTALLED)
	-rmdir $(EXAMPLEDIR) $(DESTDIR)$(PREFIX)/share/doc/pagededup 2>/dev/null

# Install, then mount an archive on the default store. The store is made
# here when there is none yet (the daemon itself never makes one: a
# mistyped STORE must not become a new empty archive). Unmount with:
# fusermount3 -u $(MOUNTPOINT)
mount: install
	@mkdir -p $(MOUNTPOINT) $(dir $(STORE))
	@[ -e $(STORE)/meta/data.mdb ] || $(PREFIX)/bin/pagededup mkfs $(STORE)
	@mountpoint -q $(MOUNTPOINT) && echo "$(MOUNTPOINT) is already mounted" || \
		$(PREFIX)/bin/pagededupfs $(STORE) $(MOUNTPOINT) -o allow_other
	@echo "archive mounted on $(MOUNTPOINT) (store $(STORE))"

clean:
	rm -rf build

-include $(wildcard build/*/core/*/*.d build/*/fs/*.d build/*/tools/*.d build/*/tests/*/*.d build/*/tests/*/*/*.d)
