/* model_weights: the model `tscope run --load W` builds, and the loading.
 *
 * The sizes come from W's tensors (ts_weights_infer): d_model, ffn, layers,
 * decoder layers, final norms, token table and vocabulary, output head (or
 * none), learned positions. What shapes cannot tell (heads, norm placement,
 * activation, positions, eps) comes from W's __metadata__, else from a
 * preset or the flags; a flag or preset that disagrees with the file is an
 * error naming both values, and a setting nobody gives is an error naming
 * the flags to add. The input (batch, lengths, text) comes from the preset
 * (tiny's when none is given) and the flags, as without --load.
 */
#ifndef TSCOPE_CMD_MODEL_WEIGHTS_H
#define TSCOPE_CMD_MODEL_WEIGHTS_H

#include "model_flags.h"
#include "tscope/io.h"

/* The config for w (read from the file at path) with the preset and flags of
 * mf checked against it and applied. The input sizes are left to
 * model_flags_resolve_given. */
ts_status model_weights_config(const model_flags *mf, const ts_weights_info *w, const char *path,
                               ts_model_config *cfg);

/* One line of what was read: "# W.safetensors: nn.TransformerEncoder's state_dict, 24 tensors;
 * names recognised as the Annotated Transformer's code". */
void model_weights_describe(const ts_weights_info *w, const char *path, char *buf, size_t size);

/* Where each setting of cfg came from, for the settings line: "heads from --heads, norm from the
 * Annotated Transformer's code, eps default: 1e-05 (PyTorch's), norm formula default: standard,
 * mask fill from --mask-fill". A flag over a recognised code's setting is named. */
void model_weights_sources(const ts_weights_info *w, const model_flags *mf, const ts_model_config *cfg, char *buf,
                           size_t size);

#endif
