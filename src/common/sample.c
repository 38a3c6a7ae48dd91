/*
 * sample.c: sampling rates, parsed exactly, and the sampler (sample.h).
 */
#include "common/sample.h"

#include <stdio.h>
#include <string.h>

bool sl_sample_parse(const char *s, size_t len, uint32_t *ppm)
{
    bool percent = len > 0 && s[len - 1] == '%';
    if (percent)
        len--;
    /* A fraction is held in millionths, a percentage in ten-thousandths of
     * a percent: both are parts per million. */
    unsigned places = percent ? 4 : 6;
    uint64_t whole_scale = percent ? 10000 : 1000000;
    size_t i = 0;
    uint64_t whole = 0, frac = 0;
    size_t int_digits = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
        if (int_digits++ >= 8) /* far past 100: refused below, without overflow */
            return false;
        whole = whole * 10 + (uint64_t)(s[i++] - '0');
    }
    size_t frac_digits = 0;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            unsigned d = (unsigned)(s[i++] - '0');
            if (frac_digits < places)
                frac = frac * 10 + d;
            else if (d != 0) /* finer than a part per million */
                return false;
            frac_digits++;
        }
        if (frac_digits == 0)
            return false; /* "1." */
    }
    if (i != len || int_digits + frac_digits == 0)
        return false;
    for (size_t k = frac_digits; k < places; k++)
        frac *= 10;
    uint64_t v = whole * whole_scale + frac;
    if (v == 0 || v > SL_SAMPLE_ALL)
        return false;
    *ppm = (uint32_t)v;
    return true;
}

char *sl_sample_format(uint32_t ppm, char *out)
{
    if (ppm >= SL_SAMPLE_ALL) {
        strcpy(out, "1");
        return out;
    }
    snprintf(out, 16, "0.%06u", (unsigned)ppm);
    size_t n = strlen(out);
    while (out[n - 1] == '0')
        out[--n] = '\0';
    return out;
}

void sl_sampler_init(sl_sampler *s, uint32_t ppm, uint64_t seed)
{
    s->state = seed;
    s->all = ppm >= SL_SAMPLE_ALL;
    /* Keep x < ppm / 10^6 * 2^64: exact to within one part in 2^64. */
    s->below = s->all ? UINT64_MAX
                      : (uint64_t)(((unsigned __int128)ppm << 64) / SL_SAMPLE_ALL);
}
