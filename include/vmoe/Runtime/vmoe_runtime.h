/*===- vmoe_runtime.h - C API of compiled vmoe models -------------*- C -*-===*\
|*                                                                            *|
|* Part of the vmoe project, under the Apache License v2.0 with LLVM          *|
|* Exceptions.                                                                *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* The public interface of the runtime linked into every model compiled by    *|
|* vmoe-compile (docs/ModelFormat.md §5). A program links the model object    *|
|* (or the --emit=lib shared library) and calls these functions: load the     *|
|* weights (safetensors), read images (PNG or JPEG, any size), run the        *|
|* forward pass over any number of images at a run-time capacity ratio.       *|
|*                                                                            *|
|* Conventions: functions returning int return 0 on success and non-zero on   *|
|* failure, with a one-line, NUL-terminated message in `error` (truncated to  *|
|* `error_size` bytes; `error` may be NULL). Every function accepts NULL and  *|
|* out-of-range arguments and reports them instead of crashing. A model       *|
|* object is not safe to use from several threads at once; distinct models    *|
|* are independent. The forward pass itself runs on OpenMP threads.           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef VMOE_RUNTIME_VMOE_RUNTIME_H
#define VMOE_RUNTIME_VMOE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

/// Marks the API for export from a shared library: the runtime is compiled
/// with hidden visibility, so only these functions (and the model's own
/// symbols) are visible to embedders.
#if defined(__GNUC__) || defined(__clang__)
#define VMOE_RUNTIME_API __attribute__((visibility("default")))
#else
#define VMOE_RUNTIME_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// A compiled model with its weights loaded: the manifest linked into the
/// program, the weights buffer and scratch buffers for one batch.
typedef struct vmoe_model vmoe_model;

/// Loads the weights of the linked-in model from the safetensors file
/// `weights_path` (docs/ModelFormat.md §3). Returns NULL on failure (bad
/// manifest, unreadable or mismatching weights) with a message in `error`.
VMOE_RUNTIME_API vmoe_model *vmoe_model_load(const char *weights_path,
                                             char *error, size_t error_size);

/// Frees a model returned by vmoe_model_load(); NULL is a no-op.
VMOE_RUNTIME_API void vmoe_model_free(vmoe_model *model);

/// The model name from the manifest; "" for NULL.
VMOE_RUNTIME_API const char *vmoe_model_name(const vmoe_model *model);

/// Images per compiled batch (N); vmoe_model_forward() pads to a multiple of
/// it. 0 for NULL.
VMOE_RUNTIME_API int64_t vmoe_model_batch_images(const vmoe_model *model);

/// Input image channels, height and width in pixels; 0 for NULL.
VMOE_RUNTIME_API int64_t vmoe_model_channels(const vmoe_model *model);
VMOE_RUNTIME_API int64_t vmoe_model_height(const vmoe_model *model);
VMOE_RUNTIME_API int64_t vmoe_model_width(const vmoe_model *model);

/// Number of output classes (logits per image); 0 for NULL.
VMOE_RUNTIME_API int64_t vmoe_model_classes(const vmoe_model *model);

/// The name of class `index`, or NULL when the model has no class names, the
/// index is out of range or `model` is NULL.
VMOE_RUNTIME_API const char *vmoe_model_class_name(const vmoe_model *model,
                                                   int64_t index);

/// Number of MoE layers L; 0 for NULL.
VMOE_RUNTIME_API int64_t vmoe_model_num_moe_layers(const vmoe_model *model);

/// Experts E of every MoE layer (all layers have the same E); 0 for NULL or
/// a model without MoE layers.
VMOE_RUNTIME_API int64_t vmoe_model_num_experts(const vmoe_model *model);

/// The encoder block (0-based) of MoE layer `layer`; -1 when out of range.
VMOE_RUNTIME_API int64_t vmoe_model_moe_block(const vmoe_model *model,
                                              int64_t layer);

/// The routing of MoE layer `layer`: "vanilla", "bpr", "expert_choice" or
/// "soft" (its statistics row: kept choices per expert and dropped choices;
/// the histogram of experts per token; slots per expert and 0); NULL when
/// out of range.
VMOE_RUNTIME_API const char *vmoe_model_moe_routing(const vmoe_model *model,
                                                    int64_t layer);

/// Number of int32 routing statistics vmoe_model_forward() writes:
/// L * (E + 1). 0 for NULL.
VMOE_RUNTIME_API int64_t vmoe_model_stats_size(const vmoe_model *model);

/// The capacity ratio the model was compiled with as default, and the
/// largest ratio its buffers allow; 0 for NULL.
VMOE_RUNTIME_API double
vmoe_model_default_capacity_ratio(const vmoe_model *model);
VMOE_RUNTIME_API double vmoe_model_max_capacity_ratio(const vmoe_model *model);

/// Checks that `capacity_ratio` is usable: finite, > 0, at most the maximum,
/// and giving every MoE layer at least one slot per expert
/// (B = rule(k*S*C/E) >= 1).
VMOE_RUNTIME_API int vmoe_model_check_capacity_ratio(const vmoe_model *model,
                                                     double capacity_ratio,
                                                     char *error,
                                                     size_t error_size);

/// Padding modes of vmoe_model_set_padding(). The last batch of a forward
/// pass is filled up with all-zero images (zero after normalization).
/// MASKED (the default): their tokens are masked out of routing and take no
/// expert capacity, so a real image's result does not depend on them, and
/// the statistics do not count them. ZEROS: they are routed like real
/// images and counted, as in the original V-MoE evaluation (for
/// bit-for-bit comparisons with it).
#define VMOE_PADDING_MASKED 0
#define VMOE_PADDING_ZEROS 1

/// Sets the padding mode of `model` (VMOE_PADDING_MASKED or
/// VMOE_PADDING_ZEROS); other values fail.
VMOE_RUNTIME_API int vmoe_model_set_padding(vmoe_model *model, int padding,
                                            char *error, size_t error_size);

/// The padding mode of `model`; -1 for NULL.
VMOE_RUNTIME_API int vmoe_model_get_padding(const vmoe_model *model);

/// Sets the number of OpenMP threads of the forward pass (process-wide).
/// Fails for `threads` < 1 or above 1024 (docs/Limits.md).
VMOE_RUNTIME_API int vmoe_model_set_threads(int threads);

/// The number of OpenMP threads the next forward pass will use.
VMOE_RUNTIME_API int vmoe_model_get_threads(void);

/// Reads the PNG or JPEG file `path` (of any size up to 65535 pixels a side
/// and 2^27 pixels) as an image of the model (docs/ModelFormat.md §4) into
/// `pixels`, which must hold channels * height * width floats:
/// channel-major, rows top to bottom. The model's preprocessing runs on it
/// (its `preprocess` ops, by default a bilinear resize to the model's
/// size), then each value p (0..255) becomes ((float)p / 255 - mean[c]) /
/// std[c] (or value_range's a + p / 255 * (b - a)). PNG: 8- or 16-bit;
/// gray, gray+alpha, RGB, RGBA or palette; JPEG: gray or color. Alpha is
/// dropped; gray is replicated for a 3-channel model; a 1-channel model
/// takes gray images only.
VMOE_RUNTIME_API int vmoe_load_image(const vmoe_model *model, const char *path,
                                     float *pixels, char *error,
                                     size_t error_size);

/// The same as vmoe_load_image() (its former name; it reads JPEG too).
VMOE_RUNTIME_API int vmoe_load_png(const vmoe_model *model, const char *path,
                                   float *pixels, char *error,
                                   size_t error_size);

/// Runs the model on `n` >= 0 normalized images (`images`: n * channels *
/// height * width floats, as vmoe_load_image() writes them) at the capacity
/// ratio `capacity_ratio`, in ceil(n / batch) batches, the last one padded
/// with all-zero images that take part in routing as the padding mode says
/// (vmoe_model_set_padding()). Writes n * classes logits to `logits`.
/// When `stats` is not NULL, overwrites its vmoe_model_stats_size() entries
/// with the routing statistics summed over all batches of this call
/// (padding images only with VMOE_PADDING_ZEROS): per MoE layer, the kept
/// choices of each expert, then the dropped choices.
VMOE_RUNTIME_API int vmoe_model_forward(vmoe_model *model, const float *images,
                                        int64_t n, double capacity_ratio,
                                        float *logits, int32_t *stats,
                                        char *error, size_t error_size);

/// 1 for a training graph (vmoe-compile --training: noisy gating, auxiliary
/// losses), 0 for an inference graph or NULL.
VMOE_RUNTIME_API int vmoe_model_is_training(const vmoe_model *model);

/// A training graph: writes 3 * L doubles to `losses`, per MoE layer the
/// importance, load and GShard losses of the last vmoe_model_forward(),
/// each the mean over all routing groups of all its batches (the padding
/// images of the last batch take part in them). Returns the count written,
/// or 0 for an inference graph, NULL, or before any forward call.
VMOE_RUNTIME_API int64_t vmoe_model_losses(const vmoe_model *model,
                                           double *losses);

#ifdef __cplusplus
}
#endif

#endif /* VMOE_RUNTIME_VMOE_RUNTIME_H */
