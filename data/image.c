/*
 * The image transform of include/adag/data.h (adag_data_image_map): a JPEG
 * decoded by libjpeg-turbo (TurboJPEG API, Debian's libturbojpeg0-dev) at
 * the smallest DCT scale that still covers the output, a random-resized
 * crop sampled bilinearly straight out of the decoded pixels, an optional
 * left-right flip, and the per-channel normalization, written as a CHW
 * tensor of f32, f16 or bf16 in one pass.
 *
 * The decoded image lives in the calling thread's scratch (the source's
 * ADAG_DATA_PARAM_SCRATCH, counted in its budget). libjpeg-turbo allocates
 * its own state: small for a baseline JPEG (a row of MCUs), but a
 * progressive or otherwise multi-scan one is decoded out of a coefficient
 * buffer for the whole image, 2 bytes a coefficient whatever the DCT
 * scale (28 MB for 3072 x 3072 at 4:2:0). The scratch's size counts that
 * buffer as well as the pixels (adag_data_image_scratch: room for both at
 * max_pixels), and an image whose pixels and coefficients together would
 * not fit in it is refused from its header, before anything is decoded.
 * The coefficients' part of the scratch is address space the thread never
 * touches: libjpeg-turbo holds the bytes it stands for.
 */
#include <adag/data.h>

#include "common/params.h"
#include "common/half.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <turbojpeg.h>

#define MAX_SIDE 8192u
#define MAX_PIXELS_LIMIT ((uint64_t)1 << 28)
#define DEFAULT_MAX_PIXELS ((uint64_t)2048 * 2048)
/* torchvision's RandomResizedCrop: draws before the centre-crop fallback */
#define CROP_TRIES 10

/* The transform with every default filled in. */
typedef struct {
    unsigned height, width, field;
    float scale_min, scale_max, ratio_min, ratio_max, flip;
    float mean[3], std[3];
    adag_dtype_t dtype;
    uint64_t max_pixels;
} image_t;

static void resolve(const adag_data_image_t *in, image_t *o)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    uint64_t m = in->field_mask;
    o->height = in->height;
    o->width = in->width;
    o->field = m & ADAG_DATA_IMAGE_FIELD ? in->field : 0;
    o->scale_min = m & ADAG_DATA_IMAGE_SCALE ? in->scale_min : 0.08f;
    o->scale_max = m & ADAG_DATA_IMAGE_SCALE ? in->scale_max : 1.0f;
    o->ratio_min = m & ADAG_DATA_IMAGE_RATIO ? in->ratio_min : 3.0f / 4.0f;
    o->ratio_max = m & ADAG_DATA_IMAGE_RATIO ? in->ratio_max : 4.0f / 3.0f;
    o->flip = m & ADAG_DATA_IMAGE_FLIP ? in->flip : 0.5f;
    memcpy(o->mean, m & ADAG_DATA_IMAGE_NORMALIZE ? in->mean : mean, sizeof(o->mean));
    memcpy(o->std, m & ADAG_DATA_IMAGE_NORMALIZE ? in->std : std, sizeof(o->std));
    o->dtype = m & ADAG_DATA_IMAGE_DTYPE ? in->dtype : ADAG_DTYPE_F32;
    o->max_pixels = m & ADAG_DATA_IMAGE_MAX_PIXELS ? in->max_pixels : DEFAULT_MAX_PIXELS;
}

/* The fields with a bit (height and width are required, without one). */
#define IMAGE_FIELD(m, bit) ADAG_PARAM_FIELD(adag_data_image_t, m, bit)
static const adag_param_field_t image_fields[] = {
    IMAGE_FIELD(field, ADAG_DATA_IMAGE_FIELD),
    IMAGE_FIELD(scale_min, ADAG_DATA_IMAGE_SCALE),
    IMAGE_FIELD(scale_max, ADAG_DATA_IMAGE_SCALE),
    IMAGE_FIELD(ratio_min, ADAG_DATA_IMAGE_RATIO),
    IMAGE_FIELD(ratio_max, ADAG_DATA_IMAGE_RATIO),
    IMAGE_FIELD(flip, ADAG_DATA_IMAGE_FLIP),
    IMAGE_FIELD(mean, ADAG_DATA_IMAGE_NORMALIZE),
    IMAGE_FIELD(std, ADAG_DATA_IMAGE_NORMALIZE),
    IMAGE_FIELD(dtype, ADAG_DATA_IMAGE_DTYPE),
    IMAGE_FIELD(max_pixels, ADAG_DATA_IMAGE_MAX_PIXELS),
};

