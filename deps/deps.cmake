# SPDX-License-Identifier: MIT
# Finds strata's dependencies. All come from Debian packages (tools/install-deps.sh); nothing is
# vendored. llhttp ships as generated C sources in Debian's node-llhttp, so we compile them here.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(UV REQUIRED IMPORTED_TARGET libuv)
pkg_check_modules(LMDB REQUIRED IMPORTED_TARGET lmdb)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
pkg_check_modules(CRYPTO REQUIRED IMPORTED_TARGET libcrypto)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
pkg_check_modules(LWS REQUIRED IMPORTED_TARGET libwebsockets)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
# liburing (Debian liburing-dev 2.3): a fan-out's sends in one system call (src/ws/fan.c).
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
# jemalloc (Debian libjemalloc-dev 5.3, optional): gives freed memory back from its own thread
# (src/core/alloc.c). Linked as ST_JEMALLOC (AUTO, ON, OFF) decides (CMakeLists.txt).
pkg_check_modules(JEMALLOC IMPORTED_TARGET jemalloc)
# C-Raft (Debian libraft-dev 0.15): consensus for replicated groups, on strata's own libuv loop.
pkg_check_modules(RAFT REQUIRED IMPORTED_TARGET raft)

set(ST_LLHTTP_DIR /usr/share/llhttp CACHE PATH "llhttp C sources (Debian node-llhttp)")
set(ST_LLHTTP_INCLUDE /usr/share/include/llhttp CACHE PATH "llhttp header (Debian node-llhttp)")
if(NOT EXISTS ${ST_LLHTTP_DIR}/llhttp.c OR NOT EXISTS ${ST_LLHTTP_INCLUDE}/llhttp.h)
  message(FATAL_ERROR "llhttp sources not found: apt-get install node-llhttp (tools/install-deps.sh)")
endif()
add_library(st_llhttp STATIC ${ST_LLHTTP_DIR}/api.c ${ST_LLHTTP_DIR}/http.c ${ST_LLHTTP_DIR}/llhttp.c)
# Generated third-party code: build it without our warning policy.
target_compile_options(st_llhttp PRIVATE -w)
target_include_directories(st_llhttp SYSTEM PUBLIC ${ST_LLHTTP_INCLUDE})
set_target_properties(st_llhttp PROPERTIES POSITION_INDEPENDENT_CODE ON)
