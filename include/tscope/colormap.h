/* colormap: values to colours, from published tables.
 *
 * The tables are data (assets/colormaps/NAME.csv) that the build embeds: viridis
 * (sequential, for probabilities and other non-negative values) and Moreland's
 * coolwarm (diverging, centred on zero, for signed values). A colour is looked
 * up by t in [0, 1] with linear interpolation between the table's entries.
 */
#ifndef TSCOPE_COLORMAP_H
#define TSCOPE_COLORMAP_H

#include <stdbool.h>
#include <stdint.h>

typedef enum ts_cmap_id {
    TS_CMAP_VIRIDIS,  /* sequential: dark purple (low) to yellow (high) */
    TS_CMAP_COOLWARM, /* diverging: blue (negative), light grey (0), red (positive) */
    TS_CMAP_COUNT
} ts_cmap_id;

/* An sRGB colour, each channel in [0, 1]. */
typedef struct ts_rgb {
    float r, g, b;
} ts_rgb;

/* Entries in a lookup table made by ts_cmap_lut. */
#define TS_CMAP_LUT_SIZE 256

const char *ts_cmap_name(ts_cmap_id id); /* "viridis"; "?" when out of range */

/* The map called `name` ("viridis", "coolwarm"); false when there is none. */
bool ts_cmap_from_name(const char *name, ts_cmap_id *out);

/* The colour at t (clamped to [0, 1]; NaN gives the low end). */
ts_rgb ts_cmap_eval(ts_cmap_id id, double t);

/* TS_CMAP_LUT_SIZE opaque colours as cairo's ARGB32 words (0xFFRRGGBB), entry
 * i for t = i / (TS_CMAP_LUT_SIZE - 1): for filling images fast. */
void ts_cmap_lut(ts_cmap_id id, uint32_t *lut);

/* Relative luminance (WCAG / Rec. 709 on linearised sRGB), in [0, 1]. */
double ts_rgb_luminance(ts_rgb c);

#endif
