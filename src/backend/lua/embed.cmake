# Writes OUT, a C file holding the Lua script IN as `const char sl_redis_script[]`
# (NUL-terminated bytes, so that any character of the script is kept exactly)
# and its SHA1 as `sl_redis_script_sha[]`, the name EVALSHA calls it by.
# Run at build time: cmake -DIN=... -DOUT=... -P embed.cmake
file(READ "${IN}" hex HEX)
file(SHA1 "${IN}" sha)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n    " bytes "${bytes}")
file(WRITE "${OUT}.tmp"
  "/* Generated from src/backend/lua/sluice.lua by src/backend/lua/embed.cmake: do not edit. */\n"
  "#include \"backend/redis.h\"\n\n"
  "const char sl_redis_script[] = {\n    ${bytes}0x00};\n"
  "const char sl_redis_script_sha[] = \"${sha}\";\n")
file(RENAME "${OUT}.tmp" "${OUT}")
