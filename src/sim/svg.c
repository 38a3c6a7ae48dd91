/*
 * svg.c: the plot of a simulation, as one self-contained SVG file (no
 * scripts, no external fonts or styles), readable in any browser.
 *
 * One panel per algorithm, one above the other, on the same time axis and
 * the same scales so that the panels compare at a glance. Each panel has two
 * strips:
 *
 *   per bucket      bars: the requests admitted (green) and rejected (red,
 *                   stacked on top) in each time bucket; dashed: the limit's
 *                   rate over one bucket (limit x bucket / period)
 *   in last period  a line: the units admitted in the period that ends at
 *                   each bucket's end; dashed: the limit. Fixed window's line
 *                   climbs to about twice the limit on boundary traffic.
 *
 * Floating point is used here only to place pixels.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"

#define W SIM_SVG_W
#define LEFT SIM_SVG_LEFT
#define RIGHT SIM_SVG_RIGHT
#define TOP 74.0
#define STRIP_A 84.0  /* height of the per-bucket strip */
#define STRIP_B 64.0  /* height of the in-last-period strip */
#define GAP_AB 10.0
#define PANEL_GAP 58.0 /* title above a panel, tick labels below it */

/* Writes s with the five XML special characters escaped. */
void sim_svg_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            /* Control bytes are not allowed in XML 1.0. */
            fputc((unsigned char)*s < 0x20 ? '?' : *s, f);
        }
    }
}

void sim_svg_begin(FILE *f, double width, double height, double left, const char *what,
                   const char *title, const char *styles)
{
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n",
            width, height, width, height);
    fputs("<style>\n"
          ".grid{stroke:#e4e4e4;stroke-width:1}\n"
          ".frame{fill:none;stroke:#888;stroke-width:1}\n"
          ".tick{font-size:10px;fill:#444}\n"
          ".axis{font-size:10px;fill:#444}\n"
          ".title{font-size:13px;font-weight:bold;fill:#222}\n"
          ".sub{font-size:11px;fill:#444}\n",
          f);
    fputs(styles, f);
    fputs("</style>\n<title>", f);
    fputs(what, f);
    fputs(": ", f);
    sim_svg_text(f, title);
    fputs("</title>\n", f);
    fputs("<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    fprintf(f, "<text x=\"%.1f\" y=\"22\" class=\"title\">", left);
    sim_svg_text(f, title);
    fputs("</text>\n", f);
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about n ticks up to max. */
double sim_svg_step(double max, int n)
{
    if (max <= 0)
        return 1;
    double raw = max / n;
    double p = pow(10, floor(log10(raw)));
    double m = raw / p;
    double step = m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10;
    return step * p;
}

/* A horizontal axis with labels, gridlines, at the left of a strip. */
void sim_svg_y_axis(FILE *f, double y0, double h, double max, const char *label)
{
    double step = sim_svg_step(max, 3);
    for (double v = 0; v <= max * 1.0001; v += step) {
        double y = y0 + h - v / max * h;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n", LEFT,
                y, W - RIGHT, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%g</text>\n",
                LEFT - 4, y + 3.5, v);
    }
    fprintf(f,
            "<text x=\"14\" y=\"%.1f\" class=\"axis\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 14 %.1f)\">",
            y0 + h / 2, y0 + h / 2);
    sim_svg_text(f, label);
    fputs("</text>\n", f);
}

static double max_d(double a, double b)
{
    return a > b ? a : b;
}

