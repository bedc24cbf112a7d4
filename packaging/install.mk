# packaging/install.mk: `make install`, included by the top Makefile.
#
#   make install PREFIX=/opt/purlin [DESTDIR=/tmp/stage]
#
# installs, under $(DESTDIR)$(PREFIX):
#   lib/libpurlin.so                  the library (SONAME libpurlin.so); link with -lpurlin
#   lib/libpurlin-core.so             its Go core, which it loads from beside itself at the
#                                     first call that needs it (lib/purlin/ links to it)
#   include/purlin.h, purlin_nccl.h   the headers (purlin_nccl.h: NCCL's names and types)
#   lib/purlin/libnccl.so.2           the drop-in (SONAME libnccl.so.2) and its link-time
#   lib/purlin/libnccl.so             name: kept out of lib/ so that a system NCCL is never
#                                     shadowed; a program meets it only when pointed at it
#                                     (LD_LIBRARY_PATH=$(PREFIX)/lib/purlin, or LD_PRELOAD)
#   lib/pkgconfig/purlin.pc           pkg-config --cflags --libs purlin
#   lib/cmake/Purlin/                 find_package(Purlin): targets Purlin::purlin and
#                                     Purlin::nccl (the drop-in)
# The libraries are those of `make lib` and `make nccl-so`, host Atom only; for the
# CUDA Atom build them with the kernels first (`make lib-cuda nccl-so-cuda`) and
# install with GOTAGS=cudakernels. The version comes from include/purlin.h.
PREFIX      ?= /usr/local
DESTDIR     ?=
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
INSTALL     ?= install
# purlin.pc names its directories from ${prefix} where they lie under it, so that
# `pkg-config --define-prefix` can relocate a moved tree.
PC_LIBDIR     = $(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))
PC_INCLUDEDIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))
PURLIN_VERSION := $(shell awk '/^\#define PURLIN_(MAJOR|MINOR|PATCH) /{v=v (v==""?"":".") $$3} END{print v}' include/purlin.h)

.PHONY: install uninstall
install: $(LIB) $(NCCL_SO) packaging/purlin.pc.in packaging/PurlinConfig.cmake.in packaging/PurlinConfigVersion.cmake.in
	@test -n "$(PURLIN_VERSION)" || { echo "install: no version in include/purlin.h" >&2; exit 1; }
	$(INSTALL) -d $(DESTDIR)$(LIBDIR)/purlin $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(LIBDIR)/cmake/Purlin
	$(INSTALL) -m 755 $(LIB) $(DESTDIR)$(LIBDIR)/libpurlin.so
	$(INSTALL) -m 755 $(dir $(LIB))libpurlin-core.so $(DESTDIR)$(LIBDIR)/libpurlin-core.so
	$(INSTALL) -m 755 $(NCCL_SO) $(DESTDIR)$(LIBDIR)/purlin/libnccl.so.2
	ln -sf ../libpurlin-core.so $(DESTDIR)$(LIBDIR)/purlin/libpurlin-core.so
	ln -sf libnccl.so.2 $(DESTDIR)$(LIBDIR)/purlin/libnccl.so
	$(INSTALL) -m 644 include/purlin.h include/purlin_nccl.h $(DESTDIR)$(INCLUDEDIR)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(PC_LIBDIR)|g' -e 's|@INCLUDEDIR@|$(PC_INCLUDEDIR)|g' \
		-e 's|@VERSION@|$(PURLIN_VERSION)|g' packaging/purlin.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/purlin.pc
	sed -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
		packaging/PurlinConfig.cmake.in >$(DESTDIR)$(LIBDIR)/cmake/Purlin/PurlinConfig.cmake
	sed -e 's|@VERSION@|$(PURLIN_VERSION)|g' \
		packaging/PurlinConfigVersion.cmake.in >$(DESTDIR)$(LIBDIR)/cmake/Purlin/PurlinConfigVersion.cmake
	@echo "install: Purlin $(PURLIN_VERSION) in $(DESTDIR)$(PREFIX)"

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libpurlin.so $(DESTDIR)$(LIBDIR)/libpurlin-core.so $(DESTDIR)$(LIBDIR)/purlin/libnccl.so.2 \
		$(DESTDIR)$(LIBDIR)/purlin/libnccl.so $(DESTDIR)$(LIBDIR)/purlin/libpurlin-core.so \
		$(DESTDIR)$(INCLUDEDIR)/purlin.h $(DESTDIR)$(INCLUDEDIR)/purlin_nccl.h $(DESTDIR)$(LIBDIR)/pkgconfig/purlin.pc \
		$(DESTDIR)$(LIBDIR)/cmake/Purlin/PurlinConfig.cmake $(DESTDIR)$(LIBDIR)/cmake/Purlin/PurlinConfigVersion.cmake
	-rmdir $(DESTDIR)$(LIBDIR)/purlin $(DESTDIR)$(LIBDIR)/cmake/Purlin 2>/dev/null
