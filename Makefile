# BIUS: build and install on a real host.
#
#   make                  bius.ko for KVER (default: the running kernel) and
#                         target/release/biusctl
#   make install          biusctl, its man pages and shell completions, the
#                         udev rules, bius@.service, /etc/bius/example.toml
#                         (PREFIX=/usr/local, DESTDIR= to stage; no module)
#   make install-dkms     bius.ko as a DKMS module: sources to
#                         /usr/src/bius-VERSION, then dkms add/build/install
#                         (only the copy when DESTDIR is set)
#   make install-module   bius.ko into /lib/modules/KVER/extra + depmod,
#                         for hosts without dkms (rebuild after each kernel
#                         update)
#   make uninstall        removes what `make install` installed (same
#                         PREFIX/DESTDIR); uninstall-dkms, uninstall-module
#   make version          the version (Cargo.toml's workspace version)
#
# Build as a user, install as root: `make && sudo make install install-dkms`
# (install never builds biusctl: it fails when it is not built).

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
DOCDIR ?= $(DATADIR)/doc/bius
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d
SYSCONFDIR ?= /etc
# the local administrator's directories; a distribution package sets
# UDEVRULESDIR=/usr/lib/udev/rules.d SYSTEMDUNITDIR=/usr/lib/systemd/system
UDEVRULESDIR ?= $(SYSCONFDIR)/udev/rules.d
SYSTEMDUNITDIR ?= $(SYSCONFDIR)/systemd/system
CONFDIR ?= $(SYSCONFDIR)/bius
DKMSSRCDIR ?= /usr/src

KVER ?= $(shell uname -r)
CARGO ?= cargo
DKMS ?= dkms
INSTALL ?= install

# One source of truth: [workspace.package] version in Cargo.toml, read by
# driver/Makefile (which also puts it into MODULE_VERSION).
VERSION := $(shell $(MAKE) --no-print-directory -s -C driver version)
ifeq ($(VERSION),)
$(error no version: driver/Makefile could not read Cargo.toml)
endif

