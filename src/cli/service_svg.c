/*
 * service_svg.c: the plot of `sluice simulate --service`, one
 * self-contained SVG file drawn with svg.c's axes.
 *
 * One panel per estimator, one above the other, on the same time axis and
 * the same scales. Each panel has four strips, each a line over time with
 * a dashed reference:
 *
 *   limit       the estimator's limit; dashed: the capacity (servers)
 *   in flight   requests admitted and not yet served; dashed: the capacity
 *   goodput     served over the capacity of the moment, %; dashed: 100%
 *   p99 / S     the p99 latency of the requests that ended in each point,
 *               over the service time; dashed: 2 x S
 *
 * The limit's and p99's scales stop at 6 x the capacity and 10 x S: a
 * line past them runs along the strip's top (the table has the figures).
 * Floating point is used here only to place pixels.
 */
#include <math.h>
#include <stdlib.h>

#include "cli/service.h"
#include "cli/sim.h"

#define W SIM_SVG_W
#define LEFT SIM_SVG_LEFT
#define RIGHT SIM_SVG_RIGHT
#define TOP 74.0
#define STRIP 58.0
#define GAP 10.0
#define PANEL_GAP 58.0
#define NSTRIP 4

static double min_d(double a, double b)
{
    return a < b ? a : b;
}

static double max_d(double a, double b)
{
    return a > b ? a : b;
}

/* The value of strip k at point q. */
static double strip_value(int k, const svc_params *p, const svc_point *q)
{
    switch (k) {
    case 0: return (double)q->limit;
    case 1: return (double)q->inflight;
    case 2: return (double)q->goodput_permille / 10.0;
    default: return (double)q->p99_ns / (double)p->service_ns;
    }
}

int svc_write_svg(FILE *f, const svc_params *p, const svc_result *r, size_t nr,
                  const char *title)
{
    static const char *const label[NSTRIP] = {"limit", "in flight", "goodput %", "p99 / S"};
    static const char *const cls[NSTRIP] = {"limit", "inflight", "goodput", "p99"};
    const double plot_w = W - LEFT - RIGHT;
    const double panel_h = NSTRIP * STRIP + (NSTRIP - 1) * GAP;
    const double H = TOP + (double)nr * (panel_h + PANEL_GAP) + 10;
    size_t npts = nr ? r[0].npts : 0;
    svc_point *pts = calloc(nr * npts + 1, sizeof *pts);
    if (!pts)
        return -1;
    for (size_t i = 0; i < nr; i++)
        svc_points(p, &r[i], pts + i * npts);
    const double span_ns = (double)r[0].ntick * (double)SVC_TICK_NS;

    /* Shared scales, with the reference lines in view and capped (above). */
    double cap = (double)p->capacity;
    double top[NSTRIP] = {cap, cap, 100, 2};
    const double ceiling[NSTRIP] = {6 * cap, 6 * cap, 200, 10};
    for (size_t i = 0; i < nr * npts; i++)
        for (int k = 0; k < NSTRIP; k++)
            top[k] = max_d(top[k], strip_value(k, p, &pts[i]));
    for (int k = 0; k < NSTRIP; k++) {
        top[k] = min_d(top[k] * 1.1, ceiling[k]);
        double st = sim_svg_step(top[k], 3);
        top[k] = ceil(top[k] / st) * st;
    }

    sim_svg_begin(f, W, H, LEFT, "sluice simulate --service", title,
                  ".limit{stroke:#1f4e9c;stroke-width:1.5;fill:none}\n"
                  ".inflight{stroke:#3a9d5d;stroke-width:1.5;fill:none}\n"
                  ".goodput{stroke:#e08a00;stroke-width:1.5;fill:none}\n"
                  ".p99{stroke:#d9534f;stroke-width:1.5;fill:none}\n"
                  ".ref{stroke:#555;stroke-width:1;stroke-dasharray:6 4;fill:none}\n");
    double lx = LEFT, ly = 44;
    for (int k = 0; k < NSTRIP; k++, lx += 130) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"%s\"/>", lx,
                ly - 4, lx + 18, ly - 4, cls[k]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"sub\">%s</text>\n", lx + 22, ly, label[k]);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"ref\"/>", lx, ly - 4,
            lx + 18, ly - 4);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"sub\">capacity, 100%%, 2 x S</text>\n",
            lx + 22, ly);

    for (size_t i = 0; i < nr; i++) {
        const svc_result *res = &r[i];
        const svc_point *pt = pts + i * npts;
        const char *name = sl_adapt_kind_name(res->kind);
        double y0 = TOP + (double)i * (panel_h + PANEL_GAP) + 18;
        fprintf(f, "<g class=\"series\" id=\"series-%s\" data-estimator=\"%s\">\n", name, name);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"title\">%s</text>", LEFT, y0 - 6, name);
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" class=\"sub\">min %lld, max %lld, initial %lld</text>\n",
                LEFT + 110, y0 - 6, (long long)res->cfg.min_limit, (long long)res->cfg.max_limit,
                (long long)res->cfg.initial_limit);
        for (int k = 0; k < NSTRIP; k++) {
            double ys = y0 + k * (STRIP + GAP);
            sim_svg_y_axis(f, ys, STRIP, top[k], label[k]);
            fprintf(f, "<polyline class=\"%s\" points=\"", cls[k]);
            for (size_t b = 0; b < npts; b++) {
                double v = min_d(strip_value(k, p, &pt[b]), top[k]);
                double x = LEFT + ((double)pt[b].t_ns + (double)pt[b].span_ns / 2) / span_ns * plot_w;
                fprintf(f, "%.2f,%.2f ", x, ys + STRIP - v / top[k] * STRIP);
            }
            fputs("\"/>\n", f);
            /* The reference: the capacity steps down at the halving. */
            fputs("<polyline class=\"ref\" points=\"", f);
            double x_half = p->halve_at_ns >= 0 ? LEFT + (double)p->halve_at_ns / span_ns * plot_w
                                                 : W - RIGHT;
            double before = k == 0 || k == 1 ? cap : k == 2 ? 100 : 2;
            double after = k == 0 || k == 1 ? (double)(p->capacity / 2) : before;
            double yb = ys + STRIP - min_d(before, top[k]) / top[k] * STRIP;
            double ya = ys + STRIP - min_d(after, top[k]) / top[k] * STRIP;
            fprintf(f, "%.1f,%.2f %.1f,%.2f", LEFT, yb, x_half, yb);
            if (p->halve_at_ns >= 0)
                fprintf(f, " %.1f,%.2f %.1f,%.2f", x_half, ya, W - RIGHT, ya);
            fputs("\"/>\n", f);
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"frame\"/>\n",
                    LEFT, ys, plot_w, STRIP);
        }
        double yt = y0 + panel_h;
        double span_s = span_ns / 1e9, step = sim_svg_step(span_s, 8);
        for (double t = 0; t <= span_s * 1.0001; t += step)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%g</text>",
                    LEFT + t / span_s * plot_w, yt + 13, t);
        fprintf(f,
                "\n<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">time (s)</text>\n",
                W - RIGHT, yt + 26);
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
    free(pts);
    return ferror(f) ? -1 : 0;
}