int sim_write_svg(FILE *f, const sim_setup *s, const sim_result *r, size_t nr)
{
    const double plot_w = W - LEFT - RIGHT;
    const double panel_h = STRIP_A + GAP_AB + STRIP_B;
    const double H = TOP + (double)nr * (panel_h + PANEL_GAP) + 10;
    const double span_ns = (double)s->nbuckets * (double)s->bucket_ns;
    const double bar_w = plot_w / (double)s->nbuckets;
    const double limit_per_bucket = (double)s->limit * (double)s->bucket_ns / (double)s->period_ns;

    /* Shared scales, so that panels compare. */
    double max_a = limit_per_bucket, max_b = (double)s->limit;
    for (size_t i = 0; i < nr; i++)
        for (size_t b = 0; b < s->nbuckets; b++) {
            max_a = max_d(max_a, (double)(r[i].b_admitted[b] + r[i].b_rejected[b]));
            max_b = max_d(max_b, (double)r[i].b_window[b]);
        }
    max_a *= 1.1;
    max_b *= 1.15;
    double sa = sim_svg_step(max_a, 3), sb = sim_svg_step(max_b, 3);
    max_a = ceil(max_a / sa) * sa;
    max_b = ceil(max_b / sb) * sb;

    sim_svg_begin(f, W, H, LEFT, "sluice simulate", s->title,
                  ".admitted{fill:#3a9d5d}\n"
                  ".rejected{fill:#d9534f}\n"
                  ".limit{stroke:#1f4e9c;stroke-width:1.5;stroke-dasharray:6 4;fill:none}\n"
                  ".window{stroke:#e08a00;stroke-width:2;fill:none}\n");

    /* The legend. */
    double lx = LEFT, ly = 44;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" class=\"admitted\"/>", lx, ly - 9);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"sub\">admitted</text>\n", lx + 16, ly);
    lx += 90;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" class=\"rejected\"/>", lx, ly - 9);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"sub\">rejected (per bucket of %.6g s)</text>\n",
            lx + 16, ly, (double)s->bucket_ns / 1e9);
    lx += 230;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"window\"/>", lx, ly - 4,
            lx + 18, ly - 4);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"sub\">admitted in the last %.6g s</text>\n",
            lx + 22, ly, (double)s->period_ns / 1e9);
    lx += 200;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"limit\"/>", lx, ly - 4,
            lx + 18, ly - 4);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"sub\">the limit</text>\n", lx + 22, ly);

    for (size_t i = 0; i < nr; i++) {
        const sim_result *p = &r[i];
        double y0 = TOP + (double)i * (panel_h + PANEL_GAP) + 18;
        double yb = y0 + STRIP_A + GAP_AB;
        int64_t hundredths = (int64_t)((__int128)p->max_in_period * 100 / s->limit);

        fprintf(f, "<g class=\"series\" id=\"series-%s\" data-algorithm=\"%s\">\n", p->name, p->name);
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" class=\"title\">%s</text>"
                "<text x=\"%.1f\" y=\"%.1f\" class=\"sub\">admitted %llu, rejected %llu, at most "
                "%lld in any period (%lld.%02lld x the limit)</text>\n",
                LEFT, y0 - 6, p->name, LEFT + 130, y0 - 6, (unsigned long long)p->admitted,
                (unsigned long long)p->rejected, (long long)p->max_in_period,
                (long long)(hundredths / 100), (long long)(hundredths % 100));

        /* Strip A: bars per bucket. */
        sim_svg_y_axis(f, y0, STRIP_A, max_a, "per bucket");
        fputs("<g class=\"admitted\">", f);
        for (size_t b = 0; b < s->nbuckets; b++) {
            if (!p->b_admitted[b])
                continue;
            double h = (double)p->b_admitted[b] / max_a * STRIP_A;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>",
                    LEFT + (double)b * bar_w, y0 + STRIP_A - h, max_d(bar_w - 0.5, 0.3), h);
        }
        fputs("</g>\n<g class=\"rejected\">", f);
        for (size_t b = 0; b < s->nbuckets; b++) {
            if (!p->b_rejected[b])
                continue;
            double ha = (double)p->b_admitted[b] / max_a * STRIP_A;
            double h = (double)p->b_rejected[b] / max_a * STRIP_A;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>",
                    LEFT + (double)b * bar_w, y0 + STRIP_A - ha - h, max_d(bar_w - 0.5, 0.3), h);
        }
        fputs("</g>\n", f);
        double yl = y0 + STRIP_A - limit_per_bucket / max_a * STRIP_A;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" class=\"limit\"/>\n", LEFT,
                yl, W - RIGHT, yl);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"frame\"/>\n",
                LEFT, y0, plot_w, STRIP_A);

        /* Strip B: the sliding count against the limit. */
        sim_svg_y_axis(f, yb, STRIP_B, max_b, "in last period");
        fputs("<polyline class=\"window\" points=\"", f);
        for (size_t b = 0; b < s->nbuckets; b++)
            fprintf(f, "%.2f,%.2f ", LEFT + (double)(b + 1) * bar_w,
                    yb + STRIP_B - (double)p->b_window[b] / max_b * STRIP_B);
        fputs("\"/>\n", f);
        yl = yb + STRIP_B - (double)s->limit / max_b * STRIP_B;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" class=\"limit\"/>\n", LEFT,
                yl, W - RIGHT, yl);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"frame\"/>\n",
                LEFT, yb, plot_w, STRIP_B);

        /* The time axis, in seconds. */
        double span_s = span_ns / 1e9, step = sim_svg_step(span_s, 8);
        for (double t = 0; t <= span_s * 1.0001; t += step) {
            double x = LEFT + t / span_s * plot_w;
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%g</text>",
                    x, yb + STRIP_B + 13, t);
        }
        fprintf(f,
                "\n<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">time (s)</text>\n",
                W - RIGHT, yb + STRIP_B + 26);
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}
