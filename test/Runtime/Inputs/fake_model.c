/*===- fake_model.c - Test double of a compiled vmoe model --------*- C -*-===*\
|*                                                                            *|
|* Part of the vmoe project, under the Apache License v2.0 with LLVM          *|
|* Exceptions.                                                                *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* TEST DOUBLE, used only by test/Runtime: it stands in for the object file   *|
|* vmoe-compile emits (docs/ModelFormat.md §5), so that the runtime can be    *|
|* tested without the compiler. It defines the manifest and a forward pass    *|
|* that is a single linear layer over the pixels:                             *|
|*   logits[n][c] = bias[c] + sum_i x[n][i] * kernel[i][c]                    *|
|* accumulated in float32 in pixel order (build with -ffp-contract=off), and  *|
|* routing statistics of one MoE layer (E = 2, k = 1, each image a group of   *|
|* S = 4 tokens, one per pixel): a token goes to expert 0 when its channel-0  *|
|* value is > -1, else to expert 1 (the gray model: raw pixel >= 64; a zero  *|
|* padding image goes to expert 0); each expert keeps at most                *|
|* B = round(k*S*C/E) tokens per group, the rest are dropped. Images from     *|
|* `valid_images` on are masked padding: not routed, not counted.            *|
|*                                                                            *|
|* It also checks the descriptors the runtime passes (shapes, row-major       *|
|* strides, 64-byte alignment) and aborts on a violation.                     *|
|*                                                                            *|
|* Variants: default: 1 channel, 2x2 pixels, 2 named classes; -DFAKE_RGB:     *|
|* 3 channels, unnamed classes; -DFAKE_PHOTO: 3 channels, 7x5, named         *|
|* classes; -DFAKE_SQUARE: 3 channels, 6x6, no mean and std;                 *|
|* -DFAKE_PREPROCESS=<n>: a "preprocess" field; -DFAKE_BAD_MANIFEST=<n>: a    *|
|* broken manifest.                                                           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[4], strides[4];
} F32x4;
typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[1], strides[1];
} F32x1;
typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} F32x2;
typedef struct {
  int32_t *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} I32x2;

#define BATCH 2
#define CLASSES 2
#define EXPERTS 2
#define TOKENS (HEIGHT * WIDTH)

#if defined(FAKE_PHOTO)
/* RGB 7x5 (height x width): images of other sizes are resized. */
#define CHANNELS 3
#define HEIGHT 7
#define WIDTH 5
#define BIAS_OFFSET 224
#define WEIGHTS_SIZE 226
#define TOKENS_TEXT "35"
#define MANIFEST_IMAGE                                                         \
  "\"image\": {\"channels\": 3, \"height\": 7, \"width\": 5}, "                \
  "\"input\": {\"mean\": [0.5, 0.25, 0.125], \"std\": [0.5, 0.25, 2.0]}, "     \
  "\"classes\": 2, \"class_names\": [\"cold\", \"warm\"], "
#define MANIFEST_KERNEL_SHAPE "[105, 2]"
#elif defined(FAKE_SQUARE)
/* RGB 6x6, normalized by the preprocess field's value_range. */
#define CHANNELS 3
#define HEIGHT 6
#define WIDTH 6
#define BIAS_OFFSET 224
#define WEIGHTS_SIZE 226
#define TOKENS_TEXT "36"
#define MANIFEST_IMAGE                                                         \
  "\"image\": {\"channels\": 3, \"height\": 6, \"width\": 6}, "                \
  "\"classes\": 2, "
#define MANIFEST_KERNEL_SHAPE "[108, 2]"
#elif defined(FAKE_RGB)
#define CHANNELS 3
#define HEIGHT 2
#define WIDTH 2
#define BIAS_OFFSET 32
#define WEIGHTS_SIZE 34
#define TOKENS_TEXT "4"
#define MANIFEST_IMAGE                                                         \
  "\"image\": {\"channels\": 3, \"height\": 2, \"width\": 2}, "                \
  "\"input\": {\"mean\": [0.5, 0.25, 0.125], \"std\": [0.5, 0.25, 2.0]}, "     \
  "\"classes\": 2, "
