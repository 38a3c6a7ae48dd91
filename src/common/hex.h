/*
 * hex.h: one hexadecimal digit's value, for the parsers that read them
 * (RESP's inline escapes, HTTP's percent-encoding, lease ids, --store URLs).
 */
#ifndef SL_COMMON_HEX_H
#define SL_COMMON_HEX_H

/* 0 to 15, or -1 for a character that is no hexadecimal digit. */
static inline int sl_hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif /* SL_COMMON_HEX_H */
