/* classify.c - a program that links a compiled vmoe model.
 *
 * The model object comes from `vmoe-compile model.json --emit=obj`; the
 * runtime (VMoE::Runtime) provides the C API of vmoe/Runtime/vmoe_runtime.h.
 * Usage: vmoe-classify <weights.safetensors> <image (PNG or JPEG)>...
 * Prints the top class of each image and the routing statistics. */
#include "vmoe/Runtime/vmoe_runtime.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  char error[512];
  if (argc < 3) {
    fprintf(stderr, "usage: %s <weights.safetensors> <image>...\n", argv[0]);
    return 2;
  }
  vmoe_model *model = vmoe_model_load(argv[1], error, sizeof(error));
  if (!model) {
    fprintf(stderr, "error: %s\n", error);
    return 1;
  }
  int64_t n = argc - 2;
  int64_t pixels = vmoe_model_channels(model) * vmoe_model_height(model) *
                   vmoe_model_width(model);
  int64_t classes = vmoe_model_classes(model);
  float *images = malloc(sizeof(float) * n * pixels);
  float *logits = malloc(sizeof(float) * n * classes);
  int32_t *stats = malloc(sizeof(int32_t) * vmoe_model_stats_size(model));
  int status = 0;
  for (int64_t i = 0; i < n && status == 0; ++i)
    status = vmoe_load_image(model, argv[i + 2], images + i * pixels, error,
                             sizeof(error));
  if (status == 0)
    status = vmoe_model_forward(model, images, n,
                                vmoe_model_default_capacity_ratio(model),
                                logits, stats, error, sizeof(error));
  if (status != 0) {
    fprintf(stderr, "error: %s\n", error);
  } else {
    printf("model %s: %lld images, %lld MoE layers\n", vmoe_model_name(model),
           (long long)n, (long long)vmoe_model_num_moe_layers(model));
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (logits[i * classes + c] > logits[i * classes + best])
          best = c;
      const char *name = vmoe_model_class_name(model, best);
      printf("%s: %s\n", argv[i + 2], name ? name : "?");
    }
    int64_t experts = vmoe_model_num_experts(model);
    for (int64_t layer = 0; layer < vmoe_model_num_moe_layers(model);
         ++layer) {
      const int32_t *row = stats + layer * (experts + 1);
      printf("MoE block %lld: kept per expert [",
             (long long)vmoe_model_moe_block(model, layer));
      for (int64_t e = 0; e < experts; ++e)
        printf(e ? ", %d" : "%d", row[e]);
      printf("], dropped %d\n", row[experts]);
    }
  }
  free(stats);
  free(logits);
  free(images);
  vmoe_model_free(model);
  return status == 0 ? 0 : 1;
}