#define MANIFEST_KERNEL_SHAPE "[12, 2]"
#else
#define CHANNELS 1
#define HEIGHT 2
#define WIDTH 2
#define BIAS_OFFSET 16
#define WEIGHTS_SIZE 18
#define TOKENS_TEXT "4"
#define MANIFEST_IMAGE                                                         \
  "\"image\": {\"channels\": 1, \"height\": 2, \"width\": 2}, "                \
  "\"input\": {\"mean\": [0.5], \"std\": [0.25]}, "                            \
  "\"classes\": 2, \"class_names\": [\"dark\", \"bright\"], "
#define MANIFEST_KERNEL_SHAPE "[4, 2]"
#endif

/* The "preprocess" field of -DFAKE_PREPROCESS=<n> (none by default). */
#ifndef FAKE_PREPROCESS
#define MANIFEST_PREPROCESS ""
#elif FAKE_PREPROCESS == 1
#define MANIFEST_PREPROCESS "\"preprocess\": \"decode\", "
#elif FAKE_PREPROCESS == 2
#define MANIFEST_PREPROCESS                                                    \
  "\"preprocess\": \"decode(precise=True)|resize_small(9)|central_crop(6)|"    \
  "value_range(-1, 1)\", "
#elif FAKE_PREPROCESS == 3
#define MANIFEST_PREPROCESS                                                    \
  "\"preprocess\": \"decode(precise=True)|resize(8, 10)|central_crop(6)|"      \
  "value_range(-1, 1)\", "
#elif FAKE_PREPROCESS == 4
#define MANIFEST_PREPROCESS "\"preprocess\": \"decode|central_crop(2)\", "
#elif FAKE_PREPROCESS == 5
#define MANIFEST_PREPROCESS                                                    \
  "\"preprocess\": \"decode|resize_small(60000)|central_crop(2)\", "
#endif

#define PIXELS (CHANNELS * HEIGHT * WIDTH)
#define STRINGIFY_VALUE(x) #x
#define STRINGIFY(x) STRINGIFY_VALUE(x)

#define MANIFEST_MOE_LAYER                                                     \
  "{\"block\": 1, \"num_experts\": 2, \"k\": 1, "                              \
  "\"tokens_per_group\": " TOKENS_TEXT ", \"capacity_rule\": \"round\", "        \
  "\"multiple_of\": 1, \"max_capacity\": " TOKENS_TEXT "}"
#define MANIFEST_TENSORS                                                       \
  "\"weights_size\": " STRINGIFY(                                              \
      WEIGHTS_SIZE) ", "                                                       \
                    "\"tensors\": [{\"name\": \"head.kernel\", "               \
                    "\"shape\": " MANIFEST_KERNEL_SHAPE ", \"offset\": 0}, "   \
                    "{\"name\": \"head.bias\", \"shape\": [2], "               \
                    "\"offset\": " STRINGIFY(BIAS_OFFSET) "}]"

#ifndef FAKE_BAD_MANIFEST
/* "routing" is not read by the runtime: unknown fields are ignored. */
static const char manifest[] =
    "{\"format\": \"vmoe-compiled-model\", \"version\": 1, "
    "\"name\": \"fake-model\", \"batch_images\": 2, " MANIFEST_IMAGE
    MANIFEST_PREPROCESS "\"routing\": \"bpr\", "
    "\"capacity_ratio\": 1.0, \"max_capacity_ratio\": 2.0, "
    "\"moe_layers\": [" MANIFEST_MOE_LAYER "], " MANIFEST_TENSORS "}";
#elif FAKE_BAD_MANIFEST == 1
/* Another format. */
static const char manifest[] = "{\"format\": \"vmoe-model\", \"version\": 1}";
#elif FAKE_BAD_MANIFEST == 2
/* Not JSON. */
static const char manifest[] = "{\"format\": ";
#elif FAKE_BAD_MANIFEST == 3
/* A tensor offset that is not a multiple of 16. */
static const char manifest[] =
    "{\"format\": \"vmoe-compiled-model\", \"version\": 1, "
    "\"name\": \"fake-model\", \"batch_images\": 2, " MANIFEST_IMAGE
    "\"capacity_ratio\": 1.0, \"max_capacity_ratio\": 2.0, "
    "\"moe_layers\": [" MANIFEST_MOE_LAYER "], \"weights_size\": 18, "
    "\"tensors\": [{\"name\": \"head.kernel\", \"shape\": [4, 2], "
    "\"offset\": 8}]}";
