/*===- api_harness.c - Drives the vmoe runtime C API in tests -----*- C -*-===*\
|*                                                                            *|
|* Part of the vmoe project, under the Apache License v2.0 with LLVM          *|
|* Exceptions.                                                                *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* An embedder of a model built as a shared library (the --emit=lib flavour), *|
|* used by test/Runtime/c-api.test: it calls every function of                *|
|* vmoe_runtime.h, with good arguments and with NULL, out-of-range and        *|
|* malformed ones, and prints one line per call for FileCheck.                *|
|*                                                                            *|
|* Usage: api_harness WEIGHTS DIR IMAGE...  (DIR: a directory of images with  *|
|* bad ones, see make_inputs.py; the IMAGEs are run through the model)        *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "vmoe/Runtime/vmoe_runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IMAGES 8

static void printStatus(const char *call, int status, const char *error) {
  printf("%s: %s%s\n", call, status ? "error: " : "ok", status ? error : "");
}

int main(int argc, char **argv) {
  char error[256];
  if (argc < 4 || argc - 3 > MAX_IMAGES) {
    fprintf(stderr, "usage: api_harness WEIGHTS DIR IMAGE...\n");
    return 2;
  }
  const char *weights = argv[1];
  const char *dir = argv[2];
  char path[1024];

  /* Loading. */
  vmoe_model *model = vmoe_model_load(NULL, error, sizeof(error));
  printStatus("load NULL", model != NULL ? 0 : 1, error);
  model = vmoe_model_load("/nonexistent/w.safetensors", error, sizeof(error));
  printStatus("load missing", model != NULL ? 0 : 1, error);
  model = vmoe_model_load("/nonexistent/w.safetensors", NULL, 0);
  printf("load missing without error buffer: %s\n", model ? "model" : "NULL");
  char small[8];
  memset(small, 'x', sizeof(small));
  model = vmoe_model_load("/nonexistent/w.safetensors", small, sizeof(small));
  printf("load missing, 8-byte buffer: '%s'\n", small);
  vmoe_model_free(NULL);

  /* Queries on NULL. */
  printf("NULL: name '%s' batch %lld channels %lld height %lld width %lld "
         "classes %lld class_name %s layers %lld experts %lld block %lld "
         "stats %lld ratio %g max %g\n",
         vmoe_model_name(NULL), (long long)vmoe_model_batch_images(NULL),
         (long long)vmoe_model_channels(NULL),
         (long long)vmoe_model_height(NULL), (long long)vmoe_model_width(NULL),
         (long long)vmoe_model_classes(NULL),
         vmoe_model_class_name(NULL, 0) ? "set" : "NULL",
         (long long)vmoe_model_num_moe_layers(NULL),
         (long long)vmoe_model_num_experts(NULL),
         (long long)vmoe_model_moe_block(NULL, 0),
         (long long)vmoe_model_stats_size(NULL),
         vmoe_model_default_capacity_ratio(NULL),
         vmoe_model_max_capacity_ratio(NULL));
  printStatus("check_capacity_ratio NULL",
              vmoe_model_check_capacity_ratio(NULL, 1.0, error, sizeof(error)),
              error);
  float pixels[64];
  printStatus("load_image NULL model",
              vmoe_load_image(NULL, "x.png", pixels, error, sizeof(error)),
              error);
  printStatus("forward NULL model",
              vmoe_model_forward(NULL, pixels, 1, 1.0, pixels, NULL, error,
                                 sizeof(error)),
              error);

  /* Threads. */
  printf("set_threads 0: %d\n", vmoe_model_set_threads(0));
  printf("set_threads -3: %d\n", vmoe_model_set_threads(-3));
  printf("set_threads 2: %d, get_threads: %d\n", vmoe_model_set_threads(2),
         vmoe_model_get_threads());

  model = vmoe_model_load(weights, error, sizeof(error));
  printStatus("load", model ? 0 : 1, error);
  if (!model)
    return 1;
  printf("model: name '%s' batch %lld channels %lld height %lld width %lld "
         "classes %lld layers %lld experts %lld block %lld stats %lld "
         "ratio %g max %g\n",
         vmoe_model_name(model), (long long)vmoe_model_batch_images(model),
         (long long)vmoe_model_channels(model),
         (long long)vmoe_model_height(model),
         (long long)vmoe_model_width(model),
         (long long)vmoe_model_classes(model),
         (long long)vmoe_model_num_moe_layers(model),
         (long long)vmoe_model_num_experts(model),
         (long long)vmoe_model_moe_block(model, 0),
         (long long)vmoe_model_stats_size(model),
         vmoe_model_default_capacity_ratio(model),
         vmoe_model_max_capacity_ratio(model));
  const long long probes[] = {-1, 0, 1, 2};
  for (int i = 0; i < 4; ++i) {
    const char *name = vmoe_model_class_name(model, probes[i]);
    printf("class_name %lld: %s\n", probes[i], name ? name : "NULL");
  }
  printf("moe_block -1: %lld, moe_block 1: %lld\n",
         (long long)vmoe_model_moe_block(model, -1),
         (long long)vmoe_model_moe_block(model, 1));
  /* A manifest without per-layer "routing" is token choice, "vanilla". */
  const char *routing0 = vmoe_model_moe_routing(model, 0);
  const char *routing1 = vmoe_model_moe_routing(model, 1);
  const char *routingNull = vmoe_model_moe_routing(NULL, 0);
  printf("moe_routing 0: %s, moe_routing 1: %s, NULL model: %s\n",
         routing0 ? routing0 : "NULL", routing1 ? routing1 : "NULL",
         routingNull ? routingNull : "NULL");

  /* Capacity ratios. */
  const double ratios[] = {1.0, 0.2, 0.0, -2.0, 2.5, INFINITY, NAN};
  for (int i = 0; i < 7; ++i) {
    char call[64];
    snprintf(call, sizeof(call), "check_capacity_ratio %g", ratios[i]);
    printStatus(
        call,
        vmoe_model_check_capacity_ratio(model, ratios[i], error, sizeof(error)),
        error);
  }

  /* Images: bad arguments and bad files (big.png is resized: ok). */
  printStatus("load_image NULL path",
              vmoe_load_image(model, NULL, pixels, error, sizeof(error)), error);
  printStatus("load_image NULL pixels",
              vmoe_load_image(model, "x.png", NULL, error, sizeof(error)),
              error);
  printStatus("load_png (the former name) NULL path",
              vmoe_load_png(model, NULL, pixels, error, sizeof(error)), error);
  const char *bad[] = {"notpng.png", "truncated.png", "big.png", "rgb.png",
                       "nowhere.png"};
  for (int i = 0; i < 5; ++i) {
    char call[64];
    snprintf(path, sizeof(path), "%s/%s", dir, bad[i]);
    snprintf(call, sizeof(call), "load_image %s", bad[i]);
    printStatus(call,
                vmoe_load_image(model, path, pixels, error, sizeof(error)),
                error);
  }

  /* Good images, then the forward pass over all of them at once. */
  int n = argc - 3;
  int64_t size = vmoe_model_channels(model) * vmoe_model_height(model) *
                 vmoe_model_width(model);
  float *images = calloc((size_t)(n * size), sizeof(float));
  float *copy = calloc((size_t)(n * size), sizeof(float));
  for (int i = 0; i < n; ++i)
    if (vmoe_load_image(model, argv[3 + i], images + i * size, error,
                        sizeof(error))) {
      printStatus("load_image", 1, error);
      return 1;
    }
  memcpy(copy, images, (size_t)(n * size) * sizeof(float));
  int64_t classes = vmoe_model_classes(model);
  int64_t statsSize = vmoe_model_stats_size(model);
  float logits[MAX_IMAGES * 16];
  int32_t stats[64];
  memset(stats, 0x7f, sizeof(stats));
  printStatus("forward",
              vmoe_model_forward(model, images, n, 1.0, logits, stats, error,
                                 sizeof(error)),
              error);
  for (int i = 0; i < n; ++i) {
    printf("%s: logits", argv[3 + i]);
    for (int64_t c = 0; c < classes; ++c)
      printf(" %.9g", logits[i * classes + c]);
    printf("\n");
  }
  printf("stats:");
  for (int64_t i = 0; i < statsSize; ++i)
    printf(" %d", stats[i]);
  printf("\n");
  printf("images unchanged: %s\n",
         memcmp(copy, images, (size_t)(n * size) * sizeof(float)) ? "no"
                                                                  : "yes");

  /* Statistics are per call, not accumulated across calls; NULL is fine. */
  printStatus("forward again",
              vmoe_model_forward(model, images, n, 1.0, logits, stats, error,
                                 sizeof(error)),
              error);
  printf("stats again:");
  for (int64_t i = 0; i < statsSize; ++i)
    printf(" %d", stats[i]);
  printf("\n");
  printStatus("forward without stats",
              vmoe_model_forward(model, images, n, 2.0, logits, NULL, error,
                                 sizeof(error)),
              error);

  /* Padding modes: the zero padding image is routed only with ZEROS; the
     logits of the real images do not change either way. */
  printf("get_padding NULL: %d, default: %d\n", vmoe_model_get_padding(NULL),
         vmoe_model_get_padding(model));
  printStatus("set_padding NULL",
              vmoe_model_set_padding(NULL, VMOE_PADDING_ZEROS, error,
                                     sizeof(error)),
              error);
  printStatus("set_padding 7",
              vmoe_model_set_padding(model, 7, error, sizeof(error)), error);
  float masked[MAX_IMAGES * 16];
  vmoe_model_forward(model, images, n, 1.0, masked, NULL, error,
                     sizeof(error));
  printStatus("set_padding zeros",
              vmoe_model_set_padding(model, VMOE_PADDING_ZEROS, error,
                                     sizeof(error)),
              error);
  printStatus("forward zeros",
              vmoe_model_forward(model, images, n, 1.0, logits, stats, error,
                                 sizeof(error)),
              error);
  printf("stats zeros:");
  for (int64_t i = 0; i < statsSize; ++i)
    printf(" %d", stats[i]);
  printf("\n");
  printf("logits zeros same: %s\n",
         memcmp(masked, logits, (size_t)(n * classes) * sizeof(float))
             ? "no"
             : "yes");
  vmoe_model_set_padding(model, VMOE_PADDING_MASKED, error, sizeof(error));
  printf("get_padding: %d\n", vmoe_model_get_padding(model));

  /* Bad forward arguments. */
  printStatus(
      "forward n=0 NULL buffers",
      vmoe_model_forward(model, NULL, 0, 1.0, NULL, NULL, error, sizeof(error)),
      error);
  printStatus("forward n=-1",
              vmoe_model_forward(model, images, -1, 1.0, logits, NULL, error,
                                 sizeof(error)),
              error);
  printStatus("forward NULL images",
              vmoe_model_forward(model, NULL, 1, 1.0, logits, NULL, error,
                                 sizeof(error)),
              error);
  printStatus("forward NULL logits",
              vmoe_model_forward(model, images, 1, 1.0, NULL, NULL, error,
                                 sizeof(error)),
              error);
  printStatus("forward ratio 0.2",
              vmoe_model_forward(model, images, 1, 0.2, logits, NULL, error,
                                 sizeof(error)),
              error);
  printStatus("forward huge n",
              vmoe_model_forward(model, images, INT64_MAX, 1.0, logits, NULL,
                                 error, sizeof(error)),
              error);

  free(images);
  free(copy);
  vmoe_model_free(model);
  return 0;
}