adag_status_t adag_data_image_check(const adag_data_image_t *img)
{
    if (!img)
        return adag_data_fail(NULL, "adag_data_image: the transform is NULL");
    adag_status_t st = adag__params_check("adag_data_image", "adag_data_image_t", img,
                                         img->field_mask, image_fields,
                                         ADAG_PARAM_COUNT(image_fields));
    if (st != ADAG_OK)
        return st;
    image_t t;
    resolve(img, &t);
    if (t.height == 0 || t.width == 0 || t.height > MAX_SIDE || t.width > MAX_SIDE)
        return adag_data_fail(NULL, "adag_data_image: output %ux%u is not in 1..%u a side",
                              t.width, t.height, MAX_SIDE);
    if (t.field >= ADAG_DATA_MAX_FIELDS)
        return adag_data_fail(NULL, "adag_data_image: field %u is past the %d fields", t.field,
                              ADAG_DATA_MAX_FIELDS);
    if (!(t.scale_min > 0 && t.scale_min <= t.scale_max && t.scale_max <= 1))
        return adag_data_fail(NULL, "adag_data_image: scale %g .. %g is not in (0, 1]",
                              (double)t.scale_min, (double)t.scale_max);
    if (!(t.ratio_min > 0 && t.ratio_min <= t.ratio_max && isfinite(t.ratio_max)))
        return adag_data_fail(NULL, "adag_data_image: ratio %g .. %g is not a range > 0",
                              (double)t.ratio_min, (double)t.ratio_max);
    if (!(t.flip >= 0 && t.flip <= 1))
        return adag_data_fail(NULL, "adag_data_image: flip probability %g is not in [0, 1]",
                              (double)t.flip);
    for (int c = 0; c < 3; c++)
        if (!isfinite(t.mean[c]) || !isfinite(t.std[c]) || t.std[c] == 0)
            return adag_data_fail(NULL, "adag_data_image: channel %d: mean %g, std %g", c,
                                  (double)t.mean[c], (double)t.std[c]);
    if (t.dtype != ADAG_DTYPE_F32 && t.dtype != ADAG_DTYPE_F16 && t.dtype != ADAG_DTYPE_BF16)
        return adag_data_fail(NULL, "adag_data_image: dtype %s: f32, f16 or bf16",
                              adag_dtype_name(t.dtype));
    if (t.max_pixels == 0 || t.max_pixels > MAX_PIXELS_LIMIT)
        return adag_data_fail(NULL, "adag_data_image: max_pixels %llu is not in 1..%llu",
                              (unsigned long long)t.max_pixels,
                              (unsigned long long)MAX_PIXELS_LIMIT);
    return ADAG_OK;
}

size_t adag_data_image_size(const adag_data_image_t *img)
{
    if (adag_data_image_check(img) != ADAG_OK)
        return 0;
    image_t t;
    resolve(img, &t);
    return (size_t)3 * t.height * t.width * adag_dtype_size(t.dtype);
}

/* The scratch: the decoded RGB pixels, then the resampler's tables (two
 * source columns and a weight per output column, the same per row). */
typedef struct {
    uint32_t a, b;
    float w;
} tap_t;

static size_t tables_size(const image_t *t)
{
    return ((size_t)t->width + t->height) * sizeof(tap_t);
}

/* The scratch: the decoded pixels (3 bytes each) and, as much again, room
 * for a multi-scan JPEG's coefficient buffer (2 bytes a coefficient: 3
 * bytes a pixel at 4:2:0, so a whole image of max_pixels), then the tables. */
size_t adag_data_image_scratch(const adag_data_image_t *img)
{
    if (adag_data_image_check(img) != ADAG_OK)
        return 0;
    image_t t;
    resolve(img, &t);
    size_t pixels = (size_t)t.max_pixels * 3;
    return 2 * ((pixels + 63) / 64 * 64) + tables_size(&t);
}

/* ---- what libjpeg-turbo will allocate: the JPEG's frame and first scan ---- */

/* The bytes of libjpeg-turbo's whole-image coefficient buffer for this
 * JPEG: 0 for a single-scan (baseline) one, which decodes a row of MCUs at
 * a time; else, per component, its blocks (rounded up to its sampling
 * factors, as jdcoefct.c allocates them) x 64 coefficients x 2 bytes.
 * *progressive says which kind of multi-scan it is. Reads the markers up
 * to the first scan's header, every length bounded; -1 when they are not
 * there (libjpeg-turbo's header read then says what is wrong). */