#elif FAKE_BAD_MANIFEST == 4
/* One class name for two classes. */
static const char manifest[] =
    "{\"format\": \"vmoe-compiled-model\", \"version\": 1, "
    "\"name\": \"fake-model\", \"batch_images\": 2, "
    "\"image\": {\"channels\": 1, \"height\": 2, \"width\": 2}, "
    "\"classes\": 2, \"class_names\": [\"dark\"], "
    "\"capacity_ratio\": 1.0, \"max_capacity_ratio\": 2.0, "
    "\"moe_layers\": [" MANIFEST_MOE_LAYER "], " MANIFEST_TENSORS "}";
#elif FAKE_BAD_MANIFEST == 5
/* k > num_experts. */
static const char manifest[] =
    "{\"format\": \"vmoe-compiled-model\", \"version\": 1, "
    "\"name\": \"fake-model\", \"batch_images\": 2, " MANIFEST_IMAGE
    "\"capacity_ratio\": 1.0, \"max_capacity_ratio\": 2.0, "
    "\"moe_layers\": [{\"block\": 1, \"num_experts\": 2, \"k\": 3, "
    "\"tokens_per_group\": 4, \"capacity_rule\": \"round\", "
    "\"multiple_of\": 1, \"max_capacity\": 4}], " MANIFEST_TENSORS "}";
#elif FAKE_BAD_MANIFEST == 6
/* A MoE layer routing the runtime does not know. */
static const char manifest[] =
    "{\"format\": \"vmoe-compiled-model\", \"version\": 1, "
    "\"name\": \"fake-model\", \"batch_images\": 2, " MANIFEST_IMAGE
    "\"capacity_ratio\": 1.0, \"max_capacity_ratio\": 2.0, "
    "\"moe_layers\": [{\"block\": 1, \"routing\": \"hash\", "
    "\"num_experts\": 2, \"k\": 1, \"tokens_per_group\": 4, "
    "\"capacity_rule\": \"round\", \"multiple_of\": 1, "
    "\"max_capacity\": 4}], " MANIFEST_TENSORS "}";
#elif FAKE_BAD_MANIFEST == 8
/* A maximum capacity ratio above the limit. */
static const char manifest[] =
    "{\"format\": \"vmoe-compiled-model\", \"version\": 1, "
    "\"name\": \"fake-model\", \"batch_images\": 2, " MANIFEST_IMAGE
    "\"capacity_ratio\": 1.0, \"max_capacity_ratio\": 1e300, "
    "\"moe_layers\": [" MANIFEST_MOE_LAYER "], " MANIFEST_TENSORS "}";
#elif FAKE_BAD_MANIFEST == 11
/* Preprocessing that ends on 3x3 images for a 2x2 model. */
static const char manifest[] =
    "{\"format\": \"vmoe-compiled-model\", \"version\": 1, "
    "\"name\": \"fake-model\", \"batch_images\": 2, " MANIFEST_IMAGE
    "\"preprocess\": \"decode|resize(3)\", "
    "\"capacity_ratio\": 1.0, \"max_capacity_ratio\": 2.0, "
    "\"moe_layers\": [" MANIFEST_MOE_LAYER "], " MANIFEST_TENSORS "}";
#elif FAKE_BAD_MANIFEST == 12
/* Preprocessing with an op the runtime does not know. */
static const char manifest[] =
    "{\"format\": \"vmoe-compiled-model\", \"version\": 1, "
    "\"name\": \"fake-model\", \"batch_images\": 2, " MANIFEST_IMAGE
    "\"preprocess\": \"decode|flip_lr|resize(2)\", "
    "\"capacity_ratio\": 1.0, \"max_capacity_ratio\": 2.0, "
    "\"moe_layers\": [" MANIFEST_MOE_LAYER "], " MANIFEST_TENSORS "}";
#elif FAKE_BAD_MANIFEST == 9 || FAKE_BAD_MANIFEST == 10
/* Panel fields on a [4, 2] head.kernel: bf16 pair panels of width 16 need
   32 words (9), or a panel storage the runtime does not know (10). */