# (BIUSCTL=PATH: install that binary instead)
BIUSCTL ?= target/release/biusctl
GEN := target/bius-install
# What install writes (without DESTDIR), for uninstall: a manifest, since
# the man pages are whatever `biusctl manpages` generates.
MANIFEST := $(DATADIR)/bius/installed-files
DKMS_DIR := $(DKMSSRCDIR)/bius-$(VERSION)
# The DKMS source tree: the sources, the uapi header, Makefile, dkms.conf.
DRIVER_SOURCES := $(sort $(filter-out %.mod.c,$(wildcard driver/*.c driver/*.h))) driver/Makefile driver/Kbuild $(wildcard driver/COPYING)
EXAMPLE_CONF := packaging/example.toml

all: driver biusctl

driver:
	$(MAKE) -C driver KVER=$(KVER) modules

biusctl:
	$(CARGO) build --release -p biusctl

version:
	@echo $(VERSION)

# ---------------------------------------------------------------- install

# Fails before installing anything when biusctl is not built or lacks the
# generators of its man pages and completions.
check-biusctl:
	@test -x $(BIUSCTL) || { echo "make install: no $(BIUSCTL): run make (or make biusctl) first" >&2; exit 1; }
	@for sub in manpages completions; do \
		$(BIUSCTL) help $$sub >/dev/null 2>&1 || { \
			echo "make install: $(BIUSCTL) has no '$$sub' subcommand (needed for the man pages and shell completions): rebuild it from a newer tree" >&2; \
			exit 1; }; \
	done

# Generated files, in $(GEN) (not in DESTDIR: nothing but installed files there).
generate: check-biusctl
	rm -rf $(GEN)
	mkdir -p $(GEN)/man1
	$(BIUSCTL) manpages $(GEN)/man1
	@ls $(GEN)/man1/*.1 >/dev/null 2>&1 || { echo "make install: '$(BIUSCTL) manpages' wrote no *.1 file" >&2; exit 1; }
	$(BIUSCTL) completions bash > $(GEN)/biusctl.bash
	$(BIUSCTL) completions zsh > $(GEN)/_biusctl
	$(BIUSCTL) completions fish > $(GEN)/biusctl.fish
	sed 's|/usr/local/bin/biusctl|$(BINDIR)/biusctl|g' packaging/systemd/bius@.service > $(GEN)/bius@.service

# inst MODE SRC DEST: install one file and record DEST in the manifest
inst = $(INSTALL) -D -m $(1) $(2) $(DESTDIR)$(3) && echo $(3) >> $(DESTDIR)$(MANIFEST).new

install: generate
	mkdir -p $(DESTDIR)$(dir $(MANIFEST))
	rm -f $(DESTDIR)$(MANIFEST).new
	$(call inst,0755,$(BIUSCTL),$(BINDIR)/biusctl)
	for f in $(GEN)/man1/*.1; do \
		$(call inst,0644,$$f,$(MANDIR)/man1/$$(basename $$f)) || exit 1; \
	done
	$(call inst,0644,$(GEN)/biusctl.bash,$(BASHCOMPDIR)/biusctl)
	$(call inst,0644,$(GEN)/_biusctl,$(ZSHCOMPDIR)/_biusctl)
	$(call inst,0644,$(GEN)/biusctl.fish,$(FISHCOMPDIR)/biusctl.fish)
	$(call inst,0644,packaging/udev/60-bius.rules,$(UDEVRULESDIR)/60-bius.rules)
	$(call inst,0644,$(GEN)/bius@.service,$(SYSTEMDUNITDIR)/bius@.service)
	$(call inst,0644,packaging/modules-load.d/bius.conf,$(DOCDIR)/examples/modules-load.d/bius.conf)
	$(call inst,0644,packaging/modprobe.d/bius.conf,$(DOCDIR)/examples/modprobe.d/bius.conf)
	$(call inst,0644,$(EXAMPLE_CONF),$(DOCDIR)/examples/example.toml)
	@# /etc/bius/example.toml: never over a file the administrator changed
	@if [ -e $(DESTDIR)$(CONFDIR)/example.toml ] && ! cmp -s $(EXAMPLE_CONF) $(DESTDIR)$(CONFDIR)/example.toml; then \
		echo "make install: keeping the changed $(DESTDIR)$(CONFDIR)/example.toml"; \
	else \
		$(call inst,0644,$(EXAMPLE_CONF),$(CONFDIR)/example.toml); \
	fi
	echo $(MANIFEST) >> $(DESTDIR)$(MANIFEST).new
	mv $(DESTDIR)$(MANIFEST).new $(DESTDIR)$(MANIFEST)
	@if [ -z "$(DESTDIR)" ]; then \
		udevadm control --reload 2>/dev/null || true; \
		systemctl daemon-reload 2>/dev/null || true; \
		echo "installed; bius.ko itself: make install-dkms (or make install-module)"; \
	fi

# Removes every file the manifest lists, then the directories of BIUS
# alone (/etc/bius only if empty: configurations stay); an example.toml the
# administrator changed stays too.
uninstall:
	@test -f $(DESTDIR)$(MANIFEST) || { echo "make uninstall: no $(DESTDIR)$(MANIFEST): nothing installed with PREFIX=$(PREFIX) DESTDIR=$(DESTDIR)" >&2; exit 1; }
	@while read -r f; do \
		case $$f in \
		$(CONFDIR)/example.toml) \
			if ! cmp -s "$(EXAMPLE_CONF)" "$(DESTDIR)$$f"; then \
				echo "keeping the changed $(DESTDIR)$$f"; continue; fi ;; \
		esac; \
		echo "rm -f $(DESTDIR)$$f"; rm -f "$(DESTDIR)$$f"; \
	done < $(DESTDIR)$(MANIFEST)
	-rmdir $(DESTDIR)$(DOCDIR)/examples/modules-load.d $(DESTDIR)$(DOCDIR)/examples/modprobe.d \
		$(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) \
		$(DESTDIR)$(DATADIR)/bius $(DESTDIR)$(CONFDIR) 2>/dev/null
	@if [ -z "$(DESTDIR)" ]; then \
		udevadm control --reload 2>/dev/null || true; \
		systemctl daemon-reload 2>/dev/null || true; \
	fi

# ------------------------------------------------------------ the module

# The DKMS source tree (also what install-check.sh builds).
dkms-tree:
	@test -n "$(DKMS_TREE)" || { echo "dkms-tree: set DKMS_TREE=DIR" >&2; exit 1; }
	rm -rf $(DKMS_TREE)
	$(INSTALL) -d $(DKMS_TREE)/include/uapi/linux
	$(INSTALL) -m 0644 $(DRIVER_SOURCES) $(DKMS_TREE)/
	$(INSTALL) -m 0644 driver/include/uapi/linux/bius.h $(DKMS_TREE)/include/uapi/linux/
	sed 's/@BIUS_VERSION@/$(VERSION)/' driver/dkms.conf > $(DKMS_TREE)/dkms.conf
	echo $(VERSION) > $(DKMS_TREE)/VERSION

install-dkms:
	$(MAKE) --no-print-directory dkms-tree DKMS_TREE=$(DESTDIR)$(DKMS_DIR)
ifeq ($(DESTDIR),)
	@command -v $(DKMS) >/dev/null || { echo "make install-dkms: no dkms (apt install dkms), or use make install-module" >&2; exit 1; }
	@# a reinstall of the same version replaces the registered one
	if [ -n "$$($(DKMS) status bius/$(VERSION))" ]; then $(DKMS) remove bius/$(VERSION) --all; fi
	$(DKMS) add bius/$(VERSION)
	$(DKMS) install bius/$(VERSION) -k $(KVER)
	@echo "bius.ko $(VERSION) installed for $(KVER) (and rebuilt by dkms for new kernels): modprobe bius"
endif

uninstall-dkms:
ifeq ($(DESTDIR),)
	if command -v $(DKMS) >/dev/null && [ -n "$$($(DKMS) status bius/$(VERSION))" ]; then \
		$(DKMS) remove bius/$(VERSION) --all; fi
endif
	rm -rf $(DESTDIR)$(DKMS_DIR)

install-module:
	$(MAKE) -C driver KVER=$(KVER) modules_install $(if $(DESTDIR),INSTALL_MOD_PATH=$(abspath $(DESTDIR)))

uninstall-module:
	@# compressed as the kernel's own modules are, on 6.12: bius.ko.xz
	rm -f $(addprefix $(DESTDIR)/lib/modules/$(KVER)/extra/bius.ko,'' .xz .zst .gz)
ifeq ($(DESTDIR),)
	/sbin/depmod -a $(KVER)
endif

clean:
	$(MAKE) -C driver KVER=$(KVER) clean
	rm -rf $(GEN)

.PHONY: all driver biusctl version check-biusctl generate install uninstall \
	dkms-tree install-dkms uninstall-dkms install-module uninstall-module clean