static int64_t coef_bytes(const unsigned char *p, size_t n, int *progressive)
{
    unsigned ncomp = 0, hs[4] = {0}, vs[4] = {0}, hmax = 1, vmax = 1;
    uint64_t W = 0, H = 0;
    int have_frame = 0;
    *progressive = 0;
    if (n < 4 || p[0] != 0xFF || p[1] != 0xD8)
        return -1;
    size_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xFF)
            return -1;
        unsigned m = p[i + 1];
        if (m == 0xFF) { /* fill byte */
            i++;
            continue;
        }
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) { /* no length */
            i += 2;
            continue;
        }
        if (m == 0xD9)
            return -1;
        size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
        const unsigned char *seg = p + i + 4;
        if (len < 2 || i + 2 + len > n)
            return -1;
        size_t body = len - 2;
        /* SOF0..15 but DHT (C4), JPG (C8) and DAC (CC) */
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (body < 6)
                return -1;
            H = (uint64_t)seg[1] << 8 | seg[2];
            W = (uint64_t)seg[3] << 8 | seg[4];
            ncomp = seg[5];
            if (ncomp == 0 || ncomp > 4 || body < 6 + 3 * (size_t)ncomp)
                return -1;
            for (unsigned c = 0; c < ncomp; c++) {
                hs[c] = seg[6 + 3 * c + 1] >> 4;
                vs[c] = seg[6 + 3 * c + 1] & 15;
                if (hs[c] < 1 || hs[c] > 4 || vs[c] < 1 || vs[c] > 4)
                    return -1;
                hmax = hs[c] > hmax ? hs[c] : hmax;
                vmax = vs[c] > vmax ? vs[c] : vmax;
            }
            *progressive = (m & 3) == 2; /* C2, C6, CA, CE */
            have_frame = 1;
        } else if (m == 0xDA) { /* the first scan: how many components it has */
            if (!have_frame || body < 1)
                return -1;
            if (!*progressive && seg[0] >= ncomp)
                return 0; /* one interleaved scan: no whole-image buffer */
            uint64_t total = 0;
            for (unsigned c = 0; c < ncomp; c++) {
                uint64_t bw = (W * hs[c] + 8 * hmax - 1) / (8 * hmax);
                uint64_t bh = (H * vs[c] + 8 * vmax - 1) / (8 * vmax);
                bw = (bw + hs[c] - 1) / hs[c] * hs[c];
                bh = (bh + vs[c] - 1) / vs[c] * vs[c];
                total += bw * bh * 64 * 2;
            }
            return (int64_t)total;
        }
        i += 2 + len;
    }
    return -1;
}

/* A uniform draw in [0, 1). */
static double unit(uint64_t *rng)
{
    return (double)(adag_data_rand(rng) >> 11) * 0x1p-53;
}

/* A uniform integer in 0..n. */
static unsigned below_incl(uint64_t *rng, unsigned n)
{
    unsigned v = (unsigned)(unit(rng) * ((double)n + 1));
    return v > n ? n : v;
}

/* The crop (x, y, w, h) of a W x H image: torchvision's RandomResizedCrop. */
static void choose_crop(const image_t *t, unsigned W, unsigned H, uint64_t *rng, unsigned *x,
                        unsigned *y, unsigned *w, unsigned *h)
{
    double area = (double)W * H, lr0 = log(t->ratio_min), lr1 = log(t->ratio_max);
    for (int i = 0; i < CROP_TRIES; i++) {
        double target = area * (t->scale_min + unit(rng) * (t->scale_max - t->scale_min));
        double ratio = exp(lr0 + unit(rng) * (lr1 - lr0));
        long cw = lround(sqrt(target * ratio)), ch = lround(sqrt(target / ratio));
        if (cw > 0 && ch > 0 && cw <= (long)W && ch <= (long)H) {
            *w = (unsigned)cw;
            *h = (unsigned)ch;
            *x = below_incl(rng, W - *w);
            *y = below_incl(rng, H - *h);
            return;
        }
    }
    double in_ratio = (double)W / H;
    if (in_ratio < t->ratio_min) {
        *w = W;
        *h = (unsigned)lround(W / (double)t->ratio_min);
    } else if (in_ratio > t->ratio_max) {
        *h = H;
        *w = (unsigned)lround(H * (double)t->ratio_max);
    } else {
        *w = W;
        *h = H;
    }
    *w = *w < 1 ? 1 : *w > W ? W : *w;
    *h = *h < 1 ? 1 : *h > H ? H : *h;
    *x = (W - *w) / 2;
    *y = (H - *h) / 2;
}