#if FAKE_BAD_MANIFEST == 9
#define PANEL_FIELDS "\"panel_width\": 16, \"panel_storage\": \"bf16_pairs\""
#else
#define PANEL_FIELDS "\"panel_width\": 2, \"panel_storage\": \"f16\""
#endif
static const char manifest[] =
    "{\"format\": \"vmoe-compiled-model\", \"version\": 1, "
    "\"name\": \"fake-model\", \"batch_images\": 2, " MANIFEST_IMAGE
    "\"capacity_ratio\": 1.0, \"max_capacity_ratio\": 2.0, "
    "\"moe_layers\": [" MANIFEST_MOE_LAYER "], \"weights_size\": 16, "
    "\"tensors\": [{\"name\": \"head.kernel\", \"shape\": [4, 2], "
    "\"offset\": 0, " PANEL_FIELDS "}]}";
#elif FAKE_BAD_MANIFEST == 7
/* 60,000 nested arrays: the JSON nesting limit, not a stack overflow. */
#define FAKE_DEEP_MANIFEST 60000
static char manifest[FAKE_DEEP_MANIFEST + 1];
#endif

const char *vmoe_model_manifest(void) {
#ifdef FAKE_DEEP_MANIFEST
  for (int i = 0; i < FAKE_DEEP_MANIFEST; ++i)
    manifest[i] = '[';
#endif
  return manifest;
}

/* Aborts unless `ok`: the runtime broke the interface. */
static void expect(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fake model: bad %s\n", what);
    abort();
  }
}

void _mlir_ciface_vmoe_forward(F32x4 *images, F32x1 *weights,
                               double capacity_ratio, int64_t valid_images,
                               F32x2 *logits, I32x2 *stats) {
  expect(valid_images >= 1 && valid_images <= BATCH, "valid image count");
  expect(images && images->aligned && images->offset == 0 &&
             (uintptr_t)images->aligned % 64 == 0,
         "images pointer");
  expect(images->sizes[0] == BATCH && images->sizes[1] == CHANNELS &&
             images->sizes[2] == HEIGHT && images->sizes[3] == WIDTH,
         "images sizes");
  expect(images->strides[0] == PIXELS && images->strides[1] == HEIGHT * WIDTH &&
             images->strides[2] == WIDTH && images->strides[3] == 1,
         "images strides");
  expect(weights && weights->aligned && weights->offset == 0 &&
             (uintptr_t)weights->aligned % 64 == 0 &&
             weights->sizes[0] == WEIGHTS_SIZE && weights->strides[0] == 1,
         "weights descriptor");
  expect(logits && logits->aligned && logits->offset == 0 &&
             logits->sizes[0] == BATCH && logits->sizes[1] == CLASSES &&
             logits->strides[0] == CLASSES && logits->strides[1] == 1,
         "logits descriptor");
  expect(stats && stats->aligned && stats->offset == 0 &&
             stats->sizes[0] == 1 && stats->sizes[1] == EXPERTS + 1 &&
             stats->strides[0] == EXPERTS + 1 && stats->strides[1] == 1,
         "stats descriptor");

  const float *x = images->aligned;
  const float *kernel = weights->aligned;
  const float *bias = weights->aligned + BIAS_OFFSET;
  for (int n = 0; n < BATCH; ++n)
    for (int c = 0; c < CLASSES; ++c) {
      float acc = bias[c];
      for (int i = 0; i < PIXELS; ++i)
        acc += x[n * PIXELS + i] * kernel[i * CLASSES + c];
      logits->aligned[n * CLASSES + c] = acc;
    }

  /* B = round(k*S*C/E) with k = 1, S = TOKENS, E = EXPERTS. */
  int64_t capacity =
      (int64_t)nearbyint(1.0 * TOKENS * capacity_ratio / EXPERTS);
  int32_t kept[EXPERTS] = {0, 0};
  int32_t dropped = 0;
  for (int n = 0; n < valid_images; ++n) {
    int64_t count[EXPERTS] = {0, 0};
    for (int t = 0; t < TOKENS; ++t)
      ++count[x[n * PIXELS + t] > -1.0f ? 0 : 1];
    for (int e = 0; e < EXPERTS; ++e) {
      int64_t keep = count[e] < capacity ? count[e] : capacity;
      kept[e] += (int32_t)keep;
      dropped += (int32_t)(count[e] - keep);
    }
  }
  for (int e = 0; e < EXPERTS; ++e)
    stats->aligned[e] = kept[e];
  stats->aligned[EXPERTS] = dropped;
}
