# SPDX-License-Identifier: MIT
# Turns a file into a C array at build time (cmake -DIN=file -DOUT=file.c -DSYM=name -P embed.cmake):
#   const unsigned char SYM[] (NUL-terminated) and const size_t SYM_len (without the NUL).
# Used for docs/openapi.json, served at GET /v1/openapi.json; needs nothing but CMake.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}" "/* Generated from ${IN} by tools/embed.cmake: do not edit. */\n"
                    "#include <stddef.h>\n"
                    "const unsigned char ${SYM}[] = {${bytes}0};\n"
                    "const size_t ${SYM}_len = ${len};\n")
