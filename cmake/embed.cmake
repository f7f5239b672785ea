# Turns a file into a C source defining `const char NAME[]` (NUL-terminated) and
# `const unsigned long NAME_len`, so that binaries carry their schema with them.
# Usage: cmake -DINPUT=file -DOUTPUT=file.c -DNAME=symbol -P embed.cmake
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(LENGTH "${hex}" hexlen)
math(EXPR len "${hexlen} / 2")
file(WRITE "${OUTPUT}" "/* Generated from ${INPUT} by cmake/embed.cmake. Do not edit. */\nconst char ${NAME}[] = {${bytes}0x00};\nconst unsigned long ${NAME}_len = ${len};\n")