/* Bilinear taps of n outputs over [start, start + len) of a source of
 * `size` samples (pixel centres aligned, clamped at the edges). */
static void make_taps(tap_t *taps, unsigned n, double start, double len, unsigned size)
{
    double step = len / n;
    for (unsigned i = 0; i < n; i++) {
        double s = start + (i + 0.5) * step - 0.5;
        if (s < 0)
            s = 0;
        if (s > size - 1)
            s = size - 1;
        unsigned a = (unsigned)s;
        taps[i].a = a;
        taps[i].b = a + 1 < size ? a + 1 : a;
        taps[i].w = (float)(s - a);
    }
}

static void store(void *out, size_t i, float v, adag_dtype_t dtype)
{
    if (dtype == ADAG_DTYPE_F32) {
        memcpy((char *)out + i * 4, &v, 4);
    } else {
        uint16_t h = dtype == ADAG_DTYPE_F16 ? adag__f32_to_f16(v) : adag__f32_to_bf16(v);
        memcpy((char *)out + i * 2, &h, 2);
    }
}

/* Resamples the crop of the decoded pixels into the CHW output. */
static void resample(const image_t *t, const unsigned char *px, size_t pitch, const tap_t *xt,
                     const tap_t *yt, int flip, void *out)
{
    float scale[3], bias[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = 1.0f / (255.0f * t->std[c]);
        bias[c] = -t->mean[c] / t->std[c];
    }
    size_t plane = (size_t)t->height * t->width;
    for (unsigned oy = 0; oy < t->height; oy++) {
        const unsigned char *r0 = px + yt[oy].a * pitch, *r1 = px + yt[oy].b * pitch;
        float wy = yt[oy].w;
        size_t row = (size_t)oy * t->width;
        for (unsigned ox = 0; ox < t->width; ox++) {
            const tap_t *tx = &xt[flip ? t->width - 1 - ox : ox];
            size_t a = (size_t)tx->a * 3, b = (size_t)tx->b * 3;
            float wx = tx->w;
            for (int c = 0; c < 3; c++) {
                float top = r0[a + c] + (r0[b + c] - r0[a + c]) * wx;
                float bot = r1[a + c] + (r1[b + c] - r1[a + c]) * wx;
                float v = top + (bot - top) * wy;
                store(out, c * plane + row + ox, v * scale[c] + bias[c], t->dtype);
            }
        }
    }
}

/* The smallest of libjpeg-turbo's scales whose crop still covers the
 * output (scale 1 if none does: the crop is then upsampled); if the W x H
 * image at that scale is over max_pixels, the largest scale under it
 * (a very large image: its crop is then upsampled a little). {0, 0} if
 * even 1/8 is over. */
static tjscalingfactor pick_scale(const image_t *t, unsigned W, unsigned H, unsigned cw,
                                  unsigned ch)
{
    int n = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&n), best = {1, 1}, fits = {0, 0};
    for (int i = 0; sf && i < n; i++) {
        if (sf[i].num > sf[i].denom)
            continue; /* only reductions */
        double f = (double)sf[i].num / sf[i].denom;
        if (cw * f >= t->width && ch * f >= t->height && f < (double)best.num / best.denom)
            best = sf[i];
        if ((uint64_t)TJSCALED((int)W, sf[i]) * (uint64_t)TJSCALED((int)H, sf[i]) <=
                t->max_pixels &&
            (!fits.denom || f > (double)fits.num / fits.denom))
            fits = sf[i];
    }
    if (fits.denom && (double)fits.num / fits.denom < (double)best.num / best.denom)
        return fits;
    return fits.denom ? best : fits;
}

