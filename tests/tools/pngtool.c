/* pngtool: what the shell and GUI tests ask of a PNG, without ImageMagick.
 *
 *   pngtool size FILE                    "WxH"
 *   pngtool colors FILE GEOM [STEP]      distinct colours in the region
 *   pngtool diff A B GEOM [TOL [OUT]]    pixels that differ in the region of two files
 *                                        (TOL: by more than TOL in some channel, 0..255;
 *                                        OUT: a PNG of A, faded, with those pixels in red)
 *
 * GEOM is a region as ImageMagick writes it, WxH+X+Y, clipped to the image.
 * STEP > 1 looks at every STEP-th pixel of every STEP-th row only (what
 * `-sample 25%` did with STEP 4): a blank region still has one colour. A
 * colour is the pixel's four bytes, alpha included. Exit 2 with one line on
 * stderr when a file cannot be read or an argument is wrong. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* stb is third-party code written to other warning settings. Unused static
 * stb functions are reported at the end of the file, so that warning stays
 * off for the whole file. */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb_image.h>
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#pragma GCC diagnostic pop

typedef struct image {
    uint32_t *px; /* (h, w) RGBA as one word each */
    int w, h;
} image;

typedef struct region {
    int x, y, w, h;
} region;

static int fail(const char *fmt, const char *arg) {
    fprintf(stderr, "pngtool: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}

static int load(const char *path, image *im) {
    int n;
    unsigned char *data = stbi_load(path, &im->w, &im->h, &n, 4);
    if (!data) return fail("cannot read %s as PNG", path);
    im->px = (uint32_t *)(void *)data;
    return 0;
}

/* "WxH+X+Y", clipped to the image; 0 when it parses. */
static int parse_region(const char *geom, const image *im, region *r) {
    int used = 0;
    if (sscanf(geom, "%dx%d+%d+%d%n", &r->w, &r->h, &r->x, &r->y, &used) != 4 || geom[used] != '\0' || r->w < 0 ||
        r->h < 0 || r->x < 0 || r->y < 0)
        return fail("'%s' is not a region WxH+X+Y", geom);
    if (r->x > im->w) r->x = im->w;
    if (r->y > im->h) r->y = im->h;
    if (r->w > im->w - r->x) r->w = im->w - r->x;
    if (r->h > im->h - r->y) r->h = im->h - r->y;
    return 0;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static long count_colors(const image *im, const region *r, int step) {
    size_t cap = (size_t)(r->w / step + 1) * (size_t)(r->h / step + 1), n = 0;
    uint32_t *seen = malloc(cap * sizeof *seen);
    if (!seen) return -1;
    for (int y = r->y; y < r->y + r->h; y += step)
        for (int x = r->x; x < r->x + r->w; x += step) seen[n++] = im->px[(size_t)y * im->w + x];
    qsort(seen, n, sizeof *seen, cmp_u32);
    long distinct = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || seen[i] != seen[i - 1]) distinct++;
    free(seen);
    return distinct;
}

/* Whether two RGBA words differ by more than tol in some channel. */
static int differs(uint32_t p, uint32_t q, int tol) {
    for (int sh = 0; sh < 32; sh += 8) {
        int d = (int)((p >> sh) & 255) - (int)((q >> sh) & 255);
        if (d > tol || d < -tol) return 1;
    }
    return 0;
}

static long count_differences(const image *a, const image *b, const region *r, int tol) {
    long differ = 0;
    for (int y = r->y; y < r->y + r->h; y++)
        for (int x = r->x; x < r->x + r->w; x++)
            differ += differs(a->px[(size_t)y * a->w + x], b->px[(size_t)y * b->w + x], tol);
    return differ;
}

/* A's pixels faded to a fifth, and the differing ones of the region in red. */
static int write_diff(const char *path, const image *a, const image *b, const region *r, int tol) {
    uint32_t *out = malloc((size_t)a->w * a->h * sizeof *out);
    if (!out) return fail("%s: out of memory", path);
    for (size_t i = 0; i < (size_t)a->w * a->h; i++) {
        uint32_t p = a->px[i], o = 0xFF000000u;
        for (int sh = 0; sh < 24; sh += 8) o |= (uint32_t)(255 - (255 - ((p >> sh) & 255)) / 5) << sh;
        out[i] = o;
    }
    for (int y = r->y; y < r->y + r->h; y++)
        for (int x = r->x; x < r->x + r->w; x++) {
            size_t i = (size_t)y * a->w + x;
            if (differs(a->px[i], b->px[i], tol)) out[i] = 0xFF0000FFu; /* bytes R, G, B, A = red */
        }
    int ok = stbi_write_png(path, a->w, a->h, 4, out, a->w * 4);
    free(out);
    return ok ? 0 : fail("cannot write %s", path);
}

static int usage(void) {
    fprintf(stderr, "usage: pngtool size FILE | colors FILE WxH+X+Y [STEP] | diff A B WxH+X+Y [TOL [OUT]]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    image a = {0}, b = {0};
    region r;
    int rc = 0;
    if (strcmp(argv[1], "size") == 0 && argc == 3) {
        if (!(rc = load(argv[2], &a))) printf("%dx%d\n", a.w, a.h);
    } else if (strcmp(argv[1], "colors") == 0 && (argc == 4 || argc == 5)) {
        int step = argc == 5 ? atoi(argv[4]) : 1;
        if (step < 1) return fail("STEP '%s' must be a whole number of at least 1", argv[4]);
        if (!(rc = load(argv[2], &a)) && !(rc = parse_region(argv[3], &a, &r))) {
            long n = count_colors(&a, &r, step);
            if (n < 0) rc = fail("%s: out of memory", argv[2]);
            else printf("%ld\n", n);
        }
    } else if (strcmp(argv[1], "diff") == 0 && argc >= 5 && argc <= 7) {
        char *end = NULL;
        long tol = argc >= 6 ? strtol(argv[5], &end, 10) : 0;
        if (argc >= 6 && (*end || end == argv[5] || tol < 0 || tol > 255))
            return fail("TOL '%s' must be a whole number 0..255", argv[5]);
        if (!(rc = load(argv[2], &a)) && !(rc = load(argv[3], &b)) && !(rc = parse_region(argv[4], &a, &r))) {
            if (a.w != b.w || a.h != b.h) rc = fail("%s and the other file differ in size", argv[2]);
            else printf("%ld\n", count_differences(&a, &b, &r, (int)tol));
            if (!rc && argc == 7) rc = write_diff(argv[6], &a, &b, &r, (int)tol);
        }
    } else {
        rc = usage();
    }
    stbi_image_free(a.px);
    stbi_image_free(b.px);
    return rc;
}
