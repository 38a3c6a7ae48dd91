# Writes OUT, a C file holding the live page IN (src/server/ui/page.html) as
# `const char sl_ui_page[]` (its bytes, then a NUL) and `sl_ui_page_len` (the
# bytes without the NUL), so that the page is in the binary and nothing is
# read at run time. Run at build time: cmake -DIN=... -DOUT=... -P embed.cmake
file(READ "${IN}" hex HEX)
file(SIZE "${IN}" size)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n    " bytes "${bytes}")
file(WRITE "${OUT}.tmp"
  "/* Generated from src/server/ui/page.html by src/server/ui/embed.cmake: do not edit. */\n"
  "#include <stddef.h>\n\n"
  "extern const char sl_ui_page[];\n"
  "extern const size_t sl_ui_page_len;\n"
  "const char sl_ui_page[] = {\n    ${bytes}0x00};\n"
  "const size_t sl_ui_page_len = ${size};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
