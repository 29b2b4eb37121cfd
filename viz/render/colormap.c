/* colormap: values to colours from the embedded tables of assets/colormaps/. */
#include "tscope/render.h"

#include <math.h>
#include <string.h>

/* Defined in the file the build generates from assets/colormaps/NAME.csv:
 * rows of {x, r, g, b} with x rising from 0 to 1. */
extern const float ts_cmap_data_viridis[][4];
extern const int ts_cmap_data_viridis_n;
extern const float ts_cmap_data_coolwarm[][4];
extern const int ts_cmap_data_coolwarm_n;

static const char *const cmap_names[] = {
    [TS_CMAP_VIRIDIS] = "viridis",
    [TS_CMAP_COOLWARM] = "coolwarm",
};
_Static_assert(sizeof cmap_names / sizeof cmap_names[0] == TS_CMAP_COUNT, "one name per map");

const char *ts_cmap_name(ts_cmap_id id) { return (unsigned)id < TS_CMAP_COUNT ? cmap_names[id] : "?"; }

bool ts_cmap_from_name(const char *name, ts_cmap_id *out) {
    for (int i = 0; i < TS_CMAP_COUNT; i++) {
        if (strcmp(name, cmap_names[i]) == 0) {
            *out = (ts_cmap_id)i;
            return true;
        }
    }
    return false;
}

static const float (*table(ts_cmap_id id, int *n))[4] {
    if (id == TS_CMAP_COOLWARM) {
        *n = ts_cmap_data_coolwarm_n;
        return ts_cmap_data_coolwarm;
    }
    *n = ts_cmap_data_viridis_n;
    return ts_cmap_data_viridis;
}

ts_rgb ts_cmap_eval(ts_cmap_id id, double t) {
    int n;
    const float(*rows)[4] = table(id, &n);
    if (!(t > 0)) t = 0; /* also catches NaN */
    if (t > 1) t = 1;
    /* Binary search for the segment [rows[lo].x, rows[lo+1].x] holding t. */
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (rows[mid][0] <= t)
            lo = mid;
        else
            hi = mid;
    }
    double span = rows[hi][0] - rows[lo][0];
    double f = span > 0 ? (t - rows[lo][0]) / span : 0;
    if (f < 0) f = 0;
    if (f > 1) f = 1;
    ts_rgb c;
    c.r = (float)(rows[lo][1] + f * (rows[hi][1] - rows[lo][1]));
    c.g = (float)(rows[lo][2] + f * (rows[hi][2] - rows[lo][2]));
    c.b = (float)(rows[lo][3] + f * (rows[hi][3] - rows[lo][3]));
    return c;
}

static uint32_t channel(float v) {
    long x = lround(v * 255.0);
    return (uint32_t)(x < 0 ? 0 : x > 255 ? 255 : x);
}

void ts_cmap_lut(ts_cmap_id id, uint32_t *lut) {
    for (int i = 0; i < TS_CMAP_LUT_SIZE; i++) {
        ts_rgb c = ts_cmap_eval(id, (double)i / (TS_CMAP_LUT_SIZE - 1));
        lut[i] = 0xFF000000u | channel(c.r) << 16 | channel(c.g) << 8 | channel(c.b);
    }
}

static double linear(double v) { return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4); }

double ts_rgb_luminance(ts_rgb c) {
    return 0.2126 * linear(c.r) + 0.7152 * linear(c.g) + 0.0722 * linear(c.b);
}
