# Build and install fastpmi's C client libraries:
#
#   make                                  # cargo build of capi/pmi2 and capi/pmi1
#   make install PREFIX=/opt/fastpmi      # + lib/libpmi2.so.0.0.0, lib/libpmi.so.0.0.0
#                                         #   (stripped; debug info in
#                                         #   lib/.debug/*.debug, found by gdb
#                                         #   through .gnu_debuglink)
#                                         #   with their .so.0 / .so symlinks,
#                                         #   include/pmi2.h, include/pmi.h, include/fastpmi.h,
#                                         #   lib/pkgconfig/fastpmi.pc
#   make uninstall PREFIX=/opt/fastpmi
#
# Variables: PREFIX (/usr/local), LIBDIR, INCLUDEDIR, DESTDIR (staging),
# CARGO, PROFILE (cargo profile: capi, i.e. release with LTO),
# CARGO_TARGET_DIR (target), STRIP, OBJCOPY.
# A program linked against Slurm's libpmi2.so.0 uses fastpmi's with
# LD_LIBRARY_PATH=$(LIBDIR); under the fastpmi launcher its KVS traffic then
# goes through shared memory.

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DESTDIR ?=
CARGO ?= cargo
PROFILE ?= capi
CARGO_TARGET_DIR ?= target

# Cargo puts the dev profile in debug/, every other one in a directory of
# its own name.
PROFILE_DIR := $(if $(filter dev,$(PROFILE)),debug,$(PROFILE))
BUILT := $(CARGO_TARGET_DIR)/$(PROFILE_DIR)
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' capi/pmi2/Cargo.toml | head -n 1)
# ABI version of the installed files: libpmi2.so.0.0.0, as Slurm's.
ABI := 0.0.0

INSTALL ?= install
STRIP ?= strip
OBJCOPY ?= objcopy
DEBUGDIR := $(DESTDIR)$(LIBDIR)/.debug

# Install library $(1) stripped (its dynamic symbols stay), with its debug
# info in $(DEBUGDIR) and a debuglink to it.
define install_lib
	$(OBJCOPY) --only-keep-debug $(BUILT)/lib$(1).so $(DEBUGDIR)/lib$(1).so.$(ABI).debug
	$(INSTALL) -m 0755 $(BUILT)/lib$(1).so $(DESTDIR)$(LIBDIR)/lib$(1).so.$(ABI)
	$(STRIP) --strip-unneeded $(DESTDIR)$(LIBDIR)/lib$(1).so.$(ABI)
	cd $(DEBUGDIR) && $(OBJCOPY) --add-gnu-debuglink=lib$(1).so.$(ABI).debug $(DESTDIR)$(LIBDIR)/lib$(1).so.$(ABI)
endef

.PHONY: all build install uninstall

all: build

build:
	$(CARGO) build --profile $(PROFILE) --target-dir $(CARGO_TARGET_DIR) -p fastpmi-pmi2 -p fastpmi-pmi1

install: build
	$(INSTALL) -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) $(DEBUGDIR)
	$(call install_lib,pmi2)
	ln -sfn libpmi2.so.$(ABI) $(DESTDIR)$(LIBDIR)/libpmi2.so.0
	ln -sfn libpmi2.so.0 $(DESTDIR)$(LIBDIR)/libpmi2.so
	$(call install_lib,pmi)
	ln -sfn libpmi.so.$(ABI) $(DESTDIR)$(LIBDIR)/libpmi.so.0
	ln -sfn libpmi.so.0 $(DESTDIR)$(LIBDIR)/libpmi.so
	$(INSTALL) -m 0644 include/pmi2.h include/pmi.h include/fastpmi.h $(DESTDIR)$(INCLUDEDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    capi/fastpmi.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/fastpmi.pc
	chmod 0644 $(DESTDIR)$(LIBDIR)/pkgconfig/fastpmi.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libpmi2.so.$(ABI) $(DESTDIR)$(LIBDIR)/libpmi2.so.0 $(DESTDIR)$(LIBDIR)/libpmi2.so
	rm -f $(DESTDIR)$(LIBDIR)/libpmi.so.$(ABI) $(DESTDIR)$(LIBDIR)/libpmi.so.0 $(DESTDIR)$(LIBDIR)/libpmi.so
	rm -f $(DESTDIR)$(INCLUDEDIR)/pmi2.h $(DESTDIR)$(INCLUDEDIR)/pmi.h $(DESTDIR)$(INCLUDEDIR)/fastpmi.h
	rm -f $(DESTDIR)$(LIBDIR)/pkgconfig/fastpmi.pc
	rm -f $(DEBUGDIR)/libpmi2.so.$(ABI).debug $(DEBUGDIR)/libpmi.so.$(ABI).debug
	-rmdir $(DEBUGDIR) 2>/dev/null