adag_status_t adag_data_image_map(void *arg, const adag_data_sample_t *s, uint64_t *rng,
                                  void *out, size_t out_size)
{
    const adag_data_image_t *img = arg;
    image_t t;
    if (!img || !s || !rng || !out)
        return adag_data_fail(s, "adag_data_image_map: NULL argument");
    resolve(img, &t);
    size_t need = (size_t)3 * t.height * t.width * adag_dtype_size(t.dtype);
    if (out_size < need)
        return adag_data_fail(s, "the output of %zu bytes does not hold a %ux%u %s image (%zu)",
                              out_size, t.width, t.height, adag_dtype_name(t.dtype), need);
    const unsigned char *jpeg = s->data;
    size_t size = s->size;
    if (s->nfields) {
        if (t.field >= s->nfields)
            return adag_data_fail(s, "the image is field %u of a sample with %u", t.field,
                                  s->nfields);
        jpeg = s->fields[t.field].data;
        size = s->fields[t.field].size;
    }
    if (!jpeg || size == 0)
        return adag_data_fail(s, "empty image");
    if (size > ULONG_MAX)
        return adag_data_fail(s, "an image of %zu bytes", size);

    adag_status_t st = ADAG_OK;
    tjhandle h = tjInitDecompress();
    if (!h)
        return adag_data_fail(s, "libjpeg-turbo: %s", tjGetErrorStr2(NULL));
    int W = 0, H = 0, subsamp = 0, cs = 0;
    if (tjDecompressHeader3(h, jpeg, (unsigned long)size, &W, &H, &subsamp, &cs) != 0) {
        st = adag_data_fail(s, "not a JPEG: %s", tjGetErrorStr2(h));
        goto out;
    }
    if (W <= 0 || H <= 0) {
        st = adag_data_fail(s, "a %dx%d JPEG", W, H);
        goto out;
    }
    if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
        st = adag_data_fail(s, "a CMYK JPEG (%dx%d): RGB and grayscale are decoded", W, H);
        goto out;
    }
    unsigned cx, cy, cw, ch;
    choose_crop(&t, (unsigned)W, (unsigned)H, rng, &cx, &cy, &cw, &ch);
    int flip = unit(rng) < t.flip;
    tjscalingfactor sf = pick_scale(&t, (unsigned)W, (unsigned)H, cw, ch);
    if (!sf.denom) {
        st = adag_data_fail(s, "a %dx%d image is over max_pixels %llu even decoded at 1/8", W,
                            H, (unsigned long long)t.max_pixels);
        goto out;
    }
    unsigned SW = (unsigned)TJSCALED(W, sf), SH = (unsigned)TJSCALED(H, sf);
    size_t pitch = (size_t)SW * 3, pixels = pitch * SH;
    size_t room = s->scratch_size > tables_size(&t) ? s->scratch_size - tables_size(&t) : 0;
    room = room / 64 * 64;
    int progressive;
    int64_t coefs = coef_bytes(jpeg, size, &progressive);
    if (coefs > 0 && (!s->scratch || pixels > room || (uint64_t)coefs > room - pixels)) {
        st = adag_data_fail(s,
                            "a %dx%d %s JPEG: libjpeg-turbo's coefficient buffer for the "
                            "whole image (%lld bytes) and its pixels at scale %d/%d (%zu "
                            "bytes) do not fit the thread's scratch of %zu bytes (max_pixels "
                            "%llu sizes it: adag_data_image_scratch)",
                            W, H, progressive ? "progressive" : "multi-scan",
                            (long long)coefs, sf.num, sf.denom, pixels, s->scratch_size,
                            (unsigned long long)t.max_pixels);
        goto out;
    }
    if (!s->scratch || pixels > room) {
        st = adag_data_fail(s,
                            "decoding a %dx%d JPEG at scale %d/%d needs %zu bytes of scratch, "
                            "the thread has %zu (ADAG_DATA_PARAM_SCRATCH: "
                            "adag_data_image_scratch)",
                            W, H, sf.num, sf.denom, pixels + tables_size(&t), s->scratch_size);
        goto out;
    }
    unsigned char *px = s->scratch;
    tap_t *xt = (tap_t *)(px + room), *yt = xt + t.width;
    if (tjDecompress2(h, jpeg, (unsigned long)size, px, (int)SW, (int)pitch, (int)SH, TJPF_RGB,
                      TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0) {
        st = adag_data_fail(s, "a bad %dx%d JPEG: %s", W, H, tjGetErrorStr2(h));
        goto out;
    }
    double fx = (double)SW / W, fy = (double)SH / H;
    make_taps(xt, t.width, cx * fx, cw * fx, SW);
    make_taps(yt, t.height, cy * fy, ch * fy, SH);
    resample(&t, px, pitch, xt, yt, flip, out);
out:
    tjDestroy(h);
    return st;
}
